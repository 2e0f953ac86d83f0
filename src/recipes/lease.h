/*
 * lease.h — kazoo's NonBlockingLease as a C state machine (no Lua here).
 *
 * Layout (kazoo 2.8, shared with kazoo processes): an attempt runs under a kazoo Lock at
 * <path> itself (lock.h: <uuid>__lock__<seq> children, holding the identity), reads
 * <path>/lease_holder (PERSISTENT, lease_record.h's JSON: version, holder, end in naive UTC)
 * and decides as kazoo does:
 *   no record                                  -> obtained: create it
 *   version != 1                               -> refused (left for a newer implementation)
 *   holder != identity and now < end           -> refused (another holder's time runs)
 *   otherwise (own record, or an ended one)    -> obtained: delete it, create ours
 * where the new end is now + duration, in whole seconds.  Then the lock is released.
 *
 * The clock is the owner's: after reading the record the lease stops in phase NEEDS_TIME
 * until the owner hands it "now" with zkl_lease_decide(), as kazoo calls utcnow() inside
 * the lock.  Everything else runs on the session's owner thread through routed ops; the
 * lease hears of its lock (and of session state changes, after the lock) through the lock's
 * observer.
 *
 * Guarantees:
 * - A lease is time-based, not tied to a session: once obtained, connection loss, session
 *   expiry or the client's end change nothing; the record stands until its end passes (or
 *   the same identity renews it).  Only processes that honour the record are excluded.
 * - An attempt needs the connection throughout, as kazoo's (which raises on ConnectionLoss):
 *   it cannot start unless CONNECTED, and SUSPENDED or LOST during the attempt ends it as
 *   FAILED with ZCONNECTIONLOSS, ZSESSIONEXPIRED or ZCLOSING; a ZooKeeper error ends it as
 *   FAILED with that rc.  The record may then have been written or not (kazoo's ambiguity);
 *   a renewal by the same identity settles it.  The lock is released in every case (once
 *   reconnected, or with the session).
 * - zkl_lease_free() with work in flight leaves it allocated ("orphaned") until its ops came
 *   back; an orphaned attempt is abandoned and its lock released.
 */
#ifndef ZKL_LEASE_H
#define ZKL_LEASE_H

#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_lease zkl_lease;

typedef enum {
    ZKL_LEASE_IDLE = 0,   /* not started, or done (lock released) */
    ZKL_LEASE_WORKING,    /* taking the lock, reading, writing */
    ZKL_LEASE_NEEDS_TIME, /* the record is read: waiting for zkl_lease_decide() */
    ZKL_LEASE_FINISHING   /* decided (or failed): releasing the lock */
} zkl_lease_phase;

typedef enum {
    ZKL_LEASE_PENDING = 0,
    ZKL_LEASE_OBTAINED,       /* the record is ours until zkl_lease_end() */
    ZKL_LEASE_HELD_ELSEWHERE, /* another identity's record has not ended */
    ZKL_LEASE_OTHER_VERSION,  /* a record of another version: left alone (refused) */
    ZKL_LEASE_BAD_RECORD,     /* the record is not one kazoo could read: see zkl_lease_why */
    ZKL_LEASE_ABANDONED,      /* zkl_lease_abandon() */
    ZKL_LEASE_FAILED          /* see rc */
} zkl_lease_outcome;

/* A lease on path (checked by the caller) for identity (UTF-8), lasting duration seconds
 * (finite, >= 0).  acl NULL: open.  NULL with errno (ENOMEM, EILSEQ for identity). */
zkl_lease *zkl_lease_new(zkl_session *s, const char *path, const char *identity, int len,
                         double duration, const struct ACL_vector *acl);
void zkl_lease_free(zkl_lease *e);
void zkl_lease_forget_session(zkl_lease *e);

/* Starts an attempt: 0, or -1 with errno EALREADY (under way) or ENOTCONN (not CONNECTED,
 * or no session). */
int zkl_lease_obtain(zkl_lease *e);
/* In NEEDS_TIME: decides with now (seconds since the epoch, UTC) and goes on: 0, or -1 with
 * errno EINVAL (not waiting for it). */
int zkl_lease_decide(zkl_lease *e, double now);
/* The owner stops the attempt (its clock failed, or its wait was interrupted): it ends as
 * ABANDONED unless a write already under way decides otherwise; the lock is released. */
void zkl_lease_abandon(zkl_lease *e);

zkl_lease_phase zkl_lease_phase_of(const zkl_lease *e);
zkl_lease_outcome zkl_lease_outcome_of(const zkl_lease *e, int *rc);
const char *zkl_lease_why(const zkl_lease *e); /* with BAD_RECORD: what is wrong */
int64_t zkl_lease_end(const zkl_lease *e);     /* with OBTAINED: the end written */
long zkl_lease_inflight(const zkl_lease *e);

#endif
