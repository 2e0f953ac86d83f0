/*
 * route.h — where an op's result or a watch's event goes when C, not Lua, asked for it.
 *
 * Recipes (src/recipes) are state machines in C: they submit ops with a route, and the
 * session calls route.fn on the owner thread, inside zkl_session_next(), instead of handing
 * the event to the caller.  A watch asked for by a routed op fires through the same route
 * (kind ZKL_EV_WATCH).  A route's fn must not call back into Lua; it may submit more ops.
 */
#ifndef ZKL_ROUTE_H
#define ZKL_ROUTE_H

struct zkl_session;
struct zkl_event;

typedef void (*zkl_route_fn)(struct zkl_session *s, const struct zkl_event *ev, void *ctx);

typedef struct zkl_route {
    zkl_route_fn fn;
    void *ctx;
} zkl_route;

#endif
