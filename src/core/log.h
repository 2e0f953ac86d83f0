/*
 * log.h — where libzookeeper's log lines go.
 *
 * The library logs process-wide from its own threads.  zklua is quiet by default (level 0);
 * at a higher level lines go to stderr, at most a few per second, so that a client whose
 * servers are all down does not flood its host's log.
 */
#ifndef ZKL_LOG_H
#define ZKL_LOG_H

/* 0 quiet, 1 error, 2 warn, 3 info, 4 debug (the library's levels). */
void zkl_log_set_level(int level);
int zkl_log_level(void);
/* The log callback handed to zookeeper_init2; safe on any thread. */
void zkl_log_library_line(const char *message);

#endif
