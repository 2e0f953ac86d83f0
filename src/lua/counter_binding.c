/*
 * counter_binding.c — the zklua.core counter userdata: a thin wrapper over
 * src/recipes/counter.c.
 *
 *   core.counter(session, path, "int" | "float" | "curator" | "curator_long" | "curator_atomic",
 *                default) -> counter
 *   counter:start(add, delta) -> true, or nil and "busy" | "closed"   (add false: a read)
 *   counter:start_op("read" | "add" | "set" | "cas" | "force" | "init", a, b, max_tries)
 *     -> as start   (all but "read" and "add": "curator_atomic" only; see counter.h)
 *   (the values: numbers, or for the integer kinds decimal strings, read exactly)
 *   counter:tries() -> tries of the operation under way or of the last one
 *   counter:phase() -> "idle" | "busy"
 *   counter:outcome() -> "ok" | "failed" | "bad_data" | "overflow" | "not_set", rc
 *   counter:pre(), counter:post() -> the values (integers, or floats for "float")
 *   counter:set_backoff(base_ms, cap_ms) -> true   (the BadVersion backoff; see counter.h)
 *   counter:stats() -> { retries = BadVersion retries of the current or last operation,
 *                        backoffs = pauses taken since the counter was made,
 *                        backing_off = a pause is under way }
 *   core.counter_repr(x) -> Python's repr of the float x
 *
 * Contract (SUSPENDED, LOST, stop, the backoff): src/recipes/counter.h; this file only
 * converts.  lua/zklua/recipes/counter.lua checks arguments and waits.  The userdata keeps its
 * session's userdata as a user value; once the session is closed the counter is told to forget
 * it.  Collecting a counter frees it with zkl_counter_free().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../recipes/counter.h"
#include "bindings.h"
#include "convert.h"
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

/* A value at idx: a number, or for the integer kinds a decimal string, read exactly (how the
 * Lua layer hands over LuaJIT's int64 cdata, beyond a double's 2^53). */
static zkl_counter_value to_value(lua_State *L, int idx, int kind)
{
    zkl_counter_value v;
    if (kind == ZKL_COUNTER_FLOAT) {
        v.f = (double)luaL_checknumber(L, idx);
    } else if (lua_type(L, idx) == LUA_TSTRING) {
        const char *text = lua_tostring(L, idx);
        char *end;
        errno = 0;
        long long x = strtoll(text, &end, 10);
        luaL_argcheck(L, errno == 0 && end != text && *end == '\0', idx,
                      "not a 64-bit integer in decimal");
        v.i = (int64_t)x;
    } else {
        v.i = (int64_t)luaL_checkinteger(L, idx);
    }
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
    static const char *const kinds[] = {"int", "float", "curator", "curator_long",
                                        "curator_atomic", NULL};
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

static int counter_start_op(lua_State *L)
{
    counter_box *box = check_box(L);
    static const char *const ops[] = {"read", "add", "set", "cas", "force", "init", NULL};
    int op = luaL_checkoption(L, 2, NULL, ops);
    luaL_argcheck(L, op <= ZKL_COUNTER_OP_ADD || box->kind == ZKL_COUNTER_CURATOR_ATOMIC, 2,
                  "set, cas, force and init are for a curator_atomic counter");
    zkl_counter_value a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (op != ZKL_COUNTER_OP_READ)
        a = to_value(L, 3, box->kind);
    if (op == ZKL_COUNTER_OP_CAS)
        b = to_value(L, 4, box->kind);
    lua_Integer max_tries = luaL_optinteger(L, 5, 0);
    luaL_argcheck(L, max_tries >= 0 && max_tries <= 1000000, 5, "max_tries must be 0..1000000");
    return zkl_recipe_started(
        L, zkl_counter_start_op(box->base.obj, (zkl_counter_op)op, a, b, (long)max_tries), NULL);
}

static int counter_tries(lua_State *L)
{
    lua_pushinteger(L, zkl_counter_tries(check_box(L)->base.obj));
    return 1;
}

static int counter_phase(lua_State *L)
{
    counter_box *box = check_box(L);
    lua_pushstring(L, zkl_counter_phase_of(box->base.obj) == ZKL_COUNTER_BUSY ? "busy" : "idle");
    return 1;
}

static int counter_outcome(lua_State *L)
{
    counter_box *box = check_box(L);
    int rc;
    zkl_counter_outcome o = zkl_counter_outcome_of(box->base.obj, &rc);
    lua_pushstring(L, zkl_counter_outcome_names[o]);
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

static int counter_set_backoff(lua_State *L)
{
    counter_box *box = check_box(L);
    lua_Integer base = luaL_checkinteger(L, 2), cap = luaL_checkinteger(L, 3);
    luaL_argcheck(L, base >= 1 && base <= ZKL_COUNTER_BACKOFF_MAX_MS, 2,
                  "base_ms must be 1..600000");
    luaL_argcheck(L, cap >= base && cap <= ZKL_COUNTER_BACKOFF_MAX_MS, 3,
                  "cap_ms must be base_ms..600000");
    zkl_counter_set_backoff(box->base.obj, (long)base, (long)cap); /* checked: cannot fail */
    lua_pushboolean(L, 1);
    return 1;
}

static int counter_stats(lua_State *L)
{
    const zkl_counter *c = check_box(L)->base.obj;
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, zkl_counter_retries(c));
    lua_setfield(L, -2, "retries");
    lua_pushinteger(L, zkl_counter_backoffs(c));
    lua_setfield(L, -2, "backoffs");
    lua_pushboolean(L, zkl_counter_backing_off(c));
    lua_setfield(L, -2, "backing_off");
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
    {"set_backoff", counter_set_backoff}, {"stats", counter_stats},
    {"start_op", counter_start_op},       {"tries", counter_tries},
    {NULL, NULL},
};

void zkl_register_counter(lua_State *L)
{
    zkl_recipe_register(L, &COUNTER_TYPE, counter_methods, "counter", counter_new);
    lua_pushcfunction(L, counter_repr);
    lua_setfield(L, -2, "counter_repr");
}
