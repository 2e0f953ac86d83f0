/*
 * strategy.h — partition strategies: pure functions that give each item of a set one owner
 * among a group's members (no Lua, no ZooKeeper, no state between calls).
 *
 * Guarantees, for every strategy here:
 * - every item gets exactly one owner, a member of the input (when there is at least one
 *   member; with no member nothing is written and 0 is returned);
 * - the result depends only on the strings given (and the context below), never on the order
 *   of the members or items arrays nor on the machine: strings compare bytewise (memcmp, then
 *   length), the hash below is fixed, and floating-point work is plain IEEE-754 double;
 * - SUSPENDED (connection loss) and LOST (session expiry) do not apply here: a strategy sees
 *   only strings.  Whoever calls it (the SetPartitioner, the PartitionAllocator) decides what
 *   a connection loss means for the ownership it computes.
 *
 * The hash (zkl_strategy_hash) is FNV-1a 64 (offset basis 0xcbf29ce484222325, prime
 * 0x100000001b3) over the bytes, followed by MurmurHash3's 64-bit finalizer (fmix64) so that
 * every bit of the result depends on every byte.  Every member on every machine computes the
 * same value; changing it would make members of one group disagree, so it never changes.
 *
 * The strategies (one file each):
 * - round_robin: kazoo's SetPartitioner default.  Items and members sorted; the member at
 *   sorted index i owns the items at sorted indexes i, i + n, i + 2n, ...
 * - consistent_hash: a ring of vnodes points per member at hash("<member>#<k>"), k = 0 ..
 *   vnodes - 1; an item belongs to the first point at or after hash(item), wrapping around
 *   (equal points: the bytewise smaller member first).
 * - rendezvous: highest random weight; an item belongs to the member with the highest
 *   score(member, item) = fmix64(hash(member) ^ hash(item)) (a tie: the smaller member).
 * - sticky: every member owns floor(N/n) or ceil(N/n) items (the ceil goes to the members
 *   that own the most now, then the bytewise smaller); each item stays with its current owner
 *   while that owner is a member with room (an owner with more than its share keeps its
 *   bytewise smallest items), every other item goes to the member with room and the highest
 *   rendezvous score.  So a join or leave moves the fewest items balance allows.
 * - weighted: member i owns a share of N proportional to weights[i] (largest remainder:
 *   floor(N * w / W), the items left over one each to the largest remainders, ties to the
 *   smaller member), filled like sticky: current owners keep items within their share.
 */
#ifndef ZKL_STRATEGY_H
#define ZKL_STRATEGY_H

#include <stddef.h>
#include <stdint.h>

/* A string that need not be NUL-terminated (a Lua string, a znode name). */
typedef struct {
    const char *data;
    size_t len;
} zkl_str;

/* An item without a current owner, or whose owner is not a member. */
#define ZKL_STRATEGY_NO_OWNER ((size_t)-1)

enum { ZKL_STRATEGY_DEFAULT_VNODES = 160, ZKL_STRATEGY_MAX_VNODES = 10000 };

typedef struct {
    const zkl_str *members; /* distinct, in any order */
    size_t n_members;
    const zkl_str *items; /* distinct, in any order */
    size_t n_items;
    const size_t *current;  /* NULL, or per item: the index in members of its owner now, or
                               ZKL_STRATEGY_NO_OWNER (sticky, weighted) */
    const double *weights;  /* NULL (all 1), or per member: a finite number > 0 (weighted) */
    size_t vnodes;          /* points per member on the ring, 1 .. ZKL_STRATEGY_MAX_VNODES;
                               0 means ZKL_STRATEGY_DEFAULT_VNODES (consistent_hash) */
    const size_t *member_order; /* NULL, or the members' order from zkl_strategy_sort (a caller
                                   that sorted them already saves a strategy the work) */
    const size_t *item_order;   /* the same for the items */
} zkl_strategy_input;

/* A strategy writes owner[i] = the index in in->members of the owner of in->items[i].
 * 0, or -1 when out of memory (errno ENOMEM; owner is then undefined). */
typedef int (*zkl_strategy_fn)(const zkl_strategy_input *in, size_t *owner);

int zkl_strategy_round_robin(const zkl_strategy_input *in, size_t *owner);
int zkl_strategy_consistent_hash(const zkl_strategy_input *in, size_t *owner);
int zkl_strategy_rendezvous(const zkl_strategy_input *in, size_t *owner);
int zkl_strategy_sticky(const zkl_strategy_input *in, size_t *owner);
int zkl_strategy_weighted(const zkl_strategy_input *in, size_t *owner);

/* The strategy called name ("round_robin", ...), or NULL. */
zkl_strategy_fn zkl_strategy_named(const char *name);

/* --- helpers the strategies share (strategy.c) --- */

/* FNV-1a 64 over the bytes, then fmix64 (see above). */
uint64_t zkl_strategy_hash(const char *data, size_t len);

/* FNV-1a 64 without the finalizer, continued from state (start from ZKL_FNV_OFFSET). */
#define ZKL_FNV_OFFSET UINT64_C(0xcbf29ce484222325)
uint64_t zkl_strategy_fnv1a(uint64_t state, const char *data, size_t len);

/* MurmurHash3's 64-bit finalizer: a bijection that mixes every bit into every other. */
uint64_t zkl_strategy_mix(uint64_t k);

/* <0, 0, >0 as a is bytewise before, equal to, after b (a prefix comes first). */
int zkl_str_compare(zkl_str a, zkl_str b);

/* order[k] = the index in list of its k-th string in bytewise order.  0, or -1 (ENOMEM). */
int zkl_strategy_sort(const zkl_str *list, size_t n, size_t *order);

/* given when not NULL; else list's order from zkl_strategy_sort in new memory, also stored in
 * *to_free for the caller to free.  NULL when out of memory (errno ENOMEM). */
const size_t *zkl_strategy_order(const zkl_str *list, size_t n, const size_t *given,
                                 size_t **to_free);

/* With order from zkl_strategy_sort: the index of a string that occurs twice in list, or
 * ZKL_STRATEGY_NO_OWNER when all are distinct. */
size_t zkl_strategy_duplicate(const zkl_str *list, const size_t *order, size_t n);

/* With order from zkl_strategy_sort: the index in list of key, or ZKL_STRATEGY_NO_OWNER. */
size_t zkl_strategy_find(const zkl_str *list, const size_t *order, size_t n, zkl_str key);

/* The rendezvous score of a member for an item, from their hashes. */
uint64_t zkl_strategy_score(uint64_t member_hash, uint64_t item_hash);

/* Sticky filling within quotas (sticky and weighted): quota[m] items for member m, the quotas
 * summing to in->n_items.  Items keep a current owner with room (visited in bytewise order),
 * the rest go to the member with room and the highest rendezvous score.  0, or -1 (ENOMEM). */
int zkl_strategy_fill(const zkl_strategy_input *in, const size_t *quota, size_t *owner);

/* How many items each member owns now (in->current; zeros when NULL): count[n_members]. */
void zkl_strategy_count_current(const zkl_strategy_input *in, size_t *count);

#endif
