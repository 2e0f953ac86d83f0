/* strategy_binding.h — registers core.strategy() and core.strategy_hash() (the C built-in
 * partition strategies of src/recipes/strategy.h). */
#ifndef ZKL_STRATEGY_BINDING_H
#define ZKL_STRATEGY_BINDING_H

#include "compat.h"

void zkl_register_strategies(lua_State *L); /* the module table is on top of the stack */

#endif
