/*
 * ops.h — submitting ZooKeeper operations through a session.
 *
 * Each function returns the op's id (never 0 once memory is there; 0 means out of memory) and
 * the session later delivers exactly one ZKL_EV_OP event with that id: the result, the server's
 * error, ZCONNECTIONLOSS when the connection dropped (or timed out) after the op was sent,
 * ZSESSIONEXPIRED when the session died, ZCLOSING when the session was stopped.  An op made
 * while the session is not connected waits, unsent, for the connection (ops.c): it is sent
 * once CONNECTED, or fails as the session ends, or with ZCONNECTIONLOSS after a session
 * timeout while a new session's handle connects.  Strings and ACLs are read during the call
 * only (a waiting op keeps its own copies).
 * Paths are not validated here beyond what the library does: check them before calling.
 * A watch, when asked for, fires at most once as a ZKL_EV_WATCH event carrying the op's id;
 * the op's event says whether the library registered it (watch_registered).
 * route: NULL delivers the op's event (and its watch's) from zkl_session_next(); a route sends
 * them to C instead (route.h).  Unrouted reads (exists, get, children) may wait in the
 * session's cork and reach the library at the owner's next wait, delivery or other op (ops.c);
 * the order of a session's ops is kept.  A routed watch always gets exactly one call: its
 * firing, or a ZOO_NOTWATCHING_EVENT when it was not registered (also when the op could not be
 * sent at all) or its handle closed.  Only when out of memory does a watch op fail with ZSYSTEMERROR and an
 * event whose watch_requested is 0: then no watch call comes.
 */
#ifndef ZKL_OPS_H
#define ZKL_OPS_H

#include "session.h"

/* A value NULL with len -1 is ZooKeeper's null (a get reads it back with data_null set);
 * NULL with len 0 is an empty value. */
static inline const char *zkl_wire_value(const char *value, int len)
{
    return value || len < 0 ? value : "";
}

/* About what a request with this path, value length and ACL (NULL: none) carries on the
 * wire, never less: over ZKL_MAX_PACKET (path.h) an op fails, unsent, with ZBADARGUMENTS. */
size_t zkl_request_size(const char *path, int len, const struct ACL_vector *acl);

uint64_t zkl_op_create(zkl_session *s, const char *path, const char *value, int len,
                       const struct ACL_vector *acl, int flags, int want_stat,
                       const zkl_route *route);
/* A create whose flags may be ZOO_PERSISTENT_WITH_TTL or ZOO_PERSISTENT_SEQUENTIAL_WITH_TTL:
 * ttl (ms, > 0) is the node's time to live once it has no children and no change (servers
 * with extendedTypesEnabled); ttl 0 is zkl_op_create. */
uint64_t zkl_op_create_ttl(zkl_session *s, const char *path, const char *value, int len,
                           const struct ACL_vector *acl, int flags, int64_t ttl, int want_stat,
                           const zkl_route *route);
uint64_t zkl_op_delete(zkl_session *s, const char *path, int version, const zkl_route *route);
/*
 * Batched writes: a create (no TTL, no container) or a delete that may go out in one multi
 * transaction with the batched writes next to it.  A server commits a
 * multi's ops for far less than as many requests, so a recipe that makes many independent
 * writes at once (a SetPartitioner's item locks) makes them this way.  They wait in the cork
 * as the caller's reads do (ops.c) and go out with the list, at most 50 a multi (a lone one
 * as a plain op).  Each op gets its own result, as if it had been sent alone, with one
 * difference in order: when a multi fails because of one of its ops, that op gets its error
 * and the others, which did not run, are sent again one by one, behind whatever the session
 * sent meanwhile.  So a batched write follows every op made before it, but may follow ops made
 * after it: only a caller that waits for its result before it depends on it may batch (a
 * lock does).  A create's event has its czxid: the stat when it went alone, else (has_stat 0)
 * the event's czxid, the multi's zxid (a multi is one transaction).  A C client that cannot
 * tell a completion its reply's zxid (ZK_CLIENT=system: no ZKL_COMPLETION_ZXID,
 * scripts/zookeeper-client-patches/completion-zxid.patch) sends every batched create alone.
 */
uint64_t zkl_op_create_batched(zkl_session *s, const char *path, const char *value, int len,
                               const struct ACL_vector *acl, int flags, const zkl_route *route);
uint64_t zkl_op_delete_batched(zkl_session *s, const char *path, int version,
                               const zkl_route *route);
/*
 * Batched listings: a children read (no watch) that may go out in one multiRead with the
 * batched listings next to it (ZooKeeper 3.6+; at most 50, a lone one as a plain children2),
 * as batched writes do, and for the same reason: a lock that lists its contenders after each
 * batched create.  Each gets its own result, its names with no stat (has_stat 0), in order.
 * A server older than 3.6 refuses a multiRead: its listings are sent again alone, and so
 * are the session's later ones.  A C client without the multiRead call (ZK_CLIENT=system: no
 * ZKL_MULTI_READ, scripts/zookeeper-client-patches/multi-read.patch) sends each alone.
 */
uint64_t zkl_op_children_batched(zkl_session *s, const char *path, const zkl_route *route);
uint64_t zkl_op_exists(zkl_session *s, const char *path, int watch, const zkl_route *route);
uint64_t zkl_op_get(zkl_session *s, const char *path, int watch, const zkl_route *route);
uint64_t zkl_op_children(zkl_session *s, const char *path, int watch, const zkl_route *route);
uint64_t zkl_op_set(zkl_session *s, const char *path, const char *value, int len, int version,
                    const zkl_route *route);
uint64_t zkl_op_get_acl(zkl_session *s, const char *path, const zkl_route *route);
uint64_t zkl_op_set_acl(zkl_session *s, const char *path, int version,
                        const struct ACL_vector *acl, const zkl_route *route);
uint64_t zkl_op_sync(zkl_session *s, const char *path, const zkl_route *route);
uint64_t zkl_op_multi(zkl_session *s, zkl_multi *m, const zkl_route *route); /* takes m */
/* Changes the ensemble's membership (ZooKeeper 3.5+ dynamic reconfiguration): incremental
 * (joining and/or leaving, comma-separated server lines / ids) or bulk (members); each may be
 * NULL.  from_config: the config version it applies to, -1 any.  The result is the new config
 * as a get's value and stat. */
uint64_t zkl_op_reconfig(zkl_session *s, const char *joining, const char *leaving,
                         const char *members, int64_t from_config);
/* Sends an auth now and remembers it for the sessions that follow an expiry. */
uint64_t zkl_op_add_auth(zkl_session *s, const char *scheme, const char *cred, int len);

/*
 * Direct ops (ops_now.c): the same ops run synchronously on the calling (owner) thread, for a
 * caller that would only wait for the result anyway.  Each fills the caller's event *op (on
 * its stack, say) as the op's async completion would, and returns 1; the event never goes
 * through the queue, and the caller releases what it holds with zkl_event_clear before the
 * session's next direct op (a get's value or a create's path may lie in the session's read
 * buffer).  Each returns 0, touching nothing, when the op cannot run directly now — the
 * session is not CONNECTED, an event waits to be delivered, or an async op is in flight — and
 * must be submitted the async way.  A watch set by one fires later as a ZKL_EV_WATCH event
 * with the op's id.
 */
int zkl_op_get_now(zkl_session *s, zkl_event *op, const char *path, int watch);
int zkl_op_exists_now(zkl_session *s, zkl_event *op, const char *path, int watch);
int zkl_op_children_now(zkl_session *s, zkl_event *op, const char *path, int watch);
int zkl_op_create_now(zkl_session *s, zkl_event *op, const char *path, const char *value,
                      int len, const struct ACL_vector *acl, int flags, int want_stat);
int zkl_op_set_now(zkl_session *s, zkl_event *op, const char *path, const char *value, int len,
                   int version);
int zkl_op_delete_now(zkl_session *s, zkl_event *op, const char *path, int version);

#endif
