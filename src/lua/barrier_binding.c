/*
 * barrier_binding.c — the zklua.core barrier userdata: a thin wrapper over
 * src/recipes/barrier.c (Barrier waits and DoubleBarrier members).
 *
 *   core.barrier(session, path, num_clients, identifier, acl, layout) -> barrier  (num_clients
 *     0: a Barrier; layout "kazoo" (default) | "curator": DistributedDoubleBarrier's)
 *   barrier:start("wait" | "enter" | "leave") -> true, or nil and "busy" | "closed"
 *   barrier:give_up()
 *   barrier:busy(), barrier:outcome() -> "pending" | "done" | "gave_up" | "failed", rc
 *   barrier:entered(), barrier:node(), barrier:id(), barrier:inflight()
 *
 * Contract (SUSPENDED, LOST, stop): src/recipes/barrier.h; this file only converts.
 * lua/zklua/recipes/barrier.lua waits and times out; the notify event ZKL_BARRIER_NOTIFY_LOST
 * (target barrier:id()) reaches the Lua object; no Lua is called from C.  The userdata keeps
 * its session's userdata as a user value; once the session is closed the barrier is told to
 * forget it.  Collecting a barrier frees it with zkl_barrier_free().
 */
#include "../recipes/barrier.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_barrier_forget_session(obj); }
static void free_barrier(void *obj) { zkl_barrier_free(obj); }

static const zkl_recipe_type BARRIER_TYPE = {"zklua.core.Barrier", "barrier", forget_session,
                                             free_barrier};

static zkl_barrier *check_barrier(lua_State *L)
{
    return zkl_recipe_check(L, &BARRIER_TYPE)->obj;
}

static int barrier_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    lua_Integer n = luaL_checkinteger(L, 3);
    if (n < 0 || n > 0x7fffffff)
        return luaL_argerror(L, 3, "num_clients out of range");
    size_t len = 0;
    const char *data = luaL_optlstring(L, 4, "", &len);
    if (len > 0x7fffffff)
        return luaL_argerror(L, 4, "identifier too large");
    const struct ACL_vector *acl = zkl_opt_acl_list(L, 5, "acl");
    static const char *const layouts[] = {"kazoo", "curator", NULL};
    int layout = luaL_checkoption(L, 6, "kazoo", layouts);
    zkl_recipe_box *box = zkl_recipe_box_new(L, &BARRIER_TYPE, sizeof *box);
    return zkl_recipe_box_set(L, &BARRIER_TYPE, box,
                              zkl_barrier_new(*slot, path, (int)n, data, (int)len, acl,
                                              (zkl_barrier_layout)layout),
                              slot);
}

static int barrier_start(lua_State *L)
{
    zkl_barrier *b = check_barrier(L);
    static const char *const ops[] = {"wait", "enter", "leave", NULL};
    int op = luaL_checkoption(L, 2, NULL, ops) + 1;
    return zkl_recipe_started(L, zkl_barrier_start(b, (zkl_barrier_op)op), NULL);
}

ZKL_RECIPE_VOID(barrier_give_up, check_barrier, zkl_barrier_give_up)
ZKL_RECIPE_BOOLEAN(barrier_busy, check_barrier, zkl_barrier_busy)

static int barrier_outcome(lua_State *L)
{
    int rc;
    zkl_barrier_outcome o = zkl_barrier_outcome_of(check_barrier(L), &rc);
    lua_pushstring(L, zkl_barrier_outcome_names[o]);
    lua_pushinteger(L, rc);
    return 2;
}

ZKL_RECIPE_BOOLEAN(barrier_entered, check_barrier, zkl_barrier_entered)
ZKL_RECIPE_STRING(barrier_node, check_barrier, zkl_barrier_node)
ZKL_RECIPE_INTEGER(barrier_id, check_barrier, zkl_barrier_id)
ZKL_RECIPE_INTEGER(barrier_inflight, check_barrier, zkl_barrier_inflight)

static const luaL_Reg barrier_methods[] = {
    {"start", barrier_start},     {"give_up", barrier_give_up}, {"busy", barrier_busy},
    {"outcome", barrier_outcome}, {"entered", barrier_entered}, {"node", barrier_node},
    {"id", barrier_id},           {"inflight", barrier_inflight}, {NULL, NULL},
};

void zkl_register_barrier(lua_State *L)
{
    zkl_recipe_register(L, &BARRIER_TYPE, barrier_methods, "barrier", barrier_new);
}
