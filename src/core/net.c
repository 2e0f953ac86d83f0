/*
 * net.c — see net.h.  Blocking sockets with a poll() deadline; used by tests, never by
 * the session.
 */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

int zkl_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Waits until fd is ready for events or the deadline passes; 1 ready, 0 not. */
static int wait_ready(int fd, short events, long deadline)
{
    for (;;) {
        long left = deadline - (long)zkl_monotonic_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)left);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return 0;
    }
}

static int connect_with_deadline(const char *host, int port, long deadline)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int err = 0;
        socklen_t len = sizeof err;
        if (errno != EINPROGRESS || !wait_ready(fd, POLLOUT, deadline) ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

int zkl_four_letter_word(const char *host, int port, const char *cmd, int timeout_ms,
                         char *out, size_t out_size)
{
    if (out_size == 0)
        return -1;
    long deadline = (long)zkl_monotonic_ms() + timeout_ms;
    int fd = connect_with_deadline(host, port, deadline);
    if (fd < 0)
        return -1;
    size_t cmd_len = strlen(cmd);
    if (!wait_ready(fd, POLLOUT, deadline) || write(fd, cmd, cmd_len) != (ssize_t)cmd_len) {
        close(fd);
        return -1;
    }
    size_t used = 0;
    for (;;) {
        if (!wait_ready(fd, POLLIN, deadline))
            break;
        ssize_t n = read(fd, out + used, out_size - 1 - used);
        if (n <= 0)
            break;
        used += (size_t)n;
        if (used == out_size - 1)
            break;
    }
    close(fd);
    out[used] = '\0';
    return (int)used;
}
