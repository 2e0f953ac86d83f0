/*
 * semaphore.c — see semaphore.h.  A phase (idle, acquiring, held, releasing, abandoning) and,
 * while busy, a step.  The semaphore's own steps each submit one routed op whose result picks
 * the next step; two steps (LOCK, UNLOCK) belong to the mutex, a zkl_lock the semaphore owns:
 * it starts them and hears of their progress through the lock's observer, which also brings
 * the session's state changes (after the lock handled them).
 *
 * Only the result of the op (and the watch) the semaphore waits for counts: op_id and
 * watch_id name them; whatever else comes back is stale and only counted.  A step that failed
 * on the connection runs again once the session is CONNECTED ("parked").  On LOST (expiry)
 * everything in flight is stale and the ephemeral lease is gone: an acquire starts again
 * from the mutex on the new session.
 *
 * What is known of the own lease node: NONE (it does not exist), MAYBE (a create went out
 * and its result is unknown: the node is looked up, or deleted, by its fixed name) or OWN.
 *
 * The two layouts differ in three places only.  Where the mutex is (kazoo's Lock at
 * <path>-__lock__, Curator's InterProcessMutex at <path>/locks); what follows the mutex
 * (kazoo: READ_MAX/MAKE once, then COUNT before CREATE; Curator: CREATE before COUNT, which
 * counts the own node too); and the lease node's name (kazoo: fixed; Curator: sequential, so
 * a create of unknown result is looked for by its protected prefix (FIND) before CONFIRM
 * reads its czxid, and the name is forgotten with the node).
 */
#include "semaphore.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/acl.h"
#include "../core/ops.h"
#include "common.h"
#include "lock.h"

enum { MAX_STORED_SHOWN = 40 };

static const char MUTEX_SUFFIX[] = "-__lock__"; /* kazoo: path + "-" + "__lock__" */
/* Curator's InterProcessSemaphoreV2: LOCK_PARENT, LEASE_PARENT and LEASE_BASE_NAME */
static const char CURATOR_LOCKS[] = "locks";
static const char CURATOR_LEASES[] = "leases";
static const char CURATOR_LEASE_BASE[] = "lease-";

typedef enum {
    STEP_NONE,
    STEP_READ_MAX,     /* get <path>: is the max_leases stored there ours? */
    STEP_MAKE,         /* create <path> holding max_leases */
    STEP_MAKE_PARENTS, /* create <path>'s missing parents */
    STEP_LOCK,         /* the mutex is being taken (the lock works; its observer reports) */
    STEP_COUNT,        /* list the leases, with a watch */
    STEP_WAIT,         /* every lease is taken: wait for the children watch */
    STEP_CREATE,       /* create the own lease node */
    STEP_CONFIRM,      /* exists on the own lease node, after a create of unknown result */
    STEP_DELETE,       /* delete the own lease node (release, clean-up) */
    STEP_UNLOCK,       /* the mutex is being released */
    STEP_FIND          /* Curator: list the leases for the own node, by its protected prefix */
} sem_step;

static const char *const STEP_NAMES[] = {"none",  "read_max", "make",    "make_parents",
                                         "lock",  "count",    "wait",    "create",
                                         "confirm", "delete", "unlock",  "find"};

typedef enum { LEASE_NONE, LEASE_MAYBE, LEASE_OWN } lease_state;

struct zkl_semaphore {
    zkl_session *s; /* NULL once the session is freed */
    zkl_route route;
    uint64_t id;
    zkl_semaphore_layout layout;
    char *path;
    char *leases;      /* the lease nodes' parent: path (kazoo), path + "/leases" (Curator) */
    char *prefix;      /* the create's name: "<uuid hex>" (kazoo), "_c_<uuid>-lease-" (Curator) */
    char *create_path; /* leases + "/" + prefix */
    char *node;        /* the lease node's name: kazoo's is prefix, for the object's life;
                          Curator's is known once created (NULL while none is known) */
    char *node_path;   /* leases + "/" + node, with node */
    char *data;
    int data_len;
    int max_leases;
    char max_text[24];
    struct ACL_vector acl;
    zkl_lock *mutex;   /* at path + "-__lock__" (kazoo), path + "/locks" (Curator) */

    zkl_semaphore_phase phase;
    sem_step step;
    zkl_semaphore_outcome outcome;
    int rc;            /* with ZKL_SEM_FAILED */
    int release_rc;
    char *stored_max;  /* with ZKL_SEM_MISMATCH */
    int blocking;
    int assured;       /* <path> was found (or made) with a consistent max_leases */
    int make_rounds;
    int blocked;       /* this acquire found every lease taken, and waited */
    int parked;        /* the step waits for CONNECTED */
    int mutex_asked;   /* STEP_LOCK started an acquire of the mutex not yet looked at */
    int unlock_sent;   /* STEP_UNLOCK asked the mutex to release */
    int orphaned;

    lease_state lease;
    int64_t czxid;     /* with LEASE_OWN */

    uint64_t op_id, watch_id; /* what the semaphore waits for; 0: nothing */
    long inflight;            /* routed ops and watches not yet come back */
};

static void go(zkl_semaphore *m, sem_step step);
static void next_cleanup(zkl_semaphore *m);

static int is_curator(const zkl_semaphore *m)
{
    return m->layout == ZKL_SEM_LAYOUT_CURATOR;
}

/* ---------------------------------------------------------------- the lease node's name */

/* Curator's node is known by name (took ownership of name, NULL: none); 0, or -1 when out of
 * memory (then none is known). */
static int set_node(zkl_semaphore *m, char *name)
{
    free(m->node);
    free(m->node_path);
    m->node = name;
    m->node_path = name ? zkl_join_path(m->leases, name) : NULL;
    if (name && !m->node_path) {
        free(m->node);
        m->node = NULL;
        return -1;
    }
    return 0;
}

/* There is no own lease node (any more): a Curator one's name goes with it. */
static void lease_gone(zkl_semaphore *m)
{
    m->lease = LEASE_NONE;
    if (is_curator(m))
        set_node(m, NULL);
}

/* The step after the mutex is taken, with no lease node: kazoo counts, Curator creates. */
static sem_step first_step(const zkl_semaphore *m)
{
    return is_curator(m) ? STEP_CREATE : STEP_COUNT;
}

/* ---------------------------------------------------------------- phases */

static void become_idle(zkl_semaphore *m)
{
    m->phase = ZKL_SEM_IDLE;
    m->step = STEP_NONE;
    m->parked = 0;
    m->op_id = m->watch_id = 0;
    lease_gone(m);
}

static void become_held(zkl_semaphore *m)
{
    m->phase = ZKL_SEM_HELD;
    m->step = STEP_NONE;
    m->outcome = ZKL_SEM_GOT;
}

static void notify_lost(zkl_semaphore *m)
{
    if (!m->orphaned && m->s)
        zkl_session_notify(m->s, m->id, ZKL_SEM_NOTIFY_LOST);
}

/* An acquire that did not succeed: delete whatever lease node it may have made, let go of
 * the mutex, then idle. */
static void abandon(zkl_semaphore *m, zkl_semaphore_outcome outcome, int rc)
{
    m->outcome = outcome;
    m->rc = rc;
    m->phase = ZKL_SEM_ABANDONING;
    m->watch_id = 0; /* a watch still out is stale now */
    if (m->op_id && (m->step == STEP_CREATE || m->step == STEP_CONFIRM || m->step == STEP_FIND))
        return; /* its result tells whether there is a lease node to delete */
    next_cleanup(m);
}

/* The clean-up of an abandoned acquire, in order: the lease node (a Curator one looked for
 * first when its name is unknown), then the mutex. */
static void next_cleanup(zkl_semaphore *m)
{
    if (m->lease == LEASE_NONE)
        go(m, STEP_UNLOCK);
    else
        go(m, m->node ? STEP_DELETE : STEP_FIND);
}

/* A step failed for good: an acquire fails (cleaning up), a release leaves the lease held,
 * a clean-up gives up on the lease node (it goes with the session). */
static void step_failed(zkl_semaphore *m, int rc)
{
    switch (m->phase) {
    case ZKL_SEM_ACQUIRING:
        abandon(m, ZKL_SEM_FAILED, rc);
        break;
    case ZKL_SEM_RELEASING:
        m->release_rc = rc;
        m->phase = ZKL_SEM_HELD;
        m->step = STEP_NONE;
        break;
    case ZKL_SEM_ABANDONING:
        if (m->step == STEP_UNLOCK) {
            become_idle(m);
        } else {
            lease_gone(m);
            next_cleanup(m);
        }
        break;
    default:
        become_idle(m);
        break;
    }
}

/* ---------------------------------------------------------------- the mutex */

/* STEP_UNLOCK is over (the mutex is idle, or held after a release that failed: the next
 * acquire reuses it). */
static void unlocked(zkl_semaphore *m)
{
    if (m->phase == ZKL_SEM_ACQUIRING && m->lease == LEASE_OWN)
        become_held(m);
    else
        become_idle(m);
}

static void take_mutex(zkl_semaphore *m)
{
    zkl_lock *l = m->mutex;
    zkl_lock_phase phase = zkl_lock_phase_of(l);
    if (phase == ZKL_LOCK_HELD) {
        m->mutex_asked = 0;
        go(m, first_step(m));
        return;
    }
    if (phase != ZKL_LOCK_IDLE)
        return; /* acquiring, or an earlier release or clean-up: its next event brings us back */
    if (m->mutex_asked) {
        int rc;
        zkl_lock_outcome outcome = zkl_lock_outcome_of(l, &rc);
        m->mutex_asked = 0;
        if (outcome == ZKL_LOCK_BUSY) {
            abandon(m, ZKL_SEM_BUSY, ZOK);
            return;
        }
        if (outcome == ZKL_LOCK_FAILED) {
            abandon(m, ZKL_SEM_FAILED, rc);
            return;
        }
        /* got and lost again with the session, or ended otherwise: ask again */
    }
    if (zkl_lock_acquire(l, m->blocking, 1) != 0) {
        abandon(m, ZKL_SEM_FAILED, ZCLOSING);
        return;
    }
    m->mutex_asked = 1;
}

static void drop_mutex(zkl_semaphore *m)
{
    zkl_lock *l = m->mutex;
    zkl_lock_phase phase = zkl_lock_phase_of(l);
    if (phase == ZKL_LOCK_HELD && !m->unlock_sent) {
        m->unlock_sent = 1;
        zkl_lock_release(l);
    } else if (phase == ZKL_LOCK_ACQUIRING) {
        zkl_lock_give_up(l);
    }
    m->mutex_asked = 0;
    phase = zkl_lock_phase_of(l);
    if (phase == ZKL_LOCK_RELEASING || phase == ZKL_LOCK_ABANDONING)
        return; /* its next event brings us back */
    unlocked(m);
}

static void drive_mutex(zkl_semaphore *m)
{
    if (m->step == STEP_LOCK)
        take_mutex(m);
    else if (m->step == STEP_UNLOCK)
        drop_mutex(m);
}

/* ---------------------------------------------------------------- stepping */

static uint64_t counted(zkl_semaphore *m, uint64_t id, int watch)
{
    if (id != 0)
        m->inflight += 1 + watch;
    return id;
}

static uint64_t submit_make_parents(zkl_semaphore *m)
{
    if (is_curator(m)) { /* Curator: creatingParentContainersIfNeeded, up to the leases */
        uint64_t last;
        zkl_create_path_mode(m->s, m->leases, &m->acl, ZOO_CONTAINER, &m->route, &m->inflight,
                             &last);
        return last;
    }
    const char *slash = strrchr(m->path, '/');
    if (!slash || slash == m->path)
        return 0; /* a top-level path has no parent to make */
    char *parent = strndup(m->path, (size_t)(slash - m->path));
    if (!parent)
        return 0;
    uint64_t last;
    zkl_create_path(m->s, parent, &m->acl, &m->route, &m->inflight, &last);
    free(parent);
    return last;
}

/* Submits the op of the current step; returns its id (0: out of memory). */
static uint64_t submit_step(zkl_semaphore *m)
{
    zkl_session *s = m->s;
    uint64_t id;
    switch (m->step) {
    case STEP_READ_MAX:
        return counted(m, zkl_op_get(s, m->path, 0, &m->route), 0);
    case STEP_MAKE:
        return counted(m, zkl_op_create(s, m->path, m->max_text, (int)strlen(m->max_text),
                                        &m->acl, ZOO_PERSISTENT, 0, &m->route), 0);
    case STEP_MAKE_PARENTS:
        return submit_make_parents(m);
    case STEP_COUNT:
        id = counted(m, zkl_op_children(s, m->leases, 1, &m->route), 1);
        m->watch_id = id;
        return id;
    case STEP_CREATE:
        return counted(m, zkl_op_create(s, m->create_path, m->data, m->data_len, &m->acl,
                                        is_curator(m) ? ZOO_EPHEMERAL_SEQUENTIAL : ZOO_EPHEMERAL,
                                        1, &m->route), 0);
    case STEP_FIND:
        return counted(m, zkl_op_children(s, m->leases, 0, &m->route), 0);
    case STEP_CONFIRM:
        return counted(m, zkl_op_exists(s, m->node_path, 0, &m->route), 0);
    case STEP_DELETE:
        return counted(m, zkl_op_delete(s, m->node_path, -1, &m->route), 0);
    default:
        return 0;
    }
}

static void run_step(zkl_semaphore *m)
{
    m->parked = 0;
    if (m->step == STEP_NONE || m->step == STEP_WAIT || m->step == STEP_LOCK ||
        m->step == STEP_UNLOCK)
        return;
    m->op_id = submit_step(m);
    if (m->op_id == 0)
        step_failed(m, m->step == STEP_MAKE_PARENTS ? ZNONODE : ZSYSTEMERROR);
}

/* Runs the step: the mutex's at once (the lock waits for the connection itself), an op now
 * if connected, else once CONNECTED comes back. */
static void go(zkl_semaphore *m, sem_step step)
{
    m->step = step;
    m->op_id = 0;
    m->parked = 0;
    if (step == STEP_LOCK || step == STEP_UNLOCK) {
        m->unlock_sent = 0;
        drive_mutex(m);
    } else if (zkl_session_state(m->s) == ZKL_CONNECTED) {
        run_step(m);
    } else {
        m->parked = 1;
    }
}

/* ---------------------------------------------------------------- results */

static int is_space(char c)
{
    /* Python's str.isspace() among ASCII: int() strips these */
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Trims data's surrounding whitespace: [*from, *to). */
static void trim(const char *data, int len, int *from, int *to)
{
    int i = 0, end = len;
    while (i < end && is_space(data[i]))
        i++;
    while (end > i && is_space(data[end - 1]))
        end--;
    *from = i;
    *to = end;
}

int zkl_semaphore_parse_max(const char *data, int len, long long *value, int *overflow)
{
    if (!data || len <= 0)
        return 0;
    int i, end;
    trim(data, len, &i, &end);
    int negative = 0;
    if (i < end && (data[i] == '+' || data[i] == '-'))
        negative = data[i++] == '-';
    if (i >= end || !is_digit(data[i]))
        return 0;
    unsigned long long acc = 0;
    *overflow = 0;
    for (; i < end; i++) {
        if (data[i] == '_') { /* PEP 515: one underscore between two digits */
            if (i + 1 >= end || !is_digit(data[i + 1]) || !is_digit(data[i - 1]))
                return 0;
            continue;
        }
        if (!is_digit(data[i]))
            return 0;
        if (acc > ((unsigned long long)LLONG_MAX - 9) / 10)
            *overflow = 1;
        else
            acc = acc * 10 + (unsigned long long)(data[i] - '0');
    }
    *value = negative ? -(long long)acc : (long long)acc;
    return 1;
}

static void max_read(zkl_semaphore *m, const zkl_event *ev)
{
    if (ev->rc == ZNONODE) {
        go(m, STEP_MAKE);
        return;
    }
    if (ev->rc != ZOK) {
        step_failed(m, ev->rc);
        return;
    }
    long long stored;
    int overflow;
    if (zkl_semaphore_parse_max(ev->data, ev->data_len, &stored, &overflow) &&
        (overflow || stored != m->max_leases)) {
        int from, to;
        trim(ev->data, ev->data_len, &from, &to);
        int shown = to - from > MAX_STORED_SHOWN ? MAX_STORED_SHOWN : to - from;
        free(m->stored_max);
        m->stored_max = strndup(ev->data + from, (size_t)shown);
        abandon(m, ZKL_SEM_MISMATCH, ZOK);
        return;
    }
    m->assured = 1; /* non-numeric data is ignored, as kazoo */
    go(m, STEP_LOCK);
}

static void made(zkl_semaphore *m, const zkl_event *ev)
{
    if (ev->rc == ZOK) {
        m->assured = 1;
        go(m, STEP_LOCK);
    } else if (ev->rc == ZNODEEXISTS) {
        go(m, STEP_READ_MAX); /* made by someone else meanwhile: check theirs */
    } else if (ev->rc == ZNONODE && ++m->make_rounds <= ZKL_RETRY_LIMIT) {
        go(m, STEP_MAKE_PARENTS);
    } else {
        step_failed(m, ev->rc);
    }
}

static void parents_made(zkl_semaphore *m, const zkl_event *ev)
{
    if (ev->rc == ZOK || ev->rc == ZNODEEXISTS)
        go(m, is_curator(m) ? STEP_CREATE : STEP_MAKE);
    else
        step_failed(m, ev->rc);
}

static int listed(const zkl_event *ev, const char *name)
{
    for (int i = 0; name && i < ev->string_count; i++) {
        if (strcmp(ev->strings[i], name) == 0)
            return 1;
    }
    return 0;
}

/* Curator: the own lease node is gone (deleted by someone, with the leases' parent): create
 * it again, still holding the mutex (Curator starts again from the mutex), a bounded number of
 * times. */
static void create_again(zkl_semaphore *m, sem_step step)
{
    lease_gone(m);
    if (++m->make_rounds <= ZKL_RETRY_LIMIT)
        go(m, step);
    else
        step_failed(m, ZNONODE);
}

static void leases_counted(zkl_semaphore *m, const zkl_event *ev)
{
    if (ev->rc != ZOK)
        m->watch_id = 0; /* not set (or stale): nothing to wait for */
    if (is_curator(m) && (ev->rc == ZNONODE || (ev->rc == ZOK && !listed(ev, m->node)))) {
        m->watch_id = 0;
        create_again(m, STEP_CREATE);
        return;
    }
    if (ev->rc == ZNONODE) { /* <path> went (with its max_leases): make it again */
        m->assured = 0;
        go(m, STEP_MAKE);
        return;
    }
    if (ev->rc != ZOK) {
        step_failed(m, ev->rc);
        return;
    }
    /* the leases of others (Curator's own node is among them, and counts: size <= max) */
    int taken = is_curator(m) ? ev->string_count - 1 : ev->string_count;
    if (taken < m->max_leases) {
        m->watch_id = 0;
        go(m, is_curator(m) ? STEP_UNLOCK : STEP_CREATE); /* Curator: held once unlocked */
    } else if (!m->blocking) {
        abandon(m, ZKL_SEM_BUSY, ZOK);
    } else if (m->watch_id != 0) {
        m->blocked = 1;
        m->step = STEP_WAIT; /* until the children change */
    } else {
        go(m, STEP_COUNT); /* the watch fired already (or was not set): count again */
    }
}

static void lease_known(zkl_semaphore *m, lease_state lease, const struct Stat *stat)
{
    if (lease == LEASE_NONE)
        lease_gone(m);
    m->lease = lease;
    if (lease == LEASE_OWN)
        m->czxid = stat->czxid;
    if (m->phase == ZKL_SEM_ABANDONING)
        next_cleanup(m);
    else if (lease == LEASE_OWN) /* kazoo: the acquire ends once the mutex is released */
        go(m, is_curator(m) ? STEP_COUNT : STEP_UNLOCK);
    else if (lease == LEASE_MAYBE) /* look it up: by name, or a Curator one by prefix */
        go(m, m->node ? STEP_CONFIRM : STEP_FIND);
    else
        go(m, first_step(m));
}

/* Curator's created node's name, from the path the create returned (unknown when out of
 * memory: it is looked for by prefix). */
static void learn_name(zkl_semaphore *m, const zkl_event *ev)
{
    const char *slash = ev->data ? strrchr(ev->data, '/') : NULL;
    char *name = slash ? strdup(slash + 1) : NULL;
    if (name)
        set_node(m, name);
}

static void created(zkl_semaphore *m, const zkl_event *ev)
{
    if (ev->rc == ZOK && is_curator(m))
        learn_name(m, ev);
    if (ev->rc == ZOK && ev->has_stat && m->node) {
        lease_known(m, LEASE_OWN, &ev->stat);
    } else if (ev->rc == ZOK || ev->rc == ZNODEEXISTS) {
        lease_known(m, LEASE_MAYBE, NULL); /* the fixed name is ours: look it up */
    } else if (ev->rc == ZNONODE) { /* <path> went: make it again (still holding the mutex) */
        lease_gone(m);
        if (m->phase == ZKL_SEM_ABANDONING) {
            next_cleanup(m);
        } else if (is_curator(m)) {
            create_again(m, STEP_MAKE_PARENTS); /* Curator: creatingParentContainersIfNeeded */
        } else {
            m->assured = 0;
            go(m, STEP_MAKE);
        }
    } else {
        lease_gone(m); /* the server refused it: no node */
        step_failed(m, ev->rc);
    }
}

/* Curator: the listing after a create of unknown result, for a node with the own prefix. */
static void found(zkl_semaphore *m, const zkl_event *ev)
{
    if (ev->rc != ZOK && ev->rc != ZNONODE) {
        step_failed(m, ev->rc);
        return;
    }
    size_t n = strlen(m->prefix);
    for (int i = 0; ev->rc == ZOK && i < ev->string_count; i++) {
        if (strncmp(ev->strings[i], m->prefix, n) == 0) {
            char *name = strdup(ev->strings[i]);
            if (!name || set_node(m, name) != 0) {
                step_failed(m, ZSYSTEMERROR);
                return;
            }
            lease_known(m, LEASE_MAYBE, NULL); /* its czxid: CONFIRM */
            return;
        }
    }
    lease_known(m, LEASE_NONE, NULL); /* the create never applied */
}

static void confirmed(zkl_semaphore *m, const zkl_event *ev)
{
    if (ev->rc == ZOK && ev->has_stat)
        lease_known(m, LEASE_OWN, &ev->stat);
    else if (ev->rc == ZNONODE)
        lease_known(m, LEASE_NONE, NULL); /* the create never applied: count again */
    else
        step_failed(m, ev->rc == ZOK ? ZSYSTEMERROR : ev->rc);
}

static void deleted(zkl_semaphore *m, const zkl_event *ev)
{
    if (ev->rc != ZOK && ev->rc != ZNONODE) {
        step_failed(m, ev->rc);
        return;
    }
    lease_gone(m);
    if (m->phase == ZKL_SEM_RELEASING) {
        m->release_rc = ZOK;
        become_idle(m);
    } else {
        next_cleanup(m);
    }
}

/* The step to redo after its result was lost: the paths' creates start again from the
 * node's own create (kazoo: <path>, Curator: the lease node). */
static sem_step retry_step(const zkl_semaphore *m)
{
    if (m->step != STEP_MAKE_PARENTS)
        return m->step;
    return is_curator(m) ? STEP_CREATE : STEP_MAKE;
}

/* The session is closed (stopped) or refused our auth: nothing more can be done on it. */
static void session_closed(zkl_semaphore *m, int rc)
{
    m->op_id = m->watch_id = 0;
    m->parked = 0;
    lease_gone(m); /* ephemeral: gone with the session */
    switch (m->phase) {
    case ZKL_SEM_HELD:
        become_idle(m);
        notify_lost(m);
        break;
    case ZKL_SEM_ACQUIRING:
        m->outcome = ZKL_SEM_FAILED;
        m->rc = rc;
        become_idle(m);
        break;
    case ZKL_SEM_RELEASING:
        m->release_rc = ZOK;
        become_idle(m);
        break;
    default:
        become_idle(m);
        break;
    }
}

/* The session expired: what was in flight died with it, and so did the ephemeral lease (a
 * create sent on the old session cannot apply after it). */
static void session_expired(zkl_semaphore *m)
{
    m->op_id = m->watch_id = 0;
    lease_gone(m);
    switch (m->phase) {
    case ZKL_SEM_HELD:
        become_idle(m);
        notify_lost(m);
        break;
    case ZKL_SEM_RELEASING:
        m->release_rc = ZOK;
        become_idle(m);
        break;
    case ZKL_SEM_ABANDONING:
        next_cleanup(m);
        break;
    case ZKL_SEM_ACQUIRING: /* start again on the new session, from the mutex */
        if (m->assured)
            go(m, STEP_LOCK);
        else
            go(m, retry_step(m));
        break;
    default:
        break;
    }
}

static void on_state(zkl_semaphore *m, zkl_state state)
{
    zkl_session *s = m->s;
    if (state == ZKL_CONNECTED) {
        if (m->parked)
            run_step(m);
    } else if (state == ZKL_LOST) {
        if (zkl_session_is_stopped(s))
            session_closed(m, ZCLOSING);
        else if (zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED)
            session_closed(m, ZAUTHFAILED);
        else
            session_expired(m);
    }
}

static void on_connection_lost(zkl_semaphore *m)
{
    if (m->step == STEP_CREATE) {
        lease_known(m, LEASE_MAYBE, NULL); /* it may have been applied: look (or delete) */
    } else if (m->step == STEP_CONFIRM && m->phase == ZKL_SEM_ABANDONING) {
        next_cleanup(m);
    } else {
        go(m, retry_step(m));
    }
}

static void on_op(zkl_semaphore *m, const zkl_event *ev)
{
    switch (zkl_rc_triage(ev->rc)) {
    case ZKL_RC_CLOSED:
        session_closed(m, ev->rc);
        return;
    case ZKL_RC_LOST:
        m->parked = 1; /* LOST follows, and picks the step to restart from */
        return;
    case ZKL_RC_RETRY:
        on_connection_lost(m);
        return;
    case ZKL_RC_ANSWER:
        break;
    }
    switch (m->step) {
    case STEP_READ_MAX: max_read(m, ev); break;
    case STEP_MAKE: made(m, ev); break;
    case STEP_MAKE_PARENTS: parents_made(m, ev); break;
    case STEP_COUNT: leases_counted(m, ev); break;
    case STEP_CREATE: created(m, ev); break;
    case STEP_CONFIRM: confirmed(m, ev); break;
    case STEP_FIND: found(m, ev); break;
    case STEP_DELETE: deleted(m, ev); break;
    default: break;
    }
}

static void on_watch(zkl_semaphore *m, const zkl_event *ev)
{
    if (m->phase != ZKL_SEM_ACQUIRING)
        return;
    if (ev->type == ZOO_NOTWATCHING_EVENT && m->op_id == ev->id)
        return; /* not registered: the op's own result decides */
    if (m->step == STEP_WAIT)
        go(m, STEP_COUNT); /* the leases changed (or the watch was dropped): count again */
}

/* ---------------------------------------------------------------- life */

static void destroy(zkl_semaphore *m)
{
    if (m->mutex) {
        zkl_lock_observe(m->mutex, NULL, NULL);
        zkl_lock_free(m->mutex); /* an orphan lock finishes its own work */
    }
    free(m->path);
    free(m->leases);
    free(m->prefix);
    free(m->node);
    free(m->node_path);
    free(m->create_path);
    free(m->data);
    free(m->stored_max);
    zkl_acl_free(&m->acl);
    free(m);
}

/* An orphan goes once nothing is in flight and nothing is left to do. */
static void maybe_destroy(zkl_semaphore *m)
{
    if (!m->orphaned || m->inflight > 0)
        return;
    if (m->s && m->phase != ZKL_SEM_IDLE && m->phase != ZKL_SEM_HELD)
        return; /* parked, or waiting for the mutex */
    destroy(m);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_semaphore *m = ctx;
    m->inflight--;
    if (ev->kind == ZKL_EV_OP) {
        /* the count's children op asked for a watch (counted twice): none will come if it
         * was not taken.  FIND's children op asks for none (counted once). */
        if (ev->op == ZKL_OP_CHILDREN && ev->id == m->watch_id && !ev->watch_requested) {
            m->inflight--;
            m->watch_id = 0;
        }
        if (ev->id == m->op_id && m->s) {
            m->op_id = 0;
            on_op(m, ev);
        }
    } else if (ev->kind == ZKL_EV_WATCH && ev->id == m->watch_id && m->s) {
        m->watch_id = 0;
        on_watch(m, ev);
    }
    maybe_destroy(m);
}

/* The mutex's observer: its progress, and the session's state changes after it saw them. */
static void on_mutex(void *ctx, int state)
{
    zkl_semaphore *m = ctx;
    if (m->s) {
        if (state != ZKL_LOCK_NO_STATE)
            on_state(m, (zkl_state)state);
        drive_mutex(m);
    }
    maybe_destroy(m);
}

static char *mutex_path(const char *path, zkl_semaphore_layout layout)
{
    if (layout == ZKL_SEM_LAYOUT_CURATOR)
        return zkl_join_path(path, CURATOR_LOCKS);
    size_t n = strlen(path);
    char *p = malloc(n + sizeof MUTEX_SUFFIX);
    if (p) {
        memcpy(p, path, n);
        memcpy(p + n, MUTEX_SUFFIX, sizeof MUTEX_SUFFIX);
    }
    return p;
}

/* The lease node's create name: kazoo's "<uuid hex>", Curator's protected "_c_<uuid>-lease-". */
static char *lease_prefix(const char *hex, zkl_semaphore_layout layout)
{
    if (layout != ZKL_SEM_LAYOUT_CURATOR)
        return strdup(hex);
    char prefix[ZKL_PROTECTED_PREFIX_LEN + sizeof CURATOR_LEASE_BASE];
    zkl_protected_prefix(prefix, hex);
    memcpy(prefix + ZKL_PROTECTED_PREFIX_LEN, CURATOR_LEASE_BASE, sizeof CURATOR_LEASE_BASE);
    return strdup(prefix);
}

zkl_semaphore *zkl_semaphore_new(zkl_session *s, const char *path, const char *data, int len,
                                 int max_leases, const struct ACL_vector *acl,
                                 zkl_semaphore_layout layout)
{
    zkl_semaphore *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->s = s;
    m->route.fn = on_route;
    m->route.ctx = m;
    m->id = zkl_session_new_target(s);
    m->layout = layout;
    m->max_leases = max_leases;
    m->release_rc = ZOK;
    m->assured = layout == ZKL_SEM_LAYOUT_CURATOR; /* Curator stores no max_leases */
    snprintf(m->max_text, sizeof m->max_text, "%d", max_leases);
    errno = 0;
    char uuid[ZKL_UUID_HEX_LEN + 1];
    m->path = strdup(path);
    m->data = malloc(len > 0 ? (size_t)len : 1);
    m->leases = layout == ZKL_SEM_LAYOUT_CURATOR ? zkl_join_path(path, CURATOR_LEASES)
                                                 : strdup(path);
    char *lock_path = mutex_path(path, layout);
    if (!m->path || !m->data || !m->leases || !lock_path || zkl_uuid4_hex(uuid) != 0 ||
        zkl_acl_copy(&m->acl, acl ? acl : &ZOO_OPEN_ACL_UNSAFE) != 0 ||
        !(m->prefix = lease_prefix(uuid, layout)))
        goto fail;
    if (len > 0)
        memcpy(m->data, data, (size_t)len);
    m->data_len = len > 0 ? len : 0;
    m->create_path = zkl_join_path(m->leases, m->prefix);
    if (!m->create_path)
        goto fail;
    if (layout == ZKL_SEM_LAYOUT_KAZOO) { /* kazoo's name is fixed: known from the start */
        char *name = strdup(m->prefix);
        if (!name || set_node(m, name) != 0)
            goto fail;
    }
    m->mutex = zkl_lock_new(s, lock_path, data, len,
                            layout == ZKL_SEM_LAYOUT_CURATOR ? ZKL_LOCK_CURATOR_MUTEX
                                                             : ZKL_LOCK_EXCLUSIVE, acl);
    if (!m->mutex)
        goto fail;
    free(lock_path);
    zkl_lock_observe(m->mutex, on_mutex, m);
    return m;
fail:
    if (!errno)
        errno = ENOMEM;
    free(lock_path);
    m->s = NULL;
    destroy(m);
    return NULL;
}

void zkl_semaphore_free(zkl_semaphore *m)
{
    if (!m)
        return;
    m->orphaned = 1;
    if (m->s && m->phase == ZKL_SEM_ACQUIRING)
        abandon(m, ZKL_SEM_CANCELLED, ZOK);
    maybe_destroy(m);
}

void zkl_semaphore_forget_session(zkl_semaphore *m)
{
    m->s = NULL;
    m->inflight = 0; /* the session delivered (or dropped) everything before it went */
    become_idle(m);
    if (m->mutex)
        zkl_lock_forget_session(m->mutex);
}

/* ---------------------------------------------------------------- public */

/* Curator: a new protected id for each acquire, as withProtection() makes one per create, so
 * that FIND never takes a node left from an earlier acquire (one whose delete failed) for
 * this one's.  The prefix keeps its length: create_path's tail is rewritten in place. */
static void renew_prefix(zkl_semaphore *m)
{
    char uuid[ZKL_UUID_HEX_LEN + 1];
    if (zkl_uuid4_hex(uuid) != 0)
        return; /* no randomness now: the last id serves */
    char fresh[ZKL_PROTECTED_PREFIX_LEN + 1];
    zkl_protected_prefix(fresh, uuid);
    memcpy(m->prefix, fresh, ZKL_PROTECTED_PREFIX_LEN); /* the "lease-" after it stays */
    size_t n = strlen(m->prefix), total = strlen(m->create_path);
    memcpy(m->create_path + total - n, m->prefix, n);
}

int zkl_semaphore_acquire(zkl_semaphore *m, int blocking)
{
    if (!m->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (m->phase == ZKL_SEM_HELD || m->phase == ZKL_SEM_RELEASING) {
        errno = EISCONN;
        return -1;
    }
    if (m->phase != ZKL_SEM_IDLE) {
        errno = EALREADY;
        return -1;
    }
    m->blocking = blocking;
    m->outcome = ZKL_SEM_PENDING;
    m->rc = ZOK;
    m->blocked = 0;
    m->make_rounds = 0;
    m->mutex_asked = 0;
    free(m->stored_max);
    m->stored_max = NULL;
    if (is_curator(m))
        renew_prefix(m);
    m->phase = ZKL_SEM_ACQUIRING;
    go(m, m->assured ? STEP_LOCK : STEP_READ_MAX);
    return 0;
}

static void stop_acquiring(zkl_semaphore *m, zkl_semaphore_outcome why)
{
    if (m->phase != ZKL_SEM_ACQUIRING || !m->s)
        return;
    if (m->step == STEP_UNLOCK && m->lease == LEASE_OWN) {
        become_held(m); /* the lease is made: keep it; the mutex goes in the background */
        zkl_lock_release_in_background(m->mutex);
        return;
    }
    abandon(m, why, ZOK);
}

void zkl_semaphore_cancel(zkl_semaphore *m)
{
    stop_acquiring(m, ZKL_SEM_CANCELLED);
}

void zkl_semaphore_give_up(zkl_semaphore *m)
{
    stop_acquiring(m, ZKL_SEM_GAVE_UP);
}

int zkl_semaphore_release(zkl_semaphore *m)
{
    if (m->phase != ZKL_SEM_HELD || !m->s || !m->node)
        return 0;
    m->phase = ZKL_SEM_RELEASING;
    m->release_rc = ZOK;
    m->lease = LEASE_OWN;
    go(m, STEP_DELETE);
    return 1;
}

void zkl_semaphore_release_in_background(zkl_semaphore *m)
{
    if (m->phase == ZKL_SEM_RELEASING)
        m->phase = ZKL_SEM_ABANDONING; /* the step (DELETE) goes on */
}

zkl_semaphore_phase zkl_semaphore_phase_of(const zkl_semaphore *m)
{
    return m->phase;
}

zkl_semaphore_outcome zkl_semaphore_outcome_of(const zkl_semaphore *m, int *rc)
{
    if (rc)
        *rc = m->rc;
    return m->outcome;
}

const char *zkl_semaphore_stored_max(const zkl_semaphore *m)
{
    return m->outcome == ZKL_SEM_MISMATCH ? m->stored_max : NULL;
}

int zkl_semaphore_release_rc(const zkl_semaphore *m)
{
    return m->release_rc;
}

int zkl_semaphore_checked(const zkl_semaphore *m)
{
    if (m->blocked)
        return 1;
    /* waiting for the mutex behind another acquirer (a free one is taken in the same event) */
    return m->step == STEP_LOCK && m->mutex_asked && zkl_lock_checked(m->mutex) &&
           zkl_lock_phase_of(m->mutex) == ZKL_LOCK_ACQUIRING;
}

int zkl_semaphore_is_held(const zkl_semaphore *m)
{
    return m->phase == ZKL_SEM_HELD || m->phase == ZKL_SEM_RELEASING;
}

const char *zkl_semaphore_node(const zkl_semaphore *m)
{
    return m->node;
}

const char *zkl_semaphore_prefix(const zkl_semaphore *m)
{
    return m->prefix;
}

const char *zkl_semaphore_step_name(const zkl_semaphore *m)
{
    return STEP_NAMES[m->step];
}

int zkl_semaphore_fencing_token(const zkl_semaphore *m, int64_t *token)
{
    if (!zkl_semaphore_is_held(m) || m->lease != LEASE_OWN)
        return -1;
    *token = m->czxid;
    return 0;
}

uint64_t zkl_semaphore_id(const zkl_semaphore *m)
{
    return m->id;
}

long zkl_semaphore_inflight(const zkl_semaphore *m)
{
    return m->inflight;
}
