/*
 * barrier.h — kazoo's Barrier (waiting) and DoubleBarrier as a C state machine (no Lua here).
 *
 * Layout (kazoo 2.8, shared with kazoo processes):
 *   Barrier: the barrier is up while <path> exists.  wait = an exists watch on <path> until
 *     it is deleted (creating and removing the node are plain ops, done by the owner).
 *   DoubleBarrier: enter creates <path>/<uuid4 hex> EPHEMERAL holding the identifier (the
 *     path is created with its parents when missing; when the server refuses to make it, e.g.
 *     ZNOCHILDRENFOREPHEMERALS under an ephemeral parent, enter fails with that rc), sets an exists watch on <path>/ready
 *     and lists <path>: with >= num_clients children it creates <path>/ready (persistent),
 *     else it waits for ready to appear; an enter that finds ready already there counts as
 *     entered (kazoo's would wait for ever).  leave deletes ready, then loops: no children: done;
 *     only its own node: delete it, done; the lowest node (by name) waits for the highest to
 *     go; every other member deletes its own node and waits for the lowest to go.
 *
 * Everything runs on the session's owner thread (routed ops and watches, route.h).  The owner
 * starts an operation and polls it; it waits and times out itself (zkl_barrier_give_up).
 *
 * - SUSPENDED (connection loss, operation timeout): the step under way is repeated once the
 *   session is CONNECTED again; a watch set before survives the reconnection.
 * - LOST (session expired): watches and ephemeral nodes are gone.  A Barrier wait sets its
 *   watch again on the new session.  A DoubleBarrier enter under way starts again (new own
 *   node) on the new session; a leave under way goes on from listing the children (its own
 *   node is gone already).  An entered member whose node expired stays "entered" (the barrier
 *   was passed) and the owner is told with zkl_session_notify(s, zkl_barrier_id(b),
 *   ZKL_BARRIER_NOTIFY_LOST); its leave still waits for the others.
 * - Stopped session (ZCLOSING) or auth failure: the operation fails with that rc.
 * - give_up during an enter deletes the own node in the background (kazoo's best-effort
 *   clean-up); during a leave or a wait it just stops.  zkl_barrier_free() with ops or
 *   watches in flight leaves the object allocated ("orphaned") until they came back.
 */
#ifndef ZKL_BARRIER_H
#define ZKL_BARRIER_H

#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_barrier zkl_barrier;

typedef enum {
    ZKL_BARRIER_WAIT = 1,  /* Barrier.wait */
    ZKL_BARRIER_ENTER = 2, /* DoubleBarrier.enter */
    ZKL_BARRIER_LEAVE = 3  /* DoubleBarrier.leave */
} zkl_barrier_op;

typedef enum {
    ZKL_BARRIER_PENDING = 0, /* under way (or nothing started) */
    ZKL_BARRIER_DONE,        /* the barrier is gone / entered / left */
    ZKL_BARRIER_GAVE_UP,     /* zkl_barrier_give_up() */
    ZKL_BARRIER_FAILED       /* a ZooKeeper error: see rc */
} zkl_barrier_outcome;

enum { ZKL_BARRIER_NOTIFY_LOST = 1 };

/* A Barrier (num_clients 0) or a DoubleBarrier member on path; acl NULL: open.  NULL when out
 * of memory or no random uuid could be read (errno set). */
zkl_barrier *zkl_barrier_new(zkl_session *s, const char *path, int num_clients,
                             const char *data, int len, const struct ACL_vector *acl);
void zkl_barrier_free(zkl_barrier *b);
void zkl_barrier_forget_session(zkl_barrier *b);

/* 0, or -1 with errno EALREADY (busy) / ENOTCONN. */
int zkl_barrier_start(zkl_barrier *b, zkl_barrier_op op);
void zkl_barrier_give_up(zkl_barrier *b);
int zkl_barrier_busy(const zkl_barrier *b); /* an operation (or a clean-up) is under way */
zkl_barrier_outcome zkl_barrier_outcome_of(const zkl_barrier *b, int *rc);
int zkl_barrier_entered(const zkl_barrier *b); /* entered and not left */
const char *zkl_barrier_node(const zkl_barrier *b);
uint64_t zkl_barrier_id(const zkl_barrier *b);
long zkl_barrier_inflight(const zkl_barrier *b);

#endif
