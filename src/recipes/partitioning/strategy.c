/*
 * strategy.c — see strategy.h: the hash, bytewise sorting and lookup, the rendezvous score and
 * the sticky filling that several strategies share, and the table of strategies by name.
 */
#include "strategy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

uint64_t zkl_strategy_fnv1a(uint64_t state, const char *data, size_t len)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < len; i++) {
        state ^= p[i];
        state *= UINT64_C(0x100000001b3);
    }
    return state;
}

uint64_t zkl_strategy_mix(uint64_t k)
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k *= UINT64_C(0xc4ceb9fe1a85ec53);
    k ^= k >> 33;
    return k;
}

uint64_t zkl_strategy_hash(const char *data, size_t len)
{
    return zkl_strategy_mix(zkl_strategy_fnv1a(ZKL_FNV_OFFSET, data, len));
}

uint64_t zkl_strategy_score(uint64_t member_hash, uint64_t item_hash)
{
    return zkl_strategy_mix(member_hash ^ item_hash);
}

int zkl_str_compare(zkl_str a, zkl_str b)
{
    size_t common = a.len < b.len ? a.len : b.len;
    int c = common ? memcmp(a.data, b.data, common) : 0;
    if (c != 0)
        return c;
    return (a.len > b.len) - (a.len < b.len);
}

typedef struct {
    zkl_str s;
    size_t index;
} indexed_str;

static int compare_indexed(const void *pa, const void *pb)
{
    const indexed_str *a = pa;
    const indexed_str *b = pb;
    int c = zkl_str_compare(a->s, b->s);
    if (c != 0)
        return c;
    /* equal strings (a duplicate): keep the result independent of qsort's whims */
    return (a->index > b->index) - (a->index < b->index);
}

int zkl_strategy_sort(const zkl_str *list, size_t n, size_t *order)
{
    if (n == 0)
        return 0;
    indexed_str *tmp = malloc(n * sizeof *tmp);
    if (!tmp) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        tmp[i].s = list[i];
        tmp[i].index = i;
    }
    qsort(tmp, n, sizeof *tmp, compare_indexed);
    for (size_t k = 0; k < n; k++)
        order[k] = tmp[k].index;
    free(tmp);
    return 0;
}

const size_t *zkl_strategy_order(const zkl_str *list, size_t n, const size_t *given,
                                 size_t **to_free)
{
    *to_free = NULL;
    if (given)
        return given;
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order || zkl_strategy_sort(list, n, order) != 0) {
        free(order);
        errno = ENOMEM;
        return NULL;
    }
    *to_free = order;
    return order;
}

size_t zkl_strategy_duplicate(const zkl_str *list, const size_t *order, size_t n)
{
    for (size_t k = 1; k < n; k++) {
        if (zkl_str_compare(list[order[k - 1]], list[order[k]]) == 0)
            return order[k];
    }
    return ZKL_STRATEGY_NO_OWNER;
}

size_t zkl_strategy_find(const zkl_str *list, const size_t *order, size_t n, zkl_str key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = zkl_str_compare(list[order[mid]], key);
        if (c == 0)
            return order[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return ZKL_STRATEGY_NO_OWNER;
}

void zkl_strategy_count_current(const zkl_strategy_input *in, size_t *count)
{
    memset(count, 0, in->n_members * sizeof *count);
    if (!in->current)
        return;
    for (size_t i = 0; i < in->n_items; i++) {
        size_t m = in->current[i];
        if (m < in->n_members)
            count[m]++;
    }
}

/* Pass 1 of the filling: each item (in bytewise order) stays with its current owner while
 * that owner has room; the others get ZKL_STRATEGY_NO_OWNER. */
static void keep_current_owners(const zkl_strategy_input *in, const size_t *item_order,
                                size_t *room, size_t *owner)
{
    for (size_t k = 0; k < in->n_items; k++) {
        size_t i = item_order[k];
        size_t m = in->current ? in->current[i] : ZKL_STRATEGY_NO_OWNER;
        if (m < in->n_members && room[m] > 0) {
            owner[i] = m;
            room[m]--;
        } else {
            owner[i] = ZKL_STRATEGY_NO_OWNER;
        }
    }
}

/* Whether member a beats member b for an item: the higher score, then the smaller name. */
static int better_member(const zkl_strategy_input *in, size_t a, uint64_t score_a, size_t b,
                         uint64_t score_b)
{
    if (score_a != score_b)
        return score_a > score_b;
    return zkl_str_compare(in->members[a], in->members[b]) < 0;
}

/* Pass 2: every item still without an owner goes to the member with room and the highest
 * rendezvous score.  avail holds the members with room; a member that fills up leaves it. */
static void place_the_rest(const zkl_strategy_input *in, const size_t *item_order,
                           const uint64_t *member_hash, size_t *room, size_t *avail,
                           size_t n_avail, size_t *owner)
{
    for (size_t k = 0; k < in->n_items && n_avail > 0; k++) {
        size_t i = item_order[k];
        if (owner[i] != ZKL_STRATEGY_NO_OWNER)
            continue;
        uint64_t ih = zkl_strategy_hash(in->items[i].data, in->items[i].len);
        size_t best_slot = 0;
        uint64_t best_score = zkl_strategy_score(member_hash[avail[0]], ih);
        for (size_t a = 1; a < n_avail; a++) {
            uint64_t s = zkl_strategy_score(member_hash[avail[a]], ih);
            if (better_member(in, avail[a], s, avail[best_slot], best_score)) {
                best_slot = a;
                best_score = s;
            }
        }
        size_t m = avail[best_slot];
        owner[i] = m;
        if (--room[m] == 0)
            avail[best_slot] = avail[--n_avail];
    }
}

int zkl_strategy_fill(const zkl_strategy_input *in, const size_t *quota, size_t *owner)
{
    size_t n = in->n_members, items = in->n_items;
    if (n == 0 || items == 0)
        return 0;
    size_t *sorted = NULL;
    const size_t *item_order = zkl_strategy_order(in->items, items, in->item_order, &sorted);
    size_t *room = malloc(n * sizeof *room);
    size_t *avail = malloc(n * sizeof *avail);
    uint64_t *member_hash = malloc(n * sizeof *member_hash);
    int rc = -1;
    if (!item_order || !room || !avail || !member_hash) {
        errno = ENOMEM;
        goto done;
    }
    memcpy(room, quota, n * sizeof *room);
    keep_current_owners(in, item_order, room, owner);
    size_t n_avail = 0;
    for (size_t m = 0; m < n; m++) {
        member_hash[m] = zkl_strategy_hash(in->members[m].data, in->members[m].len);
        if (room[m] > 0)
            avail[n_avail++] = m;
    }
    place_the_rest(in, item_order, member_hash, room, avail, n_avail, owner);
    rc = 0;
done:
    free(sorted);
    free(room);
    free(avail);
    free(member_hash);
    return rc;
}

static const struct {
    const char *name;
    zkl_strategy_fn fn;
} STRATEGIES[] = {
    {"round_robin", zkl_strategy_round_robin},
    {"consistent_hash", zkl_strategy_consistent_hash},
    {"rendezvous", zkl_strategy_rendezvous},
    {"sticky", zkl_strategy_sticky},
    {"weighted", zkl_strategy_weighted},
};

zkl_strategy_fn zkl_strategy_named(const char *name)
{
    for (size_t i = 0; i < sizeof STRATEGIES / sizeof STRATEGIES[0]; i++) {
        if (strcmp(STRATEGIES[i].name, name) == 0)
            return STRATEGIES[i].fn;
    }
    return NULL;
}
