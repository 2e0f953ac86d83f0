/*
 * party.h — kazoo's Party and ShallowParty membership as a C state machine (no Lua here).
 *
 * Layout (kazoo 2.8, shared with kazoo processes): the member node is EPHEMERAL under <path>
 * (created with its parents, persistent and empty, when missing):
 *   Party:        <path>/<uuid4 hex>__party__, data = identifier
 *   ShallowParty: <path>/<uuid4 hex>-<identifier>, data = identifier
 * The node name is fixed for the object's life, so a create repeated after a lost reply finds
 * NODEEXISTS, which counts as joined (as kazoo).  Listing members is a plain read (Lua).
 *
 * Everything runs on the session's owner thread (routed ops, route.h).  The owner starts a
 * join or a leave and polls the phase; it waits itself.
 *
 * - SUSPENDED (connection loss, operation timeout): a member stays joined (its ephemeral
 *   lives while the session does); a join or leave under way is repeated once CONNECTED.
 * - LOST (session expired): the member node is gone.  A joined member is no longer joined
 *   and is NOT re-joined (kazoo's behaviour); the owner is told with
 *   zkl_session_notify(s, zkl_party_id(p), ZKL_PARTY_NOTIFY_LOST).  A join under way starts
 *   again on the new session; a leave under way ends (result: nothing was deleted).
 * - Stopped session (ZCLOSING) or auth failure: a join fails with that rc; a joined member is
 *   no longer joined (notified as LOST); a leave ends.
 * - zkl_party_free() with ops in flight leaves the party allocated ("orphaned") until they
 *   came back; a joined member dropped without leave keeps its node until the session ends.
 */
#ifndef ZKL_PARTY_H
#define ZKL_PARTY_H

#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_party zkl_party;

typedef enum { ZKL_PARTY_FULL = 0, ZKL_PARTY_SHALLOW = 1 } zkl_party_kind;
typedef enum { ZKL_PARTY_IDLE = 0, ZKL_PARTY_JOINING, ZKL_PARTY_JOINED, ZKL_PARTY_LEAVING } zkl_party_phase;

enum { ZKL_PARTY_NOTIFY_LOST = 1 };

/* NULL when out of memory or no random uuid could be read (errno set). */
zkl_party *zkl_party_new(zkl_session *s, const char *path, const char *data, int len,
                         zkl_party_kind kind, const struct ACL_vector *acl);
void zkl_party_free(zkl_party *p);
void zkl_party_forget_session(zkl_party *p);

/* 0, or -1 with errno EALREADY (busy), EISCONN (joined: join is then a no-op for the
 * caller) or ENOTCONN. */
int zkl_party_join(zkl_party *p);
/* Starts deleting the node: 0, or -1 with errno EALREADY / ENOTCONN. */
int zkl_party_leave(zkl_party *p);

/* fn(ctx) runs on the owner thread each time the party has handled one of its routed results
 * (a join or leave may have ended), as the last thing it does then, so fn may free the party.
 * Never after zkl_party_free().  NULL stops it. */
void zkl_party_observe(zkl_party *p, void (*fn)(void *ctx), void *ctx);

zkl_party_phase zkl_party_phase_of(const zkl_party *p);
int zkl_party_rc(const zkl_party *p);      /* why the last join/leave failed, or ZOK */
int zkl_party_deleted(const zkl_party *p); /* the last leave deleted the node */
const char *zkl_party_node(const zkl_party *p);
uint64_t zkl_party_id(const zkl_party *p);
long zkl_party_inflight(const zkl_party *p);

#endif
