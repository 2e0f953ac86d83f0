/*
 * queue.c — see queue.h.
 *
 * The eventfd is written only when the ready list goes from empty to non-empty, and after the
 * mutex is released: a write wakes the owner at once, and it must not find the mutex still
 * held (that costs two more context switches per event).  The owner drains the fd when it
 * finds the list empty and then looks once more, so an event pushed while it drained is
 * returned, and any event pushed after that look comes with a write of its own: the fd is
 * readable whenever events wait.
 */
#include "queue.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

int zkl_queue_init(zkl_queue *q)
{
    q->head = q->tail = q->pending = NULL;
    q->pending_count = 0;
    q->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->fd < 0)
        return -1;
    if (pthread_mutex_init(&q->mutex, NULL) != 0) {
        close(q->fd);
        errno = ENOMEM;
        return -1;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&q->idle, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&q->mutex);
        close(q->fd);
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

static void free_list(zkl_event *ev)
{
    while (ev) {
        zkl_event *next = ev->next;
        zkl_event_free(ev);
        ev = next;
    }
}

void zkl_queue_destroy(zkl_queue *q)
{
    free_list(q->head);
    free_list(q->pending);
    q->head = q->tail = q->pending = NULL;
    close(q->fd);
    pthread_cond_destroy(&q->idle);
    pthread_mutex_destroy(&q->mutex);
}

static void signal_fd(zkl_queue *q)
{
    uint64_t one = 1;
    ssize_t n = write(q->fd, &one, sizeof one);
    (void)n; /* EAGAIN only if the counter overflowed, which leaves it readable anyway */
}

static void drain_fd(zkl_queue *q)
{
    uint64_t count;
    ssize_t n = read(q->fd, &count, sizeof count);
    (void)n; /* EAGAIN: nothing to drain */
}

/* Appends ev; returns whether the list was empty (the caller then signals the fd). */
static int append_locked(zkl_queue *q, zkl_event *ev)
{
    int was_empty = q->head == NULL;
    ev->next = NULL;
    ev->prev = q->tail;
    if (q->tail)
        q->tail->next = ev;
    else
        q->head = ev;
    q->tail = ev;
    return was_empty;
}

static void unlink_pending_locked(zkl_queue *q, zkl_event *op)
{
    if (op->prev)
        op->prev->next = op->next;
    else
        q->pending = op->next;
    if (op->next)
        op->next->prev = op->prev;
    if (--q->pending_count == 0)
        pthread_cond_broadcast(&q->idle);
}

void zkl_queue_track(zkl_queue *q, zkl_event *op)
{
    pthread_mutex_lock(&q->mutex);
    op->prev = NULL;
    op->next = q->pending;
    if (q->pending)
        q->pending->prev = op;
    q->pending = op;
    q->pending_count++;
    pthread_mutex_unlock(&q->mutex);
}

void zkl_queue_complete(zkl_queue *q, zkl_event *op)
{
    pthread_mutex_lock(&q->mutex);
    unlink_pending_locked(q, op);
    int was_empty = append_locked(q, op);
    pthread_mutex_unlock(&q->mutex);
    if (was_empty)
        signal_fd(q);
}

void zkl_queue_push(zkl_queue *q, zkl_event *ev)
{
    pthread_mutex_lock(&q->mutex);
    int was_empty = append_locked(q, ev);
    pthread_mutex_unlock(&q->mutex);
    if (was_empty)
        signal_fd(q);
}

void zkl_queue_fail_pending(zkl_queue *q, int rc)
{
    pthread_mutex_lock(&q->mutex);
    /* oldest first: the pending list is newest first, so walk it from its end */
    zkl_event *last = q->pending;
    while (last && last->next)
        last = last->next;
    int was_empty = q->head == NULL;
    while (last) {
        zkl_event *prev = last->prev;
        last->rc = rc;
        last->watch_registered = 0;
        append_locked(q, last);
        last = prev;
    }
    int signal = was_empty && q->head != NULL;
    q->pending = NULL;
    q->pending_count = 0;
    pthread_cond_broadcast(&q->idle);
    pthread_mutex_unlock(&q->mutex);
    if (signal)
        signal_fd(q);
}

static zkl_event *pop_head(zkl_queue *q)
{
    pthread_mutex_lock(&q->mutex);
    zkl_event *ev = q->head;
    if (ev) {
        q->head = ev->next;
        if (q->head)
            q->head->prev = NULL;
        else
            q->tail = NULL;
        ev->next = ev->prev = NULL;
    }
    pthread_mutex_unlock(&q->mutex);
    return ev;
}

zkl_event *zkl_queue_pop(zkl_queue *q)
{
    zkl_event *ev = pop_head(q);
    if (ev)
        return ev;
    drain_fd(q);
    return pop_head(q);
}

int zkl_queue_is_empty(zkl_queue *q)
{
    pthread_mutex_lock(&q->mutex);
    int empty = q->head == NULL;
    pthread_mutex_unlock(&q->mutex);
    return empty;
}

long zkl_queue_wait_idle(zkl_queue *q, int timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&q->mutex);
    while (q->pending_count > 0 &&
           pthread_cond_timedwait(&q->idle, &q->mutex, &deadline) == 0)
        ;
    long left = q->pending_count;
    pthread_mutex_unlock(&q->mutex);
    return left;
}
