/*
 * waker.h — a wake-up channel that a host's event loop can read as a socket: how a session
 * wakes an event loop that cannot watch an arbitrary fd (nginx's ngx_lua can only wait on its
 * own cosockets, which connect to TCP or unix-domain addresses).
 *
 * zkl_waker_listen() makes a unix-domain stream socket listening at a fresh path in a
 * directory; the host connects its own socket to that path, then zkl_waker_accept() takes the
 * connection, closes the listener and removes the path.  From then on zkl_waker_fd() is the
 * writing end: hand it to sessions (zkl_session_notify_fd()), whose queues write one byte to it
 * each time events start waiting after the queue was empty, so the host's socket becomes
 * readable exactly when the session has something for its owner.  The host reads whatever
 * bytes are there (their number means nothing) and then drains its sessions.
 *
 * Guarantees: the path is private (its owner only: mode 0700, in the given directory, a name no other waker
 * uses) and exists only between listen and accept (or close); writes never block and never
 * raise SIGPIPE: with the host's socket gone (a worker exiting) the bytes are dropped.
 * Everything here runs on the owner thread; the sessions keep their own copy of the fd, so
 * closing the waker never pulls it out from under a library thread that writes.
 */
#ifndef ZKL_WAKER_H
#define ZKL_WAKER_H

#include <stddef.h>

typedef struct zkl_waker {
    int listener;   /* listening socket until accepted, else -1 */
    int fd;         /* the accepted connection (writing end), else -1 */
    char path[108]; /* the listening path while listening, else "" */
} zkl_waker;

/* Listens at a new path in dir: 0, or -1 with errno (ENAMETOOLONG: dir too long). */
int zkl_waker_listen(zkl_waker *w, const char *dir);
/* Takes the host's connection (made to w->path): 0, or -1 with errno (EAGAIN: no connection
 * yet).  The listener and its path are gone either way once a connection was taken. */
int zkl_waker_accept(zkl_waker *w);
/* The writing end after accept, else -1. */
int zkl_waker_fd(const zkl_waker *w);
/* Writes one byte (the host's socket becomes readable); never blocks. */
void zkl_waker_signal(const zkl_waker *w);
/* Closes both sockets and removes the path if it is still there; idempotent. */
void zkl_waker_close(zkl_waker *w);

#endif
