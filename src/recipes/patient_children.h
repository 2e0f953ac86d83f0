/*
 * patient_children.h — kazoo's PatientChildrenWatch as a C state machine (no Lua here): the
 * children of a node, reported once they have stayed unchanged for a time boundary, then a
 * watch for their next change.
 *
 * A round (zkl_patient_start) reads the children with a watch and arms a timer of
 * boundary_ms (timers.h).  Every change (the watch fires) re-reads with a new watch and arms
 * the timer again, so the round settles only after boundary_ms without a change: the owner is
 * told with zkl_session_notify(s, id, ZKL_PATIENT_NOTIFY_SETTLED) and the children of that
 * moment are kept (sorted bytewise).  The watch set by the last read then stays armed: its
 * firing is the "next change" (NOTIFY_CHANGED, and the round ends).  Changes seen while a
 * round settles are reported too (NOTIFY_CHANGED), for an earlier round's "next change".
 * Everything runs on the session's owner thread (routed ops, watches and timers).
 *
 * - A missing node fails the round with ZNONODE (kazoo: NoNodeError); so does any error other
 *   than a connection problem (NOTIFY_FAILED, rc).
 * - SUSPENDED (connection loss): the boundary cannot be vouched for while disconnected, so the
 *   timer is stopped and starts again, for a whole boundary, once CONNECTED; the watch
 *   survives the reconnection (the server reports changes made meanwhile).  A read that
 *   failed on the connection is repeated.  A settled round goes on watching.
 * - LOST (session expired): the watch died with the session.  A settling round re-reads on
 *   the new session and waits out a whole boundary again.  A settled round re-reads the
 *   children (with a new watch) on the new session: if they differ from the settled ones that
 *   is its next change (NOTIFY_CHANGED), else it goes on watching.
 * - Stopped session (ZCLOSING) or auth failure: a round under way or settled ends with
 *   NOTIFY_FAILED and that rc.
 * - zkl_patient_free() ends the round; with a read or a watch still out the object stays
 *   allocated ("orphaned") until they come back (a watch that never fires comes back when the
 *   session's handle closes).
 */
#ifndef ZKL_PATIENT_CHILDREN_H
#define ZKL_PATIENT_CHILDREN_H

#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_patient zkl_patient;

typedef enum {
    ZKL_PATIENT_IDLE = 0, /* no round: never started, changed after settling, or failed */
    ZKL_PATIENT_SETTLING, /* reading the children and waiting out the boundary */
    ZKL_PATIENT_SETTLED   /* settled: watching for the next change */
} zkl_patient_phase;

/* notify codes (1 is the recipes' LOST, unused here) */
enum {
    ZKL_PATIENT_NOTIFY_SETTLED = 2,
    ZKL_PATIENT_NOTIFY_CHANGED = 3,
    ZKL_PATIENT_NOTIFY_FAILED = 4
};

/* A watch of path's children (path checked by the caller); boundary_ms >= 0.  NULL when out
 * of memory (errno set). */
zkl_patient *zkl_patient_new(zkl_session *s, const char *path, long boundary_ms);
void zkl_patient_free(zkl_patient *w);
void zkl_patient_forget_session(zkl_patient *w);

/* Starts a round: 0, or -1 with errno EALREADY (a round is settling) or ENOTCONN. */
int zkl_patient_start(zkl_patient *w);

zkl_patient_phase zkl_patient_phase_of(const zkl_patient *w);
int zkl_patient_rc(const zkl_patient *w); /* why the last round failed, or ZOK */
/* The children of the last settled round, sorted bytewise; *count of them. */
const char *const *zkl_patient_children(const zkl_patient *w, int *count);
/* Wall-clock seconds (as Python's time.time()) when the last change was seen; 0: none. */
double zkl_patient_changed_at(const zkl_patient *w);
long zkl_patient_changes(const zkl_patient *w); /* how many changes were seen */
uint64_t zkl_patient_id(const zkl_patient *w);
long zkl_patient_inflight(const zkl_patient *w);

#endif
