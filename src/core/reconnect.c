/*
 * reconnect.c — see reconnect.h.  Pauses libzookeeper's I/O thread between failed passes over
 * the hosts, as kazoo's connection_retry sleeps between them, and gives up as kazoo does.
 */
#include "reconnect.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "event.h"
#include "kerberos_tickets.h"
#include "queue.h"
#include "random.h"

enum {
    LONGEST_PAUSE_S = 1000000, /* a longer pause lasts until the handle closes */
    GAVE_UP_PAUSE_S = 1,       /* after giving up, until the owner closes the handle */
    TICKET_POLL_US = 20000     /* how often a wait for a ticket fetch looks whether it ended */
};

zkl_reconnect_policy zkl_reconnect_default_policy(int session_timeout_ms)
{
    double cap = session_timeout_ms / 10000.0;
    if (cap > 1.0)
        cap = 1.0;
    if (cap < 0.1)
        cap = 0.1;
    zkl_reconnect_policy p = {.max_tries = -1, .delay = 0.1, .backoff = 2.0,
                              .max_jitter = 0.4, .max_delay = cap, .deadline = -1.0};
    return p;
}

/* The addresses one host:port entry stands for, looked up as the library does (a name may
 * stand for several servers); 1 when it does not resolve now. */
static int count_addresses(const char *entry, size_t len)
{
    char host[256];
    if (len == 0 || len >= sizeof host)
        return 1;
    memcpy(host, entry, len);
    host[len] = '\0';
    char *port = strrchr(host, ':');
    if (!port || port == host)
        return 1;
    *port++ = '\0';
    char *name = host;
    size_t name_len = strlen(name);
    if (name[0] == '[' && name_len > 1 && name[name_len - 1] == ']') { /* [v6 literal] */
        name[name_len - 1] = '\0';
        name++;
    }
    struct addrinfo hints, *found = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = AI_ADDRCONFIG;
    if (getaddrinfo(name, port, &hints, &found) != 0 || !found)
        return 1;
    int n = 0;
    for (struct addrinfo *a = found; a; a = a->ai_next)
        n++;
    freeaddrinfo(found);
    return n;
}

/* Attempts in one pass: every address of every entry of "h1:p1,h2:p2/chroot". */
static int count_pass_attempts(const char *hosts)
{
    size_t end = strcspn(hosts, "/");
    int n = 0;
    for (size_t at = 0; at < end;) {
        size_t len = strcspn(hosts + at, ",/");
        n += count_addresses(hosts + at, len);
        at += len + 1;
    }
    return n > 0 ? n : 1;
}

int zkl_reconnect_init(zkl_reconnect *r, struct zkl_queue *queue, const char *hosts,
                       int session_timeout_ms)
{
    memset(r, 0, sizeof *r);
    if (pthread_mutex_init(&r->mutex, NULL) != 0)
        return -1;
    if (zkl_cond_init_monotonic(&r->wake) != 0) {
        pthread_mutex_destroy(&r->mutex);
        return -1;
    }
    r->queue = queue;
    r->hosts_spec = strdup(hosts);
    if (!r->hosts_spec) {
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->mutex);
        return -1;
    }
    r->pass_attempts = 1;
    r->random_state = zkl_random_seed(r);
    r->policy = zkl_reconnect_default_policy(session_timeout_ms);
    atomic_init(&r->zh, NULL);
    atomic_init(&r->attempts_failed, 0);
    return 0;
}

void zkl_reconnect_destroy(zkl_reconnect *r)
{
    zkl_kerberos_tickets_release(r->tickets); /* a fetch still running frees itself */
    free(r->kerberos_service);
    free(r->hosts_spec);
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->mutex);
}

int zkl_reconnect_set_hosts(zkl_reconnect *r, const char *hosts)
{
    char *copy = strdup(hosts);
    if (!copy)
        return -1;
    int attempts = count_pass_attempts(copy);
    pthread_mutex_lock(&r->mutex);
    free(r->hosts_spec);
    r->hosts_spec = copy;
    r->pass_attempts = attempts;
    pthread_mutex_unlock(&r->mutex);
    return 0;
}

int zkl_reconnect_set_kerberos(zkl_reconnect *r, const char *service)
{
    char *copy = strdup(service);
    if (!copy)
        return -1;
    pthread_mutex_lock(&r->mutex);
    free(r->kerberos_service);
    r->kerberos_service = copy;
    pthread_mutex_unlock(&r->mutex);
    return 0;
}

void zkl_reconnect_set_policy(zkl_reconnect *r, const zkl_reconnect_policy *policy)
{
    pthread_mutex_lock(&r->mutex);
    r->policy = *policy;
    pthread_mutex_unlock(&r->mutex);
}

/* Forgets every failure: a connection was made, or a new handle starts.  Mutex held. */
static void reset_locked(zkl_reconnect *r)
{
    r->failures = 0;
    r->passes_failed = 0;
    r->next_delay = r->policy.delay;
    r->first_failure = 0;
}

void zkl_reconnect_begin(zkl_reconnect *r, uint64_t generation)
{
    int attempts = count_pass_attempts(r->hosts_spec); /* as zookeeper_init2 resolves them */
    pthread_mutex_lock(&r->mutex);
    r->pass_attempts = attempts;
    reset_locked(r);
    r->interrupted = 0;
    r->gave_up = 0;
    r->generation = generation;
    zkl_kerberos_tickets_release(r->tickets); /* left by a handle that gave up */
    r->tickets = NULL;
    pthread_mutex_unlock(&r->mutex);
    atomic_store(&r->zh, NULL);
}

void zkl_reconnect_set_handle(zkl_reconnect *r, zhandle_t *zh)
{
    atomic_store(&r->zh, zh);
}

void zkl_reconnect_connected(zkl_reconnect *r)
{
    pthread_mutex_lock(&r->mutex);
    reset_locked(r);
    pthread_mutex_unlock(&r->mutex);
}

void zkl_reconnect_interrupt(zkl_reconnect *r)
{
    atomic_store(&r->zh, NULL);
    pthread_mutex_lock(&r->mutex);
    r->interrupted = 1;
    pthread_cond_broadcast(&r->wake);
    pthread_mutex_unlock(&r->mutex);
}

/* Whether the line reports a failed attempt to connect.  Otherwise it reports the drop of a
 * live connection (the library still shows the handle connected while it logs why it ended)
 * or a server's verdict on the session (expired, auth failed), which kazoo does not count
 * either: it resets its retry. */
static int is_failed_attempt(zkl_reconnect *r)
{
    zhandle_t *zh = atomic_load(&r->zh);
    if (!zh)
        return 1; /* the handle's first attempt failed before zookeeper_init2 returned */
    int state = zoo_state(zh);
    return state != ZOO_CONNECTED_STATE && state != ZOO_READONLY_STATE &&
           state != ZOO_EXPIRED_SESSION_STATE && state != ZOO_AUTH_FAILED_STATE;
}

/* SASL GSSAPI: starts fetching the tickets the next connection needs, unless a fetch runs
 * already (kerberos_tickets.h; nothing to wait for when it cannot start).  Mutex held. */
static void start_ticket_fetch_locked(zkl_reconnect *r)
{
    if (r->kerberos_service && !r->tickets)
        r->tickets = zkl_kerberos_tickets_start(r->kerberos_service, r->hosts_spec);
}

/* Tells the owner the policy gave up (a session event of the paced handle). */
static void push_gave_up(zkl_reconnect *r)
{
    zkl_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return; /* out of memory: the client goes on trying, a pause per attempt */
    ev->kind = ZKL_EV_SESSION;
    ev->zk_state = ZKL_GAVE_UP_STATE;
    ev->generation = r->generation;
    zkl_queue_push(r->queue, ev);
}

/* Tells the owner that the handle is not connected (a ZOO_CONNECTING_STATE session event of
 * the paced handle), at the first failed attempt since the last connection.  The library
 * reports the drop of a live connection itself, but not always: when its host list changes
 * (zoo_set_servers, or its periodic re-resolution of the names) and the server in use is not
 * in the new list, it closes the connection and marks the handle not connected without any
 * session event, and no attempt that fails afterwards sends one either.  The session would
 * stay CONNECTED for ever while nothing is carried (no SUSPENDED, no LOST, requests handed to
 * the library waiting for a server).  A duplicate of the library's own event is harmless:
 * the owner's state machine ignores a state it is already in.  Mutex held. */
static void push_connection_down(zkl_reconnect *r)
{
    zkl_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return; /* out of memory: the library's next session event tells the state */
    ev->kind = ZKL_EV_SESSION;
    ev->zk_state = ZOO_CONNECTING_STATE;
    ev->generation = r->generation;
    zkl_queue_push(r->queue, ev);
}

/* Waits until interrupted or `seconds` passed; a pause beyond LONGEST_PAUSE_S (an infinite
 * delay included) lasts until interrupted.  Mutex held. */
static void pause_locked(zkl_reconnect *r, double seconds)
{
    int timed = seconds < LONGEST_PAUSE_S; /* false for NaN too */
    struct timespec until = zkl_monotonic_after_us(timed ? (long long)(seconds * 1e6) : 0);
    while (!r->interrupted) {
        int rc = timed ? pthread_cond_timedwait(&r->wake, &r->mutex, &until)
                       : pthread_cond_wait(&r->wake, &r->mutex);
        if (rc != 0)
            break; /* timed out (or could not wait at all: never spin holding the mutex) */
    }
}

/* Waits until the ticket fetch ends, or the handle closes (the fetch then ends on its own
 * thread, which frees it).  The fetch has no way to wake this wait, so it looks every
 * TICKET_POLL_US: only while a KDC is slow to answer.  The policy's deadline counts the wait
 * as time without a connection: past it the policy gives up, and the thread waits on until
 * the owner closes the handle (connecting without the tickets would wait for the KDC inside
 * the library).  Mutex held. */
static void wait_for_tickets_locked(zkl_reconnect *r)
{
    if (!r->tickets)
        return;
    while (!r->interrupted && !zkl_kerberos_tickets_done(r->tickets)) {
        double now = zkl_monotonic_seconds();
        if (r->first_failure == 0)
            r->first_failure = now;
        if (!r->gave_up && r->policy.deadline >= 0 &&
            now >= r->first_failure + r->policy.deadline) {
            r->gave_up = 1;
            push_gave_up(r);
        }
        struct timespec until = zkl_monotonic_after_us(TICKET_POLL_US);
        int rc = pthread_cond_timedwait(&r->wake, &r->mutex, &until);
        if (rc != 0 && rc != ETIMEDOUT)
            break; /* could not wait at all: never spin holding the mutex */
    }
    zkl_kerberos_tickets_release(r->tickets);
    r->tickets = NULL;
    if (r->gave_up)
        pause_locked(r, LONGEST_PAUSE_S); /* until the owner closes the handle */
}

/* kazoo's KazooRetry step after a failed pass: give up (returns -1) or the pause, seconds.
 * Mutex held. */
static double next_pause_locked(zkl_reconnect *r, double now)
{
    const zkl_reconnect_policy *p = &r->policy;
    if (p->max_tries >= 0 && r->passes_failed == p->max_tries)
        return -1;
    r->passes_failed++;
    double jitter = 1.0 + p->max_jitter * (2.0 * zkl_random_unit(&r->random_state) - 1.0);
    double pause = r->next_delay * jitter;
    if (pause > p->max_delay)
        pause = p->max_delay;
    if (p->deadline >= 0 && now + pause >= r->first_failure + p->deadline)
        return -1;
    r->next_delay = r->next_delay * p->backoff;
    if (r->next_delay > p->max_delay)
        r->next_delay = p->max_delay;
    return pause;
}

/* The pass is over and failed: pause, or give up.  Mutex held. */
static void end_failed_pass_locked(zkl_reconnect *r, double now)
{
    r->failures = 0;
    double pause = next_pause_locked(r, now);
    if (pause >= 0) {
        pause_locked(r, pause);
        return;
    }
    /* No pause on this line: the library fails what waits to be sent once the line is
     * logged, and a synchronous call could be among it. */
    r->gave_up = 1;
    push_gave_up(r);
}

void zkl_reconnect_before_connect(zkl_reconnect *r)
{
    pthread_mutex_lock(&r->mutex);
    if (r->kerberos_service && !r->interrupted) {
        if (r->gave_up)
            pause_locked(r, LONGEST_PAUSE_S); /* no SASL step without tickets: until closed */
        else {
            start_ticket_fetch_locked(r);
            wait_for_tickets_locked(r);
        }
    }
    pthread_mutex_unlock(&r->mutex);
}

void zkl_reconnect_hold(zkl_reconnect *r, int held)
{
    pthread_mutex_lock(&r->mutex);
    r->held = held;
    pthread_cond_broadcast(&r->wake);
    pthread_mutex_unlock(&r->mutex);
}

void zkl_reconnect_attempt_failed(zkl_reconnect *r)
{
    int failed_attempt = is_failed_attempt(r);
    pthread_mutex_lock(&r->mutex);
    while (r->held && !r->interrupted)
        pthread_cond_wait(&r->wake, &r->mutex);
    if (r->interrupted) {
        pthread_mutex_unlock(&r->mutex);
        return; /* closing: the library stops trying */
    }
    if (!failed_attempt) {
        reset_locked(r); /* the passes start with the next attempt, at once */
        pthread_mutex_unlock(&r->mutex);
        return;
    }
    if (r->gave_up) {
        /* Waiting for the owner to close the handle: slow the library down meanwhile, in
         * slices, so that anything handed to it since still fails within a slice. */
        pause_locked(r, GAVE_UP_PAUSE_S);
        pthread_mutex_unlock(&r->mutex);
        return;
    }
    atomic_fetch_add(&r->attempts_failed, 1); /* those the policy made: not after it gave up */
    double now = zkl_monotonic_seconds();
    if (r->first_failure == 0) {
        r->first_failure = now;
        push_connection_down(r);
    }
    start_ticket_fetch_locked(r); /* the pass's pause and the fetch overlap */
    if (++r->failures >= r->pass_attempts)
        end_failed_pass_locked(r, now);
    pthread_mutex_unlock(&r->mutex);
}
