/*
 * session.h — one ZooKeeper session, kept alive the way kazoo keeps it.
 *
 * A zkl_session owns a zhandle and the queue its threads feed.  Everything here is called
 * from one owner thread; the library's threads only fill and push events (queue.h).
 *
 * States follow kazoo: LOST until the first connection, CONNECTED, SUSPENDED while the
 * connection is down (the session may live; watches and ephemerals survive a reconnect), and
 * LOST when the session expires or is stopped, or when the connection stayed down for a whole
 * session timeout (then no server can vouch for the session: it counts as expired; the handle
 * is closed without reaching a server, so its ephemerals go when the servers expire it).
 * On expiry the dead handle is closed, every op
 * still in flight fails with ZSESSIONEXPIRED, and a new session is opened at once with the
 * same hosts and auth; CONNECTED follows when it connects.  zkl_session_stop() closes the
 * session (its ephemeral nodes vanish) and fails every op still in flight with ZCLOSING.
 */
#ifndef ZKL_SESSION_H
#define ZKL_SESSION_H

#include <stdint.h>

#include "event.h"
#include "reconnect.h"

typedef struct zkl_session zkl_session;

typedef struct zkl_session_options {
    const char *hosts;   /* "h1:p1,h2:p2/chroot" */
    int timeout_ms;      /* requested session timeout */
    int read_only;       /* allow read-only servers (ZOO_READONLY) */
    int resume;          /* reattach to session_id/passwd on the first start */
    int log_level;       /* libzookeeper lines wanted: 0 none .. 4 DEBUG (log.h) */
    int64_t session_id;
    char passwd[16];
    /* NULL: plaintext.  Else TLS with zookeeper_init_ssl's "ca,cert,key[,password]" (tls.h:
     * check the files with zkl_tls_check() first); only with ZKL_HAVE_TLS (features.h). */
    const char *tls_cert;
    /* NULL: no SASL.  Else SASL credentials (sasl.h) for zookeeper_init_sasl, owned by the
     * session from zkl_session_new() on, even when it fails; with tls_cert only with
     * ZKL_HAVE_TLS_SASL (zookeeper_init_ssl_sasl: SASL over TLS, zklua's patch to the C
     * client; a system library has no call for both). */
    struct zkl_sasl *sasl;
} zkl_session_options;

zkl_session *zkl_session_new(const zkl_session_options *options); /* NULL when out of memory */
/* kazoo's connection_retry (reconnect.h); the default is zkl_reconnect_default_policy() of the
 * session timeout.  Takes effect from the next connection attempt. */
void zkl_session_set_connection_retry(zkl_session *s, const zkl_reconnect_policy *policy);
/* The window (ops.c): at most window ops handed to the library and not yet answered; the
 * rest wait, in order, and go out as answers come back.  ZKL_DEFAULT_WINDOW until set. */
enum { ZKL_DEFAULT_WINDOW = 1000 };
void zkl_session_set_window(zkl_session *s, int window); /* window >= 1 */
/* Ops now in the window, and the most there were at once since the session was made. */
void zkl_session_window_use(const zkl_session *s, long *sent, long *max_sent);
/* Batched ops (ops.h) since the session was made: the multis of writes sent, the ops they
 * carried, the ops sent again alone (another op failed their multi, or the server refused a
 * multiRead), and the multiReads sent and the listings they carried. */
void zkl_session_batch_use(const zkl_session *s, long *batches, long *ops, long *resent,
                           long *read_batches, long *read_ops);
/* The test harness's hold on reconnection (zkl_reconnect_hold): 1 holds, 0 releases. */
void zkl_session_hold_reconnection(zkl_session *s, int held);
/* 1 when the connection retry policy gave up and stopped the session (until the next start). */
int zkl_session_gave_up_connecting(const zkl_session *s);
/* Connection attempts that failed since the session was made (not drops of live ones). */
long zkl_session_failed_connection_attempts(zkl_session *s);
/* 0, or -1 with errno ENOMEM.  Hosts that resolve to no address yet are tried again at
 * every wait until the session is stopped (kazoo keeps trying too). */
int zkl_session_start(zkl_session *s);
void zkl_session_stop(zkl_session *s);  /* idempotent */
void zkl_session_free(zkl_session *s);  /* stops first */

/* Readable while events wait (see queue.h: after zkl_session_wait() returns, call
 * zkl_session_next() until NULL before polling it). */
int zkl_session_fd(const zkl_session *s);
/* Also writes a byte to a copy of fd whenever that fd becomes readable (a waker's socket,
 * waker.h, for hosts that read sockets only); -1 stops.  While it is set, reads are sent at
 * once rather than corked (ops.c).  0, or -1 with errno. */
int zkl_session_notify_fd(zkl_session *s, int fd);
/* Blocks until an event waits: 1, or 0 after timeout_ms (-1: none) or at most 200 ms, so
 * that callers see signals; callers loop to wait longer. */
int zkl_session_wait(zkl_session *s, int timeout_ms);
zkl_event *zkl_session_next(zkl_session *s);         /* next deliverable event, or NULL */
/* What a synchronous call waits with: blocks until op id's completion is the next deliverable
 * event and returns it (the caller frees it); returns NULL, leaving everything in order for
 * zkl_session_next(), as soon as another event must be delivered first or a wait slice
 * (zkl_session_wait) passes quietly.  Saves a round through the caller's event loop per op. */
zkl_event *zkl_session_await(zkl_session *s, uint64_t id);

zkl_state zkl_session_state(const zkl_session *s);
zkl_client_state zkl_session_client_state(const zkl_session *s);
int zkl_session_is_stopped(const zkl_session *s);
int zkl_session_client_id(const zkl_session *s, int64_t *id, char passwd[16]); /* -1 if none */
/* 1 when id (non-zero) is the session id of one of this session's earlier handles (one that
 * expired, counted as LOST, or was stopped), among its last ZKL_PAST_SESSION_IDS: an ephemeral
 * node it still owns was made by this client, and goes when the server expires that session.
 * The current handle's id is not an earlier one. */
enum { ZKL_PAST_SESSION_IDS = 16 };
int zkl_session_had_id(const zkl_session *s, int64_t id);
int zkl_session_negotiated_timeout(const zkl_session *s); /* ms, 0 before connecting */
/* kazoo's set_hosts: the library (zoo_set_servers) may move the live connection to a server
 * of the new list (its rebalancing), and makes the next connection within it; every later
 * handle uses it.  The
 * chroot stays the one the session started with (the caller refuses a change).  0, or -1
 * with errno (EINVAL: the library refused the list, ENOMEM). */
int zkl_session_set_hosts(zkl_session *s, const char *hosts);
/* "host:port" of the server the handle is connected to, copied into buf (size bytes);
 * 0, or -1 when there is no connected handle. */
int zkl_session_current_server(zkl_session *s, char *buf, size_t size);
long zkl_session_pending_ops(zkl_session *s);
/* The reason the last TLS handshake of this session failed ("certificate verify failed",
 * ...), copied into buf (size bytes); 0, or -1 when none failed since the last connection. */
int zkl_session_last_tls_failure(zkl_session *s, char *buf, size_t size);
/* 1 while a SASL GSSAPI session waits for its Kerberos tickets before opening its handle
 * (kerberos_tickets.h): the KDC has not answered yet; else 0. */
int zkl_session_awaits_kdc(zkl_session *s);
/* Cyrus SASL's reason the last SASL exchange of this session failed on the client's side
 * (GSSAPI: "... Cannot contact any KDC for realm ..."), copied into buf; 0, or -1 when none
 * did (a refusal by the server is AUTH_FAILED without one). */
int zkl_session_last_sasl_failure(zkl_session *s, char *buf, size_t size);
/* Sends the reads that wait in the session's cork (ops.c) now, instead of at the owner's next
 * wait or dispatch: for a host that suspends the caller and dispatches later. */
void zkl_session_flush(zkl_session *s);

/* C code (recipes) hears every state event before it is delivered; fn must not call Lua. */
typedef void (*zkl_state_fn)(zkl_session *s, zkl_state state, void *ctx);
typedef struct zkl_state_listener {
    zkl_state_fn fn;
    void *ctx;
} zkl_state_listener;
int zkl_session_add_state_listener(zkl_session *s, zkl_state_fn fn, void *ctx); /* 0 or -1 */
void zkl_session_remove_state_listener(zkl_session *s, zkl_state_fn fn, void *ctx);

/* A notify target id for one C recipe: 1, 2, 3, ... per session, never handed out twice by
 * the same session, so every recipe of a session (lock, party, barrier alike) has its own. */
uint64_t zkl_session_new_target(zkl_session *s);

/* Queues a ZKL_EV_NOTIFY event (id = target, type = code) for the caller of next(). */
int zkl_session_notify(zkl_session *s, uint64_t target, int code);

/* Remembers an auth so that it is re-applied to every new session after an expiry. */
int zkl_session_remember_auth(zkl_session *s, const char *scheme, const char *cred, int len);

#endif
