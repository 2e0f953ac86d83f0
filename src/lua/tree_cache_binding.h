/* tree_cache_binding.h — registers the tree cache type and core.tree_cache(). */
#ifndef ZKL_TREE_CACHE_BINDING_H
#define ZKL_TREE_CACHE_BINDING_H

#include "compat.h"

void zkl_register_tree_cache(lua_State *L); /* the module table is on top of the stack */

#endif
