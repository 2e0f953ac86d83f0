/*
 * locking_queue.c — see locking_queue.h.  One operation at a time (the phase), as a sequence
 * of steps; each step submits one routed op:
 *   ENSURE        create the entries and taken paths (they were missing)
 *   LIST_ENTRIES  the entries, with a watch
 *   LIST_TAKEN    the claims, with a watch; then the first unclaimed entry is tried
 *   WAIT          nothing available: either watch firing lists again
 *   CLAIM         create taken/<entry> (ephemeral, our id)
 *   OWN_CLAIM     read taken/<entry>: is it ours?  (after a lost reply, before a re-delete)
 *   READ          the entry's value
 *   DROP          delete our claim (release, clean-up, an entry consumed meanwhile)
 *   CONSUME       one transaction deleting the entry and the claim
 *   VERIFY_ENTRY  does the entry still exist?  (after a consume that may have been applied)
 * Only the op named op_id and the watches named entries_watch / taken_watch count; whatever
 * else comes back is stale and only counted.  A step that failed on the connection runs again
 * (or its check) once CONNECTED.
 */
#include "locking_queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/acl.h"
#include "../core/ops.h"
#include "common.h"
#include "names.h"


typedef enum {
    S_NONE,
    S_ENSURE,
    S_LIST_ENTRIES,
    S_LIST_TAKEN,
    S_WAIT,
    S_CLAIM,
    S_OWN_CLAIM,
    S_READ,
    S_DROP,
    S_CONSUME,
    S_VERIFY_ENTRY
} lq_step;

struct zkl_locking_queue {
    zkl_session *s; /* NULL once the session is freed */
    zkl_route route;
    uint64_t id;
    char *path, *entries_path, *taken_path;
    char owner[ZKL_UUID_HEX_LEN + 1];
    struct ACL_vector acl;

    zkl_locking_queue_phase phase;
    lq_step step;
    zkl_locking_queue_outcome outcome;
    int rc;
    zkl_names entries, taken; /* the last listings, sorted */
    int pos;                  /* entries.items[pos] is the next candidate */
    char *entry;              /* the entry being claimed, or held */
    char *value;
    int value_len;
    int claim_tries;   /* creates of this claim submitted: NODEEXISTS after the first: look */
    int claimed;       /* our claim exists, as far as we know */
    int dropping;      /* deleting our claim */
    int claim_lost;    /* a consume under way lost its claim with the session */
    int consume_tries;
    int dirty;         /* a current watch fired since the entries were listed */
    int ensure_rounds;
    int parked, orphaned, listening;

    uint64_t op_id, entries_watch, taken_watch;
    long inflight; /* routed ops and watches not yet come back */
};

static void on_state(zkl_session *s, zkl_state state, void *ctx);
static void run_step(zkl_locking_queue *q);
static void next_candidate(zkl_locking_queue *q);

/* ---------------------------------------------------------------- helpers */

static void set_string(char **field, char *value)
{
    free(*field);
    *field = value;
}

static void forget_item(zkl_locking_queue *q)
{
    set_string(&q->entry, NULL);
    set_string(&q->value, NULL);
    q->value_len = 0;
    q->claimed = q->dropping = q->claim_lost = 0;
    q->claim_tries = 0;
}

static void become(zkl_locking_queue *q, zkl_locking_queue_phase phase)
{
    q->phase = phase;
    q->step = S_NONE;
    q->parked = 0;
    q->op_id = 0;
    if (phase != ZKL_LQ_GETTING)
        q->entries_watch = q->taken_watch = 0; /* still out: stale from now on */
}

static void finish(zkl_locking_queue *q, zkl_locking_queue_outcome outcome, int rc)
{
    q->outcome = outcome;
    q->rc = rc;
    forget_item(q);
    become(q, ZKL_LQ_IDLE);
}

static void notify_lost(zkl_locking_queue *q)
{
    if (!q->orphaned && q->s)
        zkl_session_notify(q->s, q->id, ZKL_LOCKING_QUEUE_NOTIFY_LOST);
}

static void not_held(zkl_locking_queue *q)
{
    finish(q, ZKL_LQ_NOT_HELD, ZOK);
    notify_lost(q);
}

/* Runs step now if connected, else once CONNECTED comes. */
static void go(zkl_locking_queue *q, lq_step step)
{
    q->step = step;
    q->op_id = 0;
    if (zkl_session_state(q->s) == ZKL_CONNECTED)
        run_step(q);
    else
        q->parked = 1;
}

static void start_drop(zkl_locking_queue *q)
{
    q->dropping = 1;
    go(q, S_DROP);
}

/* A get (or its clean-up) failed for good: a claim it made is dropped first. */
static void get_failed(zkl_locking_queue *q, int rc)
{
    if (q->claimed || q->claim_tries > 0) {
        q->outcome = ZKL_LQ_FAILED;
        q->rc = rc;
        q->phase = ZKL_LQ_ABANDONING;
        if (q->claimed)
            start_drop(q);
        else
            go(q, S_OWN_CLAIM);
    } else {
        finish(q, ZKL_LQ_FAILED, rc);
    }
}

static void step_failed(zkl_locking_queue *q, int rc)
{
    switch (q->phase) {
    case ZKL_LQ_GETTING:
        get_failed(q, rc);
        break;
    case ZKL_LQ_ABANDONING:
        finish(q, q->outcome, q->rc); /* best effort: the claim goes with the session */
        break;
    case ZKL_LQ_RELEASING:
        q->outcome = ZKL_LQ_FAILED;
        q->rc = rc;
        q->dropping = 0;
        become(q, ZKL_LQ_HOLDING); /* still held: the owner may try again */
        break;
    default:
        finish(q, ZKL_LQ_FAILED, rc);
        break;
    }
}

/* ---------------------------------------------------------------- submitting */

static uint64_t counted(zkl_locking_queue *q, uint64_t id, int watch)
{
    if (id)
        q->inflight += 1 + watch;
    return id;
}

static uint64_t submit_consume(zkl_locking_queue *q, const char *claim)
{
    char *entry = zkl_join_path(q->entries_path, q->entry);
    zkl_multi *m = zkl_multi_new();
    uint64_t id = 0;
    if (entry && m && zkl_multi_add_delete(m, entry, -1) == 0 &&
        zkl_multi_add_delete(m, claim, -1) == 0) {
        id = counted(q, zkl_op_multi(q->s, m, &q->route), 0);
        m = NULL; /* the op owns it */
    }
    zkl_multi_free(m);
    free(entry);
    if (id)
        q->consume_tries++;
    return id;
}

static uint64_t submit_ensure(zkl_locking_queue *q)
{
    uint64_t first, last;
    if (zkl_create_path(q->s, q->entries_path, &q->acl, &q->route, &q->inflight, &first) != 0 ||
        zkl_create_path(q->s, q->taken_path, &q->acl, &q->route, &q->inflight, &last) != 0)
        return 0;
    return last; /* one session's requests are answered in order: the last one decides */
}

static uint64_t submit_step(zkl_locking_queue *q)
{
    uint64_t id = 0;
    char *claim = NULL, *entry = NULL;
    switch (q->step) {
    case S_ENSURE:
        return submit_ensure(q);
    case S_LIST_ENTRIES:
        q->dirty = 0;
        return q->entries_watch =
                   counted(q, zkl_op_children(q->s, q->entries_path, 1, &q->route), 1);
    case S_LIST_TAKEN:
        return q->taken_watch =
                   counted(q, zkl_op_children(q->s, q->taken_path, 1, &q->route), 1);
    default:
        break;
    }
    if (!q->entry || (claim = zkl_join_path(q->taken_path, q->entry)) == NULL)
        return 0;
    switch (q->step) {
    case S_CLAIM:
        id = counted(q, zkl_op_create(q->s, claim, q->owner, ZKL_UUID_HEX_LEN, &q->acl,
                                      ZOO_EPHEMERAL, 0, &q->route), 0);
        if (id)
            q->claim_tries++;
        break;
    case S_OWN_CLAIM:
        id = counted(q, zkl_op_get(q->s, claim, 0, &q->route), 0);
        break;
    case S_DROP:
        id = counted(q, zkl_op_delete(q->s, claim, -1, &q->route), 0);
        break;
    case S_CONSUME:
        id = submit_consume(q, claim);
        break;
    case S_READ:
    case S_VERIFY_ENTRY:
        if ((entry = zkl_join_path(q->entries_path, q->entry)) != NULL)
            id = counted(q, q->step == S_READ ? zkl_op_get(q->s, entry, 0, &q->route)
                                              : zkl_op_exists(q->s, entry, 0, &q->route), 0);
        break;
    default:
        break;
    }
    free(claim);
    free(entry);
    return id;
}

static void run_step(zkl_locking_queue *q)
{
    q->parked = 0;
    if (q->step == S_NONE || q->step == S_WAIT)
        return;
    q->op_id = submit_step(q);
    if (q->op_id == 0)
        step_failed(q, ZSYSTEMERROR); /* out of memory */
}

/* ---------------------------------------------------------------- getting */

static void ensure(zkl_locking_queue *q)
{
    if (++q->ensure_rounds > ZKL_RETRY_LIMIT)
        get_failed(q, ZNONODE); /* someone keeps deleting the paths */
    else
        go(q, S_ENSURE);
}

static void listed(zkl_locking_queue *q, const zkl_event *ev, zkl_names *into)
{
    if (ev->rc == ZNONODE) {
        ensure(q);
    } else if (ev->rc != ZOK) {
        get_failed(q, ev->rc);
    } else if (zkl_names_copy_sorted(into, ev->strings, ev->string_count) != 0) {
        get_failed(q, ZSYSTEMERROR);
    } else if (into == &q->entries) {
        go(q, S_LIST_TAKEN);
    } else {
        q->pos = 0;
        next_candidate(q);
    }
}

/* The first entry from pos on that nobody claimed: claim it; none: wait (or look again if a
 * watch fired meanwhile). */
static void next_candidate(zkl_locking_queue *q)
{
    while (q->pos < q->entries.count && zkl_names_contains(&q->taken, q->entries.items[q->pos]))
        q->pos++;
    if (q->pos >= q->entries.count) {
        forget_item(q);
        if (q->dirty) {
            go(q, S_LIST_ENTRIES);
        } else {
            q->step = S_WAIT;
            q->op_id = 0;
        }
        return;
    }
    char *name = strdup(q->entries.items[q->pos]);
    if (!name) {
        get_failed(q, ZSYSTEMERROR);
        return;
    }
    forget_item(q);
    q->entry = name;
    go(q, S_CLAIM);
}

static void skip_candidate(zkl_locking_queue *q)
{
    q->pos++;
    next_candidate(q);
}

static void claim_created(zkl_locking_queue *q, const zkl_event *ev)
{
    int abandoning = q->phase == ZKL_LQ_ABANDONING;
    if (ev->rc == ZOK) {
        q->claimed = 1;
        q->claim_tries = 0;
        if (abandoning)
            start_drop(q);
        else
            go(q, S_READ);
    } else if (ev->rc == ZNODEEXISTS && q->claim_tries > 1) {
        go(q, S_OWN_CLAIM); /* maybe our own create, whose reply was lost */
    } else if (abandoning) {
        finish(q, q->outcome, q->rc); /* nothing was made */
    } else if (ev->rc == ZNODEEXISTS) {
        skip_candidate(q); /* claimed by another consumer */
    } else if (ev->rc == ZNONODE) {
        q->claim_tries = 0;
        ensure(q);
    } else {
        get_failed(q, ev->rc);
    }
}

static void value_read(zkl_locking_queue *q, const zkl_event *ev)
{
    if (q->phase == ZKL_LQ_ABANDONING || ev->rc == ZNONODE) {
        start_drop(q); /* given up, or the entry was consumed meanwhile */
        return;
    }
    if (ev->rc != ZOK) {
        get_failed(q, ev->rc);
        return;
    }
    char *value = malloc(ev->data_len > 0 ? (size_t)ev->data_len : 1);
    if (!value) {
        get_failed(q, ZSYSTEMERROR);
        return;
    }
    if (ev->data_len > 0)
        memcpy(value, ev->data, (size_t)ev->data_len);
    set_string(&q->value, value);
    q->value_len = ev->data_len > 0 ? ev->data_len : 0;
    q->outcome = ZKL_LQ_GOT;
    q->rc = ZOK;
    become(q, ZKL_LQ_HOLDING);
}

/* ---------------------------------------------------------------- claims */

static int is_own_claim(const zkl_locking_queue *q, const zkl_event *ev)
{
    return ev->rc == ZOK && ev->data_len == ZKL_UUID_HEX_LEN &&
           memcmp(ev->data, q->owner, ZKL_UUID_HEX_LEN) == 0;
}

static void claim_dropped(zkl_locking_queue *q)
{
    q->claimed = q->dropping = 0;
    switch (q->phase) {
    case ZKL_LQ_GETTING:
        skip_candidate(q);
        break;
    case ZKL_LQ_RELEASING:
        finish(q, ZKL_LQ_RELEASED, ZOK);
        break;
    default: /* ABANDONING */
        finish(q, q->outcome, q->rc);
        break;
    }
}

static void claim_checked(zkl_locking_queue *q, const zkl_event *ev)
{
    if (ev->rc != ZOK && ev->rc != ZNONODE) {
        step_failed(q, ev->rc);
        return;
    }
    int ours = is_own_claim(q, ev);
    q->claim_tries = 0;
    q->claimed = ours;
    if (q->dropping) {
        if (ours)
            go(q, S_DROP);
        else
            claim_dropped(q); /* gone already: our earlier delete went through */
    } else if (q->phase == ZKL_LQ_CONSUMING) {
        if (ours)
            go(q, S_CONSUME);
        else
            not_held(q);
    } else if (q->phase == ZKL_LQ_ABANDONING) {
        if (ours)
            start_drop(q);
        else
            finish(q, q->outcome, q->rc);
    } else if (ours) {
        go(q, S_READ); /* adopted: our create went through */
    } else {
        skip_candidate(q);
    }
}

static void claim_deleted(zkl_locking_queue *q, const zkl_event *ev)
{
    if (ev->rc == ZOK || ev->rc == ZNONODE)
        claim_dropped(q);
    else
        step_failed(q, ev->rc);
}

/* ---------------------------------------------------------------- consuming */

static void consumed(zkl_locking_queue *q)
{
    finish(q, ZKL_LQ_CONSUMED, ZOK);
}

static void transaction_done(zkl_locking_queue *q, const zkl_event *ev)
{
    if (ev->rc == ZOK)
        consumed(q);
    else if (q->consume_tries >= ZKL_RETRY_LIMIT)
        finish(q, ZKL_LQ_FAILED, ev->rc);
    else
        go(q, S_VERIFY_ENTRY); /* refused: what is left says why */
}

static void entry_verified(zkl_locking_queue *q, const zkl_event *ev)
{
    if (ev->rc == ZNONODE)
        consumed(q); /* our transaction went through */
    else if (ev->rc != ZOK)
        finish(q, ZKL_LQ_FAILED, ev->rc);
    else if (q->claim_lost)
        not_held(q); /* back in the queue: our claim went with the session */
    else
        go(q, S_OWN_CLAIM);
}

/* ---------------------------------------------------------------- results */

/* A reply that was lost (connection loss, operation timeout): what to do once CONNECTED. */
static void reply_lost(zkl_locking_queue *q)
{
    switch (q->step) {
    case S_CLAIM:
        go(q, q->phase == ZKL_LQ_ABANDONING ? S_OWN_CLAIM : S_CLAIM);
        break;
    case S_DROP:
        go(q, S_OWN_CLAIM); /* our delete may have gone through: never delete another's */
        break;
    case S_CONSUME:
        go(q, S_VERIFY_ENTRY);
        break;
    default:
        go(q, q->step); /* reads and path creates can simply be repeated */
        break;
    }
}

/* The session is stopped or refused our auth: nothing more can be done on it. */
static void session_closed(zkl_locking_queue *q, int rc)
{
    switch (q->phase) {
    case ZKL_LQ_HOLDING:
        not_held(q);
        break;
    case ZKL_LQ_GETTING:
    case ZKL_LQ_CONSUMING:
        finish(q, ZKL_LQ_FAILED, rc);
        break;
    case ZKL_LQ_RELEASING:
        finish(q, ZKL_LQ_RELEASED, ZOK); /* the claim went with the session */
        break;
    case ZKL_LQ_ABANDONING:
        finish(q, q->outcome, q->rc);
        break;
    case ZKL_LQ_IDLE:
        break;
    }
}

/* The session expired: the claim, the watches and whatever was in flight died with it. */
static void session_expired(zkl_locking_queue *q)
{
    q->op_id = q->entries_watch = q->taken_watch = 0;
    q->claimed = 0;
    switch (q->phase) {
    case ZKL_LQ_HOLDING:
        not_held(q);
        break;
    case ZKL_LQ_GETTING:
        forget_item(q);
        q->step = S_LIST_ENTRIES;
        q->parked = 1; /* again, on the new session */
        break;
    case ZKL_LQ_CONSUMING:
        q->claim_lost = 1;
        q->step = S_VERIFY_ENTRY;
        q->parked = 1;
        break;
    case ZKL_LQ_RELEASING:
        finish(q, ZKL_LQ_RELEASED, ZOK);
        break;
    case ZKL_LQ_ABANDONING:
        finish(q, q->outcome, q->rc);
        break;
    case ZKL_LQ_IDLE:
        break;
    }
}

static void on_op(zkl_locking_queue *q, const zkl_event *ev)
{
    switch (zkl_rc_triage(ev->rc)) {
    case ZKL_RC_CLOSED:
        session_closed(q, ev->rc);
        return;
    case ZKL_RC_LOST:
        q->parked = 1; /* LOST follows, and decides */
        return;
    case ZKL_RC_RETRY:
        reply_lost(q);
        return;
    case ZKL_RC_ANSWER:
        break;
    }
    switch (q->step) {
    case S_ENSURE:
        if (ev->rc == ZOK || ev->rc == ZNODEEXISTS)
            go(q, S_LIST_ENTRIES);
        else
            get_failed(q, ev->rc);
        break;
    case S_LIST_ENTRIES: listed(q, ev, &q->entries); break;
    case S_LIST_TAKEN: listed(q, ev, &q->taken); break;
    case S_CLAIM: claim_created(q, ev); break;
    case S_OWN_CLAIM: claim_checked(q, ev); break;
    case S_READ: value_read(q, ev); break;
    case S_DROP: claim_deleted(q, ev); break;
    case S_CONSUME: transaction_done(q, ev); break;
    case S_VERIFY_ENTRY: entry_verified(q, ev); break;
    default: break;
    }
}

/* A current watch fired: list again now if waiting, else once this look is done. */
static void on_watch(zkl_locking_queue *q, const zkl_event *ev)
{
    if (ev->type == ZOO_NOTWATCHING_EVENT || q->phase != ZKL_LQ_GETTING)
        return; /* dropped with its handle (LOST restarts) or not registered (the op decides) */
    if (q->step == S_WAIT)
        go(q, S_LIST_ENTRIES);
    else
        q->dirty = 1;
}

static void destroy(zkl_locking_queue *q)
{
    if (q->s && q->listening)
        zkl_session_remove_state_listener(q->s, on_state, q);
    zkl_names_free(&q->entries);
    zkl_names_free(&q->taken);
    free(q->path);
    free(q->entries_path);
    free(q->taken_path);
    free(q->entry);
    free(q->value);
    zkl_acl_free(&q->acl);
    free(q);
}

/* An orphan goes once nothing is in flight and no clean-up waits for CONNECTED. */
static void maybe_destroy(zkl_locking_queue *q)
{
    if (!q->orphaned || q->inflight > 0)
        return;
    if (q->s && q->phase != ZKL_LQ_IDLE && q->phase != ZKL_LQ_HOLDING)
        return;
    destroy(q);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_locking_queue *q = ctx;
    q->inflight--;
    if (ev->kind == ZKL_EV_OP) {
        if (ev->op == ZKL_OP_CHILDREN && !ev->watch_requested) {
            q->inflight--; /* out of memory: no watch call will come */
            if (ev->id == q->entries_watch)
                q->entries_watch = 0;
            if (ev->id == q->taken_watch)
                q->taken_watch = 0;
        }
        if (ev->id == q->op_id && q->s) {
            q->op_id = 0;
            on_op(q, ev);
        }
    } else if (ev->kind == ZKL_EV_WATCH && ev->id != 0 && ev->id != q->op_id && q->s &&
               (ev->id == q->entries_watch || ev->id == q->taken_watch)) {
        if (ev->id == q->entries_watch)
            q->entries_watch = 0;
        else
            q->taken_watch = 0;
        on_watch(q, ev);
    }
    maybe_destroy(q);
}

static void on_state(zkl_session *s, zkl_state state, void *ctx)
{
    zkl_locking_queue *q = ctx;
    if (state == ZKL_CONNECTED) {
        if (q->parked)
            go(q, q->step);
    } else if (state == ZKL_LOST) {
        if (zkl_session_is_stopped(s))
            session_closed(q, ZCLOSING);
        else if (zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED)
            session_closed(q, ZAUTHFAILED);
        else
            session_expired(q);
    }
    maybe_destroy(q);
}

/* ---------------------------------------------------------------- public */

zkl_locking_queue *zkl_locking_queue_new(zkl_session *s, const char *path,
                                         const struct ACL_vector *acl)
{
    zkl_locking_queue *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->route.fn = on_route;
    q->route.ctx = q;
    q->id = zkl_session_new_target(s);
    errno = 0;
    q->path = strdup(path);
    q->entries_path = zkl_join_path(path, "entries");
    q->taken_path = zkl_join_path(path, "taken");
    if (!q->path || !q->entries_path || !q->taken_path || zkl_uuid4_hex(q->owner) != 0 ||
        zkl_acl_copy(&q->acl, acl ? acl : &ZOO_OPEN_ACL_UNSAFE) != 0 ||
        zkl_session_add_state_listener(s, on_state, q) != 0) {
        if (!errno)
            errno = ENOMEM;
        destroy(q);
        return NULL;
    }
    q->s = s;
    q->listening = 1;
    return q;
}

void zkl_locking_queue_free(zkl_locking_queue *q)
{
    if (!q)
        return;
    q->orphaned = 1;
    if (q->s && q->phase == ZKL_LQ_GETTING)
        zkl_locking_queue_give_up(q);
    maybe_destroy(q);
}

void zkl_locking_queue_forget_session(zkl_locking_queue *q)
{
    q->s = NULL;
    q->inflight = 0; /* the session delivered (or dropped) everything before it went */
    if (q->phase == ZKL_LQ_GETTING || q->phase == ZKL_LQ_CONSUMING)
        finish(q, ZKL_LQ_FAILED, ZCLOSING);
    else if (q->phase == ZKL_LQ_HOLDING)
        finish(q, ZKL_LQ_NOT_HELD, ZOK);
    else if (q->phase != ZKL_LQ_IDLE)
        finish(q, q->phase == ZKL_LQ_RELEASING ? ZKL_LQ_RELEASED : q->outcome, q->rc);
}

static int ready_to_start(zkl_locking_queue *q, int want_holding)
{
    if (!q->s) {
        errno = ENOTCONN;
        return 0;
    }
    if (q->phase == ZKL_LQ_HOLDING && !want_holding) {
        errno = EISCONN;
        return 0;
    }
    if (q->phase == ZKL_LQ_IDLE && want_holding) {
        errno = ENOENT;
        return 0;
    }
    if (q->phase != (want_holding ? ZKL_LQ_HOLDING : ZKL_LQ_IDLE)) {
        errno = EALREADY;
        return 0;
    }
    q->outcome = ZKL_LQ_PENDING;
    q->rc = ZOK;
    return 1;
}

int zkl_locking_queue_get(zkl_locking_queue *q)
{
    if (!ready_to_start(q, 0))
        return -1;
    forget_item(q);
    q->phase = ZKL_LQ_GETTING;
    q->ensure_rounds = 0;
    go(q, S_LIST_ENTRIES);
    return 0;
}

int zkl_locking_queue_consume(zkl_locking_queue *q)
{
    if (!ready_to_start(q, 1))
        return -1;
    q->phase = ZKL_LQ_CONSUMING;
    q->consume_tries = 0;
    q->claim_lost = 0;
    go(q, S_CONSUME);
    return 0;
}

int zkl_locking_queue_release(zkl_locking_queue *q)
{
    if (!ready_to_start(q, 1))
        return -1;
    q->phase = ZKL_LQ_RELEASING;
    start_drop(q);
    return 0;
}

void zkl_locking_queue_give_up(zkl_locking_queue *q)
{
    if (q->phase != ZKL_LQ_GETTING || !q->s)
        return;
    q->outcome = ZKL_LQ_GAVE_UP;
    q->rc = ZOK;
    if (!q->claimed && q->claim_tries == 0 && !q->dropping) {
        finish(q, ZKL_LQ_GAVE_UP, ZOK); /* nothing of ours exists: stale results are ignored */
        return;
    }
    q->phase = ZKL_LQ_ABANDONING;
    if (q->op_id != 0)
        return; /* its result decides, by the phase */
    if (q->dropping || q->claimed)
        start_drop(q);
    else
        go(q, S_OWN_CLAIM);
}

zkl_locking_queue_phase zkl_locking_queue_phase_of(const zkl_locking_queue *q)
{
    return q->phase;
}

zkl_locking_queue_outcome zkl_locking_queue_outcome_of(const zkl_locking_queue *q, int *rc)
{
    if (rc)
        *rc = q->rc;
    return q->outcome;
}

int zkl_locking_queue_waiting(const zkl_locking_queue *q)
{
    return q->phase == ZKL_LQ_GETTING && q->step == S_WAIT;
}

const char *zkl_locking_queue_value(const zkl_locking_queue *q, int *len)
{
    *len = q->value ? q->value_len : 0;
    return q->value ? q->value : "";
}

const char *zkl_locking_queue_entry(const zkl_locking_queue *q) { return q->entry; }
const char *zkl_locking_queue_owner_id(const zkl_locking_queue *q) { return q->owner; }
uint64_t zkl_locking_queue_id(const zkl_locking_queue *q) { return q->id; }
long zkl_locking_queue_inflight(const zkl_locking_queue *q) { return q->inflight; }

const char *zkl_locking_queue_step(const zkl_locking_queue *q)
{
    static const char *const names[] = {"none", "ensure", "list", "list_taken", "wait", "claim",
                                        "own_claim", "read", "drop", "consume", "verify_entry"};
    return names[q->step];
}
