/*
 * convert.h — between C results and Lua values: stats, ACLs, children, op results.
 */
#ifndef ZKL_LUA_CONVERT_H
#define ZKL_LUA_CONVERT_H

#include "../core/event.h"
#include "compat.h"

/* Pushes a stat: kazoo's ZnodeStat, its eleven values in kazoo's order, every name (ZooKeeper's
 * and kazoo's) read through its metatable (see convert.c). */
void zkl_push_stat(lua_State *L, const struct Stat *stat);
/* Builds the stat metatable in this Lua state; call once when the module opens. */
void zkl_register_stat_metatable(lua_State *L);

/* Reads a list of ACL tables at idx into a vector whose memory belongs to the Lua stack
 * (a userdata pushed on top) and to the ACL tables' strings.  Raises on a malformed entry. */
struct ACL_vector *zkl_check_acl_list(lua_State *L, int idx, const char *what);

/* An optional ACL list: nil (or none) is ZooKeeper's open ACL, as kazoo's default_acl=None,
 * and costs nothing to convert; anything else goes through zkl_check_acl_list. */
struct ACL_vector *zkl_opt_acl_list(lua_State *L, int idx, const char *what);

/* Pushes the values an op event resolves to; returns how many. */
int zkl_push_op_results(lua_State *L, const zkl_event *ev);

const char *zkl_event_type_name(int type);
const char *zkl_state_name(zkl_state state);
const char *zkl_client_state_name(zkl_client_state state);
const char *zkl_keeper_state_name(int zk_state);

/* A 64-bit id (zxid, fencing token, session id, ephemeral owner), exact: an integer under Lua 5.4; under
 * LuaJIT (numbers are doubles) a number while |v| <= 2^53 and an int64_t cdata beyond. */
void zkl_push_int64(lua_State *L, int64_t v);
/* Prepares zkl_push_int64 in this Lua state; call once when the module opens. */
void zkl_register_int64(lua_State *L);

/* Seconds to milliseconds, the one conversion of the binding.  zkl_opt_timeout_ms: a wait's
 * timeout at idx: nil or none -1 (no end), <= 0 0, at most 2e9 ms; NaN raises.
 * zkl_check_ms: a duration at idx in 0 .. max_s seconds (NaN refused), raising "<what> out
 * of range" otherwise; rounded to the nearest ms. */
int zkl_opt_timeout_ms(lua_State *L, int idx);
long zkl_check_ms(lua_State *L, int idx, double max_s, const char *what);

#endif
