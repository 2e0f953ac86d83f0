/*
 * strategy_rendezvous.c — highest random weight (Thaler and Ravishankar): an item belongs to
 * the member with the highest score(member, item) (strategy.h).  When a member joins, the only
 * items that move are those it now scores highest on (about N / n); when one leaves, only its
 * own items move.  Balance is statistical: about N / n each, without a bound.
 */
#include "strategy.h"

#include <errno.h>
#include <stdlib.h>

int zkl_strategy_rendezvous(const zkl_strategy_input *in, size_t *owner)
{
    size_t n = in->n_members;
    if (n == 0 || in->n_items == 0)
        return 0;
    uint64_t *member_hash = malloc(n * sizeof *member_hash);
    if (!member_hash) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t m = 0; m < n; m++)
        member_hash[m] = zkl_strategy_hash(in->members[m].data, in->members[m].len);
    for (size_t i = 0; i < in->n_items; i++) {
        uint64_t ih = zkl_strategy_hash(in->items[i].data, in->items[i].len);
        size_t best = 0;
        uint64_t best_score = zkl_strategy_score(member_hash[0], ih);
        for (size_t m = 1; m < n; m++) {
            uint64_t s = zkl_strategy_score(member_hash[m], ih);
            /* a tie (astronomically rare) goes to the bytewise smaller member */
            if (s > best_score ||
                (s == best_score && zkl_str_compare(in->members[m], in->members[best]) < 0)) {
                best = m;
                best_score = s;
            }
        }
        owner[i] = best;
    }
    free(member_hash);
    return 0;
}
