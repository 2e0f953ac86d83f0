/*
 * queue_binding.c — the zklua.core item-queue userdata (the taking side of kazoo's Queue): a
 * thin wrapper over src/recipes/item_queue.c.
 *
 *   core.item_queue(session, path) -> queue
 *   queue:get() -> true, or nil and "busy" | "closed"      (starts a get)
 *   queue:phase() -> "idle" | "getting"
 *   queue:outcome() -> "pending" | "got" | "empty" | "failed", rc
 *   queue:value() -> the value got (binary string), queue:entry(), queue:ambiguous(),
 *   queue:step(), queue:inflight()
 *
 * Contract (delivery, SUSPENDED, LOST, stop): src/recipes/item_queue.h; this file only
 * converts.  lua/zklua/recipes/queue.lua puts, waits and raises.  The userdata keeps its
 * session's userdata as a user value; once the session is closed the queue is told to forget
 * it.  Collecting the userdata frees the queue with zkl_item_queue_free().
 */
#include "../recipes/item_queue.h"
#include "bindings.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_item_queue_forget_session(obj); }
static void free_queue(void *obj) { zkl_item_queue_free(obj); }

static const zkl_recipe_type QUEUE_TYPE = {"zklua.core.Queue", "queue", forget_session,
                                           free_queue};

static zkl_item_queue *check_queue(lua_State *L)
{
    return zkl_recipe_check(L, &QUEUE_TYPE)->obj;
}

/* core.item_queue(session, path) */
static int queue_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    zkl_recipe_box *box = zkl_recipe_box_new(L, &QUEUE_TYPE, sizeof *box);
    return zkl_recipe_box_set(L, &QUEUE_TYPE, box, zkl_item_queue_new(*slot, path), slot);
}

static int queue_get(lua_State *L)
{
    return zkl_recipe_started(L, zkl_item_queue_get(check_queue(L)), NULL);
}

ZKL_RECIPE_NAME(queue_phase, check_queue, zkl_item_queue_phase_of, zkl_item_queue_phase_names)

static int queue_outcome(lua_State *L)
{
    int rc;
    zkl_item_queue_outcome o = zkl_item_queue_outcome_of(check_queue(L), &rc);
    lua_pushstring(L, zkl_item_queue_outcome_names[o]);
    lua_pushinteger(L, rc);
    return 2;
}

static int queue_value(lua_State *L)
{
    int len;
    const char *value = zkl_item_queue_value(check_queue(L), &len);
    lua_pushlstring(L, value, (size_t)len);
    return 1;
}

static int queue_entry(lua_State *L)
{
    const char *entry = zkl_item_queue_entry(check_queue(L));
    if (!entry)
        return 0;
    lua_pushstring(L, entry);
    return 1;
}

ZKL_RECIPE_BOOLEAN(queue_ambiguous, check_queue, zkl_item_queue_ambiguous)
ZKL_RECIPE_STRING(queue_step, check_queue, zkl_item_queue_step)
ZKL_RECIPE_INTEGER(queue_inflight, check_queue, zkl_item_queue_inflight)

static const luaL_Reg queue_methods[] = {
    {"get", queue_get},     {"phase", queue_phase},         {"outcome", queue_outcome},
    {"value", queue_value}, {"entry", queue_entry},         {"ambiguous", queue_ambiguous},
    {"step", queue_step},   {"inflight", queue_inflight},   {NULL, NULL},
};

void zkl_register_item_queue(lua_State *L)
{
    zkl_recipe_register(L, &QUEUE_TYPE, queue_methods, "item_queue", queue_new);
}
