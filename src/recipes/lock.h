/*
 * lock.h — kazoo's Lock, WriteLock and ReadLock as a C state machine (no Lua here).
 *
 * Layout (kazoo 2.8, shared with kazoo processes): the contender node is
 * <path>/<uuid4 hex>__lock__<seq> (ReadLock: __rlock__), EPHEMERAL|SEQUENTIAL unless acquired
 * with ephemeral = 0, holding the identifier.  Contenders are the children whose names end in
 * (__lock__|__rlock__)-?<10 digits>, sorted by that suffix bytewise.  An exclusive contender
 * (Lock, WriteLock) is blocked by every lower contender; a shared one (ReadLock) only by lower
 * __lock__ nodes.  Foreign contenders (zkl_lock_add_mark: other implementations' nodes on the
 * same path) block both.  A blocked contender watches the NEAREST lower blocking node and checks
 * again when it goes (no herd, and no kazoo #649).  The first listing is sent right behind the
 * create, without waiting for its reply (a session's requests are answered in order): an
 * uncontended acquire costs one round trip.
 *
 * Curator layouts (kinds ZKL_LOCK_CURATOR_MUTEX and ZKL_LOCK_CURATOR_LATCH), shared with
 * Curator 5.4 processes: the node is <path>/_c_<uuid, 8-4-4-4-12>-lock-<seq> (InterProcessMutex,
 * LockInternals with protection) or ...-latch-<seq> (LeaderLatch), EPHEMERAL|SEQUENTIAL,
 * holding the identifier; contenders are the children whose names end in lock-<10 digits>
 * (latch-<10 digits>), sorted by those digits as Curator's StandardLockInternalsDriver sorts
 * them, and each is blocked by every lower one: the lowest holds the mutex, or leads.
 * InterProcessReadWriteLock (kinds ZKL_LOCK_CURATOR_READ and ZKL_LOCK_CURATOR_WRITE, Curator
 * 5.4's two InterProcessMutexes on one path, LockInternals with protection): the node is
 * <path>/_c_<uuid>-__READ__<seq> or ...-__WRIT__<seq>; the contenders are the children ending
 * in __READ__<10 digits> or __WRIT__<10 digits>, sorted by those digits (Curator's
 * SortingLockInternalsDriver); a writer is blocked by every lower contender (Curator: index 0
 * of all), a reader only by lower writers (Curator's readLockPredicate), as kazoo's ReadLock
 * and WriteLock are.
 *
 * Container parents (zkl_lock_container_parents; on by default for the Curator layouts, as
 * Curator's creatingParentContainersIfNeeded): a missing path is made of container nodes,
 * which the server deletes once their last child went.  A create that finds the path gone
 * meanwhile (NONODE) makes it again, as for any missing path.
 *
 * Everything runs on the session's owner thread: ops are submitted with a route and their
 * results (and watches) come back inside zkl_session_next().  The owner drives the lock with
 * acquire/release/cancel/give_up and reads its phase; it waits (and times out) itself.
 *
 * Guarantees:
 * - One contender node per lock at most: a create whose reply was lost (connection loss) is
 *   looked up by its uuid prefix before another create (kazoo's create_tried), after a sync
 *   (a follower behind the leader cannot hide it).  Should a listing ever show two nodes of
 *   the prefix, the lower is kept and the other deleted: the lock never waits behind itself.
 * - Connection loss or an operation timeout during any step: the step is repeated once the
 *   session is CONNECTED again.  A create of the path lost that way, while the node's create
 *   waited to be sent (and then found no path), is made again: it never fails the acquire
 *   with a ConnectionLoss (lock_spec, through a proxy that loses that create).  SUSPENDED changes nothing else: a holder keeps the lock
 *   (as kazoo), an acquire waits for the reconnection.  But on SUSPENDED a holder must stop
 *   acting as the holder until CONNECTED (kazoo's and Curator's rule): its server may be cut
 *   off from the quorum, whose leader then expires the session a session timeout after the
 *   last packet it got and grants the lock to another.  The holder hears SUSPENDED first:
 *   its server drops it syncLimit * tickTime after losing its leader, or the client notices
 *   a silent link after 2/3 of the session timeout — before the grant as long as
 *   syncLimit * tickTime is shorter than the session timeout (spec/partition_spec.lua proves
 *   the order from a ledger).
 * - LOST (session expired): an ephemeral holder's node is gone, so it is no longer held; the
 *   owner is told with zkl_session_notify(s, zkl_lock_id(l), ZKL_LOCK_NOTIFY_LOST).  A
 *   persistent holder (ephemeral = 0) keeps the lock.  An acquire in progress starts again on
 *   the new session.  A release or a clean-up in progress finishes (the ephemeral node is gone).
 * - Once an acquire is decided (held, or ended without the lock) the owner is told with
 *   ZKL_LOCK_NOTIFY_DECIDED, so that it need not poll the phase (the Election latch).
 * - The session stopped (ZCLOSING): an acquire fails with ZCLOSING; an ephemeral holder is no
 *   longer held (and the owner is notified).
 * - The fencing token is the czxid of the holder's own node: it grows with every new holder.
 * - zkl_lock_free() with work in flight leaves the lock allocated ("orphaned") until every
 *   routed op and watch came back; an orphaned acquire is abandoned (its node deleted).  A
 *   held lock dropped without release keeps its node until the session ends (as kazoo).
 */
#ifndef ZKL_LOCK_H
#define ZKL_LOCK_H

#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_lock zkl_lock;

typedef enum {
    ZKL_LOCK_EXCLUSIVE = 0, /* Lock and WriteLock: __lock__ nodes */
    ZKL_LOCK_SHARED = 1,        /* ReadLock: __rlock__ nodes */
    ZKL_LOCK_CURATOR_MUTEX = 3, /* Curator's InterProcessMutex: _c_<uuid>-lock- nodes */
    ZKL_LOCK_CURATOR_LATCH = 4, /* Curator's LeaderLatch: _c_<uuid>-latch- nodes */
    ZKL_LOCK_CURATOR_READ = 5,  /* InterProcessReadWriteLock's read lock: _c_<uuid>-__READ__ */
    ZKL_LOCK_CURATOR_WRITE = 6  /* ... its write lock: _c_<uuid>-__WRIT__ */
} zkl_lock_kind;

typedef enum {
    ZKL_LOCK_IDLE = 0,    /* not held, nothing under way */
    ZKL_LOCK_ACQUIRING,   /* an acquire is under way */
    ZKL_LOCK_HELD,
    ZKL_LOCK_RELEASING,   /* deleting the node after release (still counts as held) */
    ZKL_LOCK_ABANDONING   /* deleting the node of an acquire that did not succeed */
} zkl_lock_phase;

/* How the last acquire ended (valid once the phase left ACQUIRING). */
typedef enum {
    ZKL_LOCK_PENDING = 0,  /* no acquire yet, or still under way */
    ZKL_LOCK_GOT,          /* acquired */
    ZKL_LOCK_BUSY,         /* non-blocking acquire found another holder */
    ZKL_LOCK_CANCELLED,    /* zkl_lock_cancel() */
    ZKL_LOCK_GAVE_UP,      /* zkl_lock_give_up() (the owner's timeout) */
    ZKL_LOCK_FAILED        /* a ZooKeeper error that retrying cannot fix: see rc */
} zkl_lock_outcome;

enum {
    ZKL_LOCK_NOTIFY_LOST = 1,   /* the holder lost the lock */
    ZKL_LOCK_NOTIFY_DECIDED = 2 /* an acquire ended: held, or not (see the outcome) */
};

/* A lock on path (checked by the caller) whose contender node holds data.  acl NULL: open.
 * NULL when out of memory or when no random uuid could be read (errno set). */
zkl_lock *zkl_lock_new(zkl_session *s, const char *path, const char *data, int len,
                       zkl_lock_kind kind, const struct ACL_vector *acl);
/* Whether a missing path is made of container nodes (see above); before an acquire. */
void zkl_lock_container_parents(zkl_lock *l, int on);
/* Whether the node's create and delete are batched writes and its listings batched reads
 * (ops.h: many locks' nodes go to the server in one multi, their listings in one multiRead),
 * for an owner that acquires or releases many locks at once (the SetPartitioner's items).
 * The create then goes without the listing pipelined behind it, so an uncontended acquire
 * costs two round trips instead of one; the results are the same. */
void zkl_lock_batch_writes(zkl_lock *l, int on);
/* The owner lets go: see "orphaned" above. */
void zkl_lock_free(zkl_lock *l);
/* The session was freed (after it delivered every routed event): never touch it again. */
void zkl_lock_forget_session(zkl_lock *l);

/* Starts an acquire: 0, or -1 with errno EISCONN (held) or EALREADY (acquiring or cleaning
 * up).  A cancel that came while idle ends it at once with ZKL_LOCK_CANCELLED (as kazoo). */
int zkl_lock_acquire(zkl_lock *l, int blocking, int ephemeral);
/* Ends an acquire under way as CANCELLED; while idle, cancels the next acquire. */
void zkl_lock_cancel(zkl_lock *l);
/* Ends an acquire under way as GAVE_UP (the owner timed out). */
void zkl_lock_give_up(zkl_lock *l);
/* Starts deleting the held node: 1, or 0 when not held. */
int zkl_lock_release(zkl_lock *l);
/* The owner stops waiting for a release (it was disconnected too long): the lock no longer
 * counts as held and the delete goes on in the background (phase ABANDONING). */
void zkl_lock_release_in_background(zkl_lock *l);

zkl_lock_phase zkl_lock_phase_of(const zkl_lock *l);
zkl_lock_outcome zkl_lock_outcome_of(const zkl_lock *l, int *rc);
int zkl_lock_release_rc(const zkl_lock *l); /* ZOK, or why the last release failed */
/* Whether the acquire under way has looked at the contenders at least once. */
int zkl_lock_checked(const zkl_lock *l);
int zkl_lock_is_held(const zkl_lock *l); /* HELD or RELEASING */
const char *zkl_lock_node(const zkl_lock *l); /* own node's name, or NULL */
const char *zkl_lock_prefix(const zkl_lock *l); /* "<uuid hex>__lock__" */
/* While an acquire waits behind another contender: that contender's node name; else NULL. */
const char *zkl_lock_blocker(const zkl_lock *l);
int zkl_lock_fencing_token(const zkl_lock *l, int64_t *token); /* 0 while held, else -1 */
uint64_t zkl_lock_id(const zkl_lock *l); /* the notify target */
long zkl_lock_inflight(const zkl_lock *l);

/* An observer (another C recipe built on this lock, e.g. the Semaphore's mutex) hears of the
 * lock's progress: fn(ctx, state) runs on the owner thread after the lock handled each of its
 * routed events (state ZKL_LOCK_NO_STATE) and each session state change (state: the new
 * zkl_state), so the observer sees state changes after the lock itself did.  fn reads the
 * phase and outcome; it may call any zkl_lock_* function, including zkl_lock_free() (nothing
 * touches the lock after fn returns).  An orphaned lock calls no observer.  fn NULL: none. */
enum { ZKL_LOCK_NO_STATE = -1 };
typedef void (*zkl_lock_observer)(void *ctx, int state);
void zkl_lock_observe(zkl_lock *l, zkl_lock_observer fn, void *ctx);

/* Foreign contenders (kazoo's extra_lock_patterns, e.g. go-zookeeper's "-lock-"): a child
 * named <anything><mark>-?<10 digits> is a contender of another implementation's and blocks
 * every acquire of this lock (readers too), ordered with the others by its sequence.  Marks
 * are matched literally.  Add them before the first acquire: 0, or -1 (out of memory). */
int zkl_lock_add_mark(zkl_lock *l, const char *mark);

/* Contender matching, shared with whoever lists contenders: the kind of a child's name
 * (ZKL_LOCK_EXCLUSIVE, ZKL_LOCK_SHARED, ZKL_LOCK_FOREIGN for one of marks[0..n_marks), -1 not
 * a contender), and *seq its sequence suffix (with its optional '-'). */
enum { ZKL_LOCK_FOREIGN = 2 };
int zkl_lock_contender_kind(const char *name, const char *const *marks, int n_marks,
                            const char **seq);
/* Moves the contenders among names[0..n) (marks: the foreign ones too) to the front, sorted
 * by sequence; returns how many, or -1 when out of memory. */
int zkl_lock_sort_contenders(const char **names, int n, const char *const *marks, int n_marks);
/* The same for a lock of kind: a Curator kind's contenders are its layout's (exclusive), and
 * the foreign ones of marks. */
int zkl_lock_layout_sort_contenders(zkl_lock_kind kind, const char **names, int n,
                                    const char *const *marks, int n_marks);

#endif
