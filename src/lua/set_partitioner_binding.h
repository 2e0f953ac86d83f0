/* set_partitioner_binding.h — registers the set partitioner type, core.set_partitioner(),
 * and core.host_fqdn() / core.getpid() (kazoo's default member identifier). */
#ifndef ZKL_SET_PARTITIONER_BINDING_H
#define ZKL_SET_PARTITIONER_BINDING_H

#include "compat.h"

void zkl_register_set_partitioner(lua_State *L); /* the module table is on top of the stack */

#endif
