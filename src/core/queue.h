/*
 * queue.h — the hand-off between libzookeeper's threads and the owner thread.
 *
 * Library callbacks push finished events under a mutex; the owner thread pops them one at a
 * time.  The owner waits in one of two ways: blocked in zkl_queue_wait() (a condition
 * variable: the cheapest wake-up, the library's own sync calls use the same), or in a host
 * event loop polling the eventfd, which is readable while events wait (or, for a loop that
 * can only read sockets, reading a socket to which each arming writes a byte: notify_fd).  Events pushed while
 * the owner sat in zkl_queue_wait() wake it through the condition variable and leave the fd
 * alone, so after that wait the owner pops until the queue is empty before it polls the fd
 * again (zkl_session_next() until NULL; the Lua dispatch loop does).  The owner takes every
 * ready event in one lock and pops the batch from its own list without locking, so library
 * threads completing ops meanwhile rarely find the mutex held.  Ops in flight sit on a
 * pending list so that, once a zhandle
 * is closed and its threads joined, every op the library dropped can be failed here: no op is
 * ever left without its completion event.
 */
#ifndef ZKL_QUEUE_H
#define ZKL_QUEUE_H

#include <pthread.h>

#include "event.h"

typedef struct zkl_queue {
    pthread_mutex_t mutex;
    zkl_event *head, *tail; /* ready to deliver, oldest first */
    zkl_event *taken;       /* owner thread only, no lock: ready events taken from head, older
                               than any there; the fd stays armed until both are empty */
    zkl_event *pending;     /* submitted ops awaiting their completion */
    long pending_count;
    pthread_cond_t idle;    /* signaled when pending_count drops to 0 */
    int fd;                 /* eventfd, readable while fd_armed */
    int fd_armed;           /* the fd was written and not drained yet */
    int notify_fd;          /* a socket also written (one byte) when the fd is armed, or -1:
                               a host loop that reads sockets only (waker.h) */
    int owner_waiting;      /* the owner is blocked in zkl_queue_wait() */
    long length;            /* events ready */
    long wake_at_length;    /* while owner_waiting: signal once this many are ready */
    pthread_cond_t ready;   /* signaled when an event arrives while owner_waiting */
} zkl_queue;

int zkl_queue_init(zkl_queue *q);          /* 0, or -1 with errno */
void zkl_queue_destroy(zkl_queue *q);      /* frees every queued and pending event */

void zkl_queue_track(zkl_queue *q, zkl_event *op);    /* op submitted: now pending */
void zkl_queue_complete(zkl_queue *q, zkl_event *op); /* pending -> ready */
void zkl_queue_push(zkl_queue *q, zkl_event *ev);     /* a new ready event (watch, state) */
void zkl_queue_fail_pending(zkl_queue *q, int rc);    /* every pending op -> ready with rc */
zkl_event *zkl_queue_pop(zkl_queue *q);               /* NULL when empty; owner thread only */
/* Makes the fd readable (until the next pop finds the queue empty): the owner has work to do
 * on its next visit (reads waiting to be sent, ops.c) though no event waits. */
void zkl_queue_poke(zkl_queue *q);
/* Also writes one byte to a dup of fd (-1: stop) each time the eventfd is armed, and at once
 * if it is armed now; 0, or -1 with errno.  The queue closes its dup when destroyed. */
int zkl_queue_notify_fd(zkl_queue *q, int fd);
/* Blocks until an event waits or timeout_ms passes (-1: no limit); 1 if one waits. */
int zkl_queue_wait(zkl_queue *q, int timeout_ms);
/* Waits until no op is pending or timeout_ms passes; returns how many are still pending. */
long zkl_queue_wait_idle(zkl_queue *q, int timeout_ms);
int zkl_queue_is_empty(zkl_queue *q);
/* Whether no event waits and no op is pending. */
int zkl_queue_is_idle(zkl_queue *q);

#endif
