/*
 * reconnect.c — see reconnect.h.  Pauses libzookeeper's I/O thread between failed passes over
 * the hosts, as kazoo's connection_retry sleeps between them, and gives up as kazoo does.
 */
#include "reconnect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "event.h"
#include "queue.h"

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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

/* One attempt per host of "h1:p1,h2:p2/chroot". */
static int count_hosts(const char *hosts)
{
    int n = 1;
    for (const char *c = hosts; *c && *c != '/'; c++)
        if (*c == ',')
            n++;
    return n;
}

int zkl_reconnect_init(zkl_reconnect *r, struct zkl_queue *queue, const char *hosts)
{
    memset(r, 0, sizeof *r);
    if (pthread_mutex_init(&r->mutex, NULL) != 0)
        return -1;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&r->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&r->mutex);
        return -1;
    }
    r->queue = queue;
    r->hosts = count_hosts(hosts);
    struct timespec seed;
    clock_gettime(CLOCK_REALTIME, &seed);
    r->random_state = ((uint64_t)seed.tv_nsec << 20) ^ (uint64_t)(uintptr_t)r ^ 0x9E3779B97F4A7C15ULL;
    r->policy = zkl_reconnect_default_policy(10000);
    atomic_init(&r->zh, NULL);
    atomic_init(&r->attempts_failed, 0);
    return 0;
}

void zkl_reconnect_destroy(zkl_reconnect *r)
{
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->mutex);
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
    pthread_mutex_lock(&r->mutex);
    reset_locked(r);
    r->interrupted = 0;
    r->gave_up = 0;
    r->generation = generation;
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

/* The failure is the drop of a live connection: the library still shows the handle as
 * connected while it logs why the connection ended. */
static int was_connected(zkl_reconnect *r)
{
    zhandle_t *zh = atomic_load(&r->zh);
    if (!zh)
        return 0;
    int state = zoo_state(zh);
    return state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE;
}

/* Tells the owner the policy gave up (a session event of the paced handle). */
static void push_gave_up(zkl_reconnect *r)
{
    zkl_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return; /* out of memory: the owner's session-timeout check still ends it */
    ev->kind = ZKL_EV_SESSION;
    ev->zk_state = ZKL_GAVE_UP_STATE;
    ev->generation = r->generation;
    zkl_queue_push(r->queue, ev);
}

/* Waits until interrupted or `seconds` passed (for ever when seconds < 0).  Mutex held. */
static void pause_locked(zkl_reconnect *r, double seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (seconds >= 0) {
        double end = (double)until.tv_sec + (double)until.tv_nsec / 1e9 + seconds;
        until.tv_sec = (time_t)end;
        until.tv_nsec = (long)((end - (double)until.tv_sec) * 1e9);
    }
    while (!r->interrupted) {
        if (seconds < 0)
            pthread_cond_wait(&r->wake, &r->mutex);
        else if (pthread_cond_timedwait(&r->wake, &r->mutex, &until) == ETIMEDOUT)
            break;
    }
}

/* A uniform number in [0, 1) for the jitter (xorshift64*: drand48 is not thread-safe).
 * Mutex held. */
static double next_random_locked(zkl_reconnect *r)
{
    uint64_t x = r->random_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->random_state = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

/* kazoo's KazooRetry step after a failed pass: give up (returns -1) or the pause, seconds.
 * Mutex held. */
static double next_pause_locked(zkl_reconnect *r, double now)
{
    const zkl_reconnect_policy *p = &r->policy;
    if (p->max_tries >= 0 && r->passes_failed == p->max_tries)
        return -1;
    r->passes_failed++;
    double jitter = 1.0 + p->max_jitter * (2.0 * next_random_locked(r) - 1.0);
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

void zkl_reconnect_attempt_failed(zkl_reconnect *r)
{
    atomic_fetch_add(&r->attempts_failed, 1);
    int dropped = was_connected(r);
    pthread_mutex_lock(&r->mutex);
    if (dropped) {
        reset_locked(r); /* the passes start with the next attempt, at once */
        pthread_mutex_unlock(&r->mutex);
        return;
    }
    double now = monotonic_seconds();
    if (r->first_failure == 0)
        r->first_failure = now;
    if (r->interrupted || r->gave_up || ++r->failures < r->hosts) {
        pthread_mutex_unlock(&r->mutex);
        return;
    }
    r->failures = 0;
    double pause = next_pause_locked(r, now);
    if (pause < 0) {
        r->gave_up = 1;
        push_gave_up(r);
    }
    pause_locked(r, pause); /* after giving up: until the owner closes the handle */
    pthread_mutex_unlock(&r->mutex);
}
