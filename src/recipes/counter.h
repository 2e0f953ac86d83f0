/*
 * counter.h — kazoo's Counter as a C state machine (no Lua here).
 *
 * Layout (kazoo 2.8, shared with kazoo processes): one persistent node <path> (created with its
 * parents, empty data, when missing) whose data is the value: the ASCII repr Python gives it
 * ("3" for an int counter, never "3.0"; "3.5", "1e+16", "inf" for a float counter), or with
 * support_curator a 4-byte big-endian signed int (curator's SharedCount; the node is created
 * holding the default in those 4 bytes, as SharedCount's seed, since Curator's getCount()
 * cannot read empty data).  Empty data is the default.  With ZKL_COUNTER_CURATOR_LONG the value
 * is Curator 5.4 DistributedAtomicLong's: 8 bytes, big-endian two's complement (a missing node
 * is created holding the default in those 8 bytes; empty data reads as 0, as Curator reads it;
 * any other length is not a value).  Its updates are Curator's optimistic mode: the set
 * carries the version read, as DistributedAtomicValue's tryOnce does, so Curator and zklua
 * updates of one node never lose each other's.
 * An update reads the value and its version, then sets value + delta with that
 * version; on BadVersion it reads again (no limit: every BadVersion means someone else's
 * update went through), after a pause.
 *
 * ZKL_COUNTER_CURATOR_ATOMIC is the same 8-byte value with DistributedAtomicValue's own rules
 * (Curator 5.4), for Curator's DistributedAtomicLong API (lua/zklua/recipes/atomic_long.lua):
 * a read of a missing node gives 0 and creates nothing; an update of a missing node creates
 * it (its parents first, plain persistent nodes) holding the new value, and a NodeExists there,
 * like a BadVersion (or NoNode) of the versioned set, is a failed try.  Operations
 * (zkl_counter_start_op): READ, ADD (value + delta), SET (the new value whatever was read:
 * trySet), CAS (the new value only when the value read is the expected one: one try, never
 * retried, and a missing node fails it, as compareAndSet), FORCE (forceSet: the new value set
 * without a version, or the node created holding it; tried until done) and INIT (initialize:
 * the node created holding the value; NOT_SET when it exists).  With max_tries > 0 an operation
 * ends NOT_SET after that many failed tries (Curator's retry policy; the pause between tries
 * is the backoff below); max_tries 0 (every Counter) retries until done.
 *
 * Backoff: the pause before BadVersion retry n of an operation is drawn uniformly from
 * [ceiling / 2, ceiling], the ceiling doubling from base_ms (ZKL_COUNTER_BACKOFF_BASE_MS) up
 * to cap_ms (ZKL_COUNTER_BACKOFF_CAP_MS) — "equal jitter".  Retrying at once made every
 * contender collide again: with 200 adds at once over 4 sessions the pause cut the BadVersion
 * retries per add from about 40 to about 7, halved p50 and cut p99 by a third or more
 * (bench/counter_contention.lua).  The count restarts with every operation.  The pause is a
 * session timer (timers.h) armed on the owner thread; it is taken back whenever the operation
 * ends otherwise (stop, close, zkl_counter_free(), a session expiry), so no timer ever fires
 * into a freed counter.
 *
 * Everything runs on the session's owner thread (routed ops, see route.h).  The owner starts
 * one read or add at a time and polls the phase; it waits itself.
 *
 * - SUSPENDED (connection loss, operation timeout): the step under way is repeated once the
 *   session is CONNECTED again; a pause under way runs on, and the read after it waits for
 *   the connection.  A set whose reply was lost is ambiguous: the next read counts
 *   it as applied when the node's version is exactly one past the version we set against and
 *   its data is exactly what we wrote (kazoo retries blindly and may add twice); only a
 *   concurrent client making the identical change at the identical version can fool this.
 * - LOST (session expired): the read or add under way starts again on the new session (with
 *   the same ambiguity rule for a set in flight); a pause under way is taken back and the
 *   read is made as soon as the new session is CONNECTED.  The counter node is persistent: nothing is
 *   lost.  Stopped session (ZCLOSING) or auth failure: the operation fails with that rc.
 * - zkl_counter_free() with ops in flight leaves the counter allocated ("orphaned") until they
 *   came back; an orphaned operation is abandoned (it stops after its current op; a pause
 *   under way is taken back and the counter freed at once).
 */
#ifndef ZKL_COUNTER_H
#define ZKL_COUNTER_H

#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_counter zkl_counter;

/* The backoff policy's defaults and the longest cap zkl_counter_set_backoff() takes, ms. */
enum {
    ZKL_COUNTER_BACKOFF_BASE_MS = 2,
    ZKL_COUNTER_BACKOFF_CAP_MS = 64,
    ZKL_COUNTER_BACKOFF_MAX_MS = 600000
};

typedef enum {
    ZKL_COUNTER_INT = 0,
    ZKL_COUNTER_FLOAT = 1,
    ZKL_COUNTER_CURATOR = 2,     /* Curator's SharedCount: 4 bytes */
    ZKL_COUNTER_CURATOR_LONG = 3, /* Curator's DistributedAtomicLong: 8 bytes */
    ZKL_COUNTER_CURATOR_ATOMIC = 4 /* the same, with DistributedAtomicValue's rules (above) */
} zkl_counter_kind;

typedef enum {
    ZKL_COUNTER_OP_READ = 0,
    ZKL_COUNTER_OP_ADD,  /* value + a */
    ZKL_COUNTER_OP_SET,  /* a, whatever was read */
    ZKL_COUNTER_OP_CAS,  /* b when the value read is a: one try */
    ZKL_COUNTER_OP_FORCE, /* a, set without a version (forceSet); tries until done */
    ZKL_COUNTER_OP_INIT  /* a, only by creating the node (initialize): one try */
} zkl_counter_op;

typedef union {
    int64_t i;
    double f;
} zkl_counter_value;

typedef enum {
    ZKL_COUNTER_IDLE = 0,
    ZKL_COUNTER_BUSY
} zkl_counter_phase;

typedef enum {
    ZKL_COUNTER_OK = 0,      /* done: see the values */
    ZKL_COUNTER_FAILED,      /* a ZooKeeper error: see rc */
    ZKL_COUNTER_BAD_DATA,    /* the node's data is not a value of the counter's type */
    ZKL_COUNTER_OVERFLOW,    /* the sum does not fit (int64, or int32 for SharedCount) */
    ZKL_COUNTER_NOT_SET      /* CAS found another value, or max_tries failed tries (pre: the
                                last value read, post: 0, as Curator's AtomicValue) */
} zkl_counter_outcome;

/* NULL when out of memory (errno set).  def: the default (i or f by kind). */
zkl_counter *zkl_counter_new(zkl_session *s, const char *path, zkl_counter_kind kind,
                             zkl_counter_value def);
void zkl_counter_free(zkl_counter *c);
void zkl_counter_forget_session(zkl_counter *c);

/* Starts a read (add = 0) or an add of delta: 0, or -1 with errno EALREADY / ENOTCONN. */
int zkl_counter_start(zkl_counter *c, int add, zkl_counter_value delta);
/* Starts op (a, b: see zkl_counter_op) with at most max_tries tries (0: no limit; CAS, INIT: 1; FORCE: 0):
 * 0, or -1 with errno EALREADY / ENOTCONN, or EINVAL (an op but READ or ADD on a counter not
 * ZKL_COUNTER_CURATOR_ATOMIC). */
int zkl_counter_start_op(zkl_counter *c, zkl_counter_op op, zkl_counter_value a,
                         zkl_counter_value b, long max_tries);
/* Tries (reads followed by a set or create) of the operation under way, or of the last one. */
long zkl_counter_tries(const zkl_counter *c);
zkl_counter_phase zkl_counter_phase_of(const zkl_counter *c);
/* The last operation's outcome; *rc with FAILED. */
zkl_counter_outcome zkl_counter_outcome_of(const zkl_counter *c, int *rc);
/* The value read (a read), or pre and post values (an add). */
zkl_counter_value zkl_counter_pre(const zkl_counter *c);
zkl_counter_value zkl_counter_post(const zkl_counter *c);
long zkl_counter_inflight(const zkl_counter *c);

/* The backoff policy (see above), for the pauses drawn from now on: 0, or -1 with
 * errno EINVAL unless 1 <= base_ms <= cap_ms <= ZKL_COUNTER_BACKOFF_MAX_MS. */
int zkl_counter_set_backoff(zkl_counter *c, long base_ms, long cap_ms);
/* The pause before BadVersion retry n (n >= 1) under that policy, ms; advances *random_state. */
long zkl_counter_backoff_ms(long n, long base_ms, long cap_ms, uint64_t *random_state);
/* BadVersion retries of the operation under way, or of the last one. */
long zkl_counter_retries(const zkl_counter *c);
/* Pauses taken (the timer fired) since the counter was made. */
long zkl_counter_backoffs(const zkl_counter *c);
/* 1 while a pause is under way (its timer armed). */
int zkl_counter_backing_off(const zkl_counter *c);

/* Python's repr of a float (shortest round-trip, "1e+16", "inf", "nan"); returns the length. */
int zkl_counter_float_repr(double v, char *out, size_t size);

#endif
