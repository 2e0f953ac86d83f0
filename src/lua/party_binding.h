/* party_binding.h — registers the party type and core.party(). */
#ifndef ZKL_PARTY_BINDING_H
#define ZKL_PARTY_BINDING_H

#include "compat.h"

void zkl_register_party(lua_State *L); /* the module table is on top of the stack */

#endif
