/*
 * set_partitioner_binding.c — the zklua.core set partitioner userdata: a thin wrapper over
 * src/recipes/partitioning/set_partitioner.c.
 *
 *   core.set_partitioner(session, path, identifier, time_boundary_s, conflict_timeout_s, acl)
 *   sp:state() -> "ALLOCATING" | "ACQUIRED" | "RELEASE" | "FAILURE"
 *   sp:failure() -> nil, or "lost" | "closed" | "finished" | "conflict" | "error" |
 *                   "partition" and the ZooKeeper rc
 *   sp:conflict() -> the item's name and the node it waited behind (after "conflict")
 *   sp:wanted() -> attempt, {member node name, ...} while a partition is wanted, else nil
 *   sp:assign(attempt, {name, ...}) -> true when taken, false when stale
 *   sp:fail(attempt), sp:release_set(), sp:release_in_background(), sp:set_changed(),
 *   sp:finish(), sp:joining(), sp:joined(), sp:busy(), sp:items() -> {name, ...},
 *   sp:fencing_token(name) -> token | nil,
 *   sp:node(), sp:id(), sp:inflight(), sp:releasing() -> locks release_set/finish wait for
 *
 * The state machine is C; lua/zklua/recipes/partitioning/partitioner.lua computes partitions (the notify
 * ZKL_SP_NOTIFY_PARTITION, target sp:id()), waits and talks to the user.  Every call is a safe
 * point at which the partitioner frees the locks it let go.  Contract (SUSPENDED, LOST,
 * stop): src/recipes/partitioning/set_partitioner.h.  The Lua object hears each state change as a notify
 * event (ZKL_SP_NOTIFY_STATE + state), so user callbacks run from Lua, never from C.
 */
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../recipes/partitioning/set_partitioner.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_sp_forget_session(obj); }
static void free_sp(void *obj) { zkl_sp_free(obj); }

static const zkl_recipe_type SP_TYPE = {"zklua.core.SetPartitioner", "set partitioner",
                                        forget_session, free_sp};

static zkl_set_partitioner *check_sp(lua_State *L)
{
    zkl_set_partitioner *sp = zkl_recipe_check(L, &SP_TYPE)->obj;
    zkl_sp_tidy(sp);
    return sp;
}

/* core.set_partitioner(session, path, identifier, time_boundary_s, conflict_timeout_s, acl) */
static int sp_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    size_t len;
    const char *identifier = luaL_checklstring(L, 3, &len);
    if (len > 0x7fffffff)
        return luaL_argerror(L, 3, "identifier too large");
    zkl_sp_options o = {zkl_check_ms(L, 4, 1e7, "seconds"), zkl_check_ms(L, 5, 1e7, "seconds")};
    const struct ACL_vector *acl = zkl_opt_acl_list(L, 6, "acl");
    zkl_recipe_box *box = zkl_recipe_box_new(L, &SP_TYPE, sizeof *box);
    return zkl_recipe_box_set(L, &SP_TYPE, box,
                              zkl_sp_new(*slot, path, identifier, (int)len, &o, acl), slot);
}

ZKL_RECIPE_NAME(sp_state, check_sp, zkl_sp_state_of, zkl_sp_state_names)

static int sp_failure(lua_State *L)
{
    int rc;
    zkl_sp_failure why = zkl_sp_failure_of(check_sp(L), &rc);
    if (why == ZKL_SP_NOT_FAILED)
        return 0;
    lua_pushstring(L, zkl_sp_failure_names[why]);
    lua_pushinteger(L, rc);
    return 2;
}

static int sp_conflict(lua_State *L)
{
    const char *blocker = NULL;
    const char *item = zkl_sp_conflict(check_sp(L), &blocker);
    if (!item)
        return 0;
    lua_pushstring(L, item);
    lua_pushstring(L, blocker ? blocker : "");
    return 2;
}

static int sp_wanted(lua_State *L)
{
    char *const *members;
    int count;
    uint64_t attempt = zkl_sp_wanted(check_sp(L), &members, &count);
    if (attempt == 0)
        return 0;
    lua_pushinteger(L, (lua_Integer)attempt);
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        lua_pushstring(L, members[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 2;
}

/* assign(attempt, {name, ...}): the names were checked by the Lua side */
static int sp_assign(lua_State *L)
{
    zkl_set_partitioner *sp = check_sp(L);
    uint64_t attempt = (uint64_t)luaL_checkinteger(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    int n = (int)lua_rawlen(L, 3);
    const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(n > 0 ? n : 1), 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 3, i + 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            return luaL_argerror(L, 3, "names must be strings");
        names[i] = lua_tostring(L, -1); /* the table keeps the string alive */
        lua_pop(L, 1);
    }
    int r = zkl_sp_assign(sp, attempt, names, n);
    if (r < 0)
        return luaL_error(L, "set partitioner: out of memory");
    lua_pushboolean(L, r);
    return 1;
}

static int sp_fail(lua_State *L)
{
    zkl_sp_fail(check_sp(L), (uint64_t)luaL_checkinteger(L, 2));
    return 0;
}

ZKL_RECIPE_VOID(sp_release_set, check_sp, zkl_sp_release_set)
ZKL_RECIPE_VOID(sp_release_in_background, check_sp, zkl_sp_release_in_background)
ZKL_RECIPE_VOID(sp_set_changed, check_sp, zkl_sp_set_changed)
ZKL_RECIPE_VOID(sp_finish, check_sp, zkl_sp_finish)
ZKL_RECIPE_BOOLEAN(sp_joining, check_sp, zkl_sp_joining)
ZKL_RECIPE_BOOLEAN(sp_joined, check_sp, zkl_sp_joined)
ZKL_RECIPE_BOOLEAN(sp_busy, check_sp, zkl_sp_busy)

static int sp_items(lua_State *L)
{
    zkl_set_partitioner *sp = check_sp(L);
    int n = zkl_sp_item_count(sp), k = 0;
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        const char *name = zkl_sp_item(sp, i);
        if (name) {
            lua_pushstring(L, name);
            lua_rawseti(L, -2, ++k);
        }
    }
    return 1;
}

static int sp_fencing_token(lua_State *L)
{
    zkl_set_partitioner *sp = check_sp(L);
    int64_t token;
    if (zkl_sp_fencing_token(sp, luaL_checkstring(L, 2), &token) != 0)
        return 0;
    lua_pushinteger(L, (lua_Integer)token);
    return 1;
}

ZKL_RECIPE_STRING(sp_node, check_sp, zkl_sp_node)
ZKL_RECIPE_INTEGER(sp_id, check_sp, zkl_sp_id)
ZKL_RECIPE_INTEGER(sp_inflight, check_sp, zkl_sp_inflight)
ZKL_RECIPE_INTEGER(sp_releasing, check_sp, zkl_sp_releasing)

static const luaL_Reg sp_methods[] = {
    {"state", sp_state},
    {"failure", sp_failure},
    {"conflict", sp_conflict},
    {"wanted", sp_wanted},
    {"assign", sp_assign},
    {"fail", sp_fail},
    {"release_set", sp_release_set},
    {"release_in_background", sp_release_in_background},
    {"set_changed", sp_set_changed},
    {"finish", sp_finish},
    {"joining", sp_joining},
    {"joined", sp_joined},
    {"busy", sp_busy},
    {"items", sp_items},
    {"fencing_token", sp_fencing_token},
    {"node", sp_node},
    {"id", sp_id},
    {"inflight", sp_inflight},
    {"releasing", sp_releasing},
    {NULL, NULL},
};

void zkl_register_set_partitioner(lua_State *L)
{
    zkl_recipe_register(L, &SP_TYPE, sp_methods, "set_partitioner", sp_new);
}
