/*
 * lease.c — see lease.h.  Steps: LOCK (the lock at <path> is taken; its observer reports),
 * READ (the record), then the owner's decision (phase NEEDS_TIME), DELETE and CREATE (a new
 * record), UNLOCK.  Only the result of the op the lease waits for (op_id) counts.  Nothing
 * is retried: any error, and any change of the connection, ends the attempt (FINISHING),
 * which then releases the lock.
 */
#include "lease.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/acl.h"
#include "../core/ops.h"
#include "common.h"
#include "lease_record.h"
#include "lock.h"

typedef enum { STEP_NONE, STEP_LOCK, STEP_READ, STEP_DELETE, STEP_CREATE, STEP_UNLOCK } lease_step;

struct zkl_lease {
    zkl_session *s; /* NULL once the session is freed */
    zkl_route route;
    char *path, *holder_path;
    char *identity;
    int identity_len;
    double duration;
    struct ACL_vector acl;
    zkl_lock *mutex; /* kazoo's Lock at <path> */

    zkl_lease_phase phase;
    lease_step step;
    zkl_lease_outcome outcome;
    int rc;
    const char *why;  /* with BAD_RECORD (a static string) */
    int64_t end;      /* with OBTAINED */
    char *found;      /* the record read, when found_exists */
    int found_len, found_exists;
    char *record;     /* the record to write */
    size_t record_len;
    int mutex_asked, unlock_sent, abandoned, orphaned;

    uint64_t op_id;
    long inflight;
};

static void go(zkl_lease *e, lease_step step);

static void set_string(char **field, char *value)
{
    free(*field);
    *field = value;
}

/* The attempt is decided (or failed): release the lock, then idle. */
static void finish(zkl_lease *e, zkl_lease_outcome outcome, int rc)
{
    if (e->phase == ZKL_LEASE_FINISHING || e->phase == ZKL_LEASE_IDLE)
        return;
    e->outcome = outcome;
    e->rc = rc;
    e->phase = ZKL_LEASE_FINISHING;
    go(e, STEP_UNLOCK);
}

/* ---------------------------------------------------------------- the lock */

static void take_mutex(zkl_lease *e)
{
    zkl_lock *l = e->mutex;
    zkl_lock_phase phase = zkl_lock_phase_of(l);
    if (phase == ZKL_LOCK_HELD) {
        e->mutex_asked = 0;
        if (e->abandoned)
            finish(e, ZKL_LEASE_ABANDONED, ZOK);
        else
            go(e, STEP_READ);
        return;
    }
    if (phase != ZKL_LOCK_IDLE)
        return; /* acquiring, or an earlier release: its next event brings us back */
    if (e->mutex_asked) { /* the acquire ended without the lock */
        int rc;
        zkl_lock_outcome_of(l, &rc);
        finish(e, ZKL_LEASE_FAILED, rc != ZOK ? rc : ZSYSTEMERROR);
        return;
    }
    if (zkl_lock_acquire(l, 1, 1) != 0) {
        finish(e, ZKL_LEASE_FAILED, ZCLOSING);
        return;
    }
    e->mutex_asked = 1;
}

static void drop_mutex(zkl_lease *e)
{
    zkl_lock *l = e->mutex;
    zkl_lock_phase phase = zkl_lock_phase_of(l);
    if (phase == ZKL_LOCK_HELD && !e->unlock_sent) {
        e->unlock_sent = 1;
        zkl_lock_release(l);
    } else if (phase == ZKL_LOCK_ACQUIRING) {
        zkl_lock_give_up(l);
    }
    e->mutex_asked = 0;
    phase = zkl_lock_phase_of(l);
    if (phase == ZKL_LOCK_RELEASING || phase == ZKL_LOCK_ABANDONING)
        return; /* its next event brings us back */
    e->phase = ZKL_LEASE_IDLE; /* idle, or held after a release that failed (reused next time) */
    e->step = STEP_NONE;
}

static void drive_mutex(zkl_lease *e)
{
    if (e->step == STEP_LOCK)
        take_mutex(e);
    else if (e->step == STEP_UNLOCK)
        drop_mutex(e);
}

/* ---------------------------------------------------------------- stepping */

static uint64_t counted(zkl_lease *e, uint64_t id)
{
    if (id != 0)
        e->inflight++;
    return id;
}

static uint64_t submit_step(zkl_lease *e)
{
    switch (e->step) {
    case STEP_READ:
        return counted(e, zkl_op_get(e->s, e->holder_path, 0, &e->route));
    case STEP_DELETE:
        return counted(e, zkl_op_delete(e->s, e->holder_path, -1, &e->route));
    case STEP_CREATE:
        return counted(e, zkl_op_create(e->s, e->holder_path, e->record, (int)e->record_len,
                                        &e->acl, ZOO_PERSISTENT, 0, &e->route));
    default:
        return 0;
    }
}

static void go(zkl_lease *e, lease_step step)
{
    e->step = step;
    e->op_id = 0;
    if (step == STEP_LOCK || step == STEP_UNLOCK) {
        e->unlock_sent = 0;
        drive_mutex(e);
        return;
    }
    if (zkl_session_state(e->s) != ZKL_CONNECTED) {
        finish(e, ZKL_LEASE_FAILED, ZCONNECTIONLOSS);
        return;
    }
    e->op_id = submit_step(e);
    if (e->op_id == 0)
        finish(e, ZKL_LEASE_FAILED, ZSYSTEMERROR);
}

/* ---------------------------------------------------------------- deciding */

/* Prepares the record ending at now + duration, then replaces the old one (if any). */
static void write_record(zkl_lease *e, double now)
{
    double end = floor(now + e->duration); /* kazoo's strftime drops the fraction */
    if (!(end > -9e15 && end < 9e15)) { /* also NaN */
        finish(e, ZKL_LEASE_FAILED, ZBADARGUMENTS);
        return;
    }
    size_t len;
    char *record = zkl_lease_record_encode(e->identity, (size_t)e->identity_len, (int64_t)end,
                                           &len);
    if (!record) {
        finish(e, ZKL_LEASE_FAILED, errno == ENOMEM ? ZSYSTEMERROR : ZBADARGUMENTS);
        return;
    }
    set_string(&e->record, record);
    e->record_len = len;
    e->end = (int64_t)end;
    go(e, e->found_exists ? STEP_DELETE : STEP_CREATE);
}

/* kazoo's checks, in kazoo's order, on the record read. */
static void judge_record(zkl_lease *e, double now)
{
    zkl_lease_record r;
    const char *why = zkl_lease_record_parse(e->found, (size_t)e->found_len, &r);
    int64_t end = 0;
    if (!why && !r.has_version)
        why = "no \"version\"";
    if (!why && !r.version_is_one) {
        zkl_lease_record_clear(&r);
        finish(e, ZKL_LEASE_OTHER_VERSION, ZOK);
        return;
    }
    if (!why && (!r.has_end || !r.end_is_string))
        why = "no \"end\" string";
    if (!why && zkl_lease_time_parse(r.end, r.end_len, &end) != 0)
        why = "\"end\" is not a %Y-%m-%dT%H:%M:%S time";
    if (!why && !r.has_holder)
        why = "no \"holder\"";
    if (why) {
        zkl_lease_record_clear(&r);
        e->why = why;
        finish(e, ZKL_LEASE_BAD_RECORD, ZOK);
        return;
    }
    int same = r.holder_is_string && r.holder_len == (size_t)e->identity_len &&
               memcmp(r.holder, e->identity, r.holder_len) == 0;
    zkl_lease_record_clear(&r);
    if (!same && now < (double)end)
        finish(e, ZKL_LEASE_HELD_ELSEWHERE, ZOK);
    else
        write_record(e, now); /* ours to renew, or ended */
}

/* ---------------------------------------------------------------- results */

static void record_read(zkl_lease *e, const zkl_event *ev)
{
    if (ev->rc != ZOK && ev->rc != ZNONODE) {
        finish(e, ZKL_LEASE_FAILED, ev->rc);
        return;
    }
    e->found_exists = ev->rc == ZOK;
    e->found_len = ev->rc == ZOK && ev->data_len > 0 ? ev->data_len : 0;
    char *copy = malloc((size_t)e->found_len + 1);
    if (!copy) {
        finish(e, ZKL_LEASE_FAILED, ZSYSTEMERROR);
        return;
    }
    if (e->found_len > 0)
        memcpy(copy, ev->data, (size_t)e->found_len);
    set_string(&e->found, copy);
    if (e->abandoned) {
        finish(e, ZKL_LEASE_ABANDONED, ZOK);
        return;
    }
    e->phase = ZKL_LEASE_NEEDS_TIME;
    e->step = STEP_NONE;
}

static void on_op(zkl_lease *e, const zkl_event *ev)
{
    if (ev->rc == ZINVALIDSTATE) {
        finish(e, ZKL_LEASE_FAILED, ZSESSIONEXPIRED);
        return;
    }
    switch (e->step) {
    case STEP_READ:
        record_read(e, ev);
        break;
    case STEP_DELETE:
        if (ev->rc != ZOK && ev->rc != ZNONODE)
            finish(e, ZKL_LEASE_FAILED, ev->rc);
        else if (e->abandoned)
            finish(e, ZKL_LEASE_ABANDONED, ZOK);
        else
            go(e, STEP_CREATE);
        break;
    case STEP_CREATE:
        if (ev->rc == ZOK)
            finish(e, ZKL_LEASE_OBTAINED, ZOK); /* also when abandoned meanwhile: it is */
        else
            finish(e, ZKL_LEASE_FAILED, ev->rc);
        break;
    default:
        break;
    }
}

/* A change of the connection ends an attempt under way (kazoo's raises ConnectionLoss). */
static void on_state(zkl_lease *e, zkl_state state)
{
    if (e->phase != ZKL_LEASE_WORKING && e->phase != ZKL_LEASE_NEEDS_TIME)
        return;
    if (state == ZKL_SUSPENDED) {
        finish(e, ZKL_LEASE_FAILED, ZCONNECTIONLOSS);
    } else if (state == ZKL_LOST) {
        zkl_session *s = e->s;
        finish(e, ZKL_LEASE_FAILED,
               zkl_session_is_stopped(s) ? ZCLOSING
               : zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED ? ZAUTHFAILED
                                                                   : ZSESSIONEXPIRED);
    }
}

/* ---------------------------------------------------------------- life */

static void destroy(zkl_lease *e)
{
    if (e->mutex) {
        zkl_lock_observe(e->mutex, NULL, NULL);
        zkl_lock_free(e->mutex); /* an orphan lock finishes its own release */
    }
    free(e->path);
    free(e->holder_path);
    free(e->identity);
    free(e->found);
    free(e->record);
    zkl_acl_free(&e->acl);
    free(e);
}

static void maybe_destroy(zkl_lease *e)
{
    if (!e->orphaned || e->inflight > 0)
        return;
    if (e->s && e->phase != ZKL_LEASE_IDLE)
        return; /* releasing the lock */
    destroy(e);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_lease *e = ctx;
    e->inflight--;
    if (ev->kind == ZKL_EV_OP && ev->id == e->op_id && e->s) {
        e->op_id = 0;
        on_op(e, ev);
    }
    maybe_destroy(e);
}

static void on_mutex(void *ctx, int state)
{
    zkl_lease *e = ctx;
    if (e->s) {
        if (state != ZKL_LOCK_NO_STATE)
            on_state(e, (zkl_state)state);
        drive_mutex(e);
    }
    maybe_destroy(e);
}

zkl_lease *zkl_lease_new(zkl_session *s, const char *path, const char *identity, int len,
                         double duration, const struct ACL_vector *acl)
{
    if (len < 0 || !zkl_utf8_valid(identity, (size_t)len)) {
        errno = EILSEQ;
        return NULL;
    }
    zkl_lease *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->s = s;
    e->route.fn = on_route;
    e->route.ctx = e;
    e->duration = duration;
    errno = 0;
    e->path = strdup(path);
    e->holder_path = zkl_join_path(path, "lease_holder");
    e->identity = malloc((size_t)len + 1);
    if (!e->path || !e->holder_path || !e->identity ||
        zkl_acl_copy(&e->acl, acl ? acl : &ZOO_OPEN_ACL_UNSAFE) != 0)
        goto fail;
    memcpy(e->identity, identity, (size_t)len);
    e->identity[len] = '\0';
    e->identity_len = len;
    e->mutex = zkl_lock_new(s, path, identity, len, ZKL_LOCK_EXCLUSIVE, acl);
    if (!e->mutex)
        goto fail;
    zkl_lock_observe(e->mutex, on_mutex, e);
    return e;
fail:
    if (!errno)
        errno = ENOMEM;
    e->s = NULL;
    destroy(e);
    return NULL;
}

void zkl_lease_free(zkl_lease *e)
{
    if (!e)
        return;
    e->orphaned = 1;
    if (e->s)
        zkl_lease_abandon(e);
    maybe_destroy(e);
}

void zkl_lease_forget_session(zkl_lease *e)
{
    e->s = NULL;
    e->inflight = 0; /* the session delivered (or dropped) everything before it went */
    e->op_id = 0;
    if (e->phase != ZKL_LEASE_IDLE && e->outcome == ZKL_LEASE_PENDING) {
        e->outcome = ZKL_LEASE_FAILED;
        e->rc = ZCLOSING;
    }
    e->phase = ZKL_LEASE_IDLE;
    e->step = STEP_NONE;
    if (e->mutex)
        zkl_lock_forget_session(e->mutex);
}

int zkl_lease_obtain(zkl_lease *e)
{
    if (e->phase != ZKL_LEASE_IDLE) {
        errno = EALREADY;
        return -1;
    }
    if (!e->s || zkl_session_state(e->s) != ZKL_CONNECTED) {
        errno = ENOTCONN;
        return -1;
    }
    e->outcome = ZKL_LEASE_PENDING;
    e->rc = ZOK;
    e->why = NULL;
    e->end = 0;
    e->abandoned = 0;
    e->mutex_asked = 0;
    e->found_exists = 0;
    e->phase = ZKL_LEASE_WORKING;
    go(e, STEP_LOCK);
    return 0;
}

int zkl_lease_decide(zkl_lease *e, double now)
{
    if (e->phase != ZKL_LEASE_NEEDS_TIME || !e->s) {
        errno = EINVAL;
        return -1;
    }
    e->phase = ZKL_LEASE_WORKING;
    if (!e->found_exists)
        write_record(e, now);
    else
        judge_record(e, now);
    return 0;
}

void zkl_lease_abandon(zkl_lease *e)
{
    e->abandoned = 1;
    if (e->phase == ZKL_LEASE_NEEDS_TIME || (e->phase == ZKL_LEASE_WORKING && !e->op_id))
        finish(e, ZKL_LEASE_ABANDONED, ZOK);
    /* an op under way: its result ends the attempt */
}

zkl_lease_phase zkl_lease_phase_of(const zkl_lease *e)
{
    return e->phase;
}

zkl_lease_outcome zkl_lease_outcome_of(const zkl_lease *e, int *rc)
{
    if (rc)
        *rc = e->rc;
    return e->outcome;
}

const char *zkl_lease_why(const zkl_lease *e)
{
    return e->outcome == ZKL_LEASE_BAD_RECORD ? e->why : NULL;
}

int64_t zkl_lease_end(const zkl_lease *e)
{
    return e->end;
}

long zkl_lease_inflight(const zkl_lease *e)
{
    return e->inflight;
}
