/*
 * ttl_toucher_binding.c — the zklua.core TTL toucher userdata: a thin wrapper over
 * src/recipes/ttl_toucher.c (the touch half of PersistentTtlNode).
 *
 *   core.ttl_toucher(session, path, ttl_ms, interval_ms, acl) -> toucher
 *   toucher:start() -> true, or nil and "busy" | "closed"
 *   toucher:stop() -> true, or nil and "closed"
 *   toucher:running(), toucher:touches(), toucher:failures(), toucher:inflight()
 *
 * Contract (ticks, SUSPENDED, LOST): src/recipes/ttl_toucher.h; this file only converts.
 * lua/zklua/recipes/persistent_ttl_node.lua composes it with a PersistentNode.  The userdata
 * keeps its session's userdata alive (recipe_binding.h); collecting it stops the ticks.
 */
#include "../recipes/ttl_toucher.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_toucher_forget_session(obj); }
static void free_toucher(void *obj) { zkl_toucher_free(obj); }

static const zkl_recipe_type TOUCHER_TYPE = {"zklua.core.TtlToucher", "ttl toucher",
                                             forget_session, free_toucher};

static zkl_toucher *check_toucher(lua_State *L)
{
    return zkl_recipe_check(L, &TOUCHER_TYPE)->obj;
}

static int toucher_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    int64_t ttl = (int64_t)luaL_checkinteger(L, 3);
    long interval = (long)luaL_checkinteger(L, 4);
    const struct ACL_vector *acl = zkl_opt_acl_list(L, 5, "acl");
    zkl_recipe_box *box = zkl_recipe_box_new(L, &TOUCHER_TYPE, sizeof *box);
    return zkl_recipe_box_set(L, &TOUCHER_TYPE, box,
                              zkl_toucher_new(*slot, path, ttl, interval, acl), slot);
}

static int toucher_start(lua_State *L)
{
    return zkl_recipe_started(L, zkl_toucher_start(check_toucher(L)), "running");
}

static int toucher_stop(lua_State *L)
{
    return zkl_recipe_started(L, zkl_toucher_stop(check_toucher(L)), "stopped");
}

ZKL_RECIPE_BOOLEAN(toucher_running, check_toucher, zkl_toucher_running)
ZKL_RECIPE_INTEGER(toucher_touches, check_toucher, zkl_toucher_touches)
ZKL_RECIPE_INTEGER(toucher_failures, check_toucher, zkl_toucher_failures)
ZKL_RECIPE_INTEGER(toucher_inflight, check_toucher, zkl_toucher_inflight)

static const luaL_Reg toucher_methods[] = {
    {"start", toucher_start},       {"stop", toucher_stop},
    {"running", toucher_running},   {"touches", toucher_touches},
    {"failures", toucher_failures}, {"inflight", toucher_inflight},
    {NULL, NULL},
};

void zkl_register_ttl_toucher(lua_State *L)
{
    zkl_recipe_register(L, &TOUCHER_TYPE, toucher_methods, "ttl_toucher", toucher_new);
}
