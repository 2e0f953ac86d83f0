/*
 * timers.h — one-shot timers for C recipes (a settle window, a time boundary), delivered on
 * the owner thread like routed events.
 *
 * zkl_session_add_timer() arms a timer; once delay_ms have passed its route is called once,
 * on the owner thread inside zkl_session_next(), with an event of kind ZKL_EV_TIMER whose id
 * is the timer's id, unless zkl_session_cancel_timer() took it back first (then no call ever
 * comes, even if the timer was already due).  A small thread per session (started with the
 * first timer, every signal blocked) sleeps until the earliest deadline and pushes the event
 * through the session's queue, so every way of waiting wakes for it: an owner blocked in
 * zkl_session_wait(), a host loop polling zkl_session_fd().
 *
 * Guarantees: deadlines follow CLOCK_MONOTONIC (wall-clock changes do not move them); timers
 * belong to the session, not to its zhandle, so a connection loss or an expiry leaves them
 * alone; zkl_session_free() drops the timers not yet delivered without calling their routes
 * (an owner that outlives its session must forget its timer ids).  Timer ids are 1, 2, 3, ...
 * per session, never 0.  A handful of timers per session is the expected load: arming and
 * cancelling are linear in the number armed.
 */
#ifndef ZKL_TIMERS_H
#define ZKL_TIMERS_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "route.h"

struct zkl_session;
struct zkl_queue;
struct zkl_event;

typedef struct zkl_timer {
    uint64_t id;
    struct timespec due;
    zkl_route route;
    int pushed; /* its event is in the queue, not yet delivered */
} zkl_timer;

/* The session's timers (a field of the session; see session_private.h). */
typedef struct zkl_timers {
    pthread_mutex_t mutex;
    pthread_cond_t changed; /* a timer was armed or cancelled, or the thread must stop */
    pthread_t thread;
    int thread_running;
    int stopping;
    struct zkl_queue *queue; /* where due timers' events go */
    zkl_timer *items;
    int count, capacity;
    uint64_t last_id;
} zkl_timers;

/* Arms a timer: its id, or 0 when out of memory or no thread could be started. */
uint64_t zkl_session_add_timer(struct zkl_session *s, long delay_ms, const zkl_route *route);
/* Takes a timer back: its route will not be called.  Unknown or delivered ids are ignored. */
void zkl_session_cancel_timer(struct zkl_session *s, uint64_t id);

/* For the session itself. */
int zkl_timers_init(zkl_timers *t, struct zkl_queue *queue); /* 0, or -1 */
void zkl_timers_stop(zkl_timers *t);    /* joins the thread, drops every timer */
void zkl_timers_destroy(zkl_timers *t); /* after stop, once the queue is drained */
/* A ZKL_EV_TIMER event popped by the owner: calls its route unless it was cancelled. */
void zkl_timers_deliver(struct zkl_session *s, zkl_timers *t, const struct zkl_event *ev);

#endif
