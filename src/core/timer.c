/*
 * timer.c — see timer.h.  The timers of a session wait, sorted by due time, on a list that
 * only the timer thread takes from; the owner adds to it.  A due timer leaves the list and
 * is pushed on the session's queue as a ZKL_EV_TIMER event (the list's mutex is never held
 * while the queue's is taken, so the two never deadlock).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "session_private.h"
#include "timer.h"

typedef struct timer_entry {
    struct timer_entry *next;
    struct timespec due;
    zkl_event *ev;
} timer_entry;

struct zkl_timers {
    zkl_queue *queue;
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t wake; /* on CLOCK_MONOTONIC: a new earliest timer, or stop */
    timer_entry *head;   /* sorted by due time, earliest first */
    int stopping;
};

static int earlier(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static struct timespec due_after(long delay_ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (delay_ms > 0) {
        t.tv_sec += delay_ms / 1000;
        t.tv_nsec += (delay_ms % 1000) * 1000000L;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
    }
    return t;
}

/* The thread: hands each timer to the queue once it is due. */
static void *run_timers(void *arg)
{
    struct zkl_timers *t = arg;
    pthread_mutex_lock(&t->mutex);
    while (!t->stopping) {
        if (!t->head) {
            pthread_cond_wait(&t->wake, &t->mutex);
            continue;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (earlier(&now, &t->head->due)) {
            pthread_cond_timedwait(&t->wake, &t->mutex, &t->head->due);
            continue;
        }
        timer_entry *e = t->head;
        t->head = e->next;
        pthread_mutex_unlock(&t->mutex);
        zkl_queue_push(t->queue, e->ev);
        free(e);
        pthread_mutex_lock(&t->mutex);
    }
    pthread_mutex_unlock(&t->mutex);
    return NULL;
}

static void destroy_timers(struct zkl_timers *t)
{
    pthread_cond_destroy(&t->wake);
    pthread_mutex_destroy(&t->mutex);
    free(t);
}

/* Starts the session's timer thread with every signal blocked (signals are the owner's). */
static struct zkl_timers *start_timers(zkl_session *s)
{
    struct zkl_timers *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->queue = &s->queue;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&t->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->mutex, NULL);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&t->thread, NULL, run_timers, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        destroy_timers(t);
        errno = rc;
        return NULL;
    }
    return t;
}

uint64_t zkl_session_timer(zkl_session *s, long delay_ms, const zkl_route *route)
{
    if (!s->timers && (s->timers = start_timers(s)) == NULL)
        return 0;
    timer_entry *e = calloc(1, sizeof *e);
    zkl_event *ev = calloc(1, sizeof *ev);
    if (!e || !ev) {
        free(e);
        free(ev);
        return 0;
    }
    ev->kind = ZKL_EV_TIMER;
    ev->id = ++s->next_op_id;
    ev->session = s;
    ev->route = *route;
    ev->rc = ZOK;
    e->ev = ev;
    e->due = due_after(delay_ms);

    struct zkl_timers *t = s->timers;
    pthread_mutex_lock(&t->mutex);
    timer_entry **at = &t->head;
    while (*at && !earlier(&e->due, &(*at)->due))
        at = &(*at)->next; /* after every timer due no later: equal delays fire in order */
    e->next = *at;
    *at = e;
    if (t->head == e)
        pthread_cond_signal(&t->wake); /* a new earliest: the thread sleeps until it */
    pthread_mutex_unlock(&t->mutex);
    return ev->id;
}

void zkl_timers_shutdown(zkl_session *s)
{
    struct zkl_timers *t = s->timers;
    if (!t)
        return;
    s->timers = NULL;
    pthread_mutex_lock(&t->mutex);
    t->stopping = 1;
    pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->mutex);
    pthread_join(t->thread, NULL);
    while (t->head) { /* owed their call: it comes now, as ZCLOSING */
        timer_entry *e = t->head;
        t->head = e->next;
        e->ev->rc = ZCLOSING;
        zkl_queue_push(&s->queue, e->ev);
        free(e);
    }
    destroy_timers(t);
}
