/*
 * queue.c — see queue.h.  The eventfd is written only when the ready list goes from empty to
 * non-empty and drained only when the owner finds it empty, so a burst of completions costs
 * one write and one read, not one per event.
 */
#include "queue.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

int zkl_queue_init(zkl_queue *q)
{
    q->head = q->tail = q->pending = NULL;
    q->pending_count = 0;
    q->signaled = 0;
    q->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->fd < 0)
        return -1;
    if (pthread_mutex_init(&q->mutex, NULL) != 0) {
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
    pthread_mutex_destroy(&q->mutex);
}

static void signal_locked(zkl_queue *q)
{
    if (!q->signaled) {
        uint64_t one = 1;
        ssize_t n = write(q->fd, &one, sizeof one);
        (void)n; /* EAGAIN only if the counter were full: it is 0 or 1 here */
        q->signaled = 1;
    }
}

static void append_locked(zkl_queue *q, zkl_event *ev)
{
    ev->next = NULL;
    ev->prev = q->tail;
    if (q->tail)
        q->tail->next = ev;
    else
        q->head = ev;
    q->tail = ev;
    signal_locked(q);
}

static void unlink_pending_locked(zkl_queue *q, zkl_event *op)
{
    if (op->prev)
        op->prev->next = op->next;
    else
        q->pending = op->next;
    if (op->next)
        op->next->prev = op->prev;
    q->pending_count--;
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
    append_locked(q, op);
    pthread_mutex_unlock(&q->mutex);
}

void zkl_queue_push(zkl_queue *q, zkl_event *ev)
{
    pthread_mutex_lock(&q->mutex);
    append_locked(q, ev);
    pthread_mutex_unlock(&q->mutex);
}

void zkl_queue_fail_pending(zkl_queue *q, int rc)
{
    pthread_mutex_lock(&q->mutex);
    /* oldest first: the pending list is newest first, so walk it from its end */
    zkl_event *last = q->pending;
    while (last && last->next)
        last = last->next;
    while (last) {
        zkl_event *prev = last->prev;
        last->rc = rc;
        last->watch_registered = 0;
        append_locked(q, last);
        last = prev;
    }
    q->pending = NULL;
    q->pending_count = 0;
    pthread_mutex_unlock(&q->mutex);
}

zkl_event *zkl_queue_pop(zkl_queue *q)
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
    if (!q->head && q->signaled) {
        uint64_t count;
        ssize_t n = read(q->fd, &count, sizeof count);
        (void)n;
        q->signaled = 0;
    }
    pthread_mutex_unlock(&q->mutex);
    return ev;
}

int zkl_queue_is_empty(zkl_queue *q)
{
    pthread_mutex_lock(&q->mutex);
    int empty = q->head == NULL;
    pthread_mutex_unlock(&q->mutex);
    return empty;
}
