/*
 * ttl_toucher.h — the touch half of Curator's PersistentTtlNode as a C state machine (no Lua
 * here): a PERSISTENT_WITH_TTL node at a fixed path, written every interval so that the server
 * never expires it while this client runs, and left to expire once it stops.
 *
 * Layout: the node is <path> itself (PersistentTtlNode's <parent>/touch), PERSISTENT_WITH_TTL
 * with ttl ms, holding no data.  Its parent is not made here (PersistentTtlNode's container
 * node is; Curator's touch does not create parents either).
 *
 * While running (zkl_toucher_start until zkl_toucher_stop): every interval_ms (Curator's
 * scheduleAtFixedRate, first after one interval), a touch: set the node's data (any version);
 * NONODE -> create it (PERSISTENT_WITH_TTL, ttl); NODEEXISTS (made meanwhile) -> set again,
 * once (Curator's create().orSetData()).  Any other outcome of a touch (NONODE again: the
 * parent is gone, NOAUTH, a connection loss) is only counted in zkl_toucher_failures: the next
 * tick touches again (Curator logs it).  A tick that comes while a touch is still in flight, or
 * while the session is not CONNECTED (SUSPENDED; LOST until the new session is CONNECTED),
 * touches nothing.  Sessions change nothing else: the node is persistent.  zkl_toucher_touches
 * counts the touches answered ZOK.
 *
 * Everything runs on the session's owner thread (routed ops, route.h).  The owner starts and
 * stops; zkl_toucher_free of a running toucher stops it ("orphaned": freed once nothing is in
 * flight).
 */
#ifndef ZKL_TTL_TOUCHER_H
#define ZKL_TTL_TOUCHER_H

#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_toucher zkl_toucher;

/* A toucher of the node at path (checked by the caller), ttl ms (> 0), every interval_ms (> 0);
 * acl NULL: open.  NULL when out of memory (errno set). */
zkl_toucher *zkl_toucher_new(zkl_session *s, const char *path, int64_t ttl, long interval_ms,
                             const struct ACL_vector *acl);
void zkl_toucher_free(zkl_toucher *t);
void zkl_toucher_forget_session(zkl_toucher *t);

/* Starts the ticks: 0, or -1 with errno EALREADY (running) or ENOTCONN (no session). */
int zkl_toucher_start(zkl_toucher *t);
/* Stops them (a touch in flight is stale): 0, or -1 with errno ENOTCONN. */
int zkl_toucher_stop(zkl_toucher *t);

int zkl_toucher_running(const zkl_toucher *t);
uint64_t zkl_toucher_touches(const zkl_toucher *t);
uint64_t zkl_toucher_failures(const zkl_toucher *t);
long zkl_toucher_inflight(const zkl_toucher *t);

#endif
