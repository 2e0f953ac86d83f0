/*
 * persistent_node_binding.c — the zklua.core persistent node userdata: a thin wrapper over
 * src/recipes/persistent_node.c.
 *
 *   core.persistent_node(session, path, data, ephemeral, container_parents, ttl_ms, acl,
 *                        sequential, protection, container_kept) -> node
 *   (container_kept: the node is a CONTAINER and stop leaves it: PersistentTtlNode's)
 *   node:start() -> true, or nil and "busy" | "closed"
 *   node:stop() -> true, or nil and "closed"
 *   node:set_data(data)
 *   node:phase() -> "idle" | "running" | "stopping" | "failed"
 *   node:present(), node:rc(), node:deleted(), node:written(), node:creations(), node:data(),
 *   node:id(), node:inflight()
 *   node:actual_path() -> the node's path once created (a sequential one's name), or nil
 *
 * Contract (SUSPENDED, LOST, stop, the notify codes LOST and CREATED): src/recipes/
 * persistent_node.h; this file only converts.  lua/zklua/recipes/persistent_node.lua waits and
 * runs the listeners; no Lua is called from C.  The userdata keeps its session's userdata
 * alive (recipe_binding.h).  Collecting a running node frees it with zkl_pnode_free(): its
 * node is deleted in the background.
 */
#include "../recipes/persistent_node.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_pnode_forget_session(obj); }
static void free_pnode(void *obj) { zkl_pnode_free(obj); }

static const zkl_recipe_type PNODE_TYPE = {"zklua.core.PersistentNode", "persistent_node",
                                           forget_session, free_pnode};

static zkl_pnode *check_pnode(lua_State *L) { return zkl_recipe_check(L, &PNODE_TYPE)->obj; }

static int pnode_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    int len;
    const char *data = zkl_recipe_identifier(L, 3, &len);
    int flags = (lua_toboolean(L, 4) ? ZKL_PNODE_EPHEMERAL : 0) |
                (lua_toboolean(L, 5) ? ZKL_PNODE_CONTAINER_PARENTS : 0) |
                (lua_toboolean(L, 8) ? ZKL_PNODE_SEQUENTIAL : 0) |
                (lua_toboolean(L, 9) ? ZKL_PNODE_PROTECTED : 0) |
                (lua_toboolean(L, 10) ? ZKL_PNODE_CONTAINER | ZKL_PNODE_KEEP_ON_STOP : 0);
    int64_t ttl = (int64_t)luaL_optinteger(L, 6, 0);
    const struct ACL_vector *acl = zkl_opt_acl_list(L, 7, "acl");
    zkl_recipe_box *box = zkl_recipe_box_new(L, &PNODE_TYPE, sizeof *box);
    return zkl_recipe_box_set(L, &PNODE_TYPE, box,
                              zkl_pnode_new(*slot, path, data, len, flags, ttl, acl), slot);
}

static int pnode_start(lua_State *L)
{
    return zkl_recipe_started(L, zkl_pnode_start(check_pnode(L)), "running");
}

static int pnode_stop(lua_State *L)
{
    return zkl_recipe_started(L, zkl_pnode_stop(check_pnode(L)), "stopped");
}

static int pnode_set_data(lua_State *L)
{
    zkl_pnode *n = check_pnode(L);
    int len;
    const char *data = zkl_recipe_identifier(L, 2, &len);
    if (zkl_pnode_set_data(n, data, len) != 0)
        return luaL_error(L, "out of memory");
    return 0;
}

static int pnode_data(lua_State *L)
{
    int len;
    const char *data = zkl_pnode_data(check_pnode(L), &len);
    lua_pushlstring(L, data, (size_t)len);
    return 1;
}

static int pnode_actual_path(lua_State *L)
{
    const char *path = zkl_pnode_actual_path(check_pnode(L));
    if (path)
        lua_pushstring(L, path);
    else
        lua_pushnil(L);
    return 1;
}

ZKL_RECIPE_NAME(pnode_phase, check_pnode, zkl_pnode_phase_of, zkl_pnode_phase_names)
ZKL_RECIPE_BOOLEAN(pnode_present, check_pnode, zkl_pnode_present)
ZKL_RECIPE_INTEGER(pnode_rc, check_pnode, zkl_pnode_rc)
ZKL_RECIPE_BOOLEAN(pnode_deleted, check_pnode, zkl_pnode_deleted)
ZKL_RECIPE_BOOLEAN(pnode_written, check_pnode, zkl_pnode_written)
ZKL_RECIPE_INTEGER(pnode_creations, check_pnode, zkl_pnode_creations)
ZKL_RECIPE_INTEGER(pnode_id, check_pnode, zkl_pnode_id)
ZKL_RECIPE_INTEGER(pnode_inflight, check_pnode, zkl_pnode_inflight)

static const luaL_Reg pnode_methods[] = {
    {"start", pnode_start},       {"stop", pnode_stop},         {"set_data", pnode_set_data},
    {"data", pnode_data},         {"phase", pnode_phase},       {"present", pnode_present},
    {"rc", pnode_rc},             {"deleted", pnode_deleted},   {"creations", pnode_creations},
    {"id", pnode_id},             {"inflight", pnode_inflight}, {"written", pnode_written},
    {"actual_path", pnode_actual_path}, {NULL, NULL},
};

void zkl_register_persistent_node(lua_State *L)
{
    zkl_recipe_register(L, &PNODE_TYPE, pnode_methods, "persistent_node", pnode_new);
}
