/*
 * counter_binding.c — the zklua.core counter userdata: a thin wrapper over
 * src/recipes/counter.c.
 *
 *   core.counter(session, path, "int" | "float" | "curator", default) -> counter
 *   counter:start(add, delta) -> true, or nil and "busy" | "closed"   (add false: a read)
 *   counter:phase() -> "idle" | "busy"
 *   counter:outcome() -> "ok" | "failed" | "bad_data" | "overflow", rc
 *   counter:pre(), counter:post() -> the values (integers, or floats for "float")
 *   core.counter_repr(x) -> Python's repr of the float x
 *
 * The logic (reads, sets at a version, BadVersion retries, reconnection and expiry) is in
 * counter.c; lua/zklua/recipes/counter.lua checks arguments and waits.  SUSPENDED: the
 * operation under way waits for the reconnection.  LOST: it starts again on the new session.
 * The userdata keeps its session's userdata as a user value; once the session is closed the
 * counter is told to forget it.  Collecting a counter frees it with zkl_counter_free().
 */
#include <string.h>

#include "../recipes/counter.h"
#include "convert.h"
#include "counter_binding.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_counter_forget_session(obj); }
static void free_counter(void *obj) { zkl_counter_free(obj); }

static const zkl_recipe_type COUNTER_TYPE = {"zklua.core.Counter", "counter", forget_session,
                                             free_counter};

typedef struct {
    zkl_recipe_box base; /* base.obj: the zkl_counter */
    int kind;
} counter_box;

static counter_box *check_box(lua_State *L)
{
    return (counter_box *)zkl_recipe_check(L, &COUNTER_TYPE);
}

static zkl_counter_value to_value(lua_State *L, int idx, int kind)
{
    zkl_counter_value v;
    if (kind == ZKL_COUNTER_FLOAT)
        v.f = (double)luaL_checknumber(L, idx);
    else
        v.i = (int64_t)luaL_checkinteger(L, idx);
    return v;
}

static void push_value(lua_State *L, zkl_counter_value v, int kind)
{
    if (kind == ZKL_COUNTER_FLOAT)
        lua_pushnumber(L, (lua_Number)v.f);
    else
        zkl_push_int64(L, v.i);
}

static int counter_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    static const char *const kinds[] = {"int", "float", "curator", NULL};
    int kind = luaL_checkoption(L, 3, "int", kinds);
    zkl_counter_value def = to_value(L, 4, kind);
    counter_box *box = zkl_recipe_box_new(L, &COUNTER_TYPE, sizeof *box);
    box->kind = kind;
    return zkl_recipe_box_set(L, &COUNTER_TYPE, &box->base,
                              zkl_counter_new(*slot, path, (zkl_counter_kind)kind, def), slot);
}

static int counter_start(lua_State *L)
{
    counter_box *box = check_box(L);
    int add = lua_toboolean(L, 2);
    zkl_counter_value delta;
    memset(&delta, 0, sizeof delta);
    if (add)
        delta = to_value(L, 3, box->kind);
    return zkl_recipe_started(L, zkl_counter_start(box->base.obj, add, delta), NULL);
}

static int counter_phase(lua_State *L)
{
    counter_box *box = check_box(L);
    lua_pushstring(L, zkl_counter_phase_of(box->base.obj) == ZKL_COUNTER_BUSY ? "busy" : "idle");
    return 1;
}

static int counter_outcome(lua_State *L)
{
    static const char *const names[] = {"ok", "failed", "bad_data", "overflow"};
    counter_box *box = check_box(L);
    int rc;
    zkl_counter_outcome o = zkl_counter_outcome_of(box->base.obj, &rc);
    lua_pushstring(L, names[o]);
    lua_pushinteger(L, rc);
    return 2;
}

static int counter_pre(lua_State *L)
{
    counter_box *box = check_box(L);
    push_value(L, zkl_counter_pre(box->base.obj), box->kind);
    return 1;
}

static int counter_post(lua_State *L)
{
    counter_box *box = check_box(L);
    push_value(L, zkl_counter_post(box->base.obj), box->kind);
    return 1;
}

static int counter_inflight(lua_State *L)
{
    lua_pushinteger(L, zkl_counter_inflight(check_box(L)->base.obj));
    return 1;
}

static int counter_repr(lua_State *L)
{
    char buf[64];
    int n = zkl_counter_float_repr((double)luaL_checknumber(L, 1), buf, sizeof buf);
    lua_pushlstring(L, buf, (size_t)n);
    return 1;
}

static const luaL_Reg counter_methods[] = {
    {"start", counter_start},   {"phase", counter_phase}, {"outcome", counter_outcome},
    {"pre", counter_pre},       {"post", counter_post},   {"inflight", counter_inflight},
    {NULL, NULL},
};

void zkl_register_counter(lua_State *L)
{
    zkl_recipe_register(L, &COUNTER_TYPE, counter_methods, "counter", counter_new);
    lua_pushcfunction(L, counter_repr);
    lua_setfield(L, -2, "counter_repr");
}
