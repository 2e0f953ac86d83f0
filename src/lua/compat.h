/*
 * compat.h — the few Lua C API differences between Lua 5.4 and LuaJIT (Lua 5.1 ABI), so that
 * one source builds both modules.
 */
#ifndef ZKL_LUA_COMPAT_H
#define ZKL_LUA_COMPAT_H

#include <lauxlib.h>
#include <lua.h>

#if LUA_VERSION_NUM < 502
#define lua_rawlen(L, i) lua_objlen((L), (i))
#define lua_newuserdatauv(L, size, nuv) lua_newuserdata((L), (size))
static inline int zkl_lua_isinteger(lua_State *L, int i)
{
    if (lua_type(L, i) != LUA_TNUMBER)
        return 0;
    lua_Number n = lua_tonumber(L, i);
    return n == (lua_Number)(lua_Integer)n;
}
#define lua_isinteger(L, i) zkl_lua_isinteger((L), (i))
#endif

#endif
