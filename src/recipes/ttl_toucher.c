/*
 * ttl_toucher.c — see ttl_toucher.h.  A touch is SET, then (NONODE) CREATE, then (NODEEXISTS)
 * SET once more; only the op named op_id and the timer named timer_id count, anything else
 * that comes back is stale and only counted.
 */
#include "ttl_toucher.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/acl.h"
#include "../core/ops.h"
#include "../core/timers.h"

typedef enum { T_NONE, T_SET, T_CREATE, T_SET_AGAIN } touch_step;

struct zkl_toucher {
    zkl_session *s; /* NULL once the session is freed */
    zkl_route route;
    char *path;
    int64_t ttl;
    long interval_ms;
    struct ACL_vector acl;

    int running;
    touch_step step;
    uint64_t touches, failures;
    uint64_t op_id, timer_id;
    long inflight; /* routed ops not yet come back */
    int orphaned;
};

static void send_step(zkl_toucher *t, touch_step step)
{
    uint64_t id = step == T_CREATE
                      ? zkl_op_create_ttl(t->s, t->path, "", 0, &t->acl, ZOO_PERSISTENT_WITH_TTL,
                                          t->ttl, 0, &t->route)
                      : zkl_op_set(t->s, t->path, "", 0, -1, &t->route);
    t->step = id ? step : T_NONE;
    t->op_id = id;
    if (id)
        t->inflight++;
    else
        t->failures++;
}

static void arm(zkl_toucher *t)
{
    t->timer_id = zkl_session_add_timer(t->s, t->interval_ms, &t->route);
}

static void on_tick(zkl_toucher *t)
{
    t->timer_id = 0;
    if (!t->running)
        return;
    arm(t); /* a fixed rate: the next tick does not wait for this touch */
    if (t->op_id == 0 && zkl_session_state(t->s) == ZKL_CONNECTED)
        send_step(t, T_SET);
}

static void on_op(zkl_toucher *t, int rc)
{
    touch_step step = t->step;
    t->step = T_NONE;
    if (rc == ZOK)
        t->touches++;
    else if (rc == ZNONODE && step == T_SET)
        send_step(t, T_CREATE);
    else if (rc == ZNODEEXISTS && step == T_CREATE)
        send_step(t, T_SET_AGAIN);
    else
        t->failures++;
}

static void destroy(zkl_toucher *t)
{
    if (t->timer_id && t->s)
        zkl_session_cancel_timer(t->s, t->timer_id);
    zkl_acl_free(&t->acl);
    free(t->path);
    free(t);
}

static void maybe_destroy(zkl_toucher *t)
{
    if (t->orphaned && t->inflight <= 0)
        destroy(t);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_toucher *t = ctx;
    if (ev->kind == ZKL_EV_TIMER) {
        if (ev->id == t->timer_id && t->s)
            on_tick(t);
        return; /* timers are not counted in inflight */
    }
    if (ev->kind != ZKL_EV_OP)
        return;
    t->inflight--;
    if (ev->id == t->op_id && t->s) {
        t->op_id = 0;
        if (t->running)
            on_op(t, ev->rc);
    }
    maybe_destroy(t);
}

zkl_toucher *zkl_toucher_new(zkl_session *s, const char *path, int64_t ttl, long interval_ms,
                             const struct ACL_vector *acl)
{
    zkl_toucher *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->route.fn = on_route;
    t->route.ctx = t;
    t->ttl = ttl;
    t->interval_ms = interval_ms > 0 ? interval_ms : 1;
    t->path = strdup(path);
    if (!t->path || zkl_acl_copy(&t->acl, acl ? acl : &ZOO_OPEN_ACL_UNSAFE) != 0) {
        free(t->path);
        free(t);
        errno = ENOMEM;
        return NULL;
    }
    t->s = s;
    return t;
}

void zkl_toucher_free(zkl_toucher *t)
{
    if (!t)
        return;
    if (t->s)
        zkl_toucher_stop(t);
    t->orphaned = 1;
    maybe_destroy(t);
}

void zkl_toucher_forget_session(zkl_toucher *t)
{
    t->timer_id = 0; /* dropped with the session */
    t->s = NULL;
    t->inflight = 0; /* the session delivered (or dropped) everything before it went */
    t->op_id = 0;
    t->running = 0;
}

int zkl_toucher_start(zkl_toucher *t)
{
    if (!t->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (t->running) {
        errno = EALREADY;
        return -1;
    }
    arm(t);
    if (t->timer_id == 0) {
        errno = ENOMEM;
        return -1;
    }
    t->running = 1;
    return 0;
}

int zkl_toucher_stop(zkl_toucher *t)
{
    if (!t->s) {
        errno = ENOTCONN;
        return -1;
    }
    t->running = 0;
    if (t->timer_id)
        zkl_session_cancel_timer(t->s, t->timer_id);
    t->timer_id = 0;
    t->op_id = 0; /* a touch in flight is stale */
    t->step = T_NONE;
    return 0;
}

int zkl_toucher_running(const zkl_toucher *t) { return t->running; }
uint64_t zkl_toucher_touches(const zkl_toucher *t) { return t->touches; }
uint64_t zkl_toucher_failures(const zkl_toucher *t) { return t->failures; }
long zkl_toucher_inflight(const zkl_toucher *t) { return t->inflight; }
