/*
 * random.c — see random.h.  xorshift64* (Vigna, 2016): 53 good bits per call, one multiply.
 */
#include "random.h"

#include <time.h>
#include <unistd.h>

uint64_t zkl_random_seed(const void *salt)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t x = ((uint64_t)now.tv_nsec << 20) ^ (uint64_t)now.tv_sec ^
                 ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)salt;
    x += 0x9E3779B97F4A7C15ULL; /* splitmix64's finaliser: every input bit moves every output bit */
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return x ? x : 0x9E3779B97F4A7C15ULL;
}

double zkl_random_unit(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}
