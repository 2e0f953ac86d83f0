/*
 * strategy_sticky.c — fewest moves within a strict balance: each member gets floor(N/n) or
 * ceil(N/n) items, the ceil going to the members that own the most items now (then to the
 * bytewise smaller names), and zkl_strategy_fill keeps every current owner within that
 * share.  A join moves only the share the new member needs (about N / (n + 1)); a leave moves
 * only the leaver's items.  Without a current ownership it is a balanced rendezvous.
 */
#include "strategy.h"

#include <errno.h>
#include <stdlib.h>

typedef struct {
    size_t member;
    size_t owned; /* items it owns now */
    zkl_str name;
} member_rank;

static int compare_ranks(const void *pa, const void *pb)
{
    const member_rank *a = pa;
    const member_rank *b = pb;
    if (a->owned != b->owned)
        return a->owned > b->owned ? -1 : 1; /* who owns the most comes first */
    return zkl_str_compare(a->name, b->name);
}

/* quota[m]: floor(N/n) for every member, + 1 for the N % n members owning the most now. */
static int balanced_quotas(const zkl_strategy_input *in, size_t *quota)
{
    size_t n = in->n_members;
    member_rank *rank = malloc(n * sizeof *rank);
    size_t *owned = malloc(n * sizeof *owned);
    if (!rank || !owned) {
        free(rank);
        free(owned);
        errno = ENOMEM;
        return -1;
    }
    zkl_strategy_count_current(in, owned);
    for (size_t m = 0; m < n; m++) {
        rank[m].member = m;
        rank[m].owned = owned[m];
        rank[m].name = in->members[m];
    }
    qsort(rank, n, sizeof *rank, compare_ranks);
    size_t base = in->n_items / n, extra = in->n_items % n;
    for (size_t k = 0; k < n; k++)
        quota[rank[k].member] = base + (k < extra ? 1 : 0);
    free(rank);
    free(owned);
    return 0;
}

int zkl_strategy_sticky(const zkl_strategy_input *in, size_t *owner)
{
    if (in->n_members == 0 || in->n_items == 0)
        return 0;
    size_t *quota = malloc(in->n_members * sizeof *quota);
    if (!quota) {
        errno = ENOMEM;
        return -1;
    }
    int rc = balanced_quotas(in, quota);
    if (rc == 0)
        rc = zkl_strategy_fill(in, quota, owner);
    free(quota);
    return rc;
}
