/*
 * persistent_node.c — see persistent_node.h.  Steps: CREATE (NONODE: ENSURE the parent path,
 * then CREATE again; NODEEXISTS: EXISTING, which reads the node's owner: one of this client's
 * earlier sessions -> REPLACE (delete it, with its version), then CREATE; else SET), SET
 * (write the current data), WATCH (exists with a watch), WAIT (the watch is set: wait for
 * it), DELETE (after stop); for a sequential node
 * whose first create's reply was lost: FIND (list the parent's children) and, without
 * protection, OWNER (read each candidate's ephemeralOwner).  Only the result of the op the
 * node waits for (op_id) and its watch (watch_id) count; the rest is stale.
 */
#include "persistent_node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/acl.h"
#include "../core/ops.h"
#include "common.h"

typedef enum {
    STEP_NONE,
    STEP_CREATE,
    STEP_ENSURE,
    STEP_SET,
    STEP_WATCH,
    STEP_WAIT,
    STEP_DELETE,
    STEP_FIND,
    STEP_OWNER,
    STEP_EXISTING,
    STEP_REPLACE
} pnode_step;

struct zkl_pnode {
    zkl_session *s; /* NULL once the session is freed */
    zkl_route route;
    uint64_t id;
    char *path, *parent;
    char *create_path; /* path, or <parent>/_c_<uuid>-<name> with protection */
    char *name;        /* create_path's last segment: how a sequential node's name begins */
    char *actual;      /* the node's path once created or found (a sequential one's name) */
    char **candidates; /* FIND without protection: children whose owner OWNER reads */
    int candidate_count, candidate_at;
    int64_t owner;     /* the session id a FIND looks for as ephemeralOwner */
    int stale_version; /* REPLACE: the version of the node an earlier session left */
    char *data;
    int data_len;
    int flags;
    int64_t ttl;
    struct ACL_vector acl;

    zkl_pnode_phase phase;
    pnode_step step;
    int rc, present, deleted, dirty, ensure_rounds;
    int parked, orphaned, listening;
    uint64_t creations;
    uint64_t data_gen, sent_gen, written_gen; /* set_data counts; a create/set writes one */
    uint64_t op_id, watch_id;
    long inflight;
};

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx);
static void on_state(zkl_session *s, zkl_state state, void *ctx);

static void notify(zkl_pnode *n, int code)
{
    if (!n->orphaned && n->s)
        zkl_session_notify(n->s, n->id, code);
}

static void drop_candidates(zkl_pnode *n)
{
    for (int i = 0; i < n->candidate_count; i++)
        free(n->candidates[i]);
    free(n->candidates);
    n->candidates = NULL;
    n->candidate_count = n->candidate_at = 0;
}

static int sequential(const zkl_pnode *n) { return (n->flags & ZKL_PNODE_SEQUENTIAL) != 0; }

/* A sequential node whose name is not known yet, and which a lost create may have made. */
static int unnamed(const zkl_pnode *n) { return sequential(n) && !n->actual; }

/* Such a node can be found again: by its protected prefix, or (ephemeral) by its owner. */
static int findable(const zkl_pnode *n)
{
    return (n->flags & (ZKL_PNODE_PROTECTED | ZKL_PNODE_EPHEMERAL)) != 0;
}

/* The node's path for set, exists and delete: the one made, else the one a create makes. */
static const char *node_path(const zkl_pnode *n) { return n->actual ? n->actual : n->create_path; }

static void settle(zkl_pnode *n, zkl_pnode_phase phase, int rc)
{
    if (phase != ZKL_PNODE_RUNNING && phase != ZKL_PNODE_STOPPING) {
        free(n->actual); /* a later start makes (a sequential node: names) it anew */
        n->actual = NULL;
        drop_candidates(n);
    }
    n->phase = phase;
    n->rc = rc;
    n->step = STEP_NONE;
    n->parked = 0;
    n->op_id = n->watch_id = 0;
}

static uint64_t counted(zkl_pnode *n, uint64_t id, int watch)
{
    if (id)
        n->inflight += 1 + watch;
    return id;
}

/* A sequential node is created sequential once: later creates re-make the name it got. */
static int create_mode(const zkl_pnode *n)
{
    int seq = unnamed(n);
    if (n->flags & ZKL_PNODE_CONTAINER)
        return ZOO_CONTAINER;
    if (n->flags & ZKL_PNODE_EPHEMERAL)
        return seq ? ZOO_EPHEMERAL_SEQUENTIAL : ZOO_EPHEMERAL;
    if (n->ttl > 0)
        return seq ? ZOO_PERSISTENT_SEQUENTIAL_WITH_TTL : ZOO_PERSISTENT_WITH_TTL;
    return seq ? ZOO_PERSISTENT_SEQUENTIAL : ZOO_PERSISTENT;
}

static uint64_t submit(zkl_pnode *n)
{
    uint64_t id;
    switch (n->step) {
    case STEP_CREATE:
        n->dirty = 0; /* the create writes the data as it is now */
        n->sent_gen = n->data_gen;
        return counted(n, zkl_op_create_ttl(n->s, node_path(n), n->data, n->data_len, &n->acl,
                                            create_mode(n), n->ttl, 0, &n->route), 0);
    case STEP_ENSURE:
        if (zkl_create_path_mode(n->s, n->parent, &n->acl,
                                 n->flags & ZKL_PNODE_CONTAINER_PARENTS ? ZOO_CONTAINER
                                                                        : ZOO_PERSISTENT,
                                 &n->route, &n->inflight, &id) != 0)
            return 0;
        return id;
    case STEP_SET:
        n->dirty = 0; /* a set_data from now on writes again */
        n->sent_gen = n->data_gen;
        return counted(n, zkl_op_set(n->s, node_path(n), n->data, n->data_len, -1, &n->route),
                       0);
    case STEP_WATCH:
        id = counted(n, zkl_op_exists(n->s, node_path(n), 1, &n->route), 1);
        n->watch_id = id;
        return id;
    case STEP_DELETE:
        return counted(n, zkl_op_delete(n->s, node_path(n), -1, &n->route), 0);
    case STEP_EXISTING:
        return counted(n, zkl_op_exists(n->s, node_path(n), 0, &n->route), 0);
    case STEP_REPLACE:
        return counted(n, zkl_op_delete(n->s, node_path(n), n->stale_version, &n->route), 0);
    case STEP_FIND: {
        char passwd[16];
        drop_candidates(n);
        if (zkl_session_client_id(n->s, &n->owner, passwd) != 0)
            n->owner = 0;
        return counted(n, zkl_op_children(n->s, n->parent, 0, &n->route), 0);
    }
    case STEP_OWNER: {
        char *child = zkl_join_path(n->parent, n->candidates[n->candidate_at]);
        id = child ? counted(n, zkl_op_get(n->s, child, 0, &n->route), 0) : 0;
        free(child);
        return id;
    }
    default:
        return 0;
    }
}

/* Runs step now, or parks it until CONNECTED. */
static void go(zkl_pnode *n, pnode_step step)
{
    n->step = step;
    n->op_id = 0;
    n->parked = 0;
    if (step == STEP_WAIT)
        return;
    if (!n->s || zkl_session_state(n->s) != ZKL_CONNECTED) {
        n->parked = 1;
        return;
    }
    n->op_id = submit(n);
    if (n->op_id == 0)
        settle(n, n->phase == ZKL_PNODE_STOPPING ? ZKL_PNODE_IDLE : ZKL_PNODE_FAILED,
               ZSYSTEMERROR);
}

/* The node is there with our data: write newer data, else watch it. */
static void kept(zkl_pnode *n)
{
    n->present = 1;
    go(n, n->dirty ? STEP_SET : STEP_WATCH);
}

/* The node's path is known from now on: name (NULL: create_path).  0, or -1 (failed) when out
 * of memory. */
static int named(zkl_pnode *n, const char *name)
{
    if (n->actual)
        return 0;
    n->actual = strdup(name ? name : n->create_path);
    if (n->actual)
        return 0;
    settle(n, n->phase == ZKL_PNODE_STOPPING ? ZKL_PNODE_IDLE : ZKL_PNODE_FAILED, ZSYSTEMERROR);
    return -1;
}

/* A sequential create's outcome is unknown (its reply was lost, or stop came while it was
 * under way and it failed): look for the node, or (not findable: nothing can tell it is ours;
 * as Curator, a node may be left) create again, or end the stop. */
static void unknown_create(zkl_pnode *n)
{
    if (findable(n))
        go(n, STEP_FIND);
    else if (n->phase == ZKL_PNODE_STOPPING)
        settle(n, ZKL_PNODE_IDLE, ZOK);
    else
        go(n, STEP_CREATE);
}

/* FIND and OWNER end here: the node found (name), or none (NULL). */
static void searched(zkl_pnode *n, const char *name)
{
    char *path = name ? zkl_join_path(n->parent, name) : NULL;
    drop_candidates(n);
    if (name && !path) {
        settle(n, n->phase == ZKL_PNODE_STOPPING ? ZKL_PNODE_IDLE : ZKL_PNODE_FAILED,
               ZSYSTEMERROR);
        return;
    }
    if (path) {
        n->actual = path; /* our create made it: taken over (its data written), not counted */
        go(n, n->phase == ZKL_PNODE_STOPPING ? STEP_DELETE : STEP_SET);
    } else if (n->phase == ZKL_PNODE_STOPPING) {
        settle(n, ZKL_PNODE_IDLE, ZOK); /* nothing was made */
    } else {
        go(n, STEP_CREATE);
    }
}

/* name is <name><10 digits>: the sequential name our create would have got. */
static int sequenced(const zkl_pnode *n, const char *child)
{
    size_t len = strlen(n->name);
    if (strncmp(child, n->name, len) != 0 || strlen(child + len) != 10)
        return 0;
    return strspn(child + len, "0123456789") == 10;
}

/* The parent's children (rc ZOK) or none: with protection the node is the child named
 * <_c_uuid-name><sequence> (the uuid is this node's own); without, an ephemeral one is the
 * <name><sequence> child whose ephemeralOwner is this session (OWNER reads them in turn). */
static void found(zkl_pnode *n, const zkl_event *ev)
{
    for (int i = 0; ev->rc == ZOK && i < ev->string_count; i++) {
        if (!sequenced(n, ev->strings[i]))
            continue;
        if (n->flags & ZKL_PNODE_PROTECTED) {
            searched(n, ev->strings[i]);
            return;
        }
        char **more = realloc(n->candidates, (size_t)(n->candidate_count + 1) * sizeof *more);
        char *copy = more ? strdup(ev->strings[i]) : NULL;
        if (more)
            n->candidates = more;
        if (!copy) {
            drop_candidates(n);
            settle(n, n->phase == ZKL_PNODE_STOPPING ? ZKL_PNODE_IDLE : ZKL_PNODE_FAILED,
                   ZSYSTEMERROR);
            return;
        }
        n->candidates[n->candidate_count++] = copy;
    }
    if (n->candidate_count > 0 && n->owner != 0)
        go(n, STEP_OWNER);
    else
        searched(n, NULL);
}

static void owner_read(zkl_pnode *n, const zkl_event *ev)
{
    if (ev->rc == ZOK && ev->has_stat && ev->stat.ephemeralOwner == n->owner) {
        char *name = n->candidates[n->candidate_at];
        n->candidates[n->candidate_at] = NULL; /* searched frees the rest */
        searched(n, name);
        free(name);
    } else if (++n->candidate_at < n->candidate_count) {
        go(n, STEP_OWNER);
    } else {
        searched(n, NULL);
    }
}

/* EXISTING: the node a create found there.  Owned by one of this client's earlier sessions
 * (an ephemeral node that goes when the server expires that session, which may be a session
 * timeout from now): replaced at once, as Curator's ServiceDiscovery does, so it never goes
 * missing.  Anyone else's (a persistent node, this session's own from a create whose reply was
 * lost, a live foreign session's): taken over, its data written.  Gone meanwhile: created. */
static void existing(zkl_pnode *n, const zkl_event *ev)
{
    if (ev->rc == ZNONODE && ++n->ensure_rounds <= ZKL_RETRY_LIMIT) {
        go(n, STEP_CREATE);
    } else if (ev->rc != ZOK || !ev->has_stat) {
        settle(n, ZKL_PNODE_FAILED, ev->rc != ZOK ? ev->rc : ZSYSTEMERROR);
    } else if (ev->stat.ephemeralOwner != 0 && n->s &&
               zkl_session_had_id(n->s, ev->stat.ephemeralOwner)) {
        n->stale_version = ev->stat.version;
        go(n, STEP_REPLACE);
    } else {
        go(n, STEP_SET);
    }
}

static void answered(zkl_pnode *n, const zkl_event *ev)
{
    int rc = ev->rc;
    switch (n->step) {
    case STEP_ENSURE:
        go(n, STEP_CREATE); /* the create decides */
        break;
    case STEP_CREATE:
        if (n->phase == ZKL_PNODE_STOPPING) { /* stop waited for a sequential create's name */
            if (rc == ZOK && named(n, ev->data) == 0)
                go(n, STEP_DELETE);
            else if (rc != ZOK)
                settle(n, ZKL_PNODE_IDLE, ZOK); /* refused: nothing was made */
        } else if (rc == ZOK) {
            if (named(n, ev->data) != 0)
                break;
            n->written_gen = n->sent_gen;
            n->creations++;
            notify(n, ZKL_PNODE_NOTIFY_CREATED);
            kept(n);
        } else if (rc == ZNODEEXISTS && !unnamed(n)) {
            if (named(n, NULL) == 0)
                go(n, STEP_EXISTING); /* whose is it? */
        } else if (rc == ZNODEEXISTS && ++n->ensure_rounds <= ZKL_RETRY_LIMIT) {
            go(n, STEP_CREATE); /* a sequence number someone else's name took: the next one */
        } else if (rc == ZNONODE && strcmp(n->parent, "/") != 0 &&
                   ++n->ensure_rounds <= ZKL_RETRY_LIMIT) {
            go(n, STEP_ENSURE);
        } else {
            settle(n, ZKL_PNODE_FAILED, rc);
        }
        break;
    case STEP_EXISTING:
        existing(n, ev);
        break;
    case STEP_REPLACE:
        if (rc == ZOK || rc == ZNONODE)
            go(n, STEP_CREATE); /* gone: made again, on this session */
        else if (rc == ZBADVERSION && ++n->ensure_rounds <= ZKL_RETRY_LIMIT)
            go(n, STEP_EXISTING); /* changed meanwhile: look again */
        else
            settle(n, ZKL_PNODE_FAILED, rc);
        break;
    case STEP_SET:
        if (rc == ZOK) {
            n->written_gen = n->sent_gen;
            kept(n);
        }
        else if (rc == ZNONODE)
            go(n, STEP_CREATE); /* gone meanwhile */
        else
            settle(n, ZKL_PNODE_FAILED, rc);
        break;
    case STEP_WATCH:
        if (rc == ZOK) {
            n->present = 1;
            go(n, n->dirty ? STEP_SET : STEP_WAIT); /* set_data came meanwhile: write it */
        } else if (rc == ZNONODE) {
            n->present = 0;
            n->ensure_rounds = 0;
            go(n, STEP_CREATE);
        } else {
            settle(n, ZKL_PNODE_FAILED, rc);
        }
        break;
    case STEP_DELETE:
        n->present = 0;
        n->deleted = rc == ZOK;
        settle(n, ZKL_PNODE_IDLE, rc == ZOK || rc == ZNONODE ? ZOK : rc);
        break;
    case STEP_FIND:
        if (rc == ZOK || rc == ZNONODE)
            found(n, ev);
        else
            settle(n, n->phase == ZKL_PNODE_STOPPING ? ZKL_PNODE_IDLE : ZKL_PNODE_FAILED, rc);
        break;
    case STEP_OWNER:
        owner_read(n, ev);
        break;
    default:
        break;
    }
}

static void on_op(zkl_pnode *n, const zkl_event *ev)
{
    switch (zkl_rc_triage(ev->rc)) {
    case ZKL_RC_CLOSED:
        n->present = 0;
        settle(n, n->phase == ZKL_PNODE_STOPPING || ev->rc == ZCLOSING ? ZKL_PNODE_IDLE
                                                                       : ZKL_PNODE_FAILED,
               ev->rc);
        return;
    case ZKL_RC_LOST:
        n->parked = 1; /* LOST follows and decides */
        return;
    case ZKL_RC_RETRY:
        if (n->step == STEP_CREATE && unnamed(n))
            unknown_create(n); /* it may have made the node: look for it first */
        else
            go(n, n->step == STEP_ENSURE ? STEP_CREATE : n->step == STEP_OWNER ? STEP_FIND
                                                                                : n->step);
        return;
    case ZKL_RC_ANSWER:
        break;
    }
    answered(n, ev);
}

static void on_watch(zkl_pnode *n, const zkl_event *ev)
{
    if (n->phase != ZKL_PNODE_RUNNING || n->step != STEP_WAIT)
        return; /* the exists' own result decides, or we moved on */
    if (ev->type == ZOO_DELETED_EVENT) {
        n->present = 0;
        n->ensure_rounds = 0;
        go(n, STEP_CREATE);
    } else {
        go(n, STEP_WATCH); /* changed, or dropped with its handle: look again */
    }
}

static void destroy(zkl_pnode *n)
{
    if (n->s && n->listening)
        zkl_session_remove_state_listener(n->s, on_state, n);
    drop_candidates(n);
    free(n->actual);
    free(n->create_path);
    free(n->name);
    free(n->path);
    free(n->parent);
    free(n->data);
    zkl_acl_free(&n->acl);
    free(n);
}

static void maybe_destroy(zkl_pnode *n)
{
    if (!n->orphaned || n->inflight > 0)
        return;
    if (n->s && (n->phase == ZKL_PNODE_RUNNING || n->phase == ZKL_PNODE_STOPPING))
        return; /* parked: waits for CONNECTED or the session's end */
    destroy(n);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_pnode *n = ctx;
    n->inflight--;
    if (ev->kind == ZKL_EV_OP) {
        /* an exists asks for a watch: none comes if it could not be asked for */
        if (ev->op == ZKL_OP_EXISTS && !ev->watch_requested) {
            n->inflight--;
            if (n->watch_id == ev->id)
                n->watch_id = 0;
        }
        if (ev->id == n->op_id && n->s) {
            n->op_id = 0;
            on_op(n, ev);
        }
    } else if (ev->kind == ZKL_EV_WATCH && ev->id == n->watch_id && n->s) {
        n->watch_id = 0;
        on_watch(n, ev);
    }
    maybe_destroy(n);
}

static void session_lost(zkl_pnode *n, int closed_rc)
{
    int ephemeral = n->flags & ZKL_PNODE_EPHEMERAL;
    /* the node this client kept went with the session, also when it had already seen it
     * deleted (the watch can fire before the session's end reaches the client) */
    int kept_one = n->present || n->phase == ZKL_PNODE_RUNNING;
    n->op_id = n->watch_id = 0;
    if (ephemeral)
        n->present = 0;
    if (closed_rc != ZOK) {
        n->present = 0;
        if (n->phase == ZKL_PNODE_RUNNING || n->phase == ZKL_PNODE_STOPPING)
            settle(n, closed_rc == ZCLOSING || n->phase == ZKL_PNODE_STOPPING ? ZKL_PNODE_IDLE
                                                                             : ZKL_PNODE_FAILED,
                   closed_rc);
    } else if (n->phase == ZKL_PNODE_RUNNING) {
        /* an ephemeral one is made again (a sequential one under the name it got); a persistent
         * one is looked at, or looked for when a lost create may have made it */
        n->ensure_rounds = 0;
        drop_candidates(n);
        n->step = ephemeral          ? STEP_CREATE
                  : !unnamed(n)      ? STEP_WATCH
                  : n->flags & ZKL_PNODE_PROTECTED ? STEP_FIND
                                                   : STEP_CREATE;
        n->parked = 1; /* on the new session */
    } else if (n->phase == ZKL_PNODE_STOPPING) {
        drop_candidates(n);
        if (ephemeral || (unnamed(n) && !(n->flags & ZKL_PNODE_PROTECTED)))
            settle(n, ZKL_PNODE_IDLE, ZOK); /* it went with the session, or cannot be found */
        else {
            n->step = unnamed(n) ? STEP_FIND : STEP_DELETE;
            n->parked = 1;
        }
    }
    if (ephemeral && kept_one)
        notify(n, ZKL_PNODE_NOTIFY_LOST);
}

static void on_state(zkl_session *s, zkl_state state, void *ctx)
{
    zkl_pnode *n = ctx;
    if (state == ZKL_CONNECTED) {
        if (n->parked)
            go(n, n->step);
    } else if (state == ZKL_LOST) {
        session_lost(n, zkl_session_is_stopped(s)                                 ? ZCLOSING
                        : zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED ? ZAUTHFAILED
                                                                            : ZOK);
    }
    maybe_destroy(n);
}

/* The parent of path ("/" for a top-level node); NULL when out of memory. */
static char *parent_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash && slash != path ? (size_t)(slash - path) : 1;
    char *parent = malloc(len + 1);
    if (parent) {
        memcpy(parent, path, len);
        parent[len] = '\0';
    }
    return parent;
}

/* create_path and name: path, or with protection <parent>/_c_<uuid>-<path's last segment>.
 * 0, or -1 with errno. */
static int make_names(zkl_pnode *n, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char prefix[ZKL_PROTECTED_PREFIX_LEN + 1] = "";
    if (n->flags & ZKL_PNODE_PROTECTED) {
        char uuid[ZKL_UUID_HEX_LEN + 1];
        if (zkl_uuid4_hex(uuid) != 0)
            return -1;
        zkl_protected_prefix(prefix, uuid);
    }
    size_t size = strlen(prefix) + strlen(base) + 1;
    n->name = malloc(size);
    if (!n->name)
        return -1;
    snprintf(n->name, size, "%s%s", prefix, base);
    n->create_path = zkl_join_path(n->parent, n->name);
    return n->create_path ? 0 : -1;
}

zkl_pnode *zkl_pnode_new(zkl_session *s, const char *path, const char *data, int len, int flags,
                         int64_t ttl, const struct ACL_vector *acl)
{
    zkl_pnode *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->s = s;
    n->route.fn = on_route;
    n->route.ctx = n;
    n->id = zkl_session_new_target(s);
    n->flags = flags;
    n->ttl = ttl > 0 ? ttl : 0;
    n->path = strdup(path);
    n->parent = parent_of(path);
    n->data = malloc(len > 0 ? (size_t)len : 1);
    errno = 0;
    if (!n->path || !n->parent || !n->data || make_names(n, path) != 0 ||
        zkl_acl_copy(&n->acl, acl ? acl : &ZOO_OPEN_ACL_UNSAFE) != 0)
        goto fail;
    if (len > 0)
        memcpy(n->data, data, (size_t)len);
    n->data_len = len > 0 ? len : 0;
    if (zkl_session_add_state_listener(s, on_state, n) != 0)
        goto fail;
    n->listening = 1;
    return n;
fail:
    if (!errno)
        errno = ENOMEM;
    n->s = NULL;
    destroy(n);
    return NULL;
}

void zkl_pnode_free(zkl_pnode *n)
{
    if (!n)
        return;
    if (n->s && n->phase == ZKL_PNODE_RUNNING)
        zkl_pnode_stop(n); /* nobody keeps it any more: delete it */
    n->orphaned = 1;
    maybe_destroy(n);
}

void zkl_pnode_forget_session(zkl_pnode *n)
{
    n->s = NULL;
    n->inflight = 0;
    n->present = 0;
    if (n->phase == ZKL_PNODE_RUNNING || n->phase == ZKL_PNODE_STOPPING)
        settle(n, ZKL_PNODE_IDLE, ZCLOSING);
}

int zkl_pnode_start(zkl_pnode *n)
{
    if (!n->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (n->phase == ZKL_PNODE_RUNNING || n->phase == ZKL_PNODE_STOPPING) {
        errno = EALREADY;
        return -1;
    }
    n->phase = ZKL_PNODE_RUNNING;
    n->rc = ZOK;
    n->deleted = 0;
    n->ensure_rounds = 0;
    go(n, STEP_CREATE);
    return 0;
}

int zkl_pnode_stop(zkl_pnode *n)
{
    if (!n->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (n->phase == ZKL_PNODE_STOPPING)
        return 0;
    if (n->phase != ZKL_PNODE_RUNNING) {
        n->deleted = 0;
        settle(n, ZKL_PNODE_IDLE, ZOK);
        return 0;
    }
    n->deleted = 0;
    if (n->flags & ZKL_PNODE_KEEP_ON_STOP) {
        settle(n, ZKL_PNODE_IDLE, ZOK);
        return 0;
    }
    n->phase = ZKL_PNODE_STOPPING;
    n->rc = ZOK;
    if (!unnamed(n))
        go(n, STEP_DELETE);
    else if (n->step == STEP_CREATE && n->op_id)
        ; /* the create under way names the node to delete (answered) */
    else if (n->step == STEP_FIND || n->step == STEP_OWNER)
        go(n, STEP_FIND); /* a lost create's node is looked for, then deleted */
    else
        settle(n, ZKL_PNODE_IDLE, ZOK); /* no create was sent */
    return 0;
}

int zkl_pnode_set_data(zkl_pnode *n, const char *data, int len)
{
    char *copy = malloc(len > 0 ? (size_t)len : 1);
    if (!copy) {
        errno = ENOMEM;
        return -1;
    }
    if (len > 0)
        memcpy(copy, data, (size_t)len);
    free(n->data);
    n->data = copy;
    n->data_len = len > 0 ? len : 0;
    n->dirty = 1;
    n->data_gen++;
    if (n->phase == ZKL_PNODE_RUNNING && n->step == STEP_WAIT)
        go(n, STEP_SET); /* the node is there and watched: write now */
    return 0;
}

zkl_pnode_phase zkl_pnode_phase_of(const zkl_pnode *n) { return n->phase; }
int zkl_pnode_present(const zkl_pnode *n) { return n->present; }
int zkl_pnode_rc(const zkl_pnode *n) { return n->rc; }
int zkl_pnode_deleted(const zkl_pnode *n) { return n->deleted; }
const char *zkl_pnode_actual_path(const zkl_pnode *n) { return n->actual; }
int zkl_pnode_written(const zkl_pnode *n) { return n->present && n->written_gen == n->data_gen; }
uint64_t zkl_pnode_creations(const zkl_pnode *n) { return n->creations; }
uint64_t zkl_pnode_id(const zkl_pnode *n) { return n->id; }
long zkl_pnode_inflight(const zkl_pnode *n) { return n->inflight; }

const char *zkl_pnode_data(const zkl_pnode *n, int *len)
{
    *len = n->data_len;
    return n->data;
}
