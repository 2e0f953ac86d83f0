/*
 * digest.h — ZooKeeper's digest credential: base64(sha1("user:password")).
 * The server compares it with the id of a "digest" ACL.
 */
#ifndef ZKL_DIGEST_H
#define ZKL_DIGEST_H

#include <stddef.h>

/* Writes "user:base64(sha1(user:password))" to out; returns the length, or -1 if too small. */
int zkl_digest_credential(const char *user, size_t user_len, const char *password,
                          size_t password_len, char *out, size_t out_size);

void zkl_sha1(const unsigned char *data, size_t len, unsigned char digest[20]);

#endif
