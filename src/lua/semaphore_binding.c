/*
 * semaphore_binding.c — the zklua.core semaphore userdata: a thin wrapper over
 * src/recipes/semaphore.c.
 *
 *   core.semaphore(session, path, identifier, max_leases, acl, layout) -> semaphore,
 *     layout "kazoo" (default) | "curator"
 *   sem:acquire(blocking) -> true, or nil and "held" | "busy" | "closed"
 *   sem:release() -> true when a release started (it was held)
 *   sem:release_in_background(): stop counting a release under way as held
 *   sem:cancel(), sem:give_up()
 *   sem:phase() -> "idle" | "acquiring" | "held" | "releasing" | "abandoning"
 *   sem:outcome() -> "pending" | "got" | "busy" | "cancelled" | "gave_up" | "mismatch" |
 *                    "failed", rc, stored max_leases text (with "mismatch")
 *   sem:release_rc(), sem:checked(), sem:is_held(), sem:node(), sem:prefix(), sem:step(),
 *   sem:fencing_token(), sem:id(), sem:inflight()
 *
 * Contract (SUSPENDED, LOST, stop): src/recipes/semaphore.h; this file only converts.
 * lua/zklua/recipes/semaphore.lua waits, times out and talks to the user; the C notify event
 * ZKL_SEM_NOTIFY_LOST (target sem:id()) reaches the Lua object, which runs the on_lost
 * callbacks; no Lua is ever called from C.  The userdata keeps its session's userdata as a user
 * value; once the session is closed the semaphore is told to forget it.  Collecting a semaphore
 * frees it with zkl_semaphore_free(): an acquire under way is abandoned in the background.
 */
#include "../recipes/semaphore.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_semaphore_forget_session(obj); }
static void free_semaphore(void *obj) { zkl_semaphore_free(obj); }

static const zkl_recipe_type SEMAPHORE_TYPE = {"zklua.core.Semaphore", "semaphore",
                                               forget_session, free_semaphore};

static zkl_semaphore *check_sem(lua_State *L)
{
    return zkl_recipe_check(L, &SEMAPHORE_TYPE)->obj;
}

/* The layout named at idx (default "kazoo"). */
static zkl_semaphore_layout check_layout(lua_State *L, int idx)
{
    static const char *const names[] = {"kazoo", "curator", NULL};
    static const zkl_semaphore_layout layouts[] = {ZKL_SEM_LAYOUT_KAZOO, ZKL_SEM_LAYOUT_CURATOR};
    return layouts[luaL_checkoption(L, idx, "kazoo", names)];
}

/* core.semaphore(session, path, identifier, max_leases, acl, layout) */
static int sem_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    int len;
    const char *data = zkl_recipe_identifier(L, 3, &len);
    lua_Integer max = luaL_checkinteger(L, 4);
    if (max < 1 || max > 0x7fffffff)
        return luaL_argerror(L, 4, "max_leases must be from 1 to 2147483647");
    const struct ACL_vector *acl = zkl_opt_acl_list(L, 5, "acl");
    zkl_semaphore_layout layout = check_layout(L, 6);
    zkl_recipe_box *box = zkl_recipe_box_new(L, &SEMAPHORE_TYPE, sizeof *box);
    return zkl_recipe_box_set(L, &SEMAPHORE_TYPE, box,
                              zkl_semaphore_new(*slot, path, data, len, (int)max, acl, layout),
                              slot);
}

static int sem_acquire(lua_State *L) /* acquire(blocking) */
{
    return zkl_recipe_started(L, zkl_semaphore_acquire(check_sem(L), lua_toboolean(L, 2)),
                              "held");
}

ZKL_RECIPE_BOOLEAN(sem_release, check_sem, zkl_semaphore_release)
ZKL_RECIPE_VOID(sem_release_in_background, check_sem, zkl_semaphore_release_in_background)
ZKL_RECIPE_VOID(sem_cancel, check_sem, zkl_semaphore_cancel)
ZKL_RECIPE_VOID(sem_give_up, check_sem, zkl_semaphore_give_up)
ZKL_RECIPE_NAME(sem_phase, check_sem, zkl_semaphore_phase_of, zkl_semaphore_phase_names)

static int sem_outcome(lua_State *L)
{
    zkl_semaphore *m = check_sem(L);
    int rc;
    zkl_semaphore_outcome outcome = zkl_semaphore_outcome_of(m, &rc);
    zkl_recipe_outcome(L, zkl_semaphore_outcome_names[outcome], rc);
    const char *stored = zkl_semaphore_stored_max(m);
    if (!stored)
        return 2;
    lua_pushstring(L, stored);
    return 3;
}

ZKL_RECIPE_INTEGER(sem_release_rc, check_sem, zkl_semaphore_release_rc)
ZKL_RECIPE_BOOLEAN(sem_checked, check_sem, zkl_semaphore_checked)
ZKL_RECIPE_BOOLEAN(sem_is_held, check_sem, zkl_semaphore_is_held)
ZKL_RECIPE_STRING(sem_node, check_sem, zkl_semaphore_node)
ZKL_RECIPE_STRING(sem_prefix, check_sem, zkl_semaphore_prefix)
ZKL_RECIPE_STRING(sem_step, check_sem, zkl_semaphore_step_name)

static int sem_fencing_token(lua_State *L)
{
    int64_t token;
    if (zkl_semaphore_fencing_token(check_sem(L), &token) != 0)
        return 0;
    lua_pushinteger(L, (lua_Integer)token);
    return 1;
}

ZKL_RECIPE_INTEGER(sem_id, check_sem, zkl_semaphore_id)
ZKL_RECIPE_INTEGER(sem_inflight, check_sem, zkl_semaphore_inflight)

static const luaL_Reg sem_methods[] = {
    {"acquire", sem_acquire},
    {"release", sem_release},
    {"release_in_background", sem_release_in_background},
    {"cancel", sem_cancel},
    {"give_up", sem_give_up},
    {"phase", sem_phase},
    {"outcome", sem_outcome},
    {"release_rc", sem_release_rc},
    {"checked", sem_checked},
    {"is_held", sem_is_held},
    {"node", sem_node},
    {"prefix", sem_prefix},
    {"step", sem_step},
    {"fencing_token", sem_fencing_token},
    {"id", sem_id},
    {"inflight", sem_inflight},
    {NULL, NULL},
};

void zkl_register_semaphore(lua_State *L)
{
    zkl_recipe_register(L, &SEMAPHORE_TYPE, sem_methods, "semaphore", sem_new);
}
