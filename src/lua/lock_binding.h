/* lock_binding.h — registers the lock type, core.lock() and core.lock_contenders(). */
#ifndef ZKL_LOCK_BINDING_H
#define ZKL_LOCK_BINDING_H

#include "compat.h"

void zkl_register_lock(lua_State *L); /* the module table is on top of the stack */

#endif
