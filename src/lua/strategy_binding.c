/*
 * strategy_binding.c — the C built-in partition strategies (src/recipes/partitioning/strategy*.c) as
 * zklua.core functions; lua/zklua/recipes/partitioning/strategies.lua wraps them (argument checks on the tables
 * themselves, BadArgumentsError) for users.
 *
 *   core.strategy(name, members, items, current, weights, vnodes)
 *       -> {member -> array of items}, every member present, items in bytewise order;
 *       or nil, argument, message for bad input (a non-string or repeated member or item, a
 *          current owner that is not a string, a weight that is not a finite number > 0).
 *     name: "round_robin" | "consistent_hash" | "rendezvous" | "sticky" | "weighted"
 *     members, items: arrays of strings; current: nil or {item -> member} (sticky, weighted;
 *     owners that are not members count as none); weights: nil or {member -> number}
 *     (weighted; a member without one weighs 1); vnodes: nil or 1 .. 10000 (consistent_hash).
 *   core.strategy_hash(s) -> the 64-bit hash of s (strategy.h) as 16 lowercase hex digits
 *
 * Nothing here keeps state: the C arrays live in userdata on the Lua stack and the strings
 * stay in the caller's tables (read raw, so no metamethod runs meanwhile).  SUSPENDED and LOST
 * do not apply (no session).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../recipes/partitioning/strategy.h"
#include "bindings.h"

/* Argument positions of core.strategy(). */
enum { ARG_NAME = 1, ARG_MEMBERS, ARG_ITEMS, ARG_CURRENT, ARG_WEIGHTS, ARG_VNODES };

enum { SHOWN_MAX = 40 };

/* Pushes nil, argument, message (fmt as lua_pushfstring's); returns 3 for the caller. */
static int bad_input(lua_State *L, const char *argument, const char *fmt, const char *a,
                     const char *b)
{
    lua_pushnil(L);
    lua_pushstring(L, argument);
    lua_pushfstring(L, fmt, a, b);
    return 3;
}

/* A string as an error message shows it: quoted, cut at SHOWN_MAX bytes (or a NUL). */
static const char *shown(char buf[SHOWN_MAX + 8], zkl_str s)
{
    size_t len = s.len > SHOWN_MAX ? SHOWN_MAX - 3 : s.len;
    snprintf(buf, SHOWN_MAX + 8, "\"%.*s%s\"", (int)len, s.data, s.len > len ? "..." : "");
    return buf;
}

static void *new_array(lua_State *L, size_t n, size_t size)
{
    return lua_newuserdatauv(L, (n ? n : 1) * size, 0);
}

/* How many keys the table at idx has (raw: no metamethod runs). */
static size_t count_keys(lua_State *L, int idx)
{
    size_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        count++;
        lua_pop(L, 1);
    }
    return count;
}

/* Reads the array of strings at idx into list[n]; 0, or the 3 results of bad_input. */
static int read_strings(lua_State *L, int idx, const char *argument, zkl_str *list, size_t n)
{
    if (count_keys(L, idx) != n)
        return bad_input(L, argument, "%s must be an array of strings (a sequence: no holes, "
                         "no other keys)%s", argument, "");
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, idx, (lua_Integer)i + 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            char where[64];
            snprintf(where, sizeof where, "%s[%zu]", argument, i + 1);
            const char *got = luaL_typename(L, -1);
            lua_pop(L, 1);
            return bad_input(L, argument, "%s must be a string (got %s)", where, got);
        }
        list[i].data = lua_tolstring(L, -1, &list[i].len);
        lua_pop(L, 1); /* the table keeps the string alive */
    }
    return 0;
}

/* Sorts list into order and refuses a repeated string; 0, or the 3 results of bad_input. */
static int sort_distinct(lua_State *L, const char *argument, const zkl_str *list, size_t n,
                         size_t *order)
{
    if (zkl_strategy_sort(list, n, order) != 0)
        return luaL_error(L, "out of memory");
    size_t dup = zkl_strategy_duplicate(list, order, n);
    if (dup == ZKL_STRATEGY_NO_OWNER)
        return 0;
    char buf[SHOWN_MAX + 8];
    return bad_input(L, argument, "%s holds %s twice", argument, shown(buf, list[dup]));
}

/* current[i]: the index among the members of items[i]'s owner in the table at ARG_CURRENT. */
static int read_current(lua_State *L, const zkl_strategy_input *in, const size_t *member_order,
                        size_t *current)
{
    for (size_t i = 0; i < in->n_items; i++) {
        lua_rawgeti(L, ARG_ITEMS, (lua_Integer)i + 1); /* the item's own string: no rehash */
        lua_rawget(L, ARG_CURRENT);
        int type = lua_type(L, -1);
        if (type == LUA_TNIL) {
            current[i] = ZKL_STRATEGY_NO_OWNER;
        } else if (type == LUA_TSTRING) {
            zkl_str owner;
            owner.data = lua_tolstring(L, -1, &owner.len);
            current[i] = zkl_strategy_find(in->members, member_order, in->n_members, owner);
        } else {
            char buf[SHOWN_MAX + 8];
            const char *got = luaL_typename(L, -1);
            lua_pop(L, 1);
            return bad_input(L, "ctx.current", "ctx.current[%s] must be a member string (got %s)",
                             shown(buf, in->items[i]), got);
        }
        lua_pop(L, 1);
    }
    return 0;
}

/* weights[m]: members[m]'s weight in the table at ARG_WEIGHTS (1 when it has none). */
static int read_weights(lua_State *L, const zkl_strategy_input *in, double *weights)
{
    for (size_t m = 0; m < in->n_members; m++) {
        lua_rawgeti(L, ARG_MEMBERS, (lua_Integer)m + 1);
        lua_rawget(L, ARG_WEIGHTS);
        int type = lua_type(L, -1);
        double w = type == LUA_TNUMBER ? (double)lua_tonumber(L, -1) : 1.0;
        if (type != LUA_TNIL && (type != LUA_TNUMBER || !isfinite(w) || w <= 0)) {
            char buf[SHOWN_MAX + 8];
            const char *got = type == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1);
            return bad_input(L, "ctx.weights",
                             "ctx.weights[%s] must be a finite number > 0 (got %s)",
                             shown(buf, in->members[m]), got);
        }
        weights[m] = w;
        lua_pop(L, 1);
    }
    return 0;
}

/* Pushes {member -> array of its items in bytewise order}, every member present.  The strings
 * are the caller's own (read from its tables), so Lua need not hash them again. */
static void push_assignment(lua_State *L, const zkl_strategy_input *in,
                            const size_t *item_order, const size_t *owner)
{
    size_t n = in->n_members, items = in->n_items;
    size_t *start = new_array(L, n + 1, sizeof *start); /* start[m]: m's first slot */
    size_t *slot = new_array(L, items, sizeof *slot);   /* item indexes grouped by owner */
    memset(start, 0, (n + 1) * sizeof *start);
    for (size_t i = 0; i < items; i++)
        start[owner[i] + 1]++;
    for (size_t m = 0; m < n; m++)
        start[m + 1] += start[m];
    size_t *next = new_array(L, n, sizeof *next);
    memcpy(next, start, n * sizeof *next);
    for (size_t k = 0; k < items; k++) {
        size_t i = item_order[k];
        slot[next[owner[i]]++] = i;
    }
    lua_createtable(L, 0, (int)(n < 1000000 ? n : 1000000));
    for (size_t m = 0; m < n; m++) {
        size_t count = start[m + 1] - start[m];
        lua_rawgeti(L, ARG_MEMBERS, (lua_Integer)m + 1);
        lua_createtable(L, (int)(count < 100000000 ? count : 100000000), 0);
        for (size_t j = 0; j < count; j++) {
            size_t i = slot[start[m] + j];
            lua_rawgeti(L, ARG_ITEMS, (lua_Integer)i + 1);
            lua_rawseti(L, -2, (lua_Integer)j + 1);
        }
        lua_rawset(L, -3);
    }
}

static int uses_current(zkl_strategy_fn fn)
{
    return fn == zkl_strategy_sticky || fn == zkl_strategy_weighted;
}

/* Reads what core.strategy()'s arguments say into in (arrays on the Lua stack); 0, or the
 * 3 results of bad_input. */
static int read_input(lua_State *L, zkl_strategy_fn fn, zkl_strategy_input *in,
                      size_t **member_order, size_t **item_order)
{
    zkl_str *members = new_array(L, in->n_members, sizeof *members);
    zkl_str *items = new_array(L, in->n_items, sizeof *items);
    *member_order = new_array(L, in->n_members, sizeof **member_order);
    *item_order = new_array(L, in->n_items, sizeof **item_order);
    int rc = read_strings(L, ARG_MEMBERS, "members", members, in->n_members);
    if (!rc)
        rc = read_strings(L, ARG_ITEMS, "items", items, in->n_items);
    in->members = members;
    in->items = items;
    in->member_order = *member_order; /* sorted below: the strategies need not sort again */
    in->item_order = *item_order;
    if (!rc)
        rc = sort_distinct(L, "members", members, in->n_members, *member_order);
    if (!rc)
        rc = sort_distinct(L, "items", items, in->n_items, *item_order);
    if (!rc && uses_current(fn) && lua_istable(L, ARG_CURRENT)) {
        size_t *current = new_array(L, in->n_items, sizeof *current);
        rc = read_current(L, in, *member_order, current);
        in->current = current;
    }
    if (!rc && fn == zkl_strategy_weighted && lua_istable(L, ARG_WEIGHTS)) {
        double *weights = new_array(L, in->n_members, sizeof *weights);
        rc = read_weights(L, in, weights);
        in->weights = weights;
    }
    return rc;
}

static int core_strategy(lua_State *L)
{
    const char *name = luaL_checkstring(L, ARG_NAME);
    zkl_strategy_fn fn = zkl_strategy_named(name);
    if (!fn)
        return luaL_argerror(L, ARG_NAME, "no such strategy");
    luaL_checktype(L, ARG_MEMBERS, LUA_TTABLE);
    luaL_checktype(L, ARG_ITEMS, LUA_TTABLE);
    luaL_checkstack(L, 24, NULL); /* the arrays (userdata) and the result being built */
    lua_Integer vnodes = luaL_optinteger(L, ARG_VNODES, 0);
    luaL_argcheck(L, vnodes >= 0 && vnodes <= ZKL_STRATEGY_MAX_VNODES, ARG_VNODES,
                  "vnodes out of range");
    zkl_strategy_input in;
    memset(&in, 0, sizeof in);
    in.n_members = lua_rawlen(L, ARG_MEMBERS);
    in.n_items = lua_rawlen(L, ARG_ITEMS);
    in.vnodes = (size_t)vnodes;
    size_t *member_order, *item_order;
    int rc = read_input(L, fn, &in, &member_order, &item_order);
    if (rc)
        return rc;
    size_t *owner = new_array(L, in.n_items, sizeof *owner);
    if (in.n_members > 0 && fn(&in, owner) != 0)
        return luaL_error(L, "out of memory");
    if (in.n_members == 0)
        in.n_items = 0; /* nobody to own anything: every member (none) present, no items */
    push_assignment(L, &in, item_order, owner);
    return 1;
}

static int core_strategy_hash(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)zkl_strategy_hash(s, len));
    lua_pushstring(L, hex);
    return 1;
}

static const luaL_Reg strategy_functions[] = {
    {"strategy", core_strategy},
    {"strategy_hash", core_strategy_hash},
    {NULL, NULL},
};

void zkl_register_strategies(lua_State *L)
{
    luaL_setfuncs(L, strategy_functions, 0);
}
