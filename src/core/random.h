/*
 * random.h — cheap pseudo-random numbers for jitter (spreading retries and pauses so that
 * clients do not move in step), never for anything secret: uuids read /dev/urandom instead
 * (src/recipes/common.h).
 *
 * Guarantees: each user keeps its own state (one uint64_t), so there is no global state and
 * no locking (rand() and drand48() share a global one and are not thread-safe); a state from
 * zkl_random_seed() is never 0 (xorshift's one fixed point) and differs between objects made
 * at the same instant (the salt, e.g. the object's address) and between processes (the pid).
 */
#ifndef ZKL_RANDOM_H
#define ZKL_RANDOM_H

#include <stdint.h>

/* A fresh state: the clock, the pid and salt mixed. */
uint64_t zkl_random_seed(const void *salt);
/* A uniform number in [0, 1) (xorshift64*); advances *state. */
double zkl_random_unit(uint64_t *state);

#endif
