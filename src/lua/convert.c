/*
 * convert.c — see convert.h.
 */
#include "convert.h"

#include <string.h>

#include <zookeeper/proto.h>

#if LUA_VERSION_NUM >= 503
void zkl_push_int64(lua_State *L, int64_t v)
{
    lua_pushinteger(L, (lua_Integer)v);
}

void zkl_register_int64(lua_State *L)
{
    (void)L;
}
#else
/*
 * LuaJIT: the C API has no 64-bit integer and cannot make cdata, so an id beyond 2^53 (where
 * doubles skip integers) is rebuilt in Lua by the FFI from its two exact 32-bit halves.
 * Zxids beyond 2^53 need a leader epoch of 2^21 or more: numbers are the rule, cdata the
 * exact exception (it compares and adds with numbers; string.format("%d") prints it).
 */
static const char INT64_CONSTRUCTOR[] =
    "local int64 = require('ffi').typeof('int64_t')\n"
    "return function(high, low) return int64(high) * 4294967296 + low end\n";

static const char int64_constructor_key = 0;

enum { EXACT_DOUBLE_LIMIT_BITS = 53 };

void zkl_push_int64(lua_State *L, int64_t v)
{
    const int64_t limit = (int64_t)1 << EXACT_DOUBLE_LIMIT_BITS;
    if (v >= -limit && v <= limit) {
        lua_pushnumber(L, (lua_Number)v);
        return;
    }
    lua_pushlightuserdata(L, (void *)&int64_constructor_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    lua_pushnumber(L, (lua_Number)(int32_t)(v >> 32));        /* signed high half */
    lua_pushnumber(L, (lua_Number)(uint32_t)((uint64_t)v & 0xffffffffu)); /* low half */
    lua_call(L, 2, 1);
}

void zkl_register_int64(lua_State *L)
{
    lua_pushlightuserdata(L, (void *)&int64_constructor_key);
    if (luaL_loadbuffer(L, INT64_CONSTRUCTOR, sizeof INT64_CONSTRUCTOR - 1, "=zklua.int64") != 0)
        lua_error(L);
    lua_call(L, 0, 1);
    lua_rawset(L, LUA_REGISTRYINDEX);
}
#endif

/*
 * A stat is kazoo's ZnodeStat, a namedtuple: its eleven values in the array part, in kazoo's
 * order (stat[1] is czxid ... stat[11] pzxid), every name read through the metatable:
 * ZooKeeper's (czxid, version, ...) and kazoo's (acl_version, created, ...).  An array of
 * eleven costs half of a table of eleven named fields to build, and a stat comes with every
 * read, wanted or not; a name costs a metamethod call when read.  owner_session_id (kazoo's
 * ephemeralOwner or None: the same value as the client's session id) is a plain field, set
 * when the node is ephemeral.
 */
static const char STAT_METATABLE[] =
    "local fields = { 'czxid', 'mzxid', 'ctime', 'mtime', 'version', 'cversion', 'aversion',\n"
    "  'ephemeralOwner', 'dataLength', 'numChildren', 'pzxid' }\n"
    "local position = { creation_transaction_id = 1, last_modified_transaction_id = 2,\n"
    "  children_version = 6, acl_version = 7, data_length = 9, children_count = 10 }\n"
    "for i, name in ipairs(fields) do position[name] = i end\n"
    "local rawget, format, concat = rawget, string.format, table.concat\n"
    "local mt = { __name = 'ZnodeStat' }\n"
    "local function asdict(stat)\n"
    "  local t = { owner_session_id = rawget(stat, 'owner_session_id'),\n"
    "    created = stat[3] / 1000, last_modified = stat[4] / 1000 }\n"
    "  for name, i in pairs(position) do t[name] = stat[i] end\n"
    "  return t\n"
    "end\n"
    "function mt.__index(stat, key)\n"
    "  local i = position[key]\n"
    "  if i then return rawget(stat, i) end\n"
    "  if key == 'created' then return stat[3] / 1000 end\n"
    "  if key == 'last_modified' then return stat[4] / 1000 end\n"
    "  if key == 'asdict' then return asdict end\n"
    "end\n"
    "function mt.__pairs(stat)\n" /* Lua 5.4 (LuaJIT ignores __pairs): the names */
    "  return next, asdict(stat), nil\n"
    "end\n"
    "function mt.__tostring(stat)\n"
    "  local parts = {}\n"
    "  for i, name in ipairs(fields) do parts[i] = name .. '=' .. tostring(stat[i]) end\n"
    "  return 'ZnodeStat(' .. concat(parts, ', ') .. ')'\n"
    "end\n"
    "return mt\n";

/* The metatable lives in each Lua state's registry under this address. */
static const char stat_metatable_key = 0;

void zkl_push_stat(lua_State *L, const struct Stat *st)
{
    lua_createtable(L, 11, st->ephemeralOwner != 0);
    zkl_push_int64(L, st->czxid);
    lua_rawseti(L, -2, 1);
    zkl_push_int64(L, st->mzxid);
    lua_rawseti(L, -2, 2);
    zkl_push_int64(L, st->ctime);
    lua_rawseti(L, -2, 3);
    zkl_push_int64(L, st->mtime);
    lua_rawseti(L, -2, 4);
    lua_pushinteger(L, st->version);
    lua_rawseti(L, -2, 5);
    lua_pushinteger(L, st->cversion);
    lua_rawseti(L, -2, 6);
    lua_pushinteger(L, st->aversion);
    lua_rawseti(L, -2, 7);
    zkl_push_int64(L, st->ephemeralOwner);
    lua_rawseti(L, -2, 8);
    lua_pushinteger(L, st->dataLength);
    lua_rawseti(L, -2, 9);
    lua_pushinteger(L, st->numChildren);
    lua_rawseti(L, -2, 10);
    zkl_push_int64(L, st->pzxid);
    lua_rawseti(L, -2, 11);
    if (st->ephemeralOwner != 0) { /* kazoo's owner_session_id: ephemeralOwner or None */
        zkl_push_int64(L, st->ephemeralOwner);
        lua_setfield(L, -2, "owner_session_id");
    }
    lua_pushlightuserdata(L, (void *)&stat_metatable_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    lua_setmetatable(L, -2);
}

void zkl_register_stat_metatable(lua_State *L)
{
    lua_pushlightuserdata(L, (void *)&stat_metatable_key);
    if (luaL_loadbuffer(L, STAT_METATABLE, sizeof STAT_METATABLE - 1, "=zklua.stat") != 0)
        lua_error(L);
    lua_call(L, 0, 1);
    lua_rawset(L, LUA_REGISTRYINDEX);
}

static const char *check_acl_string(lua_State *L, int tbl, const char *key, const char *what,
                                    int n)
{
    lua_getfield(L, tbl, key);
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "%s[%d].%s must be a string", what, n, key);
    const char *s = lua_tostring(L, -1);
    lua_pop(L, 1); /* still referenced by the ACL table */
    return s;
}

/* One ACL entry: {perms=, scheme=, id=} or kazoo's {perms=, id={scheme=, id=}}. */
static void read_acl(lua_State *L, int entry, struct ACL *acl, const char *what, int n)
{
    if (lua_type(L, entry) != LUA_TTABLE)
        luaL_error(L, "%s[%d] must be an ACL table", what, n);
    lua_getfield(L, entry, "perms");
    lua_Number perms = lua_tonumber(L, -1);
    if (lua_type(L, -1) != LUA_TNUMBER || perms != (lua_Number)(int)perms || perms < 0 ||
        perms > 31)
        luaL_error(L, "%s[%d].perms must be an integer from 0 to 31", what, n);
    acl->perms = (int32_t)perms;
    lua_pop(L, 1);
    lua_getfield(L, entry, "id");
    if (lua_type(L, -1) == LUA_TTABLE) {
        int id = lua_gettop(L);
        acl->id.scheme = (char *)check_acl_string(L, id, "scheme", what, n);
        acl->id.id = (char *)check_acl_string(L, id, "id", what, n);
        lua_pop(L, 1);
    } else {
        lua_pop(L, 1);
        acl->id.scheme = (char *)check_acl_string(L, entry, "scheme", what, n);
        acl->id.id = (char *)check_acl_string(L, entry, "id", what, n);
    }
}

struct ACL_vector *zkl_check_acl_list(lua_State *L, int idx, const char *what)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "%s must be a list of ACLs", what);
    int n = (int)lua_rawlen(L, idx); /* empty: the server answers InvalidACL */
    struct ACL_vector *v = lua_newuserdatauv(L, sizeof *v + sizeof(struct ACL) * (size_t)n, 0);
    v->count = n;
    v->data = (struct ACL *)(v + 1);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        read_acl(L, lua_gettop(L), &v->data[i], what, i + 1);
        lua_pop(L, 1);
    }
    return v;
}

struct ACL_vector *zkl_opt_acl_list(lua_State *L, int idx, const char *what)
{
    if (lua_isnoneornil(L, idx))
        return &ZOO_OPEN_ACL_UNSAFE;
    return zkl_check_acl_list(L, idx, what);
}

static void push_strings(lua_State *L, char **strings, int count)
{
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        lua_pushstring(L, strings[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

static void push_acls(lua_State *L, const zkl_acl *acls, int count)
{
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        lua_createtable(L, 0, 2);
        lua_pushinteger(L, acls[i].perms);
        lua_setfield(L, -2, "perms");
        lua_createtable(L, 0, 2);
        lua_pushstring(L, acls[i].scheme);
        lua_setfield(L, -2, "scheme");
        lua_pushstring(L, acls[i].id);
        lua_setfield(L, -2, "id");
        lua_setfield(L, -2, "id");
        lua_rawseti(L, -2, i + 1);
    }
}

/* Two lists: what each op returned (created path, stat, or true) and each op's error code.
 * A failed transaction leaves every value false. */
static int push_multi_results(lua_State *L, const zkl_event *ev)
{
    const zkl_multi *m = ev->multi;
    lua_createtable(L, m->count, 0);
    lua_createtable(L, m->count, 0);
    for (int i = 0; i < m->count; i++) {
        const zoo_op_result_t *r = &m->results[i];
        int err = r->err; /* as the server said: 0 and -2 on a failed one mean rolled back */
        lua_pushinteger(L, err);
        lua_rawseti(L, -2, i + 1);
        if (ev->rc != ZOK || err != ZOK)
            lua_pushboolean(L, 0);
        else if (m->ops[i].type == ZOO_CREATE_OP)
            lua_pushstring(L, m->path_bufs[i]);
        else if (m->ops[i].type == ZOO_SETDATA_OP)
            zkl_push_stat(L, &m->stats[i]);
        else
            lua_pushboolean(L, 1);
        lua_rawseti(L, -3, i + 1);
    }
    return 2;
}

int zkl_push_op_results(lua_State *L, const zkl_event *ev)
{
    switch (ev->op) {
    case ZKL_OP_CREATE:
        lua_pushlstring(L, ev->data ? ev->data : "", (size_t)ev->data_len);
        if (!ev->has_stat)
            return 1;
        zkl_push_stat(L, &ev->stat);
        return 2;
    case ZKL_OP_SYNC:
        lua_pushlstring(L, ev->data ? ev->data : "", (size_t)ev->data_len);
        return 1;
    case ZKL_OP_GET:
    case ZKL_OP_RECONFIG:
        if (ev->data_null)
            lua_pushnil(L); /* ZooKeeper's null value, as kazoo's None */
        else
            lua_pushlstring(L, ev->data ? ev->data : "", (size_t)ev->data_len);
        zkl_push_stat(L, &ev->stat);
        return 2;
    case ZKL_OP_EXISTS:
        if (ev->has_stat)
            zkl_push_stat(L, &ev->stat);
        else
            lua_pushnil(L);
        return 1;
    case ZKL_OP_SET:
        zkl_push_stat(L, &ev->stat);
        return 1;
    case ZKL_OP_CHILDREN:
        push_strings(L, ev->strings, ev->string_count);
        zkl_push_stat(L, &ev->stat);
        return 2;
    case ZKL_OP_GET_ACL:
        push_acls(L, ev->acls, ev->acl_count);
        zkl_push_stat(L, &ev->stat);
        return 2;
    case ZKL_OP_MULTI:
        return push_multi_results(L, ev);
    case ZKL_OP_DELETE:
    case ZKL_OP_SET_ACL:
    case ZKL_OP_AUTH:
        lua_pushboolean(L, 1);
        return 1;
    }
    return 0;
}

const char *zkl_event_type_name(int type)
{
    if (type == ZOO_CREATED_EVENT)
        return "CREATED";
    if (type == ZOO_DELETED_EVENT)
        return "DELETED";
    if (type == ZOO_CHANGED_EVENT)
        return "CHANGED";
    if (type == ZOO_CHILD_EVENT)
        return "CHILD";
    return "NONE";
}

const char *zkl_state_name(zkl_state state)
{
    switch (state) {
    case ZKL_CONNECTED:
        return "CONNECTED";
    case ZKL_SUSPENDED:
        return "SUSPENDED";
    case ZKL_LOST:
        break;
    }
    return "LOST";
}

const char *zkl_client_state_name(zkl_client_state state)
{
    static const char *const names[] = {"CONNECTING",      "CONNECTED",   "CONNECTED_RO",
                                        "EXPIRED_SESSION", "AUTH_FAILED", "CLOSED"};
    return names[state];
}

const char *zkl_keeper_state_name(int st)
{
    if (st == ZOO_CONNECTED_STATE)
        return "CONNECTED";
    if (st == ZOO_READONLY_STATE)
        return "CONNECTED_RO";
    if (st == ZOO_EXPIRED_SESSION_STATE)
        return "EXPIRED_SESSION";
    if (st == ZOO_AUTH_FAILED_STATE)
        return "AUTH_FAILED";
    return "CONNECTING";
}

int zkl_opt_timeout_ms(lua_State *L, int idx)
{
    if (lua_isnoneornil(L, idx))
        return -1;
    lua_Number t = luaL_checknumber(L, idx);
    if (t != t)
        return luaL_argerror(L, idx, "timeout is NaN");
    return t <= 0 ? 0 : t > 2e6 ? 2000000000 : (int)(t * 1000 + 0.5);
}

long zkl_check_ms(lua_State *L, int idx, double max_s, const char *what)
{
    lua_Number t = luaL_checknumber(L, idx);
    if (!(t >= 0 && t <= max_s)) /* also refuses NaN */
        luaL_argerror(L, idx, lua_pushfstring(L, "%s out of range", what));
    return (long)(t * 1000 + 0.5);
}
