/*
 * ops.c — see ops.h.  Submission and the library's completion callbacks.
 *
 * An op is tracked as pending before the library sees it, because its completion may run on
 * the library's thread before zoo_a* even returns.  When zoo_a* refuses the op outright it
 * never calls back, so the refusal is turned into the op's completion here.  Callbacks copy
 * what they are handed (the library frees it on return) and queue the op.
 *
 * Ops wait, unsent, while the session is not connected: libzookeeper fails every request it
 * holds when a connection attempt fails, so an op handed to it between connections would fail
 * with ConnectionLoss though the server never saw it; kazoo queues such requests until it
 * reconnects.  Such an op keeps its own copy of its arguments (zkl_request) in the session's
 * unsent list, and is handed to the library, in order, once the session is CONNECTED again
 * (session.c); if the session ends first (expired, auth failed, stopped) it fails with the
 * others when the handle closes.  While SUSPENDED that happens within a session timeout (the
 * session then counts as lost, session.c); while a new session's handle has not connected
 * yet (after an expiry) an op waits at most a session timeout too, then fails with
 * ConnectionLoss (zkl_ops_fail_overdue): no wait is without an end.  An op the library
 * already holds when the connection drops fails with ConnectionLoss as before: its request
 * may have reached the server.
 *
 * The cork: reads for the caller (get, exists, children without a route) wait in the same
 * unsent list while connected, until the owner next waits, delivers events or sends anything
 * else (zkl_ops_flush), or CORK_MAX of them gathered.  The library wakes its I/O thread (a
 * pipe write, a context switch) for every op it is handed; handed a burst, its thread sends
 * the burst in a few wake-ups, as it does for a C program's loop of zoo_aget.  At the pace a
 * script makes calls, every read woke it: that cost more than everything else an async read
 * costs.  Every other op sends the list first, so the server sees a session's ops in the order
 * they were made, and no write is held back.  While reads wait the session's fd is readable,
 * so an event loop polling it comes back (dispatch) and sends them.  A host that reads a
 * notify socket instead (waker.h, nginx) gets no cork: there the fd's poke would wake the
 * host once more for every read, a round trip through its event loop that costs more than
 * the library's wake-up it saves.
 *
 * The window: at most s->window ops are handed to the library and not yet taken back by the
 * owner (answered, and their event popped); the others wait in the same unsent list, in
 * order, and go out as the owner takes answers (zkl_ops_taken).  A server handles one
 * session's requests in order, its pings among them: 100k creates handed over at once put a
 * ping 100k requests back, the session missed its timeout and expired.  The window bounds
 * that wait to what window requests take, whatever a recipe or a script asks for at once,
 * and bounds the answers waiting for a slow owner.  Every op comes back (answered, or failed
 * when its connection or handle ends), so every place in the window frees.
 *
 * Batched writes (ops.h): they wait in the cork like the caller's reads, and when the list is
 * sent, a run of them next to each other goes out as one multi of at most BATCH_MAX, which
 * takes a place in the window for each of its ops (all freed when its last op is taken: the
 * next multi is as big), so a session never has more than window ops at the server.  The
 * multi's answer is split into each op's own event.  A multi that fails because of one op
 * ran nothing: that op gets its error, and the others, which did not run, come back marked
 * ZKL_OP_NOT_RUN; the owner takes them and sends each again on its own (zkl_ops_resend), so
 * a failing write costs its neighbours one more trip and never their result.  The multi's
 * buffers are one block that its last op owns until the answer comes (when the library
 * drops the request, the event frees it).
 *
 * Batched listings go the same way as one multiRead (the library copies their paths), each
 * answered on its own.  A server older than 3.6 does not know multiRead: it answers
 * ZUNIMPLEMENTED at once, ahead of the requests sent before it, and closes the connection,
 * and the library takes a reply out of order for a broken connection (every op it holds
 * fails, as ConnectionLoss: finish).  So on each connection (the library's connect hook
 * counts them: a reconnection may reach another server) the first multiRead goes when
 * nothing else is in flight (run_waits): a refusal then comes in order and fails only its
 * listings, which are sent again alone, as every later one of the session (zkl_ops_resend);
 * once one is answered, the others go as they come.
 */
#include "ops.h"
#include "path.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "clock.h"
#include "session_private.h"

/* Reads gathered before they are sent anyway.  A bigger burst wakes the I/O thread fewer times
 * per read: 20000 pipelined gets took ~24 us of client CPU per read (median of 8 runs) with
 * 128, ~21.5 with 1024 or 4096, about what raw C takes.  Held reads cost no latency that
 * matters: any wait sends them. */
enum { CORK_MAX = 1024 };

/* Batched writes in one multi at most.  A server commits a multi's ops in one request: on this
 * project's loopback server, creates went from 17.9k to 63.8k a second, deletes from 23.1k to
 * 77.3k, in multis of 50 (bench/write_rate.lua with MULTI=50, beside two CPU hogs).  A multi
 * also stays under half the packet limit (ZKL_MAX_PACKET). */
enum { BATCH_MAX = 50 };

/* zkl_request.batch: a batched write (a multi) or a batched listing (a multiRead). */
enum { BATCH_WRITE = 1, BATCH_READ = 2 };

static zkl_event *alloc_op(zkl_session *s, zkl_op_type type, const zkl_route *route)
{
    zkl_event *op = calloc(1, sizeof *op);
    if (!op)
        return NULL;
    op->kind = ZKL_EV_OP;
    op->op = type;
    op->id = ++s->next_op_id;
    op->session = s;
    op->generation = s->generation;
    if (route)
        op->route = *route;
    zkl_queue_track(&s->queue, op);
    return op;
}

/* Hands op to the library, in the window; what zoo_a* returned. */
static int call_library(zkl_session *s, zkl_event *op, const zkl_request *r);
static int hand_over(zkl_session *s, zkl_event *op, const zkl_request *r)
{
    op->windowed = 1; /* before the library can answer it, on its own thread */
    int rc = call_library(s, op, r);
    if (rc != ZOK) {
        op->windowed = 0; /* refused: the library will not call back */
        return rc;
    }
    if (++s->sent > s->max_sent)
        s->max_sent = s->sent;
    return rc;
}

void zkl_ops_taken(zkl_session *s, zkl_event *op)
{
    if (op->in_multi_read && (op->rc == ZOK || op->rc == ZNONODE || op->rc == ZNOAUTH))
        /* the server answered it: multiReads go as they come on that connection (probe_on:
         * a connection's first waits until every op before it was taken, this one too) */
        s->multi_read_on = s->probe_on;
    if (!op->windowed)
        return;
    s->sent -= op->windowed;
    op->windowed = 0;
    if (s->unsent_head)
        zkl_ops_flush(s);
}

/* A new op that is not corked: the reads waiting in the cork go first. */
static zkl_event *new_op(zkl_session *s, zkl_op_type type, const zkl_route *route)
{
    zkl_ops_flush(s);
    return alloc_op(s, type, route);
}

/* Asks for a watch on op: a routed one is remembered until it fires or is dropped.  Called
 * even when the op cannot be sent (no handle), so that its route still hears the drop when
 * the op's failure is delivered.  Out of memory: no route kept, and watch_requested stays 0. */
static int want_watch(zkl_session *s, zkl_event *op)
{
    if (op->route.fn && zkl_watch_routes_put(&s->watch_routes, op->id, op->route) != 0)
        return ZSYSTEMERROR;
    op->watch_requested = 1;
    return ZOK;
}

/* rc is what zoo_a* returned: anything but ZOK means no callback will come. */
static uint64_t submitted(zkl_session *s, zkl_event *op, int rc)
{
    uint64_t id = op->id;
    if (rc != ZOK) {
        op->rc = rc;
        zkl_queue_complete(&s->queue, op);
    }
    return id;
}

/* A live handle, or ZCLOSING (stopped) / ZAUTHFAILED (the server refused the auth: no new
 * session follows until start()) / ZSESSIONEXPIRED (between an expiry and a new session).
 * The library marks its handle AUTH_FAILED before the state event reaches the owner thread:
 * ops sent in between fail as after it, never as an expiry. */
static int handle_rc(const zkl_session *s)
{
    if (s->stopped)
        return s->zh ? ZOK : ZCLOSING;
    if (zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED ||
        (s->zh && zoo_state(s->zh) == ZOO_AUTH_FAILED_STATE))
        return ZAUTHFAILED;
    return s->zh ? ZOK : ZSESSIONEXPIRED;
}

/* The server's UNKNOWNSESSION (Java's KeeperException.Code -12; zookeeper.h has no name for
 * it): a request that reached the server after it expired the session, before the expiry
 * reached this client.  It means what ZSESSIONEXPIRED means, and is reported as that. */
enum { ZKL_SERVER_UNKNOWN_SESSION = -12 };

/* libzookeeper fails the ops it holds with ZOPERATIONTIMEOUT when it gives a connection up
 * for silence (its read timeout), and with ZRUNTIMEINCONSISTENCY when a reply comes out of
 * order (a server answers a request it does not know at once, ahead of the ones sent before
 * it, and closes the connection): each is a lost connection, kazoo's ConnectionLoss.  No
 * server sends the first code, nor the second for a single op or as a multi's own result
 * (a multi's rolled-back ops carry it: on_batch reads those first). */
static void finish(zkl_event *op, int rc)
{
    if (rc == ZCLOSING)
        rc = atomic_load(&op->session->closing_rc);
    else if (rc == ZKL_SERVER_UNKNOWN_SESSION)
        rc = ZSESSIONEXPIRED;
    else if (rc == ZOPERATIONTIMEOUT || rc == ZRUNTIMEINCONSISTENCY)
        rc = ZCONNECTIONLOSS;
    op->rc = rc;
    zkl_queue_complete(&op->session->queue, op);
}

static char *copy_bytes(const char *src, int len)
{
    char *dst = malloc(len > 0 ? (size_t)len + 1 : 1);
    if (!dst)
        return NULL;
    if (len > 0)
        memcpy(dst, src, (size_t)len);
    dst[len > 0 ? len : 0] = '\0';
    return dst;
}

static int copy_string_into(zkl_event *op, const char *s)
{
    if (!s)
        return ZOK;
    op->data_len = (int)strlen(s);
    op->data = copy_bytes(s, op->data_len);
    return op->data ? ZOK : ZSYSTEMERROR;
}

static int copy_strings(zkl_event *op, const struct String_vector *v)
{
    if (!v || v->count <= 0)
        return ZOK;
    op->strings = calloc((size_t)v->count, sizeof *op->strings);
    if (!op->strings)
        return ZSYSTEMERROR;
    for (int i = 0; i < v->count; i++) {
        op->strings[i] = strdup(v->data[i]);
        op->string_count++;
        if (!op->strings[i])
            return ZSYSTEMERROR;
    }
    return ZOK;
}

static int copy_acls(zkl_event *op, const struct ACL_vector *v)
{
    if (!v || v->count <= 0)
        return ZOK;
    op->acls = calloc((size_t)v->count, sizeof *op->acls);
    if (!op->acls)
        return ZSYSTEMERROR;
    for (int i = 0; i < v->count; i++) {
        zkl_acl *a = &op->acls[i];
        a->perms = v->data[i].perms;
        a->scheme = strdup(v->data[i].id.scheme ? v->data[i].id.scheme : "");
        a->id = strdup(v->data[i].id.id ? v->data[i].id.id : "");
        op->acl_count++;
        if (!a->scheme || !a->id)
            return ZSYSTEMERROR;
    }
    return ZOK;
}

static void keep_stat(zkl_event *op, const struct Stat *stat)
{
    if (stat) {
        op->stat = *stat;
        op->has_stat = 1;
    }
}

/* ---- completion callbacks (the library's completion thread, or its I/O thread) ---- */

static void on_void(int rc, const void *data)
{
    finish((zkl_event *)data, rc);
}

static void on_stat(int rc, const struct Stat *stat, const void *data)
{
    zkl_event *op = (zkl_event *)data;
    if (rc == ZOK)
        keep_stat(op, stat);
    /* an exists watch is registered on a missing node too */
    op->watch_registered = op->watch_requested && (rc == ZOK || rc == ZNONODE);
    finish(op, rc);
}

static void on_data(int rc, const char *value, int len, const struct Stat *stat,
                    const void *data)
{
    zkl_event *op = (zkl_event *)data;
    if (rc == ZOK) {
        keep_stat(op, stat);
        op->data_null = len < 0; /* ZooKeeper's null value (kazoo reads None) */
        op->data_len = len < 0 ? 0 : len;
        op->data = copy_bytes(value, op->data_len);
        if (!op->data)
            rc = ZSYSTEMERROR;
    }
    op->watch_registered = op->watch_requested && rc == ZOK;
    finish(op, rc);
}

static void on_string(int rc, const char *value, const void *data)
{
    zkl_event *op = (zkl_event *)data;
    if (rc == ZOK)
        rc = copy_string_into(op, value);
    finish(op, rc);
}

static void on_string_stat(int rc, const char *value, const struct Stat *stat, const void *data)
{
    zkl_event *op = (zkl_event *)data;
    if (rc == ZOK) {
        keep_stat(op, stat);
        rc = copy_string_into(op, value);
    }
    finish(op, rc);
}

static void on_strings_stat(int rc, const struct String_vector *strings, const struct Stat *stat,
                            const void *data)
{
    zkl_event *op = (zkl_event *)data;
    if (rc == ZOK) {
        keep_stat(op, stat);
        rc = copy_strings(op, strings);
    }
    op->watch_registered = op->watch_requested && rc == ZOK;
    finish(op, rc);
}

static void on_acl(int rc, struct ACL_vector *acl, struct Stat *stat, const void *data)
{
    zkl_event *op = (zkl_event *)data;
    if (rc == ZOK) {
        keep_stat(op, stat);
        rc = copy_acls(op, acl);
    }
    finish(op, rc);
}

/* A batch in flight: its ops, and what zoo_amulti reads and fills; one block (send_batch). */
typedef struct zkl_batch {
    int count;
    zkl_event *ops[BATCH_MAX];
    zoo_op_t zops[BATCH_MAX];
    zoo_op_result_t results[BATCH_MAX];
    char paths[]; /* the creates' path buffers, back to back */
} zkl_batch;

/* A batch's answer: each op gets its own result; when the multi failed because of one op, the
 * others (results OK or RUNTIMEINCONSISTENCY: rolled back or never tried) did not run.  When
 * the multi never ran (a lost connection, a closed handle) every result is the multi's rc.
 * A create's czxid is the multi's zxid, the one in its reply's header. */
static void on_batch(int rc, const void *data)
{
    zkl_batch *b = (zkl_batch *)data;
    int n = b->count, rcs[BATCH_MAX];
    zkl_event *ops[BATCH_MAX] = {0};
#ifdef ZKL_COMPLETION_ZXID
    int64_t zxid = rc == ZOK ? zoo_completion_zxid() : 0;
#else
    int64_t zxid = 0; /* (no batched creates: zkl_op_create_batched) */
#endif
    for (int i = 0; i < n; i++) {
        zkl_event *op = ops[i] = b->ops[i];
        const zoo_op_result_t *res = &b->results[i];
        rcs[i] = res->err;
        if (rc == ZRUNTIMEINCONSISTENCY) /* the connection broke (finish): it may have run */
            rcs[i] = ZCONNECTIONLOSS;
        else if (rc != ZOK && (res->err == ZOK || res->err == ZRUNTIMEINCONSISTENCY))
            rcs[i] = ZKL_OP_NOT_RUN;
        else if (res->err == ZOK && op->op == ZKL_OP_CREATE) {
            op->czxid = zxid > 0 ? zxid : 0;
            rcs[i] = copy_string_into(op, res->value);
        }
    }
    ops[n - 1]->batch = NULL;
    free(b); /* before the ops go: the owner may free the last one at once */
    for (int i = 0; i < n; i++)
        finish(ops[i], rcs[i]);
}

#ifdef ZKL_MULTI_READ
/* A batched listing's answer (a multiRead's read: no stat, no watch).  A server older than
 * 3.6 refuses a multiRead (ZUNIMPLEMENTED): the read did not run, and the owner sends it
 * again on its own (see the top). */
static void on_batched_strings(int rc, const struct String_vector *strings, const void *data)
{
    zkl_event *op = (zkl_event *)data;
    if (rc == ZOK)
        rc = copy_strings(op, strings);
    else if (rc == ZUNIMPLEMENTED)
        rc = ZKL_OP_NOT_RUN;
    finish(op, rc);
}

/* A multiRead's end: each read got its own answer (on_batched_strings) already. */
static void on_read_batch(int rc, const void *data)
{
    (void)rc;
    (void)data;
}
#endif

/* A one-shot watch fired.  Session events also reach per-op watchers: the global watcher
 * already reports those. */
void zkl_on_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    if (type == ZOO_SESSION_EVENT)
        return;
    const zkl_handle_ctx *hc = zoo_get_context(zh);
    zkl_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return;
    ev->kind = ZKL_EV_WATCH;
    ev->id = (uint64_t)(uintptr_t)ctx;
    ev->type = type;
    ev->zk_state = state;
    ev->generation = hc->generation;
    ev->path = path ? strdup(path) : NULL;
    zkl_queue_push(&hc->session->queue, ev);
}

/* ---- submission ---- */

static void *watch_ctx(const zkl_event *op)
{
    return (void *)(uintptr_t)op->id;
}

/* Whether ops may go to the library now: a live handle, connected as the owner knows it and
 * as the library does (the owner hears of a drop only through the queue; an op handed to a
 * library that is between connections fails with ConnectionLoss at its next failed attempt). */
static int connected_now(zkl_session *s)
{
    if (!s->zh || s->state != ZKL_CONNECTED)
        return 0;
    int st = zoo_state(s->zh);
    return st == ZOO_CONNECTED_STATE || st == ZOO_READONLY_STATE;
}

/* Hands op to the library with the arguments r; what zoo_a* returned. */
static int call_library(zkl_session *s, zkl_event *op, const zkl_request *r)
{
    zhandle_t *zh = s->zh;
    const char *value = zkl_wire_value(r->value, r->len);
    watcher_fn watcher = op->watch_requested ? zkl_on_watch : NULL;
    void *ctx = op->watch_requested ? watch_ctx(op) : NULL;
    switch (op->op) {
    case ZKL_OP_CREATE:
        if (r->ttl > 0 && r->want_stat)
            return zoo_acreate2_ttl(zh, r->path, value, r->len, r->acl, r->flags, r->ttl,
                                    on_string_stat, op);
        if (r->ttl > 0)
            return zoo_acreate_ttl(zh, r->path, value, r->len, r->acl, r->flags, r->ttl,
                                   on_string, op);
        if (r->want_stat)
            return zoo_acreate2(zh, r->path, value, r->len, r->acl, r->flags, on_string_stat, op);
        return zoo_acreate(zh, r->path, value, r->len, r->acl, r->flags, on_string, op);
    case ZKL_OP_DELETE:
        return zoo_adelete(zh, r->path, r->version, on_void, op);
    case ZKL_OP_EXISTS:
        return zoo_awexists(zh, r->path, watcher, ctx, on_stat, op);
    case ZKL_OP_GET:
        return zoo_awget(zh, r->path, watcher, ctx, on_data, op);
    case ZKL_OP_CHILDREN: /* always children2: the stat costs the server nothing more */
        return zoo_awget_children2(zh, r->path, watcher, ctx, on_strings_stat, op);
    case ZKL_OP_SET:
        return zoo_aset(zh, r->path, value, r->len, r->version, on_stat, op);
    case ZKL_OP_GET_ACL:
        return zoo_aget_acl(zh, r->path, on_acl, op);
    case ZKL_OP_SET_ACL:
        return zoo_aset_acl(zh, r->path, r->version, (struct ACL_vector *)r->acl, on_void, op);
    case ZKL_OP_SYNC:
        return zoo_async(zh, r->path, on_string, op);
    case ZKL_OP_MULTI: {
        zkl_multi *m = op->multi;
        return zoo_amulti(zh, m->count, m->ops, m->results, on_void, op);
    }
    case ZKL_OP_RECONFIG:
        return zoo_areconfig(zh, r->joining, r->leaving, r->members, r->from_config, on_data,
                             op);
    case ZKL_OP_AUTH:
        break; /* send_auth's own way */
    }
    return ZBADARGUMENTS;
}

/* Gives op its own copy of r, so that it can wait; 0, or -1 when out of memory. */
static int keep_request(zkl_event *op, const zkl_request *r)
{
    zkl_request *kept = calloc(1, sizeof *kept);
    if (!kept)
        return -1;
    op->request = kept; /* freed with the event, whatever happens next */
    *kept = *r;
    kept->owned_path = NULL;
    kept->owned_value = NULL;
    memset(kept->owned_strings, 0, sizeof kept->owned_strings);
    memset(&kept->owned_acl, 0, sizeof kept->owned_acl);
    if (r->path && !(kept->path = kept->owned_path = strdup(r->path)))
        return -1;
    if (r->value && !(kept->value = kept->owned_value = copy_bytes(r->value, r->len)))
        return -1;
    const char **strings[] = {&kept->joining, &kept->leaving, &kept->members};
    for (int i = 0; i < 3; i++) {
        if (*strings[i] && !(*strings[i] = kept->owned_strings[i] = strdup(*strings[i])))
            return -1;
    }
    if (r->acl) {
        if (zkl_acl_copy(&kept->owned_acl, r->acl) != 0)
            return -1;
        kept->acl = &kept->owned_acl;
    }
    return 0;
}

/* The unsent timer's event only wakes the owner: next() then fails what is overdue. */
static void unsent_timer_due(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)ev;
    (void)ctx;
    s->unsent_timer = 0;
}

/* Ops wait for a new session's first connection (state LOST: no session to wait for yet) at
 * most a session timeout: arms a timer for the oldest one's deadline, unless one is armed.
 * While SUSPENDED the session's own timeout bounds the wait (session.c). */
static void bound_the_wait(zkl_session *s)
{
    if (s->state != ZKL_LOST || s->unsent_timer || !s->unsent_head)
        return;
    long long left = s->unsent_head->request->since_ms + s->timeout_ms - zkl_monotonic_ms();
    zkl_route wake = {unsent_timer_due, NULL};
    /* 0 when no timer could be armed: the owner's wait slices still bring it to the check */
    s->unsent_timer = zkl_session_add_timer(s, left > 0 ? (long)left + 1 : 1, &wake);
}

/* Takes the oldest unsent op off the list (stamped with the handle it goes to, if any). */
static zkl_event *pop_unsent(zkl_session *s)
{
    zkl_event *op = s->unsent_head;
    s->unsent_head = op->unsent_next;
    op->unsent_next = NULL;
    s->unsent_count--;
    if (!s->unsent_head)
        s->unsent_tail = NULL;
    op->generation = s->generation;
    return op;
}

int zkl_ops_fail_overdue(zkl_session *s)
{
    if (s->state != ZKL_LOST || s->stopped)
        return 0;
    long long now = zkl_monotonic_ms();
    int failed = 0;
    while (s->unsent_head && s->unsent_head->request->since_ms + s->timeout_ms <= now) {
        submitted(s, pop_unsent(s), ZCONNECTIONLOSS);
        failed++;
    }
    bound_the_wait(s);
    return failed;
}

static void append_unsent(zkl_session *s, zkl_event *op)
{
    if (s->unsent_tail)
        s->unsent_tail->unsent_next = op;
    else
        s->unsent_head = op;
    s->unsent_tail = op;
    s->unsent_count++;
}

static size_t text_bytes(const char *text)
{
    return text ? strlen(text) : 0;
}

/* An ACL on the wire: a count, then per entry the perms and two length-prefixed strings. */
static size_t acl_bytes(const struct ACL_vector *acl)
{
    size_t n = 4;
    for (int i = 0; acl && i < acl->count; i++)
        n += 12 + text_bytes(acl->data[i].id.scheme) + text_bytes(acl->data[i].id.id);
    return n;
}

/* About what op would carry on the wire (a little more, never less): a server closes the
 * connection on a request over ZKL_MAX_PACKET, and would again on every reconnect while a
 * recipe retries it, so such an op fails at once (submit).  Callers check paths and values
 * first, with messages that name them; this catches what a recipe derives from them. */
size_t zkl_request_size(const char *path, int len, const struct ACL_vector *acl)
{
    /* header 8, the lengths of path and value 8, flags, version and a TTL 16: 40 with room */
    return 40 + text_bytes(path) + (len > 0 ? (size_t)len : 0) + (acl ? acl_bytes(acl) : 0);
}

static size_t request_bytes(const zkl_event *op, const zkl_request *r)
{
    size_t n = zkl_request_size(r->path, r->len, r->acl) +
               text_bytes(r->joining) + text_bytes(r->leaving) + text_bytes(r->members);
    const zkl_multi *m = op->op == ZKL_OP_MULTI ? op->multi : NULL;
    for (int i = 0; m && i < m->count; i++) {
        const zoo_op_t *o = &m->ops[i];
        n += 32;
        if (o->type == ZOO_CREATE_OP || o->type == ZOO_CREATE_CONTAINER_OP ||
            o->type == ZOO_CREATE_TTL_OP)
            n += text_bytes(o->create_op.path) + (size_t)(o->create_op.datalen > 0 ?
                 o->create_op.datalen : 0) + acl_bytes(o->create_op.acl);
        else if (o->type == ZOO_SETDATA_OP)
            n += text_bytes(o->set_op.path) + (size_t)(o->set_op.datalen > 0 ?
                 o->set_op.datalen : 0);
        else if (o->type == ZOO_DELETE_OP)
            n += text_bytes(o->delete_op.path);
        else
            n += text_bytes(o->check_op.path);
    }
    return n;
}

/*
 * Submits op with the caller's arguments r: handed to the library at once when the session is
 * connected and nothing waits before it, else kept in the unsent list, in order.  A read that
 * may be corked waits there even when connected (see the top of this file).  An op the handle
 * refuses (stopped, auth failed, expired) fails at once.  A watch is asked for whatever the
 * verdict (see want_watch).  Returns the op's id; its event follows.
 */
static uint64_t submit(zkl_session *s, zkl_event *op, const zkl_request *r, int may_cork)
{
    uint64_t id = op->id;
    int rc = handle_rc(s);
    if (r->watch) {
        int wrc = want_watch(s, op);
        if (rc == ZOK)
            rc = wrc;
    }
    if (rc == ZOK && request_bytes(op, r) > ZKL_MAX_PACKET)
        rc = ZBADARGUMENTS;
    if (rc != ZOK)
        return submitted(s, op, rc);
    int connected = connected_now(s);
    if (connected && !s->unsent_head && !may_cork && s->sent < s->window)
        return submitted(s, op, hand_over(s, op, r));
    if (keep_request(op, r) != 0)
        return submitted(s, op, ZSYSTEMERROR);
    append_unsent(s, op);
    if (!connected) {
        op->request->since_ms = zkl_monotonic_ms();
        bound_the_wait(s);
        return id; /* sent once the session is connected (session.c) */
    }
    if (s->unsent_count == 1 && s->sent < s->window)
        zkl_queue_poke(&s->queue); /* (a full window frees as answers are taken) */
    if (s->unsent_count >= CORK_MAX)
        zkl_ops_flush(s);
    return id;
}

/* Whether op is a batched op of kind (any kind: 0) that may go out batched now. */
static int is_batched(const zkl_session *s, const zkl_event *op, int kind)
{
    if (!op || !op->request || !op->request->batch)
        return 0;
    if (op->request->batch == BATCH_READ && s->multi_read_refused)
        return 0; /* a server refused a multiRead: each goes alone */
    return kind == 0 || op->request->batch == kind;
}

/* The room a create's path buffer needs: the path and a sequence suffix. */
static size_t path_room(const zkl_event *op)
{
    return op->op == ZKL_OP_CREATE ? strlen(op->request->path) + 16 : 0;
}

/* A multi of n ops was handed to the library: it holds n places in the window, freed when its
 * last op (ops[n - 1]->windowed = n, set before the call) is taken. */
static void batch_sent(zkl_session *s, int n, int kind)
{
    if ((s->sent += n) > s->max_sent)
        s->max_sent = s->sent;
    if (kind == BATCH_READ) {
        s->read_batches++;
        s->read_batched_ops += n;
    } else {
        s->batches++;
        s->batched_ops += n;
    }
}

#ifdef ZKL_MULTI_READ
/* Sends n batched listings as one multiRead (the library copies the paths during the call). */
static void send_read_batch(zkl_session *s, zkl_event **ops, int n)
{
    const char *paths[BATCH_MAX];
    const void *datas[BATCH_MAX];
    for (int i = 0; i < n; i++) {
        paths[i] = ops[i]->request->path;
        datas[i] = ops[i];
        ops[i]->in_multi_read = 1;
    }
    s->probe_on = atomic_load(&s->connects);
    ops[n - 1]->windowed = n;
    int rc = zoo_amulti_children(s->zh, n, paths, on_batched_strings, datas, on_read_batch, NULL);
    if (rc != ZOK) { /* refused: no callback will come */
        ops[n - 1]->windowed = 0;
        for (int i = 0; i < n; i++)
            submitted(s, ops[i], rc);
        return;
    }
    batch_sent(s, n, BATCH_READ);
}
#endif

/* Sends first and the batched ops of its kind right behind it in the unsent list as one multi (see the
 * top of this file). */
static void send_batch(zkl_session *s, zkl_event *first)
{
    zkl_event *ops[BATCH_MAX];
    int kind = first->request->batch;
    int n = 0, most = s->window - s->sent < BATCH_MAX ? (int)(s->window - s->sent) : BATCH_MAX;
    size_t bytes = request_bytes(first, first->request), room = path_room(first);
    ops[n++] = first;
    while (n < most && is_batched(s, s->unsent_head, kind)) {
        size_t more = request_bytes(s->unsent_head, s->unsent_head->request);
        if (bytes + more > ZKL_MAX_PACKET / 2)
            break;
        bytes += more;
        room += path_room(s->unsent_head);
        ops[n++] = pop_unsent(s);
    }
#ifdef ZKL_MULTI_READ
    if (kind == BATCH_READ && n > 1) {
        send_read_batch(s, ops, n);
        return;
    }
#endif
    zkl_batch *b = n > 1 ? calloc(1, sizeof *b + room) : NULL;
    if (!b) { /* alone (or out of memory): each its own request */
        for (int i = 0; i < n; i++)
            submitted(s, ops[i], hand_over(s, ops[i], ops[i]->request));
        return;
    }
    char *buf = b->paths;
    for (int i = 0; i < n; i++) {
        const zkl_request *r = ops[i]->request;
        b->ops[i] = ops[i];
        if (ops[i]->op == ZKL_OP_CREATE) {
            int len = (int)path_room(ops[i]);
            zoo_create_op_init(&b->zops[i], r->path, zkl_wire_value(r->value, r->len), r->len,
                               r->acl, r->flags, buf, len);
            buf += len;
        } else {
            zoo_delete_op_init(&b->zops[i], r->path, r->version);
        }
    }
    b->count = n;
    zkl_event *last = ops[n - 1];
    last->batch = b;
    last->windowed = n; /* (batch_sent) */
    int rc = zoo_amulti(s->zh, n, b->zops, b->results, on_batch, b);
    if (rc != ZOK) { /* refused: no callback will come */
        last->windowed = 0;
        last->batch = NULL;
        free(b);
        for (int i = 0; i < n; i++)
            submitted(s, ops[i], rc);
        return;
    }
    batch_sent(s, n, BATCH_WRITE);
}

/* Whether the run of batched ops at the head of the unsent list waits for room: the window
 * has room for fewer of them than one full multi would carry, and ops in flight will free more
 * (without this, single answers freeing single places would send the run one op at a time). */
static int run_waits(const zkl_session *s)
{
    const zkl_event *head = s->unsent_head;
    int kind = head->request ? head->request->batch : 0;
    if (!is_batched(s, head, kind) || !is_batched(s, head->unsent_next, kind))
        return 0; /* not a run: it goes alone */
    if (kind == BATCH_READ && s->sent > 0 && s->multi_read_on != atomic_load(&s->connects))
        return 1; /* the connection's first multiRead goes alone at the server (see the top) */
    long room = s->window - s->sent;
    if (room >= BATCH_MAX || s->sent == 0)
        return 0;
    long run = 0;
    for (const zkl_event *op = head; is_batched(s, op, kind) && run <= room;
         op = op->unsent_next)
        run++;
    return run > room;
}

void zkl_ops_flush(zkl_session *s)
{
    if (!s->unsent_head || (handle_rc(s) == ZOK && !connected_now(s)))
        return; /* nothing waits, or it waits for the connection */
    while (s->unsent_head) {
        int rc = handle_rc(s);
        if (rc == ZOK && (s->sent >= s->window || run_waits(s)))
            return; /* the rest go out as answers are taken (zkl_ops_taken) */
        zkl_event *op = pop_unsent(s);
        if (rc == ZOK && is_batched(s, op, 0) &&
            is_batched(s, s->unsent_head, op->request->batch)) {
            send_batch(s, op);
            continue;
        }
        if (rc == ZOK)
            rc = hand_over(s, op, op->request);
        submitted(s, op, rc);
    }
}

int zkl_ops_resend(zkl_session *s, zkl_event *op)
{
    if (op->generation != s->generation) { /* its handle closed since: it fails with it */
        int rc = handle_rc(s);
        op->rc = rc != ZOK ? rc : ZSESSIONEXPIRED;
        return 0;
    }
    op->rc = ZOK;
    if (op->request->batch == BATCH_READ)
        s->multi_read_refused = 1; /* the server refused a multiRead: older than 3.6 */
    op->request->batch = 0; /* alone this time: it runs whatever its neighbours do */
    s->batch_resent++;
    zkl_queue_track(&s->queue, op);
    append_unsent(s, op);
    if (!connected_now(s)) {
        op->request->since_ms = zkl_monotonic_ms();
        bound_the_wait(s);
    }
    zkl_ops_flush(s);
    return 1;
}

void zkl_ops_fail_unsent(zkl_session *s, int rc)
{
    while (s->unsent_head) {
        zkl_event *op = s->unsent_head;
        s->unsent_head = op->unsent_next;
        op->unsent_next = NULL;
        s->unsent_count--;
        submitted(s, op, rc);
    }
    s->unsent_tail = NULL;
}

void zkl_ops_drop_unsent(zkl_session *s)
{
    zkl_event *op = s->unsent_head;
    while (op) {
        zkl_event *next = op->unsent_next;
        op->unsent_next = NULL;
        op = next;
    }
    s->unsent_head = s->unsent_tail = NULL;
    s->unsent_count = 0;
}

/* A read: may wait in the cork when it is the caller's. */
static uint64_t read_op(zkl_session *s, zkl_op_type type, const char *path, int watch,
                        const zkl_route *route)
{
    int may_cork = !route && !s->no_cork;
    zkl_event *op = may_cork ? alloc_op(s, type, NULL) : new_op(s, type, route);
    if (!op)
        return 0;
    zkl_request r = {.path = path, .watch = watch};
    return submit(s, op, &r, may_cork);
}

uint64_t zkl_op_create(zkl_session *s, const char *path, const char *value, int len,
                       const struct ACL_vector *acl, int flags, int want_stat,
                       const zkl_route *route)
{
    return zkl_op_create_ttl(s, path, value, len, acl, flags, 0, want_stat, route);
}

uint64_t zkl_op_create_ttl(zkl_session *s, const char *path, const char *value, int len,
                           const struct ACL_vector *acl, int flags, int64_t ttl, int want_stat,
                           const zkl_route *route)
{
    zkl_event *op = new_op(s, ZKL_OP_CREATE, route);
    if (!op)
        return 0;
    zkl_request r = {.path = path, .value = value, .len = len, .acl = acl, .flags = flags,
                     .ttl = ttl, .want_stat = want_stat};
    return submit(s, op, &r, 0);
}

uint64_t zkl_op_create_batched(zkl_session *s, const char *path, const char *value, int len,
                               const struct ACL_vector *acl, int flags, const zkl_route *route)
{
#ifdef ZKL_COMPLETION_ZXID
    zkl_event *op = alloc_op(s, ZKL_OP_CREATE, route); /* corked: the list is not sent first */
    if (!op)
        return 0;
    zkl_request r = {.path = path, .value = value, .len = len, .acl = acl, .flags = flags,
                     .want_stat = 1, .batch = BATCH_WRITE}; /* alone, a create2 */
    return submit(s, op, &r, !s->no_cork);
#else
    return zkl_op_create(s, path, value, len, acl, flags, 1, route);
#endif
}

uint64_t zkl_op_delete_batched(zkl_session *s, const char *path, int version,
                               const zkl_route *route)
{
    zkl_event *op = alloc_op(s, ZKL_OP_DELETE, route);
    if (!op)
        return 0;
    zkl_request r = {.path = path, .version = version, .batch = BATCH_WRITE};
    return submit(s, op, &r, !s->no_cork);
}

uint64_t zkl_op_children_batched(zkl_session *s, const char *path, const zkl_route *route)
{
#ifdef ZKL_MULTI_READ
    zkl_event *op = alloc_op(s, ZKL_OP_CHILDREN, route); /* corked, as a batched write */
    if (!op)
        return 0;
    zkl_request r = {.path = path, .batch = BATCH_READ}; /* alone, a children2 */
    return submit(s, op, &r, !s->no_cork);
#else
    return zkl_op_children(s, path, 0, route);
#endif
}

uint64_t zkl_op_delete(zkl_session *s, const char *path, int version, const zkl_route *route)
{
    zkl_event *op = new_op(s, ZKL_OP_DELETE, route);
    if (!op)
        return 0;
    zkl_request r = {.path = path, .version = version};
    return submit(s, op, &r, 0);
}

uint64_t zkl_op_exists(zkl_session *s, const char *path, int watch, const zkl_route *route)
{
    return read_op(s, ZKL_OP_EXISTS, path, watch, route);
}

uint64_t zkl_op_get(zkl_session *s, const char *path, int watch, const zkl_route *route)
{
    return read_op(s, ZKL_OP_GET, path, watch, route);
}

uint64_t zkl_op_children(zkl_session *s, const char *path, int watch, const zkl_route *route)
{
    return read_op(s, ZKL_OP_CHILDREN, path, watch, route);
}

uint64_t zkl_op_set(zkl_session *s, const char *path, const char *value, int len, int version,
                    const zkl_route *route)
{
    zkl_event *op = new_op(s, ZKL_OP_SET, route);
    if (!op)
        return 0;
    zkl_request r = {.path = path, .value = value, .len = len, .version = version};
    return submit(s, op, &r, 0);
}

uint64_t zkl_op_get_acl(zkl_session *s, const char *path, const zkl_route *route)
{
    zkl_event *op = new_op(s, ZKL_OP_GET_ACL, route);
    if (!op)
        return 0;
    zkl_request r = {.path = path};
    return submit(s, op, &r, 0);
}

uint64_t zkl_op_set_acl(zkl_session *s, const char *path, int version,
                        const struct ACL_vector *acl, const zkl_route *route)
{
    zkl_event *op = new_op(s, ZKL_OP_SET_ACL, route);
    if (!op)
        return 0;
    zkl_request r = {.path = path, .version = version, .acl = acl};
    return submit(s, op, &r, 0);
}

uint64_t zkl_op_sync(zkl_session *s, const char *path, const zkl_route *route)
{
    zkl_event *op = new_op(s, ZKL_OP_SYNC, route);
    if (!op)
        return 0;
    zkl_request r = {.path = path};
    return submit(s, op, &r, 0);
}

uint64_t zkl_op_multi(zkl_session *s, zkl_multi *m, const zkl_route *route)
{
    zkl_event *op = new_op(s, ZKL_OP_MULTI, route);
    if (!op) {
        zkl_multi_free(m);
        return 0;
    }
    op->multi = m;
    zkl_request r = {0};
    return submit(s, op, &r, 0);
}

uint64_t zkl_op_reconfig(zkl_session *s, const char *joining, const char *leaving,
                         const char *members, int64_t from_config)
{
    zkl_event *op = new_op(s, ZKL_OP_RECONFIG, NULL);
    if (!op)
        return 0;
    zkl_request r = {.joining = joining, .leaving = leaving, .members = members,
                     .from_config = from_config};
    return submit(s, op, &r, 0);
}

static uint64_t send_auth(zkl_session *s, const zkl_auth *a, int internal)
{
    zkl_event *op = new_op(s, ZKL_OP_AUTH, NULL);
    if (!op)
        return 0;
    op->internal = internal;
    int rc = handle_rc(s);
    if (rc == ZOK)
        rc = zoo_add_auth(s->zh, a->scheme, a->cred, a->len, on_void, op);
    return submitted(s, op, rc);
}

uint64_t zkl_op_add_auth(zkl_session *s, const char *scheme, const char *cred, int len)
{
    if ((size_t)len + strlen(scheme) + 64 > ZKL_MAX_PACKET) {
        /* never remembered: sent again on every reconnect, it would close each connection */
        zkl_event *op = new_op(s, ZKL_OP_AUTH, NULL);
        return op ? submitted(s, op, ZBADARGUMENTS) : 0;
    }
    if (zkl_session_remember_auth(s, scheme, cred, len) != 0)
        return 0;
    if (s->zh)
        return send_auth(s, &s->auths[s->auth_count - 1], 0);
    /* no handle yet: remembered, it is sent when one opens */
    zkl_event *op = new_op(s, ZKL_OP_AUTH, NULL);
    if (!op)
        return 0;
    uint64_t id = op->id;
    finish(op, ZOK);
    return id;
}

void zkl_ops_reapply_auth(zkl_session *s)
{
    for (int i = 0; i < s->auth_count; i++)
        send_auth(s, &s->auths[i], 1);
}
