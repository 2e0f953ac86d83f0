/*
 * tls.c — see tls.h.  The same OpenSSL calls libzookeeper 3.8 makes in init_ssl_for_socket,
 * except for the key's password: a callback that hands over the given password (or none)
 * instead of OpenSSL's default, which would prompt on the terminal.
 */
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifdef ZKL_HAVE_TLS

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* OpenSSL's reason for the last error queued on this thread, and the queue emptied; returns
 * that error's reason code (0: none). */
static int last_reason(char *buf, size_t size)
{
    unsigned long e, last = 0;
    while ((e = ERR_get_error()) != 0)
        last = e;
    const char *reason = last ? ERR_reason_error_string(last) : NULL;
    snprintf(buf, size, "%s", reason ? reason : "no reason given");
    return last ? ERR_GET_REASON(last) : 0;
}

static int readable(const char *what, const char *file, char *why, size_t size)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        snprintf(why, size, "%s %s cannot be read: %s", what, file, strerror(errno));
        return 0;
    }
    fclose(f);
    return 1;
}

/* The password callback: the password given, or none (OpenSSL's default would prompt). */
static int give_password(char *buf, int size, int rwflag, void *userdata)
{
    (void)rwflag;
    const char *password = userdata;
    if (!password)
        return 0;
    size_t len = strlen(password);
    if (len > (size_t)size)
        return 0;
    memcpy(buf, password, len);
    return (int)len;
}

int zkl_tls_check(const char *ca, const char *cert, const char *key, const char *password,
                  char *why, size_t size)
{
    if (!readable("ca", ca, why, size) || !readable("certfile", cert, why, size) ||
        !readable("keyfile", key, why, size))
        return -1;
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        snprintf(why, size, "out of memory");
        return -1;
    }
    char reason[256];
    int rc = -1;
    if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
        last_reason(reason, sizeof reason);
        snprintf(why, size, "ca %s holds no CA certificate OpenSSL can load (%s)", ca, reason);
    } else if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        last_reason(reason, sizeof reason);
        snprintf(why, size, "certfile %s holds no PEM certificate OpenSSL can load (%s)", cert,
                 reason);
    } else {
        SSL_CTX_set_default_passwd_cb(ctx, give_password);
        SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)password);
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
            /* the key loaded but is another certificate's: checked as it is loaded */
            if (last_reason(reason, sizeof reason) == X509_R_KEY_VALUES_MISMATCH)
                snprintf(why, size, "keyfile %s is not the key of certfile %s (%s)", key, cert,
                         reason);
            else
                snprintf(why, size, "keyfile %s cannot be loaded (%s): %s", key, reason,
                         password ? "wrong keyfile_password, or not a PEM private key"
                                  : "an encrypted key needs keyfile_password");
        } else if (SSL_CTX_check_private_key(ctx) != 1) {
            last_reason(reason, sizeof reason);
            snprintf(why, size, "keyfile %s is not the key of certfile %s (%s)", key, cert,
                     reason);
        } else {
            rc = 0;
        }
    }
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return rc;
}

int zkl_tls_thread_failure(char *buf, size_t size)
{
    if (ERR_peek_last_error() == 0)
        return -1;
    last_reason(buf, size);
    return 0;
}

#else

int zkl_tls_check(const char *ca, const char *cert, const char *key, const char *password,
                  char *why, size_t size)
{
    (void)ca;
    (void)cert;
    (void)key;
    (void)password;
    snprintf(why, size, "this ZooKeeper C client has no TLS");
    return -1;
}

int zkl_tls_thread_failure(char *buf, size_t size)
{
    (void)buf;
    (void)size;
    return -1;
}

#endif
