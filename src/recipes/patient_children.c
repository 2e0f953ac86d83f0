/*
 * patient_children.c — see patient_children.h.  A round is a phase (settling, settled) and a
 * step: READ (children with a watch), WINDOW (the watch is armed and the timer runs), WATCHING
 * (settled; the watch is armed), RECHECK (after an expiry: read again and compare).  Only the
 * op named op_id, the watch named watch_id and the timer named timer_id count; anything else
 * that comes back is stale and only counted.
 */
#include "patient_children.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/clock.h"
#include "../core/ops.h"
#include "../core/timers.h"
#include "common.h"
#include "names.h"

typedef enum { S_NONE, S_READ, S_WINDOW, S_WATCHING, S_RECHECK } patient_step;

struct zkl_patient {
    zkl_session *s; /* NULL once the session is freed */
    zkl_route route;
    uint64_t id;
    char *path;
    long boundary_ms;

    zkl_patient_phase phase;
    patient_step step;
    int parked; /* the step (or the timer, in WINDOW) waits for CONNECTED */
    int rc;
    zkl_names current; /* the last read */
    zkl_names settled; /* the last settled round's children */
    long changes;
    double changed_at;

    uint64_t op_id, watch_id, timer_id;
    long inflight; /* routed ops and watches not yet come back */
    int orphaned, listening;
};

static void on_state(zkl_session *s, zkl_state state, void *ctx);

static void notify(zkl_patient *w, int code)
{
    if (!w->orphaned && w->s)
        zkl_session_notify(w->s, w->id, code);
}

static void stop_timer(zkl_patient *w)
{
    if (w->timer_id && w->s)
        zkl_session_cancel_timer(w->s, w->timer_id);
    w->timer_id = 0;
}

static void end_round(zkl_patient *w)
{
    stop_timer(w);
    w->phase = ZKL_PATIENT_IDLE;
    w->step = S_NONE;
    w->parked = 0;
    w->op_id = w->watch_id = 0;
}

static void fail(zkl_patient *w, int rc)
{
    if (w->phase == ZKL_PATIENT_IDLE)
        return;
    end_round(w);
    w->rc = rc;
    notify(w, ZKL_PATIENT_NOTIFY_FAILED);
}

static void saw_change(zkl_patient *w)
{
    w->changes++;
    w->changed_at = zkl_wall_clock_seconds();
    notify(w, ZKL_PATIENT_NOTIFY_CHANGED);
}

static void arm_timer(zkl_patient *w)
{
    w->parked = 0;
    w->timer_id = zkl_session_add_timer(w->s, w->boundary_ms, &w->route);
    if (w->timer_id == 0)
        fail(w, ZSYSTEMERROR);
}

/* READ and RECHECK: the children with a watch (the op and its watch each come back once). */
static void run_step(zkl_patient *w)
{
    w->parked = 0;
    if (w->step == S_WINDOW) {
        arm_timer(w);
        return;
    }
    if (w->step != S_READ && w->step != S_RECHECK)
        return;
    uint64_t id = zkl_op_children(w->s, w->path, 1, &w->route);
    if (id == 0) {
        fail(w, ZSYSTEMERROR);
        return;
    }
    w->inflight += 2;
    w->op_id = w->watch_id = id;
}

/* Runs step now if connected, else once CONNECTED comes. */
static void go(zkl_patient *w, patient_step step)
{
    w->step = step;
    w->op_id = 0;
    if (zkl_session_state(w->s) == ZKL_CONNECTED)
        run_step(w);
    else
        w->parked = 1;
}

static void children_read(zkl_patient *w, const zkl_event *ev)
{
    if (w->step == S_RECHECK) {
        zkl_names now = {NULL, 0};
        if (ev->rc == ZNONODE) {
            saw_change(w); /* the node went */
            end_round(w);
        } else if (ev->rc != ZOK || zkl_names_copy_sorted(&now, ev->strings,
                                                           ev->string_count) != 0) {
            fail(w, ev->rc != ZOK ? ev->rc : ZSYSTEMERROR);
        } else if (zkl_names_equal(&now, &w->settled)) {
            w->step = S_WATCHING; /* nothing changed: watch on with the new watch */
        } else {
            saw_change(w);
            end_round(w);
        }
        zkl_names_free(&now);
        return;
    }
    if (ev->rc != ZOK) {
        fail(w, ev->rc);
        return;
    }
    if (zkl_names_copy_sorted(&w->current, ev->strings, ev->string_count) != 0) {
        fail(w, ZSYSTEMERROR);
        return;
    }
    w->step = S_WINDOW;
    arm_timer(w);
}

static void on_op(zkl_patient *w, const zkl_event *ev)
{
    switch (zkl_rc_triage(ev->rc)) {
    case ZKL_RC_CLOSED:
        fail(w, ev->rc);
        return;
    case ZKL_RC_LOST:
        w->parked = 1; /* LOST follows and decides */
        return;
    case ZKL_RC_RETRY:
        go(w, w->step);
        return;
    case ZKL_RC_ANSWER:
        children_read(w, ev);
    }
}

static void on_watch(zkl_patient *w, const zkl_event *ev)
{
    if (ev->type == ZOO_NOTWATCHING_EVENT)
        return; /* not registered (the op's result decides) or the handle closed (LOST does) */
    if (w->phase == ZKL_PATIENT_SETTLING) {
        stop_timer(w);
        saw_change(w);
        go(w, S_READ);
    } else if (w->phase == ZKL_PATIENT_SETTLED) {
        saw_change(w);
        end_round(w);
    }
}

static void on_timer(zkl_patient *w)
{
    w->timer_id = 0;
    if (w->step != S_WINDOW)
        return;
    if (zkl_session_state(w->s) != ZKL_CONNECTED) {
        w->parked = 1; /* a whole boundary again once connected */
        return;
    }
    zkl_names snapshot = {NULL, 0};
    if (zkl_names_copy_sorted(&snapshot, w->current.items, w->current.count) != 0) {
        fail(w, ZSYSTEMERROR);
        return;
    }
    zkl_names_free(&w->settled);
    w->settled = snapshot;
    w->phase = ZKL_PATIENT_SETTLED;
    w->step = S_WATCHING; /* the last read's watch is the next change */
    notify(w, ZKL_PATIENT_NOTIFY_SETTLED);
}

static void destroy(zkl_patient *w)
{
    stop_timer(w);
    if (w->s && w->listening)
        zkl_session_remove_state_listener(w->s, on_state, w);
    zkl_names_free(&w->current);
    zkl_names_free(&w->settled);
    free(w->path);
    free(w);
}

static void maybe_destroy(zkl_patient *w)
{
    if (w->orphaned && w->inflight <= 0)
        destroy(w);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_patient *w = ctx;
    if (ev->kind == ZKL_EV_TIMER) {
        if (ev->id == w->timer_id && w->s)
            on_timer(w);
        return; /* timers are not counted in inflight */
    }
    w->inflight--;
    if (ev->kind == ZKL_EV_OP) {
        if (!ev->watch_requested) { /* out of memory: no watch call will come */
            w->inflight--;
            if (ev->id == w->watch_id)
                w->watch_id = 0;
        }
        if (ev->id == w->op_id && w->s) {
            w->op_id = 0;
            on_op(w, ev);
        }
    } else if (ev->kind == ZKL_EV_WATCH && ev->id == w->watch_id && ev->id != w->op_id &&
               w->s) {
        if (ev->type != ZOO_NOTWATCHING_EVENT)
            w->watch_id = 0;
        on_watch(w, ev);
    }
    maybe_destroy(w);
}

static void on_state(zkl_session *s, zkl_state state, void *ctx)
{
    zkl_patient *w = ctx;
    if (w->phase == ZKL_PATIENT_IDLE)
        return;
    if (state == ZKL_CONNECTED) {
        if (w->parked)
            run_step(w);
    } else if (state == ZKL_SUSPENDED) {
        if (w->step == S_WINDOW) {
            stop_timer(w); /* the boundary cannot be vouched for while disconnected */
            w->parked = 1;
        }
    } else if (zkl_session_is_stopped(s)) {
        fail(w, ZCLOSING);
    } else if (zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED) {
        fail(w, ZAUTHFAILED);
    } else { /* expired: the watch and whatever was in flight died with the session */
        stop_timer(w);
        w->op_id = w->watch_id = 0;
        w->step = w->phase == ZKL_PATIENT_SETTLED ? S_RECHECK : S_READ;
        w->parked = 1;
    }
}

zkl_patient *zkl_patient_new(zkl_session *s, const char *path, long boundary_ms)
{
    zkl_patient *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->route.fn = on_route;
    w->route.ctx = w;
    w->id = zkl_session_new_target(s);
    w->boundary_ms = boundary_ms > 0 ? boundary_ms : 0;
    w->path = strdup(path);
    if (!w->path || zkl_session_add_state_listener(s, on_state, w) != 0) {
        free(w->path);
        free(w);
        errno = ENOMEM;
        return NULL;
    }
    w->s = s;
    w->listening = 1;
    return w;
}

void zkl_patient_free(zkl_patient *w)
{
    if (!w)
        return;
    w->orphaned = 1;
    end_round(w);
    maybe_destroy(w);
}

void zkl_patient_forget_session(zkl_patient *w)
{
    w->timer_id = 0; /* dropped with the session */
    w->s = NULL;
    w->inflight = 0; /* the session delivered (or dropped) everything before it went */
    if (w->phase != ZKL_PATIENT_IDLE) {
        end_round(w);
        w->rc = ZCLOSING;
    }
}

int zkl_patient_start(zkl_patient *w)
{
    if (!w->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (w->phase == ZKL_PATIENT_SETTLING) {
        errno = EALREADY;
        return -1;
    }
    end_round(w); /* a settled round's watch goes stale: the new round watches afresh */
    w->phase = ZKL_PATIENT_SETTLING;
    w->rc = ZOK;
    go(w, S_READ);
    return 0;
}

zkl_patient_phase zkl_patient_phase_of(const zkl_patient *w) { return w->phase; }
int zkl_patient_rc(const zkl_patient *w) { return w->rc; }
double zkl_patient_changed_at(const zkl_patient *w) { return w->changed_at; }
long zkl_patient_changes(const zkl_patient *w) { return w->changes; }
uint64_t zkl_patient_id(const zkl_patient *w) { return w->id; }
long zkl_patient_inflight(const zkl_patient *w) { return w->inflight; }

const char *const *zkl_patient_children(const zkl_patient *w, int *count)
{
    *count = w->settled.count;
    return (const char *const *)w->settled.items;
}
