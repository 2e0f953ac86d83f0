/*
 * allocator.h — PartitionAllocator: divide a shared, changing set of items among the live
 * members of a group, as a C state machine (no Lua here).
 *
 * Layout under <path> (persistent parents are created when missing):
 *   members/<name(identifier)>  EPHEMERAL, data {"weight":W,"chunked":2}: the live members
 *                               ("chunked":2: it reads chunked values; older zklua omits it).
 *   partitions                  the item set: a JSON array of strings, sorted.  Writers change
 *                               it by compare-and-set (the Lua side: add/remove_partitions).
 *                               Too big for one znode: a header and partitions-chunks/, and
 *                               the same for the assignment (assignment-chunks/): the chunked
 *                               format, allocator_chunks.c, written only when every live
 *                               member reads it.
 *   assignment                  {"generation":G,"leader":ID,"members":[IDs],
 *                               "assignment":{ID:[items],...}}: who owns what, and the live
 *                               members it was computed for; written by the leader by
 *                               compare-and-set, G growing by one with every write.
 *   owners/<name(item)>         EPHEMERAL, data = the owner's identifier: who holds an item.
 * name() escapes a string for a znode name (zkl_allocator_node_name).
 *
 * Roles:
 * - Every member follows members, partitions and assignment with watches.
 * - The leader is the member whose member node is the oldest (lowest czxid).  (Not a lock at
 *   <path>/leader, as first planned: every member reads the member nodes anyway, for their
 *   weights, so this needs no extra nodes, and leadership passes in the same watch event as
 *   the membership change that causes it, with no lock to follow.)  When anything
 *   it follows changes (or it becomes leader, or zkl_allocator_touch()), it asks its owner
 *   for an assignment (news.compute = the inputs' epoch; after the members' settle window,
 *   zkl_allocator_set_settle, when they changed or it just became leader) and publishes the answer
 *   (zkl_allocator_publish) unless it equals the current one.  Two members that both believe
 *   they lead for a moment write by compare-and-set, so each write is a whole assignment.
 * - Every member claims the items the newest assignment gives it by creating their owner
 *   nodes, and gives up the others: its owner is asked to release an item it was told about
 *   (news.release; zkl_allocator_released() once done), then the node is deleted.  New claims
 *   wait until every release under way is done.  A claim that finds another owner's node
 *   watches it and claims once it is gone.
 *
 * Guarantees:
 * - No two sessions ever hold one item: holding an item IS holding its ephemeral owner node.
 *   The owner is told about an item (news.acquired, with the node's czxid as its fencing
 *   token, which grows with every new holder) only once its node is created, and a reported
 *   item's node is deleted only after the owner released it.  This holds whatever the leaders
 *   compute and whatever the members believe the assignment is.
 * - A create or delete whose reply was lost is checked by reading the node (its
 *   ephemeralOwner) before anything else is done with that item.
 * - SUSPENDED (connection lost, session alive): nothing is claimed; held items stay held
 *   (their nodes live as long as the session); reads, deletes and a publish that failed on
 *   the connection are repeated once CONNECTED.  If the session expires during the outage the
 *   server deletes the nodes and other members may take the items BEFORE this member
 *   reconnects and hears LOST: until then what it was told it holds is stale, which is what
 *   the fencing tokens are for.  So on SUSPENDED the owner must stop acting on its items
 *   until CONNECTED (as a lock holder, lock.h): it hears SUSPENDED before the majority can
 *   expire its session and let another member claim them, as long as syncLimit * tickTime
 *   is shorter than the session timeout (spec/partition_spec.lua proves the order).
 * - LOST (session expired): the member and owner nodes are gone: every item the owner was
 *   told about is reported in news.lost, nothing is held.  With rejoin, the member joins
 *   again on the new session (a new member node) and follows the assignment again;
 *   without, the allocator stops (rc ZSESSIONEXPIRED).  The session stopped (ZCLOSING) or
 *   refused (ZAUTHFAILED): the same, and it always stops.
 * - A set or assignment is read whole or not at all: a chunked one's header first, then every
 *   chunk it names (a chunk gone: the header is read again).  One in a format newer than this
 *   code reads (or broken) is never misread: the member leaves, its rc ZUNIMPLEMENTED (or
 *   ZMARSHALLINGERROR).
 * - Work per event is O(1) (allocator_claims.c); member nodes are read once each, with a
 *   watch, so a change of the group reads only the nodes that changed.
 * - At most ZKL_ALLOCATOR_CLAIM_WINDOW item ops (owner nodes' creates, reads, deletes) are
 *   unanswered at once, whatever the share: the rest wait in the allocator, not in the
 *   session, so the group's own reads and writes never queue behind a whole share.
 * - zkl_allocator_free() with ops or watches in flight leaves the object allocated
 *   ("orphaned") until they all came back; an orphan sends no news.  A running allocator
 *   dropped without leave keeps its nodes until the session ends.
 */
#ifndef ZKL_ALLOCATOR_H
#define ZKL_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

#include "../../core/session.h"
#include "../json.h"

typedef struct zkl_allocator zkl_allocator;

/* Item ops in flight at once, per allocator.  A few hundred keep a loopback server busy (its
 * own pipeline is about that deep); more only queue. */
enum { ZKL_ALLOCATOR_CLAIM_WINDOW = 256 };

typedef enum {
    ZKL_ALLOCATOR_IDLE = 0, /* not started, or stopped (see zkl_allocator_rc) */
    ZKL_ALLOCATOR_JOINING,  /* making its member node (again, after an expiry) */
    ZKL_ALLOCATOR_RUNNING,  /* a member: follows the assignment */
    ZKL_ALLOCATOR_LEAVING   /* releasing its items and deleting its member node */
} zkl_allocator_phase;

enum { ZKL_ALLOCATOR_NOTIFY_NEWS = 1 }; /* the notify code: call zkl_allocator_take() */

/* The largest node the allocator writes (the server's 1 MiB packet, less the path and the
 * request's framing). */
size_t zkl_allocator_max_node(const char *node_path);

/* A new allocator (checked arguments: path a valid path, identifier non-empty UTF-8 without
 * NUL, weight > 0 and finite).  acl NULL: open.  NULL with errno when out of memory. */
zkl_allocator *zkl_allocator_new(zkl_session *s, const char *path, const char *identifier,
                                 double weight, int rejoin, const struct ACL_vector *acl);
void zkl_allocator_free(zkl_allocator *a);
void zkl_allocator_forget_session(zkl_allocator *a);

/* Joins: seed (the set as a JSON array of strings) becomes the set when <path>/partitions
 * does not exist yet.  0, or -1 with errno EALREADY (not idle) or
 * ENOTCONN (no session). */
int zkl_allocator_start(zkl_allocator *a, const char *seed, size_t seed_len);
/* Leaves: asks for every reported item's release, deletes the others and the member node;
 * the phase turns IDLE once done.  0, or -1 with errno EALREADY (idle or leaving). */
int zkl_allocator_leave(zkl_allocator *a);

zkl_allocator_phase zkl_allocator_phase_of(const zkl_allocator *a);
int zkl_allocator_rc(const zkl_allocator *a); /* why it stopped, or ZOK */
/* RUNNING, and members, the set and the assignment were each read at least once. */
int zkl_allocator_ready(const zkl_allocator *a);
/* Ready, and nothing it follows is being read again, and no publish is under way: what it
 * knows includes every change it was told of (watches come before later replies). */
int zkl_allocator_fresh(const zkl_allocator *a);
/* Fresh, the assignment was computed for the live members and covers exactly the set, and
 * this member holds exactly its share with nothing left to tell its owner.  O(1) but once per
 * change of members, set or assignment (then O(items log items)). */
int zkl_allocator_settled(zkl_allocator *a);
int zkl_allocator_is_leader(const zkl_allocator *a);
/* The settle window (0, the default: none): a leader computes an assignment only once the
 * members have been still for settle_ms, or for twice the longest gap between two changes of
 * the burst when that is longer, re-armed by each change up to 50 * settle_ms after the
 * burst's first, so a burst of joins or leaves (even one slower than settle_ms) costs one
 * assignment and items change owner about once.
 * A new leader waits one window too.  Only a leader arms the session timer (timers.h). */
void zkl_allocator_set_settle(zkl_allocator *a, long settle_ms);
uint64_t zkl_allocator_id(const zkl_allocator *a); /* the notify target */
long zkl_allocator_inflight(const zkl_allocator *a);
int zkl_allocator_publish_rc(const zkl_allocator *a); /* the last failed publish, or ZOK */

/* What the owner must act on.  take() hands it over (and forgets it); free it after. */
typedef struct {
    char *item;
    int64_t token;
} zkl_allocator_grant;

typedef struct {
    zkl_allocator_grant *acquired; /* now held: run the acquire hook */
    size_t acquired_count;
    char **release;                /* to give up: run the release hook, then released() */
    size_t release_count;
    char **lost;                   /* gone with the session: no node, no hook */
    size_t lost_count;
    uint64_t compute;              /* nonzero: lead; compute for this epoch, then publish */
} zkl_allocator_news;

/* 0, or -1 when out of memory (nothing is lost: the news stays for the next take). */
int zkl_allocator_take(zkl_allocator *a, zkl_allocator_news *news);
void zkl_allocator_news_free(zkl_allocator_news *news);

/* The owner is done releasing item (its hook ran): the node is deleted.  1 when the item
 * was being released, 0 otherwise (e.g. it went with the session meanwhile). */
int zkl_allocator_released(zkl_allocator *a, const char *item);

/* The inputs of a computation: members (sorted bytewise, with weights), items (sorted), and
 * the current assignment (its "assignment" object, or NULL) with its generation (0: none)
 * and the members it was computed for (*members: an array, or NULL).  A follower reads only
 * the members and its own items of each assignment; this parses the whole (once). */
size_t zkl_allocator_member_count(const zkl_allocator *a);
const char *zkl_allocator_member(const zkl_allocator *a, size_t i, double *weight);
size_t zkl_allocator_item_count(const zkl_allocator *a);
const char *zkl_allocator_item(const zkl_allocator *a, size_t i);
const zkl_json *zkl_allocator_assignment(zkl_allocator *a, int64_t *generation,
                                         const zkl_json **members);
uint64_t zkl_allocator_epoch(const zkl_allocator *a);
int64_t zkl_allocator_generation(const zkl_allocator *a); /* the assignment's (0: none) */

/* The items whose owner differs between the assignment the owner heard of last (at the last
 * call) and the current one, which it now has heard of: 0, or -1 when out of memory (nothing
 * changed).  *out: malloc'd strings. */
int zkl_allocator_moved(zkl_allocator *a, char ***out, size_t *n);

/* Something the leader's computation depends on changed (its strategy): compute again. */
void zkl_allocator_touch(zkl_allocator *a);

/* Publishes body (a JSON object: member -> array of items) computed for epoch; body NULL:
 * nothing to publish for it.  It is written in a canonical form (members and items sorted
 * bytewise) and only when that differs from the current assignment's.  1 when published
 * (or under way), 0 when equal to the current one, -1 with errno ESTALE (the epoch passed,
 * or not leading), EINVAL (body is not such an object), EMSGSIZE (too big for a node, and a
 * live member does not read chunked values), ENOMEM.  Too big for one node, it is chunked
 * (allocator_chunks.c): the chunks are created, then the header, then stale chunks deleted. */
int zkl_allocator_publish(zkl_allocator *a, uint64_t epoch, const char *body, size_t len);

/* A string escaped for a znode name: bytes other than A-Z a-z 0-9 - _ . ~ become %XX, and
 * "." and ".." are escaped whole.  malloc'd; NULL when out of memory. */
char *zkl_allocator_node_name(const char *s);
/* The reverse; NULL when name is not such an escape (or out of memory). */
char *zkl_allocator_node_unname(const char *name);

#endif
