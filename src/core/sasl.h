/*
 * sasl.h — a session's SASL credentials, as Cyrus SASL asks the ZooKeeper C client for them
 * (zookeeper_init_sasl).
 *
 * The C client keeps a pointer to the callbacks and calls them on its I/O thread at every
 * connection (a SASL exchange follows each connect request), so they live as long as the
 * session: user and password from memory, never a prompt on the terminal (the C client's
 * zoo_sasl_make_basic_callbacks would prompt, or read a file).  Cyrus SASL is initialised
 * once per process.
 *
 * Without ZKL_HAVE_SASL (a client library without SASL) zkl_sasl_new() fails, saying so.
 */
#ifndef ZKL_SASL_H
#define ZKL_SASL_H

#include <stddef.h>

typedef struct zkl_sasl zkl_sasl;

/* Credentials for mechanism (e.g. "DIGEST-MD5") with service, host (the server's SASL name,
 * NULL: the peer's address), user and password; NULL with the reason in why when the client
 * library has no SASL, Cyrus SASL cannot start, or out of memory. */
zkl_sasl *zkl_sasl_new(const char *mechanism, const char *service, const char *host,
                       const char *user, const char *password, char *why, size_t size);
/* zoo_sasl_params_t * for zookeeper_init_sasl (void *: zookeeper.h names the type only
 * with HAVE_CYRUS_SASL_H) */
void *zkl_sasl_params(zkl_sasl *sasl);
/* The mechanism and user, for messages. */
const char *zkl_sasl_mechanism(const zkl_sasl *sasl);
const char *zkl_sasl_user(const zkl_sasl *sasl);
/* The service name ("zookeeper"), or NULL without SASL in this build. */
const char *zkl_sasl_service(const zkl_sasl *sasl);
/* After the last handle using it is closed; the password is wiped. */
void zkl_sasl_free(zkl_sasl *sasl);

#endif
