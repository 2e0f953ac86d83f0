/*
 * party_binding.c — the zklua.core party userdata: a thin wrapper over src/recipes/party.c.
 *
 *   core.party(session, path, identifier, "party" | "shallow", acl) -> party
 *   party:join() -> true, or nil and "joined" | "busy" | "closed"
 *   party:leave() -> true, or nil and "busy" | "closed"
 *   party:phase() -> "idle" | "joining" | "joined" | "leaving"
 *   party:rc(), party:deleted(), party:node(), party:id(), party:inflight()
 *
 * The logic is in party.c; lua/zklua/recipes/party.lua waits and lists members.  SUSPENDED
 * changes nothing here (a member stays joined; a join or leave waits for the reconnection).
 * LOST: a joined member's phase turns idle and C queues a notify event (ZKL_PARTY_NOTIFY_LOST,
 * target party:id()) that the client hands to the Lua object; no Lua is called from C.  The
 * userdata keeps its session's userdata as a user value; once the session is closed the party
 * is told to forget it.  Collecting a party frees it with zkl_party_free().
 */
#include <errno.h>
#include <string.h>

#include "../recipes/party.h"
#include "convert.h"
#include "party_binding.h"
#include "session_binding.h"

static const char PARTY_METATABLE[] = "zklua.core.Party";

typedef struct {
    zkl_party *party;
    zkl_session *const *slot;
} party_box;

static zkl_party *check_party(lua_State *L)
{
    party_box *box = luaL_checkudata(L, 1, PARTY_METATABLE);
    if (!box->party)
        luaL_error(L, "the party is freed");
    if (box->slot && *box->slot == NULL) {
        zkl_party_forget_session(box->party);
        box->slot = NULL;
    }
    return box->party;
}

static int party_new(lua_State *L)
{
    zkl_session *const *slot = zkl_lua_session_slot(L, 1);
    if (!*slot)
        return luaL_error(L, "the session is closed");
    const char *path = luaL_checkstring(L, 2);
    size_t len = 0;
    const char *data = luaL_optlstring(L, 3, "", &len);
    if (len > 0x7fffffff)
        return luaL_argerror(L, 3, "identifier too large");
    static const char *const kinds[] = {"party", "shallow", NULL};
    int kind = luaL_checkoption(L, 4, "party", kinds);
    const struct ACL_vector *acl = NULL;
    if (!lua_isnoneornil(L, 5))
        acl = zkl_check_acl_list(L, 5, "acl");
    party_box *box = lua_newuserdatauv(L, sizeof *box, 1);
    box->party = NULL;
    box->slot = NULL;
    luaL_setmetatable(L, PARTY_METATABLE);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    box->party = zkl_party_new(*slot, path, data, (int)len, (zkl_party_kind)kind, acl);
    if (!box->party)
        return luaL_error(L, "cannot make a party: %s", strerror(errno));
    box->slot = slot;
    return 1;
}

static int started(lua_State *L, int r)
{
    if (r == 0) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushnil(L);
    lua_pushstring(L, errno == EISCONN ? "joined" : errno == EALREADY ? "busy" : "closed");
    return 2;
}

static int party_join(lua_State *L) { return started(L, zkl_party_join(check_party(L))); }
static int party_leave(lua_State *L) { return started(L, zkl_party_leave(check_party(L))); }

static int party_phase(lua_State *L)
{
    static const char *const names[] = {"idle", "joining", "joined", "leaving"};
    lua_pushstring(L, names[zkl_party_phase_of(check_party(L))]);
    return 1;
}

static int party_rc(lua_State *L)
{
    lua_pushinteger(L, zkl_party_rc(check_party(L)));
    return 1;
}

static int party_deleted(lua_State *L)
{
    lua_pushboolean(L, zkl_party_deleted(check_party(L)));
    return 1;
}

static int party_node(lua_State *L)
{
    lua_pushstring(L, zkl_party_node(check_party(L)));
    return 1;
}

static int party_id(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)zkl_party_id(check_party(L)));
    return 1;
}

static int party_inflight(lua_State *L)
{
    lua_pushinteger(L, zkl_party_inflight(check_party(L)));
    return 1;
}

static int party_gc(lua_State *L)
{
    party_box *box = luaL_checkudata(L, 1, PARTY_METATABLE);
    if (!box->party)
        return 0;
    if (box->slot && *box->slot == NULL)
        zkl_party_forget_session(box->party);
    zkl_party_free(box->party);
    box->party = NULL;
    box->slot = NULL;
    return 0;
}

static const luaL_Reg party_methods[] = {
    {"join", party_join}, {"leave", party_leave}, {"phase", party_phase},
    {"rc", party_rc},     {"deleted", party_deleted}, {"node", party_node},
    {"id", party_id},     {"inflight", party_inflight}, {NULL, NULL},
};

void zkl_register_party(lua_State *L)
{
    if (luaL_newmetatable(L, PARTY_METATABLE)) {
        lua_newtable(L);
        luaL_setfuncs(L, party_methods, 0);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, party_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, party_new);
    lua_setfield(L, -2, "party");
}
