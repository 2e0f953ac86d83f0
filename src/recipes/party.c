/*
 * party.c — see party.h.  Steps: CREATE (the member node; NONODE: ENSURE the path, then
 * CREATE again), DELETE.  Only the result of the op the party waits for (op_id) counts.
 */
#include "party.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/acl.h"
#include "../core/ops.h"
#include "common.h"


typedef enum { STEP_NONE, STEP_CREATE, STEP_ENSURE, STEP_DELETE } party_step;

struct zkl_party {
    zkl_session *s;
    zkl_route route;
    uint64_t id;
    char *path, *node, *create_path, *data;
    int data_len;
    struct ACL_vector acl;
    zkl_party_phase phase;
    party_step step;
    int rc, deleted, ensure_rounds;
    int was_joined; /* a leave under way started from JOINED */
    int parked, orphaned, listening;
    uint64_t op_id;
    long inflight;
    void (*observer)(void *ctx); /* zkl_party_observe */
    void *observer_ctx;
};

static void on_state(zkl_session *s, zkl_state state, void *ctx);

static void settle(zkl_party *p, zkl_party_phase phase, int rc)
{
    p->phase = phase;
    p->rc = rc;
    p->step = STEP_NONE;
    p->parked = 0;
    p->op_id = 0;
}

static void notify_lost(zkl_party *p)
{
    if (!p->orphaned && p->s)
        zkl_session_notify(p->s, p->id, ZKL_PARTY_NOTIFY_LOST);
}

static uint64_t counted(zkl_party *p, uint64_t id)
{
    if (id)
        p->inflight++;
    return id;
}

static uint64_t submit(zkl_party *p)
{
    switch (p->step) {
    case STEP_CREATE:
        return counted(p, zkl_op_create(p->s, p->create_path, p->data, p->data_len, &p->acl,
                                        ZOO_EPHEMERAL, 0, &p->route));
    case STEP_DELETE:
        return counted(p, zkl_op_delete(p->s, p->create_path, -1, &p->route));
    case STEP_ENSURE: {
        uint64_t id;
        zkl_create_path(p->s, p->path, &p->acl, &p->route, &p->inflight, &id);
        return id;
    }
    default:
        return 0;
    }
}

static void go(zkl_party *p, party_step step)
{
    p->step = step;
    p->op_id = 0;
    p->parked = 0;
    if (zkl_session_state(p->s) != ZKL_CONNECTED) {
        p->parked = 1;
        return;
    }
    p->op_id = submit(p);
    if (p->op_id == 0)
        settle(p, p->phase == ZKL_PARTY_LEAVING && p->was_joined ? ZKL_PARTY_JOINED
                                                                  : ZKL_PARTY_IDLE,
               ZSYSTEMERROR);
}

static void on_op(zkl_party *p, const zkl_event *ev)
{
    switch (zkl_rc_triage(ev->rc)) {
    case ZKL_RC_CLOSED:
        settle(p, ZKL_PARTY_IDLE, p->phase == ZKL_PARTY_JOINING ? ev->rc : ZOK);
        return;
    case ZKL_RC_LOST:
        p->parked = 1; /* LOST follows and decides */
        return;
    case ZKL_RC_RETRY:
        go(p, p->step == STEP_ENSURE ? STEP_CREATE : p->step);
        return;
    case ZKL_RC_ANSWER:
        break;
    }
    switch (p->step) {
    case STEP_ENSURE:
        go(p, STEP_CREATE);
        break;
    case STEP_CREATE:
        if (ev->rc == ZOK || ev->rc == ZNODEEXISTS) {
            settle(p, ZKL_PARTY_JOINED, ZOK);
            if (p->orphaned) /* nobody wants it any more: leave */
                zkl_party_leave(p);
        } else if (ev->rc == ZNONODE && ++p->ensure_rounds <= ZKL_RETRY_LIMIT) {
            go(p, STEP_ENSURE);
        } else {
            settle(p, ZKL_PARTY_IDLE, ev->rc);
        }
        break;
    case STEP_DELETE:
        if (ev->rc == ZOK || ev->rc == ZNONODE) {
            p->deleted = ev->rc == ZOK;
            settle(p, ZKL_PARTY_IDLE, ZOK);
        } else {
            settle(p, p->was_joined ? ZKL_PARTY_JOINED : ZKL_PARTY_IDLE, ev->rc);
        }
        break;
    default:
        break;
    }
}

static void destroy(zkl_party *p)
{
    if (p->s && p->listening)
        zkl_session_remove_state_listener(p->s, on_state, p);
    free(p->path);
    free(p->node);
    free(p->create_path);
    free(p->data);
    zkl_acl_free(&p->acl);
    free(p);
}

static void maybe_destroy(zkl_party *p)
{
    if (!p->orphaned || p->inflight > 0)
        return;
    if (p->s && (p->phase == ZKL_PARTY_JOINING || p->phase == ZKL_PARTY_LEAVING))
        return; /* parked: waits for CONNECTED or the session's end */
    destroy(p);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_party *p = ctx;
    if (ev->kind == ZKL_EV_OP) {
        p->inflight--;
        if (ev->id == p->op_id && p->s) {
            p->op_id = 0;
            on_op(p, ev);
        }
    }
    if (p->orphaned) {
        maybe_destroy(p);
        return;
    }
    if (p->observer)
        p->observer(p->observer_ctx); /* last: it may free the party */
}

static void on_state(zkl_session *s, zkl_state state, void *ctx)
{
    zkl_party *p = ctx;
    if (state == ZKL_CONNECTED) {
        if (p->parked)
            go(p, p->step);
    } else if (state == ZKL_LOST) {
        int closed_rc = zkl_session_is_stopped(s)                                 ? ZCLOSING
                        : zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED ? ZAUTHFAILED
                                                                            : ZOK;
        int closed = closed_rc != ZOK;
        p->op_id = 0;
        switch (p->phase) {
        case ZKL_PARTY_JOINED:
            settle(p, ZKL_PARTY_IDLE, ZOK);
            notify_lost(p);
            break;
        case ZKL_PARTY_JOINING:
            if (closed || p->orphaned) {
                settle(p, ZKL_PARTY_IDLE, closed_rc);
            } else {
                p->step = STEP_CREATE;
                p->parked = 1; /* joins the new session once CONNECTED */
            }
            break;
        case ZKL_PARTY_LEAVING:
            p->deleted = 0; /* the node went with the session */
            settle(p, ZKL_PARTY_IDLE, ZOK);
            break;
        default:
            break;
        }
    }
    maybe_destroy(p);
}

zkl_party *zkl_party_new(zkl_session *s, const char *path, const char *data, int len,
                         zkl_party_kind kind, const struct ACL_vector *acl)
{
    zkl_party *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->s = s;
    p->route.fn = on_route;
    p->route.ctx = p;
    p->id = zkl_session_new_target(s);
    char uuid[ZKL_UUID_HEX_LEN + 1];
    p->path = strdup(path);
    p->data = malloc(len > 0 ? (size_t)len : 1);
    p->node = malloc(sizeof uuid + 10 + (size_t)(len > 0 ? len : 0));
    errno = 0;
    if (!p->path || !p->data || !p->node || zkl_uuid4_hex(uuid) != 0 ||
        zkl_acl_copy(&p->acl, acl ? acl : &ZOO_OPEN_ACL_UNSAFE) != 0)
        goto fail;
    if (len > 0)
        memcpy(p->data, data, (size_t)len);
    p->data_len = len > 0 ? len : 0;
    if (kind == ZKL_PARTY_SHALLOW)
        sprintf(p->node, "%s-%.*s", uuid, p->data_len, p->data);
    else
        sprintf(p->node, "%s__party__", uuid);
    p->create_path = zkl_join_path(path, p->node);
    if (!p->create_path || zkl_session_add_state_listener(s, on_state, p) != 0)
        goto fail;
    p->listening = 1;
    return p;
fail:
    if (!errno)
        errno = ENOMEM;
    p->s = NULL;
    destroy(p);
    return NULL;
}

void zkl_party_free(zkl_party *p)
{
    if (!p)
        return;
    p->orphaned = 1;
    maybe_destroy(p);
}

void zkl_party_forget_session(zkl_party *p)
{
    p->s = NULL;
    p->inflight = 0;
    settle(p, ZKL_PARTY_IDLE, p->phase == ZKL_PARTY_JOINING ? ZCLOSING : ZOK);
}

int zkl_party_join(zkl_party *p)
{
    if (!p->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (p->phase == ZKL_PARTY_JOINED) {
        errno = EISCONN;
        return -1;
    }
    if (p->phase != ZKL_PARTY_IDLE) {
        errno = EALREADY;
        return -1;
    }
    p->phase = ZKL_PARTY_JOINING;
    p->rc = ZOK;
    p->ensure_rounds = 0;
    go(p, STEP_CREATE);
    return 0;
}

int zkl_party_leave(zkl_party *p)
{
    if (!p->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (p->phase == ZKL_PARTY_JOINING || p->phase == ZKL_PARTY_LEAVING) {
        errno = EALREADY;
        return -1;
    }
    p->was_joined = p->phase == ZKL_PARTY_JOINED;
    p->phase = ZKL_PARTY_LEAVING; /* also when not joined: kazoo deletes anyway */
    p->rc = ZOK;
    p->deleted = 0;
    go(p, STEP_DELETE);
    return 0;
}

void zkl_party_observe(zkl_party *p, void (*fn)(void *ctx), void *ctx)
{
    p->observer = fn;
    p->observer_ctx = ctx;
}

zkl_party_phase zkl_party_phase_of(const zkl_party *p) { return p->phase; }
int zkl_party_rc(const zkl_party *p) { return p->rc; }
int zkl_party_deleted(const zkl_party *p) { return p->deleted; }
const char *zkl_party_node(const zkl_party *p) { return p->node; }
uint64_t zkl_party_id(const zkl_party *p) { return p->id; }
long zkl_party_inflight(const zkl_party *p) { return p->inflight; }
