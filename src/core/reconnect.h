/*
 * reconnect.h — kazoo's connection_retry on top of libzookeeper's own reconnection loop.
 *
 * libzookeeper reconnects by itself, and with every server down it does so without pausing:
 * about 11,000 connection attempts a second against refusing servers, nearly a whole core of
 * client CPU for as long as the outage lasts (measured with a plain C client on 3.8.0), and
 * every client of a fleet hammering the ensemble as it comes back.  kazoo instead makes a pass
 * over its hosts, then sleeps, longer after each failed pass (its connection_retry policy), and
 * gives up after max_tries passes or a deadline.
 *
 * The library offers no hook between attempts, but it reports every failed attempt through the
 * handle's log callback ("Socket <host> zk retcode=<rc>, errno=...", logged before it moves on)
 * on its I/O thread.  The session's log sink hands those lines here, and this pacer keeps
 * kazoo's policy by pausing that thread:
 * - a pass is one attempt per address the hosts stand for (looked up when a handle opens, as
 *   the library does); after each failed pass the I/O thread pauses for the policy's delay
 *   (times 1 +- max_jitter), which grows by backoff up to max_delay;
 * - after max_tries failed passes (-1: never) or when the next pause would end past the
 *   deadline counted from the first failure, it gives up: it pushes a session event
 *   (ZKL_GAVE_UP_STATE) for the owner, which closes the handle; until then each further
 *   attempt pauses GAVE_UP_PAUSE_S (reconnect.c);
 * - a connection made resets everything (kazoo's retry.reset()), and so does a server's verdict
 *   on the session (expired, auth failed); the drop of a live connection is not a failed
 *   attempt, so ops in flight hear their ConnectionLoss without delay, and the first pass
 *   after it starts at once.
 * A SASL GSSAPI session (zkl_reconnect_set_kerberos) has its Kerberos tickets fetched, on a
 * thread of kerberos_tickets.h, before each attempt to connect (the library's connect hook,
 * zklua's patch zoo-set-connect-hook.patch: zkl_reconnect_before_connect), and the I/O thread
 * waits for that fetch, interruptibly.  With the tickets in the cache (the usual case) the
 * fetch reads them there and ends at once; when one must come from the KDC again (expired,
 * the cache removed), a KDC that never answers holds this wait, which stop and close end, and
 * not MIT's own wait inside the library's SASL step (about 27 s a request), which they could
 * not.  The wait counts towards the policy's deadline.  A failed attempt starts the fetch at
 * once, so that it overlaps the pause.
 * A pause is interrupted, and no other starts, once zkl_reconnect_interrupt() is called: the
 * owner does so before zookeeper_close(), which joins the I/O thread.  Ops made while the
 * client is between connections are not handed to the library (it would fail them at the
 * next failed attempt): they wait for the connection in the session (ops.c).
 */
#ifndef ZKL_RECONNECT_H
#define ZKL_RECONNECT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <zookeeper/zookeeper.h>

struct zkl_queue;
struct zkl_kerberos_tickets;

/* A session event the library never sends: the connection retry policy gave up. */
enum { ZKL_GAVE_UP_STATE = -1000 };

typedef struct zkl_reconnect_policy {
    int max_tries;     /* failed passes retried; -1: for ever (kazoo's max_tries) */
    double delay;      /* first pause, seconds */
    double backoff;    /* each pause is the last times this */
    double max_jitter; /* a pause is delay * (1 +- max_jitter), 0..1 */
    double max_delay;  /* the longest pause, seconds */
    double deadline;   /* seconds from the first failure to giving up; < 0: none */
} zkl_reconnect_policy;

typedef struct zkl_reconnect {
    pthread_mutex_t mutex; /* guards everything but the atomics */
    pthread_cond_t wake;   /* signalled by zkl_reconnect_interrupt() */
    zkl_reconnect_policy policy;
    struct zkl_queue *queue;
    char *hosts_spec;      /* the session's host list */
    int pass_attempts;     /* attempts in one pass: the addresses the hosts stand for */
    int failures;          /* failed attempts in the current pass */
    int passes_failed;     /* since the last connection */
    double next_delay;     /* the next pause before jitter, seconds */
    double first_failure;  /* monotonic seconds; 0: none since the last connection */
    int interrupted;       /* the handle is closing: pause no more */
    int gave_up;
    int held;              /* zkl_reconnect_hold(): the next socket failure waits */
    uint64_t generation;   /* of the handle being paced (for the give-up event) */
    uint64_t random_state; /* for the jitter */
    char *kerberos_service; /* SASL GSSAPI's service: tickets fetched first; NULL: none */
    struct zkl_kerberos_tickets *tickets; /* the fetch the I/O thread waits for, or NULL */
    _Atomic(zhandle_t *) zh; /* that handle, NULL until known */
    atomic_long attempts_failed; /* failed connection attempts since the session was made */
} zkl_reconnect;

/* The default policy for a session timeout: for ever, 0.1 s doubling up to a tenth of the
 * session timeout (at most 1 s, at least 0.1 s), jitter 0.4, no deadline.  Short enough that
 * a server coming back is found well within the session's life. */
zkl_reconnect_policy zkl_reconnect_default_policy(int session_timeout_ms);

/* Starts with the default policy for the session timeout.  0, or -1 (out of resources). */
int zkl_reconnect_init(zkl_reconnect *r, struct zkl_queue *queue, const char *hosts,
                       int session_timeout_ms);
void zkl_reconnect_destroy(zkl_reconnect *r);
/* Owner thread, while no handle is open. */
void zkl_reconnect_set_policy(zkl_reconnect *r, const zkl_reconnect_policy *policy);
/* A new host list (the session's set_hosts): passes count its addresses from now on.
 * 0, or -1 when out of memory. */
int zkl_reconnect_set_hosts(zkl_reconnect *r, const char *hosts);

/* Owner thread, while no handle is open: the session authenticates with SASL GSSAPI to this
 * service (its tickets are fetched before each reconnection).  0, or -1 when out of memory. */
int zkl_reconnect_set_kerberos(zkl_reconnect *r, const char *service);

/* Owner thread: a new handle of this generation starts (zh may be NULL until init returns). */
void zkl_reconnect_begin(zkl_reconnect *r, uint64_t generation);
void zkl_reconnect_set_handle(zkl_reconnect *r, zhandle_t *zh);
/* Any thread: the handle connected. */
void zkl_reconnect_connected(zkl_reconnect *r);
/* Owner thread, before zookeeper_close(): ends any pause, and no other starts. */
void zkl_reconnect_interrupt(zkl_reconnect *r);

/* The library's I/O thread, before each attempt to connect (the connect hook), with no lock of
 * the handle held: a GSSAPI session waits here for its tickets (see above). */
void zkl_reconnect_before_connect(zkl_reconnect *r);

/* Any thread (the test harness): while held, the library's I/O thread stops at its next
 * socket failure (the drop of its connection, or a failed attempt) before it reconnects, until
 * released or the handle closes.  With the connection dropped, nothing reaches the server on
 * this session meanwhile: testing.expire_session holds a client while another handle takes
 * its session over and closes it, so that the client cannot win the session back first. */
void zkl_reconnect_hold(zkl_reconnect *r, int held);

/* The library's I/O thread: it reported a socket failure (a failed connection attempt, a
 * dropped connection, or a session the server ended); may pause the calling thread. */
void zkl_reconnect_attempt_failed(zkl_reconnect *r);

#endif
