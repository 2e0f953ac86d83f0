/*
 * strategy_weighted.c — shares proportional to member weights, by the largest remainder
 * method (Hamilton): member m's exact share is N * w[m] / W; each gets the floor of it, and the
 * items left over go one each to the largest fractional remainders (a tie: the bytewise
 * smaller member).  zkl_strategy_fill then keeps current owners within their shares and gives
 * the rest by rendezvous score, so a weight change moves about as many items as the shares
 * change.  Whole-number weights are shared out in exact integer arithmetic; other weights are
 * doubles, with the same IEEE-754 steps on every machine.
 */
#include "strategy.h"

#include <errno.h>
#include <stdlib.h>

typedef struct {
    size_t member;
    double remainder;
    zkl_str name;
} member_remainder;

static int compare_remainders(const void *pa, const void *pb)
{
    const member_remainder *a = pa;
    const member_remainder *b = pb;
    if (a->remainder != b->remainder)
        return a->remainder > b->remainder ? -1 : 1; /* the largest remainder first */
    return zkl_str_compare(a->name, b->name);
}

static double weight_of(const zkl_strategy_input *in, size_t m)
{
    return in->weights ? in->weights[m] : 1.0;
}

/* The largest weight: the weights are divided by it first, so that their sum cannot overflow
 * however large they are. */
static double largest_weight(const zkl_strategy_input *in)
{
    double max = 0;
    for (size_t m = 0; m < in->n_members; m++) {
        if (weight_of(in, m) > max)
            max = weight_of(in, m);
    }
    return max;
}

enum { EXACT_WEIGHT_MAX = 1000000000 }; /* integer weights up to this: exact arithmetic */

/* Whether every weight is a whole number small enough for exact integer shares: then
 * N * w fits in 64 bits, and remainders that are equal compare equal (doubles could order two
 * equal remainders by rounding error, and the tie rule would not be the one documented). */
static int integer_weights(const zkl_strategy_input *in)
{
    for (size_t m = 0; m < in->n_members; m++) {
        double w = weight_of(in, m);
        if (w != (double)(long long)w || w > EXACT_WEIGHT_MAX)
            return 0;
    }
    return in->n_items <= (size_t)1 << 32 && in->n_members <= (size_t)1 << 24;
}

/* floor_shares for integer weights: floor(N * w / W) and (N * w) mod W, exactly. */
static long long exact_floor_shares(const zkl_strategy_input *in, size_t *quota,
                                    member_remainder *rem)
{
    unsigned long long total = 0, n = in->n_items;
    for (size_t m = 0; m < in->n_members; m++)
        total += (unsigned long long)weight_of(in, m);
    long long left = (long long)in->n_items;
    for (size_t m = 0; m < in->n_members; m++) {
        unsigned long long scaled = n * (unsigned long long)weight_of(in, m);
        quota[m] = (size_t)(scaled / total);
        left -= (long long)quota[m];
        rem[m].member = m;
        rem[m].remainder = (double)(scaled % total); /* < 2^53: exact as a double */
        rem[m].name = in->members[m];
    }
    return left;
}

/* Floors of the exact shares into quota, their remainders into rem; returns N - sum(floors),
 * which rounding keeps between -n and n (it is the number of items left to hand out). */
static long long floor_shares(const zkl_strategy_input *in, size_t *quota,
                              member_remainder *rem)
{
    if (integer_weights(in))
        return exact_floor_shares(in, quota, rem);
    double max = largest_weight(in), total = 0;
    for (size_t m = 0; m < in->n_members; m++)
        total += weight_of(in, m) / max;
    long long left = (long long)in->n_items;
    for (size_t m = 0; m < in->n_members; m++) {
        double exact = (double)in->n_items * (weight_of(in, m) / max / total);
        if (exact > (double)in->n_items)
            exact = (double)in->n_items;
        double whole = (double)(size_t)exact; /* exact >= 0: truncation is the floor */
        quota[m] = (size_t)whole;
        left -= (long long)quota[m];
        rem[m].member = m;
        rem[m].remainder = exact - whole;
        rem[m].name = in->members[m];
    }
    return left;
}

static int largest_remainder_quotas(const zkl_strategy_input *in, size_t *quota)
{
    size_t n = in->n_members;
    member_remainder *rem = malloc(n * sizeof *rem);
    if (!rem) {
        errno = ENOMEM;
        return -1;
    }
    long long left = floor_shares(in, quota, rem);
    qsort(rem, n, sizeof *rem, compare_remainders);
    /* left > 0: one more item each for the largest remainders (cycling, should rounding
     * ever leave more than n).  left < 0 (rounding pushed a floor up): one less each for the
     * smallest remainders that have one. */
    for (size_t k = 0; left > 0; k = (k + 1) % n, left--)
        quota[rem[k].member]++;
    for (size_t k = n; left < 0; k = k > 1 ? k - 1 : n) {
        if (quota[rem[k - 1].member] > 0) {
            quota[rem[k - 1].member]--;
            left++;
        }
    }
    free(rem);
    return 0;
}

int zkl_strategy_weighted(const zkl_strategy_input *in, size_t *owner)
{
    if (in->n_members == 0 || in->n_items == 0)
        return 0;
    size_t *quota = malloc(in->n_members * sizeof *quota);
    if (!quota) {
        errno = ENOMEM;
        return -1;
    }
    int rc = largest_remainder_quotas(in, quota);
    if (rc == 0)
        rc = zkl_strategy_fill(in, quota, owner);
    free(quota);
    return rc;
}
