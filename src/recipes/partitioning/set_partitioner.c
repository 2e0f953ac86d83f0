/*
 * set_partitioner.c — see set_partitioner.h.  A state (kazoo's four) and, while allocating or
 * releasing, a step: JOIN the party, LIST it with a watch, SETTLE (a timer), PARTITION (the
 * owner computes), ACQUIRE the item locks, RELEASE them (release_set); REWATCH lists the
 * party again when an ACQUIRED member's watch was dropped without a change.
 *
 * Only the list op, the party watch and the timers the partitioner waits for count (their ids
 * are kept); a stale op or watch that comes back is only counted (inflight), so that an orphan
 * knows when it may go, and a stale timer is taken back (zkl_session_cancel_timer).  Locks it lets go (an abandoned attempt, a release) keep the
 * partitioner as their observer until they are idle, then are freed at the next safe point:
 * never from a state listener, because the session calls its listeners from a copy of the
 * list and a freed lock's entry would still be called.
 *
 * Per event the work is O(1), whatever the share: each lock's observer context is its own
 * item (sp_lock), so a lock's event updates one count (items held while acquiring, still held
 * while releasing) instead of walking every item, and a lock let go moves from the busy list
 * to the idle list on its own event.  Only what happens once per rebalance walks the share
 * (the assignment, the start of a release, the final check before ACQUIRED or ALLOCATING,
 * the conflict timer).  (Walking it per event made a 20k-item share take 69 s to acquire,
 * 26 s of it client CPU, the owner thread never back in Lua to see a signal.)
 */
#include "set_partitioner.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/acl.h"
#include "../../core/ops.h"
#include "../../core/timers.h"
#include "../common.h"
#include "../names.h"
#include "../lock.h"
#include "../party.h"

typedef enum {
    STEP_NONE,      /* ACQUIRED, RELEASE (not releasing yet) or FAILURE */
    STEP_JOIN,      /* the party join is under way */
    STEP_LIST,      /* list the party, with a watch */
    STEP_SETTLE,    /* the party must stay unchanged until the settle timer fires */
    STEP_PARTITION, /* waiting for the owner's zkl_sp_assign() */
    STEP_ACQUIRE,   /* acquiring the item locks */
    STEP_RELEASE,   /* release_set: deleting the item locks */
    STEP_REWATCH    /* ACQUIRED, the party watch dropped: list again and compare */
} sp_step;

/* One item's lock, and its observer's context. */
typedef struct sp_lock {
    struct zkl_set_partitioner *sp;
    zkl_lock *lock;
    char *name;                  /* the lock's name under <path>/locks */
    int counted;                 /* an item counted in sp->counted (see counts()) */
    int retired;                 /* let go: on sp->busy or sp->idle */
    struct sp_lock *prev, *next; /* ... that list's links */
} sp_lock;

typedef struct {
    sp_lock *head;
    long count;
} sp_list;

struct zkl_set_partitioner {
    zkl_session *s; /* NULL once the session is freed */
    zkl_route route;
    uint64_t id;
    char *party_path, *lock_path, *identifier, *node;
    int identifier_len;
    struct ACL_vector acl;
    long time_boundary_ms, conflict_timeout_ms;
    zkl_party *party; /* NULL once let go */

    zkl_sp_state state;
    sp_step step;
    zkl_sp_failure failure;
    int rc;
    char *conflict_item, *conflict_blocker;

    zkl_names members; /* the party's node names at the last listing, sorted */
    uint64_t attempt;
    sp_lock **items; /* the current attempt's items (held ones while ACQUIRED/RELEASE) */
    int item_count;
    int counted;     /* items held (ACQUIRE) or still held (RELEASE): counts() */
    int window_counted; /* counted when the conflict window started (ACQUIRE) */
    sp_list busy;    /* locks let go, still deleting their node or withdrawing */
    sp_list idle;    /* locks let go and done: freed at the next safe point */

    uint64_t list_op_id, party_watch_id;
    uint64_t settle_timer_id, conflict_timer_id;
    int parked; /* LIST or REWATCH waits for CONNECTED */
    int joined; /* the first join of the party completed (whatever happened after) */
    int orphaned, listening;
    long inflight; /* routed ops and watches not yet come back (timers are taken back) */
};

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx);
static void on_state(zkl_session *s, zkl_state state, void *ctx);
static void lock_changed(void *ctx, int state);
static void fail(zkl_set_partitioner *sp, zkl_sp_failure why, int rc);

/* ---------------------------------------------------------------- helpers */

static void notify(zkl_set_partitioner *sp, int code)
{
    if (!sp->orphaned && sp->s)
        zkl_session_notify(sp->s, sp->id, code);
}

static void set_state(zkl_set_partitioner *sp, zkl_sp_state state)
{
    if (sp->state == state)
        return;
    sp->state = state;
    notify(sp, ZKL_SP_NOTIFY_STATE + (int)state);
}

static int connected(const zkl_set_partitioner *sp)
{
    return sp->s && zkl_session_state(sp->s) == ZKL_CONNECTED;
}

/* A timer (timers.h); 0 (and FAILURE) when none could be made. */
static uint64_t start_timer(zkl_set_partitioner *sp, long delay_ms)
{
    uint64_t id = zkl_session_add_timer(sp->s, delay_ms, &sp->route);
    if (id == 0)
        fail(sp, ZKL_SP_FAILED_ERROR, ZSYSTEMERROR);
    return id;
}

/* Takes a timer back (it will not call): a timer that no longer means anything. */
static void stop_timer(zkl_set_partitioner *sp, uint64_t *id)
{
    if (*id && sp->s)
        zkl_session_cancel_timer(sp->s, *id);
    *id = 0;
}

/* ---------------------------------------------------------------- letting go of locks */

static void list_push(sp_list *list, sp_lock *x)
{
    x->prev = NULL;
    x->next = list->head;
    if (list->head)
        list->head->prev = x;
    list->head = x;
    list->count++;
}

static void list_remove(sp_list *list, sp_lock *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        list->head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
    list->count--;
}

/* Takes the first lock off list (NULL when empty). */
static sp_lock *list_pop(sp_list *list)
{
    sp_lock *x = list->head;
    if (!x)
        return NULL;
    list->head = x->next;
    if (x->next)
        x->next->prev = NULL;
    x->next = x->prev = NULL;
    list->count--;
    return x;
}

static void free_sp_lock(sp_lock *x)
{
    zkl_lock_free(x->lock); /* an idle lock goes; a busy one finishes as an orphan */
    free(x->name);
    free(x);
}

/* A lock let go still works (deletes its node, withdraws its attempt).  HELD: its release
 * failed, and the node goes with the session. */
static int still_busy(const zkl_set_partitioner *sp, const sp_lock *x)
{
    zkl_lock_phase phase = zkl_lock_phase_of(x->lock);
    return sp->s && phase != ZKL_LOCK_IDLE && phase != ZKL_LOCK_HELD;
}

/* A lock let go was heard from: busy -> idle once done. */
static void retired_changed(zkl_set_partitioner *sp, sp_lock *x)
{
    if (x->retired == 1 && !still_busy(sp, x)) {
        list_remove(&sp->busy, x);
        x->retired = 2;
        list_push(&sp->idle, x);
    }
}

/* Withdraws an acquire or starts a release (release 1), or only keeps the lock until idle;
 * the lock is freed once idle (zkl_sp_tidy). */
static void retire(zkl_set_partitioner *sp, sp_lock *x, int release)
{
    if (release) {
        zkl_lock_phase phase = zkl_lock_phase_of(x->lock);
        if (phase == ZKL_LOCK_ACQUIRING)
            zkl_lock_cancel(x->lock);
        else if (phase == ZKL_LOCK_HELD)
            zkl_lock_release(x->lock);
    }
    x->retired = 1;
    list_push(&sp->busy, x);
    retired_changed(sp, x);
}

static void drop_items(zkl_set_partitioner *sp, int release)
{
    for (int i = 0; i < sp->item_count; i++)
        retire(sp, sp->items[i], release);
    free(sp->items);
    sp->items = NULL;
    sp->item_count = 0;
    sp->counted = 0;
    stop_timer(sp, &sp->conflict_timer_id);
}

void zkl_sp_tidy(zkl_set_partitioner *sp)
{
    if (!sp->s) { /* nothing works without the session: every lock let go is done */
        sp_lock *x;
        while ((x = list_pop(&sp->busy)) != NULL)
            list_push(&sp->idle, x);
    }
    sp_lock *x;
    while ((x = list_pop(&sp->idle)) != NULL)
        free_sp_lock(x);
}

/* Leaves the party (a join under way: the party is let go and never joins). */
static void leave_party(zkl_set_partitioner *sp)
{
    if (!sp->party || !sp->s)
        return;
    zkl_party_phase phase = zkl_party_phase_of(sp->party);
    if (phase == ZKL_PARTY_JOINED) {
        zkl_party_leave(sp->party);
    } else if (phase == ZKL_PARTY_JOINING) {
        /* safe even from a state listener: a joining party is never freed at once */
        zkl_party_free(sp->party);
        sp->party = NULL;
    }
}

/* ---------------------------------------------------------------- stepping */

static void submit_list(zkl_set_partitioner *sp)
{
    uint64_t id = zkl_op_children(sp->s, sp->party_path, 1, &sp->route);
    if (id == 0) {
        fail(sp, ZKL_SP_FAILED_ERROR, ZSYSTEMERROR);
        return;
    }
    sp->inflight += 2; /* the op and its watch each come back once */
    sp->list_op_id = sp->party_watch_id = id;
}

/* Moves to step; LIST and REWATCH run now when connected, else once CONNECTED. */
static void go(zkl_set_partitioner *sp, sp_step step)
{
    sp->step = step;
    sp->list_op_id = 0;
    sp->parked = 0;
    if (step != STEP_LIST && step != STEP_REWATCH)
        return;
    if (connected(sp))
        submit_list(sp);
    else
        sp->parked = 1;
}

static void fail(zkl_set_partitioner *sp, zkl_sp_failure why, int rc)
{
    if (sp->state == ZKL_SP_FAILURE)
        return;
    sp->failure = why;
    sp->rc = rc;
    stop_timer(sp, &sp->settle_timer_id);
    sp->party_watch_id = 0;
    drop_items(sp, 1);
    leave_party(sp);
    go(sp, STEP_NONE);
    set_state(sp, ZKL_SP_FAILURE);
}

/* Abandons the attempt under way and lists the party again (it changed, or the set did). */
static void start_over(zkl_set_partitioner *sp)
{
    drop_items(sp, 1);
    stop_timer(sp, &sp->settle_timer_id);
    go(sp, STEP_LIST);
}

static int allocating_after_listing(const zkl_set_partitioner *sp)
{
    return sp->state == ZKL_SP_ALLOCATING &&
           (sp->step == STEP_SETTLE || sp->step == STEP_PARTITION || sp->step == STEP_ACQUIRE);
}

/* Whether item x counts in sp->counted: while releasing, its lock still holds its node;
 * else its lock is held. */
static int counts(const zkl_set_partitioner *sp, const sp_lock *x)
{
    if (sp->step == STEP_RELEASE)
        return zkl_lock_is_held(x->lock);
    return zkl_lock_phase_of(x->lock) == ZKL_LOCK_HELD;
}

static void count_item(zkl_set_partitioner *sp, sp_lock *x)
{
    int c = counts(sp, x);
    sp->counted += c - x->counted;
    x->counted = c;
}

/* Counts every item again: the count must be right before the state changes on it. */
static void recount(zkl_set_partitioner *sp)
{
    sp->counted = 0;
    for (int i = 0; i < sp->item_count; i++) {
        sp->items[i]->counted = 0;
        count_item(sp, sp->items[i]);
    }
}

/* Whether item x's acquire failed; fails the partitioner if so. */
static int acquire_failed(zkl_set_partitioner *sp, const sp_lock *x)
{
    int rc;
    if (zkl_lock_phase_of(x->lock) == ZKL_LOCK_ACQUIRING ||
        zkl_lock_outcome_of(x->lock, &rc) != ZKL_LOCK_FAILED)
        return 0;
    fail(sp, zkl_rc_triage(rc) == ZKL_RC_CLOSED ? ZKL_SP_FAILED_CLOSED : ZKL_SP_FAILED_ERROR,
         rc);
    return 1;
}

/* Whether item x's release failed (kazoo: _fail_out); fails the partitioner if so. */
static int release_failed(zkl_set_partitioner *sp, const sp_lock *x)
{
    if (zkl_lock_phase_of(x->lock) != ZKL_LOCK_HELD || zkl_lock_release_rc(x->lock) == ZOK)
        return 0;
    fail(sp, ZKL_SP_FAILED_ERROR, zkl_lock_release_rc(x->lock));
    return 1;
}

/* Item x's lock moved (x NULL: look at every item). */
static void check_acquired(zkl_set_partitioner *sp, sp_lock *x)
{
    if (x) {
        count_item(sp, x);
        if (acquire_failed(sp, x))
            return;
    } else {
        recount(sp);
        for (int i = 0; i < sp->item_count; i++)
            if (acquire_failed(sp, sp->items[i]))
                return;
    }
    if (sp->counted < sp->item_count)
        return;
    if (x) { /* make sure: a state change may have moved a lock without an event */
        recount(sp);
        if (sp->counted < sp->item_count)
            return;
    }
    stop_timer(sp, &sp->conflict_timer_id);
    go(sp, STEP_NONE);
    set_state(sp, ZKL_SP_ACQUIRED);
}

/* Item x's lock moved while releasing (x NULL: look at every item). */
static void check_released(zkl_set_partitioner *sp, sp_lock *x)
{
    if (x) {
        count_item(sp, x);
        if (release_failed(sp, x))
            return;
    } else {
        recount(sp);
        for (int i = 0; i < sp->item_count; i++)
            if (release_failed(sp, sp->items[i]))
                return;
    }
    if (sp->counted > 0)
        return;
    if (x) {
        recount(sp);
        if (sp->counted > 0)
            return;
    }
    drop_items(sp, 0);
    set_state(sp, ZKL_SP_ALLOCATING);
    go(sp, STEP_LIST);
}

/* ---------------------------------------------------------------- events */

static void listed(zkl_set_partitioner *sp, const zkl_event *ev)
{
    switch (zkl_rc_triage(ev->rc)) {
    case ZKL_RC_CLOSED:
    case ZKL_RC_LOST:
        return; /* LOST follows, and fails the partitioner */
    case ZKL_RC_RETRY:
        go(sp, sp->step); /* again, once connected */
        return;
    case ZKL_RC_ANSWER:
        if (ev->rc == ZOK)
            break;
        fail(sp, ZKL_SP_FAILED_ERROR, ev->rc); /* e.g. NONODE: the party's path was deleted */
        return;
    }
    zkl_names listing = {0};
    if (zkl_names_copy_sorted(&listing, ev->strings, ev->string_count) != 0) {
        fail(sp, ZKL_SP_FAILED_ERROR, ZSYSTEMERROR);
        return;
    }
    int changed = !zkl_names_equal(&listing, &sp->members);
    zkl_names_free(&sp->members);
    sp->members = listing;
    if (!zkl_names_contains(&sp->members, sp->node)) {
        fail(sp, ZKL_SP_FAILED_ERROR, ZNONODE); /* own member node is gone (deleted by hand) */
        return;
    }
    if (sp->step == STEP_REWATCH) { /* ACQUIRED, watching again */
        go(sp, STEP_NONE);
        if (changed)
            set_state(sp, ZKL_SP_RELEASE);
        return;
    }
    sp->step = STEP_SETTLE;
    sp->settle_timer_id = start_timer(sp, sp->time_boundary_ms);
}

static void party_changed(zkl_set_partitioner *sp, const zkl_event *ev)
{
    int dropped = ev->type == ZOO_NOTWATCHING_EVENT;
    if (dropped && ev->id == sp->list_op_id)
        return; /* not registered: the listing's own result decides */
    if (allocating_after_listing(sp)) {
        start_over(sp);
    } else if (sp->state == ZKL_SP_ACQUIRED && sp->step == STEP_NONE) {
        if (dropped)
            go(sp, STEP_REWATCH); /* no change seen, but no watch either: look again */
        else
            set_state(sp, ZKL_SP_RELEASE);
    }
}

static void settled(zkl_set_partitioner *sp)
{
    if (sp->state != ZKL_SP_ALLOCATING || sp->step != STEP_SETTLE)
        return;
    sp->attempt++;
    sp->step = STEP_PARTITION;
    notify(sp, ZKL_SP_NOTIFY_PARTITION);
}

/* A conflict window: conflict_timeout from now, or from the next lock held. */
static void start_conflict_window(zkl_set_partitioner *sp)
{
    sp->window_counted = sp->counted;
    sp->conflict_timer_id = start_timer(sp, sp->conflict_timeout_ms);
}

static void conflict_check(zkl_set_partitioner *sp)
{
    if (sp->state != ZKL_SP_ALLOCATING || sp->step != STEP_ACQUIRE || !connected(sp))
        return; /* disconnected: CONNECTED starts a new window */
    if (sp->counted > sp->window_counted) { /* locks came free meanwhile: a slow releaser */
        start_conflict_window(sp);
        return;
    }
    for (int i = 0; i < sp->item_count; i++) {
        const char *blocker = zkl_lock_blocker(sp->items[i]->lock);
        if (blocker) {
            free(sp->conflict_item);
            free(sp->conflict_blocker);
            sp->conflict_item = strdup(sp->items[i]->name);
            sp->conflict_blocker = strdup(blocker);
            fail(sp, ZKL_SP_FAILED_CONFLICT, ZOK);
            return;
        }
    }
    start_conflict_window(sp); /* slow, not blocked: give it another window */
}

static void on_timer(zkl_set_partitioner *sp, const zkl_event *ev)
{
    if (ev->id == sp->settle_timer_id) {
        sp->settle_timer_id = 0;
        settled(sp);
    } else if (ev->id == sp->conflict_timer_id) {
        sp->conflict_timer_id = 0;
        conflict_check(sp);
    }
}

static void destroy(zkl_set_partitioner *sp)
{
    if (sp->s && sp->listening)
        zkl_session_remove_state_listener(sp->s, on_state, sp);
    free(sp->party_path);
    free(sp->lock_path);
    free(sp->identifier);
    free(sp->node);
    free(sp->conflict_item);
    free(sp->conflict_blocker);
    zkl_names_free(&sp->members);
    free(sp->items);
    zkl_acl_free(&sp->acl);
    free(sp);
}

static void maybe_destroy(zkl_set_partitioner *sp)
{
    if (sp->orphaned && sp->inflight <= 0)
        destroy(sp);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_set_partitioner *sp = ctx;
    if (ev->kind == ZKL_EV_TIMER) { /* timers are not counted: they are taken back */
        if (!sp->orphaned && sp->s)
            on_timer(sp, ev);
        zkl_sp_tidy(sp);
        return;
    }
    sp->inflight--;
    if (sp->orphaned || !sp->s) {
        if (ev->kind == ZKL_EV_OP && ev->watch_requested == 0 && ev->op == ZKL_OP_CHILDREN)
            sp->inflight--; /* out of memory: its watch never comes */
        maybe_destroy(sp);
        return;
    }
    if (ev->kind == ZKL_EV_OP) {
        if (!ev->watch_requested) { /* out of memory: no watch will come */
            sp->inflight--;
            if (sp->party_watch_id == ev->id)
                sp->party_watch_id = 0;
        }
        if (ev->id == sp->list_op_id) {
            sp->list_op_id = 0;
            listed(sp, ev);
        }
    } else if (ev->kind == ZKL_EV_WATCH) {
        if (ev->id == sp->party_watch_id) {
            sp->party_watch_id = 0;
            party_changed(sp, ev);
        }
    }
    zkl_sp_tidy(sp);
}

/* A lock (of the attempt, or let go) handled a routed event: a safe point.  Session state
 * changes (state != ZKL_LOCK_NO_STATE) are the partitioner's own listener's business; they
 * only move a lock let go to the idle list, to be freed at the next safe point. */
static void lock_changed(void *ctx, int state)
{
    sp_lock *x = ctx;
    zkl_set_partitioner *sp = x->sp;
    if (x->retired)
        retired_changed(sp, x);
    if (state != ZKL_LOCK_NO_STATE)
        return;
    if (!x->retired) {
        if (sp->state == ZKL_SP_ALLOCATING && sp->step == STEP_ACQUIRE)
            check_acquired(sp, x);
        else if (sp->step == STEP_RELEASE)
            check_released(sp, x);
    }
    zkl_sp_tidy(sp);
}

/* The party handled an event: the join may have ended. */
static void party_progress(void *ctx)
{
    zkl_set_partitioner *sp = ctx;
    if (sp->state == ZKL_SP_ALLOCATING && sp->step == STEP_JOIN && sp->party) {
        zkl_party_phase phase = zkl_party_phase_of(sp->party);
        int rc = zkl_party_rc(sp->party);
        if (phase == ZKL_PARTY_JOINED) {
            sp->joined = 1;
            go(sp, STEP_LIST);
        } else if (phase == ZKL_PARTY_IDLE)
            fail(sp, zkl_rc_triage(rc) == ZKL_RC_CLOSED ? ZKL_SP_FAILED_CLOSED
                                                          : ZKL_SP_FAILED_ERROR,
                 rc != ZOK ? rc : ZSYSTEMERROR);
    }
    zkl_sp_tidy(sp);
}

/* Called from the session's listener walk: must not free anything (see the top). */
static void on_state(zkl_session *s, zkl_state state, void *ctx)
{
    zkl_set_partitioner *sp = ctx;
    if (sp->orphaned || sp->state == ZKL_SP_FAILURE)
        return;
    if (state == ZKL_CONNECTED) {
        if (sp->parked)
            go(sp, sp->step);
        else if (sp->step == STEP_ACQUIRE && sp->conflict_timer_id == 0)
            start_conflict_window(sp);
    } else if (state == ZKL_SUSPENDED) {
        stop_timer(sp, &sp->conflict_timer_id); /* a new window once reconnected */
        if (sp->state == ZKL_SP_ACQUIRED) { /* ownership can no longer be vouched for */
            go(sp, STEP_NONE); /* a REWATCH under way is moot */
            set_state(sp, ZKL_SP_RELEASE);
        }
        if (sp->step == STEP_SETTLE) {
            stop_timer(sp, &sp->settle_timer_id); /* changes may go unseen: settle again */
            go(sp, STEP_LIST);
        }
    } else if (zkl_session_is_stopped(s) || zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED) {
        fail(sp, ZKL_SP_FAILED_CLOSED, ZCLOSING);
    } else {
        fail(sp, ZKL_SP_FAILED_LOST, ZSESSIONEXPIRED);
    }
}

/* ---------------------------------------------------------------- public */

zkl_set_partitioner *zkl_sp_new(zkl_session *s, const char *path, const char *identifier,
                                int len, const zkl_sp_options *o, const struct ACL_vector *acl)
{
    zkl_set_partitioner *sp = calloc(1, sizeof *sp);
    if (!sp)
        return NULL;
    sp->s = s;
    sp->route.fn = on_route;
    sp->route.ctx = sp;
    sp->id = zkl_session_new_target(s);
    sp->time_boundary_ms = o->time_boundary_ms;
    sp->conflict_timeout_ms = o->conflict_timeout_ms;
    sp->identifier_len = len > 0 ? len : 0;
    sp->identifier = malloc((size_t)sp->identifier_len + 1);
    sp->party_path = zkl_join_path(path, "party");
    sp->lock_path = zkl_join_path(path, "locks");
    errno = 0;
    if (!sp->identifier || !sp->party_path || !sp->lock_path ||
        zkl_acl_copy(&sp->acl, acl ? acl : &ZOO_OPEN_ACL_UNSAFE) != 0)
        goto fail;
    if (len > 0)
        memcpy(sp->identifier, identifier, (size_t)len);
    sp->identifier[sp->identifier_len] = '\0';
    /* listening before the party (and the locks) do: on LOST this one runs first */
    if (zkl_session_add_state_listener(s, on_state, sp) != 0)
        goto fail;
    sp->listening = 1;
    sp->party = zkl_party_new(s, sp->party_path, sp->identifier, sp->identifier_len,
                              ZKL_PARTY_SHALLOW, &sp->acl);
    if (!sp->party || (sp->node = strdup(zkl_party_node(sp->party))) == NULL)
        goto fail;
    zkl_party_observe(sp->party, party_progress, sp);
    sp->state = ZKL_SP_ALLOCATING;
    sp->step = STEP_JOIN;
    zkl_party_join(sp->party);
    return sp;
fail:
    if (!errno)
        errno = ENOMEM;
    zkl_party_free(sp->party);
    destroy(sp);
    return NULL;
}

void zkl_sp_free(zkl_set_partitioner *sp)
{
    if (!sp)
        return;
    if (sp->s) {
        drop_items(sp, 1);
        leave_party(sp);
        stop_timer(sp, &sp->settle_timer_id);
    } else {
        drop_items(sp, 0);
    }
    sp->orphaned = 1;
    sp_list *lists[] = {&sp->busy, &sp->idle};
    for (int i = 0; i < 2; i++) {
        sp_lock *x;
        while ((x = list_pop(lists[i])) != NULL)
            free_sp_lock(x); /* a busy one finishes its release as an orphan */
    }
    zkl_party_free(sp->party); /* finishes its leave as an orphan */
    sp->party = NULL;
    maybe_destroy(sp);
}

void zkl_sp_forget_session(zkl_set_partitioner *sp)
{
    for (int i = 0; i < sp->item_count; i++)
        zkl_lock_forget_session(sp->items[i]->lock);
    for (sp_lock *x = sp->busy.head; x; x = x->next)
        zkl_lock_forget_session(x->lock);
    for (sp_lock *x = sp->idle.head; x; x = x->next)
        zkl_lock_forget_session(x->lock);
    if (sp->party)
        zkl_party_forget_session(sp->party);
    if (sp->state != ZKL_SP_FAILURE) {
        sp->failure = ZKL_SP_FAILED_CLOSED;
        sp->rc = ZCLOSING;
        sp->state = ZKL_SP_FAILURE;
    }
    sp->s = NULL;
    sp->inflight = 0; /* the session delivered (or dropped) everything before it went */
    sp->parked = 0;
    sp->step = STEP_NONE;
    sp->list_op_id = sp->party_watch_id = 0;
    sp->settle_timer_id = sp->conflict_timer_id = 0;
}

uint64_t zkl_sp_wanted(const zkl_set_partitioner *sp, char *const **members, int *count)
{
    if (sp->state != ZKL_SP_ALLOCATING || sp->step != STEP_PARTITION)
        return 0;
    *members = sp->members.items;
    *count = sp->members.count;
    return sp->attempt;
}

int zkl_sp_assign(zkl_set_partitioner *sp, uint64_t attempt, const char *const *names,
                  int count)
{
    zkl_sp_tidy(sp);
    if (!sp->s || sp->state != ZKL_SP_ALLOCATING || sp->step != STEP_PARTITION ||
        attempt != sp->attempt)
        return 0;
    sp->item_count = 0; /* (drop_items left none) */
    if ((sp->items = calloc(count > 0 ? (size_t)count : 1, sizeof *sp->items)) == NULL)
        goto no_memory;
    for (int i = 0; i < count; i++) {
        char *path = zkl_join_path(sp->lock_path, names[i]);
        sp_lock *x = calloc(1, sizeof *x);
        char *name = strdup(names[i]);
        zkl_lock *l = path && name && x ? zkl_lock_new(sp->s, path, sp->identifier,
                                                       sp->identifier_len, ZKL_LOCK_EXCLUSIVE,
                                                       &sp->acl)
                                        : NULL;
        free(path);
        if (!l) {
            free(name);
            free(x);
            goto no_memory;
        }
        x->sp = sp;
        x->lock = l;
        x->name = name;
        sp->items[sp->item_count++] = x;
        zkl_lock_observe(l, lock_changed, x);
        zkl_lock_batch_writes(l, 1); /* a share's creates and deletes go out as multis */
        zkl_lock_acquire(l, 1, 1); /* the session's window paces what goes out (ops.c) */
    }
    sp->step = STEP_ACQUIRE;
    if (connected(sp))
        start_conflict_window(sp);
    check_acquired(sp, NULL); /* an empty share is acquired at once */
    return 1;
no_memory:
    fail(sp, ZKL_SP_FAILED_ERROR, ZSYSTEMERROR);
    errno = ENOMEM;
    return -1;
}

void zkl_sp_fail(zkl_set_partitioner *sp, uint64_t attempt)
{
    zkl_sp_tidy(sp);
    if (sp->s && sp->state == ZKL_SP_ALLOCATING && sp->step == STEP_PARTITION &&
        attempt == sp->attempt)
        fail(sp, ZKL_SP_FAILED_PARTITION, ZOK);
}

void zkl_sp_release_set(zkl_set_partitioner *sp)
{
    zkl_sp_tidy(sp);
    if (!sp->s)
        return;
    if (allocating_after_listing(sp)) {
        start_over(sp);
        return;
    }
    if ((sp->state != ZKL_SP_ACQUIRED && sp->state != ZKL_SP_RELEASE) ||
        sp->step == STEP_RELEASE)
        return;
    sp->party_watch_id = 0; /* the party is listed again afterwards */
    set_state(sp, ZKL_SP_RELEASE);
    go(sp, STEP_RELEASE);
    for (int i = 0; i < sp->item_count; i++)
        zkl_lock_release(sp->items[i]->lock);
    check_released(sp, NULL);
}

void zkl_sp_release_in_background(zkl_set_partitioner *sp)
{
    if (sp->step != STEP_RELEASE)
        return;
    for (int i = 0; i < sp->item_count; i++)
        zkl_lock_release_in_background(sp->items[i]->lock);
    check_released(sp, NULL);
}

void zkl_sp_set_changed(zkl_set_partitioner *sp)
{
    zkl_sp_tidy(sp);
    if (!sp->s)
        return;
    if (allocating_after_listing(sp)) {
        start_over(sp);
    } else if (sp->state == ZKL_SP_ACQUIRED) {
        go(sp, STEP_NONE); /* a REWATCH under way is moot */
        set_state(sp, ZKL_SP_RELEASE);
    }
}

void zkl_sp_finish(zkl_set_partitioner *sp)
{
    zkl_sp_tidy(sp);
    if (!sp->s)
        return;
    if (sp->state != ZKL_SP_FAILURE)
        fail(sp, ZKL_SP_FAILED_FINISHED, ZOK);
    else
        leave_party(sp);
}

int zkl_sp_joining(const zkl_set_partitioner *sp)
{
    return sp->state == ZKL_SP_ALLOCATING && sp->step == STEP_JOIN;
}

int zkl_sp_joined(const zkl_set_partitioner *sp)
{
    return sp->joined;
}

int zkl_sp_busy(zkl_set_partitioner *sp)
{
    zkl_sp_tidy(sp);
    if (!sp->s)
        return 0;
    if (sp->step == STEP_RELEASE || sp->busy.count > 0)
        return 1;
    return sp->party && (zkl_party_phase_of(sp->party) == ZKL_PARTY_LEAVING ||
                         (sp->state == ZKL_SP_FAILURE &&
                          zkl_party_phase_of(sp->party) == ZKL_PARTY_JOINING));
}

long zkl_sp_releasing(const zkl_set_partitioner *sp)
{
    return (sp->step == STEP_RELEASE ? sp->counted : 0) + sp->busy.count;
}

zkl_sp_state zkl_sp_state_of(const zkl_set_partitioner *sp)
{
    return sp->state;
}

zkl_sp_failure zkl_sp_failure_of(const zkl_set_partitioner *sp, int *rc)
{
    if (rc)
        *rc = sp->rc;
    return sp->failure;
}

const char *zkl_sp_conflict(const zkl_set_partitioner *sp, const char **blocker)
{
    if (blocker)
        *blocker = sp->conflict_blocker;
    return sp->conflict_item;
}

int zkl_sp_item_count(const zkl_set_partitioner *sp)
{
    if (sp->state != ZKL_SP_ACQUIRED && sp->state != ZKL_SP_RELEASE)
        return 0;
    return sp->item_count;
}

const char *zkl_sp_item(const zkl_set_partitioner *sp, int i)
{
    if (i < 0 || i >= zkl_sp_item_count(sp) || !zkl_lock_is_held(sp->items[i]->lock))
        return NULL;
    return sp->items[i]->name;
}

int zkl_sp_fencing_token(const zkl_set_partitioner *sp, const char *name, int64_t *token)
{
    int n = zkl_sp_item_count(sp);
    for (int i = 0; i < n; i++) {
        if (strcmp(sp->items[i]->name, name) == 0)
            return zkl_lock_fencing_token(sp->items[i]->lock, token);
    }
    return -1;
}

const char *zkl_sp_node(const zkl_set_partitioner *sp)
{
    return sp->node;
}

uint64_t zkl_sp_id(const zkl_set_partitioner *sp)
{
    return sp->id;
}

long zkl_sp_inflight(const zkl_set_partitioner *sp)
{
    return sp->inflight;
}
