/*
 * allocator_claims.c — the allocator's items: one record per item it wants or holds, each a
 * small state machine over the item's owner node (see allocator_private.h for the states).
 *
 * Guarantees (the heart of allocator.h's "no two sessions hold one item"):
 * - An item counts as held only after OUR create of its EPHEMERAL owner node succeeded, or
 *   after reading that node showed our session as its ephemeralOwner and our identifier as
 *   its data (a create whose reply was lost).  A node held by another session is watched and
 *   the create is tried again once it is gone.
 * - A held item the owner was told about is deleted only after the owner said it released
 *   it (zkl_claims_released).  A delete whose reply was lost is never sent blindly again:
 *   the node is read first, and deleted only if it is still ours.
 * - Creates go out only while CONNECTED, while the allocator runs, and while no release is
 *   under way (releases first, then claims).
 * - Records live while they are wanted, held, queued, dirty or have something in flight; each
 *   op or watch is counted on its record and on the allocator, so nothing is freed under an
 *   event.
 *
 * - At most CLAIM_WINDOW item ops are unanswered at once (allocator.h): a record whose op
 *   finds the window full is parked, in order, and looked at again as answers come back.
 *
 * Work per event is O(1), whatever the share: a record that changed goes on the dirty list and
 * only dirty records are looked at; the counts (releasing, busy, done) move with each record's
 * own change (account()); a new assignment touches the records it or the previous one wants
 * (the wanted array), not every record.  Only what happens once per rebalance or connection
 * walks the share: claims opening (the last release done, CONNECTED again, running), a new
 * target, the session lost.
 */
#include <stdlib.h>
#include <string.h>

#include "../../core/ops.h"
#include "allocator_private.h"
#include "../common.h"

enum { CLAIM_WINDOW = ZKL_ALLOCATOR_CLAIM_WINDOW };

/* ---------------------------------------------------------------- the table */

static uint64_t hash_string(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

item_rec *zkl_claims_find(zkl_allocator *a, const char *item)
{
    if (a->bucket_count == 0)
        return NULL;
    item_rec *r = a->buckets[hash_string(item) & (a->bucket_count - 1)];
    while (r && strcmp(r->item, item) != 0)
        r = r->next;
    return r;
}

static int grow_table(zkl_allocator *a)
{
    size_t count = a->bucket_count ? a->bucket_count * 2 : 64;
    item_rec **buckets = calloc(count, sizeof *buckets);
    if (!buckets)
        return -1;
    for (size_t i = 0; i < a->bucket_count; i++) {
        item_rec *r = a->buckets[i];
        while (r) {
            item_rec *next = r->next;
            size_t b = hash_string(r->item) & (count - 1);
            r->next = buckets[b];
            buckets[b] = r;
            r = next;
        }
    }
    free(a->buckets);
    a->buckets = buckets;
    a->bucket_count = count;
    return 0;
}

static void count_bits(zkl_allocator *a, unsigned bits, long by);

static item_rec *add_record(zkl_allocator *a, const char *item)
{
    if (a->rec_count >= a->bucket_count && grow_table(a) != 0)
        return NULL;
    item_rec *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    char *name = zkl_allocator_node_name(item);
    r->item = strdup(item);
    r->node = name ? zkl_join_path(a->owners_path, name) : NULL;
    free(name);
    if (!r->item || !r->node) {
        free(r->item);
        free(r->node);
        free(r);
        return NULL;
    }
    r->a = a;
    size_t b = hash_string(item) & (a->bucket_count - 1);
    r->next = a->buckets[b];
    a->buckets[b] = r;
    a->rec_count++;
    return r;
}

static void free_record(zkl_allocator *a, item_rec *r)
{
    item_rec **p = &a->buckets[hash_string(r->item) & (a->bucket_count - 1)];
    while (*p != r)
        p = &(*p)->next;
    *p = r->next;
    a->rec_count--;
    count_bits(a, r->bits, -1);
    free(r->item);
    free(r->node);
    free(r);
}

/* Nothing left to do for r, and nothing of it in flight: it can go. */
static int idle(const item_rec *r)
{
    return r->st == CLAIM_NONE && !r->want && !r->queued && !r->release_asked &&
           !r->released && !r->reported && !r->dirty && !r->parked && r->inflight == 0;
}

enum { BIT_RELEASING = 1, BIT_BUSY = 2, BIT_DONE = 4 };

/* What r counts in: being given up; needing us before a leave ends; owned and reported, as
 * the assignment wants. */
static unsigned bits_of(const item_rec *r)
{
    unsigned b = 0;
    if (r->release_asked || r->released || r->st == CLAIM_DELETING)
        b |= BIT_RELEASING;
    if (r->st == CLAIM_CREATING || r->st == CLAIM_CHECKING || r->st == CLAIM_HELD ||
        r->st == CLAIM_DELETING || r->release_asked || r->released)
        b |= BIT_BUSY;
    if (r->want && r->st == CLAIM_HELD && r->reported && !r->queued && !r->release_asked &&
        !r->released)
        b |= BIT_DONE;
    return b;
}

static void count_bits(zkl_allocator *a, unsigned bits, long by)
{
    if (bits & BIT_RELEASING)
        a->releasing += (size_t)by;
    if (bits & BIT_BUSY)
        a->busy_count += (size_t)by;
    if (bits & BIT_DONE)
        a->done_count += (size_t)by;
}

/* r changed: move the counts it is in. */
static void account(item_rec *r)
{
    unsigned now = bits_of(r);
    if (now != r->bits) {
        count_bits(r->a, r->bits, -1);
        count_bits(r->a, now, 1);
        r->bits = now;
    }
}

/* r needs a look at the next reconcile.  In order: a target's records are looked at in its
 * (sorted) order, so a member claims, and gives up, its items in the order the sticky
 * strategy keeps them (strategy.c: keep_current_owners); what a member holds halfway through
 * a handover is then what a new assignment lets it keep. */
static void mark(item_rec *r)
{
    zkl_allocator *a = r->a;
    if (r->dirty)
        return;
    r->dirty = 1;
    r->dirty_next = NULL;
    if (a->dirty_tail)
        a->dirty_tail->dirty_next = r;
    else
        a->dirty_head = r;
    a->dirty_tail = r;
}

static void mark_all(zkl_allocator *a)
{
    for (size_t i = 0; i < a->bucket_count; i++)
        for (item_rec *r = a->buckets[i]; r; r = r->next) {
            r->failed = 0; /* a new connection: retry what failed */
            mark(r);
        }
}

size_t zkl_claims_releasing(const zkl_allocator *a)
{
    return a->releasing;
}

int zkl_claims_busy(const zkl_allocator *a)
{
    return a->busy_count > 0;
}

int zkl_claims_settled(const zkl_allocator *a)
{
    return a->done_count == a->wanted_n && a->busy_count == a->done_count &&
           a->acquired_n == 0 && a->release_n == 0 && a->lost_n == 0;
}

/* ---------------------------------------------------------------- ops */

static void on_item_route(zkl_session *s, const zkl_event *ev, void *ctx);

static uint64_t counted(item_rec *r, uint64_t id, int watch)
{
    if (id) {
        r->inflight += 1 + watch;
        r->a->inflight += 1 + watch;
        r->a->claim_ops++;
    }
    return id;
}

/* r waits for room in the claim window (it is looked at again when there is). */
static void park(item_rec *r)
{
    zkl_allocator *a = r->a;
    if (r->parked)
        return;
    r->parked = 1;
    r->park_next = NULL;
    if (a->park_tail)
        a->park_tail->park_next = r;
    else
        a->park_head = r;
    a->park_tail = r;
}

/* Whether r's op must wait: the window is full (r is parked). */
static int window_full(item_rec *r)
{
    if (r->a->claim_ops < CLAIM_WINDOW)
        return 0;
    park(r);
    return 1;
}

static void send_create(item_rec *r)
{
    zkl_allocator *a = r->a;
    zkl_route route = {on_item_route, r};
    r->op_id = counted(r, zkl_op_create(a->s, r->node, a->identifier, (int)strlen(a->identifier),
                                        &a->acl, ZOO_EPHEMERAL, 1, &route), 0);
    r->st = r->op_id ? CLAIM_CREATING : CLAIM_NONE;
    if (!r->op_id)
        r->failed = ZSYSTEMERROR;
}

/* Reads the node with a watch: whose is it?  (From NONE, or from HELD when unsure.) */
static void send_check(item_rec *r)
{
    zkl_route route = {on_item_route, r};
    uint64_t id = counted(r, zkl_op_get(r->a->s, r->node, 1, &route), 1);
    if (!id) {
        r->failed = ZSYSTEMERROR;
        return;
    }
    r->op_id = r->watch_id = id;
    r->st = CLAIM_CHECKING;
}

static void send_delete(item_rec *r)
{
    zkl_route route = {on_item_route, r};
    r->op_id = counted(r, zkl_op_delete(r->a->s, r->node, -1, &route), 0);
    if (r->op_id)
        r->st = CLAIM_DELETING;
    else
        r->failed = ZSYSTEMERROR;
}

static void queue_acquired(item_rec *r)
{
    zkl_allocator *a = r->a;
    if (r->queued)
        return;
    if (a->acquired_n == a->acquired_cap) {
        size_t cap = a->acquired_cap ? a->acquired_cap * 2 : 16;
        item_rec **q = realloc(a->acquired_q, cap * sizeof *q);
        if (!q)
            return; /* reported at a later pass */
        a->acquired_q = q;
        a->acquired_cap = cap;
    }
    a->acquired_q[a->acquired_n++] = r;
    r->queued = 1;
}

/* The owner knew r and it is gone without a release: tell it. */
static void report_lost(item_rec *r)
{
    zkl_allocator *a = r->a;
    if (r->reported)
        zkl_alloc_push_string(&a->lost_q, &a->lost_n, &a->lost_cap, r->item);
    r->reported = r->release_asked = r->released = 0;
}

/* ---------------------------------------------------------------- deciding */

/* What r needs besides a new claim: releases, deletes, news. */
static void settle_record(item_rec *r)
{
    zkl_allocator *a = r->a;
    int connected = zkl_alloc_connected(a);
    switch (r->st) {
    case CLAIM_WAITING:
        if (!r->want)
            r->st = CLAIM_NONE; /* its watch comes back later, unheeded */
        break;
    case CLAIM_HELD:
        if (r->released || (!r->want && !r->reported)) {
            if (connected && !r->failed && !window_full(r)) {
                if (r->unsure)
                    send_check(r);
                else
                    send_delete(r);
            }
        } else if (!r->want) {
            if (!r->release_asked &&
                zkl_alloc_push_string(&a->release_q, &a->release_n, &a->release_cap,
                                      r->item) == 0)
                r->release_asked = 1;
        } else if (!r->reported) {
            queue_acquired(r);
        }
        break;
    default:
        break;
    }
}

static int may_claim(const zkl_allocator *a)
{
    return a->s && a->phase == ZKL_ALLOCATOR_RUNNING && zkl_alloc_connected(a);
}

static void claim(item_rec *r)
{
    if (r->st != CLAIM_NONE || !r->want || r->failed || window_full(r))
        return;
    if (r->unsure)
        send_check(r);
    else
        send_create(r);
}

static void settle_batch(item_rec *batch)
{
    for (item_rec *r = batch; r; r = r->dirty_next) {
        settle_record(r);
        account(r);
    }
}

static void claim_batch(item_rec *batch)
{
    for (item_rec *r = batch; r; r = r->dirty_next) {
        claim(r);
        account(r);
    }
}

/* The batch has been looked at: its records may be marked again, and idle ones go. */
static void end_batch(zkl_allocator *a, item_rec *batch)
{
    item_rec *r = batch;
    while (r) {
        item_rec *next = r->dirty_next;
        r->dirty = 0;
        r->dirty_next = NULL;
        if (idle(r))
            free_record(a, r);
        r = next;
    }
}

/* Up to room parked records, oldest first, taken off the parked list as a batch. */
static item_rec *unpark(zkl_allocator *a, long room)
{
    item_rec *batch = NULL, **tail = &batch;
    while (a->park_head && room-- > 0) {
        item_rec *r = a->park_head;
        a->park_head = r->park_next;
        if (!a->park_head)
            a->park_tail = NULL;
        r->parked = 0;
        r->park_next = NULL;
        if (r->dirty)
            continue; /* on the dirty list: the next reconcile looks at it anyway */
        r->dirty = 1;
        r->dirty_next = NULL;
        *tail = r;
        tail = &r->dirty_next;
    }
    return batch;
}

void zkl_claims_reconcile(zkl_allocator *a)
{
    if (!a->s)
        return;
    int connected = zkl_alloc_connected(a);
    if (connected && !a->was_connected)
        mark_all(a); /* deletes and claims held back while away */
    a->was_connected = connected;
    /* the batch keeps its dirty flags until the end, so nothing re-links it meanwhile */
    item_rec *batch = a->dirty_head;
    a->dirty_head = a->dirty_tail = NULL;
    settle_batch(batch);
    int open = may_claim(a) && a->releasing == 0;
    if (open && !a->claims_open) { /* claims may start: every wanted item */
        for (size_t i = 0; i < a->wanted_n; i++) {
            claim(a->wanted[i]);
            account(a->wanted[i]);
        }
    } else if (open) {
        claim_batch(batch);
    }
    a->claims_open = open;
    end_batch(a, batch);
    /* room in the window: the parked records, oldest first (each pass sends an op or takes a
     * record off the list for good, so this ends) */
    while (connected && a->park_head && a->claim_ops < CLAIM_WINDOW) {
        batch = unpark(a, CLAIM_WINDOW - a->claim_ops);
        settle_batch(batch);
        if (!(may_claim(a) && a->releasing == 0))
            a->claims_open = open = 0; /* a release began: claims wait for it */
        if (open)
            claim_batch(batch);
        end_batch(a, batch);
    }
}

/* The target is now exactly list (n records, each wanted once): the records the previous
 * target wanted and this one does not are unwanted. */
static void replace_target(zkl_allocator *a, item_rec **list, size_t n, uint64_t stamp)
{
    for (size_t i = 0; i < a->wanted_n; i++) {
        item_rec *r = a->wanted[i];
        if (r->target_stamp != stamp) {
            r->want = 0;
            r->failed = 0;
            account(r);
            mark(r);
        }
    }
    free(a->wanted);
    a->wanted = list;
    a->wanted_n = n;
}

void zkl_claims_clear_target(zkl_allocator *a)
{
    if (a->wanted_n == 0)
        return;
    replace_target(a, NULL, 0, ++a->target_stamp);
}

int zkl_claims_set_target(zkl_allocator *a, const zkl_json *items)
{
    size_t count = items && items->type == ZKL_JSON_ARRAY ? items->count : 0;
    item_rec **list = malloc((count ? count : 1) * sizeof *list);
    if (!list)
        return -1;
    uint64_t stamp = ++a->target_stamp;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const zkl_json *v = items->values[i];
        if (v->type != ZKL_JSON_STRING || v->string[0] == '\0')
            continue;
        item_rec *r = zkl_claims_find(a, v->string);
        if (!r)
            r = add_record(a, v->string);
        if (!r) { /* out of memory: the whole target again at a later pass */
            for (size_t k = 0; k < n; k++)
                list[k]->target_stamp = 0;
            free(list);
            return -1;
        }
        if (r->target_stamp == stamp)
            continue; /* listed twice */
        r->target_stamp = stamp;
        r->want = 1;
        r->failed = 0; /* a new look: retry what failed */
        account(r);
        mark(r);
        list[n++] = r;
    }
    replace_target(a, list, n, stamp);
    return 0;
}

/* ---------------------------------------------------------------- results */

static int own_node(const item_rec *r, const zkl_event *ev)
{
    int64_t session;
    char passwd[16];
    if (!ev->has_stat || zkl_session_client_id(r->a->s, &session, passwd) != 0)
        return 0;
    size_t n = strlen(r->a->identifier);
    return ev->stat.ephemeralOwner == session && ev->data_len == (int)n &&
           memcmp(ev->data, r->a->identifier, n) == 0;
}

static void created(item_rec *r, const zkl_event *ev)
{
    switch (ev->rc) {
    case ZOK:
        r->st = CLAIM_HELD;
        r->czxid = ev->stat.czxid;
        r->unsure = 0;
        break;
    case ZNODEEXISTS:
        r->st = CLAIM_NONE;
        r->unsure = 1; /* read it: whose is it? */
        break;
    case ZNONODE: /* the owners path is missing: make it, then create again */
        r->st = CLAIM_NONE;
        if (++r->ensure_rounds > ZKL_RETRY_LIMIT) {
            r->failed = ZNONODE;
        } else {
            uint64_t last;
            long before = r->inflight;
            zkl_route route = {on_item_route, r};
            zkl_create_path(r->a->s, r->a->owners_path, &r->a->acl, &route, &r->inflight,
                            &last);
            r->a->inflight += r->inflight - before; /* the create follows them, in order */
            r->a->claim_ops += r->inflight - before;
        }
        break;
    default:
        r->st = CLAIM_NONE;
        r->failed = ev->rc;
        break;
    }
}

static void checked(item_rec *r, const zkl_event *ev)
{
    if (ev->rc == ZOK && own_node(r, ev)) {
        r->st = CLAIM_HELD; /* ours: a create whose reply was lost, or not yet deleted */
        r->czxid = ev->stat.czxid;
        r->unsure = 0;
        return; /* the watch stays: it fires if the node goes */
    }
    if (ev->rc != ZOK && ev->rc != ZNONODE) {
        r->st = r->released ? CLAIM_HELD : CLAIM_NONE;
        r->failed = ev->rc;
        return;
    }
    r->unsure = 0;
    if (r->released || r->reported) { /* our node is gone (deleted, or someone else's now) */
        if (r->released)
            r->reported = r->release_asked = r->released = 0;
        else
            report_lost(r);
    }
    /* another session's node: wait for it to go (unless its watch came already) */
    r->st = ev->rc == ZOK && r->want && r->watch_id ? CLAIM_WAITING : CLAIM_NONE;
}

static void deleted(item_rec *r, const zkl_event *ev)
{
    if (ev->rc == ZOK || ev->rc == ZNONODE) {
        r->st = CLAIM_NONE;
        r->reported = r->release_asked = r->released = 0;
        r->czxid = 0;
    } else {
        r->st = CLAIM_HELD;
        r->failed = ev->rc;
    }
}

static void on_item_op(item_rec *r, const zkl_event *ev)
{
    switch (zkl_rc_triage(ev->rc)) {
    case ZKL_RC_LOST:
    case ZKL_RC_CLOSED:
        return; /* the state listener hears LOST and resets every record */
    case ZKL_RC_RETRY: /* unknown outcome: read the node before anything else */
        r->unsure = 1;
        r->st = r->st == CLAIM_DELETING || (r->st == CLAIM_CHECKING && r->released)
                    ? CLAIM_HELD
                    : CLAIM_NONE;
        return;
    default:
        break;
    }
    switch (r->st) {
    case CLAIM_CREATING: created(r, ev); break;
    case CLAIM_CHECKING: checked(r, ev); break;
    case CLAIM_DELETING: deleted(r, ev); break;
    default: break;
    }
}

static void on_item_watch(item_rec *r, const zkl_event *ev)
{
    if (ev->type == ZOO_NOTWATCHING_EVENT && ev->id == r->op_id)
        return; /* not registered: the read's own result decides */
    if (r->st == CLAIM_WAITING) {
        r->st = CLAIM_NONE; /* the other owner's node changed: try again */
    } else if (r->st == CLAIM_HELD && ev->type == ZOO_DELETED_EVENT && !r->released) {
        r->st = CLAIM_NONE; /* our node was deleted under us (not by us) */
        report_lost(r);
    }
}

static void on_item_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    item_rec *r = ctx;
    zkl_allocator *a = r->a;
    r->inflight--;
    a->inflight--;
    if (ev->kind == ZKL_EV_OP) {
        a->claim_ops--;
        if (ev->op == ZKL_OP_GET && !ev->watch_requested) { /* no watch will come */
            r->inflight--;
            a->inflight--;
            if (r->watch_id == ev->id)
                r->watch_id = 0;
        }
        if (ev->id == r->op_id && a->s) {
            r->op_id = 0;
            on_item_op(r, ev);
        }
    } else if (ev->kind == ZKL_EV_WATCH && ev->id == r->watch_id && a->s) {
        r->watch_id = 0;
        on_item_watch(r, ev);
    }
    if (a->s) {
        account(r);
        mark(r);
        zkl_claims_reconcile(a); /* r alone, or every claim once the last release is done */
    } else if (idle(r)) {
        free_record(a, r);
    }
    zkl_alloc_after_item_event(a); /* may free a */
}

/* ---------------------------------------------------------------- session changes */

static void clear_parked(zkl_allocator *a)
{
    item_rec *r = a->park_head;
    while (r) {
        item_rec *next = r->park_next;
        r->parked = 0;
        r->park_next = NULL;
        r = next;
    }
    a->park_head = a->park_tail = NULL;
}

void zkl_claims_lose_all(zkl_allocator *a)
{
    clear_parked(a);
    for (size_t i = 0; i < a->acquired_n; i++)
        a->acquired_q[i]->queued = 0;
    a->acquired_n = 0;
    free(a->wanted);
    a->wanted = NULL;
    a->wanted_n = 0;
    a->claims_open = 0;
    for (size_t i = 0; i < a->bucket_count; i++) {
        item_rec *r = a->buckets[i];
        while (r) {
            item_rec *next = r->next;
            report_lost(r);
            r->st = CLAIM_NONE;
            r->want = r->unsure = r->failed = r->ensure_rounds = 0;
            r->op_id = r->watch_id = 0; /* what comes back of them is stale */
            r->czxid = 0;
            account(r);
            if (idle(r))
                free_record(a, r);
            r = next;
        }
    }
}

void zkl_claims_free_all(zkl_allocator *a)
{
    a->park_head = a->park_tail = NULL; /* (its records go below) */
    for (size_t i = 0; i < a->bucket_count; i++) {
        item_rec *r = a->buckets[i];
        while (r) {
            item_rec *next = r->next;
            free(r->item);
            free(r->node);
            free(r);
            r = next;
        }
        a->buckets[i] = NULL;
    }
    a->rec_count = 0;
    a->acquired_n = 0;
    a->releasing = a->busy_count = a->done_count = 0;
    a->dirty_head = a->dirty_tail = NULL;
    free(a->wanted);
    a->wanted = NULL;
    a->wanted_n = 0;
    a->claims_open = 0;
}

void zkl_claims_abandon(zkl_allocator *a)
{
    for (size_t i = 0; i < a->bucket_count; i++) {
        for (item_rec *r = a->buckets[i]; r; r = r->next) {
            if (r->reported || r->release_asked) {
                r->release_asked = r->released = 1;
                r->reported = 0;
                account(r);
                mark(r);
            }
        }
    }
}

int zkl_claims_released(zkl_allocator *a, const char *item)
{
    item_rec *r = zkl_claims_find(a, item);
    if (!r || !r->release_asked || r->released)
        return 0;
    r->released = 1; /* still releasing (until deleted) */
    r->reported = 0;
    account(r);
    mark(r);
    return 1;
}

int zkl_claims_take_acquired(zkl_allocator *a, zkl_allocator_grant **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (a->acquired_n == 0)
        return 0;
    zkl_allocator_grant *grants = calloc(a->acquired_n, sizeof *grants);
    if (!grants)
        return -1;
    size_t count = 0;
    for (size_t i = 0; i < a->acquired_n; i++) {
        item_rec *r = a->acquired_q[i];
        if (r->st != CLAIM_HELD || !r->want || r->reported || r->released)
            continue;
        grants[count].item = strdup(r->item);
        if (!grants[count].item) {
            for (size_t j = 0; j < count; j++)
                free(grants[j].item);
            free(grants);
            return -1;
        }
        grants[count++].token = r->czxid;
    }
    for (size_t i = 0; i < a->acquired_n; i++) { /* committed: nothing can fail now */
        item_rec *r = a->acquired_q[i];
        if (r->st == CLAIM_HELD && r->want && !r->reported && !r->released)
            r->reported = 1;
        r->queued = 0;
        account(r);
    }
    a->acquired_n = 0;
    *out = grants;
    *n = count;
    return 0;
}
