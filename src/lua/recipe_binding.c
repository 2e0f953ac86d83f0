/*
 * recipe_binding.c — the plumbing the recipe userdata (lock, party, barrier, counter) share:
 * the box of a recipe object and its session slot, the session check, __gc, the result of
 * starting an operation and the registration.  See recipe_binding.h.
 */
#include <errno.h>
#include <string.h>

#include "recipe_binding.h"

zkl_session *const *zkl_recipe_session(lua_State *L)
{
    zkl_session *const *slot = zkl_lua_session_slot(L, 1);
    if (!*slot)
        luaL_error(L, "the session is closed");
    return slot;
}

void *zkl_recipe_box_new(lua_State *L, const zkl_recipe_type *t, size_t size)
{
    void *box = lua_newuserdatauv(L, size, 1);
    memset(box, 0, size);
    luaL_setmetatable(L, t->metatable);
    lua_pushvalue(L, 1); /* the session outlives the recipe's memory */
#if LUA_VERSION_NUM >= 502
    lua_setiuservalue(L, -2, 1);
#else
    lua_createtable(L, 1, 0); /* LuaJIT: the environment table holds it */
    lua_insert(L, -2);
    lua_rawseti(L, -2, 1);
    lua_setfenv(L, -2);
#endif
    return box;
}

int zkl_recipe_box_set(lua_State *L, const zkl_recipe_type *t, zkl_recipe_box *box, void *obj,
                       zkl_session *const *slot)
{
    box->obj = obj;
    if (!obj)
        return luaL_error(L, "cannot make a %s: %s", t->what, strerror(errno));
    box->slot = slot;
    return 1;
}

zkl_recipe_box *zkl_recipe_check(lua_State *L, const zkl_recipe_type *t)
{
    zkl_recipe_box *box = luaL_checkudata(L, 1, t->metatable);
    if (!box->obj)
        luaL_error(L, "the %s is freed", t->what);
    if (box->slot && *box->slot == NULL) {
        t->forget_session(box->obj);
        box->slot = NULL;
    }
    return box;
}

int zkl_recipe_started(lua_State *L, int r, const char *isconn)
{
    if (r == 0) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushnil(L);
    lua_pushstring(L, isconn && errno == EISCONN ? isconn
                      : errno == EALREADY         ? "busy"
                                                  : "closed");
    return 2;
}

const char *zkl_recipe_identifier(lua_State *L, int idx, int *len)
{
    size_t n = 0;
    const char *data = luaL_optlstring(L, idx, "", &n);
    if (n > 0x7fffffff)
        luaL_argerror(L, idx, "identifier too large");
    *len = (int)n;
    return data;
}

int zkl_recipe_outcome(lua_State *L, const char *name, int rc)
{
    lua_pushstring(L, name);
    lua_pushinteger(L, rc);
    return 2;
}

static int recipe_gc(lua_State *L) /* upvalue 1: the zkl_recipe_type */
{
    const zkl_recipe_type *t = lua_touserdata(L, lua_upvalueindex(1));
    zkl_recipe_box *box = luaL_checkudata(L, 1, t->metatable);
    if (!box->obj)
        return 0;
    if (box->slot && *box->slot == NULL)
        t->forget_session(box->obj);
    t->free(box->obj);
    box->obj = NULL;
    box->slot = NULL;
    return 0;
}

void zkl_recipe_register(lua_State *L, const zkl_recipe_type *t, const luaL_Reg *methods,
                         const char *ctor_name, lua_CFunction ctor)
{
    if (luaL_newmetatable(L, t->metatable)) {
        lua_newtable(L);
        luaL_setfuncs(L, methods, 0);
        lua_setfield(L, -2, "__index");
        lua_pushlightuserdata(L, (void *)t);
        lua_pushcclosure(L, recipe_gc, 1);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, ctor);
    lua_setfield(L, -2, ctor_name);
}
