/*
 * locking_queue.h — the taking side of kazoo's LockingQueue as a C state machine (no Lua).
 *
 * Layout (kazoo 2.8, shared with kazoo processes): items are PERSISTENT_SEQUENTIAL children
 * <path>/entries/entry-<ppp>-<10-digit seq> holding the value (ppp = priority %03d, lower
 * first); a consumer claims an item with the EPHEMERAL node <path>/taken/<entry name> holding
 * its id (a uuid4 hex, kazoo's uuid4().hex).  consume = one transaction deleting the entry
 * and the claim; release = deleting the claim.  Putting is plain creates (Lua).
 *
 * A get lists the entries and the claims, each with a watch, and claims the first entry (in
 * name order) that nobody claimed; a claim that exists already moves on to the next entry.
 * Once claimed it reads the entry's value and HOLDS it (an entry consumed meanwhile: the
 * claim is dropped and the next entry tried).  With nothing available it WAITS for either
 * watch to fire and looks again.  Missing paths are created (persistent, empty).  Everything
 * runs on the session's owner thread (routed ops and watches); the owner times out itself.
 *
 * Guarantees:
 * - At most one consumer holds an item at a time (the claim node), and an item is deleted
 *   only by its holder.  Delivery is AT LEAST ONCE: an item leaves the queue only through
 *   consume; a holder that loses its session (or crashes) before consuming leaves it for the
 *   next consumer.
 * - A claim whose create reply was lost is looked up before anything else: NODEEXISTS on the
 *   repeated create reads the claim, and one holding our id is ours (adopted, never left
 *   behind).  A claim is deleted (release, clean-up) only after checking it is still ours
 *   when an earlier delete's reply was lost, so another consumer's claim is never deleted.
 * - consume whose reply was lost: the entry gone means consumed; the entry there and our claim
 *   still there means the transaction is sent again; our claim gone means not consumed (the
 *   item is back in the queue: NOT_HELD).
 * - SUSPENDED (connection loss): a holder keeps holding (its ephemeral claim lives while the
 *   session does); a get, consume or release under way waits for the reconnection and goes
 *   on (the watches of a waiting get survive it).
 * - LOST (session expired): the claim is gone, so a holder no longer holds: the owner is told
 *   with zkl_session_notify(s, id, ZKL_LOCKING_QUEUE_NOTIFY_LOST).  A get under way starts
 *   again on the new session; a release ends (nothing left to delete); a consume decides by
 *   the entry as above.
 * - Stopped session (ZCLOSING) or auth failure: a get or consume under way fails with that
 *   rc; a holder no longer holds (notified as LOST); a release ends.
 * - zkl_locking_queue_free() with work in flight leaves the object allocated ("orphaned")
 *   until its ops and watches came back; a get under way is abandoned (its claim dropped).
 *   An item held when the owner lets go stays claimed until the session ends.
 */
#ifndef ZKL_LOCKING_QUEUE_H
#define ZKL_LOCKING_QUEUE_H

#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_locking_queue zkl_locking_queue;

typedef enum {
    ZKL_LQ_IDLE = 0,
    ZKL_LQ_GETTING,    /* claiming an item (or waiting for one) */
    ZKL_LQ_HOLDING,    /* holds the claim of one item: see value */
    ZKL_LQ_CONSUMING,  /* deleting the entry and the claim */
    ZKL_LQ_RELEASING,  /* deleting the claim */
    ZKL_LQ_ABANDONING  /* a get that gave up drops its claim */
} zkl_locking_queue_phase;

/* How the last operation ended. */
typedef enum {
    ZKL_LQ_PENDING = 0, /* nothing yet, or under way */
    ZKL_LQ_GOT,         /* get: holding an item */
    ZKL_LQ_CONSUMED,    /* consume: the item is gone from the queue */
    ZKL_LQ_RELEASED,    /* release: the claim is gone */
    ZKL_LQ_NOT_HELD,    /* consume/release: the claim was lost meanwhile */
    ZKL_LQ_GAVE_UP,     /* get: zkl_locking_queue_give_up() */
    ZKL_LQ_FAILED       /* a ZooKeeper error retries cannot fix: see rc */
} zkl_locking_queue_outcome;

enum { ZKL_LOCKING_QUEUE_NOTIFY_LOST = 1 };

/* A queue on path (checked by the caller); acl NULL: open.  NULL when out of memory or when
 * no random uuid could be read (errno set). */
zkl_locking_queue *zkl_locking_queue_new(zkl_session *s, const char *path,
                                         const struct ACL_vector *acl);
void zkl_locking_queue_free(zkl_locking_queue *q);
void zkl_locking_queue_forget_session(zkl_locking_queue *q);

/* Each starts an operation: 0, or -1 with errno EALREADY (busy), EISCONN (get while holding),
 * ENOENT (consume/release while not holding) or ENOTCONN. */
int zkl_locking_queue_get(zkl_locking_queue *q);
int zkl_locking_queue_consume(zkl_locking_queue *q);
int zkl_locking_queue_release(zkl_locking_queue *q);
/* Ends a get under way as GAVE_UP (the owner's timeout): a claim it made is dropped. */
void zkl_locking_queue_give_up(zkl_locking_queue *q);

zkl_locking_queue_phase zkl_locking_queue_phase_of(const zkl_locking_queue *q);
zkl_locking_queue_outcome zkl_locking_queue_outcome_of(const zkl_locking_queue *q, int *rc);
/* Whether the get under way is waiting for an item to appear (it found none available). */
int zkl_locking_queue_waiting(const zkl_locking_queue *q);
/* While holding: the value (binary, *len bytes) and the entry's name. */
const char *zkl_locking_queue_value(const zkl_locking_queue *q, int *len);
const char *zkl_locking_queue_entry(const zkl_locking_queue *q);
const char *zkl_locking_queue_owner_id(const zkl_locking_queue *q); /* the uuid hex */
/* The step under way, for tests and diagnostics ("list", "claim", "wait", ...). */
const char *zkl_locking_queue_step(const zkl_locking_queue *q);
uint64_t zkl_locking_queue_id(const zkl_locking_queue *q);
long zkl_locking_queue_inflight(const zkl_locking_queue *q);

#endif
