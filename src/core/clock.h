/*
 * clock.h — the monotonic clock every deadline in the core is measured by.
 *
 * Waits use CLOCK_MONOTONIC, never the wall clock, so that a clock step (NTP, an operator's
 * date) neither cuts a session's timeout short nor stretches a pause.  The wall clock is here
 * too, for what is a date rather than a deadline (a lease's end, when a change was seen).
 */
#ifndef ZKL_CLOCK_H
#define ZKL_CLOCK_H

#include <pthread.h>
#include <time.h>

double zkl_monotonic_seconds(void);
long long zkl_monotonic_ms(void);
/* Seconds since the Unix epoch (CLOCK_REALTIME, UTC), with the clock's fraction. */
double zkl_wall_clock_seconds(void);
/* The monotonic time us microseconds from now (us >= 0), as pthread_cond_timedwait takes it. */
struct timespec zkl_monotonic_after_us(long long us);
/* A condition variable whose timed waits are measured by CLOCK_MONOTONIC; 0 or an errno. */
int zkl_cond_init_monotonic(pthread_cond_t *cond);

#endif
