/* session_binding.h — registers the session type and core.session() in the module table. */
#ifndef ZKL_SESSION_BINDING_H
#define ZKL_SESSION_BINDING_H

#include "../core/session.h"
#include "compat.h"

void zkl_register_session(lua_State *L); /* the module table is on top of the stack */
/* core.waker(): a session's wake-up socket for hosts that read sockets (waker_binding.c). */
void zkl_register_waker(lua_State *L);

/* Where the session userdata at idx keeps its session (raises if idx is not one): the slot
 * reads NULL once that session is closed, and stays valid while the userdata lives.  Recipe
 * bindings keep the userdata as a user value and look here before touching the session. */
zkl_session *const *zkl_lua_session_slot(lua_State *L, int idx);

#endif
