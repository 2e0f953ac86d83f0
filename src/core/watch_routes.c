/*
 * watch_routes.c — see watch_routes.h.  Open addressing with linear probing; ids are op ids,
 * dense and growing, so a multiplicative hash spreads them well.
 */
#include "watch_routes.h"

#include <stdlib.h>

static const uint64_t DELETED = UINT64_MAX;

static size_t slot_of(uint64_t id, size_t capacity)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & (capacity - 1);
}

static int grow(zkl_watch_routes *m)
{
    size_t capacity = m->capacity ? m->capacity * 2 : 64;
    if (m->live * 4 < m->capacity)
        capacity = m->capacity; /* mostly deleted slots: rehash in place size */
    uint64_t *ids = calloc(capacity, sizeof *ids);
    zkl_route *routes = calloc(capacity, sizeof *routes);
    if (!ids || !routes) {
        free(ids);
        free(routes);
        return -1;
    }
    for (size_t i = 0; i < m->capacity; i++) {
        uint64_t id = m->ids[i];
        if (id == 0 || id == DELETED)
            continue;
        size_t j = slot_of(id, capacity);
        while (ids[j] != 0)
            j = (j + 1) & (capacity - 1);
        ids[j] = id;
        routes[j] = m->routes[i];
    }
    free(m->ids);
    free(m->routes);
    m->ids = ids;
    m->routes = routes;
    m->capacity = capacity;
    m->used = m->live;
    return 0;
}

int zkl_watch_routes_put(zkl_watch_routes *m, uint64_t id, zkl_route route)
{
    if ((m->used + 1) * 4 > m->capacity * 3 && grow(m) != 0)
        return -1;
    size_t i = slot_of(id, m->capacity);
    while (m->ids[i] != 0 && m->ids[i] != DELETED)
        i = (i + 1) & (m->capacity - 1);
    if (m->ids[i] == 0)
        m->used++;
    m->ids[i] = id;
    m->routes[i] = route;
    m->live++;
    return 0;
}

int zkl_watch_routes_take(zkl_watch_routes *m, uint64_t id, zkl_route *out)
{
    if (m->live == 0)
        return 0;
    for (size_t i = slot_of(id, m->capacity); m->ids[i] != 0; i = (i + 1) & (m->capacity - 1)) {
        if (m->ids[i] == id) {
            *out = m->routes[i];
            m->ids[i] = DELETED;
            m->live--;
            return 1;
        }
    }
    return 0;
}

void zkl_watch_routes_clear(zkl_watch_routes *m)
{
    for (size_t i = 0; i < m->capacity; i++)
        m->ids[i] = 0;
    m->used = m->live = 0;
}

void zkl_watch_routes_free(zkl_watch_routes *m)
{
    free(m->ids);
    free(m->routes);
    m->ids = NULL;
    m->routes = NULL;
    m->capacity = m->used = m->live = 0;
}
