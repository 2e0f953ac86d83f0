/*
 * barrier.h — kazoo's Barrier (waiting) and DoubleBarrier, and Curator's DistributedDoubleBarrier,
 * as a C state machine (no Lua here).
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
 * Curator's layout (ZKL_BARRIER_CURATOR: Curator 5.4's DistributedDoubleBarrier, shared with
 *   Curator processes): a member is <path>/<uuid as 8-4-4-4-12 text> EPHEMERAL holding the
 *   identifier, the path made of CONTAINER nodes when missing (creatingParentContainersIfNeeded).
 *   enter is the same as above: the own node, an exists watch on ready, then the children
 *   (ready counted, as Curator counts it): >= num_clients creates ready (persistent), else it
 *   waits for ready to be created.  leave is Curator's internalLeave: list the children but
 *   ready, sorted by name; none: left; only its own node: delete it, left; the lowest waits for
 *   the highest to go; every other member deletes its own node and waits for the lowest to
 *   go; a member whose node is gone (deleted, or expired with its session) waits as the
 *   others do.  Once left, it deletes ready (Curator's order: ready goes last, not first).
 *   Unlike Curator's leave, which returns when only the lowest node is left, a member waits
 *   until the lowest went too, and it never raises for its own node missing.
 *
 * Everything runs on the session's owner thread (routed ops and watches, route.h).  The owner
 * starts an operation and polls it; it waits and times out itself (zkl_barrier_give_up).
 *
 * - SUSPENDED (connection loss, operation timeout): the step under way is repeated once the
 *   session is CONNECTED again; a watch set before survives the reconnection.
 * - SUSPENDED in Curator's layout too: the step is repeated (Curator's enter and leave throw
 *   ConnectionLossException instead).
 * - LOST (session expired): watches and ephemeral nodes are gone.  A Barrier wait sets its
 *   watch again on the new session.  A DoubleBarrier enter under way starts again (new own
 *   node) on the new session; a leave under way goes on from listing the children (its own
 *   node is gone already).  An entered member whose node expired stays "entered" (the barrier
 *   was passed) and the owner is told with zkl_session_notify(s, zkl_barrier_id(b),
 *   ZKL_BARRIER_NOTIFY_LOST); its leave still waits for the others.
 *   Curator's layout: the same; a leave under way goes on without its node (Curator's returns
 *   at once, or throws "Our path is missing").
 * - Sharing: one operation at a time per object (zkl_barrier_start answers EALREADY); the Lua
 *   layer (lua/zklua/recipes/barrier.lua) makes coroutines sharing one object take turns: an
 *   enter of an entered member finds its node and ready and returns at once, a leave of a
 *   member that left finds no node of its own and waits for whoever is still in.
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
    ZKL_BARRIER_KAZOO = 0, /* kazoo's DoubleBarrier nodes and algorithm */
    ZKL_BARRIER_CURATOR    /* Curator 5.4's DistributedDoubleBarrier */
} zkl_barrier_layout;

typedef enum {
    ZKL_BARRIER_PENDING = 0, /* under way (or nothing started) */
    ZKL_BARRIER_DONE,        /* the barrier is gone / entered / left */
    ZKL_BARRIER_GAVE_UP,     /* zkl_barrier_give_up() */
    ZKL_BARRIER_FAILED       /* a ZooKeeper error: see rc */
} zkl_barrier_outcome;

enum { ZKL_BARRIER_NOTIFY_LOST = 1 };

/* A Barrier (num_clients 0) or a DoubleBarrier member on path (layout: its nodes and
 * algorithm; a Barrier's is the same in both); acl NULL: open.  NULL when out of memory or no
 * random uuid could be read (errno set). */
zkl_barrier *zkl_barrier_new(zkl_session *s, const char *path, int num_clients,
                             const char *data, int len, const struct ACL_vector *acl,
                             zkl_barrier_layout layout);
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
