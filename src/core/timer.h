/*
 * timer.h — one-shot timers for C recipes, fired on the owner thread through the session.
 *
 * A recipe that must act after a delay (a settle window, a bound on how long it waits) asks
 * for a timer with a route; once the delay has passed, a ZKL_EV_TIMER event carrying the
 * timer's id reaches route.fn inside zkl_session_next(), exactly like a routed op's result.
 *
 * Guarantees:
 * - Every timer gets exactly one call: when due (rc ZOK), or during zkl_session_free() when the
 *   session goes first (rc ZCLOSING).  Recipes count timers in flight like ops and watches.
 * - A timer never fires early (monotonic clock); it is late by however long the owner takes to
 *   call zkl_session_next() again.  Ids come from the session's op ids: never reused.
 * - Timers do not care about the connection: SUSPENDED, LOST and zkl_session_stop() leave
 *   them running (the recipe decides what a timer means in each state).
 * - One thread per session, started with its first timer with every signal blocked, sleeps
 *   until the earliest timer is due and pushes it on the session's queue, which wakes the
 *   owner however it waits (the condition variable, or a host loop polling the fd).
 */
#ifndef ZKL_TIMER_H
#define ZKL_TIMER_H

#include <stdint.h>

#include "route.h"
#include "session.h"

/* A timer firing after delay_ms (<= 0: at the next zkl_session_next()).  Its id, or 0 when
 * out of memory or no thread could be started (then no call will come). */
uint64_t zkl_session_timer(zkl_session *s, long delay_ms, const zkl_route *route);

#endif
