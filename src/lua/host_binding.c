/*
 * host_binding.c — what zklua asks of the host it runs on, in one place: its names, its
 * process id and the wall clock, as kazoo's recipes read them from Python.
 *
 *   core.hostname() -> the host's name (Python's socket.gethostname()); raises when unknown
 *   core.host_fqdn() -> Python's socket.getfqdn(): the canonical name of the host's first
 *                       address (what a reverse lookup gives), else the host name
 *   core.getpid() -> this process's id
 *   core.utcnow() -> seconds since the epoch, UTC, with the clock's fraction
 *
 * Guarantees: nothing here keeps state; a failed lookup never raises from host_fqdn (it falls
 * back to the host name, as Python does).
 */
#include <errno.h>
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../core/clock.h"
#include "bindings.h"

static int core_hostname(lua_State *L)
{
    char name[256];
    if (gethostname(name, sizeof name) != 0)
        return luaL_error(L, "gethostname: %s", strerror(errno));
    name[sizeof name - 1] = '\0';
    lua_pushstring(L, name);
    return 1;
}

static int core_host_fqdn(lua_State *L)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    char name[NI_MAXHOST];
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host[0] ? host : "localhost", NULL, &hints, &res) == 0 && res &&
        getnameinfo(res->ai_addr, res->ai_addrlen, name, sizeof name, NULL, 0,
                    NI_NAMEREQD) == 0)
        lua_pushstring(L, name);
    else
        lua_pushstring(L, host);
    if (res)
        freeaddrinfo(res);
    return 1;
}

static int core_getpid(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)getpid());
    return 1;
}

static int core_utcnow(lua_State *L)
{
    lua_pushnumber(L, (lua_Number)zkl_wall_clock_seconds());
    return 1;
}

static const luaL_Reg host_functions[] = {
    {"hostname", core_hostname},
    {"host_fqdn", core_host_fqdn},
    {"getpid", core_getpid},
    {"utcnow", core_utcnow},
    {NULL, NULL},
};

void zkl_register_host(lua_State *L)
{
    luaL_setfuncs(L, host_functions, 0);
}
