/*
 * path.h — ZooKeeper's path rules, checked before anything is sent.
 *
 * The server rejects a bad path with BadArguments (or the library refuses it); checking here
 * gives the caller a message that says what is wrong.  The rules are the server's
 * (PathUtils.validatePath), applied to UTF-8 bytes.
 */
#ifndef ZKL_PATH_H
#define ZKL_PATH_H

#include <stddef.h>

/* The largest request a server reads (its jute.maxbuffer, 1 MiB - 1 by default): it closes
 * the connection on a longer one, so a request over it would fail again on every reconnect. */
#define ZKL_MAX_PACKET (1024 * 1024 - 1)
/* The longest path: one that still leaves a request room for its framing. */
#define ZKL_MAX_PATH (ZKL_MAX_PACKET - 128)

/* NULL when path is valid, else a short reason to follow the argument's name ("must start
 * with '/'").  A sequential create may end in '/'.  A path over ZKL_MAX_PATH bytes is not. */
const char *zkl_path_problem(const char *path, size_t len, int sequential);

#endif
