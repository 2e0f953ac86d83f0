/*
 * lease_binding.c — the zklua.core lease userdata: a thin wrapper over src/recipes/lease.c,
 * and the helpers the Lua half of the leases needs.
 *
 *   core.lease(session, path, identity, duration_s, acl) -> lease
 *   lease:obtain() -> true, or nil and "busy" | "closed" (not connected)
 *   lease:phase() -> "idle" | "working" | "needs_time" | "finishing"
 *   lease:decide(now_s) -> true, or false when the lease was not waiting for the time
 *   lease:abandon()
 *   lease:outcome() -> "pending" | "obtained" | "held_elsewhere" | "other_version" |
 *                      "bad_record" | "abandoned" | "failed", rc, why (with "bad_record")
 *   lease:end_time() -> the end written (seconds since the epoch), with "obtained"
 *   lease:inflight()
 *   core.utf8_valid(s) -> whether s is valid UTF-8
 *
 * Contract (SUSPENDED, LOST, stop): src/recipes/lease.h; this file only converts.
 * lua/zklua/recipes/lease.lua waits, supplies the time and talks to the user.  The userdata
 * keeps its session's userdata as a user value; once the session is closed the lease is told to
 * forget it.  Collecting a lease frees it with zkl_lease_free(): an attempt under way is
 * abandoned in the background.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../recipes/lease.h"
#include "../recipes/lease_record.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_lease_forget_session(obj); }
static void free_lease(void *obj) { zkl_lease_free(obj); }

static const zkl_recipe_type LEASE_TYPE = {"zklua.core.Lease", "lease", forget_session,
                                           free_lease};

static zkl_lease *check_lease(lua_State *L) { return zkl_recipe_check(L, &LEASE_TYPE)->obj; }

/* core.lease(session, path, identity, duration_s, acl) */
static int lease_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    size_t len;
    const char *identity = luaL_checklstring(L, 3, &len);
    if (len > 0x7fffffff || !zkl_utf8_valid(identity, len))
        return luaL_argerror(L, 3, "identity must be UTF-8");
    lua_Number duration = luaL_checknumber(L, 4);
    if (!isfinite(duration) || duration < 0)
        return luaL_argerror(L, 4, "duration must be a finite number >= 0");
    const struct ACL_vector *acl = zkl_opt_acl_list(L, 5, "acl");
    zkl_recipe_box *box = zkl_recipe_box_new(L, &LEASE_TYPE, sizeof *box);
    return zkl_recipe_box_set(L, &LEASE_TYPE, box,
                              zkl_lease_new(*slot, path, identity, (int)len, duration, acl),
                              slot);
}

static int lease_obtain(lua_State *L)
{
    return zkl_recipe_started(L, zkl_lease_obtain(check_lease(L)), NULL);
}

ZKL_RECIPE_NAME(lease_phase, check_lease, zkl_lease_phase_of, zkl_lease_phase_names)

static int lease_decide(lua_State *L)
{
    zkl_lease *e = check_lease(L);
    lua_Number now = luaL_checknumber(L, 2);
    lua_pushboolean(L, zkl_lease_decide(e, now) == 0);
    return 1;
}

ZKL_RECIPE_VOID(lease_abandon, check_lease, zkl_lease_abandon)

static int lease_outcome(lua_State *L)
{
    zkl_lease *e = check_lease(L);
    int rc;
    zkl_lease_outcome outcome = zkl_lease_outcome_of(e, &rc);
    lua_pushstring(L, zkl_lease_outcome_names[outcome]);
    lua_pushinteger(L, rc);
    const char *why = zkl_lease_why(e);
    if (!why)
        return 2;
    lua_pushstring(L, why);
    return 3;
}

static int lease_end_time(lua_State *L)
{
    zkl_lease *e = check_lease(L);
    if (zkl_lease_outcome_of(e, NULL) != ZKL_LEASE_OBTAINED)
        return 0;
    lua_pushinteger(L, (lua_Integer)zkl_lease_end(e));
    return 1;
}

ZKL_RECIPE_INTEGER(lease_inflight, check_lease, zkl_lease_inflight)

static int core_utf8_valid(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    lua_pushboolean(L, zkl_utf8_valid(s, len));
    return 1;
}

static const luaL_Reg lease_methods[] = {
    {"obtain", lease_obtain},     {"phase", lease_phase},       {"decide", lease_decide},
    {"abandon", lease_abandon},   {"outcome", lease_outcome},   {"end_time", lease_end_time},
    {"inflight", lease_inflight}, {NULL, NULL},
};

static const luaL_Reg lease_functions[] = {
    {"utf8_valid", core_utf8_valid},
    {NULL, NULL},
};

void zkl_register_lease(lua_State *L)
{
    zkl_recipe_register(L, &LEASE_TYPE, lease_methods, "lease", lease_new);
    luaL_setfuncs(L, lease_functions, 0);
}
