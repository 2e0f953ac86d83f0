/*
 * set_partitioner.h — kazoo's SetPartitioner as a C state machine (no Lua here).
 *
 * Layout (kazoo 2.8, shared with kazoo processes): the member joins <path>/party as a
 * ShallowParty (<path>/party/<uuid4 hex>-<identifier>, EPHEMERAL, data = identifier) and owns
 * an item by holding the exclusive Lock <path>/locks/<item name> (a <uuid4 hex>__lock__<seq>
 * node holding the identifier; kazoo's hold no data, which kazoo never reads).
 *
 * States (kazoo's): ALLOCATING -> ACQUIRED (every lock of this member's items held),
 * ACQUIRED -> RELEASE (the party changed, or the set did), RELEASE -> ALLOCATING (the owner
 * released the set), and FAILURE from anywhere (unrecoverable: make a new partitioner).
 * While ALLOCATING the partitioner joins the party, lists it with a watch, waits until it
 * stayed unchanged for time_boundary (a timer, timers.h; a change starts the wait again), then
 * asks its owner for this member's items (notify ZKL_SP_NOTIFY_PARTITION: the owner reads
 * zkl_sp_wanted() and answers with zkl_sp_assign(), so partition functions live with the
 * owner) and acquires all their locks at once.  A party change during any of that abandons
 * the attempt (its locks are released or withdrawn) and starts over.  Every state change
 * queues a notify ZKL_SP_NOTIFY_STATE + the new state for the owner.
 *
 * Guarantees:
 * - Items are owned only through their locks: two members never hold one item at once,
 *   whatever their sets or partition functions say.  A lock's fencing token (its node's
 *   czxid) grows with every owner of the item.
 * - A share's lock nodes are made and deleted as batched writes (ops.h: up to 50 a multi,
 *   each lock with its own result; spec/batched_writes_spec.lua), so a rebalance that moves
 *   every item costs the server a fraction of the requests.
 * - No endless ALLOCATING when members disagree (kazoo #392): if, with the party unchanged,
 *   the acquire got no new lock in a whole window of conflict_timeout (the first starts with
 *   the acquire, each next one as the last ends: a member still releasing a big share frees
 *   some locks every window, it is slow, not in conflict) and one of its locks waits behind
 *   another contender, the partitioner goes to FAILURE
 *   (ZKL_SP_FAILED_CONFLICT, naming the item and the contender's node) after releasing what
 *   it holds and leaving the party, so that the others re-divide the set without it.
 * - A changed set (zkl_sp_set_changed) is handled like a party change (kazoo #386).
 * - SUSPENDED (connection lost, session alive or not): ACQUIRED -> RELEASE at once, as kazoo.
 *   The client cannot know how long the server still counts its session alive (a follower cut
 *   off from its leader keeps answering pings while the leader expires the session), so no
 *   grace can prove that no other member took an item meanwhile: ownership is given up the
 *   moment the connection is.  The owner releases the set (release_set: the locks are deleted
 *   once reconnected, or vanish with the session) and allocation starts again once CONNECTED.
 *   ALLOCATING makes no new claims: a settle window in progress starts again once CONNECTED,
 *   lock acquires wait for the reconnection (a lock is held only on the server's reply, so
 *   an item is never owned across a SUSPENDED).
 * - LOST (session expired) -> FAILURE (ZKL_SP_FAILED_LOST): the ephemeral locks and party node
 *   are gone with the session; nothing is re-joined (as kazoo).  A stopped session (or an auth
 *   failure) -> FAILURE (ZKL_SP_FAILED_CLOSED).  A ZooKeeper error that retries cannot fix
 *   -> FAILURE (ZKL_SP_FAILED_ERROR, with its rc), after releasing and leaving (kazoo: finish()).
 * - Everything runs on the session's owner thread (routed ops, watches and timers).  State
 *   listeners never free anything (the session walks a copy of its listeners); locks let go
 *   are freed at the next safe point (a routed event, or any call from the owner).
 * - zkl_sp_free() releases what is held, leaves the party and frees the locks and the party
 *   (they finish as orphans) and takes its timers back; the partitioner itself stays
 *   allocated until its own ops and watches came back.
 */
#ifndef ZKL_SET_PARTITIONER_H
#define ZKL_SET_PARTITIONER_H

#include <stdint.h>

#include "../../core/session.h"

typedef struct zkl_set_partitioner zkl_set_partitioner;

typedef enum {
    ZKL_SP_ALLOCATING = 0,
    ZKL_SP_ACQUIRED,
    ZKL_SP_RELEASE,
    ZKL_SP_FAILURE
} zkl_sp_state;

typedef enum {
    ZKL_SP_NOT_FAILED = 0,
    ZKL_SP_FAILED_LOST,      /* the session expired */
    ZKL_SP_FAILED_CLOSED,    /* the session was stopped, or the server refused its auth */
    ZKL_SP_FAILED_FINISHED,  /* zkl_sp_finish() */
    ZKL_SP_FAILED_CONFLICT,  /* an item stayed held by another contender: see zkl_sp_conflict */
    ZKL_SP_FAILED_ERROR,     /* a ZooKeeper error: see rc */
    ZKL_SP_FAILED_PARTITION  /* the owner could not compute a partition (zkl_sp_fail) */
} zkl_sp_failure;

enum {
    ZKL_SP_NOTIFY_PARTITION = 2, /* a partition is wanted: see zkl_sp_wanted() */
    ZKL_SP_NOTIFY_STATE = 16     /* + the new zkl_sp_state */
};

typedef struct {
    long time_boundary_ms;    /* how long the party must stay unchanged before allocating */
    long conflict_timeout_ms; /* see "No endless ALLOCATING" above */
} zkl_sp_options;

/* A partitioner on path (checked by the caller; <path>/party and <path>/locks should exist,
 * as kazoo makes them) for the member identifier (valid in a node name).  It starts joining
 * at once.  acl NULL: open.  NULL when out of memory or no uuid could be read (errno set). */
zkl_set_partitioner *zkl_sp_new(zkl_session *s, const char *path, const char *identifier,
                                int len, const zkl_sp_options *o, const struct ACL_vector *acl);
/* The owner lets go: see above. */
void zkl_sp_free(zkl_set_partitioner *sp);
/* The session was freed (after it delivered every routed event): never touch it again. */
void zkl_sp_forget_session(zkl_set_partitioner *sp);

/* While a partition is wanted: the attempt number (> 0), and *members / *count: the node
 * names of the party as it settled (valid until the next call into the partitioner);
 * otherwise 0. */
uint64_t zkl_sp_wanted(const zkl_set_partitioner *sp, char *const **members, int *count);
/* The owner's answer for attempt: the names (lock names) of this member's items, distinct
 * and valid in a node name.  1 when taken, 0 when stale (ignored); -1 with errno ENOMEM
 * (the partitioner then failed with ZSYSTEMERROR). */
int zkl_sp_assign(zkl_set_partitioner *sp, uint64_t attempt, const char *const *names,
                  int count);
/* The owner could not compute the partition for attempt: FAILURE (PARTITION) unless stale. */
void zkl_sp_fail(zkl_set_partitioner *sp, uint64_t attempt);

/* kazoo's release_set(): ACQUIRED or RELEASE -> RELEASE, releasing every lock, then
 * ALLOCATING once they are all deleted; ALLOCATING: the attempt is abandoned and allocation
 * starts over; FAILURE: nothing. */
void zkl_sp_release_set(zkl_set_partitioner *sp);
/* The releases under way stop counting as held (the owner was disconnected too long):
 * they go on in the background. */
void zkl_sp_release_in_background(zkl_set_partitioner *sp);
/* The owner's set changed: ACQUIRED -> RELEASE; an allocation under way starts over. */
void zkl_sp_set_changed(zkl_set_partitioner *sp);
/* kazoo's finish(): releases every lock, leaves the party, FAILURE (FINISHED). */
void zkl_sp_finish(zkl_set_partitioner *sp);
/* Whether the first join of the party is still under way (kazoo's constructor waits). */
int zkl_sp_joining(const zkl_set_partitioner *sp);
/* Whether that join completed, whatever came after it (a FAILURE included): the owner may
 * see the join end and, in the same pass over the events, the allocation that followed. */
int zkl_sp_joined(const zkl_set_partitioner *sp);
/* Whether releases (or the party's leave) started by release_set or finish are under way. */
int zkl_sp_busy(zkl_set_partitioner *sp);
/* How many locks release_set or finish still wait for: it falls as they make progress. */
long zkl_sp_releasing(const zkl_set_partitioner *sp);

zkl_sp_state zkl_sp_state_of(const zkl_set_partitioner *sp);
zkl_sp_failure zkl_sp_failure_of(const zkl_set_partitioner *sp, int *rc);
/* After ZKL_SP_FAILED_CONFLICT: the item's name, and (in *blocker) the node it waited behind. */
const char *zkl_sp_conflict(const zkl_set_partitioner *sp, const char **blocker);
/* The items held (ACQUIRED, or RELEASE until released), in assignment order. */
int zkl_sp_item_count(const zkl_set_partitioner *sp);
const char *zkl_sp_item(const zkl_set_partitioner *sp, int i); /* NULL when i is out of range */
/* 0 and *token (the item's lock's fencing token) while the item is held, else -1. */
int zkl_sp_fencing_token(const zkl_set_partitioner *sp, const char *name, int64_t *token);
const char *zkl_sp_node(const zkl_set_partitioner *sp); /* own party node's name */
uint64_t zkl_sp_id(const zkl_set_partitioner *sp);      /* the notify target */
long zkl_sp_inflight(const zkl_set_partitioner *sp);
/* Frees the locks let go since the last safe point (the binding calls it on every call). */
void zkl_sp_tidy(zkl_set_partitioner *sp);

#endif
