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
    size_t *member_order = malloc(n * sizeof *member_order);
    size_t *item_order = malloc(items * sizeof *item_order);
    int rc = -1;
    if (!member_order || !item_order || zkl_strategy_sort(in->members, n, member_order) != 0 ||
        zkl_strategy_sort(in->items, items, item_order) != 0) {
        errno = ENOMEM;
        goto done;
    }
    for (size_t k = 0; k < items; k++)
        owner[item_order[k]] = member_order[k % n];
    rc = 0;
done:
    free(member_order);
    free(item_order);
    return rc;
}
