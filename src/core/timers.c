/*
 * timers.c — see timers.h.  The timer thread and the owner share one small array under a
 * mutex.  The thread marks a due timer "pushed" and queues its event; the owner, popping the
 * event, calls the route only if the timer is still there (a cancel removes it, pushed or
 * not), so a cancelled timer never calls back.
 */
#include "timers.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "queue.h"
#include "session_private.h"

static struct timespec now_plus_ms(long ms)
{
    return zkl_monotonic_after_us((long long)ms * 1000LL);
}

static int before(struct timespec a, struct timespec b)
{
    return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

static int find(const zkl_timers *t, uint64_t id)
{
    for (int i = 0; i < t->count; i++) {
        if (t->items[i].id == id)
            return i;
    }
    return -1;
}

static void remove_at(zkl_timers *t, int i)
{
    t->items[i] = t->items[--t->count];
}

/* The earliest timer not yet pushed, or -1. */
static int earliest(const zkl_timers *t)
{
    int best = -1;
    for (int i = 0; i < t->count; i++) {
        if (!t->items[i].pushed && (best < 0 || before(t->items[i].due, t->items[best].due)))
            best = i;
    }
    return best;
}

/* Queues the due timer's event; out of memory: tries again a little later. */
static void push_due_locked(zkl_timers *t, zkl_timer *timer)
{
    zkl_event *ev = calloc(1, sizeof *ev);
    if (!ev) {
        timer->due = now_plus_ms(10);
        return;
    }
    ev->kind = ZKL_EV_TIMER;
    ev->id = timer->id;
    timer->pushed = 1;
    zkl_queue_push(t->queue, ev); /* lock order: timers, then queue (never the reverse) */
}

static void *timer_thread(void *arg)
{
    zkl_timers *t = arg;
    pthread_mutex_lock(&t->mutex);
    while (!t->stopping) {
        int i = earliest(t);
        if (i < 0) {
            pthread_cond_wait(&t->changed, &t->mutex);
            continue;
        }
        struct timespec now = now_plus_ms(0);
        if (!before(now, t->items[i].due)) {
            push_due_locked(t, &t->items[i]);
            continue;
        }
        struct timespec due = t->items[i].due;
        pthread_cond_timedwait(&t->changed, &t->mutex, &due);
    }
    pthread_mutex_unlock(&t->mutex);
    return NULL;
}

/* Starts the thread with every signal blocked (signals belong to the owner's host). */
static int start_thread_locked(zkl_timers *t)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&t->thread, NULL, timer_thread, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -1;
    t->thread_running = 1;
    return 0;
}

int zkl_timers_init(zkl_timers *t, struct zkl_queue *queue)
{
    memset(t, 0, sizeof *t);
    t->queue = queue;
    if (pthread_mutex_init(&t->mutex, NULL) != 0)
        return -1;
    int rc = zkl_cond_init_monotonic(&t->changed);
    if (rc != 0) {
        pthread_mutex_destroy(&t->mutex);
        return -1;
    }
    return 0;
}

void zkl_timers_stop(zkl_timers *t)
{
    pthread_mutex_lock(&t->mutex);
    t->stopping = 1;
    t->count = 0;
    int running = t->thread_running;
    t->thread_running = 0;
    pthread_mutex_unlock(&t->mutex);
    pthread_cond_signal(&t->changed);
    if (running)
        pthread_join(t->thread, NULL);
}

void zkl_timers_destroy(zkl_timers *t)
{
    free(t->items);
    t->items = NULL;
    t->capacity = 0;
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->mutex);
}

uint64_t zkl_session_add_timer(zkl_session *s, long delay_ms, const zkl_route *route)
{
    zkl_timers *t = &s->timers;
    uint64_t id = 0;
    pthread_mutex_lock(&t->mutex);
    if (t->stopping || (!t->thread_running && start_thread_locked(t) != 0))
        goto out;
    if (t->count == t->capacity) {
        int capacity = t->capacity ? t->capacity * 2 : 4;
        zkl_timer *items = realloc(t->items, sizeof *items * (size_t)capacity);
        if (!items)
            goto out;
        t->items = items;
        t->capacity = capacity;
    }
    zkl_timer *timer = &t->items[t->count++];
    timer->id = id = ++t->last_id;
    timer->due = now_plus_ms(delay_ms > 0 ? delay_ms : 0);
    timer->route = *route;
    timer->pushed = 0;
out:
    pthread_mutex_unlock(&t->mutex);
    if (id)
        pthread_cond_signal(&t->changed); /* it may be the earliest now */
    else
        errno = ENOMEM;
    return id;
}

void zkl_session_cancel_timer(zkl_session *s, uint64_t id)
{
    zkl_timers *t = &s->timers;
    pthread_mutex_lock(&t->mutex);
    int i = find(t, id);
    if (i >= 0)
        remove_at(t, i);
    pthread_mutex_unlock(&t->mutex);
}

void zkl_timers_deliver(zkl_session *s, zkl_timers *t, const zkl_event *ev)
{
    pthread_mutex_lock(&t->mutex);
    int i = find(t, ev->id);
    zkl_route route = {NULL, NULL};
    if (i >= 0 && t->items[i].pushed) {
        route = t->items[i].route;
        remove_at(t, i);
    }
    pthread_mutex_unlock(&t->mutex);
    if (route.fn)
        route.fn(s, ev, route.ctx);
}
