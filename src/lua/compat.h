/*
 * compat.h — the few Lua C API differences between Lua 5.4 and LuaJIT (Lua 5.1 ABI), so that
 * one source builds both modules.  `make` builds against Lua 5.4, `make luajit` against
 * LuaJIT 2.1's headers (LUA_VERSION_NUM 501); everything below is for the latter.  Numbers
 * there are doubles: 64-bit ids go through zkl_push_int64 (convert.h), never lua_pushinteger.
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
static inline int zkl_lua_absindex(lua_State *L, int i)
{
    return i > 0 || i <= LUA_REGISTRYINDEX ? i : lua_gettop(L) + i + 1;
}
#define lua_absindex(L, i) zkl_lua_absindex((L), (i))
#endif

#endif
