#ifndef ZKL_PATIENT_CHILDREN_BINDING_H
#define ZKL_PATIENT_CHILDREN_BINDING_H

#include "compat.h"

void zkl_register_patient_children(lua_State *L);

#endif
