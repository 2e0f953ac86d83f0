/*
 * tree_cache_binding.c — the zklua.core tree cache userdata: a thin wrapper over
 * src/recipes/tree_cache.c.
 *
 *   core.tree_cache(session, path) -> cache
 *   cache:start() -> true, or nil and "busy" (started) | "closed"
 *   cache:close()
 *   cache:next_event(with_data) -> type, path, data, stat | type, path, rc (FAULT) | type
 *       (connection events and INITIALIZED), or nothing when none waits; without with_data
 *       a node event is only type and path (no copies for nobody to read)
 *   cache:get_data(path) -> data, stat, or nothing when path is not in the cache
 *   cache:get_children(path) -> {name, ...} sorted bytewise, or nothing
 *   cache:phase() -> "latent" | "started" | "closed"
 *   cache:initialized(), cache:size(), cache:id(), cache:inflight()
 *
 * Contract (SUSPENDED, LOST, stop): src/recipes/tree_cache.h; this file only converts.
 * lua/zklua/recipes/tree_cache.lua runs the listeners: the C cache tells the Lua object that
 * events wait with a notify event (ZKL_TREE_CACHE_NOTIFY_EVENTS, target cache:id()), so no Lua
 * is called from C.  The userdata keeps its session's userdata as a user value; once the
 * session is closed the cache is told to forget it (its content stays readable).  Collecting a
 * cache frees it.
 */
#include <stdlib.h>
#include <string.h>

#include "../recipes/tree_cache.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_tree_cache_forget_session(obj); }
static void free_cache(void *obj) { zkl_tree_cache_free(obj); }

static const zkl_recipe_type TREE_CACHE_TYPE = {"zklua.core.TreeCache", "tree cache",
                                                forget_session, free_cache};

static zkl_tree_cache *check_cache(lua_State *L)
{
    return zkl_recipe_check(L, &TREE_CACHE_TYPE)->obj;
}

static int tree_cache_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    zkl_recipe_box *box = zkl_recipe_box_new(L, &TREE_CACHE_TYPE, sizeof *box);
    return zkl_recipe_box_set(L, &TREE_CACHE_TYPE, box, zkl_tree_cache_new(*slot, path), slot);
}

static int tree_cache_start(lua_State *L)
{
    return zkl_recipe_started(L, zkl_tree_cache_start(check_cache(L)), NULL);
}

ZKL_RECIPE_VOID(tree_cache_close, check_cache, zkl_tree_cache_close)

static int push_event(lua_State *L, const zkl_tree_event *ev, int with_data)
{
    lua_pushstring(L, zkl_tree_event_names[ev->type]);
    if (!ev->path)
        return 1;
    lua_pushstring(L, ev->path);
    if (ev->type == ZKL_TREE_FAULT) {
        lua_pushinteger(L, ev->rc);
        return 3;
    }
    if (!with_data)
        return 2;
    if (ev->data_len < 0)
        lua_pushnil(L); /* ZooKeeper's null value, nil as the client reads it */
    else
        lua_pushlstring(L, ev->data, (size_t)ev->data_len);
    zkl_push_stat(L, &ev->stat);
    return 4;
}

static int tree_cache_next_event(lua_State *L)
{
    zkl_tree_cache *tc = check_cache(L);
    int with_data = lua_toboolean(L, 2);
    zkl_tree_event *ev = zkl_tree_cache_next_event(tc);
    if (!ev)
        return 0;
    int n = push_event(L, ev, with_data); /* raises only on out-of-memory: the event leaks */
    zkl_tree_event_free(ev);
    return n;
}

static int tree_cache_get_data(lua_State *L)
{
    zkl_tree_cache *tc = check_cache(L);
    const zkl_tree_node *n = zkl_tree_cache_find(tc, luaL_checkstring(L, 2));
    if (!n)
        return 0;
    int len;
    const char *data = zkl_tree_node_data(n, &len);
    if (len < 0)
        lua_pushnil(L); /* ZooKeeper's null value */
    else
        lua_pushlstring(L, data, (size_t)len);
    zkl_push_stat(L, zkl_tree_node_stat(n));
    return 2;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int tree_cache_get_children(lua_State *L)
{
    zkl_tree_cache *tc = check_cache(L);
    const zkl_tree_node *n = zkl_tree_cache_find(tc, luaL_checkstring(L, 2));
    if (!n)
        return 0;
    int bound = zkl_tree_node_child_count(n);
    /* a userdata, so that a raise while pushing cannot leak it */
    const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(bound > 0 ? bound : 1), 0);
    int count = zkl_tree_node_live_children(n, names);
    qsort(names, (size_t)count, sizeof *names, name_cmp);
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

ZKL_RECIPE_NAME(tree_cache_phase, check_cache, zkl_tree_cache_phase_of, zkl_tree_cache_phase_names)
ZKL_RECIPE_BOOLEAN(tree_cache_initialized, check_cache, zkl_tree_cache_initialized)
ZKL_RECIPE_INTEGER(tree_cache_size, check_cache, zkl_tree_cache_size)
ZKL_RECIPE_INTEGER(tree_cache_id, check_cache, zkl_tree_cache_id)
ZKL_RECIPE_INTEGER(tree_cache_inflight, check_cache, zkl_tree_cache_inflight)

static const luaL_Reg tree_cache_methods[] = {
    {"start", tree_cache_start},
    {"close", tree_cache_close},
    {"next_event", tree_cache_next_event},
    {"get_data", tree_cache_get_data},
    {"get_children", tree_cache_get_children},
    {"phase", tree_cache_phase},
    {"initialized", tree_cache_initialized},
    {"size", tree_cache_size},
    {"id", tree_cache_id},
    {"inflight", tree_cache_inflight},
    {NULL, NULL},
};

void zkl_register_tree_cache(lua_State *L)
{
    zkl_recipe_register(L, &TREE_CACHE_TYPE, tree_cache_methods, "tree_cache", tree_cache_new);
}
