/*
 * patient_children_binding.c — the zklua.core patient-children userdata: a thin wrapper over
 * src/recipes/patient_children.c.
 *
 *   core.patient_children(session, path, boundary_s) -> watch
 *   watch:start() -> true, or nil and "busy" | "closed"
 *   watch:phase() -> "idle" | "settling" | "settled"
 *   watch:rc(), watch:children() -> {name, ...} (the settled round's, sorted),
 *   watch:changed_at(), watch:changes(), watch:id(), watch:inflight()
 *
 * The logic is in patient_children.c; lua/zklua/recipes/patient_children.lua turns its notify
 * events (SETTLED 2, CHANGED 3, FAILED 4, target watch:id()) into futures; no Lua is called
 * from C.  Contract (SUSPENDED, LOST, stop): src/recipes/patient_children.h.  The userdata
 * keeps its session's userdata as a user value; once the session is closed the watch is told to
 * forget it.  Collecting the userdata frees the watch with zkl_patient_free().
 */
#include "../recipes/patient_children.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_patient_forget_session(obj); }
static void free_patient(void *obj) { zkl_patient_free(obj); }

static const zkl_recipe_type PATIENT_TYPE = {"zklua.core.PatientChildrenWatch",
                                             "patient children watch", forget_session,
                                             free_patient};

static zkl_patient *check_patient(lua_State *L)
{
    return zkl_recipe_check(L, &PATIENT_TYPE)->obj;
}

/* core.patient_children(session, path, boundary_s) */
static int patient_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    long ms = zkl_check_ms(L, 3, 2e6, "time boundary");
    zkl_recipe_box *box = zkl_recipe_box_new(L, &PATIENT_TYPE, sizeof *box);
    return zkl_recipe_box_set(L, &PATIENT_TYPE, box, zkl_patient_new(*slot, path, ms), slot);
}

static int patient_start(lua_State *L)
{
    return zkl_recipe_started(L, zkl_patient_start(check_patient(L)), NULL);
}

ZKL_RECIPE_NAME(patient_phase, check_patient, zkl_patient_phase_of, zkl_patient_phase_names)
ZKL_RECIPE_INTEGER(patient_rc, check_patient, zkl_patient_rc)

static int patient_children(lua_State *L)
{
    int count;
    const char *const *names = zkl_patient_children(check_patient(L), &count);
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int patient_changed_at(lua_State *L)
{
    lua_pushnumber(L, zkl_patient_changed_at(check_patient(L)));
    return 1;
}

ZKL_RECIPE_INTEGER(patient_changes, check_patient, zkl_patient_changes)
ZKL_RECIPE_INTEGER(patient_id, check_patient, zkl_patient_id)
ZKL_RECIPE_INTEGER(patient_inflight, check_patient, zkl_patient_inflight)

static const luaL_Reg patient_methods[] = {
    {"start", patient_start},       {"phase", patient_phase},
    {"rc", patient_rc},             {"children", patient_children},
    {"changed_at", patient_changed_at}, {"changes", patient_changes},
    {"id", patient_id},             {"inflight", patient_inflight},
    {NULL, NULL},
};

void zkl_register_patient_children(lua_State *L)
{
    zkl_recipe_register(L, &PATIENT_TYPE, patient_methods, "patient_children", patient_new);
}
