/*
 * bindings.h — every binding's registration, called once by luaopen_zklua_core (module.c)
 * with the module table on top of the stack; each adds its types and functions to it.
 *
 * A recipe's contract is in its C header (src/recipes/<recipe>.h); the binding file's
 * opening comment lists its Lua calls only.  docs/adding-a-recipe.md says where a new one
 * goes.
 */
#ifndef ZKL_LUA_BINDINGS_H
#define ZKL_LUA_BINDINGS_H

#include "compat.h"

/* The client's own types (session_binding.c, waker_binding.c) and helpers. */
void zkl_register_session(lua_State *L);   /* core.session() */
void zkl_register_waker(lua_State *L);     /* core.waker(): a session's wake-up socket */
void zkl_register_host(lua_State *L);      /* core.hostname, host_fqdn, getpid, utcnow */
void zkl_register_constants(lua_State *L); /* core.codes, core.notify, core.names */

/* The recipes, one binding file each (<recipe>_binding.c). */
void zkl_register_lock(lua_State *L);             /* core.lock(), core.lock_contenders() */
void zkl_register_counter(lua_State *L);          /* core.counter() */
void zkl_register_party(lua_State *L);            /* core.party() */
void zkl_register_barrier(lua_State *L);          /* core.barrier() */
void zkl_register_semaphore(lua_State *L);        /* core.semaphore() */
void zkl_register_lease(lua_State *L);            /* core.lease(), core.utf8_valid() */
void zkl_register_patient_children(lua_State *L); /* core.patient_children() */
void zkl_register_item_queue(lua_State *L);       /* core.item_queue() (queue_binding.c) */
void zkl_register_locking_queue(lua_State *L);    /* core.locking_queue() */
void zkl_register_allocator(lua_State *L);        /* core.allocator() and its JSON helpers */
void zkl_register_strategies(lua_State *L);       /* core.strategy(), core.strategy_hash() */
void zkl_register_tree_cache(lua_State *L);       /* core.tree_cache() */
void zkl_register_set_partitioner(lua_State *L);  /* core.set_partitioner() */
void zkl_register_service_instance(lua_State *L); /* core.service_instance_encode/decode() */
void zkl_register_persistent_node(lua_State *L);  /* core.persistent_node() */
void zkl_register_ttl_toucher(lua_State *L);      /* core.ttl_toucher() */

/* The names the binding gives each recipe's enums, in enum order (constants.c, which checks
 * their counts at compile time and exports them as core.names). */
extern const char *const zkl_lock_phase_names[], *const zkl_lock_outcome_names[];
extern const char *const zkl_semaphore_phase_names[], *const zkl_semaphore_outcome_names[];
extern const char *const zkl_party_phase_names[];
extern const char *const zkl_pnode_phase_names[];
extern const char *const zkl_barrier_outcome_names[];
extern const char *const zkl_counter_outcome_names[];
extern const char *const zkl_lease_phase_names[], *const zkl_lease_outcome_names[];
extern const char *const zkl_locking_queue_phase_names[], *const zkl_locking_queue_outcome_names[];
extern const char *const zkl_item_queue_phase_names[], *const zkl_item_queue_outcome_names[];
extern const char *const zkl_patient_phase_names[];
extern const char *const zkl_allocator_phase_names[];
extern const char *const zkl_sp_state_names[], *const zkl_sp_failure_names[];
extern const char *const zkl_tree_cache_phase_names[], *const zkl_tree_event_names[];

#endif
