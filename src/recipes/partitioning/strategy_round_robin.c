/*
 * strategy_round_robin.c — kazoo's SetPartitioner default partition function
 * (kazoo.recipe.partitioner.SetPartitioner._partitioner): with items and members sorted, the
 * member at index i owns all_partitions[i::len(workers)].  Python sorts str by code point,
 * which for UTF-8 strings is the bytewise order used here, so a kazoo member and a zklua
 * member agree on every item.
 */
#include "strategy.h"

#include <errno.h>
#include <stdlib.h>

int zkl_strategy_round_robin(const zkl_strategy_input *in, size_t *owner)
{
    size_t n = in->n_members, items = in->n_items;
    if (n == 0 || items == 0)
        return 0;
    size_t *sorted_members, *sorted_items;
    const size_t *member_order = zkl_strategy_order(in->members, n, in->member_order,
                                                    &sorted_members);
    const size_t *item_order = zkl_strategy_order(in->items, items, in->item_order,
                                                  &sorted_items);
    int rc = -1;
    if (member_order && item_order) {
        for (size_t k = 0; k < items; k++)
            owner[item_order[k]] = member_order[k % n];
        rc = 0;
    }
    free(sorted_members);
    free(sorted_items);
    if (rc != 0)
        errno = ENOMEM;
    return rc;
}
