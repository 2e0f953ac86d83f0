/*
 * kerberos.h — whose Kerberos credentials a SASL GSSAPI client of this process will present.
 *
 * Cyrus SASL's GSSAPI asks MIT Kerberos for the process's default credentials (it cannot be
 * handed others): the principal of the default ticket cache (KRB5CCNAME) when it holds one,
 * else the first principal of the client keytab (KRB5_CLIENT_KTNAME), from which MIT gets
 * tickets itself.  zkl_kerberos_default_principal() looks them up the same way, so that a
 * client that names the principal it means (kazoo's sasl_options principal) is refused before
 * anything is sent when the credentials are someone else's or missing.
 *
 * Only with ZKL_HAVE_KRB5 (the project's source build links libkrb5); without it the lookup
 * fails, saying so.
 */
#ifndef ZKL_KERBEROS_H
#define ZKL_KERBEROS_H

#include <stddef.h>

/* The default credentials' principal ("bob@EXAMPLE.COM") and where it was found ("the ticket
 * cache FILE:/tmp/krb5cc_0", "the client keytab FILE:/etc/bob.keytab") into name and where;
 * 0, or -1 with the reason in why (no credentials, no Kerberos in this build). */
int zkl_kerberos_default_principal(char *name, size_t name_size, char *where,
                                   size_t where_size, char *why, size_t why_size);

#endif
