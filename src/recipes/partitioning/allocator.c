/*
 * allocator.c — see allocator.h.  The group half of the allocator: joining (ENSURE the paths,
 * SEED the set, CREATE the member node, CHECK it after a lost reply, WAIT while another
 * session holds our identifier), following members (a listing, then a read of each member
 * node for its weight and czxid), the set and the assignment with watches, choosing the
 * leader (oldest member node), publishing what the leader's owner computed, and leaving.
 * The items are allocator_claims.c's.
 *
 * Only the result of the op each part waits for counts (op ids); anything else that comes
 * back is stale and only counted.  Everything is level-triggered (allocator_private.h):
 * zkl_alloc_update() runs after every change and sends what is needed.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/acl.h"
#include "../../core/clock.h"
#include "../../core/ops.h"
#include "../../core/path.h"
#include "../../core/timers.h"
#include "allocator_private.h"
#include "../common.h"

/* Room a write of a node leaves besides its path and value: the request's framing and the
 * node's ACL (ops.c fails, unsent, a request over ZKL_MAX_PACKET). */
enum { REQUEST_FRAMING = 1024 };

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx);
static void on_state(zkl_session *s, zkl_state state, void *ctx);

/* ---------------------------------------------------------------- small helpers */

size_t zkl_allocator_max_node(const char *node_path)
{
    return ZKL_MAX_PACKET - strlen(node_path) - REQUEST_FRAMING;
}

int zkl_alloc_connected(const zkl_allocator *a)
{
    return a->s && zkl_session_state(a->s) == ZKL_CONNECTED;
}

int zkl_alloc_push_string(char ***q, size_t *n, size_t *cap, const char *s)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        char **grown = realloc(*q, c * sizeof *grown);
        if (!grown)
            return -1;
        *q = grown;
        *cap = c;
    }
    char *copy = strdup(s);
    if (!copy)
        return -1;
    (*q)[(*n)++] = copy;
    return 0;
}

static void free_strings(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

static uint64_t counted(zkl_allocator *a, uint64_t id, int watch)
{
    if (id)
        a->inflight += 1 + watch;
    return id;
}

static int is_connection_rc(int rc) { return zkl_rc_triage(rc) == ZKL_RC_RETRY; }

/* The session is gone or stopped: the state listener decides (LOST, or the stop). */
static int is_session_rc(int rc)
{
    zkl_rc_kind kind = zkl_rc_triage(rc);
    return kind == ZKL_RC_LOST || kind == ZKL_RC_CLOSED;
}

static int member_cmp(const void *pa, const void *pb)
{
    return strcmp(((const member_info *)pa)->id, ((const member_info *)pb)->id);
}

/* ---------------------------------------------------------------- what is known */

static void free_members(member_info *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(m[i].id);
    free(m);
}

static int pending_state(member_state st) { return st == MEMBER_NEED || st == MEMBER_READING; }

static void member_set_state(member_rec *m, member_state st)
{
    if (!m->detached)
        m->a->member_pending += (size_t)pending_state(st) - (size_t)pending_state(m->st);
    m->st = st;
}

static void release_member(member_rec *m)
{
    free(m->name);
    free(m->id);
    free(m);
}

/* Unlinks m from its allocator's list of records, then frees it. */
static void free_member(member_rec *m)
{
    zkl_allocator *a = m->a;
    if (m->all_prev)
        m->all_prev->all_next = m->all_next;
    else
        a->all_members = m->all_next;
    if (m->all_next)
        m->all_next->all_prev = m->all_prev;
    release_member(m);
}

/* m is not listed any more: what comes back of it is only counted. */
static void detach_member(member_rec *m)
{
    member_set_state(m, MEMBER_GONE);
    m->detached = 1;
    if (m->inflight <= 0)
        free_member(m);
}

static void detach_members(zkl_allocator *a)
{
    for (size_t i = 0; i < a->listed_n; i++)
        detach_member(a->listed[i]);
    free(a->listed);
    a->listed = NULL;
    a->listed_n = 0;
    a->member_pending = 0;
}

static void free_all_members(zkl_allocator *a)
{
    free(a->listed);
    a->listed = NULL;
    a->listed_n = 0;
    a->member_pending = 0;
    /* every record goes: the list is dropped whole, not unlinked record by record */
    member_rec *m = a->all_members;
    a->all_members = NULL;
    while (m) {
        member_rec *next = m->all_next;
        release_member(m);
        m = next;
    }
}

static void set_assignment(zkl_allocator *a, zkl_json *tree, char *body, int version,
                           int64_t generation)
{
    if (a->assignment != a->seen_assignment) /* (the seen one stays until the next is seen) */
        zkl_json_free(a->assignment);
    free(a->assignment_body);
    free(a->assignment_text);
    zkl_json_free(a->skim_members);
    zkl_json_free(a->skim_mine);
    a->assignment_text = NULL;
    a->skim_members = a->skim_mine = NULL;
    a->assignment = tree;
    a->assignment_body = body;
    a->assignment_version = version;
    a->generation = generation;
    a->target_dirty = 1;
    a->view++;
}

/* ---------------------------------------------------------------- chunked values */

static void drop_chunks(followed_node *f)
{
    for (size_t i = 0; f->chunk_data && i < f->header.chunks; i++)
        free(f->chunk_data[i]);
    free(f->chunk_data);
    free(f->chunk_len);
    free(f->chunk_ops);
    zkl_json_free(f->header.tree);
    memset(&f->header, 0, sizeof f->header);
    f->chunk_data = NULL;
    f->chunk_len = NULL;
    f->chunk_ops = NULL;
    f->chunk_pending = 0;
}

/* Forgets a publish (and the chunk creates of it still in flight: they come back unheeded). */
static void drop_publish(zkl_allocator *a)
{
    free(a->publish_data);
    a->publish_data = NULL;
    a->publish_op = 0;
    for (size_t i = 0; i < a->publish_chunk_n; i++)
        free(a->publish_chunks[i]);
    free(a->publish_chunks);
    free(a->publish_chunk_ops);
    free(a->publish_header);
    a->publish_chunks = NULL;
    a->publish_chunk_ops = NULL;
    a->publish_header = NULL;
    a->publish_chunk_n = a->publish_chunk_pending = 0;
}

/* Forgets what was read of the group (the session went, or we stopped). */
static void forget_group(zkl_allocator *a)
{
    free_members(a->members, a->member_count);
    a->members = NULL;
    a->member_count = 0;
    a->members_loaded = a->need_members = 0;
    a->members_op = a->members_watch = 0;
    detach_members(a);
    free_strings(a->items, a->item_count);
    a->items = NULL;
    a->item_count = 0;
    set_assignment(a, NULL, NULL, -1, 0);
    followed_node *f[] = {&a->partitions, &a->assignment_node};
    for (size_t i = 0; i < 2; i++) {
        f[i]->need = f[i]->loaded = f[i]->op_exists = 0;
        f[i]->op_id = f[i]->watch_id = 0;
        drop_chunks(f[i]);
    }
    a->leader = 0;
    drop_publish(a);
    a->gc_op = 0;
}

static int strings_array(const zkl_json *v)
{
    if (!v || v->type != ZKL_JSON_ARRAY)
        return 0;
    for (size_t i = 0; i < v->count; i++)
        if (v->values[i]->type != ZKL_JSON_STRING || !v->values[i]->string[0])
            return 0;
    return 1;
}

/* A follower's read: only the members and its own items are parsed (O(own share) allocations,
 * not O(items)); the text is kept for full_assignment().  0, or -1 (read it whole instead). */
static int skim_assignment(zkl_allocator *a, const char *data, int len, int version)
{
    zkl_alloc_skim k;
    if (!data || len <= 0 || !a->identifier_json ||
        zkl_alloc_skim_assignment(data, (size_t)len, a->identifier_json,
                                  a->identifier_json_len, &k) != 0)
        return -1;
    zkl_json *members = zkl_json_parse(k.members, k.members_len, NULL);
    zkl_json *mine = k.mine ? zkl_json_parse(k.mine, k.mine_len, NULL) : NULL;
    zkl_json *gen = k.generation ? zkl_json_parse(k.generation, k.generation_len, NULL) : NULL;
    char *text = malloc((size_t)len + 1);
    int ok = text && strings_array(members) && (!k.mine || strings_array(mine));
    int64_t g = gen && gen->type == ZKL_JSON_NUMBER && gen->number >= 0 ? (int64_t)gen->number : 0;
    zkl_json_free(gen);
    if (!ok) {
        free(text);
        zkl_json_free(members);
        zkl_json_free(mine);
        return -1;
    }
    memcpy(text, data, (size_t)len);
    text[len] = '\0';
    set_assignment(a, NULL, NULL, version, g);
    a->assignment_text = text;
    a->assignment_len = (size_t)len;
    a->skim_members = members;
    a->skim_mine = mine;
    return 0;
}

/* The whole assignment, parsed now if it was only skimmed (NULL: none, or not one). */
static const zkl_json *full_assignment(zkl_allocator *a)
{
    if (!a->assignment && a->assignment_text) {
        zkl_json *tree = zkl_json_parse(a->assignment_text, a->assignment_len, NULL);
        if (tree && zkl_alloc_assignment_valid(zkl_json_get(tree, "members"),
                                               zkl_json_get(tree, "assignment")))
            a->assignment = tree;
        else
            zkl_json_free(tree);
        free(a->assignment_text);
        a->assignment_text = NULL;
    }
    return a->assignment;
}

/* The members the assignment was computed for (skimmed or whole). */
static const zkl_json *assignment_members(const zkl_allocator *a)
{
    return a->assignment ? zkl_json_get(a->assignment, "members") : a->skim_members;
}

/* Reads an assignment node's data into a->assignment, or leaves none when it is not one.
 * (Its canonical key, which sorts every item, is made only when a publish needs it.) */
static void read_assignment(zkl_allocator *a, const char *data, int len, int version)
{
    if (skim_assignment(a, data, len, version) == 0)
        return;
    zkl_json *tree = zkl_json_parse(data ? data : "", data ? (size_t)len : 0, NULL);
    const zkl_json *gen = zkl_json_get(tree, "generation");
    if (tree && zkl_alloc_assignment_valid(zkl_json_get(tree, "members"),
                                           zkl_json_get(tree, "assignment"))) {
        int64_t g = gen && gen->type == ZKL_JSON_NUMBER && gen->number >= 0 ? (int64_t)gen->number
                                                                              : 0;
        set_assignment(a, tree, NULL, version, g);
        return;
    }
    zkl_json_free(tree);
    set_assignment(a, NULL, NULL, version, 0); /* unreadable: the leader writes over it */
}

/* The current assignment's canonical key (made once): 0, or -1 (none, or out of memory). */
static int assignment_key(zkl_allocator *a)
{
    if (a->assignment_body)
        return 0;
    if (!full_assignment(a))
        return -1;
    zkl_json_buf key;
    zkl_json_buf_init(&key);
    if (zkl_alloc_assignment_key(zkl_json_get(a->assignment, "members"),
                                 zkl_json_get(a->assignment, "assignment"), &key) != 0) {
        zkl_json_buf_free(&key);
        return -1;
    }
    a->assignment_body = key.data;
    return 0;
}

static int same_items(char **a, size_t na, char **b, size_t nb)
{
    if (na != nb)
        return 0;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return 0;
    return 1;
}

static int same_members(const member_info *a, size_t na, const member_info *b, size_t nb)
{
    if (na != nb)
        return 0;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i].id, b[i].id) != 0 || a[i].weight != b[i].weight ||
            a[i].czxid != b[i].czxid || a[i].chunked != b[i].chunked)
            return 0;
    return 1;
}

/* ---------------------------------------------------------------- the leader */

static int oldest_member_is_us(const zkl_allocator *a)
{
    if (!a->joined || !a->members_loaded || a->member_count == 0)
        return 0;
    int present = 0;
    for (size_t i = 0; i < a->member_count; i++) {
        if (a->members[i].czxid < a->my_czxid)
            return 0;
        if (strcmp(a->members[i].id, a->identifier) == 0 && a->members[i].czxid == a->my_czxid)
            present = 1;
    }
    return present;
}

static int compute_needed(const zkl_allocator *a)
{
    return a->phase == ZKL_ALLOCATOR_RUNNING && a->leader && a->members_loaded &&
           a->partitions.loaded && a->assignment_node.loaded && a->epoch != a->answered_epoch &&
           a->epoch != a->asked_epoch && !a->publish_data && !a->publish_op && !a->settle_timer;
}

/* ---------------------------------------------------------------- the settle window */

/* A leader computes once the members have been still for a window: members that join (or
 * leave) in a burst get one assignment, not one each, so an item changes owner about once
 * instead of about ln(members) times.  The window is settle_ms, or twice the longest gap
 * between two changes of the burst when that is longer (gaps over the cap do not count): a
 * group still growing at one member every 0.3 s waits 0.6 s after each join, not settle_ms,
 * so a start whose joins come slower than settle_ms (processes starting, a loaded machine)
 * still gets one assignment instead of one per join (each moving items/members items).
 * Each change re-arms the window, up to SETTLE_MAX_WINDOWS * settle_ms after the burst's
 * first change, so a group that never stops changing still gets an assignment that often.
 * Only a leader (or a member becoming one) arms it: followers start no timer thread. */
enum { SETTLE_MAX_WINDOWS = 50 };

static void on_settle_route(zkl_session *s, const zkl_event *ev, void *ctx);

static void settle_cancel(zkl_allocator *a)
{
    if (a->settle_timer && a->s)
        zkl_session_cancel_timer(a->s, a->settle_timer);
    a->settle_timer = 0;
}

static void settle_window(zkl_allocator *a)
{
    if (a->settle_ms <= 0 || !a->s || a->orphaned)
        return;
    long long now = zkl_monotonic_ms();
    long long cap = (long long)SETTLE_MAX_WINDOWS * a->settle_ms;
    long long gap = a->settle_last > 0 ? now - a->settle_last : cap;
    a->settle_last = now;
    if (!a->settle_timer) {
        a->settle_since = now; /* a new burst */
        a->settle_gap = 0;
    } else if (now - a->settle_since >= cap) {
        return; /* long enough: the armed window ends as it is */
    }
    if (gap < cap && gap > a->settle_gap)
        a->settle_gap = gap;
    long long window = 2 * a->settle_gap;
    if (window > a->settle_since + cap - now)
        window = a->settle_since + cap - now;
    if (window < a->settle_ms)
        window = a->settle_ms;
    settle_cancel(a);
    zkl_route route = {on_settle_route, a};
    a->settle_timer = zkl_session_add_timer(a->s, (long)window, &route); /* 0: no window */
}

/* ---------------------------------------------------------------- sending */

static void fail_join(zkl_allocator *a, int rc)
{
    a->phase = ZKL_ALLOCATOR_IDLE;
    a->rc = rc;
    a->join_op = a->join_watch = 0;
    zkl_alloc_notify(a);
}

static void join_send(zkl_allocator *a)
{
    uint64_t id = 0;
    switch (a->jstep) {
    case JOIN_ENSURE:
        zkl_create_path(a->s, a->members_path, &a->acl, &a->route, &a->inflight, &id);
        zkl_create_path(a->s, a->owners_path, &a->acl, &a->route, &a->inflight, &id);
        break;
    case JOIN_SEED:
        id = counted(a, zkl_op_create(a->s, a->partitions.path, a->seed, (int)a->seed_len,
                                      &a->acl, ZOO_PERSISTENT, 0, &a->route), 0);
        break;
    case JOIN_CREATE:
        id = counted(a, zkl_op_create(a->s, a->member_node, a->member_data,
                                      (int)a->member_data_len, &a->acl, ZOO_EPHEMERAL, 1,
                                      &a->route), 0);
        break;
    case JOIN_CHECK:
        id = counted(a, zkl_op_get(a->s, a->member_node, 1, &a->route), 1);
        a->join_watch = id;
        break;
    case JOIN_WAIT:
        return; /* for join_watch */
    }
    a->join_op = id;
    if (!id)
        fail_join(a, ZSYSTEMERROR);
}

static void follow_send(zkl_allocator *a, followed_node *f)
{
    if (!f->need || f->op_id)
        return;
    f->need = 0;
    f->op_exists = 0;
    f->op_id = f->watch_id = counted(a, zkl_op_get(a->s, f->path, 1, &a->route), 1);
    if (!f->op_id)
        f->need = 1; /* out of memory: the next update tries again */
}

static void members_send(zkl_allocator *a)
{
    if (!a->need_members || a->members_op)
        return;
    a->need_members = 0;
    a->members_op = a->members_watch =
        counted(a, zkl_op_children(a->s, a->members_path, 1, &a->route), 1);
    if (!a->members_op)
        a->need_members = 1;
}

static void publish_send(zkl_allocator *a)
{
    if (!a->publish_data || a->publish_op || a->publish_chunk_pending)
        return;
    if (a->publish_chunks && !a->publish_chunk_ops) { /* the chunks first, then the header */
        a->publish_chunk_ops = calloc(a->publish_chunk_n, sizeof *a->publish_chunk_ops);
        if (!a->publish_chunk_ops)
            return; /* out of memory: at the next update */
        uint64_t last;
        zkl_create_path(a->s, a->assignment_node.chunks_path, &a->acl, &a->route, &a->inflight,
                        &last);
        for (size_t i = 0; i < a->publish_chunk_n; i++) {
            char *cp = zkl_alloc_chunk_path(a->assignment_node.chunks_path, a->publish_tag, i);
            uint64_t id = cp ? counted(a, zkl_op_create(a->s, cp, a->publish_chunks[i],
                                                        (int)strlen(a->publish_chunks[i]),
                                                        &a->acl, ZOO_PERSISTENT, 0, &a->route),
                                       0)
                             : 0;
            free(cp);
            a->publish_chunk_ops[i] = id;
            a->publish_chunk_pending += id != 0;
            if (!id) { /* out of memory: this publish is given up, computed again */
                drop_publish(a);
                a->epoch++;
                return;
            }
        }
        return;
    }
    const char *p = a->assignment_node.path;
    const char *data = a->publish_header ? a->publish_header : a->publish_data;
    int len = (int)(a->publish_header ? a->publish_header_len : a->publish_len);
    a->publish_op =
        a->publish_version < 0
            ? counted(a, zkl_op_create(a->s, p, data, len, &a->acl, ZOO_PERSISTENT, 1,
                                       &a->route), 0)
            : counted(a, zkl_op_set(a->s, p, data, len, a->publish_version, &a->route), 0);
}

static void leave_send(zkl_allocator *a)
{
    if (a->member_gone || a->leave_op || a->join_op)
        return;
    if (!a->joined) {
        if (a->jstep == JOIN_CHECK) /* a create whose reply was lost: is the node ours? */
            join_send(a);
        else
            a->member_gone = 1; /* never made (or another session's) */
        return;
    }
    a->leave_op = counted(a, zkl_op_delete(a->s, a->member_node, -1, &a->route), 0);
}

static void members_read(zkl_allocator *a);

static void send_needed(zkl_allocator *a)
{
    if (!zkl_alloc_connected(a))
        return;
    switch (a->phase) {
    case ZKL_ALLOCATOR_JOINING:
        if (!a->join_op)
            join_send(a);
        break;
    case ZKL_ALLOCATOR_RUNNING:
        members_send(a);
        members_read(a);
        follow_send(a, &a->partitions);
        follow_send(a, &a->assignment_node);
        publish_send(a);
        break;
    case ZKL_ALLOCATOR_LEAVING:
        leave_send(a);
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------- deciding */

static void finish_leave_if_done(zkl_allocator *a)
{
    if (a->phase != ZKL_ALLOCATOR_LEAVING || !a->member_gone || zkl_claims_busy(a))
        return;
    a->phase = ZKL_ALLOCATOR_IDLE;
    a->rc = a->fatal_rc;
    forget_group(a);
    zkl_alloc_notify(a);
}

static int has_news(const zkl_allocator *a)
{
    return a->acquired_n || a->release_n || a->lost_n || compute_needed(a);
}

void zkl_alloc_notify(zkl_allocator *a)
{
    if (a->orphaned || !a->s || a->notify_pending)
        return;
    if (zkl_session_notify(a->s, a->id, ZKL_ALLOCATOR_NOTIFY_NEWS) == 0)
        a->notify_pending = 1;
}

static void settle(zkl_allocator *a)
{
    finish_leave_if_done(a);
    if (has_news(a))
        zkl_alloc_notify(a);
}

static const zkl_json *my_items(const zkl_allocator *a)
{
    if (!a->assignment && a->assignment_text)
        return a->skim_mine; /* (NULL: none of ours) */
    return zkl_json_get(zkl_json_get(a->assignment, "assignment"), a->identifier);
}

void zkl_alloc_update(zkl_allocator *a)
{
    if (!a->s)
        return;
    if (a->phase == ZKL_ALLOCATOR_RUNNING && a->assignment_node.loaded) {
        if (a->target_dirty && zkl_claims_set_target(a, my_items(a)) == 0)
            a->target_dirty = 0; /* (out of memory: again at the next update) */
    } else if (a->phase != ZKL_ALLOCATOR_RUNNING && a->phase != ZKL_ALLOCATOR_JOINING)
        zkl_claims_clear_target(a);
    int leader = a->phase == ZKL_ALLOCATOR_RUNNING && oldest_member_is_us(a);
    if (leader && !a->leader) {
        a->epoch++; /* a new leader looks at everything afresh */
        settle_window(a);
    } else if (!leader) {
        settle_cancel(a);
    }
    a->leader = leader;
    zkl_claims_reconcile(a);
    send_needed(a);
    settle(a);
}

/* ---------------------------------------------------------------- results */

static void joined(zkl_allocator *a, int64_t czxid)
{
    a->joined = 1;
    a->my_czxid = czxid;
    a->ensure_rounds = 0;
    if (a->phase != ZKL_ALLOCATOR_JOINING)
        return; /* leaving: it is deleted next */
    a->phase = ZKL_ALLOCATOR_RUNNING;
    a->target_dirty = 1;
    a->need_members = 1;
    a->partitions.need = a->assignment_node.need = 1;
    a->epoch++;
    zkl_alloc_notify(a);
}

static int own_member_node(const zkl_allocator *a, const zkl_event *ev)
{
    int64_t session;
    char passwd[16];
    return ev->has_stat && zkl_session_client_id(a->s, &session, passwd) == 0 &&
           ev->stat.ephemeralOwner == session;
}

static void ensure_again(zkl_allocator *a)
{
    if (++a->ensure_rounds > ZKL_RETRY_LIMIT)
        fail_join(a, ZNONODE); /* someone keeps deleting the path */
    else
        a->jstep = JOIN_ENSURE;
}

static void join_result(zkl_allocator *a, const zkl_event *ev)
{
    int rc = ev->rc;
    if (is_session_rc(rc))
        return; /* the state listener decides */
    if (is_connection_rc(rc)) {
        if (a->jstep == JOIN_CREATE)
            a->jstep = JOIN_CHECK; /* the node may exist: look before creating again */
        return;
    }
    switch (a->jstep) {
    case JOIN_ENSURE:
        a->jstep = JOIN_SEED; /* a path that could not be made shows at the creates */
        break;
    case JOIN_SEED:
        if (rc == ZOK || rc == ZNODEEXISTS)
            a->jstep = JOIN_CREATE;
        else if (rc == ZNONODE)
            ensure_again(a);
        else
            fail_join(a, rc);
        break;
    case JOIN_CREATE:
        if (rc == ZOK)
            joined(a, ev->stat.czxid);
        else if (rc == ZNODEEXISTS)
            a->jstep = JOIN_CHECK;
        else if (rc == ZNONODE)
            ensure_again(a);
        else
            fail_join(a, rc);
        break;
    case JOIN_CHECK:
        if (rc == ZOK && own_member_node(a, ev)) {
            a->jstep = JOIN_CREATE;
            joined(a, ev->stat.czxid);
        } else if (rc == ZOK) { /* another session has our identifier: wait for it to go */
            a->jstep = a->join_watch ? JOIN_WAIT : JOIN_CREATE;
        } else if (rc == ZNONODE) {
            a->jstep = JOIN_CREATE;
        } else {
            fail_join(a, rc);
        }
        if (a->phase == ZKL_ALLOCATOR_LEAVING && !a->joined)
            a->member_gone = 1; /* nothing of ours to delete */
        break;
    case JOIN_WAIT:
        break;
    }
}

/* The members as read, once a listing and the reads of its nodes are all back: published
 * (the epoch moves) when they changed. */
static void compose_members(zkl_allocator *a)
{
    if (a->need_members || a->members_op || a->member_pending > 0)
        return;
    member_info *list = calloc(a->listed_n ? a->listed_n : 1, sizeof *list);
    if (!list)
        return; /* out of memory: at the next event */
    size_t n = 0;
    for (size_t i = 0; i < a->listed_n; i++) {
        const member_rec *m = a->listed[i];
        if (m->st != MEMBER_KNOWN)
            continue;
        list[n].id = strdup(m->id);
        if (!list[n].id) {
            free_members(list, n);
            return;
        }
        list[n].weight = m->weight;
        list[n].chunked = m->chunked;
        list[n++].czxid = m->czxid;
    }
    qsort(list, n, sizeof *list, member_cmp);
    if (!a->members_loaded || !same_members(a->members, a->member_count, list, n)) {
        free_members(a->members, a->member_count);
        a->members = list;
        a->member_count = n;
        a->epoch++;
        a->view++;
        if (a->leader)
            settle_window(a);
    } else {
        free_members(list, n);
    }
    a->members_loaded = 1;
    int present = 0;
    for (size_t k = 0; k < a->member_count; k++)
        if (strcmp(a->members[k].id, a->identifier) == 0 && a->members[k].czxid == a->my_czxid)
            present = 1;
    if (!present && a->phase == ZKL_ALLOCATOR_RUNNING) { /* our node was deleted */
        a->joined = 0;
        a->phase = ZKL_ALLOCATOR_JOINING;
        a->jstep = JOIN_CREATE;
    }
}

static void on_member_route(zkl_session *s, const zkl_event *ev, void *ctx);

/* Reads the member nodes the listing has and that are not known (NEED). */
static void members_read(zkl_allocator *a)
{
    if (a->member_pending == 0 || !zkl_alloc_connected(a))
        return;
    for (size_t i = 0; i < a->listed_n; i++) {
        member_rec *m = a->listed[i];
        if (m->st != MEMBER_NEED || m->op_id)
            continue;
        char *p = zkl_join_path(a->members_path, m->name);
        zkl_route route = {on_member_route, m};
        uint64_t id = p ? zkl_op_get(a->s, p, 1, &route) : 0;
        free(p);
        if (!id)
            return; /* out of memory: at the next event */
        m->inflight += 2;
        a->inflight += 2;
        m->op_id = m->watch_id = id;
        member_set_state(m, MEMBER_READING);
    }
}

static void member_result(member_rec *m, const zkl_event *ev)
{
    if (ev->rc == ZOK && ev->has_stat) {
        zkl_json *tree = zkl_json_parse(ev->data ? ev->data : "", (size_t)ev->data_len, NULL);
        const zkl_json *w = zkl_json_get(tree, "weight");
        m->weight = w && w->type == ZKL_JSON_NUMBER && w->number > 0 && isfinite(w->number)
                        ? w->number
                        : 1;
        m->czxid = ev->stat.czxid;
        const zkl_json *c = zkl_json_get(tree, "chunked");
        m->chunked = c && c->type == ZKL_JSON_NUMBER && c->number >= ZKL_CHUNKED_FORMAT;
        zkl_json_free(tree);
        member_set_state(m, MEMBER_KNOWN);
    } else if (is_connection_rc(ev->rc)) {
        member_set_state(m, MEMBER_NEED); /* again once CONNECTED */
    } else if (!is_session_rc(ev->rc)) {
        member_set_state(m, MEMBER_GONE); /* gone meanwhile (the listing shows it), or unknown */
    }
}

static void maybe_destroy(zkl_allocator *a);

static void on_member_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    member_rec *m = ctx;
    zkl_allocator *a = m->a;
    m->inflight--;
    a->inflight--;
    if (ev->kind == ZKL_EV_OP) {
        if (!ev->watch_requested) { /* no watch will come */
            m->inflight--;
            a->inflight--;
            if (m->watch_id == ev->id)
                m->watch_id = 0;
        }
        if (ev->id == m->op_id) {
            m->op_id = 0;
            if (!m->detached && a->s)
                member_result(m, ev);
        }
    } else if (ev->kind == ZKL_EV_WATCH && ev->id == m->watch_id) {
        m->watch_id = 0;
        /* a watch not registered while its read is still awaited: the read decides */
        if (!m->detached && a->s && !(ev->type == ZOO_NOTWATCHING_EVENT && ev->id == m->op_id))
            member_set_state(m, m->op_id                       ? MEMBER_READING
                                : ev->type == ZOO_DELETED_EVENT ? MEMBER_GONE /* listed again: read */
                                                                : MEMBER_NEED);
    }
    if (m->detached) {
        if (m->inflight <= 0)
            free_member(m);
    } else if (a->s) {
        compose_members(a);
    }
    zkl_alloc_update(a);
    maybe_destroy(a);
}

static int name_cmp(const void *pa, const void *pb)
{
    return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

/* A record for the member node name (its identifier id, taken over), or NULL (no memory). */
static member_rec *new_member(zkl_allocator *a, const char *name, char *id)
{
    member_rec *m = calloc(1, sizeof *m);
    if (m)
        m->name = strdup(name);
    if (!m || !m->name) {
        free(m);
        free(id);
        return NULL;
    }
    m->a = a;
    m->id = id;
    m->st = MEMBER_NEED;
    m->all_next = a->all_members;
    if (a->all_members)
        a->all_members->all_prev = m;
    a->all_members = m;
    return m;
}

/* A listing came back: the listed records follow it (new names are read, names gone are
 * detached); merged by name, so O(members) for the group, not a read per member. */
static void members_listed(zkl_allocator *a, char **names, size_t n)
{
    char **sorted = malloc((n ? n : 1) * sizeof *sorted);
    member_rec **listed = malloc((n ? n : 1) * sizeof *listed);
    if (!sorted || !listed) {
        free(sorted);
        free(listed);
        a->need_members = 1;
        return;
    }
    if (n > 0) /* (names may be NULL when there are none) */
        memcpy(sorted, names, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, name_cmp);
    size_t k = 0, j = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && strcmp(sorted[i - 1], sorted[i]) == 0)
            continue;
        while (j < a->listed_n && strcmp(a->listed[j]->name, sorted[i]) < 0)
            detach_member(a->listed[j++]);
        member_rec *m = NULL;
        if (j < a->listed_n && strcmp(a->listed[j]->name, sorted[i]) == 0) {
            m = a->listed[j++];
            if (m->st == MEMBER_GONE) /* deleted, and listed again: made anew */
                member_set_state(m, m->op_id ? MEMBER_READING : MEMBER_NEED);
        } else {
            char *id = zkl_allocator_node_unname(sorted[i]); /* NULL: not a member node */
            m = id ? new_member(a, sorted[i], id) : NULL;
            if (m)
                a->member_pending++; /* NEED */
            else if (id)
                a->need_members = 1; /* out of memory: list again */
        }
        if (m)
            listed[k++] = m;
    }
    while (j < a->listed_n)
        detach_member(a->listed[j++]);
    free(sorted);
    free(a->listed);
    a->listed = listed;
    a->listed_n = k;
}

static void members_result(zkl_allocator *a, const zkl_event *ev)
{
    if (ev->rc == ZOK)
        members_listed(a, ev->strings, (size_t)(ev->string_count > 0 ? ev->string_count : 0));
    else if (ev->rc == ZNONODE) /* the group's path went: our member node with it */
        members_listed(a, NULL, 0);
    else if (is_connection_rc(ev->rc))
        a->need_members = 1; /* (any other error: the listing stays as it was) */
    compose_members(a);
}

static void partitions_read(zkl_allocator *a, const char *data, int len)
{
    char **items;
    size_t n;
    if (zkl_alloc_read_items(data, len, &items, &n) != 0) {
        a->partitions.need = 1; /* out of memory: again later */
        return;
    }
    if (!a->partitions.loaded || !same_items(a->items, a->item_count, items, n)) {
        free_strings(a->items, a->item_count);
        a->items = items;
        a->item_count = n;
        a->epoch++;
        a->view++;
    } else {
        free_strings(items, n);
    }
    a->partitions.loaded = 1;
}

static void assignment_read(zkl_allocator *a, const char *data, int len, int version)
{
    if (a->assignment_node.loaded && version == a->assignment_version)
        return; /* what we have (e.g. our own publish, read back) */
    read_assignment(a, data, len, version);
    a->assignment_node.loaded = 1;
    a->epoch++; /* changed by someone else: the leader looks again */
}

static void read_chunks(zkl_allocator *a, followed_node *f, zkl_alloc_header *h, int version);
static void chunks_read(zkl_allocator *a, followed_node *f);

/* A value this member cannot read (a newer format, or a broken one): it leaves, and its rc
 * says why (ZUNIMPLEMENTED, ZMARSHALLINGERROR). */
static void fail_unreadable(zkl_allocator *a, int rc)
{
    a->fatal_rc = rc;
    if (a->phase == ZKL_ALLOCATOR_RUNNING || a->phase == ZKL_ALLOCATOR_JOINING)
        zkl_allocator_leave(a);
}

/* A followed node's read came back: data read, or the node is missing (then its creation is
 * watched with an exists). */
static void follow_result(zkl_allocator *a, followed_node *f, const zkl_event *ev)
{
    int rc = ev->rc;
    if (is_session_rc(rc))
        return;
    if (is_connection_rc(rc)) {
        f->need = 1; /* again once CONNECTED */
        return;
    }
    if (rc != ZOK && rc != ZNONODE) /* unreadable (an ACL): counts as empty, not retried */
        rc = ZNONODE;
    if (f->op_exists) {
        if (rc == ZOK)
            f->need = 1; /* it exists now: read it */
        return;
    }
    if (rc == ZNONODE && ev->rc == ZNONODE) {
        f->op_exists = 1;
        f->op_id = f->watch_id = counted(a, zkl_op_exists(a->s, f->path, 1, &a->route), 1);
        if (!f->op_id)
            f->need = 1;
    }
    const char *data = rc == ZOK ? ev->data : NULL;
    int len = rc == ZOK ? ev->data_len : 0;
    drop_chunks(f); /* a newer header: what was being read of an older one is stale */
    if (rc == ZOK) {
        zkl_alloc_header h;
        int kind = zkl_alloc_chunk_header(data, len, &h);
        if (kind == ZKL_CHUNKED_NEWER || kind == ZKL_CHUNKED_BAD) {
            fail_unreadable(a, kind == ZKL_CHUNKED_NEWER ? ZUNIMPLEMENTED : ZMARSHALLINGERROR);
            return;
        }
        if (kind == ZKL_CHUNKED_YES) {
            if (f == &a->assignment_node && f->loaded && ev->stat.version == a->assignment_version)
                zkl_json_free(h.tree); /* ours, read back */
            else
                read_chunks(a, f, &h, ev->stat.version);
            return;
        }
        if (f == &a->assignment_node)
            a->assignment_chunked = 0;
    }
    if (f == &a->partitions)
        partitions_read(a, data, len);
    else
        assignment_read(a, data, len, rc == ZOK ? ev->stat.version : -1);
}

/* The value of f is the header h (version): its chunks are read, then put together. */
static void read_chunks(zkl_allocator *a, followed_node *f, zkl_alloc_header *h, int version)
{
    size_t n = h->chunks ? h->chunks : 1;
    f->header = *h;
    f->header_version = version;
    f->chunk_ops = calloc(n, sizeof *f->chunk_ops);
    f->chunk_data = calloc(n, sizeof *f->chunk_data);
    f->chunk_len = calloc(n, sizeof *f->chunk_len);
    if (!f->chunk_ops || !f->chunk_data || !f->chunk_len) {
        drop_chunks(f);
        f->need = 1; /* out of memory: again later */
        return;
    }
    for (size_t i = 0; i < h->chunks; i++) {
        char *p = zkl_alloc_chunk_path(f->chunks_path, h->tag, i);
        uint64_t id = p ? counted(a, zkl_op_get(a->s, p, 0, &a->route), 0) : 0;
        free(p);
        if (!id) {
            drop_chunks(f);
            f->need = 1;
            return;
        }
        f->chunk_ops[i] = id;
        f->chunk_pending++;
    }
    if (f->chunk_pending == 0)
        chunks_read(a, f);
}

/* Every chunk of f's header is in: the value, as if it had been one node. */
static void chunks_read(zkl_allocator *a, followed_node *f)
{
    zkl_json_buf b;
    zkl_json_buf_init(&b);
    int rc = f == &a->partitions
                 ? zkl_alloc_join_set(f->chunk_data, f->chunk_len, f->header.chunks, &b)
                 : zkl_alloc_join_assignment(f->header.tree, f->chunk_data, f->chunk_len,
                                             f->header.chunks, &b);
    int version = f->header_version;
    drop_chunks(f);
    if (rc != 0) {
        if (b.failed)
            f->need = 1; /* out of memory: again later */
        else
            fail_unreadable(a, ZMARSHALLINGERROR);
    } else if (f == &a->partitions) {
        partitions_read(a, b.data, (int)b.len);
    } else {
        a->assignment_chunked = 1;
        assignment_read(a, b.data, (int)b.len, version);
    }
    zkl_json_buf_free(&b);
}

/* A chunk read of f came back: 1 (it was one), else 0. */
static int chunk_result(zkl_allocator *a, followed_node *f, const zkl_event *ev)
{
    size_t i = 0;
    while (f->chunk_ops && i < f->header.chunks && f->chunk_ops[i] != ev->id)
        i++;
    if (!f->chunk_ops || i == f->header.chunks)
        return 0;
    f->chunk_ops[i] = 0;
    if (ev->rc == ZOK) {
        f->chunk_data[i] = malloc((size_t)ev->data_len + 1);
        if (!f->chunk_data[i]) {
            drop_chunks(f);
            f->need = 1;
            return 1;
        }
        memcpy(f->chunk_data[i], ev->data ? ev->data : "", (size_t)ev->data_len);
        f->chunk_data[i][ev->data_len] = '\0';
        f->chunk_len[i] = ev->data_len;
        if (--f->chunk_pending == 0)
            chunks_read(a, f);
    } else {
        /* gone: the header was replaced meanwhile (its watch fires too); or the connection:
         * read the header again, never half of one value and half of another */
        drop_chunks(f);
        if (!is_session_rc(ev->rc))
            f->need = 1;
    }
    return 1;
}

/* A chunk create of the publish under way came back: 1 (it was one), else 0. */
static int publish_chunk_result(zkl_allocator *a, const zkl_event *ev)
{
    size_t i = 0;
    while (a->publish_chunk_ops && i < a->publish_chunk_n && a->publish_chunk_ops[i] != ev->id)
        i++;
    if (!a->publish_chunk_ops || i == a->publish_chunk_n)
        return 0;
    a->publish_chunk_ops[i] = 0;
    if (ev->rc == ZOK) {
        a->publish_chunk_pending--; /* all in: the header goes next (publish_send) */
        return 1;
    }
    /* not written (the outcome may be unknown): given up; its chunks, if any, are named by no
     * header and go with the next clean-up; the leader computes again */
    if (!is_session_rc(ev->rc) && !is_connection_rc(ev->rc) && ev->rc != ZNODEEXISTS &&
        ev->rc != ZNONODE)
        a->publish_rc = ev->rc;
    drop_publish(a);
    a->assignment_node.need = 1;
    a->epoch++;
    return 1;
}

/* After a header went in that replaced a chunked one (or is one): the chunks no header can
 * name any more are deleted (allocator_chunks.c says which). */
static void collect_chunks(zkl_allocator *a, const char *tag)
{
    snprintf(a->gc_tag, sizeof a->gc_tag, "%s", tag);
    a->gc_op = counted(a, zkl_op_children(a->s, a->assignment_node.chunks_path, 0, &a->route),
                       0);
}

static int gc_result(zkl_allocator *a, const zkl_event *ev)
{
    if (!a->gc_op || ev->id != a->gc_op)
        return 0;
    a->gc_op = 0;
    for (int i = 0; ev->rc == ZOK && i < ev->string_count; i++) {
        if (!zkl_alloc_chunk_stale(ev->strings[i], a->gc_tag))
            continue;
        char *p = zkl_join_path(a->assignment_node.chunks_path, ev->strings[i]);
        if (p)
            counted(a, zkl_op_delete(a->s, p, -1, &a->route), 0); /* unheeded: best effort */
        free(p);
    }
    return 1;
}

static void published(zkl_allocator *a, const zkl_event *ev)
{
    int rc = ev->rc;
    if (rc == ZOK) {
        int version = ev->has_stat ? ev->stat.version : 0;
        int was_chunked = a->assignment_chunked;
        read_assignment(a, a->publish_data, (int)a->publish_len, version); /* ours, now */
        a->assignment_chunked = a->publish_chunks != NULL;
        if (a->assignment_chunked || was_chunked) {
            char tag[ZKL_TAG_MAX];
            if (a->publish_chunks)
                snprintf(tag, sizeof tag, "%s", a->publish_tag);
            else
                snprintf(tag, sizeof tag, "%010d-", a->publish_version + 1); /* no chunk's */
            collect_chunks(a, tag);
        }
        a->publish_rc = ZOK;
    } else if (!is_session_rc(rc)) {
        /* someone else changed it, or the outcome is unknown: read it and compute again */
        a->assignment_node.need = 1;
        if (rc != ZBADVERSION && rc != ZNODEEXISTS && rc != ZNONODE && !is_connection_rc(rc))
            a->publish_rc = rc;
        else
            a->epoch++;
    }
    drop_publish(a);
}

static void leave_result(zkl_allocator *a, const zkl_event *ev)
{
    if (ev->rc == ZOK || ev->rc == ZNONODE) {
        a->member_gone = 1;
        a->joined = 0;
    } else if (is_connection_rc(ev->rc)) {
        a->joined = 0; /* was it deleted?  look before deleting again */
        a->jstep = JOIN_CHECK;
    } else if (!is_session_rc(ev->rc)) {
        a->member_gone = 1; /* cannot delete it: it goes with the session */
        a->rc = ev->rc;
    }
}

static void on_op(zkl_allocator *a, const zkl_event *ev)
{
    uint64_t id = ev->id;
    if (chunk_result(a, &a->partitions, ev) || chunk_result(a, &a->assignment_node, ev) ||
        publish_chunk_result(a, ev) || gc_result(a, ev))
        return;
    if (id == a->join_op) {
        a->join_op = 0;
        join_result(a, ev);
    } else if (id == a->members_op) {
        a->members_op = 0;
        members_result(a, ev);
    } else if (id == a->partitions.op_id) {
        a->partitions.op_id = 0;
        follow_result(a, &a->partitions, ev);
    } else if (id == a->assignment_node.op_id) {
        a->assignment_node.op_id = 0;
        follow_result(a, &a->assignment_node, ev);
    } else if (id == a->publish_op) {
        a->publish_op = 0;
        published(a, ev);
    } else if (id == a->leave_op) {
        a->leave_op = 0;
        leave_result(a, ev);
    }
}

/* A watch of ours fired (or was dropped): read again what it guarded.  A watch the library
 * did not register (NOTWATCHING while its op is still the one we wait for) only clears: the
 * op's own result decides. */
static void on_watch(zkl_allocator *a, const zkl_event *ev)
{
    uint64_t id = ev->id;
    int fired = ev->type != ZOO_NOTWATCHING_EVENT ||
                (id != a->join_op && id != a->members_op && id != a->partitions.op_id &&
                 id != a->assignment_node.op_id);
    if (id == a->join_watch) {
        a->join_watch = 0;
        if (fired && a->jstep == JOIN_WAIT)
            a->jstep = JOIN_CREATE;
    } else if (id == a->members_watch) {
        a->members_watch = 0;
        a->need_members |= fired;
    } else if (id == a->partitions.watch_id) {
        a->partitions.watch_id = 0;
        a->partitions.need |= fired;
    } else if (id == a->assignment_node.watch_id) {
        a->assignment_node.watch_id = 0;
        a->assignment_node.need |= fired;
    }
}

/* Every op of ours that asks for a watch (gets, children, exists): when the library could
 * not take it, no watch call will come. */
static void settle_unwatched(zkl_allocator *a, const zkl_event *ev)
{
    if (ev->watch_requested || ev->op == ZKL_OP_CREATE || ev->op == ZKL_OP_SET ||
        ev->op == ZKL_OP_DELETE)
        return;
    uint64_t *watches[] = {&a->join_watch, &a->members_watch, &a->partitions.watch_id,
                           &a->assignment_node.watch_id};
    for (size_t i = 0; i < 4; i++) {
        if (*watches[i] == ev->id) {
            *watches[i] = 0;
            a->inflight--;
            return;
        }
    }
}

static void destroy(zkl_allocator *a);

static void maybe_destroy(zkl_allocator *a)
{
    if (a->orphaned && a->inflight <= 0 && (!a->s || a->phase == ZKL_ALLOCATOR_IDLE))
        destroy(a);
}

static void on_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_allocator *a = ctx;
    a->inflight--;
    if (ev->kind == ZKL_EV_OP) {
        settle_unwatched(a, ev);
        if (a->s && a->phase != ZKL_ALLOCATOR_IDLE)
            on_op(a, ev);
    } else if (ev->kind == ZKL_EV_WATCH && a->s) {
        on_watch(a, ev);
    }
    zkl_alloc_update(a);
    maybe_destroy(a);
}

/* The settle window ended: the leader may compute.  (Timers are not counted in inflight: a
 * pending one is taken back whenever the allocator lets go of its session or is freed.) */
static void on_settle_route(zkl_session *s, const zkl_event *ev, void *ctx)
{
    (void)s;
    zkl_allocator *a = ctx;
    if (ev->kind != ZKL_EV_TIMER || ev->id != a->settle_timer)
        return;
    a->settle_timer = 0;
    zkl_alloc_update(a);
    maybe_destroy(a);
}

void zkl_alloc_after_item_event(zkl_allocator *a)
{
    settle(a);
    maybe_destroy(a);
}

/* The session expired (closed_rc 0) or was closed: every node of ours is gone. */
static void session_lost(zkl_allocator *a, int closed_rc)
{
    zkl_claims_lose_all(a);
    forget_group(a);
    a->joined = 0;
    a->join_op = a->join_watch = a->leave_op = 0;
    a->ensure_rounds = 0;
    if (a->phase == ZKL_ALLOCATOR_IDLE)
        return;
    if (a->phase == ZKL_ALLOCATOR_LEAVING) { /* done: everything went with the session */
        a->phase = ZKL_ALLOCATOR_IDLE;
        a->rc = ZOK;
    } else if (closed_rc || !a->rejoin || a->orphaned) {
        a->phase = ZKL_ALLOCATOR_IDLE;
        a->rc = closed_rc ? closed_rc : ZSESSIONEXPIRED;
    } else {
        /* a new member node on the new session; a join the expiry caught before its seed was
         * written starts again from the paths, so the seed is not skipped */
        int seeded = a->phase != ZKL_ALLOCATOR_JOINING || a->jstep > JOIN_SEED;
        a->phase = ZKL_ALLOCATOR_JOINING;
        a->jstep = seeded ? JOIN_CREATE : JOIN_ENSURE;
    }
    zkl_alloc_notify(a);
}

static void on_state(zkl_session *s, zkl_state state, void *ctx)
{
    zkl_allocator *a = ctx;
    if (state == ZKL_LOST) {
        if (zkl_session_is_stopped(s))
            session_lost(a, ZCLOSING);
        else if (zkl_session_client_state(s) == ZKL_CS_AUTH_FAILED)
            session_lost(a, ZAUTHFAILED);
        else
            session_lost(a, 0);
    }
    zkl_alloc_update(a);
    maybe_destroy(a);
}

/* ---------------------------------------------------------------- public */

static void destroy(zkl_allocator *a)
{
    settle_cancel(a);
    if (a->s && a->listening)
        zkl_session_remove_state_listener(a->s, on_state, a);
    zkl_claims_free_all(a);
    forget_group(a);
    free_all_members(a);
    if (a->seen_assignment != a->assignment)
        zkl_json_free(a->seen_assignment);
    free(a->buckets);
    free(a->acquired_q);
    free_strings(a->release_q, a->release_n);
    free_strings(a->lost_q, a->lost_n);
    free(a->path);
    free(a->members_path);
    free(a->owners_path);
    free(a->member_node);
    free(a->partitions.path);
    free(a->assignment_node.path);
    free(a->partitions.chunks_path);
    free(a->assignment_node.chunks_path);
    free(a->identifier);
    free(a->identifier_json);
    free(a->member_data);
    free(a->seed);
    zkl_acl_free(&a->acl);
    free(a);
}

static char *member_data(double weight, size_t *len)
{
    zkl_json_buf b;
    zkl_json_buf_init(&b);
    zkl_json_buf_raw(&b, "{\"weight\":", 10);
    zkl_json_buf_number(&b, weight);
    zkl_json_buf_raw(&b, ",\"chunked\":2}", 13); /* it reads chunked values */
    if (b.failed) {
        zkl_json_buf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.data;
}

zkl_allocator *zkl_allocator_new(zkl_session *s, const char *path, const char *identifier,
                                 double weight, int rejoin, const struct ACL_vector *acl)
{
    zkl_allocator *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->s = s;
    a->route.fn = on_route;
    a->route.ctx = a;
    a->id = zkl_session_new_target(s);
    a->rejoin = rejoin;
    a->assignment_version = -1;
    char *name = zkl_allocator_node_name(identifier);
    a->path = strdup(path);
    a->identifier = strdup(identifier);
    a->members_path = zkl_join_path(path, "members");
    a->owners_path = zkl_join_path(path, "owners");
    a->partitions.path = zkl_join_path(path, "partitions");
    a->assignment_node.path = zkl_join_path(path, "assignment");
    a->partitions.chunks_path = zkl_join_path(path, "partitions-chunks");
    a->assignment_node.chunks_path = zkl_join_path(path, "assignment-chunks");
    a->member_node = name && a->members_path ? zkl_join_path(a->members_path, name) : NULL;
    a->member_data = member_data(weight, &a->member_data_len);
    zkl_json_buf idj;
    zkl_json_buf_init(&idj);
    zkl_json_buf_string(&idj, identifier, strlen(identifier));
    a->identifier_json = idj.failed ? NULL : idj.data; /* NULL: followers read it whole */
    a->identifier_json_len = idj.len;
    free(name);
    errno = 0;
    if (!a->path || !a->identifier || !a->owners_path || !a->partitions.path ||
        !a->assignment_node.path || !a->member_node || !a->member_data ||
        !a->partitions.chunks_path || !a->assignment_node.chunks_path ||
        zkl_acl_copy(&a->acl, acl ? acl : &ZOO_OPEN_ACL_UNSAFE) != 0 ||
        zkl_session_add_state_listener(s, on_state, a) != 0) {
        if (!errno)
            errno = ENOMEM;
        a->s = NULL;
        destroy(a);
        return NULL;
    }
    a->listening = 1;
    return a;
}

void zkl_allocator_free(zkl_allocator *a)
{
    if (!a)
        return;
    a->orphaned = 1;
    if (a->s && a->phase != ZKL_ALLOCATOR_IDLE) {
        zkl_claims_abandon(a); /* nobody can run release hooks any more: give all up */
        if (a->phase != ZKL_ALLOCATOR_LEAVING)
            zkl_allocator_leave(a);
        zkl_alloc_update(a);
    }
    maybe_destroy(a);
}

void zkl_allocator_forget_session(zkl_allocator *a)
{
    a->settle_timer = 0; /* the session dropped its timers */
    zkl_claims_free_all(a);
    forget_group(a);
    free_all_members(a);
    a->s = NULL;
    a->inflight = 0; /* the session delivered (or dropped) everything before it went */
    a->joined = 0;
    a->join_op = a->join_watch = a->leave_op = 0;
    if (a->phase != ZKL_ALLOCATOR_IDLE) {
        a->rc = a->phase == ZKL_ALLOCATOR_LEAVING ? ZOK : ZCLOSING;
        a->phase = ZKL_ALLOCATOR_IDLE;
    }
}

int zkl_allocator_start(zkl_allocator *a, const char *seed, size_t seed_len)
{
    if (!a->s) {
        errno = ENOTCONN;
        return -1;
    }
    if (a->phase != ZKL_ALLOCATOR_IDLE) {
        errno = EALREADY;
        return -1;
    }
    char *copy = malloc(seed_len + 1);
    if (!copy) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(copy, seed, seed_len);
    copy[seed_len] = '\0';
    free(a->seed);
    a->seed = copy;
    a->seed_len = seed_len;
    a->phase = ZKL_ALLOCATOR_JOINING;
    a->jstep = JOIN_ENSURE;
    a->rc = ZOK;
    a->fatal_rc = ZOK;
    a->publish_rc = ZOK;
    a->ensure_rounds = 0;
    a->member_gone = 0;
    zkl_alloc_update(a);
    return 0;
}

int zkl_allocator_leave(zkl_allocator *a)
{
    if (!a->s || a->phase == ZKL_ALLOCATOR_IDLE || a->phase == ZKL_ALLOCATOR_LEAVING) {
        errno = EALREADY;
        return -1;
    }
    a->phase = ZKL_ALLOCATOR_LEAVING;
    a->member_gone = 0;
    a->leader = 0;
    settle_cancel(a);
    drop_publish(a);
    zkl_alloc_update(a);
    return 0;
}

zkl_allocator_phase zkl_allocator_phase_of(const zkl_allocator *a) { return a->phase; }
int zkl_allocator_rc(const zkl_allocator *a) { return a->rc; }
int zkl_allocator_is_leader(const zkl_allocator *a) { return a->leader; }

void zkl_allocator_set_settle(zkl_allocator *a, long settle_ms)
{
    a->settle_ms = settle_ms > 0 ? settle_ms : 0;
    if (!a->settle_ms)
        settle_cancel(a);
}
uint64_t zkl_allocator_id(const zkl_allocator *a) { return a->id; }
long zkl_allocator_inflight(const zkl_allocator *a) { return a->inflight; }
int zkl_allocator_publish_rc(const zkl_allocator *a) { return a->publish_rc; }
uint64_t zkl_allocator_epoch(const zkl_allocator *a) { return a->epoch; }
int64_t zkl_allocator_generation(const zkl_allocator *a) { return a->generation; }

int zkl_allocator_ready(const zkl_allocator *a)
{
    return a->phase == ZKL_ALLOCATOR_RUNNING && a->members_loaded && a->partitions.loaded &&
           a->assignment_node.loaded;
}

int zkl_allocator_fresh(const zkl_allocator *a)
{
    const followed_node *f[] = {&a->partitions, &a->assignment_node};
    for (size_t i = 0; i < 2; i++)
        if (f[i]->need || (f[i]->op_id && !f[i]->op_exists) || f[i]->chunk_ops)
            return 0;
    return zkl_allocator_ready(a) && !a->need_members && !a->members_op && a->member_pending == 0 &&
           !a->publish_data && !a->publish_op && (!a->leader || a->epoch == a->answered_epoch);
}

static int item_cmp(const void *pa, const void *pb)
{
    return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

/* The assignment names exactly the live members it was computed for and gives each item of
 * the set to one of them. */
static int assignment_current(zkl_allocator *a)
{
    const zkl_json *obj = zkl_json_get(full_assignment(a), "assignment");
    const zkl_json *members = assignment_members(a);
    if (!obj)
        return a->item_count == 0;
    if (!members || members->count != a->member_count)
        return 0;
    for (size_t i = 0; i < a->member_count; i++)
        if (strcmp(members->values[i]->string, a->members[i].id) != 0)
            return 0;
    unsigned char *seen = calloc(a->item_count ? a->item_count : 1, 1);
    if (!seen)
        return 0;
    size_t total = 0;
    int ok = 1;
    for (size_t m = 0; m < obj->count && ok; m++) {
        const zkl_json *list = obj->values[m];
        for (size_t j = 0; j < list->count && ok; j++) {
            const char *item = list->values[j]->string; /* canonical: strings only */
            const char **hit = bsearch(&item, a->items, a->item_count, sizeof *a->items,
                                       item_cmp);
            size_t k = hit ? (size_t)((char **)hit - a->items) : 0;
            ok = hit && !seen[k];
            if (ok)
                seen[k] = 1;
            total++;
        }
    }
    free(seen);
    return ok && total == a->item_count;
}

int zkl_allocator_settled(zkl_allocator *a)
{
    if (!zkl_allocator_fresh(a) || !zkl_claims_settled(a))
        return 0;
    if (a->checked_view != a->view || a->view == 0) {
        a->checked_ok = assignment_current(a);
        a->checked_view = a->view;
    }
    return a->checked_ok;
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

int zkl_allocator_moved(zkl_allocator *a, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    const zkl_json *before = zkl_json_get(a->seen_assignment, "assignment");
    const zkl_json *after = zkl_json_get(full_assignment(a), "assignment");
    size_t count = 0;
    for (size_t m = 0; before && m < before->count; m++)
        count += before->values[m]->count;
    size_t cap = 16;
    while (cap < 2 * count)
        cap *= 2;
    const char **items = calloc(cap, sizeof *items), **owners = calloc(cap, sizeof *owners);
    size_t out_n = 0, out_cap = 0;
    char **list = NULL;
    int rc = items && owners ? 0 : -1;
    for (size_t m = 0; rc == 0 && before && m < before->count; m++) { /* item -> old owner */
        const zkl_json *l = before->values[m];
        for (size_t j = 0; j < l->count; j++) {
            size_t k = fnv(l->values[j]->string) & (cap - 1);
            while (items[k])
                k = (k + 1) & (cap - 1);
            items[k] = l->values[j]->string;
            owners[k] = before->keys[m];
        }
    }
    for (size_t m = 0; rc == 0 && after && m < after->count; m++) {
        const zkl_json *l = after->values[m];
        for (size_t j = 0; rc == 0 && j < l->count; j++) {
            const char *item = l->values[j]->string;
            size_t k = fnv(item) & (cap - 1);
            while (items[k] && strcmp(items[k], item) != 0)
                k = (k + 1) & (cap - 1);
            if (items[k] && strcmp(owners[k], after->keys[m]) != 0)
                rc = zkl_alloc_push_string(&list, &out_n, &out_cap, item);
        }
    }
    free(items);
    free(owners);
    if (rc != 0) {
        free_strings(list, out_n);
        return -1;
    }
    if (a->seen_assignment != a->assignment)
        zkl_json_free(a->seen_assignment);
    a->seen_assignment = a->assignment;
    *out = list;
    *n = out_n;
    return 0;
}

int zkl_allocator_take(zkl_allocator *a, zkl_allocator_news *news)
{
    memset(news, 0, sizeof *news);
    if (zkl_claims_take_acquired(a, &news->acquired, &news->acquired_count) != 0)
        return -1;
    news->release = a->release_q;
    news->release_count = a->release_n;
    news->lost = a->lost_q;
    news->lost_count = a->lost_n;
    a->release_q = a->lost_q = NULL;
    a->release_n = a->release_cap = a->lost_n = a->lost_cap = 0;
    if (compute_needed(a)) {
        news->compute = a->epoch;
        a->asked_epoch = a->epoch;
    }
    a->notify_pending = 0;
    return 0;
}

void zkl_allocator_news_free(zkl_allocator_news *news)
{
    for (size_t i = 0; i < news->acquired_count; i++)
        free(news->acquired[i].item);
    free(news->acquired);
    free_strings(news->release, news->release_count);
    free_strings(news->lost, news->lost_count);
    memset(news, 0, sizeof *news);
}

int zkl_allocator_released(zkl_allocator *a, const char *item)
{
    if (!a->s)
        return 0;
    int r = zkl_claims_released(a, item);
    if (r)
        zkl_alloc_update(a);
    return r;
}

size_t zkl_allocator_member_count(const zkl_allocator *a) { return a->member_count; }

const char *zkl_allocator_member(const zkl_allocator *a, size_t i, double *weight)
{
    if (i >= a->member_count)
        return NULL;
    if (weight)
        *weight = a->members[i].weight;
    return a->members[i].id;
}

size_t zkl_allocator_item_count(const zkl_allocator *a) { return a->item_count; }

const char *zkl_allocator_item(const zkl_allocator *a, size_t i)
{
    return i < a->item_count ? a->items[i] : NULL;
}

const zkl_json *zkl_allocator_assignment(zkl_allocator *a, int64_t *generation,
                                         const zkl_json **members)
{
    if (generation)
        *generation = a->generation;
    const zkl_json *tree = full_assignment(a);
    if (members)
        *members = zkl_json_get(tree, "members");
    return zkl_json_get(tree, "assignment");
}

void zkl_allocator_touch(zkl_allocator *a)
{
    a->epoch++;
    if (a->s)
        zkl_alloc_update(a);
}

/* The live members as a JSON array (sorted: a->members is). */
static int members_json(const zkl_allocator *a, zkl_json_buf *out)
{
    zkl_json_buf_raw(out, "[", 1);
    for (size_t i = 0; i < a->member_count; i++) {
        if (i > 0)
            zkl_json_buf_raw(out, ",", 1);
        zkl_json_buf_string(out, a->members[i].id, strlen(a->members[i].id));
    }
    zkl_json_buf_raw(out, "]", 1);
    return out->failed ? -1 : 0;
}

/* {"generation":G,"leader":ID,"members":MEMBERS,"assignment":BODY} */
static char *assignment_data(const zkl_allocator *a, const char *members, const char *body,
                             size_t *len)
{
    zkl_json_buf b;
    zkl_json_buf_init(&b);
    zkl_json_buf_raw(&b, "{\"generation\":", 14);
    zkl_json_buf_number(&b, (double)(a->generation + 1));
    zkl_json_buf_raw(&b, ",\"leader\":", 10);
    zkl_json_buf_string(&b, a->identifier, strlen(a->identifier));
    zkl_json_buf_raw(&b, ",\"members\":", 11);
    zkl_json_buf_raw(&b, members, strlen(members));
    zkl_json_buf_raw(&b, ",\"assignment\":", 14);
    zkl_json_buf_raw(&b, body, strlen(body));
    zkl_json_buf_raw(&b, "}", 1);
    if (b.failed) {
        zkl_json_buf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.data;
}

/* Every live member reads chunked values (its member node says "chunked":2). */
static int all_read_chunked(const zkl_allocator *a)
{
    for (size_t i = 0; i < a->member_count; i++)
        if (!a->members[i].chunked)
            return 0;
    return 1;
}

/* The assignment (canonical members and body) as chunks and their header: 0, or an errno. */
static int chunked_assignment(zkl_allocator *a, const char *members, const char *body,
                              char tag[ZKL_TAG_MAX], char ***chunks, size_t *n, char **header,
                              size_t *header_len)
{
    if (zkl_alloc_new_tag(tag, a->assignment_version) != 0)
        return EIO;
    char *probe = zkl_alloc_chunk_path(a->assignment_node.chunks_path, tag, 0);
    if (!probe)
        return ENOMEM;
    size_t limit = zkl_allocator_max_node(probe);
    free(probe);
    zkl_json *tree = zkl_json_parse(body, strlen(body), NULL);
    int rc = tree ? zkl_alloc_cut_assignment(tree, limit, chunks, n) : -1;
    zkl_json_free(tree);
    if (rc != 0)
        return ENOMEM;
    zkl_json_buf b;
    zkl_json_buf_init(&b);
    zkl_json_buf_raw(&b, "{\"zklua_chunked\":2,\"tag\":", 25);
    zkl_json_buf_string(&b, tag, strlen(tag));
    zkl_json_buf_raw(&b, ",\"chunks\":", 10);
    zkl_json_buf_number(&b, (double)*n);
    zkl_json_buf_raw(&b, ",\"generation\":", 14);
    zkl_json_buf_number(&b, (double)(a->generation + 1));
    zkl_json_buf_raw(&b, ",\"leader\":", 10);
    zkl_json_buf_string(&b, a->identifier, strlen(a->identifier));
    zkl_json_buf_raw(&b, ",\"members\":", 11);
    zkl_json_buf_raw(&b, members, strlen(members));
    zkl_json_buf_raw(&b, "}", 1);
    if (b.failed || b.len > zkl_allocator_max_node(a->assignment_node.path)) {
        int e = b.failed ? ENOMEM : EMSGSIZE; /* (members alone over a node) */
        zkl_json_buf_free(&b);
        for (size_t i = 0; i < *n; i++)
            free((*chunks)[i]);
        free(*chunks);
        *chunks = NULL;
        return e;
    }
    *header = b.data;
    *header_len = b.len;
    return 0;
}

int zkl_allocator_publish(zkl_allocator *a, uint64_t epoch, const char *body, size_t len)
{
    if (!a->s || !a->leader || epoch != a->epoch || a->phase != ZKL_ALLOCATOR_RUNNING) {
        errno = ESTALE;
        return -1;
    }
    a->answered_epoch = epoch;
    if (!body)
        return 0;
    zkl_json *tree = zkl_json_parse(body, len, NULL);
    zkl_json_buf members, key;
    zkl_json_buf_init(&members);
    zkl_json_buf_init(&key);
    size_t members_len = 0;
    int bad = members_json(a, &members) != 0;
    if (!bad) {
        members_len = members.len;
        zkl_json_buf_raw(&key, members.data, members.len);
        bad = zkl_alloc_canonical_assignment(tree, &key) != 0;
    }
    zkl_json_free(tree);
    if (bad) {
        errno = members.failed || key.failed ? ENOMEM : EINVAL;
        zkl_json_buf_free(&members);
        zkl_json_buf_free(&key);
        return -1;
    }
    if (assignment_key(a) == 0 && strcmp(a->assignment_body, key.data) == 0) {
        zkl_json_buf_free(&members);
        zkl_json_buf_free(&key);
        return 0; /* the same members own the same items: nothing to publish */
    }
    size_t data_len = 0;
    char *data = assignment_data(a, members.data, key.data + members_len, &data_len);
    char **chunks = NULL, *header = NULL;
    size_t chunk_n = 0, header_len = 0;
    char tag[ZKL_TAG_MAX];
    int err = data ? 0 : ENOMEM;
    if (!err && data_len > zkl_allocator_max_node(a->assignment_node.path)) {
        err = all_read_chunked(a) ? chunked_assignment(a, members.data, key.data + members_len,
                                                       tag, &chunks, &chunk_n, &header,
                                                       &header_len)
                                  : EMSGSIZE;
    }
    zkl_json_buf_free(&members);
    zkl_json_buf_free(&key);
    if (err) {
        free(data);
        errno = err;
        return -1;
    }
    drop_publish(a);
    a->publish_data = data;
    a->publish_len = data_len;
    a->publish_version = a->assignment_version;
    a->publish_chunks = chunks;
    a->publish_chunk_n = chunk_n;
    a->publish_header = header;
    a->publish_header_len = header_len;
    if (chunks)
        snprintf(a->publish_tag, sizeof a->publish_tag, "%s", tag);
    zkl_alloc_update(a);
    return 1;
}
