/* session_binding.h — the session userdata's slot, which recipe bindings look at before they
 * touch the session (its registration, with every other, is in bindings.h). */
#ifndef ZKL_SESSION_BINDING_H
#define ZKL_SESSION_BINDING_H

#include "../core/session.h"
#include "bindings.h"

/* Where the session userdata at idx keeps its session (raises if idx is not one): the slot
 * reads NULL once that session is closed, and stays valid while the userdata lives.  Recipe
 * bindings keep the userdata as a user value and look here before touching the session. */
zkl_session *const *zkl_lua_session_slot(lua_State *L, int idx);

#endif
