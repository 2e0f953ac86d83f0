/*
 * sasl.c — see sasl.h.
 */
#include "sasl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ZKL_HAVE_SASL

#include <zookeeper/zookeeper.h>

struct zkl_sasl {
    char *mechanism;
    char *service;
    char *host;
    char *user;
    sasl_secret_t *secret;
    sasl_callback_t callbacks[5];
    zoo_sasl_params_t params;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_result = SASL_OK;

static void init_cyrus(void)
{
    init_result = sasl_client_init(NULL);
}

/* SASL_CB_USER, SASL_CB_AUTHNAME: the user */
static int give_user(void *context, int id, const char **result, unsigned *len)
{
    const zkl_sasl *sasl = context;
    if (!result || (id != SASL_CB_USER && id != SASL_CB_AUTHNAME))
        return SASL_BADPARAM;
    *result = sasl->user;
    if (len)
        *len = (unsigned)strlen(sasl->user);
    return SASL_OK;
}

/* SASL_CB_PASS: the password (never a prompt) */
static int give_secret(sasl_conn_t *conn, void *context, int id, sasl_secret_t **secret)
{
    zkl_sasl *sasl = context;
    if (!conn || !secret || id != SASL_CB_PASS)
        return SASL_BADPARAM;
    *secret = sasl->secret;
    return SASL_OK;
}

/* SASL_CB_GETREALM: the realm the server offers first (DIGEST-MD5: "zk-sasl-md5") */
static int give_realm(void *context, int id, const char **realms, const char **result)
{
    (void)context;
    if (!result || id != SASL_CB_GETREALM)
        return SASL_BADPARAM;
    *result = realms && realms[0] ? realms[0] : "";
    return SASL_OK;
}

/* Cyrus SASL's callbacks are stored as int (*)(void); through void (*)(void), the type any
 * function pointer converts to and back from without a warning. */
typedef void (*any_fn)(void);
typedef int (*cb_fn)(void);

static char *copy(const char *text)
{
    return text ? strdup(text) : NULL;
}

zkl_sasl *zkl_sasl_new(const char *mechanism, const char *service, const char *host,
                       const char *user, const char *password, char *why, size_t size)
{
    pthread_once(&init_once, init_cyrus);
    if (init_result != SASL_OK) {
        snprintf(why, size, "Cyrus SASL could not start: %s",
                 sasl_errstring(init_result, NULL, NULL));
        return NULL;
    }
    zkl_sasl *sasl = calloc(1, sizeof *sasl);
    size_t plen = strlen(password);
    if (sasl) {
        sasl->mechanism = copy(mechanism);
        sasl->service = copy(service);
        sasl->host = copy(host);
        sasl->user = copy(user);
        sasl->secret = calloc(1, sizeof *sasl->secret + plen);
    }
    if (!sasl || !sasl->mechanism || !sasl->service || (host && !sasl->host) || !sasl->user ||
        !sasl->secret) {
        zkl_sasl_free(sasl);
        snprintf(why, size, "out of memory");
        return NULL;
    }
    sasl->secret->len = plen;
    memcpy(sasl->secret->data, password, plen + 1);
    sasl_callback_t *cb = sasl->callbacks;
    cb[0] = (sasl_callback_t){SASL_CB_USER, (cb_fn)(any_fn)give_user, sasl};
    cb[1] = (sasl_callback_t){SASL_CB_AUTHNAME, (cb_fn)(any_fn)give_user, sasl};
    cb[2] = (sasl_callback_t){SASL_CB_PASS, (cb_fn)(any_fn)give_secret, sasl};
    cb[3] = (sasl_callback_t){SASL_CB_GETREALM, (cb_fn)(any_fn)give_realm, sasl};
    cb[4] = (sasl_callback_t){SASL_CB_LIST_END, NULL, NULL};
    sasl->params.service = sasl->service;
    sasl->params.host = sasl->host;
    sasl->params.mechlist = sasl->mechanism;
    sasl->params.callbacks = sasl->callbacks;
    return sasl;
}

void *zkl_sasl_params(zkl_sasl *sasl)
{
    return &sasl->params;
}

const char *zkl_sasl_mechanism(const zkl_sasl *sasl)
{
    return sasl->mechanism;
}

const char *zkl_sasl_user(const zkl_sasl *sasl)
{
    return sasl->user;
}

const char *zkl_sasl_service(const zkl_sasl *sasl)
{
    return sasl->service;
}

void zkl_sasl_free(zkl_sasl *sasl)
{
    if (!sasl)
        return;
    if (sasl->secret) {
        volatile unsigned char *p = sasl->secret->data;
        for (size_t i = 0; i < sasl->secret->len; i++)
            p[i] = 0;
        free(sasl->secret);
    }
    free(sasl->mechanism);
    free(sasl->service);
    free(sasl->host);
    free(sasl->user);
    free(sasl);
}

#else

struct zkl_sasl {
    int unused;
};

zkl_sasl *zkl_sasl_new(const char *mechanism, const char *service, const char *host,
                       const char *user, const char *password, char *why, size_t size)
{
    (void)mechanism;
    (void)service;
    (void)host;
    (void)user;
    (void)password;
    snprintf(why, size, "this ZooKeeper C client has no SASL");
    return NULL;
}

void *zkl_sasl_params(zkl_sasl *sasl)
{
    (void)sasl;
    return NULL;
}

const char *zkl_sasl_mechanism(const zkl_sasl *sasl)
{
    (void)sasl;
    return "";
}

const char *zkl_sasl_user(const zkl_sasl *sasl)
{
    (void)sasl;
    return "";
}

const char *zkl_sasl_service(const zkl_sasl *sasl)
{
    (void)sasl;
    return NULL;
}

void zkl_sasl_free(zkl_sasl *sasl)
{
    (void)sasl;
}

#endif
