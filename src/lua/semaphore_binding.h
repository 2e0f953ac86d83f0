/* semaphore_binding.h — registers the semaphore type and core.semaphore(). */
#ifndef ZKL_SEMAPHORE_BINDING_H
#define ZKL_SEMAPHORE_BINDING_H

#include "compat.h"

void zkl_register_semaphore(lua_State *L); /* the module table is on top of the stack */

#endif
