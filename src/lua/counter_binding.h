/* counter_binding.h — registers the counter type and core.counter(). */
#ifndef ZKL_COUNTER_BINDING_H
#define ZKL_COUNTER_BINDING_H

#include "compat.h"

void zkl_register_counter(lua_State *L); /* the module table is on top of the stack */

#endif
