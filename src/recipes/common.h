/*
 * common.h — the small helpers every recipe needs: a uuid4 for a node name (and Curator's
 * protected-create prefix built from one), a child's path,
 * the creates that make a recipe's path (with its parents) when it is missing, the one triage
 * of a ZooKeeper rc every recipe's op handler starts with, and the one retry limit.
 *
 * Guarantees: nothing here keeps state or calls Lua; zkl_uuid4_hex() fills out only on
 * success; zkl_join_path() never doubles the slash under "/"; zkl_create_path() submits its
 * creates in path order on the caller's (owner) thread and counts each one it submitted.
 */
#ifndef ZKL_RECIPES_COMMON_H
#define ZKL_RECIPES_COMMON_H

#include <stdint.h>

#include "../core/session.h"

enum { ZKL_UUID_HEX_LEN = 32 };

/* The one retry limit: how many times a recipe redoes a round the server refused for a reason
 * another client may cause (a create finds a parent deleted meanwhile and makes the path again,
 * a transaction is refused and checked again) before it fails with the server's rc. */
enum { ZKL_RETRY_LIMIT = 10 };

/* What a recipe does with the rc of one of its routed ops: the same four ways everywhere. */
typedef enum {
    ZKL_RC_ANSWER, /* the server answered (ZOK, ZNONODE, ZNODEEXISTS, ...): the step decides */
    ZKL_RC_RETRY,  /* ZCONNECTIONLOSS, ZOPERATIONTIMEOUT: outcome unknown; redo the step (a
                      create looks for its node first) once CONNECTED */
    ZKL_RC_LOST,   /* ZSESSIONEXPIRED, ZINVALIDSTATE: the session is gone; park, LOST follows
                      through the state listener and decides */
    ZKL_RC_CLOSED  /* ZCLOSING, ZAUTHFAILED: stopped, or cannot authenticate: fail with rc */
} zkl_rc_kind;

zkl_rc_kind zkl_rc_triage(int rc);

/* A random uuid4 as 32 lowercase hex digits and a NUL (Python's uuid.uuid4().hex), read from
 * /dev/urandom: 0, or -1 with errno. */
int zkl_uuid4_hex(char out[ZKL_UUID_HEX_LEN + 1]);

/* Curator's protected-create prefix (CreateBuilder.withProtection): "_c_" + the uuid hex as
 * 8-4-4-4-12 text + "-"; a protected node is named <prefix><name>[<sequence>], and a create
 * whose reply was lost is found again by it among the parent's children. */
enum { ZKL_PROTECTED_PREFIX_LEN = 3 + 36 + 1 };
void zkl_protected_prefix(char out[ZKL_PROTECTED_PREFIX_LEN + 1],
                          const char hex[ZKL_UUID_HEX_LEN + 1]);

/* parent + "/" + name, malloc'd (parent "/" gives "/name"); NULL when out of memory. */
char *zkl_join_path(const char *parent, const char *name);

/* Submits a routed persistent, empty create for every prefix of path in order ("/a", "/a/b",
 * ..., path itself; one session's requests are handled in order), adding 1 to *inflight for
 * each submitted.  *last_id: the id of the create of path itself (0 if it was not submitted).
 * 0, or -1 when out of memory before anything was submitted (*last_id 0). */
int zkl_create_path(zkl_session *s, const char *path, const struct ACL_vector *acl,
                    const zkl_route *route, long *inflight, uint64_t *last_id);
/* The same with each node created in mode (ZOO_PERSISTENT, or ZOO_CONTAINER). */
int zkl_create_path_mode(zkl_session *s, const char *path, const struct ACL_vector *acl,
                         int mode, const zkl_route *route, long *inflight, uint64_t *last_id);
/* The same (persistent nodes) with path itself created holding data (len bytes), its parents
 * empty. */
int zkl_create_path_data(zkl_session *s, const char *path, const char *data, int len,
                         const struct ACL_vector *acl, const zkl_route *route, long *inflight,
                         uint64_t *last_id);

#endif
