/*
 * allocator_binding.h — registers the zklua.core allocator userdata and its JSON helpers
 * (see allocator_binding.c).
 */
#ifndef ZKL_ALLOCATOR_BINDING_H
#define ZKL_ALLOCATOR_BINDING_H

#include "compat.h"

/* Adds core.allocator and the allocator_* helpers to the module table on top of the stack. */
void zkl_register_allocator(lua_State *L);

#endif
