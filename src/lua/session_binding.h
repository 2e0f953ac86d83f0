/* session_binding.h — registers the session type and core.session() in the module table. */
#ifndef ZKL_SESSION_BINDING_H
#define ZKL_SESSION_BINDING_H

#include "compat.h"

void zkl_register_session(lua_State *L); /* the module table is on top of the stack */

#endif
