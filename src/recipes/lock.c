/*
 * lock.c — see lock.h.  The lock is a small state machine: a phase (idle, acquiring, held,
 * releasing, abandoning) and, while busy, a step (create, find, stat, check, watch, wait,
 * delete).  Each step submits one routed op; its result picks the next step.
 *
 * Only the result of the op (and the watch) the lock is waiting for counts: op_id and
 * watch_id name them, and whatever else comes back (ops from before an expiry, a watch left
 * behind by a timeout) is stale and only counted.  A step that failed on the connection runs
 * again when the session is CONNECTED ("parked" until the state listener hears it).
 * On LOST (expiry) everything in flight is stale: the step to restart from is chosen from
 * what is known (own node, create_tried) and runs on the new session.
 */
#include "lock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/acl.h"
#include "../core/ops.h"
#include "common.h"

enum { SEQ_DIGITS = 10 };

static const char EXCLUSIVE_MARK[] = "__lock__";
static const char SHARED_MARK[] = "__rlock__";
/* Curator: LockInternals' lock names (after the protection prefix, common.h) */
static const char CURATOR_MUTEX_MARK[] = "lock-";
static const char CURATOR_LATCH_MARK[] = "latch-";
static const char CURATOR_READ_MARK[] = "__READ__";  /* InterProcessReadWriteLock's reader */
static const char CURATOR_WRITE_MARK[] = "__WRIT__"; /* ... and writer */

typedef enum {
    STEP_NONE,
    STEP_CREATE, /* create the contender node (ensuring the path first when it was missing) */
    STEP_FIND,   /* list the children for a node whose create reply was lost */
    STEP_STAT,   /* read an adopted node's czxid */
    STEP_CHECK,  /* list the contenders and decide */
    STEP_WATCH,  /* get the nearest blocking node with a watch */
    STEP_WAIT,   /* its watch is set: wait for it */
    STEP_DELETE  /* delete own node (release, or clean-up) */
} lock_step;

struct zkl_lock {
    zkl_session *s; /* NULL once the session is freed */
    zkl_route route;
    uint64_t id;
    zkl_lock_kind kind;
    int container_parents; /* a missing path is made of containers */
    int batch;             /* batched create, delete and listings (zkl_lock_batch_writes) */
    char *path;        /* the lock's path */
    char *prefix;      /* "<uuid hex>__lock__" */
    char *create_path; /* path + "/" + prefix */
    char *data;
    int data_len;
    struct ACL_vector acl;

    zkl_lock_phase phase;
    lock_step step;
    zkl_lock_outcome outcome;
    int rc;         /* with ZKL_LOCK_FAILED */
    int release_rc; /* why the last release failed, or ZOK */
    int blocking, ephemeral;
    int create_tried; /* a create may have made a node whose name we never learnt */
    int need_ensure;  /* the path was missing: create its prefixes before the node */
    int ensure_rc;    /* result of creating the path itself */
    int ensure_cut;   /* a create of the path was cut off with its connection */
    int ensure_rounds;
    int parked;       /* the step waits for CONNECTED */
    int checked;      /* the contenders were looked at during this acquire */
    int cancel_next;  /* a cancel came while no acquire was under way */
    int orphaned;     /* the owner let go */
    int listening;

    char *node;       /* own node's name, when known */
    int64_t czxid;    /* own node's czxid (valid with node) */
    int has_czxid;
    char *blocker;    /* the node watched while waiting */
    char **marks;     /* foreign contenders' marks (zkl_lock_add_mark) */
    int n_marks;

    uint64_t op_id, watch_id, ensure_op_id; /* what the lock waits for; 0: nothing */
    /* The listing sent right behind the create (the server answers a session's requests in
     * order, so it already sees the new node): a successful create goes straight on to it,
     * saving a round trip per acquire.  Any other step change drops it (its reply is then
     * ignored). */
    uint64_t pipelined_check;
    long inflight;    /* routed ops and watches not yet come back */

    zkl_lock_observer observer; /* see zkl_lock_observe() */
    void *observer_ctx;
};

/* ---------------------------------------------------------------- helpers */

static void set_string(char **field, char *value)
{
    free(*field);
    *field = value;
}

static void forget_node(zkl_lock *l)
{
    set_string(&l->node, NULL);
    l->has_czxid = 0;
}

/* ---------------------------------------------------------------- contenders */

static int ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* Whether name[0..head) ends with mark, kazoo's (?:mark)(-?\d{10})$ with the digits at
 * name + head: *seq is where the sequence (with its optional '-') starts. */
static int marked(const char *name, size_t head, const char *mark, const char **seq)
{
    if (head > 0 && name[head - 1] == '-' && ends_with(name, head - 1, mark)) {
        *seq = name + head - 1;
        return 1;
    }
    if (ends_with(name, head, mark)) {
        *seq = name + head;
        return 1;
    }
    return 0;
}

int zkl_lock_contender_kind(const char *name, const char *const *marks, int n_marks,
                            const char **seq)
{
    size_t n = strlen(name);
    if (n < SEQ_DIGITS)
        return -1;
    for (size_t i = n - SEQ_DIGITS; i < n; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
    }
    size_t head = n - SEQ_DIGITS;
    const char *at = NULL;
    int kind;
    if (marked(name, head, SHARED_MARK, &at))
        kind = ZKL_LOCK_SHARED;
    else if (marked(name, head, EXCLUSIVE_MARK, &at))
        kind = ZKL_LOCK_EXCLUSIVE;
    else
        kind = -1;
    for (int i = 0; kind < 0 && i < n_marks; i++) {
        if (marked(name, head, marks[i], &at))
            kind = ZKL_LOCK_FOREIGN;
    }
    if (kind >= 0 && seq)
        *seq = at;
    return kind;
}

static int is_curator(zkl_lock_kind kind)
{
    return kind == ZKL_LOCK_CURATOR_MUTEX || kind == ZKL_LOCK_CURATOR_LATCH ||
           kind == ZKL_LOCK_CURATOR_READ || kind == ZKL_LOCK_CURATOR_WRITE;
}

static int is_curator_rw(zkl_lock_kind kind)
{
    return kind == ZKL_LOCK_CURATOR_READ || kind == ZKL_LOCK_CURATOR_WRITE;
}

/* A lock that readers do not block: kazoo's ReadLock, Curator's read lock. */
static int is_reader(zkl_lock_kind kind)
{
    return kind == ZKL_LOCK_SHARED || kind == ZKL_LOCK_CURATOR_READ;
}

/* The mark of a Curator kind's own nodes. */
static const char *curator_mark(zkl_lock_kind kind)
{
    switch (kind) {
    case ZKL_LOCK_CURATOR_LATCH:
        return CURATOR_LATCH_MARK;
    case ZKL_LOCK_CURATOR_READ:
        return CURATOR_READ_MARK;
    case ZKL_LOCK_CURATOR_WRITE:
        return CURATOR_WRITE_MARK;
    default:
        return CURATOR_MUTEX_MARK;
    }
}

/* Curator's contenders: <anything><mark><10 digits>, all exclusive; *seq: the digits. */
static int curator_contender(const char *mark, const char *name, const char **seq)
{
    size_t n = strlen(name), m = strlen(mark);
    if (n < SEQ_DIGITS + m)
        return -1;
    for (size_t i = n - SEQ_DIGITS; i < n; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
    }
    if (memcmp(name + n - SEQ_DIGITS - m, mark, m) != 0)
        return -1;
    if (seq)
        *seq = name + n - SEQ_DIGITS;
    return ZKL_LOCK_EXCLUSIVE;
}

/* A child's contender kind for a lock of kind: kazoo's layout, or a Curator one (its own
 * nodes exclusive; foreign marks still count, kazoo's nodes do not). */
static int layout_contender(zkl_lock_kind kind, const char *name, const char *const *marks,
                            int n_marks, const char **seq)
{
    if (!is_curator(kind))
        return zkl_lock_contender_kind(name, marks, n_marks, seq);
    if (is_curator_rw(kind)) { /* one path, both kinds: readers shared, writers exclusive */
        if (curator_contender(CURATOR_READ_MARK, name, seq) >= 0)
            return ZKL_LOCK_SHARED;
        if (curator_contender(CURATOR_WRITE_MARK, name, seq) >= 0)
            return ZKL_LOCK_EXCLUSIVE;
    } else if (curator_contender(curator_mark(kind), name, seq) >= 0) {
        return ZKL_LOCK_EXCLUSIVE;
    }
    const char *at;
    if (n_marks > 0 && zkl_lock_contender_kind(name, marks, n_marks, &at) == ZKL_LOCK_FOREIGN) {
        if (seq)
            *seq = at;
        return ZKL_LOCK_FOREIGN;
    }
    return -1;
}

/* Contender order: by sequence suffix, bytewise (strcmp compares unsigned chars). */
static int contender_cmp(const char *seq_a, const char *a, const char *seq_b, const char *b)
{
    int c = strcmp(seq_a, seq_b);
    return c != 0 ? c : strcmp(a, b);
}

/* A contender's name and where its sequence starts, for sorting. */
typedef struct {
    const char *name, *seq;
} contender;

static int sort_cmp(const void *pa, const void *pb)
{
    const contender *a = pa, *b = pb;
    return contender_cmp(a->seq, a->name, b->seq, b->name);
}

int zkl_lock_sort_contenders(const char **names, int n, const char *const *marks, int n_marks)
{
    return zkl_lock_layout_sort_contenders(ZKL_LOCK_EXCLUSIVE, names, n, marks, n_marks);
}

int zkl_lock_layout_sort_contenders(zkl_lock_kind kind, const char **names, int n,
                                    const char *const *marks, int n_marks)
{
    contender *found = malloc(sizeof *found * (size_t)(n > 0 ? n : 1));
    if (!found)
        return -1;
    int count = 0;
    for (int i = 0; i < n; i++) {
        const char *seq;
        if (layout_contender(kind, names[i], marks, n_marks, &seq) >= 0)
            found[count++] = (contender){names[i], seq};
    }
    qsort(found, (size_t)count, sizeof *found, sort_cmp);
    for (int i = 0; i < count; i++)
        names[i] = found[i].name;
    free(found);
    return count;
}

/* The nearest contender before own that blocks this lock, or NULL.  *found: own is listed. */
static const char *nearest_blocker(const zkl_lock *l, char **children, int n, int *found)
{
    const char *own_seq;
    *found = 0;
    if (layout_contender(l->kind, l->node, NULL, 0, &own_seq) < 0)
        return NULL;
    const char *best = NULL, *best_seq = NULL;
    for (int i = 0; i < n; i++) {
        const char *c = children[i], *seq;
        if (strcmp(c, l->node) == 0) {
            *found = 1;
            continue;
        }
        int kind = layout_contender(l->kind, c, (const char *const *)l->marks, l->n_marks, &seq);
        if (kind < 0 || (is_reader(l->kind) && kind == ZKL_LOCK_SHARED))
            continue; /* readers do not block readers; a foreign contender blocks all */
        if (contender_cmp(seq, c, own_seq, l->node) >= 0)
            continue;
        if (!best || contender_cmp(seq, c, best_seq, best) > 0) {
            best = c;
            best_seq = seq;
        }
    }
    return best;
}

/* ---------------------------------------------------------------- stepping */

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx);
static void on_state(zkl_session *s, zkl_state state, void *ctx);
static void run_step(zkl_lock *l);

/* Counts a routed op (and its watch): each comes back exactly once. */
static uint64_t counted(zkl_lock *l, uint64_t id, int watch)
{
    if (id != 0)
        l->inflight += 1 + watch;
    return id;
}

/* Runs the step now if connected, else once CONNECTED comes back. */
static void go(zkl_lock *l, lock_step step)
{
    l->step = step;
    l->op_id = 0;
    l->pipelined_check = 0;
    if (zkl_session_state(l->s) == ZKL_CONNECTED)
        run_step(l);
    else
        l->parked = 1;
}

static void notify(zkl_lock *l, int code)
{
    if (!l->orphaned && l->s)
        zkl_session_notify(l->s, l->id, code);
}

static void become_idle(zkl_lock *l)
{
    if (l->phase == ZKL_LOCK_ACQUIRING || l->phase == ZKL_LOCK_ABANDONING)
        notify(l, ZKL_LOCK_NOTIFY_DECIDED); /* an acquire ended without the lock */
    l->phase = ZKL_LOCK_IDLE;
    l->step = STEP_NONE;
    l->parked = 0;
    l->op_id = l->watch_id = 0;
    l->create_tried = 0;
    forget_node(l);
    set_string(&l->blocker, NULL);
}

/* An acquire that did not succeed: delete whatever node it made, then idle. */
static void abandon(zkl_lock *l, zkl_lock_outcome outcome, int rc)
{
    l->outcome = outcome;
    l->rc = rc;
    l->phase = ZKL_LOCK_ABANDONING;
    l->watch_id = 0; /* a watch still out is stale now */
    if (l->node)
        go(l, STEP_DELETE);
    else if (l->op_id && (l->step == STEP_CREATE || l->step == STEP_FIND))
        ; /* its result tells whether there is a node to delete */
    else if (l->create_tried)
        go(l, STEP_FIND);
    else
        become_idle(l);
}

/* A step failed for good: an acquire fails (cleaning up), a clean-up stops trying, a release
 * leaves the lock held. */
static void step_failed(zkl_lock *l, int rc)
{
    switch (l->phase) {
    case ZKL_LOCK_ACQUIRING:
        abandon(l, ZKL_LOCK_FAILED, rc);
        break;
    case ZKL_LOCK_RELEASING:
        l->release_rc = rc;
        l->phase = ZKL_LOCK_HELD;
        l->step = STEP_NONE;
        break;
    default:
        become_idle(l);
        break;
    }
}

static void notify_lost(zkl_lock *l)
{
    notify(l, ZKL_LOCK_NOTIFY_LOST);
}

static uint64_t submit_create(zkl_lock *l)
{
    if (l->need_ensure && strcmp(l->path, "/") != 0) {
        uint64_t last;
        if (zkl_create_path_mode(l->s, l->path, &l->acl,
                                 l->container_parents ? ZOO_CONTAINER : ZOO_PERSISTENT,
                                 &l->route, &l->inflight, &last) != 0)
            return 0;
        l->ensure_rc = ZOK;
        l->ensure_cut = 0;
        l->ensure_op_id = last;
    }
    int flags = l->ephemeral ? ZOO_EPHEMERAL_SEQUENTIAL : ZOO_PERSISTENT_SEQUENTIAL;
    if (l->batch) /* the listing waits for the create: it would split the batch */
        return counted(l, zkl_op_create_batched(l->s, l->create_path, l->data, l->data_len,
                                                &l->acl, flags, &l->route), 0);
    uint64_t id = counted(l, zkl_op_create(l->s, l->create_path, l->data, l->data_len, &l->acl,
                                           flags, 1, &l->route), 0);
    if (id != 0)
        l->pipelined_check = counted(l, zkl_op_children(l->s, l->path, 0, &l->route), 0);
    return id;
}

/* Submits the op of the current step; returns its id (0: out of memory). */
static uint64_t submit_step(zkl_lock *l)
{
    char *p = NULL;
    uint64_t id = 0;
    switch (l->step) {
    case STEP_CREATE:
        return submit_create(l);
    case STEP_FIND:
        /* the create's reply was lost: the server that made the node may not be the one
         * answering now, and a follower behind the leader would list without it (and the
         * lock would create a second node, its first one then blocking it).  A sync first
         * makes the listing, sent behind it, as new as the leader. */
        (void)counted(l, zkl_op_sync(l->s, l->path, &l->route), 0); /* its result: stale */
        return counted(l, zkl_op_children(l->s, l->path, 0, &l->route), 0);
    case STEP_CHECK:
        return counted(l, l->batch ? zkl_op_children_batched(l->s, l->path, &l->route)
                                   : zkl_op_children(l->s, l->path, 0, &l->route), 0);
    case STEP_STAT:
        if ((p = zkl_join_path(l->path, l->node)) != NULL)
            id = counted(l, zkl_op_exists(l->s, p, 0, &l->route), 0);
        break;
    case STEP_WATCH:
        if ((p = zkl_join_path(l->path, l->blocker)) != NULL)
            id = counted(l, zkl_op_get(l->s, p, 1, &l->route), 1);
        l->watch_id = id;
        break;
    case STEP_DELETE:
        if ((p = zkl_join_path(l->path, l->node)) != NULL)
            id = counted(l, l->batch ? zkl_op_delete_batched(l->s, p, -1, &l->route) :
                                       zkl_op_delete(l->s, p, -1, &l->route), 0);
        break;
    default:
        return 0;
    }
    free(p);
    return id;
}

static void run_step(zkl_lock *l)
{
    l->parked = 0;
    if (l->step == STEP_NONE || l->step == STEP_WAIT)
        return;
    l->op_id = submit_step(l);
    if (l->op_id == 0)
        step_failed(l, ZSYSTEMERROR); /* out of memory */
}

/* ---------------------------------------------------------------- results */

static void created(zkl_lock *l, const zkl_event *ev)
{
    uint64_t check = l->pipelined_check;
    if (ev->rc == ZOK) {
        const char *slash = ev->data ? strrchr(ev->data, '/') : NULL;
        char *name = strdup(slash ? slash + 1 : "");
        if (!name) {
            l->create_tried = 1; /* the node exists: find it again */
            step_failed(l, ZSYSTEMERROR);
            return;
        }
        set_string(&l->node, name);
        l->create_tried = 0;
        l->czxid = ev->has_stat ? ev->stat.czxid : ev->czxid; /* (a batched create's) */
        l->has_czxid = ev->has_stat || ev->czxid > 0;
        if (l->phase == ZKL_LOCK_ABANDONING) {
            go(l, STEP_DELETE);
        } else if (l->has_czxid && check != 0) {
            l->step = STEP_CHECK; /* its listing is on its way already */
            l->op_id = check;
            l->pipelined_check = 0;
        } else {
            go(l, l->has_czxid ? STEP_CHECK : STEP_STAT);
        }
        return;
    }
    if (l->phase == ZKL_LOCK_ABANDONING) {
        become_idle(l); /* nothing was created */
        return;
    }
    if (ev->rc != ZNONODE) {
        step_failed(l, ev->rc);
    } else if (l->need_ensure && l->ensure_cut) {
        /* the path's create was lost with its connection, and the node's, sent on the next
         * one, found no path: make it again (a fault, not a round) */
        go(l, STEP_CREATE);
    } else if (l->need_ensure && l->ensure_rc != ZOK && l->ensure_rc != ZNODEEXISTS) {
        step_failed(l, l->ensure_rc); /* the path itself could not be made */
    } else if (++l->ensure_rounds > ZKL_RETRY_LIMIT) {
        step_failed(l, ZNONODE); /* someone keeps deleting the path */
    } else {
        l->need_ensure = 1;
        go(l, STEP_CREATE);
    }
}

static void found(zkl_lock *l, const zkl_event *ev)
{
    if (ev->rc != ZOK && ev->rc != ZNONODE) {
        step_failed(l, ev->rc);
        return;
    }
    l->create_tried = 0; /* the listing answers the question */
    size_t plen = strlen(l->prefix);
    for (int i = 0; ev->rc == ZOK && i < ev->string_count; i++) {
        if (strncmp(ev->strings[i], l->prefix, plen) == 0) {
            char *name = strdup(ev->strings[i]);
            if (!name) {
                l->create_tried = 1;
                step_failed(l, ZSYSTEMERROR);
                return;
            }
            set_string(&l->node, name); /* adopted, not created twice */
            l->has_czxid = 0;
            go(l, l->phase == ZKL_LOCK_ABANDONING ? STEP_DELETE : STEP_STAT);
            return;
        }
    }
    if (l->phase == ZKL_LOCK_ABANDONING) {
        become_idle(l);
        return;
    }
    l->need_ensure = ev->rc == ZNONODE;
    go(l, STEP_CREATE);
}

static void stat_read(zkl_lock *l, const zkl_event *ev)
{
    if (ev->rc == ZOK && ev->has_stat) {
        l->czxid = ev->stat.czxid;
        l->has_czxid = 1;
        go(l, STEP_CHECK);
    } else if (ev->rc == ZOK || ev->rc == ZNONODE) {
        forget_node(l); /* gone meanwhile */
        go(l, STEP_CREATE);
    } else {
        step_failed(l, ev->rc);
    }
}

/* Nodes of this lock's own prefix besides own: made by a create whose reply was lost and
 * that a listing did not show (a create is not retried blindly, but a listing may still miss
 * it).  Every such node is ours.  The lowest is kept (the place in line the lock earned
 * first) and the others deleted (a node of ours left behind would block every contender,
 * this lock included, for as long as the session lives).  Returns 1 when own moved to the
 * lowest (it is read again), 0 when own is the lowest, -1 out of memory. */
static int keep_lowest_own(zkl_lock *l, char **children, int n)
{
    size_t plen = strlen(l->prefix);
    const char *lowest = l->node;
    int others = 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(children[i], l->prefix, plen) != 0 || strcmp(children[i], l->node) == 0)
            continue;
        others++;
        if (strcmp(children[i], lowest) < 0)
            lowest = children[i]; /* same prefix: the sequence decides */
    }
    if (others == 0)
        return 0; /* the usual case: nothing to allocate */
    char *keep = strdup(lowest);
    if (!keep)
        return -1;
    for (int i = 0; i < n; i++) {
        if (strncmp(children[i], l->prefix, plen) != 0 || strcmp(children[i], keep) == 0)
            continue;
        char *p = zkl_join_path(l->path, children[i]);
        if (p)
            (void)counted(l, zkl_op_delete(l->s, p, -1, &l->route), 0); /* result: stale */
        free(p);
    }
    if (strcmp(keep, l->node) == 0) {
        free(keep);
        return 0;
    }
    set_string(&l->node, keep);
    l->has_czxid = 0;
    return 1;
}

static void contenders_read(zkl_lock *l, const zkl_event *ev)
{
    if (ev->rc == ZNONODE) { /* the path went, and own node with it */
        forget_node(l);
        l->need_ensure = 1;
        go(l, STEP_CREATE);
        return;
    }
    if (ev->rc != ZOK) {
        step_failed(l, ev->rc);
        return;
    }
    switch (keep_lowest_own(l, ev->strings, ev->string_count)) {
    case -1:
        step_failed(l, ZSYSTEMERROR);
        return;
    case 1:
        go(l, STEP_STAT); /* its czxid, then the contenders again (the deletes went first) */
        return;
    default:
        break;
    }
    l->checked = 1;
    int own_listed;
    const char *blocker = nearest_blocker(l, ev->strings, ev->string_count, &own_listed);
    if (!own_listed) { /* own node vanished (deleted by someone): contend again */
        forget_node(l);
        go(l, STEP_CREATE);
        return;
    }
    if (!blocker) {
        l->phase = ZKL_LOCK_HELD;
        l->step = STEP_NONE;
        l->outcome = ZKL_LOCK_GOT;
        set_string(&l->blocker, NULL);
        notify(l, ZKL_LOCK_NOTIFY_DECIDED);
        return;
    }
    if (!l->blocking) {
        abandon(l, ZKL_LOCK_BUSY, ZOK);
        return;
    }
    char *name = strdup(blocker);
    if (!name) {
        step_failed(l, ZSYSTEMERROR);
        return;
    }
    set_string(&l->blocker, name);
    go(l, STEP_WATCH);
}

static void blocker_read(zkl_lock *l, const zkl_event *ev)
{
    if (ev->rc == ZOK && l->watch_id != 0)
        l->step = STEP_WAIT; /* until the watch fires */
    else if (ev->rc == ZOK || ev->rc == ZNONODE)
        go(l, STEP_CHECK); /* gone already (or its watch came first) */
    else
        step_failed(l, ev->rc);
}

static void deleted(zkl_lock *l, const zkl_event *ev)
{
    if (ev->rc == ZOK || ev->rc == ZNONODE) {
        if (l->phase == ZKL_LOCK_RELEASING)
            l->release_rc = ZOK;
        become_idle(l);
    } else {
        step_failed(l, ev->rc);
    }
}

/* The session is closed (stopped) or refused our auth: nothing more can be done on it. */
static void session_closed(zkl_lock *l, int rc)
{
    l->op_id = l->watch_id = l->ensure_op_id = 0;
    l->parked = 0;
    switch (l->phase) {
    case ZKL_LOCK_HELD:
        if (l->ephemeral) {
            become_idle(l);
            notify_lost(l);
        }
        break;
    case ZKL_LOCK_ACQUIRING:
        l->outcome = ZKL_LOCK_FAILED;
        l->rc = rc;
        become_idle(l);
        break;
    case ZKL_LOCK_RELEASING:
        if (l->ephemeral) {
            l->release_rc = ZOK; /* the node went with the session */
            become_idle(l);
        } else {
            step_failed(l, rc);
        }
        break;
    case ZKL_LOCK_ABANDONING:
        become_idle(l);
        break;
    case ZKL_LOCK_IDLE:
        break;
    }
}

/* The session expired: what was in flight died with it; ephemeral nodes are gone. */
static void session_expired(zkl_lock *l)
{
    int create_in_flight = l->step == STEP_CREATE && l->op_id != 0;
    l->op_id = l->watch_id = l->ensure_op_id = 0;
    if (l->phase == ZKL_LOCK_IDLE)
        return;
    if (l->phase == ZKL_LOCK_HELD) {
        if (l->ephemeral) {
            become_idle(l);
            notify_lost(l);
        }
        return;
    }
    if (l->ephemeral) {
        forget_node(l);
        l->create_tried = 0;
    } else if (create_in_flight) {
        l->create_tried = 1; /* a persistent node may have been made */
    }
    lock_step next;
    if (l->phase == ZKL_LOCK_ACQUIRING)
        next = l->node ? (l->has_czxid ? STEP_CHECK : STEP_STAT)
                       : l->create_tried ? STEP_FIND : STEP_CREATE;
    else
        next = l->node ? STEP_DELETE : l->create_tried ? STEP_FIND : STEP_NONE;
    if (next == STEP_NONE) {
        if (l->phase == ZKL_LOCK_RELEASING)
            l->release_rc = ZOK;
        become_idle(l);
        return;
    }
    l->step = next;
    l->parked = 1; /* runs on the new session once it is CONNECTED */
}

static void on_op(zkl_lock *l, const zkl_event *ev)
{
    switch (zkl_rc_triage(ev->rc)) {
    case ZKL_RC_CLOSED:
        session_closed(l, ev->rc);
        return;
    case ZKL_RC_LOST:
        l->parked = 1; /* LOST follows, and picks the step to restart from */
        return;
    case ZKL_RC_RETRY:
        if (l->step == STEP_CREATE) {
            l->create_tried = 1; /* the node may exist: look before creating again */
            go(l, STEP_FIND);
        } else {
            go(l, l->step == STEP_WATCH ? STEP_CHECK : l->step);
        }
        return;
    case ZKL_RC_ANSWER:
        break;
    }
    switch (l->step) {
    case STEP_CREATE: created(l, ev); break;
    case STEP_FIND: found(l, ev); break;
    case STEP_STAT: stat_read(l, ev); break;
    case STEP_CHECK: contenders_read(l, ev); break;
    case STEP_WATCH: blocker_read(l, ev); break;
    case STEP_DELETE: deleted(l, ev); break;
    default: break;
    }
}

static void on_watch(zkl_lock *l, const zkl_event *ev)
{
    if (l->phase != ZKL_LOCK_ACQUIRING)
        return;
    if (ev->type == ZOO_NOTWATCHING_EVENT && l->op_id == ev->id)
        return; /* not registered: the get's own result decides */
    if (l->step == STEP_WAIT)
        go(l, STEP_CHECK); /* fired (or dropped with its handle): look again */
}

static void destroy(zkl_lock *l)
{
    if (l->s && l->listening)
        zkl_session_remove_state_listener(l->s, on_state, l);
    free(l->path);
    free(l->prefix);
    free(l->create_path);
    free(l->data);
    free(l->node);
    free(l->blocker);
    for (int i = 0; i < l->n_marks; i++)
        free(l->marks[i]);
    free(l->marks);
    zkl_acl_free(&l->acl);
    free(l);
}

/* An orphan goes once nothing is in flight and nothing is left to do. */
static void maybe_destroy(zkl_lock *l)
{
    if (!l->orphaned || l->inflight > 0)
        return;
    if (l->s && (l->phase == ZKL_LOCK_ACQUIRING || l->phase == ZKL_LOCK_RELEASING ||
                 l->phase == ZKL_LOCK_ABANDONING))
        return; /* parked: waits for CONNECTED (or for the session to close) */
    destroy(l);
}

/* The last thing after each event: an orphan may go; otherwise the observer hears of it (and
 * may free the lock, so nothing touches l after it). */
static void after_event(zkl_lock *l, int state)
{
    if (l->orphaned || !l->observer)
        maybe_destroy(l);
    else
        l->observer(l->observer_ctx, state);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_lock *l = ctx;
    l->inflight--;
    if (ev->kind == ZKL_EV_OP) {
        /* every get of ours asks for a watch: none will come if it was not taken */
        if (ev->op == ZKL_OP_GET && !ev->watch_requested) {
            l->inflight--;
            if (l->watch_id == ev->id)
                l->watch_id = 0;
        }
        if (ev->id != l->op_id && zkl_rc_triage(ev->rc) == ZKL_RC_RETRY)
            l->ensure_cut = 1; /* a create of the path (or a sync, whose result is stale) */
        if (ev->id == l->ensure_op_id) {
            l->ensure_op_id = 0;
            l->ensure_rc = ev->rc;
        } else if (ev->id == l->op_id && l->s) {
            l->op_id = 0;
            on_op(l, ev);
        }
    } else if (ev->kind == ZKL_EV_WATCH && ev->id == l->watch_id && l->s) {
        l->watch_id = 0;
        on_watch(l, ev);
    }
    after_event(l, ZKL_LOCK_NO_STATE);
}

static void on_state(zkl_session *s, zkl_state state, void *ctx)
{
    zkl_lock *l = ctx;
    if (state == ZKL_CONNECTED) {
        if (l->parked)
            run_step(l);
    } else if (state == ZKL_LOST) {
        if (zkl_session_is_stopped(s))
            session_closed(l, ZCLOSING);
        else if (zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED)
            session_closed(l, ZAUTHFAILED);
        else
            session_expired(l);
    }
    after_event(l, (int)state);
}

/* ---------------------------------------------------------------- public */

/* The longest prefix: Curator's protection prefix + "__READ__" (kazoo's is shorter). */
enum { PREFIX_SIZE = ZKL_PROTECTED_PREFIX_LEN + sizeof CURATOR_READ_MARK };

/* kazoo: "<uuid hex>__lock__" (or __rlock__); Curator: "_c_<8-4-4-4-12 uuid>-lock-" (or
 * latch-, __READ__, __WRIT__), the name Curator's protected create gives (and looks its node
 * up by). */
static void make_prefix(char out[PREFIX_SIZE], zkl_lock_kind kind, const char *hex)
{
    if (!is_curator(kind)) {
        snprintf(out, PREFIX_SIZE, "%s%s", hex, kind == ZKL_LOCK_SHARED ? SHARED_MARK : EXCLUSIVE_MARK);
        return;
    }
    char protected_prefix[ZKL_PROTECTED_PREFIX_LEN + 1];
    zkl_protected_prefix(protected_prefix, hex);
    snprintf(out, PREFIX_SIZE, "%s%s", protected_prefix, curator_mark(kind));
}

zkl_lock *zkl_lock_new(zkl_session *s, const char *path, const char *data, int len,
                       zkl_lock_kind kind, const struct ACL_vector *acl)
{
    zkl_lock *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->s = s;
    l->route.fn = on_route;
    l->route.ctx = l;
    l->id = zkl_session_new_target(s);
    l->kind = kind;
    l->release_rc = ZOK;
    l->container_parents = is_curator(kind);
    char uuid[ZKL_UUID_HEX_LEN + 1];
    l->path = strdup(path);
    l->data = malloc(len > 0 ? (size_t)len : 1);
    l->prefix = malloc(PREFIX_SIZE);
    if (!l->path || !l->data || !l->prefix || zkl_uuid4_hex(uuid) != 0 ||
        zkl_acl_copy(&l->acl, acl ? acl : &ZOO_OPEN_ACL_UNSAFE) != 0)
        goto fail;
    if (len > 0)
        memcpy(l->data, data, (size_t)len);
    l->data_len = len > 0 ? len : 0;
    make_prefix(l->prefix, kind, uuid);
    l->create_path = zkl_join_path(path, l->prefix);
    if (!l->create_path || zkl_session_add_state_listener(s, on_state, l) != 0)
        goto fail;
    l->listening = 1;
    return l;
fail:
    if (!errno)
        errno = ENOMEM;
    l->s = NULL;
    destroy(l);
    return NULL;
}

void zkl_lock_container_parents(zkl_lock *l, int on)
{
    l->container_parents = on != 0;
}

void zkl_lock_batch_writes(zkl_lock *l, int on)
{
    l->batch = on != 0;
}

int zkl_lock_add_mark(zkl_lock *l, const char *mark)
{
    char **marks = realloc(l->marks, sizeof *marks * (size_t)(l->n_marks + 1));
    if (!marks)
        return -1;
    l->marks = marks;
    if (!(marks[l->n_marks] = strdup(mark)))
        return -1;
    l->n_marks++;
    return 0;
}

void zkl_lock_free(zkl_lock *l)
{
    if (!l)
        return;
    l->orphaned = 1;
    if (l->s && l->phase == ZKL_LOCK_ACQUIRING)
        abandon(l, ZKL_LOCK_CANCELLED, ZOK);
    maybe_destroy(l);
}

void zkl_lock_forget_session(zkl_lock *l)
{
    l->s = NULL;
    l->parked = 0;
    l->op_id = l->watch_id = l->ensure_op_id = 0;
    l->inflight = 0; /* the session delivered (or dropped) everything before it went */
    if (l->phase != ZKL_LOCK_HELD || l->ephemeral)
        become_idle(l);
}

void zkl_lock_observe(zkl_lock *l, zkl_lock_observer fn, void *ctx)
{
    l->observer = fn;
    l->observer_ctx = ctx;
}

int zkl_lock_acquire(zkl_lock *l, int blocking, int ephemeral)
{
    if (l->phase == ZKL_LOCK_HELD || l->phase == ZKL_LOCK_RELEASING) {
        errno = EISCONN;
        return -1;
    }
    if (l->phase != ZKL_LOCK_IDLE || !l->s) {
        errno = l->s ? EALREADY : ENOTCONN;
        return -1;
    }
    l->blocking = blocking;
    l->ephemeral = ephemeral;
    l->outcome = ZKL_LOCK_PENDING;
    l->rc = ZOK;
    l->checked = 0;
    l->need_ensure = 0; /* create at once; a missing path shows as NONODE */
    l->ensure_rounds = 0;
    if (l->cancel_next) {
        l->cancel_next = 0;
        l->outcome = ZKL_LOCK_CANCELLED;
        return 0;
    }
    l->phase = ZKL_LOCK_ACQUIRING;
    go(l, l->create_tried ? STEP_FIND : STEP_CREATE);
    return 0;
}

void zkl_lock_cancel(zkl_lock *l)
{
    if (l->phase == ZKL_LOCK_ACQUIRING && l->s)
        abandon(l, ZKL_LOCK_CANCELLED, ZOK);
    else
        l->cancel_next = 1;
}

void zkl_lock_give_up(zkl_lock *l)
{
    if (l->phase == ZKL_LOCK_ACQUIRING && l->s)
        abandon(l, ZKL_LOCK_GAVE_UP, ZOK);
}

int zkl_lock_release(zkl_lock *l)
{
    if (l->phase != ZKL_LOCK_HELD || !l->s)
        return 0;
    l->phase = ZKL_LOCK_RELEASING;
    l->release_rc = ZOK;
    go(l, STEP_DELETE);
    return 1;
}

void zkl_lock_release_in_background(zkl_lock *l)
{
    if (l->phase == ZKL_LOCK_RELEASING)
        l->phase = ZKL_LOCK_ABANDONING; /* the step (DELETE) goes on */
}

zkl_lock_phase zkl_lock_phase_of(const zkl_lock *l)
{
    return l->phase;
}

zkl_lock_outcome zkl_lock_outcome_of(const zkl_lock *l, int *rc)
{
    if (rc)
        *rc = l->rc;
    return l->outcome;
}

int zkl_lock_release_rc(const zkl_lock *l)
{
    return l->release_rc;
}

int zkl_lock_checked(const zkl_lock *l)
{
    return l->checked;
}

int zkl_lock_is_held(const zkl_lock *l)
{
    return l->phase == ZKL_LOCK_HELD || l->phase == ZKL_LOCK_RELEASING;
}

const char *zkl_lock_node(const zkl_lock *l)
{
    return l->node;
}

const char *zkl_lock_prefix(const zkl_lock *l)
{
    return l->prefix;
}

const char *zkl_lock_blocker(const zkl_lock *l)
{
    return l->phase == ZKL_LOCK_ACQUIRING ? l->blocker : NULL;
}

int zkl_lock_fencing_token(const zkl_lock *l, int64_t *token)
{
    if (!zkl_lock_is_held(l) || !l->has_czxid)
        return -1;
    *token = l->czxid;
    return 0;
}

uint64_t zkl_lock_id(const zkl_lock *l)
{
    return l->id;
}

long zkl_lock_inflight(const zkl_lock *l)
{
    return l->inflight;
}
