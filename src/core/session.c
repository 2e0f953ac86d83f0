/*
 * session.c — see session.h.  The lifecycle of the zhandle and the kazoo state machine.
 *
 * The library's global watcher only copies the raw session event into the queue; the state
 * machine runs in zkl_session_next() on the owner thread, which is also where an expired
 * handle is closed and replaced.  zookeeper_close() joins the library's threads, so once it
 * returns nothing else can complete, and the ops it dropped are failed from the pending list.
 *
 * The library learns of an expiry only from a server, so without a quorum a client would stay
 * SUSPENDED for as long as the outage lasts, its lock holders still "holding".  A connection
 * down for a whole session timeout therefore counts as an expiry here (Curator does the same):
 * a server with a quorum has expired the session by then, and one without cannot vouch for it.
 * The handle is closed, LOST reported, and a new session opened.  The check runs on the owner
 * thread in zkl_session_next() once the queue is empty (a reconnection already queued wins);
 * a core timer armed at the suspension wakes whoever waits (a blocked owner, a host loop
 * polling the fd) when the timeout is up.
 */
#include "session_private.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "features.h"
#include "log.h"

enum {
    HOST_RESOLUTION_DELAY_MS = 5000,
    STOP_DRAIN_MAX_MS = 2000, /* how long stop() lets ops in flight finish */
    WAIT_SLICE_MS = 200       /* the longest zkl_session_wait() blocks in one call */
};

static void on_session_event(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)path;
    if (type != ZOO_SESSION_EVENT)
        return;
    zkl_handle_ctx *hc = ctx;
    if (state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE) {
        zkl_reconnect_connected(&hc->session->reconnect);
        zkl_log_sink_connected(&hc->session->log);
    }
    zkl_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return; /* out of memory: the next session event carries the state again */
    ev->kind = ZKL_EV_SESSION;
    ev->zk_state = state;
    ev->generation = hc->generation;
    zkl_queue_push(&hc->session->queue, ev);
}

#ifdef ZKL_HAVE_CONNECT_HOOK
/* The library's I/O thread, before each attempt to connect (reconnect.h). */
static void before_connect(zhandle_t *zh)
{
    zkl_handle_ctx *hc = (zkl_handle_ctx *)zoo_get_context(zh); /* ours: set at init */
    if (hc) {
        atomic_fetch_add(&hc->session->connects, 1); /* (ops.c: multiReads) */
        zkl_reconnect_before_connect(&hc->session->reconnect);
    }
}
#endif

/* The service a SASL GSSAPI session authenticates to, or NULL for any other session. */
static const char *gssapi_service(const zkl_session *s)
{
    const char *mechanism = s->sasl ? zkl_sasl_mechanism(s->sasl) : NULL;
    if (!mechanism || strcmp(mechanism, "GSSAPI") != 0)
        return NULL;
    return zkl_sasl_service(s->sasl);
}

zkl_session *zkl_session_new(const zkl_session_options *o)
{
    zkl_session *s = calloc(1, sizeof *s);
    if (!s) {
        zkl_sasl_free(o->sasl);
        return NULL;
    }
    /* The library connects to the hosts in the order given: the client shuffles them itself
     * unless asked not to (kazoo's randomize_hosts, lua/zklua/client.lua).  A process-wide
     * setting of the library, the same for every session. */
    zoo_deterministic_conn_order(1);
#ifdef ZKL_HAVE_CONNECT_HOOK
    zoo_set_connect_hook(before_connect); /* process-wide too: each handle finds its session */
#endif
    s->hosts = strdup(o->hosts);
    s->tls_cert = o->tls_cert ? strdup(o->tls_cert) : NULL;
    s->sasl = o->sasl;
    const char *gssapi = gssapi_service(s);
    if (!s->hosts || (o->tls_cert && !s->tls_cert) || zkl_queue_init(&s->queue) != 0)
        goto no_queue;
    if (zkl_timers_init(&s->timers, &s->queue) != 0)
        goto no_timers;
    if (zkl_reconnect_init(&s->reconnect, &s->queue, o->hosts, o->timeout_ms) != 0)
        goto no_reconnect;
    if ((gssapi && zkl_reconnect_set_kerberos(&s->reconnect, gssapi) != 0) ||
        zkl_log_sink_init(&s->log, &s->queue, o->log_level, &s->reconnect) != 0)
        goto no_log;
    s->timeout_ms = o->timeout_ms;
    s->window = ZKL_DEFAULT_WINDOW;
    s->read_only = o->read_only;
    s->resume = o->resume;
    s->resume_id.client_id = o->session_id;
    memcpy(s->resume_id.passwd, o->passwd, sizeof s->resume_id.passwd);
    s->state = ZKL_LOST;
    s->client_state = ZKL_CS_CLOSED;
    s->stopped = 1; /* until started */
    atomic_init(&s->closing_rc, ZCLOSING);
    return s;

no_log:
    zkl_reconnect_destroy(&s->reconnect);
no_reconnect:
    zkl_timers_destroy(&s->timers);
no_timers:
    zkl_queue_destroy(&s->queue);
no_queue:
    zkl_sasl_free(s->sasl);
    free(s->tls_cert);
    free(s->hosts);
    free(s);
    return NULL;
}

/* zookeeper_init2, zookeeper_init_sasl for a SASL session, zookeeper_init_ssl for a TLS
 * session, or zookeeper_init_ssl_sasl (zklua's patch to the C client) for SASL over TLS.
 * zookeeper_init_ssl takes no log
 * callback: it is set once the handle exists, and a line logged before that (only an ERROR
 * can be: the process-wide level) goes to the library's stream, pointed at /dev/null, never
 * to stderr (this copy of the library is zklua's own: linked into it statically). */
static zhandle_t *open_library_handle(zkl_session *s, const clientid_t *resume,
                                      zkl_handle_ctx *hc, int flags, log_callback_fn log_line)
{
#ifdef ZKL_HAVE_TLS_SASL
    if (s->tls_cert && s->sasl)
        return zookeeper_init_ssl_sasl(s->hosts, s->tls_cert, on_session_event, s->timeout_ms,
                                       resume, hc, flags, log_line, zkl_sasl_params(s->sasl));
#endif
#ifdef ZKL_HAVE_TLS
    if (s->tls_cert) {
        static FILE *nowhere;
        if (!nowhere && (nowhere = fopen("/dev/null", "w")) != NULL)
            zoo_set_log_stream(nowhere);
        zhandle_t *zh = zookeeper_init_ssl(s->hosts, s->tls_cert, on_session_event,
                                           s->timeout_ms, resume, hc, flags);
        if (zh)
            zoo_set_log_callback(zh, log_line);
        return zh;
    }
#endif
#ifdef ZKL_HAVE_SASL
    if (s->sasl)
        return zookeeper_init_sasl(s->hosts, on_session_event, s->timeout_ms, resume, hc, flags,
                                   log_line, zkl_sasl_params(s->sasl));
#endif
    return zookeeper_init2(s->hosts, on_session_event, s->timeout_ms, resume, hc, flags,
                           log_line);
}

/* Opens a new zhandle; library threads start with every signal blocked. */
static int open_handle(zkl_session *s)
{
    zkl_handle_ctx *hc = calloc(1, sizeof *hc);
    if (!hc)
        return -1;
    hc->session = s;
    hc->generation = ++s->generation;

    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int flags = ZOO_NO_LOG_CLIENTENV | (s->read_only ? ZOO_READONLY : 0);
    const clientid_t *resume = s->resume ? &s->resume_id : NULL;
    zkl_reconnect_begin(&s->reconnect, hc->generation);
    log_callback_fn log_line = zkl_log_sink_bind(&s->log);
    zhandle_t *zh = open_library_handle(s, resume, hc, flags, log_line);
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    zkl_reconnect_set_handle(&s->reconnect, zh);

    if (!zh) {
        zkl_reconnect_interrupt(&s->reconnect);
        zkl_log_sink_unbind(&s->log);
        free(hc);
        errno = saved ? saved : EINVAL;
        return -1;
    }
    /* By default the library resolves the host list again on every I/O wake-up (one
     * getaddrinfo per op under load); DNS changes are still seen within this delay. */
    zoo_set_servers_resolution_delay(zh, HOST_RESOLUTION_DELAY_MS);
    s->resume = 0; /* a resumed id serves once; a later expiry opens a fresh session */
    s->zh = zh;
    s->handle_ctx = hc;
    s->needs_open = 0;
    s->client_state = ZKL_CS_CONNECTING;
    zkl_ops_reapply_auth(s);
    return 0;
}

/* A routed watch that will never fire: its route hears ZOO_NOTWATCHING_EVENT. */
static void drop_routed_watch(zkl_session *s, uint64_t id, zkl_route route)
{
    zkl_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = ZKL_EV_WATCH;
    ev.id = id;
    ev.type = ZOO_NOTWATCHING_EVENT;
    ev.session = s;
    route.fn(s, &ev, route.ctx);
}

/* The handle's watches are gone with it: tell every routed one. */
static void drop_all_routed_watches(zkl_session *s)
{
    zkl_watch_routes dropped = s->watch_routes;
    memset(&s->watch_routes, 0, sizeof s->watch_routes);
    for (size_t i = 0; i < dropped.capacity; i++) {
        uint64_t id = dropped.ids[i];
        if (id != 0 && id != UINT64_MAX)
            drop_routed_watch(s, id, dropped.routes[i]);
    }
    zkl_watch_routes_free(&dropped);
}

/* Closes the handle (joining its threads) and fails whatever it left in flight with rc. */
/* Remembers the closing handle's session id (zkl_session_had_id). */
static void remember_id(zkl_session *s)
{
    const clientid_t *cid = zoo_client_id(s->zh);
    if (!cid || cid->client_id == 0 || zkl_session_had_id(s, cid->client_id))
        return;
    s->past_ids[s->past_next] = cid->client_id;
    s->past_next = (s->past_next + 1) % ZKL_PAST_SESSION_IDS;
    if (s->past_count < ZKL_PAST_SESSION_IDS)
        s->past_count++;
}

static void close_handle(zkl_session *s, int rc)
{
    zkl_ops_drop_unsent(s);
    atomic_store(&s->closing_rc, rc);
    if (s->zh) {
        remember_id(s);
        zkl_reconnect_interrupt(&s->reconnect); /* close joins the I/O thread: no pause left */
        zookeeper_close(s->zh);
        s->zh = NULL;
        free(s->handle_ctx);
        s->handle_ctx = NULL;
        zkl_log_sink_unbind(&s->log); /* the handle's threads are joined: no line follows */
    }
    zkl_queue_fail_pending(&s->queue, rc);
    atomic_store(&s->closing_rc, ZCLOSING);
    drop_all_routed_watches(s);
    s->watches_out = 0; /* they died with the handle */
}

/* libzookeeper sends the close request (which ends the session on the server at once, its
 * ephemeral nodes with it) only when no response is being processed; with ops in flight it
 * just drops the connection and the session lingers until it times out.  So a connected
 * session first lets its ops finish, for a bounded time, as kazoo's queued close would. */
static void let_ops_in_flight_finish(zkl_session *s)
{
    if (!s->zh || s->state != ZKL_CONNECTED)
        return;
    int wait_ms = zoo_recv_timeout(s->zh) / 2;
    if (wait_ms > STOP_DRAIN_MAX_MS)
        wait_ms = STOP_DRAIN_MAX_MS;
    zkl_queue_wait_idle(&s->queue, wait_ms);
}

/* SASL GSSAPI: the handle waits for the tickets it needs (kerberos_tickets.h) so that its
 * I/O thread never waits for a KDC; 1 when a fetch was started. */
static int fetch_tickets_first(zkl_session *s)
{
    const char *service = gssapi_service(s);
    if (!service || s->tickets)
        return s->tickets != NULL;
    s->tickets = zkl_kerberos_tickets_start(service, s->hosts);
    return s->tickets != NULL;
}

static void stop_waiting_for_tickets(zkl_session *s)
{
    zkl_kerberos_tickets_release(s->tickets);
    s->tickets = NULL;
}

int zkl_session_awaits_kdc(zkl_session *s)
{
    return s->tickets && !zkl_kerberos_tickets_done(s->tickets);
}

int zkl_session_start(zkl_session *s)
{
    if (s->zh)
        return 0;
    s->stopped = 0;
    s->gave_up = 0;
    if (fetch_tickets_first(s)) {
        s->needs_open = 1; /* opened by retry_open_if_owed once the fetch ends */
        s->client_state = ZKL_CS_CONNECTING;
        return 0;
    }
    if (open_handle(s) != 0) {
        if (errno == ENOMEM) {
            s->stopped = 1;
            return -1;
        }
        /* No address for the hosts now (the library resolves them as it opens): as kazoo,
         * the client keeps trying (at every wait, zkl_session_wait) until it is stopped. */
        s->needs_open = 1;
        s->client_state = ZKL_CS_CONNECTING;
    }
    return 0;
}

static zkl_event *new_state_event(zkl_session *s)
{
    zkl_event *ev = calloc(1, sizeof *ev);
    if (ev) {
        ev->kind = ZKL_EV_STATE;
        ev->state = s->state;
        ev->client_state = s->client_state;
        ev->generation = s->generation;
    }
    return ev;
}

/* The suspension timer's event only has to wake the owner: next() then runs the check. */
static void suspension_timer_due(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)ev;
    (void)ctx;
    s->suspension_timer = 0;
}

static void begin_suspension(zkl_session *s)
{
    s->suspended_at_ms = zkl_monotonic_ms();
    s->suspended_timeout_ms = s->zh ? zoo_recv_timeout(s->zh) : s->timeout_ms;
    zkl_route wake = {suspension_timer_due, NULL};
    /* 0 when no timer could be armed: the owner's wait slices still bring it to the check */
    s->suspension_timer = zkl_session_add_timer(s, s->suspended_timeout_ms + 1L, &wake);
}

static void end_suspension(zkl_session *s)
{
    s->suspended_at_ms = 0;
    if (s->suspension_timer) {
        zkl_session_cancel_timer(s, s->suspension_timer);
        s->suspension_timer = 0;
    }
}

void zkl_session_stop(zkl_session *s)
{
    zkl_ops_flush(s); /* let the reads asked for go out and finish, as ops in flight do */
    if (s->stopped && !s->zh)
        return;
    if (s->zh && s->state == ZKL_CONNECTED)
        zkl_ops_fail_unsent(s, ZCLOSING); /* held back by the window: the server never saw them */
    s->stopped = 1;
    s->needs_open = 0;
    stop_waiting_for_tickets(s); /* a KDC that never answers holds only the fetch's thread */
    end_suspension(s);
    let_ops_in_flight_finish(s);
    close_handle(s, ZCLOSING);
    if (s->state != ZKL_LOST || s->client_state != ZKL_CS_CLOSED) {
        s->state = ZKL_LOST;
        s->client_state = ZKL_CS_CLOSED;
        zkl_event *ev = new_state_event(s);
        if (ev)
            zkl_queue_push(&s->queue, ev);
    }
}

static int consume_internally(zkl_session *s, zkl_event *ev, zkl_event **out);

void zkl_session_free(zkl_session *s)
{
    if (!s)
        return;
    zkl_session_stop(s);
    zkl_timers_stop(&s->timers); /* timer events still queued find no timer: dropped */
    zkl_event_free(s->held);
    s->held = NULL;
    /* routed ops still queued are owed their callbacks: their owners count on them */
    zkl_event *ev;
    while ((ev = zkl_queue_pop(&s->queue)) != NULL) {
        zkl_event *out = NULL;
        if (ev->kind != ZKL_EV_SESSION)
            consume_internally(s, ev, &out);
        zkl_event_free(out);
        zkl_event_free(ev);
    }
    zkl_queue_destroy(&s->queue);
    zkl_timers_destroy(&s->timers);
    for (int i = 0; i < s->auth_count; i++) {
        free(s->auths[i].scheme);
        free(s->auths[i].cred);
    }
    free(s->auths);
    free(s->listeners);
    zkl_watch_routes_free(&s->watch_routes);
    zkl_log_sink_destroy(&s->log);
    zkl_reconnect_destroy(&s->reconnect);
    free(s->read_buffer);
    zkl_sasl_free(s->sasl);
    free(s->tls_cert);
    free(s->hosts);
    free(s);
}

int zkl_session_fd(const zkl_session *s)
{
    return s->queue.fd;
}

int zkl_session_notify_fd(zkl_session *s, int fd)
{
    if (zkl_queue_notify_fd(&s->queue, fd) != 0)
        return -1;
    s->no_cork = fd >= 0; /* see ops.c: the cork's poke would cost the host a wake-up */
    if (s->no_cork)
        zkl_ops_flush(s);
    return 0;
}

static void retry_open_if_owed(zkl_session *s)
{
    if (!s->needs_open || s->stopped || zkl_session_awaits_kdc(s))
        return;
    stop_waiting_for_tickets(s);
    open_handle(s);
}

/* While SUSPENDED, the ms left before the session counts as lost (0 when due); else -1. */
static long long suspension_ms_left(const zkl_session *s)
{
    if (s->state != ZKL_SUSPENDED || s->suspended_at_ms == 0 || s->stopped)
        return -1;
    long long left = s->suspended_at_ms + s->suspended_timeout_ms - zkl_monotonic_ms();
    return left > 0 ? left : 0;
}

int zkl_session_wait(zkl_session *s, int timeout_ms)
{
    zkl_ops_flush(s);
    retry_open_if_owed(s);
    if (s->needs_open && (timeout_ms < 0 || timeout_ms > 1000))
        timeout_ms = 1000; /* come back to try opening again */
    /* Waits in slices: a condition variable ignores signals, and a caller that handles
     * SIGINT (the zklua runner) must get control back soon after one. */
    if (timeout_ms < 0 || timeout_ms > WAIT_SLICE_MS)
        timeout_ms = WAIT_SLICE_MS;
    long long left = suspension_ms_left(s);
    if (left >= 0 && left < timeout_ms)
        timeout_ms = (int)left;
    return zkl_queue_wait(&s->queue, timeout_ms);
}

/* The session is gone (expired, or auth failed): drop the handle, report LOST. */
static zkl_event *lose_session(zkl_session *s, zkl_client_state why, int rc, int reopen)
{
    end_suspension(s);
    s->client_state = why;
    close_handle(s, rc);
    s->state = ZKL_LOST;
    zkl_event *lost = new_state_event(s);
    if (reopen && !s->stopped && open_handle(s) != 0)
        s->needs_open = 1;
    return lost;
}

/* The connection retry policy gave up (reconnect.h): the client stops as kazoo's does then,
 * LOST and CLOSED, every op in flight failed with ZCLOSING; start() may try again. */
static zkl_event *give_up_connecting(zkl_session *s)
{
    zkl_session_stop(s); /* queues the state event, delivered in order */
    s->gave_up = 1;
    return NULL;
}

/* Runs the state machine on one raw session event; returns a STATE event to deliver when the
 * kazoo state or the client state changed, else NULL. */
static zkl_event *handle_session_event(zkl_session *s, const zkl_event *raw)
{
    if (raw->generation != s->generation || s->stopped)
        return NULL; /* from a handle already closed */
    int st = raw->zk_state;
    if (st == ZKL_GAVE_UP_STATE)
        return s->zh ? give_up_connecting(s) : NULL; /* NULL: that handle is closed already */
    if (st == ZOO_EXPIRED_SESSION_STATE)
        return lose_session(s, ZKL_CS_EXPIRED_SESSION, ZSESSIONEXPIRED, 1);
    if (st == ZOO_AUTH_FAILED_STATE)
        return lose_session(s, ZKL_CS_AUTH_FAILED, ZAUTHFAILED, 0);
    zkl_state old_state = s->state;
    zkl_client_state old_client_state = s->client_state;
    if (st == ZOO_CONNECTED_STATE || st == ZOO_READONLY_STATE) {
        s->client_state = st == ZOO_READONLY_STATE ? ZKL_CS_CONNECTED_RO : ZKL_CS_CONNECTED;
        s->state = ZKL_CONNECTED;
    } else { /* connecting, associating or between attempts */
        s->client_state = ZKL_CS_CONNECTING;
        if (s->state == ZKL_CONNECTED) {
            s->state = ZKL_SUSPENDED;
            begin_suspension(s);
        }
    }
    if (s->state != ZKL_SUSPENDED)
        end_suspension(s);
    if (s->state == ZKL_CONNECTED)
        zkl_ops_flush(s); /* what waited for the connection goes first (ops.c) */
    if (s->state == old_state && s->client_state == old_client_state)
        return NULL;
    return new_state_event(s);
}

static int is_listening(const zkl_session *s, const zkl_state_listener *l)
{
    for (int i = 0; i < s->listener_count; i++)
        if (s->listeners[i].fn == l->fn && s->listeners[i].ctx == l->ctx)
            return 1;
    return 0;
}

static void tell_state_listeners(zkl_session *s, zkl_state state)
{
    /* a listener may remove itself or others (even free their objects): walk a copy, and
     * skip entries removed meanwhile */
    int n = s->listener_count;
    if (n == 0)
        return;
    zkl_state_listener *copy = malloc(sizeof *copy * (size_t)n);
    if (!copy)
        return;
    for (int i = 0; i < n; i++)
        copy[i] = s->listeners[i];
    for (int i = 0; i < n; i++)
        if (is_listening(s, &copy[i]))
            copy[i].fn(s, state, copy[i].ctx);
    free(copy);
}

/* A connection down for a whole session timeout: the session counts as expired (see the top
 * of this file).  Returns the LOST event to deliver, or NULL when none is due. */
static zkl_event *lose_if_suspended_too_long(zkl_session *s)
{
    if (suspension_ms_left(s) != 0)
        return NULL;
    zkl_event *lost = lose_session(s, ZKL_CS_EXPIRED_SESSION, ZSESSIONEXPIRED, 1);
    if (lost)
        tell_state_listeners(s, lost->state);
    return lost;
}

/* Hands a routed op's event to its route; also settles its watch if it was not registered. */
static void deliver_routed_op(zkl_session *s, zkl_event *op)
{
    zkl_route watch_route;
    if (op->watch_requested && !op->watch_registered &&
        zkl_watch_routes_take(&s->watch_routes, op->id, &watch_route))
        drop_routed_watch(s, op->id, watch_route);
    op->route.fn(s, op, op->route.ctx);
}

/* Handles ev inside the core when it is not for the caller; returns 1 if it was consumed. */
static int consume_internally(zkl_session *s, zkl_event *ev, zkl_event **out)
{
    zkl_route route;
    switch (ev->kind) {
    case ZKL_EV_SESSION:
        *out = handle_session_event(s, ev);
        if (*out)
            tell_state_listeners(s, (*out)->state);
        return 1;
    case ZKL_EV_OP:
        if (ev->internal)
            return 1;
        if (ev->route.fn) {
            deliver_routed_op(s, ev);
            return 1;
        }
        return 0;
    case ZKL_EV_WATCH:
        if (!zkl_watch_routes_take(&s->watch_routes, ev->id, &route))
            return 0;
        route.fn(s, ev, route.ctx);
        return 1;
    case ZKL_EV_STATE:
        tell_state_listeners(s, ev->state); /* from stop() */
        return 0;
    case ZKL_EV_NOTIFY:
        return 0;
    case ZKL_EV_TIMER:
        zkl_timers_deliver(s, &s->timers, ev);
        return 1;
    case ZKL_EV_LOG:
        zkl_log_sink_taken(&s->log);
        return 0;
    }
    return 0;
}

static void count_watches(zkl_session *s, const zkl_event *ev)
{
    if (ev->generation != s->generation)
        return; /* from a closed handle: its watches died with it */
    if (ev->kind == ZKL_EV_OP && ev->watch_registered)
        s->watches_out++;
    else if (ev->kind == ZKL_EV_WATCH && s->watches_out > 0)
        s->watches_out--;
}

zkl_event *zkl_session_next(zkl_session *s)
{
    zkl_ops_flush(s);
    if (s->held) {
        zkl_event *held = s->held;
        s->held = NULL;
        return held;
    }
    retry_open_if_owed(s);
    for (;;) {
        zkl_event *ev = zkl_queue_pop(&s->queue);
        if (ev && ev->kind == ZKL_EV_OP)
            zkl_ops_taken(s, ev);
        if (ev && ev->kind == ZKL_EV_OP && ev->rc == ZKL_OP_NOT_RUN &&
            zkl_ops_resend(s, ev))
            continue; /* a batched write that did not run: it goes again */
        if (!ev && zkl_ops_fail_overdue(s) > 0)
            continue; /* their failures are queued now */
        if (!ev) /* news from the library first: a reconnection may be among it */
            return lose_if_suspended_too_long(s);
        zkl_event *out = NULL;
        count_watches(s, ev);
        if (!consume_internally(s, ev, &out))
            return ev;
        zkl_event_free(ev);
        if (out)
            return out;
    }
}

int zkl_session_add_state_listener(zkl_session *s, zkl_state_fn fn, void *ctx)
{
    zkl_state_listener *l = realloc(s->listeners, sizeof *l * (size_t)(s->listener_count + 1));
    if (!l)
        return -1;
    s->listeners = l;
    l[s->listener_count].fn = fn;
    l[s->listener_count].ctx = ctx;
    s->listener_count++;
    return 0;
}

void zkl_session_remove_state_listener(zkl_session *s, zkl_state_fn fn, void *ctx)
{
    for (int i = 0; i < s->listener_count; i++) {
        if (s->listeners[i].fn == fn && s->listeners[i].ctx == ctx) {
            s->listeners[i] = s->listeners[--s->listener_count];
            return;
        }
    }
}

zkl_event *zkl_session_await(zkl_session *s, uint64_t id)
{
    for (;;) {
        zkl_event *ev = zkl_session_next(s);
        if (ev && ev->kind == ZKL_EV_OP && ev->id == id)
            return ev;
        if (ev) {
            s->held = ev; /* someone else's news comes first: the caller delivers it */
            return NULL;
        }
        if (!zkl_session_wait(s, -1))
            return NULL; /* a quiet slice: the caller looks at signals, then waits again */
    }
}

uint64_t zkl_session_new_target(zkl_session *s)
{
    return ++s->next_target;
}

int zkl_session_notify(zkl_session *s, uint64_t target, int code)
{
    zkl_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return -1;
    ev->kind = ZKL_EV_NOTIFY;
    ev->id = target;
    ev->type = code;
    ev->generation = s->generation;
    zkl_queue_push(&s->queue, ev);
    return 0;
}

zkl_state zkl_session_state(const zkl_session *s)
{
    return s->state;
}

zkl_client_state zkl_session_client_state(const zkl_session *s)
{
    return s->client_state;
}

int zkl_session_is_stopped(const zkl_session *s)
{
    return s->stopped;
}

int zkl_session_client_id(const zkl_session *s, int64_t *id, char passwd[16])
{
    if (!s->zh)
        return -1;
    const clientid_t *cid = zoo_client_id(s->zh);
    if (!cid || cid->client_id == 0)
        return -1;
    *id = cid->client_id;
    memcpy(passwd, cid->passwd, 16);
    return 0;
}

int zkl_session_had_id(const zkl_session *s, int64_t id)
{
    for (int i = 0; id != 0 && i < s->past_count; i++)
        if (s->past_ids[i] == id)
            return 1;
    return 0;
}

/* Whether "h1:p1,h2:p2/chroot" names servers: every entry "host:port" (split at its last
 * ':', as the library does: "::1:2181"), neither part empty.  The library takes an empty
 * list (or "/chroot" alone) as a list of no address, and then never connects again
 * (zklua.hosts refuses such lists before they get here). */
static int names_servers(const char *hosts)
{
    size_t end = strcspn(hosts, "/");
    if (end == 0)
        return 0;
    for (size_t at = 0; at <= end;) {
        size_t len = strcspn(hosts + at, ",/");
        size_t colon = len;
        while (colon > 0 && hosts[at + colon - 1] != ':')
            colon--;
        /* colon: the length up to and with the last ':' (0: none) */
        if (colon < 2 || colon == len)
            return 0;
        at += len + 1;
    }
    return 1;
}

/* A CONNECTING session event of the current handle, for the state machine (see
 * zkl_session_set_hosts). */
static void queue_connection_down(zkl_session *s)
{
    zkl_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return; /* out of memory: the first failed attempt tells it (reconnect.c) */
    ev->kind = ZKL_EV_SESSION;
    ev->zk_state = ZOO_CONNECTING_STATE;
    ev->generation = s->generation;
    zkl_queue_push(&s->queue, ev);
}

int zkl_session_set_hosts(zkl_session *s, const char *hosts)
{
    if (!names_servers(hosts)) {
        errno = EINVAL;
        return -1;
    }
    char *copy = strdup(hosts);
    char *servers = strndup(hosts, strcspn(hosts, "/")); /* the library takes no chroot here */
    if (!copy || !servers) {
        free(copy);
        free(servers);
        errno = ENOMEM;
        return -1;
    }
    int rc = s->zh ? zoo_set_servers(s->zh, servers) : ZOK;
    free(servers);
    if (rc != ZOK) {
        /* The library keeps the list it refused (none of it resolves) and would look it up
         * again and again; the handle goes on with the one it had. */
        char *old = strndup(s->hosts, strcspn(s->hosts, "/"));
        if (old)
            zoo_set_servers(s->zh, old);
        free(old);
    }
    if (rc != ZOK || zkl_reconnect_set_hosts(&s->reconnect, hosts) != 0) {
        free(copy);
        errno = rc != ZOK ? EINVAL : ENOMEM;
        return -1;
    }
    free(s->hosts);
    s->hosts = copy;
    /* When the server in use is not in the new list, the library closes the connection there
     * and then, marking the handle not connected without a session event (reconnect.c's
     * push_connection_down): the connection is down from now, so SUSPENDED now, and LOST a
     * session timeout later unless a server of the new list takes the session up. */
    if (s->zh && s->state == ZKL_CONNECTED) {
        int state = zoo_state(s->zh);
        if (state != ZOO_CONNECTED_STATE && state != ZOO_READONLY_STATE)
            queue_connection_down(s);
    }
    return 0;
}

int zkl_session_current_server(zkl_session *s, char *buf, size_t size)
{
    if (!s->zh || s->state != ZKL_CONNECTED || size == 0)
        return -1;
    const char *server = zoo_get_current_server(s->zh);
    if (!server || !*server)
        return -1;
    snprintf(buf, size, "%s", server);
    return 0;
}

int zkl_session_negotiated_timeout(const zkl_session *s)
{
    return s->zh ? zoo_recv_timeout(s->zh) : 0;
}

void zkl_session_flush(zkl_session *s)
{
    zkl_ops_flush(s);
}

void zkl_session_set_window(zkl_session *s, int window)
{
    s->window = window >= 1 ? window : 1;
    zkl_ops_flush(s);
}

void zkl_session_batch_use(const zkl_session *s, long *batches, long *ops, long *resent,
                           long *read_batches, long *read_ops)
{
    *batches = s->batches;
    *ops = s->batched_ops;
    *resent = s->batch_resent;
    *read_batches = s->read_batches;
    *read_ops = s->read_batched_ops;
}

void zkl_session_window_use(const zkl_session *s, long *sent, long *max_sent)
{
    *sent = s->sent;
    *max_sent = s->max_sent;
}

long zkl_session_pending_ops(zkl_session *s)
{
    pthread_mutex_lock(&s->queue.mutex);
    long n = s->queue.pending_count;
    pthread_mutex_unlock(&s->queue.mutex);
    return n;
}

int zkl_session_remember_auth(zkl_session *s, const char *scheme, const char *cred, int len)
{
    zkl_auth *auths = realloc(s->auths, sizeof *auths * (size_t)(s->auth_count + 1));
    if (!auths)
        return -1;
    s->auths = auths;
    zkl_auth *a = &auths[s->auth_count];
    a->scheme = strdup(scheme);
    a->cred = malloc(len > 0 ? (size_t)len : 1);
    if (!a->scheme || !a->cred) {
        free(a->scheme);
        free(a->cred);
        return -1;
    }
    memcpy(a->cred, cred, (size_t)len);
    a->len = len;
    s->auth_count++;
    return 0;
}

void zkl_session_set_connection_retry(zkl_session *s, const zkl_reconnect_policy *policy)
{
    zkl_reconnect_set_policy(&s->reconnect, policy);
}

void zkl_session_hold_reconnection(zkl_session *s, int held)
{
    zkl_reconnect_hold(&s->reconnect, held);
}

int zkl_session_gave_up_connecting(const zkl_session *s)
{
    return s->gave_up;
}

long zkl_session_failed_connection_attempts(zkl_session *s)
{
    return atomic_load(&s->reconnect.attempts_failed);
}

int zkl_session_last_tls_failure(zkl_session *s, char *buf, size_t size)
{
    return zkl_log_sink_last_tls_failure(&s->log, buf, size);
}

int zkl_session_last_sasl_failure(zkl_session *s, char *buf, size_t size)
{
    return zkl_log_sink_last_sasl_failure(&s->log, buf, size);
}
