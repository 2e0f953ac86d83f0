/*
 * tree_cache.h — kazoo's TreeCache (a port of Curator's) as a C state machine (no Lua here):
 * an in-memory copy of a znode subtree — every node's data and stat, and its children — kept
 * up to date with one data watch and one child watch per node.
 *
 * Everything runs on the session's owner thread: reads are submitted with a route and their
 * results and watches come back inside zkl_session_next().  Changes are not handed to anyone
 * from C: they are queued as zkl_tree_event records, and the owner is told that some wait with
 * zkl_session_notify(s, zkl_tree_cache_id(tc), ZKL_TREE_CACHE_NOTIFY_EVENTS); it then takes
 * them with zkl_tree_cache_next_event() (so listeners run from the owner's code, never here).
 *
 * Guarantees:
 * - The cache holds the nodes it has read at least once and not seen vanish ("live" nodes);
 *   NODE_ADDED, NODE_UPDATED (the data changed: a new mzxid) and NODE_REMOVED report exactly
 *   the changes to that set, in the order the server made them for each node.  A removed
 *   subtree is reported children first.  A node deleted and created again under the same
 *   name (a new czxid) is reported as removed (with its old subtree) and added again.
 * - INITIALIZED comes once, after the first full load: every node read, nothing in flight;
 *   not again after a LOST (kazoo's sends it again).  At most READ_WINDOW (1000) reads are in
 *   flight, so loading a big tree does not hold all its requests at once.
 * - SUSPENDED (connection lost): CONNECTION_SUSPENDED is queued; the cache keeps what it has.
 *   Reads that failed on the connection are repeated when it comes back.
 * - CONNECTED again: CONNECTION_RECONNECTED is queued, then every cached node is read again
 *   (the watches that survived are not asked twice), so whatever changed while the cache was
 *   away is reported as the differences (added, updated, removed) against what it held.
 * - LOST (session expired, or the client stopped): CONNECTION_LOST is queued; the cache keeps
 *   its (now unwatched) content, and re-reads and reports the differences as above once a new
 *   session is CONNECTED.
 * - The root may be missing, deleted or created again: the cache then watches for it with an
 *   exists watch and loads it when it appears (a deleted root is reported NODE_REMOVED with
 *   its subtree, a created one NODE_ADDED).
 * - A read the server refuses (e.g. ZNOAUTH) queues a FAULT event with the path and the code.
 * - zkl_tree_cache_close() stops everything at once: no event is queued after it and the
 *   queued ones are dropped.  zkl_tree_cache_free() with reads or watches still out leaves a
 *   small shell allocated until each came back (the tree itself is freed at once).
 */
#ifndef ZKL_TREE_CACHE_H
#define ZKL_TREE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "../core/session.h"

typedef struct zkl_tree_cache zkl_tree_cache;
typedef struct zkl_tree_node zkl_tree_node;

/* kazoo's TreeEvent types (same order as kazoo's numbers), and FAULT. */
typedef enum {
    ZKL_TREE_NODE_ADDED = 0,
    ZKL_TREE_NODE_UPDATED,
    ZKL_TREE_NODE_REMOVED,
    ZKL_TREE_CONNECTION_SUSPENDED,
    ZKL_TREE_CONNECTION_RECONNECTED,
    ZKL_TREE_CONNECTION_LOST,
    ZKL_TREE_INITIALIZED,
    ZKL_TREE_FAULT /* reading path failed with rc */
} zkl_tree_event_type;

typedef struct zkl_tree_event {
    struct zkl_tree_event *next;
    zkl_tree_event_type type;
    char *path;  /* node events and FAULT; NULL for the others */
    char *data;  /* node events: the node's data (REMOVED: its last data) */
    int data_len; /* -1: ZooKeeper's null value (data is "") */
    struct Stat stat;
    int rc;      /* FAULT */
} zkl_tree_event;

typedef enum { ZKL_TREE_LATENT = 0, ZKL_TREE_STARTED, ZKL_TREE_CLOSED } zkl_tree_cache_phase;

enum { ZKL_TREE_CACHE_NOTIFY_EVENTS = 2 }; /* the notify code: events wait */

/* A cache of the subtree at path (checked by the caller).  NULL when out of memory. */
zkl_tree_cache *zkl_tree_cache_new(zkl_session *s, const char *path);
/* Starts loading: 0, or -1 with errno EALREADY (started), ESHUTDOWN (closed), ENOTCONN (the
 * session is gone) or ENOMEM. */
int zkl_tree_cache_start(zkl_tree_cache *tc);
/* Stops for good: no more events, the tree is emptied.  Idempotent. */
void zkl_tree_cache_close(zkl_tree_cache *tc);
/* The owner lets go (closes first); see the shell above. */
void zkl_tree_cache_free(zkl_tree_cache *tc);
/* The session was freed (after it delivered every routed event): never touch it again. */
void zkl_tree_cache_forget_session(zkl_tree_cache *tc);

/* The oldest queued event (the caller frees it with zkl_tree_event_free), or NULL. */
zkl_tree_event *zkl_tree_cache_next_event(zkl_tree_cache *tc);
void zkl_tree_event_free(zkl_tree_event *ev);

/* A live node of the cache by its full path, or NULL. */
const zkl_tree_node *zkl_tree_cache_find(const zkl_tree_cache *tc, const char *path);
/* The node's data and its length in *len; -1 for ZooKeeper's null value (the data is ""). */
const char *zkl_tree_node_data(const zkl_tree_node *n, int *len);
const struct Stat *zkl_tree_node_stat(const zkl_tree_node *n);
/* How many children the node has in the cache, live or still being read (a bound for the
 * next call). */
int zkl_tree_node_child_count(const zkl_tree_node *n);
/* Fills names with the names of the node's live children (unordered); returns how many. */
int zkl_tree_node_live_children(const zkl_tree_node *n, const char **names);

zkl_tree_cache_phase zkl_tree_cache_phase_of(const zkl_tree_cache *tc);
int zkl_tree_cache_initialized(const zkl_tree_cache *tc);
size_t zkl_tree_cache_size(const zkl_tree_cache *tc); /* live nodes */
uint64_t zkl_tree_cache_id(const zkl_tree_cache *tc);  /* the notify target */
long zkl_tree_cache_inflight(const zkl_tree_cache *tc); /* routed ops and watches still out */

#endif
