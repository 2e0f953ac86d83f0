/*
 * persistent_node.h — Curator's PersistentNode as a C state machine (no Lua here): a node at a
 * fixed path that this client keeps present, holding its current data, while it runs.
 *
 * Layout: the node is <path> itself: EPHEMERAL, PERSISTENT, or PERSISTENT_WITH_TTL (ttl > 0),
 * holding the data.  A missing parent path is created first, of container nodes with
 * ZKL_PNODE_CONTAINER_PARENTS (Curator's creatingParentContainersIfNeeded), else plain ones.
 * ZKL_PNODE_PROTECTED (Curator's withProtection): the node's name is _c_<uuid>-<last segment
 * of path> in path's parent (the uuid this object's own, zkl_protected_prefix).
 * ZKL_PNODE_SEQUENTIAL (EPHEMERAL_SEQUENTIAL, PERSISTENT_SEQUENTIAL[_WITH_TTL]): the first
 * create is sequential, so the node is <that name><10-digit sequence>; every later create of
 * this run (after a deletion or an expiry) re-makes that same name, not sequential (Curator's
 * createNode with a known path).  zkl_pnode_actual_path: the node's path once created (or
 * found), NULL before and after the run; the same for the whole run.
 * A sequential create whose reply was lost (connection loss: it may have made the node) is not
 * repeated blindly: the parent's children are listed and the node is found again — with
 * protection by its _c_<uuid>- name, without it (ephemeral only) as the <name><sequence> child
 * whose ephemeralOwner is this session (two sequential nodes of one session at one path
 * without protection cannot be told apart: use protection) — and taken over (its data written,
 * not counted as a creation); none found: created.  A persistent sequential node without
 * protection cannot be found: as Curator, a lost reply may leave a second node.
 *
 * While running (zkl_pnode_start until zkl_pnode_stop):
 * - The node is created.  One that exists already (NODEEXISTS) is looked at: an ephemeral
 *   node owned by one of this client's earlier sessions (zkl_session_had_id: left by a session
 *   that expired or counted as LOST, which the server may not have expired yet) is deleted,
 *   with the version read, and created again at once on this session (as Curator 5.4's
 *   ServiceDiscovery re-registers), so it does not vanish when the server expires that old
 *   session.  Any other (our create whose reply was lost, a persistent node left from before,
 *   another live session's ephemeral node) gets the current data written over it (Curator's
 *   setData) and is kept from then on; it is never deleted.  Then an exists watch follows it: deleted
 *   (by anyone, or a TTL node the server expired) -> created again with the current data;
 *   changed by someone else -> watched again (the data is not rewritten, as Curator).
 * - zkl_pnode_set_data: the data to keep from now on; written at once when the node is there,
 *   and used by every later create.
 * - SUSPENDED (connection loss, operation timeout): nothing is lost (an ephemeral lives while
 *   the session does); the step under way is repeated once CONNECTED.
 * - LOST (session expired): an ephemeral node is gone: present turns 0, the owner of a running
 *   (or present) node is told with zkl_session_notify(s, zkl_pnode_id(n),
 *   ZKL_PNODE_NOTIFY_LOST) — also when it saw the node deleted first — and the node is created
 *   again, with the current data, once the new session is CONNECTED.  A persistent node is
 *   looked at and watched again on the new session (re-created if it went meanwhile).
 * - Each create of this client known to have made the node is told with
 *   ZKL_PNODE_NOTIFY_CREATED (Curator's PersistentNodeListener.nodeCreated);
 *   zkl_pnode_creations counts them.  A create whose reply was lost is repeated, finds
 *   NODEEXISTS and takes the node over like any existing one: not counted (as Curator).
 * - Stopped session (ZCLOSING) or auth failure: the node is no longer kept; phase IDLE (stop)
 *   or FAILED (auth), rc says which; an ephemeral node goes with the session.
 * - An error no retry can fix (NOAUTH, BADARGUMENTS, NOCHILDRENFOREPHEMERALS, UNIMPLEMENTED,
 *   or NONODE after ZKL_RETRY_LIMIT rounds of making the parents): phase FAILED with rc.
 * ZKL_PNODE_CONTAINER: the node is created as a CONTAINER, which the server deletes once its
 * last child is gone (and then, while running, this client creates it again).
 * zkl_pnode_stop with ZKL_PNODE_KEEP_ON_STOP stops keeping the node and leaves it: IDLE at
 * once, whatever was in flight is stale.  Otherwise zkl_pnode_stop stops keeping the node and deletes it (phase STOPPING until the delete is
 * answered: a connection loss repeats it once CONNECTED, a LOST ends it for an ephemeral
 * node), then IDLE.  A sequential node not named yet: the create under way is waited for (or
 * the node of a lost reply looked for) and what it made deleted.  zkl_pnode_free of a running node stops it in the background ("orphaned":
 * freed once nothing is in flight).
 *
 * Everything runs on the session's owner thread (routed ops, route.h).  The owner starts and
 * stops, reads the phase and present, and waits itself.
 */
#ifndef ZKL_PERSISTENT_NODE_H
#define ZKL_PERSISTENT_NODE_H

#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_pnode zkl_pnode;

typedef enum {
    ZKL_PNODE_IDLE = 0, /* not started, or stopped */
    ZKL_PNODE_RUNNING,  /* keeping the node */
    ZKL_PNODE_STOPPING, /* deleting it after stop */
    ZKL_PNODE_FAILED    /* gave up: see rc */
} zkl_pnode_phase;

enum {
    ZKL_PNODE_NOTIFY_LOST = 1,   /* an ephemeral node went with the expired session */
    ZKL_PNODE_NOTIFY_CREATED = 2 /* this client's create made the node */
};

enum {
    ZKL_PNODE_EPHEMERAL = 1,        /* else persistent */
    ZKL_PNODE_CONTAINER_PARENTS = 2, /* a missing parent path is made of containers */
    ZKL_PNODE_SEQUENTIAL = 4,        /* the first create is sequential */
    ZKL_PNODE_PROTECTED = 8,         /* the name is _c_<uuid>-<name> (Curator's protection) */
    ZKL_PNODE_CONTAINER = 16, /* the node itself is a CONTAINER (persistent, no ttl, not sequential) */
    ZKL_PNODE_KEEP_ON_STOP = 32 /* stop does not delete the node (PersistentTtlNode's) */
};

/* A persistent node at path (checked by the caller) holding data; flags ZKL_PNODE_*; ttl:
 * milliseconds (> 0: PERSISTENT_WITH_TTL; not with ZKL_PNODE_EPHEMERAL), or 0; acl NULL:
 * open.  NULL when out of memory (errno set). */
zkl_pnode *zkl_pnode_new(zkl_session *s, const char *path, const char *data, int len, int flags,
                         int64_t ttl, const struct ACL_vector *acl);
void zkl_pnode_free(zkl_pnode *n);
void zkl_pnode_forget_session(zkl_pnode *n);

/* Starts keeping the node: 0, or -1 with errno EALREADY (running or stopping) or ENOTCONN. */
int zkl_pnode_start(zkl_pnode *n);
/* Stops keeping it and starts deleting it: 0 (also when it was not running: then IDLE at once),
 * or -1 with errno ENOTCONN. */
int zkl_pnode_stop(zkl_pnode *n);
/* The data to keep: 0, or -1 with errno ENOMEM (nothing changed). */
int zkl_pnode_set_data(zkl_pnode *n, const char *data, int len);

zkl_pnode_phase zkl_pnode_phase_of(const zkl_pnode *n);
int zkl_pnode_present(const zkl_pnode *n); /* the node is there, as this client last learnt */
int zkl_pnode_rc(const zkl_pnode *n);      /* why it failed (or the last stop's error), or ZOK */
int zkl_pnode_deleted(const zkl_pnode *n); /* the last stop deleted the node */
/* The node's path once this run created or found it (a sequential one's name), else NULL. */
const char *zkl_pnode_actual_path(const zkl_pnode *n);
/* The node is there holding the latest set_data's data: this client's create or set of that
 * data was answered (and no deletion or expiry seen since). */
int zkl_pnode_written(const zkl_pnode *n);
uint64_t zkl_pnode_creations(const zkl_pnode *n);
const char *zkl_pnode_data(const zkl_pnode *n, int *len);
uint64_t zkl_pnode_id(const zkl_pnode *n);
long zkl_pnode_inflight(const zkl_pnode *n);

#endif
