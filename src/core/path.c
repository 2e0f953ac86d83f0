/*
 * path.c — see path.h.
 */
#include "path.h"

#include <stdint.h>

/* Length of the UTF-8 sequence at s (at most n bytes) and its code point, or 0 if invalid. */
static size_t decode_utf8(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t len = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    uint32_t c = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    static const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < smallest[len] || c > 0x10FFFF)
        return 0; /* overlong or out of range */
    *cp = c;
    return len;
}

/* The server checks UTF-16 code units: a character above U+FFFF is a surrogate pair there,
 * inside the range it forbids. */
static int forbidden_code_point(uint32_t c)
{
    return c <= 0x1F || (c >= 0x7F && c <= 0x9F) || (c >= 0xD800 && c <= 0xF8FF) ||
           c >= 0xFFF0;
}

/* The node name that ends just before position end and started at start. */
static const char *name_problem(const char *path, size_t start, size_t end)
{
    size_t n = end - start;
    if (n == 0)
        return "has an empty node name (two '/' in a row)";
    if (n == 1 && path[start] == '.')
        return "is relative (node name '.')";
    if (n == 2 && path[start] == '.' && path[start + 1] == '.')
        return "is relative (node name '..')";
    return NULL;
}

const char *zkl_path_problem(const char *path, size_t len, int sequential)
{
    if (len == 0)
        return "is empty";
    if (path[0] != '/')
        return "must start with '/'";
    if (len == 1)
        return NULL;
    if (len > ZKL_MAX_PATH)
        return "is longer than a request to the server can carry (1 MiB)";
    if (path[len - 1] == '/' && !sequential)
        return "must not end with '/'";
    size_t name_start = 1;
    for (size_t i = 1; i < len;) {
        unsigned char byte = (unsigned char)path[i];
        if (byte > 0x1F && byte < 0x7F && byte != '/') { /* the common case: plain ASCII */
            i++;
            continue;
        }
        uint32_t c;
        size_t step = decode_utf8((const unsigned char *)path + i, len - i, &c);
        if (step == 0)
            return "is not valid UTF-8";
        if (forbidden_code_point(c))
            return c == 0 ? "contains a zero byte" : "contains a character ZooKeeper forbids";
        if (c == '/') {
            const char *problem = name_problem(path, name_start, i);
            if (problem)
                return problem;
            name_start = i + 1;
        }
        i += step;
    }
    if (name_start < len)
        return name_problem(path, name_start, len);
    return NULL;
}
