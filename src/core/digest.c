/*
 * digest.c — see digest.h.  SHA-1 as in FIPS 180-1, small rather than fast: it runs once per
 * ACL made, never per operation.
 */
#include "digest.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rotl(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const unsigned char *p)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5A827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ED9EBA1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8F1BBCDC;
        } else {
            f = b ^ c ^ d;
            k = 0xCA62C1D6;
        }
        uint32_t t = rotl(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rotl(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void zkl_sha1(const unsigned char *data, size_t len, unsigned char digest[20])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    size_t full = len / 64 * 64;
    for (size_t i = 0; i < full; i += 64)
        sha1_block(h, data + i);
    unsigned char tail[128] = {0};
    size_t rest = len - full;
    memcpy(tail, data + full, rest);
    tail[rest] = 0x80;
    size_t tail_len = rest + 9 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[tail_len - 1 - i] = (unsigned char)(bits >> (8 * i));
    for (size_t i = 0; i < tail_len; i += 64)
        sha1_block(h, tail + i);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++)
            digest[4 * i + j] = (unsigned char)(h[i] >> (24 - 8 * j));
}

static size_t base64_encode(const unsigned char *in, size_t n, char *out)
{
    static const char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = table[(v >> 18) & 63];
        out[o++] = table[(v >> 12) & 63];
        out[o++] = i + 1 < n ? table[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? table[v & 63] : '=';
    }
    return o;
}

int zkl_digest_credential(const char *user, size_t user_len, const char *password,
                          size_t password_len, char *out, size_t out_size)
{
    size_t plain_len = user_len + 1 + password_len;
    if (out_size < user_len + 1 + 28 + 1)
        return -1;
    unsigned char *plain = malloc(plain_len);
    if (!plain)
        return -1;
    memcpy(plain, user, user_len);
    plain[user_len] = ':';
    memcpy(plain + user_len + 1, password, password_len);
    unsigned char digest[20];
    zkl_sha1(plain, plain_len, digest);
    free(plain);
    memcpy(out, user, user_len);
    out[user_len] = ':';
    size_t n = base64_encode(digest, sizeof digest, out + user_len + 1);
    out[user_len + 1 + n] = '\0';
    return (int)(user_len + 1 + n);
}
