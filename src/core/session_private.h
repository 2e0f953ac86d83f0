/*
 * session_private.h — the session's fields, shared by session.c (lifecycle, states) and
 * ops.c (submitting operations).  Nothing outside src/core includes this.
 */
#ifndef ZKL_SESSION_PRIVATE_H
#define ZKL_SESSION_PRIVATE_H

#include <stdatomic.h>

#include "log.h"
#include "queue.h"
#include "kerberos_tickets.h"
#include "reconnect.h"
#include "sasl.h"
#include "session.h"
#include "timers.h"
#include "watch_routes.h"

/* The context of one zhandle: callbacks learn from it which session and which handle. */
typedef struct zkl_handle_ctx {
    zkl_session *session;
    unsigned generation;
} zkl_handle_ctx;

typedef struct zkl_auth {
    char *scheme;
    char *cred;
    int len;
} zkl_auth;

struct zkl_session {
    char *hosts;
    char *tls_cert;           /* zookeeper_init_ssl's cert string, or NULL: plaintext */
    zkl_sasl *sasl;           /* SASL credentials (sasl.h), or NULL: none */
    int timeout_ms;
    int read_only;
    int resume;
    clientid_t resume_id;

    zhandle_t *zh;            /* NULL when stopped or between an expiry and a new handle */
    zkl_handle_ctx *handle_ctx;
    unsigned generation;      /* bumped for every new zhandle */
    int stopped;
    int needs_open;           /* a new handle is owed (opening one failed) */
    /* SASL GSSAPI: the tickets being fetched before the handle opens (kerberos_tickets.h);
     * the handle is owed (needs_open) until the fetch ends.  NULL: none pending. */
    zkl_kerberos_tickets *tickets;
    /* Why the owner is closing the handle: the library fails what it still holds with
     * ZCLOSING, which completions report as this instead (ZSESSIONEXPIRED after an expiry). */
    atomic_int closing_rc;

    zkl_state state;
    zkl_client_state client_state;
    /* While SUSPENDED: when the connection went down (CLOCK_MONOTONIC ms) and the session
     * timeout the server had granted; a whole timeout later the session counts as LOST. */
    long long suspended_at_ms;
    int suspended_timeout_ms;
    uint64_t suspension_timer; /* wakes the owner when that timeout is up (0: none armed) */
    uint64_t next_op_id;
    uint64_t next_target;     /* the last notify target handed out (0: none yet) */
    zkl_queue queue;
    zkl_timers timers;        /* C recipes' one-shot timers (timers.h) */
    zkl_event *held;          /* popped by zkl_session_await() for another op: next out */
    /* Watches the current handle registered whose event has not been delivered yet.  A direct
     * op (ops_now.c) runs only while there are none: the library may hand a sync call its
     * reply before a watch event the server sent first, and ZooKeeper promises a client sees
     * the watch event before the data that changed. */
    long watches_out;
    zkl_log_sink log;         /* libzookeeper's lines for this session's handles */
    zkl_reconnect reconnect;  /* paces the library's reconnection attempts (connection_retry) */
    int gave_up;              /* the connection retry policy gave up: stopped, not by stop() */

    zkl_auth *auths;
    int auth_count;

    /* The ids of this session's earlier handles (zkl_session_had_id), newest at past_next - 1:
     * a ring of ZKL_PAST_SESSION_IDS, filled as handles close. */
    int64_t past_ids[ZKL_PAST_SESSION_IDS];
    int past_count, past_next;

    char *read_buffer;        /* direct reads' buffer (ops_now.c), made on first use */
    /* ops not handed to the library yet, oldest first: corked reads, or anything made while
     * the session is not connected (ops.c) */
    zkl_event *unsent_head, *unsent_tail;
    int unsent_count;
    uint64_t unsent_timer;    /* wakes the owner when the oldest is overdue (0: none armed) */
    int no_cork;              /* reads go out at once: a host reads a notify socket (waker.h) */
    /* the window (ops.c): ops handed to the library whose event the owner has not taken yet,
     * at most window of them; the most there ever were */
    long sent, max_sent;
    int window;
    /* batched ops (ops.c): the multis of writes sent and the ops they carried, the ops sent
     * again on their own after their multi failed because of another op (or a server refused
     * a multiRead), the multiReads sent and the listings they carried */
    long batches, batched_ops, batch_resent, read_batches, read_batched_ops;
    /* multiReads (ops.c): the connection (a count of connects: another may reach another
     * server) on which one was answered, 0 none; probe_on: the connection the last one went
     * on; refused: a server refused one (older than 3.6): for the session's life, batched
     * listings go alone */
    unsigned multi_read_on, probe_on;
    int multi_read_refused;
    atomic_uint connects; /* the library's attempts to connect (its I/O thread: session.c) */

    zkl_watch_routes watch_routes; /* routed watches of the current handle */
    zkl_state_listener *listeners; /* C listeners, told of every delivered state event */
    int listener_count;
};

/* ops.c: the library's watcher for one-shot watches; ctx is the op id. */
void zkl_on_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx);

/* ops.c: sends the ops waiting unsent, in order, if the session is connected (or fails them
 * if its handle is gone).  Everything that waits for, delivers or sends anything else calls
 * it first, and so does the owner when the session connects. */
void zkl_ops_flush(zkl_session *s);

/* ops.c: the owner took op's event: its place in the window is free (the next unsent op
 * goes out). */
void zkl_ops_taken(zkl_session *s, zkl_event *op);

/* ops.c: the rc of a batched write whose multi failed because of another op, or of a batched
 * listing whose multiRead the server refused (older than 3.6): it did not run.
 * No ZooKeeper code is positive.  The owner never delivers such an event: after taking it,
 * it sends the op again on its own (zkl_ops_resend: 1).  An op whose handle closed meanwhile
 * (an expiry, a stop) is not sent on the next one: it fails as that handle's other ops did
 * (0, its rc set), and is delivered. */
enum { ZKL_OP_NOT_RUN = 1 };
int zkl_ops_resend(zkl_session *s, zkl_event *op);

/* ops.c: while the session is LOST (a new handle not yet connected), fails with
 * ZCONNECTIONLOSS the unsent ops that waited a session timeout; how many it failed (their
 * events are queued). */
int zkl_ops_fail_overdue(zkl_session *s);

/* ops.c: fails every unsent op with rc now (stop: what the window still held back). */
void zkl_ops_fail_unsent(zkl_session *s, int rc);

/* ops.c: forgets the unsent ops without sending them (the handle closes: they are still
 * pending, and are failed with the rest). */
void zkl_ops_drop_unsent(zkl_session *s);

/* ops.c: re-sends the remembered auths on a fresh handle (completions are internal). */
void zkl_ops_reapply_auth(zkl_session *s);

#endif
