/*
 * item_queue.h — the taking side of kazoo's Queue as a C state machine (no Lua here).
 *
 * Layout (kazoo 2.8, shared with kazoo processes): items are PERSISTENT_SEQUENTIAL children
 * <path>/entry-<ppp>-<10-digit seq> holding the value, ppp the priority %03d (lower first);
 * the names sort in the queue's order.  Putting is a plain create (Lua).  A get lists the
 * children (kazoo keeps that sorted list and works through it on later gets, listing again
 * when it runs out), reads the first entry's value, then deletes the entry; an entry gone
 * meanwhile (another consumer took it) moves on to the next.  So an item put later with a
 * lower priority comes after the list already read.  An empty queue (or a missing path) ends
 * the get with EMPTY: a get never waits for items.
 *
 * Delivery is AT LEAST ONCE: an item is never lost by a get.  A delete whose reply was lost
 * (connection loss, operation timeout, session expiry, or the session stopped) may have been
 * applied, so it is sent again once CONNECTED: OK means it was not, NONODE means it may have
 * been (ours, or another consumer's that took the same entry meanwhile) and the get returns
 * the value all the same (zkl_item_queue_ambiguous() says so).  A duplicate therefore needs
 * two consumers on one entry AND a lost reply; without a lost reply every item goes to
 * exactly one get.  A get stopped with a delete possibly sent returns the value too.
 *
 * Everything runs on the session's owner thread (routed ops, route.h).
 * - SUSPENDED (connection loss, operation timeout): the step under way is repeated once
 *   CONNECTED (a delete as above).  Nothing else changes: the queue is persistent.
 * - LOST (session expired): the same, on the new session.
 * - Stopped session (ZCLOSING) or auth failure: the get fails with that rc, unless a delete
 *   was already sent (then GOT, ambiguous).
 * - zkl_item_queue_free() with a get under way lets its op in flight finish, then stops
 *   ("orphaned"): an entry it deleted is gone with it (as any value a dropped consumer held).
 */
#ifndef ZKL_ITEM_QUEUE_H
#define ZKL_ITEM_QUEUE_H

#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_item_queue zkl_item_queue;

typedef enum { ZKL_ITEM_QUEUE_IDLE = 0, ZKL_ITEM_QUEUE_GETTING } zkl_item_queue_phase;

typedef enum {
    ZKL_ITEM_QUEUE_PENDING = 0, /* no get yet, or under way */
    ZKL_ITEM_QUEUE_GOT,         /* an item: see value */
    ZKL_ITEM_QUEUE_EMPTY,       /* nothing in the queue */
    ZKL_ITEM_QUEUE_FAILED       /* a ZooKeeper error retries cannot fix: see rc */
} zkl_item_queue_outcome;

/* A queue on path (checked by the caller).  NULL when out of memory (errno set). */
zkl_item_queue *zkl_item_queue_new(zkl_session *s, const char *path);
void zkl_item_queue_free(zkl_item_queue *q);
void zkl_item_queue_forget_session(zkl_item_queue *q);

/* Starts a get: 0, or -1 with errno EALREADY (one is under way) or ENOTCONN. */
int zkl_item_queue_get(zkl_item_queue *q);

zkl_item_queue_phase zkl_item_queue_phase_of(const zkl_item_queue *q);
zkl_item_queue_outcome zkl_item_queue_outcome_of(const zkl_item_queue *q, int *rc);
/* With GOT: the value (binary, *len bytes) and the entry's name. */
const char *zkl_item_queue_value(const zkl_item_queue *q, int *len);
const char *zkl_item_queue_entry(const zkl_item_queue *q);
/* With GOT: the entry was gone when a delete whose reply was lost was sent again. */
int zkl_item_queue_ambiguous(const zkl_item_queue *q);
/* The step under way: "list", "read", "delete" or "none" (for tests and diagnostics). */
const char *zkl_item_queue_step(const zkl_item_queue *q);
long zkl_item_queue_inflight(const zkl_item_queue *q);

#endif
