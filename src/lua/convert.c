/*
 * convert.c — see convert.h.
 */
#include "convert.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <zookeeper/proto.h>

static const char STAT_METATABLE[] = "zklua.Stat";

void zkl_push_session_id(lua_State *L, int64_t id)
{
    char buf[24];
    snprintf(buf, sizeof buf, "0x%" PRIx64, (uint64_t)id);
    lua_pushstring(L, buf);
}

static void set_int(lua_State *L, const char *name, int64_t v)
{
    lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, name);
}

void zkl_push_stat(lua_State *L, const struct Stat *st)
{
    lua_createtable(L, 0, 12);
    set_int(L, "czxid", st->czxid);
    set_int(L, "mzxid", st->mzxid);
    set_int(L, "pzxid", st->pzxid);
    set_int(L, "ctime", st->ctime);
    set_int(L, "mtime", st->mtime);
    set_int(L, "version", st->version);
    set_int(L, "cversion", st->cversion);
    set_int(L, "aversion", st->aversion);
    set_int(L, "ephemeralOwner", st->ephemeralOwner);
    set_int(L, "dataLength", st->dataLength);
    set_int(L, "numChildren", st->numChildren);
    if (st->ephemeralOwner != 0) {
        /* exact even where Lua numbers are doubles */
        zkl_push_session_id(L, st->ephemeralOwner);
        lua_setfield(L, -2, "owner_session_id");
    }
    luaL_getmetatable(L, STAT_METATABLE);
    lua_setmetatable(L, -2);
}

/* kazoo's names for the stat fields, read from ZooKeeper's. */
static int stat_index(lua_State *L)
{
    static const struct {
        const char *alias, *field;
        int ms_to_s;
    } aliases[] = {
        {"creation_transaction_id", "czxid", 0},
        {"last_modified_transaction_id", "mzxid", 0},
        {"created", "ctime", 1},
        {"last_modified", "mtime", 1},
        {"acl_version", "aversion", 0},
        {"children_version", "cversion", 0},
        {"data_length", "dataLength", 0},
        {"children_count", "numChildren", 0},
    };
    const char *key = lua_tostring(L, 2);
    if (!key || lua_type(L, 2) != LUA_TSTRING)
        return 0;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (strcmp(key, aliases[i].alias) == 0) {
            lua_getfield(L, 1, aliases[i].field);
            if (aliases[i].ms_to_s)
                lua_pushnumber(L, lua_tonumber(L, -1) / 1000.0);
            return 1;
        }
    }
    return 0;
}

void zkl_register_stat_metatable(lua_State *L)
{
    if (luaL_newmetatable(L, STAT_METATABLE)) {
        lua_pushcfunction(L, stat_index);
        lua_setfield(L, -2, "__index");
        lua_pushstring(L, "ZnodeStat");
        lua_setfield(L, -2, "__name");
    }
    lua_pop(L, 1);
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
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0 || lua_tointeger(L, -1) > 31)
        luaL_error(L, "%s[%d].perms must be an integer from 0 to 31", what, n);
    acl->perms = (int32_t)lua_tointeger(L, -1);
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
    int n = (int)lua_rawlen(L, idx);
    if (n == 0)
        luaL_error(L, "%s must not be empty", what);
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
