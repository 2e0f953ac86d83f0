/*
 * tree_cache.c — see tree_cache.h.
 *
 * The cache is a tree of nodes, each also in a table by its full path.  A node is PENDING
 * until its data was read, LIVE after, and only the root can be DEAD (missing: an exists
 * watch waits for it).  Every read is a routed op carrying a small request record (its kind
 * and path); results and watches are applied by path to whatever node is cached there.
 * That is safe because one session's replies and watch events come in the server's order:
 * each result is a snapshot newer than everything applied before it, and a node's identity
 * is checked with its czxid.
 *
 * Watches: a node holds the ids of its live data watch (from a get) and child watch (from a
 * get_children); a read asks for a watch only when the node has none, so re-reads after a
 * reconnection never stack a second watch on a node.  An id is cleared when its watch fires
 * or is dropped (ZOO_NOTWATCHING_EVENT: the read failed, or the handle was closed).
 *
 * Reads wait in a queue of nodes (each node once, with the kinds of read it wants) and go out
 * while fewer than READ_WINDOW are in flight, in the order they were wanted.
 *
 * Counting: `outstanding` is the reads in flight (INITIALIZED needs 0), `inflight` the route
 * calls still owed (reads and watches): a freed cache lingers as a shell until it is 0.
 * `stale` says a read failed on the connection and the tree waits for its re-read on
 * CONNECTED.
 */
#include "tree_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ops.h"
#include "common.h"

enum { NODE_PENDING = 0, NODE_LIVE, NODE_DEAD };
enum { WANT_DATA = 1, WANT_CHILDREN = 2, WANT_EXISTS = 4 };

/* Reads in flight at most: enough to keep the pipe full, and a big tree's load does not hold
 * tens of thousands of requests (and their buffers) in memory at once. */
enum { READ_WINDOW = 1000 };

typedef enum { REQ_GET, REQ_CHILDREN, REQ_EXISTS } req_kind;

struct zkl_tree_node {
    char *path;                  /* full path */
    const char *name;            /* the last component, inside path */
    uint64_t hash;
    zkl_tree_node *next_in_bucket;
    zkl_tree_node *parent;       /* NULL for the root */
    zkl_tree_node **children;
    int child_count, child_capacity;
    int index;                   /* in parent->children */
    int state;
    unsigned mark;               /* listed by the parent's latest listing */
    char *data;
    int data_len;                /* -1: ZooKeeper's null value */
    struct Stat stat;            /* valid once LIVE */
    uint64_t data_watch, child_watch; /* ids of the live watches, 0: none */
    int want;                    /* WANT_* reads waiting to be sent; 0: not queued */
    zkl_tree_node *queue_prev, *queue_next;
};

/* What a routed read was about: the ctx of its route, freed once its completion and its
 * watch (when one was asked for) both came back. */
typedef struct tc_req {
    zkl_tree_cache *tc;
    req_kind kind;
    int refs;
    char path[];
} tc_req;

struct zkl_tree_cache {
    zkl_session *s;              /* NULL once the session is freed */
    uint64_t id;
    zkl_tree_cache_phase phase;
    int orphaned;                /* the owner let go */
    int listening;               /* registered as a state listener */

    zkl_tree_node *root;         /* NULL once closed */
    zkl_tree_node **buckets;     /* the path table; a power of two of them */
    size_t bucket_count, node_count, live_count;
    unsigned mark;
    char *scratch;               /* a child's path is built here */
    size_t scratch_size;

    zkl_tree_node *queue_head, *queue_tail; /* nodes with reads waiting, oldest first */
    uint64_t root_watch;         /* the exists watch on the root, 0: none */
    long outstanding, inflight;
    int stale;
    int away;                    /* SUSPENDED or LOST was reported since the last CONNECTED */
    int initialized;

    zkl_tree_event *events_head, *events_tail;
    int notified;                /* a notify is queued and the events not drained since */
};

/* ---------------------------------------------------------------- the path table */

static uint64_t hash_path(const char *p)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ull;
    }
    return h;
}

static zkl_tree_node *table_find(const zkl_tree_cache *tc, const char *path)
{
    if (tc->bucket_count == 0)
        return NULL;
    uint64_t h = hash_path(path);
    for (zkl_tree_node *n = tc->buckets[h & (tc->bucket_count - 1)]; n; n = n->next_in_bucket) {
        if (n->hash == h && strcmp(n->path, path) == 0)
            return n;
    }
    return NULL;
}

static int table_grow(zkl_tree_cache *tc)
{
    size_t count = tc->bucket_count ? tc->bucket_count * 2 : 64;
    zkl_tree_node **buckets = calloc(count, sizeof *buckets);
    if (!buckets)
        return -1;
    for (size_t i = 0; i < tc->bucket_count; i++) {
        zkl_tree_node *n = tc->buckets[i];
        while (n) {
            zkl_tree_node *next = n->next_in_bucket;
            size_t j = n->hash & (count - 1);
            n->next_in_bucket = buckets[j];
            buckets[j] = n;
            n = next;
        }
    }
    free(tc->buckets);
    tc->buckets = buckets;
    tc->bucket_count = count;
    return 0;
}

static int table_add(zkl_tree_cache *tc, zkl_tree_node *n)
{
    /* a failed grow only makes the chains longer, unless there is no table at all */
    if (tc->node_count >= tc->bucket_count && table_grow(tc) != 0 && tc->bucket_count == 0)
        return -1;
    size_t j = n->hash & (tc->bucket_count - 1);
    n->next_in_bucket = tc->buckets[j];
    tc->buckets[j] = n;
    tc->node_count++;
    return 0;
}

static void table_remove(zkl_tree_cache *tc, zkl_tree_node *n)
{
    zkl_tree_node **p = &tc->buckets[n->hash & (tc->bucket_count - 1)];
    while (*p != n)
        p = &(*p)->next_in_bucket;
    *p = n->next_in_bucket;
    tc->node_count--;
}

/* ---------------------------------------------------------------- nodes */

static int child_append(zkl_tree_node *parent, zkl_tree_node *n)
{
    if (parent->child_count == parent->child_capacity) {
        int capacity = parent->child_capacity ? parent->child_capacity * 2 : 4;
        zkl_tree_node **children = realloc(parent->children, sizeof *children * (size_t)capacity);
        if (!children)
            return -1;
        parent->children = children;
        parent->child_capacity = capacity;
    }
    n->index = parent->child_count;
    parent->children[parent->child_count++] = n;
    return 0;
}

/* Takes n out of its parent's children (the last child moves into its place). */
static void child_unlink(zkl_tree_node *n)
{
    zkl_tree_node *p = n->parent;
    zkl_tree_node *last = p->children[--p->child_count];
    if (last != n) {
        p->children[n->index] = last;
        last->index = n->index;
    }
}

static void node_destroy(zkl_tree_node *n)
{
    free(n->path);
    free(n->data);
    free(n->children);
    free(n);
}

/* A PENDING node at path under parent (NULL: the root), in the table; NULL when out of
 * memory. */
static zkl_tree_node *node_new(zkl_tree_cache *tc, zkl_tree_node *parent, const char *path)
{
    zkl_tree_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->path = strdup(path);
    if (!n->path) {
        free(n);
        return NULL;
    }
    const char *slash = strrchr(n->path, '/');
    n->name = parent && slash ? slash + 1 : n->path;
    n->hash = hash_path(path);
    n->parent = parent;
    if (parent && child_append(parent, n) != 0) {
        node_destroy(n);
        return NULL;
    }
    if (table_add(tc, n) != 0) {
        if (parent)
            child_unlink(n);
        node_destroy(n);
        return NULL;
    }
    return n;
}

/* The node after n in a pre-order walk of top's subtree, or NULL. */
static zkl_tree_node *next_preorder(const zkl_tree_node *top, zkl_tree_node *n)
{
    if (n->child_count > 0)
        return n->children[0];
    while (n != top) {
        zkl_tree_node *p = n->parent;
        if (n->index + 1 < p->child_count)
            return p->children[n->index + 1];
        n = p;
    }
    return NULL;
}

/* parent's path + "/" + name, in the cache's scratch buffer; NULL when out of memory. */
static const char *child_path(zkl_tree_cache *tc, const zkl_tree_node *parent, const char *name)
{
    size_t plen = strlen(parent->path), nlen = strlen(name);
    if (plen == 1)
        plen = 0; /* "/" */
    size_t need = plen + nlen + 2;
    if (need > tc->scratch_size) {
        char *buf = realloc(tc->scratch, need * 2);
        if (!buf)
            return NULL;
        tc->scratch = buf;
        tc->scratch_size = need * 2;
    }
    memcpy(tc->scratch, parent->path, plen);
    tc->scratch[plen] = '/';
    memcpy(tc->scratch + plen + 1, name, nlen + 1);
    return tc->scratch;
}

/* Frees every node without a word (close). */
static void free_tree(zkl_tree_cache *tc)
{
    for (size_t i = 0; i < tc->bucket_count; i++) {
        zkl_tree_node *n = tc->buckets[i];
        while (n) {
            zkl_tree_node *next = n->next_in_bucket;
            node_destroy(n);
            n = next;
        }
    }
    free(tc->buckets);
    tc->buckets = NULL;
    tc->bucket_count = tc->node_count = tc->live_count = 0;
    tc->root = NULL;
    tc->queue_head = tc->queue_tail = NULL;
}

/* ---------------------------------------------------------------- events */

/* Wakes the owner once per batch: the next notify goes out after it drained the queue. */
static void tell_owner(zkl_tree_cache *tc)
{
    if (!tc->notified && tc->s && zkl_session_notify(tc->s, tc->id, ZKL_TREE_CACHE_NOTIFY_EVENTS) == 0)
        tc->notified = 1;
}

/* Queues an event holding copies of path and data, in one allocation.  Out of memory, the
 * event is lost (nothing else can be done without memory). */
static void emit(zkl_tree_cache *tc, zkl_tree_event_type type, const char *path,
                 const char *data, int data_len, const struct Stat *stat, int rc)
{
    if (tc->phase != ZKL_TREE_STARTED)
        return;
    size_t plen = path ? strlen(path) + 1 : 0;
    size_t dlen = data_len > 0 ? (size_t)data_len : 0;
    zkl_tree_event *ev = malloc(sizeof *ev + plen + dlen + 1);
    if (!ev)
        return;
    memset(ev, 0, sizeof *ev);
    ev->type = type;
    ev->rc = rc;
    char *tail = (char *)(ev + 1);
    if (path) {
        ev->path = tail;
        memcpy(ev->path, path, plen);
        tail += plen;
    }
    ev->data = tail;
    if (dlen > 0)
        memcpy(ev->data, data, dlen);
    ev->data[dlen] = '\0';
    ev->data_len = data_len < 0 ? -1 : (int)dlen;
    if (stat)
        ev->stat = *stat;
    if (tc->events_tail)
        tc->events_tail->next = ev;
    else
        tc->events_head = ev;
    tc->events_tail = ev;
    tell_owner(tc);
}

static void emit_node(zkl_tree_cache *tc, zkl_tree_event_type type, const zkl_tree_node *n)
{
    emit(tc, type, n->path, n->data, n->data_len, &n->stat, ZOK);
}

static void emit_plain(zkl_tree_cache *tc, zkl_tree_event_type type)
{
    emit(tc, type, NULL, NULL, 0, NULL, ZOK);
}

static void emit_fault(zkl_tree_cache *tc, const char *path, int rc)
{
    emit(tc, ZKL_TREE_FAULT, path, NULL, 0, NULL, rc);
}

static void drop_events(zkl_tree_cache *tc)
{
    zkl_tree_event *ev = tc->events_head;
    while (ev) {
        zkl_tree_event *next = ev->next;
        free(ev);
        ev = next;
    }
    tc->events_head = tc->events_tail = NULL;
}

/* ---------------------------------------------------------------- reading */

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx);

/* Submits a routed read of path; returns its id, 0 when out of memory (reported). */
static uint64_t submit(zkl_tree_cache *tc, req_kind kind, const char *path, int watch)
{
    size_t len = strlen(path);
    tc_req *req = malloc(sizeof *req + len + 1);
    uint64_t id = 0;
    if (req) {
        req->tc = tc;
        req->kind = kind;
        req->refs = watch ? 2 : 1;
        memcpy(req->path, path, len + 1);
        zkl_route route = {on_route, req};
        if (kind == REQ_GET)
            id = zkl_op_get(tc->s, path, watch, &route);
        else if (kind == REQ_CHILDREN)
            id = zkl_op_children(tc->s, path, watch, &route);
        else
            id = zkl_op_exists(tc->s, path, watch, &route);
    }
    if (id == 0) {
        free(req);
        emit_fault(tc, path, ZSYSTEMERROR);
        return 0;
    }
    tc->outstanding++;
    tc->inflight += req->refs;
    return id;
}

/* Sends one of n's wanted reads, data before children; a watch is asked for only when the
 * node holds none of that kind (decided now, not when the read was wanted). */
static void send_one(zkl_tree_cache *tc, zkl_tree_node *n)
{
    uint64_t *watch_id;
    req_kind kind;
    if (n->want & WANT_DATA) {
        n->want &= ~WANT_DATA;
        kind = REQ_GET;
        watch_id = &n->data_watch;
    } else if (n->want & WANT_CHILDREN) {
        n->want &= ~WANT_CHILDREN;
        kind = REQ_CHILDREN;
        watch_id = &n->child_watch;
    } else {
        n->want &= ~WANT_EXISTS;
        kind = REQ_EXISTS;
        watch_id = &tc->root_watch;
    }
    int watch = *watch_id == 0;
    uint64_t id = submit(tc, kind, n->path, watch);
    if (watch)
        *watch_id = id;
}

static void unqueue(zkl_tree_cache *tc, zkl_tree_node *n)
{
    if (n->queue_prev)
        n->queue_prev->queue_next = n->queue_next;
    else
        tc->queue_head = n->queue_next;
    if (n->queue_next)
        n->queue_next->queue_prev = n->queue_prev;
    else
        tc->queue_tail = n->queue_prev;
    n->queue_prev = n->queue_next = NULL;
    n->want = 0;
}

static void clear_queue(zkl_tree_cache *tc)
{
    while (tc->queue_head)
        unqueue(tc, tc->queue_head);
}

/* Sends wanted reads, oldest first, while fewer than READ_WINDOW are in flight.  Only while
 * CONNECTED: otherwise they would fail, and the re-read on CONNECTED covers them. */
static void pump(zkl_tree_cache *tc)
{
    while (tc->queue_head && tc->outstanding < READ_WINDOW &&
           zkl_session_state(tc->s) == ZKL_CONNECTED) {
        zkl_tree_node *n = tc->queue_head;
        send_one(tc, n);
        if (n->want == 0)
            unqueue(tc, n);
    }
}

/* Asks for reads of n (WANT_* bits): a node waits in the queue once, whatever asked. */
static void request(zkl_tree_cache *tc, zkl_tree_node *n, int want)
{
    if (n->want == 0) {
        n->queue_prev = tc->queue_tail;
        if (tc->queue_tail)
            tc->queue_tail->queue_next = n;
        else
            tc->queue_head = n;
        tc->queue_tail = n;
    }
    n->want |= want;
    pump(tc);
}

static void read_data(zkl_tree_cache *tc, zkl_tree_node *n)
{
    request(tc, n, WANT_DATA);
}

static void read_children(zkl_tree_cache *tc, zkl_tree_node *n)
{
    request(tc, n, WANT_CHILDREN);
}

/* Data first: a node's get is answered before its listing, so a parent is added before its
 * children. */
static void read_node(zkl_tree_cache *tc, zkl_tree_node *n)
{
    request(tc, n, WANT_DATA | WANT_CHILDREN);
}

/* The root is missing: an exists watch tells when it appears. */
static void look_for_root(zkl_tree_cache *tc)
{
    request(tc, tc->root, WANT_EXISTS);
}

/* Reads every node again (after a reconnection), parents before their children. */
static void read_all(zkl_tree_cache *tc)
{
    zkl_tree_node *root = tc->root;
    if (root->state == NODE_DEAD) {
        look_for_root(tc);
        return;
    }
    for (zkl_tree_node *n = root; n; n = next_preorder(root, n))
        read_node(tc, n);
}

/* ---------------------------------------------------------------- removing */

/* Removes a node without children: out of its parent and the table, reported, freed. */
static void remove_leaf(zkl_tree_cache *tc, zkl_tree_node *n)
{
    if (n->want)
        unqueue(tc, n);
    child_unlink(n);
    table_remove(tc, n);
    if (n->state == NODE_LIVE) {
        tc->live_count--;
        emit_node(tc, ZKL_TREE_NODE_REMOVED, n);
    }
    node_destroy(n);
}

/* Removes top (not the root) and its subtree, children before their parents; iterative, so
 * a deep tree cannot exhaust the stack. */
static void remove_subtree(zkl_tree_cache *tc, zkl_tree_node *top)
{
    zkl_tree_node *n = top;
    for (;;) {
        while (n->child_count > 0)
            n = n->children[n->child_count - 1];
        zkl_tree_node *parent = n->parent;
        int done = n == top;
        remove_leaf(tc, n);
        if (done)
            return;
        n = parent;
    }
}

static void remove_children(zkl_tree_cache *tc, zkl_tree_node *n)
{
    while (n->child_count > 0)
        remove_subtree(tc, n->children[n->child_count - 1]);
}

/* n no longer exists on the server.  The root stays (DEAD) and is watched for. */
static void node_gone(zkl_tree_cache *tc, zkl_tree_node *n)
{
    if (n != tc->root) {
        remove_subtree(tc, n);
        return;
    }
    if (n->state == NODE_DEAD)
        return;
    remove_children(tc, n);
    if (n->state == NODE_LIVE) {
        tc->live_count--;
        emit_node(tc, ZKL_TREE_NODE_REMOVED, n);
    }
    n->state = NODE_DEAD;
    free(n->data);
    n->data = NULL;
    n->data_len = 0;
    look_for_root(tc);
}

/* ---------------------------------------------------------------- results */

static int keep_data(zkl_tree_node *n, const zkl_event *ev)
{
    int len = ev->data_len > 0 ? ev->data_len : 0;
    char *copy = malloc(len > 0 ? (size_t)len : 1);
    if (!copy)
        return -1;
    if (len > 0)
        memcpy(copy, ev->data, (size_t)len);
    free(n->data);
    n->data = copy;
    n->data_len = ev->data_null ? -1 : len;
    n->stat = ev->stat;
    return 0;
}

static void data_read(zkl_tree_cache *tc, zkl_tree_node *n, const zkl_event *ev)
{
    if (n->state == NODE_LIVE && n->stat.czxid != ev->stat.czxid) {
        /* deleted and created again while unwatched: another node, with other children */
        remove_children(tc, n);
        tc->live_count--;
        emit_node(tc, ZKL_TREE_NODE_REMOVED, n);
        n->state = NODE_PENDING;
        read_children(tc, n);
    }
    int was_live = n->state == NODE_LIVE;
    if (was_live && n->stat.mzxid == ev->stat.mzxid) {
        n->stat = ev->stat; /* same data; the child counts may have moved */
        return;
    }
    if (keep_data(n, ev) != 0) {
        emit_fault(tc, n->path, ZSYSTEMERROR);
        return;
    }
    if (!was_live) {
        n->state = NODE_LIVE;
        tc->live_count++;
    }
    emit_node(tc, was_live ? ZKL_TREE_NODE_UPDATED : ZKL_TREE_NODE_ADDED, n);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Adds the listed children the cache lacks (read at once, in name order) and removes the
 * cached ones that are no longer listed. */
static void children_read(zkl_tree_cache *tc, zkl_tree_node *n, const zkl_event *ev)
{
    if (n->state == NODE_DEAD) { /* the root is back: read its data first */
        read_node(tc, n);
        return;
    }
    if (n->state == NODE_LIVE && ev->has_stat) {
        if (ev->stat.czxid != n->stat.czxid) { /* a new node by that name: its get sorts it */
            read_data(tc, n);
            return;
        }
        if (ev->stat.mzxid == n->stat.mzxid)
            n->stat = ev->stat;
    }
    const char **names = malloc(sizeof *names * (size_t)(ev->string_count > 0 ? ev->string_count : 1));
    if (!names) {
        emit_fault(tc, n->path, ZSYSTEMERROR);
        return;
    }
    for (int i = 0; i < ev->string_count; i++)
        names[i] = ev->strings[i];
    qsort(names, (size_t)ev->string_count, sizeof *names, name_cmp);
    unsigned mark = ++tc->mark;
    for (int i = 0; i < ev->string_count; i++) {
        const char *path = child_path(tc, n, names[i]);
        zkl_tree_node *c = path ? table_find(tc, path) : NULL;
        if (!c && path && (c = node_new(tc, n, path)) != NULL)
            read_node(tc, c);
        if (c)
            c->mark = mark;
        else
            emit_fault(tc, n->path, ZSYSTEMERROR);
    }
    free(names);
    /* from the end: a removal moves the last child (already seen, kept) into its place */
    for (int i = n->child_count - 1; i >= 0; i--) {
        if (n->children[i]->mark != mark)
            remove_subtree(tc, n->children[i]);
    }
}

static int connection_failure(int rc)
{
    return zkl_rc_triage(rc) != ZKL_RC_ANSWER || rc == ZSESSIONMOVED;
}

/* A read failed on the connection: the re-read on CONNECTED repeats it, or, when CONNECTED
 * came already (the failure is from the connection before), it is repeated now. */
static void read_again(zkl_tree_cache *tc, const tc_req *req)
{
    if (zkl_session_state(tc->s) != ZKL_CONNECTED) {
        tc->stale = 1;
        return;
    }
    zkl_tree_node *n = table_find(tc, req->path);
    if (!n)
        return;
    if (n->state == NODE_DEAD)
        look_for_root(tc);
    else if (req->kind == REQ_GET)
        read_data(tc, n);
    else if (req->kind == REQ_CHILDREN)
        read_children(tc, n);
    else
        read_node(tc, n);
}

static void result_in(zkl_tree_cache *tc, const tc_req *req, const zkl_event *ev)
{
    if (connection_failure(ev->rc)) {
        read_again(tc, req);
        return;
    }
    zkl_tree_node *n = table_find(tc, req->path);
    if (!n)
        return; /* removed meanwhile */
    if (ev->rc != ZOK && ev->rc != ZNONODE) {
        emit_fault(tc, req->path, ev->rc);
        return;
    }
    switch (req->kind) {
    case REQ_GET:
        if (ev->rc == ZNONODE)
            node_gone(tc, n);
        else
            data_read(tc, n, ev);
        break;
    case REQ_CHILDREN:
        if (ev->rc == ZNONODE)
            node_gone(tc, n);
        else
            children_read(tc, n, ev);
        break;
    case REQ_EXISTS:
        if (ev->rc == ZOK && n->state != NODE_LIVE)
            read_node(tc, n); /* the root is there (again) */
        break;
    }
}

/* A watch of req's kind came back with id: the node (or the root) no longer holds it. */
static void forget_watch(zkl_tree_cache *tc, const tc_req *req, zkl_tree_node *n, uint64_t id)
{
    if (req->kind == REQ_EXISTS) {
        if (tc->root_watch == id)
            tc->root_watch = 0;
    } else if (n && req->kind == REQ_GET) {
        if (n->data_watch == id)
            n->data_watch = 0;
    } else if (n && n->child_watch == id) {
        n->child_watch = 0;
    }
}

static void watch_fired(zkl_tree_cache *tc, const tc_req *req, const zkl_event *ev)
{
    zkl_tree_node *n = table_find(tc, req->path);
    forget_watch(tc, req, n, ev->id);
    if (!n)
        return;
    /* the library's event types are variables, not constants: no switch */
    if (ev->type == ZOO_CREATED_EVENT) { /* the root's exists watch */
        if (n->state != NODE_LIVE)
            read_node(tc, n);
    } else if (ev->type == ZOO_DELETED_EVENT) {
        node_gone(tc, n);
    } else if (ev->type == ZOO_CHANGED_EVENT) {
        if (n->state != NODE_DEAD)
            read_data(tc, n);
    } else if (ev->type == ZOO_CHILD_EVENT) {
        if (n->state != NODE_DEAD)
            read_children(tc, n);
    }
    /* ZOO_NOTWATCHING_EVENT: the read's failure, or the re-read on CONNECTED, takes over */
}

/* ---------------------------------------------------------------- driving */

static int active(const zkl_tree_cache *tc)
{
    return tc->phase == ZKL_TREE_STARTED && tc->s != NULL;
}

static void maybe_initialized(zkl_tree_cache *tc)
{
    if (tc->initialized || !active(tc) || tc->outstanding > 0 || tc->queue_head || tc->stale ||
        zkl_session_state(tc->s) != ZKL_CONNECTED)
        return;
    tc->initialized = 1;
    emit_plain(tc, ZKL_TREE_INITIALIZED);
}

static void on_state(zkl_session *s, zkl_state state, void *ctx)
{
    (void)s;
    zkl_tree_cache *tc = ctx;
    if (!active(tc))
        return;
    if (state == ZKL_CONNECTED) {
        if (tc->away)
            emit_plain(tc, ZKL_TREE_CONNECTION_RECONNECTED);
        tc->away = 0;
        tc->stale = 0;
        clear_queue(tc); /* everything is read again anyway */
        read_all(tc); /* whatever changed meanwhile shows as differences */
    } else {
        tc->away = 1;
        tc->stale = 1;
        emit_plain(tc, state == ZKL_SUSPENDED ? ZKL_TREE_CONNECTION_SUSPENDED
                                              : ZKL_TREE_CONNECTION_LOST);
    }
    maybe_initialized(tc);
}

static void stop_listening(zkl_tree_cache *tc)
{
    if (tc->listening && tc->s)
        zkl_session_remove_state_listener(tc->s, on_state, tc);
    tc->listening = 0;
}

static void destroy(zkl_tree_cache *tc)
{
    stop_listening(tc);
    drop_events(tc);
    free_tree(tc);
    free(tc->scratch);
    free(tc);
}

/* A shell lets go once no route call is owed (or the session that owed them is gone). */
static void maybe_destroy(zkl_tree_cache *tc)
{
    if (tc->orphaned && (tc->inflight == 0 || !tc->s))
        destroy(tc);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    tc_req *req = ctx;
    zkl_tree_cache *tc = req->tc;
    tc->inflight--;
    if (ev->kind == ZKL_EV_OP) {
        tc->outstanding--;
        if (req->refs == 2 && !ev->watch_requested) { /* the watch was not taken: no call */
            req->refs--;
            tc->inflight--;
            forget_watch(tc, req, table_find(tc, req->path), ev->id);
        }
        if (active(tc))
            result_in(tc, req, ev);
    } else if (active(tc)) {
        watch_fired(tc, req, ev);
    }
    if (--req->refs == 0)
        free(req);
    if (active(tc))
        pump(tc);
    maybe_initialized(tc);
    maybe_destroy(tc);
}

/* ---------------------------------------------------------------- public */

zkl_tree_cache *zkl_tree_cache_new(zkl_session *s, const char *path)
{
    zkl_tree_cache *tc = calloc(1, sizeof *tc);
    if (!tc)
        return NULL;
    tc->s = s;
    tc->id = zkl_session_new_target(s);
    tc->root = node_new(tc, NULL, path);
    if (!tc->root) {
        destroy(tc);
        errno = ENOMEM;
        return NULL;
    }
    return tc;
}

int zkl_tree_cache_start(zkl_tree_cache *tc)
{
    if (tc->phase != ZKL_TREE_LATENT) {
        errno = tc->phase == ZKL_TREE_STARTED ? EALREADY : ESHUTDOWN;
        return -1;
    }
    if (!tc->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (zkl_session_add_state_listener(tc->s, on_state, tc) != 0) {
        errno = ENOMEM;
        return -1;
    }
    tc->listening = 1;
    tc->phase = ZKL_TREE_STARTED;
    if (zkl_session_state(tc->s) == ZKL_CONNECTED)
        read_all(tc);
    else
        tc->stale = 1; /* loads once CONNECTED */
    return 0;
}

void zkl_tree_cache_close(zkl_tree_cache *tc)
{
    if (tc->phase == ZKL_TREE_CLOSED)
        return;
    tc->phase = ZKL_TREE_CLOSED;
    stop_listening(tc);
    drop_events(tc);
    free_tree(tc);
}

void zkl_tree_cache_free(zkl_tree_cache *tc)
{
    if (!tc)
        return;
    zkl_tree_cache_close(tc);
    tc->orphaned = 1;
    maybe_destroy(tc);
}

void zkl_tree_cache_forget_session(zkl_tree_cache *tc)
{
    tc->s = NULL;
    tc->listening = 0; /* the session's listeners went with it */
    tc->outstanding = tc->inflight = 0;
    tc->root_watch = 0;
}

zkl_tree_event *zkl_tree_cache_next_event(zkl_tree_cache *tc)
{
    zkl_tree_event *ev = tc->events_head;
    if (!ev) {
        tc->notified = 0;
        return NULL;
    }
    tc->events_head = ev->next;
    if (!tc->events_head)
        tc->events_tail = NULL;
    ev->next = NULL;
    return ev;
}

void zkl_tree_event_free(zkl_tree_event *ev)
{
    free(ev);
}

const zkl_tree_node *zkl_tree_cache_find(const zkl_tree_cache *tc, const char *path)
{
    const zkl_tree_node *n = table_find(tc, path);
    return n && n->state == NODE_LIVE ? n : NULL;
}

const char *zkl_tree_node_data(const zkl_tree_node *n, int *len)
{
    *len = n->data_len;
    return n->data ? n->data : "";
}

const struct Stat *zkl_tree_node_stat(const zkl_tree_node *n)
{
    return &n->stat;
}

int zkl_tree_node_child_count(const zkl_tree_node *n)
{
    return n->child_count;
}

int zkl_tree_node_live_children(const zkl_tree_node *n, const char **names)
{
    int count = 0;
    for (int i = 0; i < n->child_count; i++) {
        if (n->children[i]->state == NODE_LIVE)
            names[count++] = n->children[i]->name;
    }
    return count;
}

zkl_tree_cache_phase zkl_tree_cache_phase_of(const zkl_tree_cache *tc)
{
    return tc->phase;
}

int zkl_tree_cache_initialized(const zkl_tree_cache *tc)
{
    return tc->initialized;
}

size_t zkl_tree_cache_size(const zkl_tree_cache *tc)
{
    return tc->live_count;
}

uint64_t zkl_tree_cache_id(const zkl_tree_cache *tc)
{
    return tc->id;
}

long zkl_tree_cache_inflight(const zkl_tree_cache *tc)
{
    return tc->inflight;
}
