/*
 * tls.h — a session's TLS files, checked as libzookeeper will read them, before anything is
 * sent.
 *
 * libzookeeper 3.8 (zookeeper_init_ssl) takes its TLS settings as one string
 * "ca,cert,key[,password]" (split at commas: no part may hold one), loads the files anew at
 * every connection attempt, always verifies the server's certificate chain against ca (and
 * OpenSSL's default paths; no host name check), and always presents the client certificate.
 * A file it cannot read fails each attempt; an encrypted key without a password makes
 * OpenSSL's default callback prompt on the terminal.  zkl_tls_check() loads them the same
 * way first, so that such input is an error at once, with the reason.
 *
 * Without ZKL_HAVE_TLS (a client library without TLS) every function here fails with a
 * message saying so.
 */
#ifndef ZKL_TLS_H
#define ZKL_TLS_H

#include <stddef.h>

/* 0 when ca, cert and key load (key decrypted with password, NULL for none) and the key is
 * the certificate's; else -1 with the reason in why (size bytes). */
int zkl_tls_check(const char *ca, const char *cert, const char *key, const char *password,
                  char *why, size_t size);

/* On a library thread, right after the library logged a failed TLS handshake: OpenSSL's
 * reason for this thread's last failure ("certificate verify failed", ...) into buf, and the
 * thread's error queue emptied.  0, or -1 when OpenSSL recorded none. */
int zkl_tls_thread_failure(char *buf, size_t size);

#endif
