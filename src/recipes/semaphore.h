/*
 * semaphore.h — kazoo's Semaphore, or Curator's InterProcessSemaphoreV2, as a C state machine
 * (no Lua here).
 *
 * Layout ZKL_SEM_LAYOUT_KAZOO (kazoo 2.8, shared with kazoo processes):
 * - <path> holds max_leases as ASCII decimal, written by whoever created it; a different
 *   number there makes an acquire fail with ZKL_SEM_MISMATCH (kazoo's ValueError); data that
 *   is not a number (as Python's int() reads it) is ignored.  Checked on the first acquire.
 * - The lease node is <path>/<uuid4 hex>, EPHEMERAL, not sequential, holding the identifier.
 *   Every child of <path> counts as a lease.
 * - An internal mutex, a kazoo Lock (lock.h) at the sibling path <path>-__lock__, is held
 *   while the leases are counted and the own lease is created; a blocking acquire that finds
 *   every lease taken waits for a change of <path>'s children while still holding the mutex
 *   (as kazoo: only that one waiter watches), then counts again.
 *
 * Layout ZKL_SEM_LAYOUT_CURATOR (Curator 5.4's InterProcessSemaphoreV2, shared with Java
 * processes using it):
 * - The mutex is Curator's InterProcessMutex (lock.h, ZKL_LOCK_CURATOR_MUTEX) at <path>/locks.
 * - The lease node is <path>/leases/_c_<uuid 8-4-4-4-12>-lease-<10 digits>, EPHEMERAL|
 *   SEQUENTIAL (Curator's protected create), holding the identifier; a missing <path>/leases
 *   is made of container nodes (creatingParentContainersIfNeeded).  Every child of
 *   <path>/leases counts as a lease.  Nothing is stored in <path>: max_leases is each
 *   process's own (Curator's), never checked against the others'.
 * - Under the mutex the lease node is created first, then the leases are listed with a watch:
 *   the own node among at most max_leases children holds; more, and a blocking acquire waits
 *   for a change of the children (still holding the mutex) and lists again; a non-blocking one,
 *   a timeout or a cancel deletes its node.  The own node missing from the list (deleted by
 *   someone) is created again, up to ZKL_RETRY_LIMIT times.  The mutex is released at the end
 *   either way, as Curator's finally.
 *
 * Everything runs on the session's owner thread: the semaphore's own ops are routed
 * (route.h), and it hears of its mutex (and of session state changes, after the mutex did)
 * through the lock's observer.  The owner drives it with acquire/release/cancel/give_up and
 * reads its phase; it waits (and times out) itself.
 *
 * Guarantees (both layouts unless said):
 * - At most max_leases holders among processes that follow the protocol (zklua and kazoo,
 *   zklua and Curator, with one max_leases): kazoo's lease is created only under the mutex,
 *   after counting fewer than max_leases children; Curator's is held only when counted,
 *   under the mutex, among at most max_leases children (at most one extra node exists: the
 *   one waiter's, which holds the mutex).
 * - One lease node per semaphore at most, and none left behind: a create whose reply was lost
 *   (connection loss) is looked up before anything else (kazoo: exists on its name, fixed for
 *   the object's life; Curator: the leases listed for its protected prefix, a new one for
 *   each acquire, as Curator's protection does); an acquire that does not succeed deletes it.
 * - SUSPENDED (connection loss, operation timeout): a holder keeps its lease (its ephemeral
 *   node lives while the session does); an acquire or release under way repeats its step
 *   once the session is CONNECTED again.
 * - LOST (session expired): the ephemeral lease is gone: a holder is no longer held and the
 *   owner is told with zkl_session_notify(s, zkl_semaphore_id(m), ZKL_SEM_NOTIFY_LOST).  An
 *   acquire under way starts again on the new session (from the mutex).  A release or a
 *   clean-up under way ends (the node went with the session).
 * - The session stopped (ZCLOSING) or auth failed: an acquire fails with that rc; a holder
 *   is no longer held (notified as LOST).
 * - The fencing token is the czxid of the own lease node: it grows with every new holder of
 *   a lease on <path>.
 * - zkl_semaphore_free() with work in flight leaves it allocated ("orphaned") until every
 *   routed op and watch came back and the mutex is settled; an orphaned acquire is
 *   abandoned (its lease node deleted, the mutex released).  A held semaphore dropped
 *   without release keeps its lease until the session ends (as kazoo).
 */
#ifndef ZKL_SEMAPHORE_H
#define ZKL_SEMAPHORE_H

#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_semaphore zkl_semaphore;

typedef enum {
    ZKL_SEM_LAYOUT_KAZOO = 0,  /* kazoo's Semaphore */
    ZKL_SEM_LAYOUT_CURATOR = 1 /* Curator's InterProcessSemaphoreV2 */
} zkl_semaphore_layout;

typedef enum {
    ZKL_SEM_IDLE = 0,   /* no lease, nothing under way */
    ZKL_SEM_ACQUIRING,  /* an acquire is under way (until the mutex is released again) */
    ZKL_SEM_HELD,
    ZKL_SEM_RELEASING,  /* deleting the lease after release (still counts as held) */
    ZKL_SEM_ABANDONING  /* an acquire that did not succeed cleans up (lease node, mutex) */
} zkl_semaphore_phase;

/* How the last acquire ended (valid once the phase left ACQUIRING). */
typedef enum {
    ZKL_SEM_PENDING = 0, /* no acquire yet, or still under way */
    ZKL_SEM_GOT,         /* acquired */
    ZKL_SEM_BUSY,        /* non-blocking, and every lease (or the mutex) was taken */
    ZKL_SEM_CANCELLED,   /* zkl_semaphore_cancel() */
    ZKL_SEM_GAVE_UP,     /* zkl_semaphore_give_up() (the owner's timeout) */
    ZKL_SEM_MISMATCH,    /* <path> holds another max_leases: see zkl_semaphore_stored_max */
    ZKL_SEM_FAILED       /* a ZooKeeper error that retrying cannot fix: see rc */
} zkl_semaphore_outcome;

enum { ZKL_SEM_NOTIFY_LOST = 1 }; /* the notify code: the holder lost its lease */

/* A semaphore in layout on path (checked by the caller) with max_leases >= 1, whose lease
 * node (and mutex contender node) hold data.  acl NULL: open.  NULL when out of memory or
 * when no random uuid could be read (errno set). */
zkl_semaphore *zkl_semaphore_new(zkl_session *s, const char *path, const char *data, int len,
                                 int max_leases, const struct ACL_vector *acl,
                                 zkl_semaphore_layout layout);
void zkl_semaphore_free(zkl_semaphore *m);
/* The session was freed (after it delivered every routed event): never touch it again. */
void zkl_semaphore_forget_session(zkl_semaphore *m);

/* Starts an acquire: 0, or -1 with errno EISCONN (held), EALREADY (acquiring or cleaning
 * up) or ENOTCONN (no session). */
int zkl_semaphore_acquire(zkl_semaphore *m, int blocking);
/* Ends an acquire under way as CANCELLED (nothing when none is under way, as kazoo). */
void zkl_semaphore_cancel(zkl_semaphore *m);
/* Ends an acquire under way as GAVE_UP (the owner timed out).  When the lease is already
 * made and only the mutex is still being released, the semaphore is HELD at once and the
 * mutex is released in the background. */
void zkl_semaphore_give_up(zkl_semaphore *m);
/* Starts deleting the lease node: 1, or 0 when not held. */
int zkl_semaphore_release(zkl_semaphore *m);
/* The owner stops waiting for a release (disconnected too long): no longer counts as held;
 * the delete goes on in the background (phase ABANDONING). */
void zkl_semaphore_release_in_background(zkl_semaphore *m);

zkl_semaphore_phase zkl_semaphore_phase_of(const zkl_semaphore *m);
zkl_semaphore_outcome zkl_semaphore_outcome_of(const zkl_semaphore *m, int *rc);
/* With ZKL_SEM_MISMATCH: the max_leases text found in <path> (trimmed), else NULL. */
const char *zkl_semaphore_stored_max(const zkl_semaphore *m);
int zkl_semaphore_release_rc(const zkl_semaphore *m); /* ZOK, or why the last release failed */
/* Whether the acquire under way has found itself blocked: every lease taken, or the mutex
 * held by another acquirer.  (The owner's timeout ends an acquire only after that, so that a
 * free lease found at the deadline is still taken.) */
int zkl_semaphore_checked(const zkl_semaphore *m);
int zkl_semaphore_is_held(const zkl_semaphore *m); /* HELD or RELEASING */
/* The lease node's name: kazoo's, fixed; Curator's while it exists (else NULL). */
const char *zkl_semaphore_node(const zkl_semaphore *m);
/* The lease node's create name: kazoo's (= its name), Curator's "_c_<uuid>-lease-" (the
 * uuid new at each acquire). */
const char *zkl_semaphore_prefix(const zkl_semaphore *m);
const char *zkl_semaphore_step_name(const zkl_semaphore *m); /* for tests and debugging */
int zkl_semaphore_fencing_token(const zkl_semaphore *m, int64_t *token); /* 0 while held */
uint64_t zkl_semaphore_id(const zkl_semaphore *m); /* the notify target */
long zkl_semaphore_inflight(const zkl_semaphore *m);

/* Reads data as Python's int() would (ASCII: surrounding whitespace, a sign, digits with
 * single underscores between them): 1 and *value when it is a number (*overflow set when
 * it does not fit in a long long), else 0. */
int zkl_semaphore_parse_max(const char *data, int len, long long *value, int *overflow);

#endif
