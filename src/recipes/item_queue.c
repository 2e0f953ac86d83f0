/*
 * item_queue.c — see item_queue.h.  A get is a sequence of steps: LIST (the children, sorted
 * into the cache), READ (the value of cache[pos]), DELETE (that entry).  Each step submits one
 * routed op; only the op named op_id counts.  A step that failed on the connection runs again
 * once CONNECTED ("parked" until the state listener hears it).
 */
#include "item_queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ops.h"
#include "common.h"
#include "names.h"

typedef enum { S_NONE, S_LIST, S_READ, S_DELETE } queue_step;

struct zkl_item_queue {
    zkl_session *s; /* NULL once the session is freed */
    zkl_route route;
    char *path;

    zkl_item_queue_phase phase;
    queue_step step;
    zkl_item_queue_outcome outcome;
    int rc;
    zkl_names cache; /* the last listing, sorted; cache.items[pos] is next */
    int pos;
    char *entry;     /* the entry being taken (or taken) */
    char *value;
    int value_len;
    int delete_tries; /* deletes of entry submitted: a NONODE after the first is ambiguous */
    int ambiguous;
    int parked;

    uint64_t op_id;
    long inflight;
    int orphaned, listening;
};

static void on_state(zkl_session *s, zkl_state state, void *ctx);
static void run_step(zkl_item_queue *q);

static void set_string(char **field, char *value)
{
    free(*field);
    *field = value;
}

static void finish(zkl_item_queue *q, zkl_item_queue_outcome outcome, int rc)
{
    q->phase = ZKL_ITEM_QUEUE_IDLE;
    q->step = S_NONE;
    q->outcome = outcome;
    q->rc = rc;
    q->parked = 0;
    q->op_id = 0;
}

static void go(zkl_item_queue *q, queue_step step)
{
    q->step = step;
    q->op_id = 0;
    if (q->orphaned) {
        finish(q, ZKL_ITEM_QUEUE_FAILED, ZOK); /* nobody waits: stop here */
        return;
    }
    if (zkl_session_state(q->s) == ZKL_CONNECTED)
        run_step(q);
    else
        q->parked = 1;
}

static uint64_t submit_step(zkl_item_queue *q)
{
    char *p = NULL;
    uint64_t id = 0;
    switch (q->step) {
    case S_LIST:
        return zkl_op_children(q->s, q->path, 0, &q->route);
    case S_READ:
        if ((p = zkl_join_path(q->path, q->entry)) != NULL)
            id = zkl_op_get(q->s, p, 0, &q->route);
        break;
    case S_DELETE:
        if ((p = zkl_join_path(q->path, q->entry)) != NULL)
            id = zkl_op_delete(q->s, p, -1, &q->route);
        if (id)
            q->delete_tries++;
        break;
    default:
        break;
    }
    free(p);
    return id;
}

static void run_step(zkl_item_queue *q)
{
    q->parked = 0;
    q->op_id = submit_step(q);
    if (q->op_id)
        q->inflight++;
    else
        finish(q, ZKL_ITEM_QUEUE_FAILED, ZSYSTEMERROR);
}

/* The next cached entry, or a fresh listing once the cache is used up. */
static void next_entry(zkl_item_queue *q)
{
    if (q->pos >= q->cache.count) {
        go(q, S_LIST);
        return;
    }
    char *name = strdup(q->cache.items[q->pos]);
    if (!name) {
        finish(q, ZKL_ITEM_QUEUE_FAILED, ZSYSTEMERROR);
        return;
    }
    set_string(&q->entry, name);
    q->delete_tries = 0;
    go(q, S_READ);
}

static void listed(zkl_item_queue *q, const zkl_event *ev)
{
    if (ev->rc == ZNONODE || (ev->rc == ZOK && ev->string_count == 0)) {
        zkl_names_free(&q->cache);
        q->pos = 0;
        finish(q, ZKL_ITEM_QUEUE_EMPTY, ZOK);
    } else if (ev->rc != ZOK) {
        finish(q, ZKL_ITEM_QUEUE_FAILED, ev->rc);
    } else if (zkl_names_copy_sorted(&q->cache, ev->strings, ev->string_count) != 0) {
        finish(q, ZKL_ITEM_QUEUE_FAILED, ZSYSTEMERROR);
    } else {
        q->pos = 0;
        next_entry(q);
    }
}

static void read_value(zkl_item_queue *q, const zkl_event *ev)
{
    if (ev->rc == ZNONODE) { /* taken by another consumer */
        q->pos++;
        next_entry(q);
        return;
    }
    if (ev->rc != ZOK) {
        finish(q, ZKL_ITEM_QUEUE_FAILED, ev->rc);
        return;
    }
    char *value = malloc(ev->data_len > 0 ? (size_t)ev->data_len : 1);
    if (!value) {
        finish(q, ZKL_ITEM_QUEUE_FAILED, ZSYSTEMERROR);
        return;
    }
    if (ev->data_len > 0)
        memcpy(value, ev->data, (size_t)ev->data_len);
    set_string(&q->value, value);
    q->value_len = ev->data_len > 0 ? ev->data_len : 0;
    go(q, S_DELETE);
}

static void got(zkl_item_queue *q, int ambiguous)
{
    q->pos++;
    q->ambiguous = ambiguous;
    finish(q, ZKL_ITEM_QUEUE_GOT, ZOK);
}

static void deleted(zkl_item_queue *q, const zkl_event *ev)
{
    if (ev->rc == ZOK) {
        got(q, 0);
    } else if (ev->rc == ZNONODE && q->delete_tries > 1) {
        got(q, 1); /* our lost delete, or another consumer's: at least once */
    } else if (ev->rc == ZNONODE) {
        q->pos++; /* another consumer took it between our read and delete */
        next_entry(q);
    } else {
        finish(q, ZKL_ITEM_QUEUE_FAILED, ev->rc);
    }
}

/* The session is stopped or refused our auth: nothing more can be done on it. */
static void closed(zkl_item_queue *q, int rc)
{
    if (q->phase != ZKL_ITEM_QUEUE_GETTING)
        return;
    if (q->step == S_DELETE && q->delete_tries > 0)
        got(q, 1); /* the delete may have been applied: the value must not be lost */
    else
        finish(q, ZKL_ITEM_QUEUE_FAILED, rc);
}

static void on_op(zkl_item_queue *q, const zkl_event *ev)
{
    switch (zkl_rc_triage(ev->rc)) {
    case ZKL_RC_CLOSED:
        closed(q, ev->rc);
        return;
    case ZKL_RC_LOST:
        q->parked = 1; /* LOST follows; the step runs again on the new session */
        return;
    case ZKL_RC_RETRY:
        go(q, q->step);
        return;
    case ZKL_RC_ANSWER:
        break;
    }
    switch (q->step) {
    case S_LIST: listed(q, ev); break;
    case S_READ: read_value(q, ev); break;
    case S_DELETE: deleted(q, ev); break;
    default: break;
    }
}

static void destroy(zkl_item_queue *q)
{
    if (q->s && q->listening)
        zkl_session_remove_state_listener(q->s, on_state, q);
    zkl_names_free(&q->cache);
    free(q->path);
    free(q->entry);
    free(q->value);
    free(q);
}

static void maybe_destroy(zkl_item_queue *q)
{
    if (q->orphaned && q->inflight <= 0)
        destroy(q);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_item_queue *q = ctx;
    if (ev->kind != ZKL_EV_OP)
        return;
    q->inflight--;
    if (ev->id == q->op_id && q->s) {
        q->op_id = 0;
        on_op(q, ev);
    }
    maybe_destroy(q);
}

static void on_state(zkl_session *s, zkl_state state, void *ctx)
{
    zkl_item_queue *q = ctx;
    if (q->phase != ZKL_ITEM_QUEUE_GETTING)
        return;
    if (state == ZKL_CONNECTED) {
        if (q->parked)
            go(q, q->step);
    } else if (state == ZKL_LOST) {
        if (zkl_session_is_stopped(s)) {
            closed(q, ZCLOSING);
        } else if (zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED) {
            closed(q, ZAUTHFAILED);
        } else {
            q->op_id = 0; /* died with the session: the step runs again on the new one */
            q->parked = 1;
        }
    }
}

zkl_item_queue *zkl_item_queue_new(zkl_session *s, const char *path)
{
    zkl_item_queue *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->route.fn = on_route;
    q->route.ctx = q;
    q->path = strdup(path);
    if (!q->path || zkl_session_add_state_listener(s, on_state, q) != 0) {
        free(q->path);
        free(q);
        errno = ENOMEM;
        return NULL;
    }
    q->s = s;
    q->listening = 1;
    return q;
}

void zkl_item_queue_free(zkl_item_queue *q)
{
    if (!q)
        return;
    q->orphaned = 1;
    if (q->phase == ZKL_ITEM_QUEUE_GETTING && q->op_id == 0)
        finish(q, ZKL_ITEM_QUEUE_FAILED, ZOK); /* parked: nothing in flight */
    maybe_destroy(q);
}

void zkl_item_queue_forget_session(zkl_item_queue *q)
{
    q->s = NULL;
    q->inflight = 0; /* the session delivered (or dropped) everything before it went */
    if (q->phase == ZKL_ITEM_QUEUE_GETTING)
        finish(q, ZKL_ITEM_QUEUE_FAILED, ZCLOSING);
}

int zkl_item_queue_get(zkl_item_queue *q)
{
    if (!q->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (q->phase != ZKL_ITEM_QUEUE_IDLE) {
        errno = EALREADY;
        return -1;
    }
    q->phase = ZKL_ITEM_QUEUE_GETTING;
    q->outcome = ZKL_ITEM_QUEUE_PENDING;
    q->rc = ZOK;
    q->ambiguous = 0;
    next_entry(q);
    return 0;
}

zkl_item_queue_phase zkl_item_queue_phase_of(const zkl_item_queue *q) { return q->phase; }

zkl_item_queue_outcome zkl_item_queue_outcome_of(const zkl_item_queue *q, int *rc)
{
    if (rc)
        *rc = q->rc;
    return q->outcome;
}

const char *zkl_item_queue_value(const zkl_item_queue *q, int *len)
{
    *len = q->value_len;
    return q->value ? q->value : "";
}

const char *zkl_item_queue_entry(const zkl_item_queue *q) { return q->entry; }
int zkl_item_queue_ambiguous(const zkl_item_queue *q) { return q->ambiguous; }
long zkl_item_queue_inflight(const zkl_item_queue *q) { return q->inflight; }

const char *zkl_item_queue_step(const zkl_item_queue *q)
{
    static const char *const names[] = {"none", "list", "read", "delete"};
    return names[q->step];
}
