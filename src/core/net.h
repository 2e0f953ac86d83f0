/*
 * net.h — the little networking the test harness needs: a free loopback port, and
 * ZooKeeper's four-letter-word commands ("srvr", "ruok", ...) over a plain TCP socket.
 */
#ifndef ZKL_NET_H
#define ZKL_NET_H

#include <stddef.h>

/* A TCP port on 127.0.0.1 that was free a moment ago, or -1. */
int zkl_free_port(void);

/* Sends cmd to host:port and reads the whole answer into out (NUL-terminated).
 * Returns the answer's length, or -1 when the server cannot be reached in timeout_ms. */
int zkl_four_letter_word(const char *host, int port, const char *cmd, int timeout_ms,
                         char *out, size_t out_size);

#endif
