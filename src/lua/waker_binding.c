/*
 * waker_binding.c — core.waker(dir): a wake-up socket for hosts that can read sockets but not
 * watch an fd (src/core/waker.h says what it guarantees).  zklua.handlers.ngx uses it:
 *
 *   local w = core.waker("/tmp")          -- listens at w:path()
 *   sock:connect("unix:" .. w:path())      -- the host's own socket (an ngx cosocket)
 *   w:accept()                             -- the path is gone; w writes to sock's peer now
 *   w:attach(session)                      -- the session's events make sock readable
 *   w:detach(session); w:close()
 *
 * Errors are Lua errors naming the call; a closed waker refuses everything but close().
 */
#include <errno.h>
#include <string.h>

#include "../core/session.h"
#include "../core/waker.h"
#include "session_binding.h"

static const char WAKER_METATABLE[] = "zklua.core.Waker";

typedef struct {
    zkl_waker waker;
    int open;
} waker_box;

static waker_box *check_waker(lua_State *L)
{
    waker_box *box = luaL_checkudata(L, 1, WAKER_METATABLE);
    if (!box->open)
        luaL_error(L, "the waker is closed");
    return box;
}

static int waker_new(lua_State *L)
{
    const char *dir = luaL_optstring(L, 1, "/tmp");
    waker_box *box = lua_newuserdatauv(L, sizeof *box, 0);
    box->open = 0;
    luaL_setmetatable(L, WAKER_METATABLE);
    if (zkl_waker_listen(&box->waker, dir) != 0)
        return luaL_error(L, "core.waker: cannot listen in %s: %s", dir, strerror(errno));
    box->open = 1;
    return 1;
}

static int waker_path(lua_State *L)
{
    waker_box *box = check_waker(L);
    if (!box->waker.path[0])
        return 0;
    lua_pushstring(L, box->waker.path);
    return 1;
}

/* accept() -> true, or false and why (no connection made to the path yet). */
static int waker_accept(lua_State *L)
{
    waker_box *box = check_waker(L);
    if (zkl_waker_accept(&box->waker) == 0) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushboolean(L, 0);
    lua_pushstring(L, strerror(errno));
    return 2;
}

static zkl_session *open_session(lua_State *L, int idx, const char *fname)
{
    zkl_session *s = *zkl_lua_session_slot(L, idx);
    if (!s)
        luaL_error(L, "waker:%s: the session is closed", fname);
    return s;
}

static int waker_attach(lua_State *L)
{
    waker_box *box = check_waker(L);
    zkl_session *s = open_session(L, 2, "attach");
    int fd = zkl_waker_fd(&box->waker);
    if (fd < 0)
        return luaL_error(L, "waker:attach: no connection accepted yet");
    if (zkl_session_notify_fd(s, fd) != 0)
        return luaL_error(L, "waker:attach: %s", strerror(errno));
    return 0;
}

static int waker_detach(lua_State *L)
{
    luaL_checkudata(L, 1, WAKER_METATABLE);
    zkl_session *s = *zkl_lua_session_slot(L, 2);
    if (s)
        zkl_session_notify_fd(s, -1);
    return 0;
}

static int waker_signal(lua_State *L)
{
    zkl_waker_signal(&check_waker(L)->waker);
    return 0;
}

static int waker_close(lua_State *L)
{
    waker_box *box = luaL_checkudata(L, 1, WAKER_METATABLE);
    if (box->open)
        zkl_waker_close(&box->waker);
    box->open = 0;
    return 0;
}

static const luaL_Reg waker_methods[] = {
    {"path", waker_path},     {"accept", waker_accept}, {"attach", waker_attach},
    {"detach", waker_detach}, {"signal", waker_signal}, {"close", waker_close},
    {NULL, NULL},
};

void zkl_register_waker(lua_State *L)
{
    if (luaL_newmetatable(L, WAKER_METATABLE)) {
        lua_newtable(L);
        luaL_setfuncs(L, waker_methods, 0);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, waker_close);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, waker_new);
    lua_setfield(L, -2, "waker");
}
