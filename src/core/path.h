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

/* NULL when path is valid, else a short reason to follow the argument's name ("must start
 * with '/'").  A sequential create may end in '/'. */
const char *zkl_path_problem(const char *path, size_t len, int sequential);

#endif
