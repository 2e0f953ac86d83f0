/*
 * party_binding.c — the zklua.core party userdata: a thin wrapper over src/recipes/party.c.
 *
 *   core.party(session, path, identifier, "party" | "shallow", acl) -> party
 *   party:join() -> true, or nil and "joined" | "busy" | "closed"
 *   party:leave() -> true, or nil and "busy" | "closed"
 *   party:phase() -> "idle" | "joining" | "joined" | "leaving"
 *   party:rc(), party:deleted(), party:node(), party:id(), party:inflight()
 *
 * Contract (SUSPENDED, LOST, stop): src/recipes/party.h; this file only converts.
 * lua/zklua/recipes/party.lua waits and lists members; the notify event ZKL_PARTY_NOTIFY_LOST
 * (target party:id()) reaches the Lua object; no Lua is called from C.  The userdata keeps its
 * session's userdata as a user value; once the session is closed the party is told to forget
 * it.  Collecting a party frees it with zkl_party_free().
 */
#include "../recipes/party.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_party_forget_session(obj); }
static void free_party(void *obj) { zkl_party_free(obj); }

static const zkl_recipe_type PARTY_TYPE = {"zklua.core.Party", "party", forget_session,
                                           free_party};

static zkl_party *check_party(lua_State *L) { return zkl_recipe_check(L, &PARTY_TYPE)->obj; }

static int party_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    int len;
    const char *data = zkl_recipe_identifier(L, 3, &len);
    static const char *const kinds[] = {"party", "shallow", NULL};
    int kind = luaL_checkoption(L, 4, "party", kinds);
    const struct ACL_vector *acl = zkl_opt_acl_list(L, 5, "acl");
    zkl_recipe_box *box = zkl_recipe_box_new(L, &PARTY_TYPE, sizeof *box);
    return zkl_recipe_box_set(
        L, &PARTY_TYPE, box,
        zkl_party_new(*slot, path, data, len, (zkl_party_kind)kind, acl), slot);
}

static int party_join(lua_State *L)
{
    return zkl_recipe_started(L, zkl_party_join(check_party(L)), "joined");
}

static int party_leave(lua_State *L)
{
    return zkl_recipe_started(L, zkl_party_leave(check_party(L)), "joined");
}

ZKL_RECIPE_NAME(party_phase, check_party, zkl_party_phase_of, zkl_party_phase_names)
ZKL_RECIPE_INTEGER(party_rc, check_party, zkl_party_rc)
ZKL_RECIPE_BOOLEAN(party_deleted, check_party, zkl_party_deleted)
ZKL_RECIPE_STRING(party_node, check_party, zkl_party_node)
ZKL_RECIPE_INTEGER(party_id, check_party, zkl_party_id)
ZKL_RECIPE_INTEGER(party_inflight, check_party, zkl_party_inflight)

static const luaL_Reg party_methods[] = {
    {"join", party_join}, {"leave", party_leave}, {"phase", party_phase},
    {"rc", party_rc},     {"deleted", party_deleted}, {"node", party_node},
    {"id", party_id},     {"inflight", party_inflight}, {NULL, NULL},
};

void zkl_register_party(lua_State *L)
{
    zkl_recipe_register(L, &PARTY_TYPE, party_methods, "party", party_new);
}
