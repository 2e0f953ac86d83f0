/*
 * counter.c — see counter.h.  Steps: GET (value and version), ENSURE (create the path and its
 * parents when the GET found no node, then GET again), SET (value + delta at the read
 * version; BadVersion: BACKOFF, a session timer, then GET again).  ZKL_COUNTER_CURATOR_ATOMIC:
 * ENSURE is the try itself (the node created holding the new value), and a failed try ends
 * the operation NOT_SET once its tries are spent.  Only the result of the op
 * the counter waits for (op_id) and the timer it armed (timer_id) count; any other op that
 * comes back is stale and only counted.  Timers are not counted: they are taken back.
 */
#include "counter.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ops.h"
#include "../core/random.h"
#include "../core/timers.h"
#include "common.h"

enum { MAX_ENSURE_ROUNDS = 10, DATA_MAX = 64 };

typedef enum { STEP_NONE, STEP_GET, STEP_ENSURE, STEP_SET, STEP_BACKOFF } counter_step;

struct zkl_counter {
    zkl_session *s;
    zkl_route route;
    char *path;
    zkl_counter_kind kind;
    zkl_counter_value def, a, b, pre, post;
    zkl_counter_op op;
    long max_tries, tries;
    zkl_counter_phase phase;
    zkl_counter_outcome outcome;
    int rc;
    counter_step step;
    int parked, orphaned, listening;
    int ensure_rounds;
    int set_unsure;      /* a set's reply was lost: did it apply? */
    int set_version;     /* the version it was made against */
    char written[DATA_MAX];
    int written_len;
    uint64_t op_id;
    long inflight;
    uint64_t timer_id;     /* the backoff timer armed, 0: none */
    long base_ms, cap_ms;  /* the backoff policy */
    long retries;          /* BadVersion retries of the current (or last) operation */
    long backoffs;         /* pauses taken (their timer fired) since the counter was made */
    uint64_t random_state; /* for the jitter */
};

int zkl_counter_float_repr(double v, char *out, size_t size)
{
    if (isnan(v))
        return snprintf(out, size, "nan");
    if (isinf(v))
        return snprintf(out, size, v < 0 ? "-inf" : "inf");
    char buf[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) { /* shortest digits that read back the same */
        snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    /* buf: [-]d[.ddd]e[+-]XX -> digits and decimal exponent */
    const char *p = buf;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++) {
        if (isdigit((unsigned char)*p))
            digits[nd++] = *p;
    }
    digits[nd] = '\0';
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = '\0';
    int decpt = exp10 + 1; /* digits d1d2... = 0.d1d2... * 10^decpt */
    char res[64];
    int n = 0;
    if (neg)
        res[n++] = '-';
    if (decpt > -4 && decpt <= 16) { /* Python's repr: fixed notation */
        if (decpt <= 0) {
            res[n++] = '0';
            res[n++] = '.';
            for (int i = 0; i < -decpt; i++)
                res[n++] = '0';
            for (int i = 0; i < nd; i++)
                res[n++] = digits[i];
        } else {
            for (int i = 0; i < decpt; i++)
                res[n++] = i < nd ? digits[i] : '0';
            res[n++] = '.';
            if (nd > decpt) {
                for (int i = decpt; i < nd; i++)
                    res[n++] = digits[i];
            } else {
                res[n++] = '0';
            }
        }
        res[n] = '\0';
    } else {
        res[n++] = digits[0];
        if (nd > 1) {
            res[n++] = '.';
            for (int i = 1; i < nd; i++)
                res[n++] = digits[i];
        }
        snprintf(res + n, sizeof res - (size_t)n, "e%c%02d", decpt - 1 < 0 ? '-' : '+',
                 abs(decpt - 1));
    }
    return snprintf(out, size, "%s", res);
}

static int eight_bytes(const zkl_counter *c)
{
    return c->kind == ZKL_COUNTER_CURATOR_LONG || c->kind == ZKL_COUNTER_CURATOR_ATOMIC;
}

/* DistributedAtomicValue's rules (counter.h): a missing node is not created by a read. */
static int atomic(const zkl_counter *c) { return c->kind == ZKL_COUNTER_CURATOR_ATOMIC; }

/* Parses data as the counter's type: 0, or -1 when it is not one. */
static int parse(const zkl_counter *c, const char *data, int len, zkl_counter_value *v)
{
    if (len == 0) {
        if (eight_bytes(c))
            v->i = 0; /* DistributedAtomicLong.bytesToValue */
        else
            *v = c->def;
        return 0;
    }
    if (eight_bytes(c)) {
        if (len != 8)
            return -1;
        const unsigned char *b = (const unsigned char *)data;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = u << 8 | b[i];
        v->i = (int64_t)u;
        return 0;
    }
    if (c->kind == ZKL_COUNTER_CURATOR) {
        if (len != 4)
            return -1;
        const unsigned char *b = (const unsigned char *)data;
        uint32_t u = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        v->i = (int32_t)u;
        return 0;
    }
    char buf[DATA_MAX + 1];
    if (len > DATA_MAX)
        return -1;
    memcpy(buf, data, (size_t)len);
    buf[len] = '\0';
    char *p = buf, *end;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '\0')
        return -1;
    errno = 0;
    if (c->kind == ZKL_COUNTER_INT) { /* Python's int(): sign and digits, no point */
        const char *q = (*p == '+' || *p == '-') ? p + 1 : p;
        if (!isdigit((unsigned char)*q))
            return -1;
        long long x = strtoll(p, &end, 10);
        if (errno == ERANGE)
            return -1;
        v->i = x;
    } else {
        if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
            return -1;
        v->f = strtod(p, &end);
    }
    while (isspace((unsigned char)*end))
        end++;
    return *end == '\0' ? 0 : -1;
}

/* Formats v as the counter stores it; length, or -1 when it does not fit (curator). */
static int format(const zkl_counter *c, zkl_counter_value v, char *out)
{
    switch (c->kind) {
    case ZKL_COUNTER_CURATOR: {
        if (v.i < INT32_MIN || v.i > INT32_MAX)
            return -1;
        uint32_t u = (uint32_t)(int32_t)v.i;
        out[0] = (char)(u >> 24);
        out[1] = (char)(u >> 16);
        out[2] = (char)(u >> 8);
        out[3] = (char)u;
        return 4;
    }
    case ZKL_COUNTER_CURATOR_LONG:
    case ZKL_COUNTER_CURATOR_ATOMIC: {
        uint64_t u = (uint64_t)v.i;
        for (int i = 7; i >= 0; i--) {
            out[i] = (char)(u & 0xff);
            u >>= 8;
        }
        return 8;
    }
    case ZKL_COUNTER_INT:
        return snprintf(out, DATA_MAX, "%lld", (long long)v.i);
    default:
        return zkl_counter_float_repr(v.f, out, DATA_MAX);
    }
}

static void on_state(zkl_session *s, zkl_state state, void *ctx);

/* Takes the backoff timer back: its route will not be called. */
static void stop_timer(zkl_counter *c)
{
    if (c->timer_id && c->s)
        zkl_session_cancel_timer(c->s, c->timer_id);
    c->timer_id = 0;
}

static void finish(zkl_counter *c, zkl_counter_outcome outcome, int rc)
{
    stop_timer(c);
    c->phase = ZKL_COUNTER_IDLE;
    c->outcome = outcome;
    c->rc = rc;
    c->step = STEP_NONE;
    c->parked = 0;
    c->op_id = 0;
    c->set_unsure = 0;
}

static uint64_t counted(zkl_counter *c, uint64_t id)
{
    if (id)
        c->inflight++;
    return id;
}

static uint64_t submit(zkl_counter *c)
{
    switch (c->step) {
    case STEP_GET:
        return counted(c, zkl_op_get(c->s, c->path, 0, &c->route));
    case STEP_SET:
        return counted(c, zkl_op_set(c->s, c->path, c->written, c->written_len, c->set_version,
                                     &c->route));
    case STEP_ENSURE: {
        uint64_t id; /* the last create (the path itself) decides */
        char seed[DATA_MAX];
        int len = c->kind == ZKL_COUNTER_CURATOR || c->kind == ZKL_COUNTER_CURATOR_LONG
                      ? format(c, c->def, seed) : 0;
        if (atomic(c)) { /* the try itself: the node holding the new value */
            memcpy(seed, c->written, (size_t)c->written_len);
            len = c->written_len;
        }
        zkl_create_path_data(c->s, c->path, seed, len > 0 ? len : 0, &ZOO_OPEN_ACL_UNSAFE,
                             &c->route, &c->inflight, &id);
        return id;
    }
    default:
        return 0;
    }
}

static void go(zkl_counter *c, counter_step step)
{
    c->step = step;
    c->op_id = 0;
    c->parked = 0;
    if (c->orphaned) {
        finish(c, ZKL_COUNTER_FAILED, ZCLOSING);
        return;
    }
    if (zkl_session_state(c->s) != ZKL_CONNECTED) {
        c->parked = 1;
        return;
    }
    c->op_id = submit(c);
    if (c->op_id == 0)
        finish(c, ZKL_COUNTER_FAILED, ZSYSTEMERROR);
}

/* The pause before BadVersion retry n (1, 2, ...), ms: "equal jitter", uniform in
 * [ceiling / 2, ceiling] where the ceiling is base_ms doubled n - 1 times, at most cap_ms. */
long zkl_counter_backoff_ms(long n, long base_ms, long cap_ms, uint64_t *random_state)
{
    long ceiling = base_ms;
    for (long i = 1; i < n && ceiling < cap_ms; i++)
        ceiling *= 2;
    if (ceiling > cap_ms)
        ceiling = cap_ms;
    double half = (double)ceiling / 2.0;
    return (long)(half + half * zkl_random_unit(random_state) + 0.5);
}

/* A set met BadVersion (someone else's update went through): read again after a pause, so
 * that the contenders that just collided do not all collide again. */
static void back_off(zkl_counter *c)
{
    c->retries++;
    c->step = STEP_BACKOFF;
    c->op_id = 0;
    c->parked = 0;
    if (c->orphaned) {
        finish(c, ZKL_COUNTER_FAILED, ZCLOSING);
        return;
    }
    long delay = zkl_counter_backoff_ms(c->retries, c->base_ms, c->cap_ms, &c->random_state);
    c->timer_id = zkl_session_add_timer(c->s, delay, &c->route);
    if (c->timer_id == 0)
        finish(c, ZKL_COUNTER_FAILED, ZSYSTEMERROR);
}

/* A try failed (someone else's update went through, or the node came or went): NOT_SET for a
 * CAS or when the tries are spent (post 0, as Curator's AtomicValue), else the next try. */
static void failed_try(zkl_counter *c)
{
    if (c->op == ZKL_COUNTER_OP_CAS || c->op == ZKL_COUNTER_OP_INIT || (c->max_tries > 0 && c->tries >= c->max_tries)) {
        c->post.i = 0;
        finish(c, ZKL_COUNTER_NOT_SET, ZOK);
        return;
    }
    c->tries++;
    back_off(c);
}

/* The step under way writes the value (a set, or the create of a missing node). */
static int writing(const zkl_counter *c)
{
    return c->step == STEP_SET || (c->step == STEP_ENSURE && atomic(c));
}

/* Computes the value the operation writes after reading v: 0, or -1 when it finished. */
static int next_value(zkl_counter *c, zkl_counter_value v)
{
    zkl_counter_value post;
    switch (c->op) {
    case ZKL_COUNTER_OP_ADD:
        if (c->kind == ZKL_COUNTER_FLOAT) {
            post.f = v.f + c->a.f;
        } else if (__builtin_add_overflow(v.i, c->a.i, &post.i)) {
            finish(c, ZKL_COUNTER_OVERFLOW, ZOK);
            return -1;
        }
        break;
    case ZKL_COUNTER_OP_CAS:
        post = c->b;
        break;
    default:
        post = c->a;
        break;
    }
    int n = format(c, post, c->written);
    if (n < 0 || n >= DATA_MAX) {
        finish(c, ZKL_COUNTER_OVERFLOW, ZOK);
        return -1;
    }
    c->written_len = n;
    c->post = post;
    return 0;
}

static int same_written(const zkl_counter *c, const zkl_event *ev)
{
    return ev->data_len == c->written_len &&
           (c->written_len == 0 || memcmp(ev->data, c->written, (size_t)c->written_len) == 0);
}

static void value_read(zkl_counter *c, const zkl_event *ev)
{
    if (ev->rc == ZNONODE && atomic(c)) { /* tryOnce's createIt */
        c->pre.i = 0;
        c->post.i = 0;
        if (c->op == ZKL_COUNTER_OP_READ) {
            finish(c, ZKL_COUNTER_OK, ZOK);
        } else if (c->op == ZKL_COUNTER_OP_CAS) {
            finish(c, ZKL_COUNTER_NOT_SET, ZOK);
        } else if (next_value(c, c->pre) == 0) {
            c->set_version = -1; /* a create: the node's version will be 0 */
            go(c, STEP_ENSURE);
        }
        return;
    }
    if (ev->rc == ZNONODE) {
        if (++c->ensure_rounds > MAX_ENSURE_ROUNDS)
            finish(c, ZKL_COUNTER_FAILED, ZNONODE);
        else
            go(c, STEP_ENSURE);
        return;
    }
    if (ev->rc != ZOK) {
        finish(c, ZKL_COUNTER_FAILED, ev->rc);
        return;
    }
    if (c->set_unsure) {
        c->set_unsure = 0;
        if (ev->has_stat && ev->stat.version == c->set_version + 1 && same_written(c, ev)) {
            finish(c, ZKL_COUNTER_OK, ZOK); /* our set went through before the loss */
            return;
        }
    }
    zkl_counter_value v;
    if (parse(c, ev->data, ev->data_len, &v) != 0) {
        finish(c, ZKL_COUNTER_BAD_DATA, ZOK);
        return;
    }
    c->pre = v;
    if (c->op == ZKL_COUNTER_OP_READ) {
        c->post = v;
        finish(c, ZKL_COUNTER_OK, ZOK);
        return;
    }
    if ((c->op == ZKL_COUNTER_OP_CAS && v.i != c->a.i) || c->op == ZKL_COUNTER_OP_INIT) {
        c->post.i = 0;
        finish(c, ZKL_COUNTER_NOT_SET, ZOK);
        return;
    }
    if (next_value(c, v) != 0)
        return;
    c->set_version = c->op == ZKL_COUNTER_OP_FORCE ? -1 : ev->stat.version;
    go(c, STEP_SET);
}

static void on_op(zkl_counter *c, const zkl_event *ev)
{
    switch (ev->rc) {
    case ZCLOSING:
    case ZAUTHFAILED:
        finish(c, ZKL_COUNTER_FAILED, ev->rc);
        return;
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:
        if (writing(c))
            c->set_unsure = 1;
        c->step = STEP_GET;
        c->parked = 1; /* LOST follows; then CONNECTED runs it */
        return;
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
        if (writing(c))
            c->set_unsure = 1;
        go(c, STEP_GET);
        return;
    default:
        break;
    }
    switch (c->step) {
    case STEP_GET:
        value_read(c, ev);
        break;
    case STEP_ENSURE:
        if (!atomic(c))
            go(c, STEP_GET); /* created, or it existed: the GET tells */
        else if (ev->rc == ZOK)
            finish(c, ZKL_COUNTER_OK, ZOK);
        else if (ev->rc == ZNODEEXISTS)
            failed_try(c);
        else
            finish(c, ZKL_COUNTER_FAILED, ev->rc);
        break;
    case STEP_SET:
        if (ev->rc == ZOK)
            finish(c, ZKL_COUNTER_OK, ZOK);
        else if (ev->rc == ZBADVERSION || (ev->rc == ZNONODE && atomic(c)))
            failed_try(c);
        else
            finish(c, ZKL_COUNTER_FAILED, ev->rc);
        break;
    default:
        break;
    }
}

static void destroy(zkl_counter *c)
{
    stop_timer(c);
    if (c->s && c->listening)
        zkl_session_remove_state_listener(c->s, on_state, c);
    free(c->path);
    free(c);
}

static void maybe_destroy(zkl_counter *c)
{
    if (c->orphaned && c->inflight <= 0 && c->phase == ZKL_COUNTER_IDLE)
        destroy(c);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_counter *c = ctx;
    if (ev->kind == ZKL_EV_TIMER) {
        if (ev->id == c->timer_id) {
            c->timer_id = 0;
            c->backoffs++;
            if (c->phase == ZKL_COUNTER_BUSY && c->step == STEP_BACKOFF)
                go(c, STEP_GET);
        }
    } else if (ev->kind == ZKL_EV_OP) {
        c->inflight--;
        if (ev->id == c->op_id && c->s && c->phase == ZKL_COUNTER_BUSY) {
            c->op_id = 0;
            on_op(c, ev);
        }
    }
    maybe_destroy(c);
}

static void on_state(zkl_session *s, zkl_state state, void *ctx)
{
    zkl_counter *c = ctx;
    if (c->phase == ZKL_COUNTER_BUSY) {
        if (state == ZKL_CONNECTED && c->parked) {
            go(c, c->step);
        } else if (state == ZKL_LOST) {
            if (zkl_session_is_stopped(s)) {
                finish(c, ZKL_COUNTER_FAILED, ZCLOSING);
            } else if (zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED) {
                finish(c, ZKL_COUNTER_FAILED, ZAUTHFAILED);
            } else { /* expired: what was in flight is stale; read again on the new session */
                if (writing(c) && c->op_id)
                    c->set_unsure = 1;
                stop_timer(c); /* a pause under way: the new session reads at once */
                c->op_id = 0;
                c->step = STEP_GET;
                c->parked = 1;
            }
        }
    }
    maybe_destroy(c);
}

zkl_counter *zkl_counter_new(zkl_session *s, const char *path, zkl_counter_kind kind,
                             zkl_counter_value def)
{
    zkl_counter *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->s = s;
    c->route.fn = on_route;
    c->route.ctx = c;
    c->kind = kind;
    c->def = def;
    c->base_ms = ZKL_COUNTER_BACKOFF_BASE_MS;
    c->cap_ms = ZKL_COUNTER_BACKOFF_CAP_MS;
    c->random_state = zkl_random_seed(c);
    c->pre = c->post = def;
    c->path = strdup(path);
    if (!c->path || zkl_session_add_state_listener(s, on_state, c) != 0) {
        c->s = NULL;
        destroy(c);
        errno = ENOMEM;
        return NULL;
    }
    c->listening = 1;
    return c;
}

void zkl_counter_free(zkl_counter *c)
{
    if (!c)
        return;
    c->orphaned = 1;
    if (c->phase == ZKL_COUNTER_BUSY && (c->parked || !c->s || c->op_id == 0))
        finish(c, ZKL_COUNTER_FAILED, ZCLOSING);
    maybe_destroy(c);
}

void zkl_counter_forget_session(zkl_counter *c)
{
    c->timer_id = 0; /* the session is gone, and its timers with it */
    c->s = NULL;
    c->inflight = 0;
    if (c->phase == ZKL_COUNTER_BUSY)
        finish(c, ZKL_COUNTER_FAILED, ZCLOSING);
}

int zkl_counter_start(zkl_counter *c, int add, zkl_counter_value delta)
{
    zkl_counter_value none;
    memset(&none, 0, sizeof none);
    return zkl_counter_start_op(c, add ? ZKL_COUNTER_OP_ADD : ZKL_COUNTER_OP_READ, delta, none, 0);
}

int zkl_counter_start_op(zkl_counter *c, zkl_counter_op op, zkl_counter_value a,
                         zkl_counter_value b, long max_tries)
{
    if (op != ZKL_COUNTER_OP_READ && op != ZKL_COUNTER_OP_ADD && !atomic(c)) {
        errno = EINVAL;
        return -1;
    }
    if (!c->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (c->phase != ZKL_COUNTER_IDLE) {
        errno = EALREADY;
        return -1;
    }
    c->phase = ZKL_COUNTER_BUSY;
    c->op = op;
    c->a = a;
    c->b = b;
    c->max_tries = op == ZKL_COUNTER_OP_CAS || op == ZKL_COUNTER_OP_INIT ? 1
                   : op == ZKL_COUNTER_OP_FORCE ? 0 : max_tries;
    c->tries = 1;
    c->outcome = ZKL_COUNTER_OK;
    c->rc = ZOK;
    c->ensure_rounds = 0;
    c->set_unsure = 0;
    c->retries = 0;
    go(c, STEP_GET);
    return 0;
}

zkl_counter_phase zkl_counter_phase_of(const zkl_counter *c) { return c->phase; }

zkl_counter_outcome zkl_counter_outcome_of(const zkl_counter *c, int *rc)
{
    if (rc)
        *rc = c->rc;
    return c->outcome;
}

zkl_counter_value zkl_counter_pre(const zkl_counter *c) { return c->pre; }
zkl_counter_value zkl_counter_post(const zkl_counter *c) { return c->post; }
long zkl_counter_inflight(const zkl_counter *c) { return c->inflight; }

int zkl_counter_set_backoff(zkl_counter *c, long base_ms, long cap_ms)
{
    if (base_ms < 1 || cap_ms < base_ms || cap_ms > ZKL_COUNTER_BACKOFF_MAX_MS) {
        errno = EINVAL;
        return -1;
    }
    c->base_ms = base_ms;
    c->cap_ms = cap_ms;
    return 0;
}

long zkl_counter_tries(const zkl_counter *c) { return c->tries; }
long zkl_counter_retries(const zkl_counter *c) { return c->retries; }
long zkl_counter_backoffs(const zkl_counter *c) { return c->backoffs; }
int zkl_counter_backing_off(const zkl_counter *c) { return c->timer_id != 0; }
