/* lease_binding.h — registers the lease type, core.lease() and its helpers. */
#ifndef ZKL_LEASE_BINDING_H
#define ZKL_LEASE_BINDING_H

#include "compat.h"

void zkl_register_lease(lua_State *L); /* the module table is on top of the stack */

#endif
