/*
 * locking_queue_binding.c — the zklua.core locking-queue userdata (the taking side of
 * kazoo's LockingQueue): a thin wrapper over src/recipes/locking_queue.c.
 *
 *   core.locking_queue(session, path, acl) -> queue
 *   queue:get() / queue:consume() / queue:release() -> true, or nil and
 *     "holding" | "busy" | "not holding" | "closed"
 *   queue:give_up()
 *   queue:phase() -> "idle" | "getting" | "holding" | "consuming" | "releasing" | "abandoning"
 *   queue:outcome() -> "pending" | "got" | "consumed" | "released" | "not_held" | "gave_up"
 *     | "failed", rc
 *   queue:waiting(), queue:value(), queue:entry(), queue:owner_id(), queue:step(),
 *   queue:id(), queue:inflight()
 *
 * Contract (delivery, SUSPENDED, LOST, stop): src/recipes/locking_queue.h; this file only
 * converts.  lua/zklua/recipes/queue.lua puts, waits, times out and raises; the notify event
 * ZKL_LOCKING_QUEUE_NOTIFY_LOST (target queue:id()) reaches the Lua object; no Lua is called
 * from C.  The userdata keeps its session's userdata as a user value; once the session is
 * closed the queue is told to forget it.  Collecting the userdata frees the queue with
 * zkl_locking_queue_free() (a get under way is abandoned, its claim dropped).
 */
#include <errno.h>

#include "../recipes/locking_queue.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_locking_queue_forget_session(obj); }
static void free_queue(void *obj) { zkl_locking_queue_free(obj); }

static const zkl_recipe_type LQ_TYPE = {"zklua.core.LockingQueue", "locking queue",
                                        forget_session, free_queue};

static zkl_locking_queue *check_lq(lua_State *L)
{
    return zkl_recipe_check(L, &LQ_TYPE)->obj;
}

/* core.locking_queue(session, path, acl) */
static int lq_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    const struct ACL_vector *acl = zkl_opt_acl_list(L, 3, "acl");
    zkl_recipe_box *box = zkl_recipe_box_new(L, &LQ_TYPE, sizeof *box);
    return zkl_recipe_box_set(L, &LQ_TYPE, box, zkl_locking_queue_new(*slot, path, acl), slot);
}

/* true, or nil and why it could not start */
static int started(lua_State *L, int r)
{
    if (r != 0 && errno == ENOENT) {
        lua_pushnil(L);
        lua_pushliteral(L, "not holding");
        return 2;
    }
    return zkl_recipe_started(L, r, "holding");
}

static int lq_get(lua_State *L) { return started(L, zkl_locking_queue_get(check_lq(L))); }
static int lq_consume(lua_State *L) { return started(L, zkl_locking_queue_consume(check_lq(L))); }
static int lq_release(lua_State *L) { return started(L, zkl_locking_queue_release(check_lq(L))); }

ZKL_RECIPE_VOID(lq_give_up, check_lq, zkl_locking_queue_give_up)
ZKL_RECIPE_NAME(lq_phase, check_lq, zkl_locking_queue_phase_of, zkl_locking_queue_phase_names)

static int lq_outcome(lua_State *L)
{
    int rc;
    zkl_locking_queue_outcome o = zkl_locking_queue_outcome_of(check_lq(L), &rc);
    lua_pushstring(L, zkl_locking_queue_outcome_names[o]);
    lua_pushinteger(L, rc);
    return 2;
}

ZKL_RECIPE_BOOLEAN(lq_waiting, check_lq, zkl_locking_queue_waiting)

static int lq_value(lua_State *L)
{
    int len;
    const char *value = zkl_locking_queue_value(check_lq(L), &len);
    lua_pushlstring(L, value, (size_t)len);
    return 1;
}

static int lq_entry(lua_State *L)
{
    const char *entry = zkl_locking_queue_entry(check_lq(L));
    if (!entry)
        return 0;
    lua_pushstring(L, entry);
    return 1;
}

ZKL_RECIPE_STRING(lq_owner_id, check_lq, zkl_locking_queue_owner_id)
ZKL_RECIPE_STRING(lq_step, check_lq, zkl_locking_queue_step)
ZKL_RECIPE_INTEGER(lq_id, check_lq, zkl_locking_queue_id)
ZKL_RECIPE_INTEGER(lq_inflight, check_lq, zkl_locking_queue_inflight)

static const luaL_Reg lq_methods[] = {
    {"get", lq_get},         {"consume", lq_consume},   {"release", lq_release},
    {"give_up", lq_give_up}, {"phase", lq_phase},       {"outcome", lq_outcome},
    {"waiting", lq_waiting}, {"value", lq_value},       {"entry", lq_entry},
    {"owner_id", lq_owner_id}, {"step", lq_step},       {"id", lq_id},
    {"inflight", lq_inflight}, {NULL, NULL},
};

void zkl_register_locking_queue(lua_State *L)
{
    zkl_recipe_register(L, &LQ_TYPE, lq_methods, "locking_queue", lq_new);
}
