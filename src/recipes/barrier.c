/*
 * barrier.c — see barrier.h.  One operation at a time, as a sequence of steps; each step
 * submits one routed op (an exists with a watch for the WAIT_* steps' predecessors).  Only
 * the op named op_id and the watch named watch_id count; whatever else comes back is stale.
 */
#include "barrier.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/acl.h"
#include "../core/ops.h"
#include "common.h"


typedef enum {
    S_NONE,
    /* Barrier.wait */
    S_EXISTS_BARRIER, S_WAIT_BARRIER,
    /* enter */
    S_CREATE_OWN, S_ENSURE, S_EXISTS_READY, S_CHILDREN_ENTER, S_CREATE_READY, S_WAIT_READY,
    /* leave */
    S_DELETE_READY, S_CHILDREN_LEAVE, S_DELETE_OWN_LAST, S_DELETE_OWN, S_EXISTS_OTHER,
    S_WAIT_OTHER, S_DELETE_READY_LAST, /* Curator's: ready deleted once left */
    /* give_up during enter */
    S_CLEANUP
} barrier_step;

struct zkl_barrier {
    zkl_session *s;
    zkl_route route;
    uint64_t id;
    char *path, *node, *own_path, *ready_path, *data, *other;
    int data_len, num_clients;
    struct ACL_vector acl;
    zkl_barrier_op op;
    barrier_step step;
    zkl_barrier_outcome outcome;
    int rc, entered, ensure_rounds;
    int curator, own_gone; /* Curator's layout; leave: the own node deleted or found gone */
    int parked, orphaned, listening;
    uint64_t op_id, watch_id;
    long inflight;
};

static void on_state(zkl_session *s, zkl_state state, void *ctx);

static void finish(zkl_barrier *b, zkl_barrier_outcome outcome, int rc)
{
    b->outcome = outcome;
    b->rc = rc;
    b->step = S_NONE;
    b->parked = 0;
    b->op_id = b->watch_id = 0;
}

static uint64_t counted(zkl_barrier *b, uint64_t id, int watch)
{
    if (id)
        b->inflight += 1 + watch;
    return id;
}

static uint64_t submit(zkl_barrier *b)
{
    zkl_session *s = b->s;
    const zkl_route *r = &b->route;
    switch (b->step) {
    case S_EXISTS_BARRIER:
        return b->watch_id = counted(b, zkl_op_exists(s, b->path, 1, r), 1);
    case S_CREATE_OWN:
        return counted(b, zkl_op_create(s, b->own_path, b->data, b->data_len, &b->acl,
                                        ZOO_EPHEMERAL, 0, r), 0);
    case S_ENSURE: {
        uint64_t id;
        zkl_create_path_mode(s, b->path, &b->acl, b->curator ? ZOO_CONTAINER : ZOO_PERSISTENT, r,
                             &b->inflight, &id);
        return id;
    }
    case S_EXISTS_READY:
        return b->watch_id = counted(b, zkl_op_exists(s, b->ready_path, 1, r), 1);
    case S_CHILDREN_ENTER:
    case S_CHILDREN_LEAVE:
        return counted(b, zkl_op_children(s, b->path, 0, r), 0);
    case S_CREATE_READY:
        return counted(b, zkl_op_create(s, b->ready_path, "", 0, &b->acl, ZOO_PERSISTENT, 0, r),
                       0);
    case S_DELETE_READY:
    case S_DELETE_READY_LAST:
        return counted(b, zkl_op_delete(s, b->ready_path, -1, r), 0);
    case S_DELETE_OWN_LAST:
    case S_DELETE_OWN:
    case S_CLEANUP:
        return counted(b, zkl_op_delete(s, b->own_path, -1, r), 0);
    case S_EXISTS_OTHER: {
        char *p = zkl_join_path(b->path, b->other);
        uint64_t id = p ? counted(b, zkl_op_exists(s, p, 1, r), 1) : 0;
        free(p);
        return b->watch_id = id;
    }
    default:
        return 0;
    }
}

static void go(zkl_barrier *b, barrier_step step)
{
    b->step = step;
    b->op_id = 0;
    b->parked = 0;
    if (step == S_WAIT_BARRIER || step == S_WAIT_READY || step == S_WAIT_OTHER)
        return; /* the watch comes */
    if (b->orphaned && step != S_CLEANUP) {
        finish(b, ZKL_BARRIER_GAVE_UP, ZOK);
        return;
    }
    if (zkl_session_state(b->s) != ZKL_CONNECTED) {
        b->parked = 1;
        return;
    }
    b->op_id = submit(b);
    if (b->op_id == 0)
        finish(b, ZKL_BARRIER_FAILED, ZSYSTEMERROR);
}

static int name_cmp(const void *pa, const void *pb)
{
    return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

static void set_other(zkl_barrier *b, const char *name)
{
    free(b->other);
    b->other = strdup(name);
}

/* Curator's leave loop (DistributedDoubleBarrier.internalLeave) over the members' nodes, ready
 * left out: none: left (then ready is deleted); only the own node: delete it, left; the lowest
 * waits for the highest to go; every other member deletes its own node (once) and waits for the
 * lowest to go, also when the lowest is the only node left (Curator's would return). */
static void leave_children_curator(zkl_barrier *b, const zkl_event *ev)
{
    if (ev->rc != ZOK && ev->rc != ZNONODE) {
        finish(b, ZKL_BARRIER_FAILED, ev->rc);
        return;
    }
    int n = 0, ours = -1;
    char **names = ev->rc == ZOK ? ev->strings : NULL;
    for (int i = 0; names && i < ev->string_count; i++) {
        if (strcmp(names[i], "ready") != 0) { /* swapped, not copied: the event frees each */
            char *t = names[n];
            names[n++] = names[i];
            names[i] = t;
        }
    }
    if (n == 0) {
        b->entered = 0;
        go(b, S_DELETE_READY_LAST);
        return;
    }
    qsort(names, (size_t)n, sizeof *names, name_cmp);
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], b->node) == 0)
            ours = i;
    if (ours < 0)
        b->own_gone = 1; /* deleted by us, or gone with an expired session: wait all the same */
    if (n == 1 && ours == 0) {
        go(b, S_DELETE_OWN_LAST);
        return;
    }
    set_other(b, ours == 0 ? names[n - 1] : names[0]);
    if (!b->other)
        finish(b, ZKL_BARRIER_FAILED, ZSYSTEMERROR);
    else
        go(b, ours == 0 || b->own_gone ? S_EXISTS_OTHER : S_DELETE_OWN);
}

/* leave: what the children say (kazoo's _inner_leave loop). */
static void leave_children(zkl_barrier *b, const zkl_event *ev)
{
    if (b->curator) {
        leave_children_curator(b, ev);
        return;
    }
    if (ev->rc == ZNONODE || (ev->rc == ZOK && ev->string_count == 0)) {
        b->entered = 0;
        finish(b, ZKL_BARRIER_DONE, ZOK);
        return;
    }
    if (ev->rc != ZOK) {
        finish(b, ZKL_BARRIER_FAILED, ev->rc);
        return;
    }
    if (ev->string_count == 1 && strcmp(ev->strings[0], b->node) == 0) {
        go(b, S_DELETE_OWN_LAST);
        return;
    }
    qsort(ev->strings, (size_t)ev->string_count, sizeof *ev->strings, name_cmp);
    int lowest = strcmp(ev->strings[0], b->node) == 0;
    /* the lowest waits for the highest; every other member for the lowest */
    set_other(b, lowest ? ev->strings[ev->string_count - 1] : ev->strings[0]);
    if (!b->other)
        finish(b, ZKL_BARRIER_FAILED, ZSYSTEMERROR);
    else
        go(b, lowest ? S_EXISTS_OTHER : S_DELETE_OWN);
}

static void on_op(zkl_barrier *b, const zkl_event *ev)
{
    zkl_rc_kind kind = zkl_rc_triage(ev->rc);
    if (b->step == S_CLEANUP && (kind == ZKL_RC_ANSWER || kind == ZKL_RC_CLOSED)) {
        b->step = S_NONE; /* deleted, or nothing more to try: the outcome stays */
        b->parked = 0;
        return;
    }
    switch (kind) {
    case ZKL_RC_CLOSED:
        finish(b, ZKL_BARRIER_FAILED, ev->rc);
        return;
    case ZKL_RC_LOST:
        b->parked = 1; /* LOST follows and decides */
        return;
    case ZKL_RC_RETRY:
        b->watch_id = 0;
        go(b, b->step == S_ENSURE ? S_CREATE_OWN : b->step);
        return;
    case ZKL_RC_ANSWER:
        break;
    }
    int rc = ev->rc;
    switch (b->step) {
    case S_EXISTS_BARRIER:
        if (rc == ZNONODE)
            finish(b, ZKL_BARRIER_DONE, ZOK);
        else if (rc != ZOK)
            finish(b, ZKL_BARRIER_FAILED, rc);
        else if (b->watch_id)
            b->step = S_WAIT_BARRIER;
        else
            go(b, S_EXISTS_BARRIER);
        break;
    case S_CREATE_OWN:
        if (rc == ZOK || rc == ZNODEEXISTS)
            go(b, S_EXISTS_READY);
        else if (rc == ZNONODE && ++b->ensure_rounds <= ZKL_RETRY_LIMIT)
            go(b, S_ENSURE);
        else
            finish(b, ZKL_BARRIER_FAILED, rc);
        break;
    case S_ENSURE: /* the create of the path itself: made, there, or a parent went */
        if (rc == ZOK || rc == ZNODEEXISTS || rc == ZNONODE)
            go(b, S_CREATE_OWN);
        else
            finish(b, ZKL_BARRIER_FAILED, rc); /* it cannot be made: an ephemeral parent, ... */
        break;
    case S_EXISTS_READY:
        if (rc == ZOK) { /* ready is there already: the others are in (kazoo would wait) */
            b->watch_id = 0;
            b->entered = 1;
            finish(b, ZKL_BARRIER_DONE, ZOK);
        } else if (rc == ZNONODE) {
            go(b, S_CHILDREN_ENTER);
        } else {
            finish(b, ZKL_BARRIER_FAILED, rc);
        }
        break;
    case S_CHILDREN_ENTER:
        if (rc != ZOK) {
            finish(b, ZKL_BARRIER_FAILED, rc);
        } else if (ev->string_count < b->num_clients) {
            if (b->watch_id)
                b->step = S_WAIT_READY;
            else
                go(b, S_EXISTS_READY);
        } else {
            go(b, S_CREATE_READY);
        }
        break;
    case S_CREATE_READY:
        if (rc == ZOK || rc == ZNODEEXISTS) {
            b->watch_id = 0;
            b->entered = 1;
            finish(b, ZKL_BARRIER_DONE, ZOK);
        } else {
            finish(b, ZKL_BARRIER_FAILED, rc);
        }
        break;
    case S_DELETE_READY:
        if (rc == ZOK || rc == ZNONODE)
            go(b, S_CHILDREN_LEAVE);
        else
            finish(b, ZKL_BARRIER_FAILED, rc);
        break;
    case S_CHILDREN_LEAVE:
        leave_children(b, ev);
        break;
    case S_DELETE_OWN_LAST:
        if (rc == ZOK || rc == ZNONODE) {
            b->entered = 0;
            if (b->curator)
                go(b, S_DELETE_READY_LAST);
            else
                finish(b, ZKL_BARRIER_DONE, ZOK);
        } else {
            finish(b, ZKL_BARRIER_FAILED, rc);
        }
        break;
    case S_DELETE_OWN:
        if (rc == ZOK || rc == ZNONODE) {
            b->own_gone = 1;
            go(b, S_EXISTS_OTHER);
        }
        else
            finish(b, ZKL_BARRIER_FAILED, rc);
        break;
    case S_EXISTS_OTHER:
        if (rc == ZOK && b->watch_id)
            b->step = S_WAIT_OTHER;
        else if (rc == ZOK || rc == ZNONODE)
            go(b, S_CHILDREN_LEAVE);
        else
            finish(b, ZKL_BARRIER_FAILED, rc);
        break;
    case S_DELETE_READY_LAST:
        if (rc == ZOK || rc == ZNONODE)
            finish(b, ZKL_BARRIER_DONE, ZOK);
        else
            finish(b, ZKL_BARRIER_FAILED, rc);
        break;
    case S_CLEANUP:
        b->step = S_NONE; /* best effort */
        break;
    default:
        break;
    }
}

static void on_watch(zkl_barrier *b, const zkl_event *ev)
{
    switch (b->step) {
    case S_EXISTS_BARRIER:
    case S_WAIT_BARRIER:
        if (ev->type == ZOO_DELETED_EVENT)
            finish(b, ZKL_BARRIER_DONE, ZOK);
        else if (b->step == S_WAIT_BARRIER)
            go(b, S_EXISTS_BARRIER); /* changed, or dropped: watch again */
        break;
    case S_CHILDREN_ENTER:
    case S_WAIT_READY:
        if (ev->type == ZOO_CREATED_EVENT) {
            b->entered = 1;
            finish(b, ZKL_BARRIER_DONE, ZOK);
        } else if (b->step == S_WAIT_READY) {
            go(b, S_EXISTS_READY);
        }
        break;
    case S_WAIT_OTHER:
        go(b, S_CHILDREN_LEAVE); /* deleted (or dropped): look again */
        break;
    default:
        break;
    }
}

static void destroy(zkl_barrier *b)
{
    if (b->s && b->listening)
        zkl_session_remove_state_listener(b->s, on_state, b);
    free(b->path);
    free(b->node);
    free(b->own_path);
    free(b->ready_path);
    free(b->data);
    free(b->other);
    zkl_acl_free(&b->acl);
    free(b);
}

static void maybe_destroy(zkl_barrier *b)
{
    if (!b->orphaned || b->inflight > 0)
        return;
    if (b->s && b->step == S_CLEANUP)
        return; /* parked: waits for CONNECTED or the session's end */
    destroy(b);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_barrier *b = ctx;
    b->inflight--;
    if (ev->kind == ZKL_EV_OP) {
        /* every exists of ours asks for a watch: none will come if it was not taken */
        if (ev->op == ZKL_OP_EXISTS && !ev->watch_requested) {
            b->inflight--;
            if (ev->id == b->watch_id)
                b->watch_id = 0;
        }
        if (ev->id == b->op_id && b->s) {
            b->op_id = 0;
            on_op(b, ev);
        }
    } else if (ev->kind == ZKL_EV_WATCH && ev->id == b->watch_id && b->s) {
        b->watch_id = 0;
        if (!(ev->type == ZOO_NOTWATCHING_EVENT && b->op_id == ev->id))
            on_watch(b, ev);
    }
    maybe_destroy(b);
}

static void notify_lost(zkl_barrier *b)
{
    if (!b->orphaned && b->s)
        zkl_session_notify(b->s, b->id, ZKL_BARRIER_NOTIFY_LOST);
}

static void on_state(zkl_session *s, zkl_state state, void *ctx)
{
    zkl_barrier *b = ctx;
    if (state == ZKL_CONNECTED) {
        if (b->parked)
            go(b, b->step);
    } else if (state == ZKL_LOST) {
        int closed_rc = zkl_session_is_stopped(s)                                 ? ZCLOSING
                        : zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED ? ZAUTHFAILED
                                                                            : ZOK;
        int closed = closed_rc != ZOK;
        if (b->entered && b->num_clients > 0)
            notify_lost(b); /* the own node expired */
        if (b->step != S_NONE) {
            b->op_id = b->watch_id = 0;
            if (closed) {
                finish(b, b->step == S_CLEANUP ? ZKL_BARRIER_GAVE_UP : ZKL_BARRIER_FAILED,
                       closed_rc);
            } else {
                barrier_step next = b->step;
                if (b->op == ZKL_BARRIER_WAIT)
                    next = S_EXISTS_BARRIER;
                else if (b->step == S_CLEANUP)
                    next = S_NONE; /* the node went with the session */
                else if (b->op == ZKL_BARRIER_ENTER)
                    next = S_CREATE_OWN;
                else if (b->step != S_DELETE_READY && b->step != S_DELETE_READY_LAST)
                    next = S_CHILDREN_LEAVE;
                if (b->op == ZKL_BARRIER_LEAVE)
                    b->own_gone = 1; /* the own node went with the session */
                if (next == S_NONE) {
                    b->step = S_NONE;
                } else {
                    b->step = next;
                    b->parked = 1;
                }
            }
        }
    }
    maybe_destroy(b);
}

zkl_barrier *zkl_barrier_new(zkl_session *s, const char *path, int num_clients,
                             const char *data, int len, const struct ACL_vector *acl,
                             zkl_barrier_layout layout)
{
    zkl_barrier *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->s = s;
    b->route.fn = on_route;
    b->route.ctx = b;
    b->id = zkl_session_new_target(s);
    b->num_clients = num_clients;
    b->curator = layout == ZKL_BARRIER_CURATOR;
    char uuid[ZKL_PROTECTED_PREFIX_LEN + 1];
    errno = 0;
    b->path = strdup(path);
    b->data = malloc(len > 0 ? (size_t)len : 1);
    if (!b->path || !b->data || zkl_uuid4_hex(uuid) != 0 ||
        zkl_acl_copy(&b->acl, acl ? acl : &ZOO_OPEN_ACL_UNSAFE) != 0)
        goto fail;
    if (b->curator) { /* Curator's UUID.randomUUID().toString(): 8-4-4-4-12 */
        char hex[ZKL_UUID_HEX_LEN + 1];
        memcpy(hex, uuid, sizeof hex);
        zkl_protected_prefix(uuid, hex);
        uuid[3 + 36] = '\0';
        memmove(uuid, uuid + 3, 37);
    }
    b->node = strdup(uuid);
    b->own_path = zkl_join_path(path, uuid);
    b->ready_path = zkl_join_path(path, "ready");
    if (!b->node || !b->own_path || !b->ready_path)
        goto fail;
    if (len > 0)
        memcpy(b->data, data, (size_t)len);
    b->data_len = len > 0 ? len : 0;
    if (zkl_session_add_state_listener(s, on_state, b) != 0)
        goto fail;
    b->listening = 1;
    return b;
fail:
    if (!errno)
        errno = ENOMEM;
    b->s = NULL;
    destroy(b);
    return NULL;
}

void zkl_barrier_free(zkl_barrier *b)
{
    if (!b)
        return;
    b->orphaned = 1;
    if (b->s && b->step != S_NONE && b->step != S_CLEANUP)
        zkl_barrier_give_up(b);
    maybe_destroy(b);
}

void zkl_barrier_forget_session(zkl_barrier *b)
{
    b->s = NULL;
    b->inflight = 0;
    if (b->step != S_NONE)
        finish(b, ZKL_BARRIER_FAILED, ZCLOSING);
}

int zkl_barrier_start(zkl_barrier *b, zkl_barrier_op op)
{
    if (!b->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (b->step != S_NONE) {
        errno = EALREADY;
        return -1;
    }
    b->op = op;
    b->outcome = ZKL_BARRIER_PENDING;
    b->rc = ZOK;
    b->ensure_rounds = 0;
    b->watch_id = 0;
    b->own_gone = 0;
    go(b, op == ZKL_BARRIER_WAIT ? S_EXISTS_BARRIER
          : op == ZKL_BARRIER_ENTER ? S_CREATE_OWN
          : b->curator ? S_CHILDREN_LEAVE : S_DELETE_READY);
    return 0;
}

void zkl_barrier_give_up(zkl_barrier *b)
{
    if (b->step == S_NONE || b->step == S_CLEANUP)
        return;
    int enter = b->op == ZKL_BARRIER_ENTER;
    finish(b, ZKL_BARRIER_GAVE_UP, ZOK);
    if (enter && b->s) { /* kazoo's best-effort clean-up of the own node */
        b->entered = 0;
        go(b, S_CLEANUP);
    }
}

int zkl_barrier_busy(const zkl_barrier *b)
{
    return b->step != S_NONE;
}

zkl_barrier_outcome zkl_barrier_outcome_of(const zkl_barrier *b, int *rc)
{
    if (rc)
        *rc = b->rc;
    return b->outcome;
}

int zkl_barrier_entered(const zkl_barrier *b) { return b->entered; }
const char *zkl_barrier_node(const zkl_barrier *b) { return b->node; }
uint64_t zkl_barrier_id(const zkl_barrier *b) { return b->id; }
long zkl_barrier_inflight(const zkl_barrier *b) { return b->inflight; }
