/*
 * log.h — libzookeeper's own log lines, handed to the session they belong to.
 *
 * The library logs from its I/O and completion threads (and from the owner's thread inside
 * its calls) through a per-handle callback that receives nothing but the text.  So a session
 * that wants lines binds its sink to a slot: one of ZKL_LOG_SLOTS fixed callbacks, each
 * forwarding to the sink bound to it for as long as the handle lives.  The sink filters by
 * level, rate-limits, and pushes ZKL_EV_LOG events (type = level, data = text) onto the
 * session's queue; the owner thread hands them to Lua like any other event.
 *
 * Every session binds its sink, whatever its level: the library reports each failed
 * connection attempt only as an ERROR line, and the sink hands those to the session's
 * reconnection pacer (reconnect.h) before it filters by level.
 *
 * Guarantees:
 * - Quiet by default: a sink at level 0 passes nothing on, and the library's process-wide level
 *   is ERROR while any sink is bound, higher only when a bound sink asks for more.  The library
 *   formats an ERROR line only when something failed.  Nothing is ever written to stderr here.
 * - Lines reach only the session whose handle logged them, never another one.
 * - Rate limits, because with every server down the library retries in a loop (one host:
 *   an ERROR and a WARN per attempt; two hosts: 12,000 lines/s were measured before the
 *   reconnection pacer; a policy with short pauses still gives many):
 *     ERROR and WARN lines from one place in the library (function and line) pass at most
 *     once per ZKL_LOG_REPEAT_S seconds, the next one shown saying how many were suppressed;
 *     at most ZKL_LOG_BURST lines per second pass at any level; at most ZKL_LOG_QUEUED wait
 *     undelivered (a client that does not dispatch drops the rest).  What is dropped for the
 *     last two reasons is counted on the next line shown.
 * - SUSPENDED and LOST change nothing here: the sink outlives every handle of its session
 *   and is rebound to each new one (an expiry opens a new handle).
 */
#ifndef ZKL_LOG_H
#define ZKL_LOG_H

#include <pthread.h>
#include <stdatomic.h>

#include <zookeeper/zookeeper.h>

struct zkl_queue;
struct zkl_reconnect;

enum {
    ZKL_LOG_SLOTS = 256,   /* sessions that may have a handle at once and be paced and heard */
    ZKL_LOG_REPEAT_S = 5,  /* one ERROR/WARN line per place in the library per this long */
    ZKL_LOG_BURST = 50,    /* lines per second per session, at most */
    ZKL_LOG_QUEUED = 1000, /* lines waiting for the owner, at most */
    ZKL_LOG_PLACES = 16,   /* places whose repeats are tracked (the least recent is reused) */
    ZKL_LOG_WHERE_SIZE = 64,
    ZKL_LOG_TLS_REASON_SIZE = 160,
    ZKL_LOG_SASL_REASON_SIZE = 320
};

typedef struct zkl_log_place {
    char where[ZKL_LOG_WHERE_SIZE]; /* "function@line" in the library; "" when unused */
    double last_shown; /* monotonic seconds */
    long suppressed;  /* lines from here not shown since */
} zkl_log_place;

typedef struct zkl_log_sink {
    pthread_mutex_t mutex;   /* guards everything below but the atomics */
    struct zkl_queue *queue; /* where lines go */
    struct zkl_reconnect *reconnect; /* hears failed connection attempts; may be NULL */
    int level;               /* 0 none, 1 ERROR, 2 WARN, 3 INFO, 4 DEBUG */
    int slot;                /* the bound slot, or -1 */
    int bound;               /* a handle is using this sink's callback */
    zkl_log_place places[ZKL_LOG_PLACES];
    double burst_start;      /* the current one-second window */
    int burst_count;
    long dropped;            /* lines dropped by the burst or queue limit, not yet reported */
    int slot_shortage_noted; /* told the owner once that no slot was free */
    /* OpenSSL's reason for the last failed TLS handshake ("" when none since the last
     * connection): the library logs only "error in ssl connect"; the sink adds the reason to
     * that line and keeps it for the error a start() that timed out raises. */
    char last_tls_failure[ZKL_LOG_TLS_REASON_SIZE];
    /* Cyrus SASL's reason the last SASL exchange failed on the client's side (GSSAPI: no
     * credentials, no KDC, a principal the KDC does not know), from the library's "Starting
     * SASL negotiation" / "During SASL negotiation" line; kept for AuthFailedError. */
    char last_sasl_failure[ZKL_LOG_SASL_REASON_SIZE];
    atomic_long queued;      /* lines pushed and not yet taken by the owner */
} zkl_log_sink;

/* level 0..4; 0 when the session has no logger.  reconnect may be NULL.  Returns 0, or -1
 * (out of resources). */
int zkl_log_sink_init(zkl_log_sink *sink, struct zkl_queue *queue, int level,
                      struct zkl_reconnect *reconnect);
void zkl_log_sink_destroy(zkl_log_sink *sink);

/* The callback to hand zookeeper_init2 for a new handle; call zkl_log_sink_unbind() once that
 * handle is closed (or failed to open).  Owner thread only. */
log_callback_fn zkl_log_sink_bind(zkl_log_sink *sink);
void zkl_log_sink_unbind(zkl_log_sink *sink);

/* The reason the last TLS handshake failed, copied into buf; 0, or -1 when none failed since
 * zkl_log_sink_connected().  Any thread. */
int zkl_log_sink_last_tls_failure(zkl_log_sink *sink, char *buf, size_t size);
/* The reason the last SASL exchange failed on the client's side, copied into buf; 0, or -1
 * when none failed.  Any thread. */
int zkl_log_sink_last_sasl_failure(zkl_log_sink *sink, char *buf, size_t size);
/* The session connected: forget the last TLS failure. */
void zkl_log_sink_connected(zkl_log_sink *sink);

/* The owner took a ZKL_EV_LOG event of this sink off the queue. */
void zkl_log_sink_taken(zkl_log_sink *sink);

/* The library's process-wide level now (the highest a bound sink asks for). */
int zkl_log_library_level(void);

/* "ERROR", "WARN", "INFO" or "DEBUG" for 1..4. */
const char *zkl_log_level_name(int level);

#endif
