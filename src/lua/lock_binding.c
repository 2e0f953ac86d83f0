/*
 * lock_binding.c — the zklua.core lock userdata: a thin wrapper over src/recipes/lock.c.
 *
 *   core.lock(session, path, identifier, kind, acl, {mark, ...}, container_parents) -> lock,
 *     kind "exclusive" | "shared" | "curator-mutex" | "curator-latch" | "curator-read" |
 *     "curator-write"; container_parents nil:
 *     the kind's default (containers for the Curator kinds)
 *   lock:acquire(blocking, ephemeral) -> true, or nil and "held" | "busy" | "closed"
 *   lock:release() -> true when a release started (it was held)
 *   lock:release_in_background(): stop counting a release under way as held
 *   lock:cancel(), lock:give_up()
 *   lock:phase() -> "idle" | "acquiring" | "held" | "releasing" | "abandoning"
 *   lock:outcome() -> "pending" | "got" | "busy" | "cancelled" | "gave_up" | "failed", rc
 *   lock:release_rc(), lock:checked(), lock:is_held(), lock:node(), lock:prefix(),
 *   lock:fencing_token(), lock:id(), lock:inflight()
 *   core.lock_contenders({child, ...}, {mark, ...}, kind) -> the contender names among them
 *   for a lock of kind (marks: foreign contenders too, see zkl_lock_add_mark), in lock order
 *
 * Contract (SUSPENDED, LOST, stop, the notify codes): src/recipes/lock.h; this file only
 * converts.  lua/zklua/recipes/lock.lua waits, times out and talks to the user; no Lua is ever
 * called from C.  The userdata keeps its session's userdata alive (recipe_binding.h).
 * Collecting a lock frees it with zkl_lock_free(): an acquire under way is abandoned in the
 * background.
 */
#include "../recipes/lock.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_lock_forget_session(obj); }
static void free_lock(void *obj) { zkl_lock_free(obj); }

static const zkl_recipe_type LOCK_TYPE = {"zklua.core.Lock", "lock", forget_session, free_lock};

/* The lock of the userdata at idx 1, told to forget a session that was closed meanwhile. */
static zkl_lock *check_lock(lua_State *L) { return zkl_recipe_check(L, &LOCK_TYPE)->obj; }

/* The strings of the list at idx (absent: none) in a userdata left on the stack (the list
 * keeps them alive); *n their count.  Checked by the Lua layer: here only their type. */
static const char **string_list(lua_State *L, int idx, int *n)
{
    *n = lua_istable(L, idx) ? (int)lua_rawlen(L, idx) : 0;
    const char **strings = lua_newuserdatauv(L, sizeof *strings * (size_t)(*n > 0 ? *n : 1), 0);
    for (int i = 0; i < *n; i++) {
        lua_rawgeti(L, idx, i + 1);
        strings[i] = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        lua_pop(L, 1);
        if (!strings[i])
            luaL_argerror(L, idx, "a list of strings expected");
    }
    return strings;
}

/* The lock kind named at idx (default "exclusive"). */
static zkl_lock_kind check_kind(lua_State *L, int idx)
{
    static const char *const names[] = {"exclusive", "shared", "curator-mutex", "curator-latch",
                                        "curator-read", "curator-write", NULL};
    static const zkl_lock_kind kinds[] = {ZKL_LOCK_EXCLUSIVE, ZKL_LOCK_SHARED,
                                          ZKL_LOCK_CURATOR_MUTEX, ZKL_LOCK_CURATOR_LATCH,
                                          ZKL_LOCK_CURATOR_READ, ZKL_LOCK_CURATOR_WRITE};
    return kinds[luaL_checkoption(L, idx, "exclusive", names)];
}

/* core.lock(session, path, identifier, kind, acl, marks, container_parents) */
static int lock_new(lua_State *L)
{
    lua_settop(L, 7); /* string_list and the box push: read every argument at its index */
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    int len;
    const char *data = zkl_recipe_identifier(L, 3, &len);
    zkl_lock_kind kind = check_kind(L, 4);
    const struct ACL_vector *acl = zkl_opt_acl_list(L, 5, "acl");
    int n_marks;
    const char **marks = string_list(L, 6, &n_marks);
    zkl_recipe_box *box = zkl_recipe_box_new(L, &LOCK_TYPE, sizeof *box);
    zkl_lock *l = zkl_lock_new(*slot, path, data, len, kind, acl);
    for (int i = 0; l && i < n_marks; i++) {
        if (zkl_lock_add_mark(l, marks[i]) != 0) {
            zkl_lock_free(l);
            l = NULL;
        }
    }
    if (l && !lua_isnoneornil(L, 7))
        zkl_lock_container_parents(l, lua_toboolean(L, 7));
    return zkl_recipe_box_set(L, &LOCK_TYPE, box, l, slot);
}

static int lock_acquire(lua_State *L) /* acquire(blocking, ephemeral) */
{
    zkl_lock *l = check_lock(L);
    return zkl_recipe_started(L, zkl_lock_acquire(l, lua_toboolean(L, 2), lua_toboolean(L, 3)),
                              "held");
}

ZKL_RECIPE_BOOLEAN(lock_release, check_lock, zkl_lock_release)
ZKL_RECIPE_VOID(lock_release_in_background, check_lock, zkl_lock_release_in_background)
ZKL_RECIPE_VOID(lock_cancel, check_lock, zkl_lock_cancel)
ZKL_RECIPE_VOID(lock_give_up, check_lock, zkl_lock_give_up)
ZKL_RECIPE_NAME(lock_phase, check_lock, zkl_lock_phase_of, zkl_lock_phase_names)

static int lock_outcome(lua_State *L)
{
    int rc;
    zkl_lock_outcome outcome = zkl_lock_outcome_of(check_lock(L), &rc);
    return zkl_recipe_outcome(L, zkl_lock_outcome_names[outcome], rc);
}

ZKL_RECIPE_INTEGER(lock_release_rc, check_lock, zkl_lock_release_rc)
ZKL_RECIPE_BOOLEAN(lock_checked, check_lock, zkl_lock_checked)
ZKL_RECIPE_BOOLEAN(lock_is_held, check_lock, zkl_lock_is_held)

static int lock_node(lua_State *L)
{
    const char *node = zkl_lock_node(check_lock(L));
    if (!node)
        return 0;
    lua_pushstring(L, node);
    return 1;
}

ZKL_RECIPE_STRING(lock_prefix, check_lock, zkl_lock_prefix)

static int lock_fencing_token(lua_State *L)
{
    int64_t token;
    if (zkl_lock_fencing_token(check_lock(L), &token) != 0)
        return 0;
    zkl_push_int64(L, token);
    return 1;
}

ZKL_RECIPE_INTEGER(lock_id, check_lock, zkl_lock_id)
ZKL_RECIPE_INTEGER(lock_inflight, check_lock, zkl_lock_inflight)

/* core.lock_contenders(names, marks) -> the contenders among names, in lock order */
static int lock_contenders(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 3); /* string_list pushes: marks and kind may be left out */
    int n, n_marks;
    const char **names = string_list(L, 1, &n);
    const char **marks = string_list(L, 2, &n_marks);
    int count = zkl_lock_layout_sort_contenders(check_kind(L, 3), names, n, marks, n_marks);
    if (count < 0)
        return luaL_error(L, "lock_contenders: out of memory");
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static const luaL_Reg lock_methods[] = {
    {"acquire", lock_acquire},
    {"release", lock_release},
    {"release_in_background", lock_release_in_background},
    {"cancel", lock_cancel},
    {"give_up", lock_give_up},
    {"phase", lock_phase},
    {"outcome", lock_outcome},
    {"release_rc", lock_release_rc},
    {"checked", lock_checked},
    {"is_held", lock_is_held},
    {"node", lock_node},
    {"prefix", lock_prefix},
    {"fencing_token", lock_fencing_token},
    {"id", lock_id},
    {"inflight", lock_inflight},
    {NULL, NULL},
};

void zkl_register_lock(lua_State *L)
{
    zkl_recipe_register(L, &LOCK_TYPE, lock_methods, "lock", lock_new);
    lua_pushcfunction(L, lock_contenders);
    lua_setfield(L, -2, "lock_contenders");
}
