/*
 * session_binding.c — the zklua.core session userdata: a thin wrapper over src/core.
 *
 * The Lua client (lua/zklua/client.lua) checks every argument and turns results into futures,
 * error objects and callbacks; this file only converts values and guards the C core against
 * wrong types, so that nothing a script does can crash the process.  Op methods return the
 * op id; s:next() returns one event as plain values:
 *   "op",    id, rc, watch_dropped, results...   (see zkl_push_op_results)
 *   "watch", id, type, state, path
 *   "state", state, client_state
 *   "notify", target, code                    (a C recipe's news for its Lua object)
 *   "log",   level, text                      (a libzookeeper line, see core/log.h)
 * s:await(id) returns op id's event the same way once nothing else comes before it.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/ops.h"
#include "../core/sasl.h"
#include "../core/session.h"
#include "convert.h"
#include "session_binding.h"

static const char SESSION_METATABLE[] = "zklua.core.Session";
static const char MULTI_HOLDER_METATABLE[] = "zklua.core.MultiHolder";

typedef struct {
    zkl_session *session; /* NULL once closed */
} session_box;

/* The session metatable is also in the registry under this address: checking a session
 * against it costs no string, where luaL_checkudata interns its type name on every call under
 * LuaJIT (~100 instructions per session method call; Lua 5.4 caches C strings). */
static const char session_metatable_key = 0;

/* Every session method has the string "op" as its upvalue: an op's event starts with it, and
 * a string pushed from C is interned on every push under LuaJIT (~100 instructions). */
#define OP_KIND lua_upvalueindex(1)

static zkl_session *check_session(lua_State *L)
{
    session_box *box = lua_touserdata(L, 1);
    int same = 0;
    if (box && lua_getmetatable(L, 1)) {
        lua_pushlightuserdata(L, (void *)&session_metatable_key);
        lua_rawget(L, LUA_REGISTRYINDEX);
        same = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
    }
    if (!same)
        box = luaL_checkudata(L, 1, SESSION_METATABLE); /* raises its usual error */
    if (!box->session)
        luaL_error(L, "the session is closed");
    return box->session;
}

zkl_session *const *zkl_lua_session_slot(lua_State *L, int idx)
{
    session_box *box = luaL_checkudata(L, idx, SESSION_METATABLE);
    return &box->session;
}

static int optional_int(lua_State *L, int idx, int fallback)
{
    return (int)luaL_optinteger(L, idx, fallback);
}

/* A value argument: nil is ZooKeeper's null value (NULL, length -1); the length fits a
 * ZooKeeper buffer. */
static const char *check_value(lua_State *L, int idx, int *len)
{
    if (lua_isnoneornil(L, idx)) {
        *len = -1;
        return NULL;
    }
    size_t n = 0;
    const char *v = luaL_checklstring(L, idx, &n);
    if (n > 0x7fffffff)
        luaL_argerror(L, idx, "value too large");
    *len = (int)n;
    return v;
}

static int push_op_id(lua_State *L, uint64_t id)
{
    if (id == 0)
        return luaL_error(L, "out of memory");
    lua_pushinteger(L, (lua_Integer)id);
    return 1;
}

/* session(hosts, timeout_ms, read_only [, session_id_hex, passwd [, log_level [, tls_cert
 *         [, sasl]]]])
 * tls_cert: zookeeper_init_ssl's "ca,cert,key[,password]" (checked by core.tls_check first);
 * sasl: {mechanism, service, host (or nil), username, password} (zklua.sasl checks them) */
static int session_new(lua_State *L)
{
    zkl_session_options o;
    memset(&o, 0, sizeof o);
    o.hosts = luaL_checkstring(L, 1);
    o.timeout_ms = (int)luaL_checkinteger(L, 2);
    o.read_only = lua_toboolean(L, 3);
    if (!lua_isnoneornil(L, 4)) {
        const char *hex = luaL_checkstring(L, 4);
        size_t plen;
        const char *pw = luaL_checklstring(L, 5, &plen);
        char *end;
        errno = 0;
        o.session_id = (int64_t)strtoull(hex, &end, 16);
        if (errno || *end || plen != sizeof o.passwd)
            return luaL_argerror(L, 4, "session id must be hex and the password 16 bytes");
        memcpy(o.passwd, pw, sizeof o.passwd);
        o.resume = 1;
    }
    o.log_level = (int)luaL_optinteger(L, 6, 0);
    if (o.log_level < 0 || o.log_level > 4)
        return luaL_argerror(L, 6, "log level must be 0 (none) to 4 (DEBUG)");
    o.tls_cert = luaL_optstring(L, 7, NULL);
#ifndef ZKL_HAVE_TLS
    if (o.tls_cert)
        return luaL_argerror(L, 7, "this ZooKeeper C client has no TLS");
#endif
    if (!lua_isnoneornil(L, 8)) {
        luaL_checktype(L, 8, LUA_TTABLE);
#ifndef ZKL_HAVE_TLS_SASL
        if (o.tls_cert)
            return luaL_argerror(L, 8, "SASL and TLS together: this C client has no call for both");
#endif
        const char *field[5] = {"mechanism", "service", "host", "username", "password"};
        const char *value[5];
        for (int i = 0; i < 5; i++) {
            lua_getfield(L, 8, field[i]);
            size_t len = 0;
            value[i] = lua_tolstring(L, -1, &len);
            lua_pop(L, 1); /* the table keeps the string */
            if (i != 2 && (!value[i] || strlen(value[i]) != len))
                return luaL_argerror(L, 8, "sasl: mechanism, service, username and password "
                                           "must be strings without NUL bytes");
        }
        char why[256];
        o.sasl = zkl_sasl_new(value[0], value[1], value[2], value[3], value[4], why, sizeof why);
        if (!o.sasl)
            return luaL_error(L, "sasl: %s", why);
    }
    session_box *box = lua_newuserdatauv(L, sizeof *box, 0);
    box->session = NULL;
    luaL_setmetatable(L, SESSION_METATABLE);
    box->session = zkl_session_new(&o);
    if (!box->session)
        return luaL_error(L, "out of memory");
    return 1;
}

static int session_start(lua_State *L)
{
    zkl_session *s = check_session(L);
    if (zkl_session_start(s) != 0) {
        lua_pushnil(L);
        lua_pushstring(L, strerror(errno));
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int session_stop(lua_State *L)
{
    zkl_session_stop(check_session(L));
    return 0;
}

/* set_connection_retry(max_tries, delay, backoff, max_jitter, max_delay [, deadline]): kazoo's
 * connection_retry (checked by zklua.retry before it gets here). */
static int session_set_connection_retry(lua_State *L)
{
    zkl_session *s = check_session(L);
    zkl_reconnect_policy p;
    lua_Integer tries = luaL_checkinteger(L, 2);
    p.max_tries = tries > INT_MAX ? INT_MAX : (int)tries;
    p.delay = luaL_checknumber(L, 3);
    p.backoff = luaL_checknumber(L, 4);
    p.max_jitter = luaL_checknumber(L, 5);
    p.max_delay = luaL_checknumber(L, 6);
    p.deadline = luaL_optnumber(L, 7, -1.0);
    luaL_argcheck(L, p.max_tries >= -1, 2, "max_tries must be >= -1");
    luaL_argcheck(L, p.delay >= 0 && p.backoff >= 0 && p.max_delay >= 0, 3,
                  "delays must be >= 0");
    luaL_argcheck(L, p.max_jitter >= 0 && p.max_jitter <= 1, 5, "max_jitter must be 0..1");
    zkl_session_set_connection_retry(s, &p);
    return 0;
}

/* set_window(n): at most n ops in flight (session.h); checked by the client before here */
static int session_set_window(lua_State *L)
{
    zkl_session *s = check_session(L);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_argcheck(L, n >= 1 && n <= INT_MAX, 2, "the window must be >= 1");
    zkl_session_set_window(s, (int)n);
    return 0;
}

/* window_use() -> ops in flight now, the most there were at once */
static int session_window_use(lua_State *L)
{
    long sent, max_sent;
    zkl_session_window_use(check_session(L), &sent, &max_sent);
    lua_pushinteger(L, sent);
    lua_pushinteger(L, max_sent);
    return 2;
}

/* batch_use() -> multis of batched writes sent, the ops they carried, the ops sent again
 * alone after another op failed their multi (or a server refused a multiRead), multiReads of
 * batched listings sent, the listings they carried (ops.h) */
static int session_batch_use(lua_State *L)
{
    long batches, ops, resent, read_batches, read_ops;
    zkl_session_batch_use(check_session(L), &batches, &ops, &resent, &read_batches, &read_ops);
    lua_pushinteger(L, batches);
    lua_pushinteger(L, ops);
    lua_pushinteger(L, resent);
    lua_pushinteger(L, read_batches);
    lua_pushinteger(L, read_ops);
    return 5;
}

static int session_gave_up_connecting(lua_State *L)
{
    lua_pushboolean(L, zkl_session_gave_up_connecting(check_session(L)));
    return 1;
}

/* session:hold_reconnection(flag): the test harness's hold (reconnect.h) */
static int session_hold_reconnection(lua_State *L)
{
    zkl_session *s = check_session(L);
    luaL_checktype(L, 2, LUA_TBOOLEAN);
    zkl_session_hold_reconnection(s, lua_toboolean(L, 2));
    return 0;
}

/* awaits_kdc() -> true while SASL GSSAPI waits for the KDC's tickets before connecting */
static int session_awaits_kdc(lua_State *L)
{
    lua_pushboolean(L, zkl_session_awaits_kdc(check_session(L)));
    return 1;
}

/* last_tls_failure() -> OpenSSL's reason the last TLS handshake failed, or nil */
static int session_last_tls_failure(lua_State *L)
{
    char reason[256];
    if (zkl_session_last_tls_failure(check_session(L), reason, sizeof reason) != 0)
        return 0;
    lua_pushstring(L, reason);
    return 1;
}

/* last_sasl_failure() -> Cyrus SASL's reason the last SASL exchange failed here, or nil */
static int session_last_sasl_failure(lua_State *L)
{
    char reason[512];
    if (zkl_session_last_sasl_failure(check_session(L), reason, sizeof reason) != 0)
        return 0;
    lua_pushstring(L, reason);
    return 1;
}

static int session_failed_connection_attempts(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)zkl_session_failed_connection_attempts(check_session(L)));
    return 1;
}

static int session_close(lua_State *L)
{
    session_box *box = luaL_checkudata(L, 1, SESSION_METATABLE);
    zkl_session_free(box->session);
    box->session = NULL;
    return 0;
}

static int session_fileno(lua_State *L)
{
    lua_pushinteger(L, zkl_session_fd(check_session(L)));
    return 1;
}

/* wait(timeout_s): true when events wait, false on timeout or interruption. nil waits. */
static int session_wait(lua_State *L)
{
    zkl_session *s = check_session(L);
    lua_pushboolean(L, zkl_session_wait(s, zkl_opt_timeout_ms(L, 2)) > 0);
    return 1;
}

/* Whether a failed transaction was answered by the server (then each op has its own code)
 * or never got there: these codes are about the connection or session, never about an op. */
static int multi_answered_by_server(int rc)
{
    switch (rc) {
    case ZSYSTEMERROR:
    case ZCONNECTIONLOSS:
    case ZMARSHALLINGERROR:
    case ZOPERATIONTIMEOUT:
    case ZINVALIDSTATE:
    case ZSESSIONEXPIRED:
    case ZAUTHFAILED:
    case ZCLOSING:
    case ZSESSIONMOVED:
    case ZNOTREADONLY:
        return 0;
    default:
        return 1;
    }
}

/* Whether a create made the very path the caller's string at index asked holds (every create
 * but a sequential one does; with a chroot the library strips it from the reply). */
static int created_as_asked(lua_State *L, const zkl_event *ev, int asked)
{
    size_t len;
    const char *path = asked ? lua_tolstring(L, asked, &len) : NULL;
    return ev->op == ZKL_OP_CREATE && path && ev->data && (size_t)ev->data_len == len &&
           memcmp(ev->data, path, len) == 0;
}

/* A successful op's results.  A create that made the path asked for returns the caller's own
 * string: a copy would cost an allocation and a string-table lookup per create. */
static int push_results(lua_State *L, const zkl_event *ev, int asked)
{
    if (!created_as_asked(L, ev, asked))
        return zkl_push_op_results(L, ev);
    lua_pushvalue(L, asked);
    if (!ev->has_stat)
        return 1;
    zkl_push_stat(L, &ev->stat);
    return 2;
}

/* An op's event as next() returns it: "op", id, rc, whether an asked-for watch will never
 * fire, then the results.  asked: the stack index of the path a direct create was given, or 0. */
static int push_op_event(lua_State *L, const zkl_event *ev, int asked)
{
    lua_pushvalue(L, OP_KIND); /* "op", not interned again per op (see OP_KIND) */
    lua_pushinteger(L, (lua_Integer)ev->id);
    int results = 0;
    if (ev->rc == ZOK || (ev->op == ZKL_OP_EXISTS && ev->rc == ZNONODE)) {
        lua_pushinteger(L, ZOK);
        results = push_results(L, ev, asked);
    } else {
        lua_pushinteger(L, ev->rc);
        if (ev->op == ZKL_OP_MULTI && ev->multi && multi_answered_by_server(ev->rc))
            results = zkl_push_op_results(L, ev); /* per-op codes of a refused transaction */
    }
    /* a watch asked for but not registered will never fire */
    lua_pushboolean(L, ev->watch_requested && !ev->watch_registered);
    lua_insert(L, -1 - results);
    return 4 + results;
}

static int push_event(lua_State *L, zkl_event *ev)
{
    switch (ev->kind) {
    case ZKL_EV_OP:
        return push_op_event(L, ev, 0);
    case ZKL_EV_WATCH:
        lua_pushliteral(L, "watch");
        lua_pushinteger(L, (lua_Integer)ev->id);
        lua_pushstring(L, zkl_event_type_name(ev->type));
        lua_pushstring(L, zkl_keeper_state_name(ev->zk_state));
        lua_pushstring(L, ev->path ? ev->path : "");
        return 5;
    case ZKL_EV_STATE:
        lua_pushliteral(L, "state");
        lua_pushstring(L, zkl_state_name(ev->state));
        lua_pushstring(L, zkl_client_state_name(ev->client_state));
        return 3;
    case ZKL_EV_NOTIFY:
        lua_pushliteral(L, "notify");
        lua_pushinteger(L, (lua_Integer)ev->id);
        lua_pushinteger(L, ev->type);
        return 3;
    case ZKL_EV_LOG:
        lua_pushliteral(L, "log");
        lua_pushstring(L, zkl_log_level_name(ev->type));
        lua_pushlstring(L, ev->data ? ev->data : "", (size_t)ev->data_len);
        return 3;
    case ZKL_EV_SESSION:
    case ZKL_EV_TIMER:
        break;
    }
    return 0;
}

/* next(): one event as values (kind first), or nothing when none waits. */
static int session_next(lua_State *L)
{
    zkl_session *s = check_session(L);
    zkl_event *ev = zkl_session_next(s);
    if (!ev)
        return 0;
    lua_settop(L, 1);
    int n = push_event(L, ev); /* raises only on out-of-memory, then the event leaks once */
    zkl_event_free(ev);
    return n;
}

/* The field names settle_plain_op reads and writes, pushed once per drain() at these stack
 * slots: a string pushed from C is interned (hashed and looked up) on every push under LuaJIT,
 * which has no cache of C strings as Lua 5.4 has; six pushes per op were ~8 % of the owner
 * thread's instructions per pipelined get there. */
enum { DRAIN_PENDING = 2, KEY_DONE, KEY_COMPLETE, KEY_LINKS, KEY_VALUE, KEY_SECOND, DRAIN_TOP = KEY_SECOND };

/* Resolves the future of a plain op completion in place, as Future:set would, and returns 1;
 * returns 0 (nothing changed) for every other event: not an op, an error (its error object is
 * built in Lua), a watch that could not be registered, or a future with a completion function
 * (_complete), rawlinks (_links) or already resolved.  The table of futures is at
 * DRAIN_PENDING, the field names at KEY_*. */
static int settle_plain_op(lua_State *L, const zkl_event *ev)
{
    if (ev->kind != ZKL_EV_OP || ev->op == ZKL_OP_MULTI ||
        (ev->watch_requested && !ev->watch_registered))
        return 0;
    if (ev->rc != ZOK && !(ev->op == ZKL_OP_EXISTS && ev->rc == ZNONODE))
        return 0;
    int top = lua_gettop(L);
    int future = top + 1;
    lua_pushinteger(L, (lua_Integer)ev->id); /* as push_op_id made the key */
    lua_rawget(L, DRAIN_PENDING);
    if (lua_type(L, future) != LUA_TTABLE)
        goto not_plain;
    lua_pushvalue(L, KEY_DONE);
    lua_rawget(L, future);
    lua_pushvalue(L, KEY_COMPLETE);
    lua_rawget(L, future);
    lua_pushvalue(L, KEY_LINKS);
    lua_rawget(L, future);
    if (lua_type(L, -3) != LUA_TBOOLEAN || lua_toboolean(L, -3) || !lua_isnil(L, -2) ||
        !lua_isnil(L, -1))
        goto not_plain;
    lua_settop(L, future);
    if (zkl_push_op_results(L, ev) < 2)
        lua_settop(L, future + 2); /* the results it lacks are nil */
    lua_pushvalue(L, KEY_SECOND);
    lua_insert(L, -2);
    lua_rawset(L, future);
    lua_pushvalue(L, KEY_VALUE);
    lua_insert(L, -2);
    lua_rawset(L, future);
    lua_pushvalue(L, KEY_DONE);
    lua_pushboolean(L, 1);
    lua_rawset(L, future);
    lua_pushinteger(L, (lua_Integer)ev->id);
    lua_pushnil(L);
    lua_rawset(L, DRAIN_PENDING);
    lua_settop(L, top);
    return 1;
not_plain:
    lua_settop(L, top);
    return 0;
}

/* drain(pending): handles the waiting events that are plain op completions (see
 * settle_plain_op; pending maps op id -> future) without a trip through Lua per event, up to
 * the first other event.  Returns how many it handled, then that event as next() returns it
 * (nothing more when the queue is empty). */
static int session_drain(lua_State *L)
{
    zkl_session *s = check_session(L);
    luaL_checktype(L, DRAIN_PENDING, LUA_TTABLE);
    lua_settop(L, DRAIN_PENDING);
    lua_pushliteral(L, "done");
    lua_pushliteral(L, "_complete");
    lua_pushliteral(L, "_links");
    lua_pushliteral(L, "value");
    lua_pushliteral(L, "_second");
    lua_Integer handled = 0;
    zkl_event *ev;
    while ((ev = zkl_session_next(s)) != NULL) {
        if (!settle_plain_op(L, ev)) {
            lua_settop(L, 1);
            lua_pushinteger(L, handled);
            int n = push_event(L, ev);
            zkl_event_free(ev);
            return 1 + n;
        }
        zkl_event_free(ev);
        handled++;
    }
    lua_pushinteger(L, handled);
    return 1;
}

/* await(id): op id's event as next() returns it, once it is the next deliverable event;
 * nothing when another event comes first or a wait slice passed (then use next()). */
static int session_await(lua_State *L)
{
    zkl_session *s = check_session(L);
    uint64_t id = (uint64_t)luaL_checkinteger(L, 2);
    zkl_event *ev = zkl_session_await(s, id);
    if (!ev)
        return 0;
    lua_settop(L, 1);
    int n = push_event(L, ev);
    zkl_event_free(ev);
    return n;
}

static int session_state(lua_State *L)
{
    zkl_session *s = check_session(L);
    lua_pushstring(L, zkl_state_name(zkl_session_state(s)));
    lua_pushstring(L, zkl_client_state_name(zkl_session_client_state(s)));
    return 2;
}

static int session_client_id(lua_State *L)
{
    int64_t id;
    char passwd[16];
    if (zkl_session_client_id(check_session(L), &id, passwd) != 0)
        return 0;
    zkl_push_int64(L, id); /* as a stat's ephemeralOwner */
    lua_pushlstring(L, passwd, sizeof passwd);
    return 2;
}

static int session_negotiated_timeout(lua_State *L)
{
    lua_pushinteger(L, zkl_session_negotiated_timeout(check_session(L)));
    return 1;
}

/* set_hosts(hosts) -> true, or nil and why */
static int session_set_hosts(lua_State *L)
{
    if (zkl_session_set_hosts(check_session(L), luaL_checkstring(L, 2)) != 0) {
        lua_pushnil(L);
        lua_pushstring(L, errno == EINVAL ? "the library refused the host list" : strerror(errno));
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* current_server() -> "host:port" of the server connected to, or nil */
static int session_current_server(lua_State *L)
{
    char server[256];
    if (zkl_session_current_server(check_session(L), server, sizeof server) != 0)
        return 0;
    lua_pushstring(L, server);
    return 1;
}

static int session_flush(lua_State *L)
{
    zkl_session_flush(check_session(L));
    return 0;
}

static int session_pending(lua_State *L)
{
    lua_pushinteger(L, zkl_session_pending_ops(check_session(L)));
    return 1;
}

/* ---- operations ---- */

static int op_create(lua_State *L) /* create(path, value, acl, flags, want_stat, ttl) */
{
    lua_settop(L, 7); /* the ACL vector goes above the arguments, never into ttl's slot */
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    int len;
    const char *value = check_value(L, 3, &len);
    struct ACL_vector *acl = zkl_opt_acl_list(L, 4, "acl");
    int flags = optional_int(L, 5, 0);
    int64_t ttl = (int64_t)luaL_optinteger(L, 7, 0);
    return push_op_id(L, zkl_op_create_ttl(s, path, value, len, acl, flags, ttl,
                                           lua_toboolean(L, 6), NULL));
}

static int op_delete(lua_State *L) /* delete(path, version) */
{
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    return push_op_id(L, zkl_op_delete(s, path, optional_int(L, 3, -1), NULL));
}

static int op_exists(lua_State *L) /* exists(path, watch) */
{
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    return push_op_id(L, zkl_op_exists(s, path, lua_toboolean(L, 3), NULL));
}

static int op_get(lua_State *L) /* get(path, watch) */
{
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    return push_op_id(L, zkl_op_get(s, path, lua_toboolean(L, 3), NULL));
}

static int op_children(lua_State *L) /* children(path, watch) */
{
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    return push_op_id(L, zkl_op_children(s, path, lua_toboolean(L, 3), NULL));
}

static int op_set(lua_State *L) /* set(path, value, version) */
{
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    int len;
    const char *value = check_value(L, 3, &len);
    return push_op_id(L, zkl_op_set(s, path, value, len, optional_int(L, 4, -1), NULL));
}

/* ---- direct ops (ops.h): each returns what next() returns for the op's event, or nothing
 * when the op cannot run directly now (then submit it the usual way) ---- */

/* What a direct op returns to Lua: its event as next() returns it, or nothing when it did
 * not run (ran = 0: submit it instead).  asked: as push_op_event's. */
static int push_direct(lua_State *L, zkl_event *ev, int ran, int asked)
{
    if (!ran)
        return 0;
    int n = push_op_event(L, ev, asked);
    zkl_event_clear(ev);
    return n;
}

static int op_get_now(lua_State *L) /* get_now(path, watch) */
{
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    zkl_event ev;
    return push_direct(L, &ev, zkl_op_get_now(s, &ev, path, lua_toboolean(L, 3)), 0);
}

static int op_exists_now(lua_State *L) /* exists_now(path, watch) */
{
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    zkl_event ev;
    return push_direct(L, &ev, zkl_op_exists_now(s, &ev, path, lua_toboolean(L, 3)), 0);
}

static int op_children_now(lua_State *L) /* children_now(path, watch) */
{
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    zkl_event ev;
    return push_direct(L, &ev, zkl_op_children_now(s, &ev, path, lua_toboolean(L, 3)), 0);
}

static int op_create_now(lua_State *L) /* create_now(path, value, acl, flags, want_stat) */
{
    lua_settop(L, 6); /* the ACL vector goes above the arguments, never into want_stat's */
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    int len;
    const char *value = check_value(L, 3, &len);
    struct ACL_vector *acl = zkl_opt_acl_list(L, 4, "acl");
    int flags = optional_int(L, 5, 0);
    zkl_event ev;
    return push_direct(L, &ev, zkl_op_create_now(s, &ev, path, value, len, acl, flags,
                                                 lua_toboolean(L, 6)), 2);
}

static int op_set_now(lua_State *L) /* set_now(path, value, version) */
{
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    int len;
    const char *value = check_value(L, 3, &len);
    zkl_event ev;
    return push_direct(L, &ev, zkl_op_set_now(s, &ev, path, value, len, optional_int(L, 4, -1)), 0);
}

static int op_delete_now(lua_State *L) /* delete_now(path, version) */
{
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    zkl_event ev;
    return push_direct(L, &ev, zkl_op_delete_now(s, &ev, path, optional_int(L, 3, -1)), 0);
}

static int op_get_acl(lua_State *L) /* get_acl(path) */
{
    zkl_session *s = check_session(L);
    return push_op_id(L, zkl_op_get_acl(s, luaL_checkstring(L, 2), NULL));
}

static int op_set_acl(lua_State *L) /* set_acl(path, acl, version) */
{
    zkl_session *s = check_session(L);
    const char *path = luaL_checkstring(L, 2);
    struct ACL_vector *acl = zkl_check_acl_list(L, 3, "acls");
    return push_op_id(L, zkl_op_set_acl(s, path, optional_int(L, 4, -1), acl, NULL));
}

static int op_sync(lua_State *L) /* sync(path) */
{
    zkl_session *s = check_session(L);
    return push_op_id(L, zkl_op_sync(s, luaL_checkstring(L, 2), NULL));
}

/* reconfig(joining, leaving, members, from_config): strings or nil; from_config an integer
 * (-1: any) or, where numbers are doubles, its decimal string */
static int op_reconfig(lua_State *L)
{
    zkl_session *s = check_session(L);
    const char *joining = luaL_optstring(L, 2, NULL);
    const char *leaving = luaL_optstring(L, 3, NULL);
    const char *members = luaL_optstring(L, 4, NULL);
    int64_t from_config = -1;
    if (lua_type(L, 5) == LUA_TSTRING) {
        char *end;
        errno = 0;
        from_config = (int64_t)strtoll(lua_tostring(L, 5), &end, 10);
        if (errno || *end)
            return luaL_argerror(L, 5, "from_config must be an integer");
    } else if (!lua_isnoneornil(L, 5)) {
        from_config = (int64_t)luaL_checkinteger(L, 5);
    }
    return push_op_id(L, zkl_op_reconfig(s, joining, leaving, members, from_config));
}

static int op_add_auth(lua_State *L) /* add_auth(scheme, credential) */
{
    zkl_session *s = check_session(L);
    const char *scheme = luaL_checkstring(L, 2);
    size_t len;
    const char *cred = luaL_checklstring(L, 3, &len);
    return push_op_id(L, zkl_op_add_auth(s, scheme, cred, (int)len));
}

/* One transaction op {kind, path, value, acl, flags, version} added to m; raises on bad input. */
static int add_multi_op(lua_State *L, zkl_multi *m, int op)
{
    lua_getfield(L, op, "kind");
    lua_getfield(L, op, "path");
    lua_getfield(L, op, "value");
    lua_getfield(L, op, "version");
    lua_getfield(L, op, "flags");
    const char *kind = lua_tostring(L, -5);
    const char *path = lua_tostring(L, -4);
    size_t n = 0;
    const char *value = lua_tolstring(L, -3, &n);
    int len = value ? (int)n : -1; /* no value: ZooKeeper's null */
    int version = lua_isnil(L, -2) ? -1 : (int)lua_tointeger(L, -2);
    int flags = (int)lua_tointeger(L, -1);
    if (!kind || !path)
        return -2;
    int rc;
    if (strcmp(kind, "create") == 0) {
        int top = lua_gettop(L);
        lua_getfield(L, op, "acl");
        struct ACL_vector *acl = zkl_opt_acl_list(L, -1, "acl"); /* a list pushes its vector */
        rc = zkl_multi_add_create(m, path, value, len, acl, flags);
        lua_settop(L, top);
    } else if (strcmp(kind, "delete") == 0) {
        rc = zkl_multi_add_delete(m, path, version);
    } else if (strcmp(kind, "set") == 0) {
        rc = zkl_multi_add_set(m, path, value, len, version);
    } else if (strcmp(kind, "check") == 0) {
        rc = zkl_multi_add_check(m, path, version);
    } else {
        rc = -2;
    }
    lua_pop(L, 5);
    return rc;
}

static int op_multi(lua_State *L) /* multi({op, ...}) */
{
    zkl_session *s = check_session(L);
    luaL_checktype(L, 2, LUA_TTABLE);
    int n = (int)lua_rawlen(L, 2);
    /* the multi is kept in a userdata while it is built, so a raise cannot leak it */
    zkl_multi **holder = lua_newuserdatauv(L, sizeof *holder, 0);
    *holder = NULL;
    luaL_setmetatable(L, MULTI_HOLDER_METATABLE);
    *holder = zkl_multi_new();
    if (!*holder)
        return luaL_error(L, "out of memory");
    int rc = 0;
    for (int i = 1; i <= n && rc == 0; i++) {
        lua_rawgeti(L, 2, i);
        if (lua_type(L, -1) != LUA_TTABLE)
            rc = -2;
        else
            rc = add_multi_op(L, *holder, lua_gettop(L));
        lua_pop(L, 1);
    }
    zkl_multi *m = *holder;
    *holder = NULL;
    if (rc != 0) {
        zkl_multi_free(m);
        return luaL_error(L, rc == -2 ? "malformed transaction op" : "out of memory");
    }
    return push_op_id(L, zkl_op_multi(s, m, NULL));
}

static int multi_holder_gc(lua_State *L)
{
    zkl_multi **holder = luaL_checkudata(L, 1, MULTI_HOLDER_METATABLE);
    zkl_multi_free(*holder);
    *holder = NULL;
    return 0;
}

static int session_gc(lua_State *L)
{
    session_box *box = luaL_checkudata(L, 1, SESSION_METATABLE);
    zkl_session_free(box->session);
    box->session = NULL;
    return 0;
}

static const luaL_Reg session_methods[] = {
    {"start", session_start},
    {"stop", session_stop},
    {"set_connection_retry", session_set_connection_retry},
    {"gave_up_connecting", session_gave_up_connecting},
    {"set_window", session_set_window},
    {"window_use", session_window_use},
    {"batch_use", session_batch_use},
    {"failed_connection_attempts", session_failed_connection_attempts},
    {"last_tls_failure", session_last_tls_failure},
    {"awaits_kdc", session_awaits_kdc},
    {"last_sasl_failure", session_last_sasl_failure},
    {"hold_reconnection", session_hold_reconnection},
    {"close", session_close},
    {"fileno", session_fileno},
    {"wait", session_wait},
    {"next", session_next},
    {"drain", session_drain},
    {"await", session_await},
    {"state", session_state},
    {"client_id", session_client_id},
    {"negotiated_timeout", session_negotiated_timeout},
    {"set_hosts", session_set_hosts},
    {"current_server", session_current_server},
    {"pending", session_pending},
    {"flush", session_flush},
    {"create", op_create},
    {"delete", op_delete},
    {"exists", op_exists},
    {"get", op_get},
    {"children", op_children},
    {"set", op_set},
    {"get_acl", op_get_acl},
    {"set_acl", op_set_acl},
    {"sync", op_sync},
    {"add_auth", op_add_auth},
    {"reconfig", op_reconfig},
    {"multi", op_multi},
    {"get_now", op_get_now},
    {"exists_now", op_exists_now},
    {"children_now", op_children_now},
    {"create_now", op_create_now},
    {"set_now", op_set_now},
    {"delete_now", op_delete_now},
    {NULL, NULL},
};

void zkl_register_session(lua_State *L)
{
    if (luaL_newmetatable(L, SESSION_METATABLE)) {
        lua_newtable(L);
        lua_pushliteral(L, "op"); /* OP_KIND */
        luaL_setfuncs(L, session_methods, 1);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, session_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushlightuserdata(L, (void *)&session_metatable_key);
        lua_pushvalue(L, -2);
        lua_rawset(L, LUA_REGISTRYINDEX);
    }
    /* core.session_methods: the methods themselves, so hot Lua code can hold them in locals
     * rather than look each up through the userdata's metatable on every call */
    lua_getfield(L, -1, "__index");
    lua_setfield(L, -3, "session_methods");
    lua_pop(L, 1);
    if (luaL_newmetatable(L, MULTI_HOLDER_METATABLE)) {
        lua_pushcfunction(L, multi_holder_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, session_new);
    lua_setfield(L, -2, "session");
}
