/*
 * kerberos.c — see kerberos.h.
 */
#include "kerberos.h"

#include <stdio.h>

#ifdef ZKL_HAVE_KRB5

#include <krb5.h>

/* The principal of the default ticket cache, or -1 when it has none (no cache, or empty). */
static int cache_principal(krb5_context ctx, char *name, size_t name_size, char *where,
                           size_t where_size)
{
    krb5_ccache cache = NULL;
    krb5_principal principal = NULL;
    char *text = NULL;
    int rc = -1;
    if (krb5_cc_default(ctx, &cache) != 0)
        return -1;
    if (krb5_cc_get_principal(ctx, cache, &principal) == 0 &&
        krb5_unparse_name(ctx, principal, &text) == 0) {
        char *full = NULL;
        if (krb5_cc_get_full_name(ctx, cache, &full) == 0) {
            snprintf(name, name_size, "%s", text);
            snprintf(where, where_size, "the ticket cache %s", full);
            krb5_free_string(ctx, full);
            rc = 0;
        }
    }
    krb5_free_unparsed_name(ctx, text);
    krb5_free_principal(ctx, principal);
    krb5_cc_close(ctx, cache);
    return rc;
}

/* The first principal of the client keytab, or -1 (no keytab, or empty). */
static int keytab_principal(krb5_context ctx, char *name, size_t name_size, char *where,
                            size_t where_size, char *keytab_name, size_t keytab_size)
{
    krb5_keytab keytab = NULL;
    krb5_kt_cursor cursor;
    krb5_keytab_entry entry;
    int rc = -1;
    keytab_name[0] = '\0';
    if (krb5_kt_client_default(ctx, &keytab) != 0)
        return -1;
    if (krb5_kt_get_name(ctx, keytab, keytab_name, (unsigned)keytab_size) != 0)
        keytab_name[0] = '\0';
    if (krb5_kt_start_seq_get(ctx, keytab, &cursor) == 0) {
        if (krb5_kt_next_entry(ctx, keytab, &entry, &cursor) == 0) {
            char *text = NULL;
            if (krb5_unparse_name(ctx, entry.principal, &text) == 0) {
                snprintf(name, name_size, "%s", text);
                snprintf(where, where_size, "the client keytab %s", keytab_name);
                krb5_free_unparsed_name(ctx, text);
                rc = 0;
            }
            krb5_free_keytab_entry_contents(ctx, &entry);
        }
        krb5_kt_end_seq_get(ctx, keytab, &cursor);
    }
    krb5_kt_close(ctx, keytab);
    return rc;
}

int zkl_kerberos_default_principal(char *name, size_t name_size, char *where,
                                   size_t where_size, char *why, size_t why_size)
{
    krb5_context ctx = NULL;
    krb5_error_code err = krb5_init_context(&ctx);
    if (err != 0) {
        snprintf(why, why_size, "MIT Kerberos could not start (KRB5_CONFIG?): error %ld",
                 (long)err);
        return -1;
    }
    int rc = cache_principal(ctx, name, name_size, where, where_size);
    if (rc != 0) {
        char keytab[256];
        rc = keytab_principal(ctx, name, name_size, where, where_size, keytab, sizeof keytab);
        if (rc != 0) {
            const char *cache = krb5_cc_default_name(ctx);
            snprintf(why, why_size, "no Kerberos credentials: the ticket cache %s holds none "
                     "(kinit?) and the client keytab %s has no key (KRB5_CLIENT_KTNAME?)",
                     cache ? cache : "(none)", keytab[0] ? keytab : "(none)");
        }
    }
    krb5_free_context(ctx);
    return rc;
}

#else

int zkl_kerberos_default_principal(char *name, size_t name_size, char *where,
                                   size_t where_size, char *why, size_t why_size)
{
    (void)name;
    (void)name_size;
    (void)where;
    (void)where_size;
    snprintf(why, why_size, "this zklua is built without MIT Kerberos (libkrb5)");
    return -1;
}

#endif
