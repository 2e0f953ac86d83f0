/*
 * waker.c — see waker.h.
 */
#include "waker.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static atomic_uint waker_count; /* makes each path of a process new */

static void forget_path(zkl_waker *w)
{
    if (w->path[0]) {
        unlink(w->path);
        w->path[0] = '\0';
    }
}

int zkl_waker_listen(zkl_waker *w, const char *dir)
{
    w->listener = w->fd = -1;
    w->path[0] = '\0';
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    unsigned n = atomic_fetch_add(&waker_count, 1);
    int len = snprintf(addr.sun_path, sizeof addr.sun_path, "%s/zklua-wake-%ld-%u.sock", dir,
                       (long)getpid(), n);
    if (len < 0 || (size_t)len >= sizeof addr.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    unlink(addr.sun_path); /* a stale file of an earlier process with this pid */
    mode_t old = umask(077);
    int rc = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    umask(old);
    if (rc != 0 || listen(fd, 1) != 0) {
        int err = errno;
        close(fd);
        if (rc == 0)
            unlink(addr.sun_path);
        errno = err;
        return -1;
    }
    w->listener = fd;
    memcpy(w->path, addr.sun_path, sizeof w->path);
    return 0;
}

int zkl_waker_accept(zkl_waker *w)
{
    if (w->fd >= 0)
        return 0;
    if (w->listener < 0) {
        errno = EBADF;
        return -1;
    }
    int fd = accept4(w->listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return -1;
    close(w->listener);
    w->listener = -1;
    forget_path(w);
    w->fd = fd;
    return 0;
}

int zkl_waker_fd(const zkl_waker *w)
{
    return w->fd;
}

void zkl_waker_signal(const zkl_waker *w)
{
    if (w->fd >= 0) {
        ssize_t n = send(w->fd, "!", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n; /* full: the host has bytes to read already; closed: nobody listens */
    }
}

void zkl_waker_close(zkl_waker *w)
{
    if (w->listener >= 0)
        close(w->listener);
    if (w->fd >= 0)
        close(w->fd);
    w->listener = w->fd = -1;
    forget_path(w);
}
