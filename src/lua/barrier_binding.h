/* barrier_binding.h — registers the barrier type and core.barrier(). */
#ifndef ZKL_BARRIER_BINDING_H
#define ZKL_BARRIER_BINDING_H

#include "compat.h"

void zkl_register_barrier(lua_State *L); /* the module table is on top of the stack */

#endif
