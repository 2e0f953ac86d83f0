/*
 * watch_routes.h — the routes of watches that C code asked for, by op id (owner thread only).
 *
 * The library calls a watcher with the op id as its context; when that id is here, the event
 * goes to the route.  An entry leaves when its watch fires, when the library did not register
 * the watch, or when the handle that held it is closed: no route outlives its watch.
 */
#ifndef ZKL_WATCH_ROUTES_H
#define ZKL_WATCH_ROUTES_H

#include <stddef.h>
#include <stdint.h>

#include "route.h"

typedef struct zkl_watch_routes {
    uint64_t *ids;   /* 0 = empty slot, UINT64_MAX = deleted */
    zkl_route *routes;
    size_t capacity; /* a power of two, or 0 */
    size_t used;     /* live + deleted slots */
    size_t live;
} zkl_watch_routes;

int zkl_watch_routes_put(zkl_watch_routes *m, uint64_t id, zkl_route route); /* 0 or -1 */
/* Removes id's route into *out; returns 1 if it was there. */
int zkl_watch_routes_take(zkl_watch_routes *m, uint64_t id, zkl_route *out);
void zkl_watch_routes_clear(zkl_watch_routes *m);
void zkl_watch_routes_free(zkl_watch_routes *m);

#endif
