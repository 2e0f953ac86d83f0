/*
 * allocator_private.h — the allocator's state, shared by allocator.c (the group: joining,
 * following members/partitions/assignment, leading, publishing, leaving) and
 * allocator_claims.c (the items: claiming and giving up owner nodes).  Not a public API.
 *
 * Everything is level-triggered: results and watches only update what is known and what is
 * needed; zkl_alloc_kick() then sends whatever is needed and not already in flight (only
 * while CONNECTED), and zkl_alloc_update() works out the leader, the target items and the
 * news for the owner.  So a step that failed on the connection simply runs again at the next
 * CONNECTED.
 */
#ifndef ZKL_ALLOCATOR_PRIVATE_H
#define ZKL_ALLOCATOR_PRIVATE_H

#include "allocator.h"

typedef enum {
    CLAIM_NONE,     /* not held, nothing in flight */
    CLAIM_CREATING, /* the owner node's create is in flight */
    CLAIM_CHECKING, /* reading the node (it existed, or a create's reply was lost) */
    CLAIM_WAITING,  /* another session holds it: its node is watched */
    CLAIM_HELD,     /* the node is ours */
    CLAIM_DELETING  /* deleting our node */
} claim_state;

typedef struct item_rec item_rec;
struct item_rec {
    item_rec *next;        /* hash chain */
    struct zkl_allocator *a;
    char *item;
    char *node;            /* owners/<name(item)> */
    claim_state st;
    int want;              /* the assignment gives it to us (and we run) */
    int unsure;            /* a create's or delete's reply was lost: read before acting */
    int reported;          /* the owner was told it holds it */
    int queued;            /* in the acquired queue, not yet taken */
    int release_asked;     /* the owner was asked to release it */
    int released;          /* ... and said it is done: delete */
    int failed;            /* an error retrying cannot fix: leave it until the target moves */
    int ensure_rounds;
    int64_t czxid;
    uint64_t op_id, watch_id;
    long inflight;         /* this record's ops and watches not yet come back */
    int dirty;             /* on the dirty list: looked at by the next reconcile */
    item_rec *dirty_next;
    int parked;            /* on the parked list: an op waits for room in the claim window */
    item_rec *park_next;
    unsigned bits;         /* the counts it is in (allocator_claims.c: account) */
    uint64_t target_stamp; /* the target that last wanted it */
};

typedef struct {
    char *id;
    double weight;
    int64_t czxid;
    int chunked;    /* its member node says it reads chunked values (format 2) */
} member_info;

/* A member node, as read: listed by the last listing, read once with a watch and kept until
 * that watch fires (a member node's data never changes; a node deleted and made again under
 * the same name fires it), so a change of the group reads only the nodes that changed. */
typedef enum { MEMBER_NEED, MEMBER_READING, MEMBER_KNOWN, MEMBER_GONE } member_state;

typedef struct member_rec member_rec;
struct member_rec {
    struct zkl_allocator *a;
    char *name;                     /* its node name under members/ */
    char *id;                       /* the identifier (the name unescaped) */
    double weight;
    int64_t czxid;
    int chunked;
    member_state st;
    uint64_t op_id, watch_id;
    long inflight;                  /* its ops and watches not yet come back */
    int detached;                   /* not listed any more: freed once nothing is in flight */
    member_rec *all_prev, *all_next; /* every record, listed or detached */
};

/* allocator_chunks.c: chunked values (format 2), see there */
enum { ZKL_CHUNKED_FORMAT = 2, ZKL_CHUNKS_MAX = 100000, ZKL_TAG_MAX = 40 };
enum { ZKL_CHUNKED_NONE = 0, ZKL_CHUNKED_YES = 1, ZKL_CHUNKED_NEWER = -1, ZKL_CHUNKED_BAD = -2 };
typedef struct {
    int format;
    size_t chunks;
    char tag[ZKL_TAG_MAX];
    zkl_json *tree; /* the header's JSON (YES only: the caller frees it) */
} zkl_alloc_header;
typedef enum { JOIN_ENSURE, JOIN_SEED, JOIN_CREATE, JOIN_CHECK, JOIN_WAIT } join_step;

/* A node followed with get + watch (exists + watch while it does not exist). */
typedef struct {
    char *path;
    int need;          /* read it (again) */
    uint64_t op_id;    /* the read in flight */
    int op_exists;     /* ... is an exists (the node was missing) */
    uint64_t watch_id; /* the watch that makes it be read again */
    int loaded;        /* read at least once since joining */
    /* a chunked value (allocator_chunks.c): its header, and its chunks being read */
    char *chunks_path;        /* <path>-chunks */
    zkl_alloc_header header;  /* tree NULL: none being read */
    int header_version;
    uint64_t *chunk_ops;      /* per chunk: its read in flight, 0 once back */
    char **chunk_data;
    int *chunk_len;
    size_t chunk_pending;
} followed_node;

struct zkl_allocator {
    zkl_session *s;
    zkl_route route; /* the group's ops */
    uint64_t id;
    char *path, *members_path, *owners_path, *member_node;
    char *identifier;
    char *member_data;
    size_t member_data_len;
    char *seed;
    size_t seed_len;
    struct ACL_vector acl;
    int rejoin;

    zkl_allocator_phase phase;
    join_step jstep;
    int rc;
    int ensure_rounds;
    int joined;         /* our member node exists */
    int64_t my_czxid;
    int member_gone;    /* leaving: the member node is deleted */
    uint64_t join_op, join_watch, leave_op;

    /* what is known of the group */
    followed_node partitions, assignment_node;
    member_info *members;
    size_t member_count;
    int members_loaded, need_members;
    uint64_t members_op, members_watch;
    member_rec **listed;       /* the last listing's member nodes, sorted by name */
    size_t listed_n;
    size_t member_pending;     /* listed ones to read (NEED) or being read */
    member_rec *all_members;
    char **items;
    size_t item_count;
    zkl_json *assignment;      /* the node's whole JSON, or NULL */
    char *assignment_body;     /* its canonical key (members, then who owns what), made when
                                  a publish compares with it; NULL: not made yet */
    zkl_json *seen_assignment; /* the assignment the owner last heard of (moved items) */
    /* a follower parses only the parts it needs (the members, its own items): the whole text
     * is kept and parsed when something needs all of it (full_assignment) */
    char *assignment_text;     /* NULL: parsed (a->assignment), or none */
    size_t assignment_len;
    zkl_json *skim_members, *skim_mine;
    char *identifier_json;     /* the identifier as JSON writes it, quotes included */
    size_t identifier_json_len;
    int assignment_version;    /* -1: no node */
    int64_t generation;
    int leader;

    /* leading */
    uint64_t epoch, asked_epoch, answered_epoch;
    long settle_ms;            /* the members' settle window (0: none) */
    uint64_t settle_timer;     /* armed: the leader does not compute yet */
    long long settle_since;    /* when the window opened (zkl_monotonic_ms) */
    long long settle_last;     /* the last change the leader saw (0: none) */
    long long settle_gap;      /* the longest gap between two changes of this burst (ms) */
    char *publish_data;        /* a publish waiting for CONNECTED */
    size_t publish_len;
    int publish_version;       /* -1: create */
    uint64_t publish_op;
    int publish_rc;
    /* a chunked publish: publish_data is the whole (format 1) text, read back once it is in */
    char **publish_chunks;     /* the chunks' texts (NULL: a plain publish) */
    size_t publish_chunk_n, publish_chunk_pending;
    uint64_t *publish_chunk_ops; /* their creates (NULL: not sent yet) */
    char *publish_header;
    size_t publish_header_len;
    char publish_tag[ZKL_TAG_MAX];
    int assignment_chunked;    /* the assignment read or written last was chunked */
    uint64_t gc_op;            /* listing the assignment's chunks to delete stale ones */
    char gc_tag[ZKL_TAG_MAX];
    int fatal_rc;              /* a value this member cannot read: it leaves, rc says why */

    /* items */
    item_rec **buckets;
    size_t bucket_count, rec_count;
    size_t releasing;          /* records asked to release, released or deleting */
    size_t busy_count;         /* records a leave must wait for */
    size_t done_count;         /* records held and reported as the assignment wants */
    item_rec *dirty_head, *dirty_tail; /* records to look at, in the order they changed
                                          (allocator_claims.c) */
    item_rec *park_head, *park_tail; /* records whose op waits for the claim window, in order */
    long claim_ops;            /* item ops (creates, reads, deletes) not yet answered */
    item_rec **wanted;         /* the records the current target wants */
    size_t wanted_n;
    uint64_t target_stamp;
    int target_dirty;          /* the assignment changed: set the target again */
    int claims_open;           /* at the last reconcile claims could start (all were offered) */
    int was_connected;
    uint64_t view;             /* moves with every change of members, set or assignment */
    uint64_t checked_view;     /* ... when the assignment was last checked against them */
    int checked_ok;
    item_rec **acquired_q;     /* reported at the next take */
    size_t acquired_n, acquired_cap;
    char **release_q, **lost_q;
    size_t release_n, release_cap, lost_n, lost_cap;

    int notify_pending;
    long inflight;
    int orphaned, listening;
};

typedef struct zkl_allocator zkl_allocator;

/* allocator.c */
void zkl_alloc_kick(zkl_allocator *a);
void zkl_alloc_update(zkl_allocator *a);
int zkl_alloc_connected(const zkl_allocator *a);
void zkl_alloc_notify(zkl_allocator *a);
/* After an item's event: ends a finished leave, tells the owner, frees an orphan (a may be
 * gone when it returns). */
void zkl_alloc_after_item_event(zkl_allocator *a);
int zkl_alloc_push_string(char ***q, size_t *n, size_t *cap, const char *s);

/* allocator_formats.c */
/* The set's data: its strings, sorted, without repeats (not an array: none).  0, or -1 when
 * out of memory. */
int zkl_alloc_read_items(const char *data, int len, char ***out, size_t *count);
/* Appends the canonical text of an assignment object (member -> array of items): 0, or -1
 * when it is not one (or out of memory). */
int zkl_alloc_canonical_assignment(const zkl_json *obj, zkl_json_buf *out);
/* Appends the canonical members array, then the canonical assignment: what two assignments
 * are compared by.  0, or -1 when either is not of its shape. */
int zkl_alloc_assignment_key(const zkl_json *members, const zkl_json *assignment,
                             zkl_json_buf *out);

/* What a node's data is: NONE (a format-1 value), YES (a header, h filled), NEWER (a header of
 * format h->format, unknown here) or BAD (a header that cannot be read). */
int zkl_alloc_chunk_header(const char *data, int len, zkl_alloc_header *h);
char *zkl_alloc_chunk_path(const char *chunks_path, const char *tag, size_t i);
/* A new tag for a writer replacing header version replaced_version (-1: creating it): 0, or -1
 * (no randomness). */
int zkl_alloc_new_tag(char tag[ZKL_TAG_MAX], int replaced_version);
/* Whether the chunk node name may be deleted by the writer that committed tag. */
int zkl_alloc_chunk_stale(const char *name, const char *tag);
/* items cut into JSON arrays of at most limit bytes each (malloc'd texts): 0, or -1 (an item
 * alone over the limit, or out of memory). */
int zkl_alloc_cut_array(const char *const *items, size_t count, size_t limit, char ***out,
                        size_t *n);
/* A canonical assignment object cut into JSON objects of at most limit bytes each. */
int zkl_alloc_cut_assignment(const zkl_json *obj, size_t limit, char ***out, size_t *n);
/* The set's format-1 text from its chunks, in order: 0, or -1 (a chunk not an array). */
int zkl_alloc_join_set(char *const *chunks, const int *lens, size_t n, zkl_json_buf *out);
/* The assignment's format-1 text from its header and chunks: 0, or -1. */
int zkl_alloc_join_assignment(const zkl_json *header, char *const *chunks, const int *lens,
                              size_t n, zkl_json_buf *out);

/* Scanning JSON text without parsing it (the skim, the chunks' join): just after the
 * whitespace at p; p at '"': just after the closing quote, or NULL; just after the value at p
 * (strings and brackets followed, nothing else checked; iterative, the depth a counter), or
 * NULL. */
const char *zkl_alloc_skip_ws(const char *p, const char *end);
const char *zkl_alloc_skip_string(const char *p, const char *end);
const char *zkl_alloc_skip_value(const char *p, const char *end);
/* p at a member's key: just after its ':' and the whitespace, key and key_len the key's text
 * (quotes included), or NULL. */
const char *zkl_alloc_skip_key(const char *p, const char *end, const char **key,
                               size_t *key_len);

/* Where the parts a follower needs are in an assignment's text (nothing allocated, nothing
 * but strings and brackets checked: the parts are parsed and checked by the caller). */
typedef struct {
    const char *generation, *members, *assignment, *mine; /* NULL: not there */
    size_t generation_len, members_len, mine_len;
} zkl_alloc_skim;
/* key: this member's identifier as JSON writes it (with its quotes).  0, or -1 when the text
 * is not an object holding "members" and an "assignment" object. */
int zkl_alloc_skim_assignment(const char *text, size_t len, const char *key, size_t key_len,
                              zkl_alloc_skim *out);
/* Whether they have the shapes zkl_alloc_assignment_key() accepts (nothing sorted). */
int zkl_alloc_assignment_valid(const zkl_json *members, const zkl_json *assignment);

/* allocator_claims.c */
item_rec *zkl_claims_find(zkl_allocator *a, const char *item);
/* Marks the items the assignment gives us (all others unwanted): 0, or -1 when out of memory
 * (nothing changed). */
int zkl_claims_set_target(zkl_allocator *a, const zkl_json *items);
void zkl_claims_clear_target(zkl_allocator *a);
/* Sends what the items need (creates only when claims may start) and queues news. */
void zkl_claims_reconcile(zkl_allocator *a);
/* How many items are being given up (asked, deleting): new claims wait for none. */
size_t zkl_claims_releasing(const zkl_allocator *a);
/* Whether any item still needs us before a leave can end. */
int zkl_claims_busy(const zkl_allocator *a);
/* Every wanted item is held and reported, nothing else is held, no news waits. */
int zkl_claims_settled(const zkl_allocator *a);
/* Nobody will run release hooks any more (the allocator is freed): give everything up. */
void zkl_claims_abandon(zkl_allocator *a);
/* The session expired or closed: queue every reported item as lost, forget the rest. */
void zkl_claims_lose_all(zkl_allocator *a);
/* The session was freed: drop every record at once. */
void zkl_claims_free_all(zkl_allocator *a);
int zkl_claims_released(zkl_allocator *a, const char *item);
/* Hands the queued grants over (0), or -1 when out of memory. */
int zkl_claims_take_acquired(zkl_allocator *a, zkl_allocator_grant **out, size_t *n);

#endif
