/* queue_binding.h — registers core.item_queue() and core.locking_queue(). */
#ifndef ZKL_QUEUE_BINDING_H
#define ZKL_QUEUE_BINDING_H

#include "compat.h"

void zkl_register_item_queue(lua_State *L);    /* the module table is on top of the stack */
void zkl_register_locking_queue(lua_State *L); /* locking_queue_binding.c */

#endif
