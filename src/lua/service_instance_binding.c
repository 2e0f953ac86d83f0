/*
 * service_instance_binding.c — Curator's ServiceInstance bytes (src/recipes/service_instance.h)
 * as zklua.core functions; lua/zklua/recipes/service_discovery.lua checks what the user gave
 * and raises BadArgumentsError with what these return.
 *
 *   core.service_instance_encode(t, with_enabled) -> the znode's bytes; or nil, field, message
 *     t: {name =, id =, address =, port =, ssl_port =, payload = (a string) | payload_json =
 *        (JSON text), registration_time_utc = (ms), service_type = "DYNAMIC" | ...,
 *        uri_spec = "{scheme}://...", enabled = true|false}; nil members are null
 *   core.service_instance_decode(bytes) -> the same table (payload when the payload is a JSON
 *     string, else payload_json: its JSON text; so it encodes back to the same bytes); or
 *     nil, message
 *   core.service_instance_id() -> a random id as Curator's builder makes one (Java's
 *     UUID.randomUUID().toString(): 8-4-4-4-12 lowercase hex digits)
 *
 * Nothing here keeps state; SUSPENDED and LOST do not apply (no session).
 */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../recipes/common.h"
#include "../recipes/json.h"
#include "../recipes/service_instance.h"
#include "bindings.h"

/* Pushes nil, field, message; returns 3. */
static int bad_field(lua_State *L, const char *field, const char *message)
{
    lua_pushnil(L);
    lua_pushstring(L, field);
    lua_pushfstring(L, "%s %s", field, message);
    return 3;
}

/* t[field] as a string (NULL when nil); *bad set when it is something else. */
static const char *opt_string(lua_State *L, const char *field, int *bad)
{
    lua_getfield(L, 1, field);
    int type = lua_type(L, -1);
    lua_pop(L, 1);
    if (type == LUA_TNIL)
        return NULL;
    if (type != LUA_TSTRING) {
        *bad = 1;
        return NULL;
    }
    lua_getfield(L, 1, field); /* the table keeps the string alive */
    const char *s = lua_tostring(L, -1);
    lua_pop(L, 1);
    return s;
}

/* t[field] as a whole number in lo..hi; 0 absent, 1 present, -1 wrong. */
static int opt_whole(lua_State *L, const char *field, double lo, double hi, double *out)
{
    lua_getfield(L, 1, field);
    int type = lua_type(L, -1);
    double v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    if (type == LUA_TNIL)
        return 0;
    if (type != LUA_TNUMBER || v != floor(v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 1;
}

static const char *const STRING_FIELDS[] = {"name", "id", "address", "payload", "payload_json",
                                            "service_type", "uri_spec"};

static int core_encode(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int with_enabled = lua_toboolean(L, 2);
    const char *strings[sizeof STRING_FIELDS / sizeof STRING_FIELDS[0]];
    for (size_t i = 0; i < sizeof STRING_FIELDS / sizeof STRING_FIELDS[0]; i++) {
        int bad = 0;
        strings[i] = opt_string(L, STRING_FIELDS[i], &bad);
        if (bad)
            return bad_field(L, STRING_FIELDS[i], "must be a string or nil");
    }
    zkl_service_instance in;
    memset(&in, 0, sizeof in);
    in.name = (char *)strings[0];
    in.id = (char *)strings[1];
    in.address = (char *)strings[2];
    in.uri_spec = (char *)strings[6];
    double v = 0;
    int has = opt_whole(L, "port", 0, 65535, &v);
    if (has < 0)
        return bad_field(L, "port", "must be a whole number in 0..65535 or nil");
    in.has_port = has;
    in.port = (int32_t)v;
    has = opt_whole(L, "ssl_port", 0, 65535, &v);
    if (has < 0)
        return bad_field(L, "ssl_port", "must be a whole number in 0..65535 or nil");
    in.has_ssl_port = has;
    in.ssl_port = (int32_t)v;
    if (opt_whole(L, "registration_time_utc", 0, 9007199254740992.0, &v) < 0)
        return bad_field(L, "registration_time_utc", "must be a whole number of ms or nil");
    in.registration_time_utc = (int64_t)v;
    if (strings[5]) {
        int type = zkl_service_type_named(strings[5]);
        if (type < 0)
            return bad_field(L, "service_type",
                             "must be \"DYNAMIC\", \"STATIC\", \"PERMANENT\" or "
                             "\"DYNAMIC_SEQUENTIAL\"");
        in.service_type = (zkl_service_type)type;
    }
    lua_getfield(L, 1, "enabled");
    int enabled_type = lua_type(L, -1);
    in.enabled = enabled_type == LUA_TNIL || lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (enabled_type != LUA_TNIL && enabled_type != LUA_TBOOLEAN)
        return bad_field(L, "enabled", "must be a boolean or nil");
    if (strings[3] && strings[4])
        return bad_field(L, "payload", "and payload_json cannot both be given");
    zkl_json_buf quoted;
    zkl_json_buf_init(&quoted);
    if (strings[3]) {
        size_t len;
        lua_getfield(L, 1, "payload");
        const char *payload = lua_tolstring(L, -1, &len);
        int rc = zkl_json_buf_string_jackson(&quoted, payload, len);
        lua_pop(L, 1);
        if (rc != 0 || quoted.failed) {
            zkl_json_buf_free(&quoted);
            return bad_field(L, "payload", rc != 0 ? "must be UTF-8" : "is too big (no memory)");
        }
        in.payload_json = quoted.data;
    } else {
        in.payload_json = (char *)strings[4];
    }
    size_t len;
    const char *error = NULL;
    char *bytes = zkl_service_instance_encode(&in, with_enabled, &len, &error);
    zkl_json_buf_free(&quoted);
    if (!bytes) {
        const char *field = strncmp(error, "uriSpec", 7) == 0 ? "uri_spec" : "payload_json";
        lua_pushnil(L);
        lua_pushstring(L, field);
        lua_pushstring(L, error);
        return 3;
    }
    lua_pushlstring(L, bytes, len);
    free(bytes);
    return 1;
}

static void set_string(lua_State *L, const char *field, const char *s)
{
    if (!s)
        return;
    lua_pushstring(L, s);
    lua_setfield(L, -2, field);
}

static void set_integer(lua_State *L, const char *field, int64_t v)
{
    lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, field);
}

/* The payload: a Lua string (payload) when its JSON is a string, else its JSON text
 * (payload_json); nothing when null. */
static void set_payload(lua_State *L, const char *payload_json)
{
    if (!payload_json)
        return;
    if (payload_json[0] == '"') {
        const char *error;
        zkl_json *v = zkl_json_parse(payload_json, strlen(payload_json), &error);
        if (v && v->type == ZKL_JSON_STRING) {
            lua_pushlstring(L, v->string, v->string_len);
            lua_setfield(L, -2, "payload");
            zkl_json_free(v);
            return;
        }
        zkl_json_free(v);
    }
    lua_pushstring(L, payload_json);
    lua_setfield(L, -2, "payload_json");
}

static int core_decode(lua_State *L)
{
    size_t len;
    const char *data = luaL_checklstring(L, 1, &len);
    zkl_service_instance in;
    const char *error = NULL;
    if (zkl_service_instance_decode(data, len, &in, &error) != 0) {
        lua_pushnil(L);
        lua_pushstring(L, error);
        return 2;
    }
    lua_createtable(L, 0, 12);
    set_string(L, "name", in.name);
    set_string(L, "id", in.id);
    set_string(L, "address", in.address);
    if (in.has_port)
        set_integer(L, "port", in.port);
    if (in.has_ssl_port)
        set_integer(L, "ssl_port", in.ssl_port);
    set_payload(L, in.payload_json);
    set_integer(L, "registration_time_utc", in.registration_time_utc);
    if (in.service_type != ZKL_SERVICE_TYPE_NULL)
        set_string(L, "service_type", zkl_service_type_names[in.service_type]);
    set_string(L, "uri_spec", in.uri_spec);
    lua_pushboolean(L, in.enabled);
    lua_setfield(L, -2, "enabled");
    zkl_service_instance_clear(&in);
    return 1;
}

static int core_id(lua_State *L)
{
    char hex[ZKL_UUID_HEX_LEN + 1];
    if (zkl_uuid4_hex(hex) != 0)
        return luaL_error(L, "service_instance_id: cannot read random bytes");
    char id[ZKL_UUID_HEX_LEN + 5];
    snprintf(id, sizeof id, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16,
             hex + 20);
    lua_pushstring(L, id);
    return 1;
}

static const luaL_Reg functions[] = {
    {"service_instance_id", core_id},
    {"service_instance_encode", core_encode},
    {"service_instance_decode", core_decode},
    {NULL, NULL},
};

void zkl_register_service_instance(lua_State *L) { luaL_setfuncs(L, functions, 0); }
