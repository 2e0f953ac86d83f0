/*
 * kerberos_tickets.c — see kerberos_tickets.h.
 */
#include "kerberos_tickets.h"

#include <stdlib.h>

#ifdef ZKL_HAVE_KRB5

#include <gssapi/gssapi.h>
#include <gssapi/gssapi_krb5.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"

enum { KDC_SILENT_S = 5 }; /* a fetch that failed after this long met a KDC that never answered */

struct zkl_kerberos_tickets {
    pthread_mutex_t lock;
    int done;
    int released;
    char *service;
    char *hosts;
};

static void free_tickets(zkl_kerberos_tickets *t)
{
    pthread_mutex_destroy(&t->lock);
    free(t->service);
    free(t->hosts);
    free(t);
}

/* The numeric address the C client will name the server by (zk_sasl.c: NI_NUMERICHOST of the
 * connected address; here the first address of host), or -1. */
static int numeric_host(const char *host, char *out, size_t size)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return -1;
    int rc = getnameinfo(res->ai_addr, res->ai_addrlen, out, (socklen_t)size, NULL, 0,
                         NI_NUMERICHOST) == 0 ? 0 : -1;
    freeaddrinfo(res);
    return rc;
}

/* One GSSAPI first step towards service@host, as Cyrus SASL's would be; the context is
 * dropped, the tickets it took stay in the cache.  0, or -1 when no ticket was had. */
static int fetch_one(const char *service, const char *host)
{
    char name_text[NI_MAXHOST + 256];
    int n = snprintf(name_text, sizeof name_text, "%s@%s", service, host);
    if (n < 0 || (size_t)n >= sizeof name_text)
        return -1; /* a service name too long for any principal: the SASL step says so */
    gss_buffer_desc name_buf = { strlen(name_text), name_text };
    OM_uint32 minor = 0;
    gss_name_t name = GSS_C_NO_NAME;
    if (gss_import_name(&minor, &name_buf, GSS_C_NT_HOSTBASED_SERVICE, &name) != GSS_S_COMPLETE)
        return -1;
    gss_ctx_id_t ctx = GSS_C_NO_CONTEXT;
    gss_buffer_desc token = GSS_C_EMPTY_BUFFER;
    OM_uint32 major = gss_init_sec_context(&minor, GSS_C_NO_CREDENTIAL, &ctx, name,
                                           (gss_OID)gss_mech_krb5, GSS_C_MUTUAL_FLAG, 0,
                                           GSS_C_NO_CHANNEL_BINDINGS, GSS_C_NO_BUFFER, NULL,
                                           &token, NULL, NULL);
    gss_release_buffer(&minor, &token);
    if (ctx != GSS_C_NO_CONTEXT)
        gss_delete_sec_context(&minor, &ctx, GSS_C_NO_BUFFER);
    gss_release_name(&minor, &name);
    return GSS_ERROR(major) ? -1 : 0;
}

static int is_released(zkl_kerberos_tickets *t)
{
    pthread_mutex_lock(&t->lock);
    int gone = t->released;
    pthread_mutex_unlock(&t->lock);
    return gone;
}

/* fetch_one, again while it fails after KDC_SILENT_S or more: the KDC accepted and never
 * answered (MIT gave up waiting).  The SASL step would then wait for it as long in the I/O
 * thread, where nothing ends the wait, so the fetch asks again until the KDC answers or the
 * session stops waiting.  A fetch that fails sooner (no KDC listens, a principal unknown)
 * leaves it to the SASL step to fail with MIT's words. */
static void fetch_until_answered(zkl_kerberos_tickets *t, const char *host)
{
    for (;;) {
        double started = zkl_monotonic_seconds();
        if (fetch_one(t->service, host) == 0 || zkl_monotonic_seconds() - started < KDC_SILENT_S ||
            is_released(t))
            return;
    }
}

static void *fetch_all(void *arg)
{
    zkl_kerberos_tickets *t = arg;
    char *save = NULL;
    for (char *item = strtok_r(t->hosts, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (is_released(t))
            break; /* nobody waits any more */
        /* "host:port", "[v6]:port", a chroot after the last one */
        char *slash = strchr(item, '/');
        if (slash)
            *slash = '\0';
        char *host = item;
        char *end = NULL;
        if (host[0] == '[' && (end = strchr(host, ']')) != NULL) {
            host++;
            *end = '\0';
        } else if ((end = strrchr(host, ':')) != NULL && strchr(host, ':') == end) {
            *end = '\0';
        }
        char numeric[NI_MAXHOST];
        if (host[0] && numeric_host(host, numeric, sizeof numeric) == 0)
            fetch_until_answered(t, numeric);
    }
    pthread_mutex_lock(&t->lock);
    t->done = 1;
    int released = t->released;
    pthread_mutex_unlock(&t->lock);
    if (released)
        free_tickets(t);
    return NULL;
}

zkl_kerberos_tickets *zkl_kerberos_tickets_start(const char *service, const char *hosts)
{
    zkl_kerberos_tickets *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->service = strdup(service);
    t->hosts = strdup(hosts);
    if (!t->service || !t->hosts || pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t->service);
        free(t->hosts);
        free(t);
        return NULL;
    }
    pthread_attr_t attr;
    pthread_t thread;
    sigset_t all, old;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        sigfillset(&all); /* as the library's threads: every signal is the owner's */
        pthread_sigmask(SIG_BLOCK, &all, &old);
        rc = pthread_create(&thread, &attr, fetch_all, t);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    if (rc != 0) {
        free_tickets(t);
        return NULL;
    }
    return t;
}

int zkl_kerberos_tickets_done(zkl_kerberos_tickets *t)
{
    pthread_mutex_lock(&t->lock);
    int done = t->done;
    pthread_mutex_unlock(&t->lock);
    return done;
}

void zkl_kerberos_tickets_release(zkl_kerberos_tickets *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->lock);
    t->released = 1;
    int done = t->done;
    pthread_mutex_unlock(&t->lock);
    if (done)
        free_tickets(t);
}

#else

zkl_kerberos_tickets *zkl_kerberos_tickets_start(const char *service, const char *hosts)
{
    (void)service;
    (void)hosts;
    return NULL;
}

int zkl_kerberos_tickets_done(zkl_kerberos_tickets *t)
{
    (void)t;
    return 1;
}

void zkl_kerberos_tickets_release(zkl_kerberos_tickets *t)
{
    (void)t;
}

#endif
