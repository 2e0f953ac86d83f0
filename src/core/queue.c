/*
 * queue.c — see queue.h.
 *
 * fd_armed and the fd change together under the mutex, so the fd is readable exactly while
 * fd_armed: it is written when an event arrives and nobody waits on the condition variable,
 * and drained when the owner empties the queue.  A burst of events costs one write and one
 * read; a blocked owner costs neither.
 *
 * With a deep pipeline (many ops in flight) a blocked owner asks to be woken for a batch of
 * events, or after a short delay, instead of for each one: a wake-up costs more than handling
 * an event, and the ops behind it are coming anyway.  A shallow pipeline (the usual sync
 * call) wakes on the first event.
 */
#include "queue.h"

enum {
    BATCH_MIN_PENDING = 64, /* this many ops in flight make a deep pipeline */
    BATCH_EVENTS = 32,      /* wake a deep pipeline's owner for this many events */
    BATCH_DELAY_US = 1000   /* ... or after this long */
};

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

int zkl_queue_init(zkl_queue *q)
{
    q->head = q->tail = q->pending = q->taken = NULL;
    q->pending_count = 0;
    q->fd_armed = 0;
    q->owner_waiting = 0;
    q->length = 0;
    q->wake_at_length = 1;
    q->notify_fd = -1;
    q->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->fd < 0)
        return -1;
    if (pthread_mutex_init(&q->mutex, NULL) != 0) {
        close(q->fd);
        errno = ENOMEM;
        return -1;
    }
    int rc = zkl_cond_init_monotonic(&q->idle);
    if (rc == 0 && zkl_cond_init_monotonic(&q->ready) != 0) {
        pthread_cond_destroy(&q->idle);
        rc = -1;
    }
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
    free_list(q->taken);
    free_list(q->head);
    free_list(q->pending);
    q->head = q->tail = q->pending = q->taken = NULL;
    close(q->fd);
    if (q->notify_fd >= 0)
        close(q->notify_fd);
    pthread_cond_destroy(&q->idle);
    pthread_cond_destroy(&q->ready);
    pthread_mutex_destroy(&q->mutex);
}

/* Makes the fd readable (once until drained) and tells the notify socket, if any. */
static void arm_fd_locked(zkl_queue *q)
{
    if (q->fd_armed)
        return;
    uint64_t one = 1;
    ssize_t n = write(q->fd, &one, sizeof one);
    (void)n; /* cannot fail: the counter is 0 while the fd is not armed */
    q->fd_armed = 1;
    if (q->notify_fd >= 0) {
        n = send(q->notify_fd, "!", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n; /* full: the reader has bytes already; closed: nobody reads any more */
    }
}

int zkl_queue_notify_fd(zkl_queue *q, int fd)
{
    int copy = -1;
    if (fd >= 0) {
        copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (copy < 0)
            return -1;
    }
    pthread_mutex_lock(&q->mutex);
    int old = q->notify_fd;
    q->notify_fd = copy;
    if (copy >= 0 && q->fd_armed) {
        ssize_t n = send(copy, "!", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n;
    }
    pthread_mutex_unlock(&q->mutex);
    if (old >= 0)
        close(old);
    return 0;
}

/* An event arrived: arms the fd, unless the owner is blocked in zkl_queue_wait(); then
 * returns 1 and the caller signals it after unlocking (signalled under the mutex, the owner
 * would wake only to block on it). */
static int wake_owner_locked(zkl_queue *q)
{
    if (q->owner_waiting)
        return q->length >= q->wake_at_length || q->pending_count == 0;
    arm_fd_locked(q);
    return 0;
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
    q->length++;
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
    append_locked(q, op);
    int signal = wake_owner_locked(q);
    pthread_mutex_unlock(&q->mutex);
    if (signal)
        pthread_cond_signal(&q->ready);
}

void zkl_queue_push(zkl_queue *q, zkl_event *ev)
{
    pthread_mutex_lock(&q->mutex);
    append_locked(q, ev);
    int signal = wake_owner_locked(q);
    pthread_mutex_unlock(&q->mutex);
    if (signal)
        pthread_cond_signal(&q->ready);
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
    int signal = q->head && wake_owner_locked(q);
    q->pending = NULL;
    q->pending_count = 0;
    pthread_cond_broadcast(&q->idle);
    pthread_mutex_unlock(&q->mutex);
    if (signal)
        pthread_cond_signal(&q->ready);
}

void zkl_queue_poke(zkl_queue *q)
{
    pthread_mutex_lock(&q->mutex);
    arm_fd_locked(q);
    pthread_mutex_unlock(&q->mutex);
}

/* Takes every ready event into q->taken; with none, drains the fd (nothing is left to do). */
static void take_ready(zkl_queue *q)
{
    pthread_mutex_lock(&q->mutex);
    q->taken = q->head;
    q->head = q->tail = NULL;
    q->length = 0;
    if (!q->taken && q->fd_armed) {
        uint64_t count;
        ssize_t n = read(q->fd, &count, sizeof count);
        (void)n;
        q->fd_armed = 0;
    }
    pthread_mutex_unlock(&q->mutex);
}

zkl_event *zkl_queue_pop(zkl_queue *q)
{
    if (!q->taken)
        take_ready(q);
    zkl_event *ev = q->taken;
    if (ev) {
        q->taken = ev->next;
        if (q->taken)
            q->taken->prev = NULL;
        ev->next = ev->prev = NULL;
    }
    return ev;
}

static struct timespec deadline_after(int timeout_ms)
{
    return zkl_monotonic_after_us((long long)timeout_ms * 1000LL);
}

static struct timespec earlier(struct timespec a, struct timespec b)
{
    if (a.tv_sec != b.tv_sec)
        return a.tv_sec < b.tv_sec ? a : b;
    return a.tv_nsec < b.tv_nsec ? a : b;
}

int zkl_queue_wait(zkl_queue *q, int timeout_ms)
{
    if (q->taken)
        return 1;
    struct timespec deadline = deadline_after(timeout_ms < 0 ? 0 : timeout_ms);
    pthread_mutex_lock(&q->mutex);
    q->owner_waiting = 1;
    q->wake_at_length = 1;
    int rc = 0;
    while (!q->head && rc == 0) {
        if (timeout_ms < 0)
            rc = pthread_cond_wait(&q->ready, &q->mutex);
        else
            rc = pthread_cond_timedwait(&q->ready, &q->mutex, &deadline);
    }
    if (q->head && q->length < BATCH_EVENTS && q->pending_count >= BATCH_MIN_PENDING) {
        /* a deep pipeline: let a batch gather (bounded by the caller's deadline too) */
        struct timespec batch = zkl_monotonic_after_us(BATCH_DELAY_US);
        if (timeout_ms >= 0)
            batch = earlier(batch, deadline);
        q->wake_at_length = BATCH_EVENTS;
        rc = 0;
        while (q->length < BATCH_EVENTS && q->pending_count > 0 && rc == 0)
            rc = pthread_cond_timedwait(&q->ready, &q->mutex, &batch);
    }
    q->owner_waiting = 0;
    int ready = q->head != NULL;
    pthread_mutex_unlock(&q->mutex);
    return ready;
}

int zkl_queue_is_idle(zkl_queue *q)
{
    pthread_mutex_lock(&q->mutex);
    int idle = q->taken == NULL && q->head == NULL && q->pending_count == 0;
    pthread_mutex_unlock(&q->mutex);
    return idle;
}

int zkl_queue_is_empty(zkl_queue *q)
{
    pthread_mutex_lock(&q->mutex);
    int empty = q->taken == NULL && q->head == NULL;
    pthread_mutex_unlock(&q->mutex);
    return empty;
}

long zkl_queue_wait_idle(zkl_queue *q, int timeout_ms)
{
    struct timespec deadline = deadline_after(timeout_ms);
    pthread_mutex_lock(&q->mutex);
    while (q->pending_count > 0 &&
           pthread_cond_timedwait(&q->idle, &q->mutex, &deadline) == 0)
        ;
    long left = q->pending_count;
    pthread_mutex_unlock(&q->mutex);
    return left;
}
