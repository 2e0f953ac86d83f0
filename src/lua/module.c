/*
 * module.c — luaopen_zklua_core: the C half of zklua, as a Lua module.
 *
 * zklua.core holds the session type (session_binding.c), the recipe types (bindings.h lists
 * every registration), the shared numbers and names (constants.c), the host's names and wall
 * clock (host_binding.c), and the helpers the Lua half needs from C: ZooKeeper's path rules,
 * digest credentials, a monotonic clock, waiting on several sessions' fds at once, the
 * library's log level, and the test harness's socket helpers.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../core/clock.h"
#include "../core/digest.h"
#include "../core/features.h"
#include "../core/kerberos.h"
#include "../core/log.h"
#include "../core/net.h"
#include "../core/path.h"
#include "../core/tls.h"
#include "bindings.h"
#include "compat.h"
#include "convert.h"
#include "session_binding.h"
#include "zklua_version.h"

/* path_problem(path, sequential) -> nil, or a reason the server would refuse the path */
static int core_path_problem(lua_State *L)
{
    size_t len;
    const char *path = luaL_checklstring(L, 1, &len);
    const char *problem = zkl_path_problem(path, len, lua_toboolean(L, 2));
    if (!problem)
        return 0;
    lua_pushstring(L, problem);
    return 1;
}

/* digest_credential(user, password) -> "user:base64(sha1(user:password))" */
static int core_digest_credential(lua_State *L)
{
    size_t ulen, plen;
    const char *user = luaL_checklstring(L, 1, &ulen);
    const char *pw = luaL_checklstring(L, 2, &plen);
    size_t size = ulen + 32;
    char *out = lua_newuserdatauv(L, size, 0);
    int n = zkl_digest_credential(user, ulen, pw, plen, out, size);
    if (n < 0)
        return luaL_error(L, "out of memory");
    lua_pushlstring(L, out, (size_t)n);
    return 1;
}

/* tls_check(ca, cert, key [, password]) -> nil, or why libzookeeper could not use them */
static int core_tls_check(lua_State *L)
{
    const char *ca = luaL_checkstring(L, 1);
    const char *cert = luaL_checkstring(L, 2);
    const char *key = luaL_checkstring(L, 3);
    const char *password = luaL_optstring(L, 4, NULL);
    char why[512];
    if (zkl_tls_check(ca, cert, key, password, why, sizeof why) == 0)
        return 0;
    lua_pushstring(L, why);
    return 1;
}

/* core.zookeeper = {version = "3.8.0", build = "Debian source package", tls = bool, sasl = bool,
 * tls_sasl = bool (SASL over TLS), set_watches_in_batches = bool}:
 * the C client linked in (features.h) */
static void push_client_features(lua_State *L)
{
    lua_newtable(L);
    lua_pushstring(L, ZKL_ZK_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushstring(L, ZKL_ZK_BUILD);
    lua_setfield(L, -2, "build");
#ifdef ZKL_HAVE_TLS
    lua_pushboolean(L, 1);
#else
    lua_pushboolean(L, 0);
#endif
    lua_setfield(L, -2, "tls");
#ifdef ZKL_HAVE_SASL
    lua_pushboolean(L, 1);
#else
    lua_pushboolean(L, 0);
#endif
    lua_setfield(L, -2, "sasl");
#ifdef ZKL_HAVE_TLS_SASL
    lua_pushboolean(L, 1);
#else
    lua_pushboolean(L, 0);
#endif
    lua_setfield(L, -2, "tls_sasl");
    /* the project's build re-registers watches in 128 KiB batches (a patch): past ~40k
     * watches a reconnection works; the system library's one SetWatches does not */
#ifdef ZKL_SET_WATCHES_IN_BATCHES
    lua_pushboolean(L, 1);
#else
    lua_pushboolean(L, 0);
#endif
    lua_setfield(L, -2, "set_watches_in_batches");
}

static int core_monotonic(lua_State *L)
{
    lua_pushnumber(L, zkl_monotonic_seconds());
    return 1;
}

/* poll({fd, ...}, timeout_s) -> true if any fd is readable, false on timeout or signal */
static int core_poll(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int timeout = zkl_opt_timeout_ms(L, 2);
    size_t len = (size_t)lua_rawlen(L, 1);
    /* no cap of our own: poll() takes as many as the process may open (a blocking handler
     * waits on every client of the process: 5000 sessions are 5000 fds here) */
    if (len > (size_t)INT_MAX / sizeof(struct pollfd))
        return luaL_argerror(L, 1, "too many fds");
    int n = (int)len;
    struct pollfd *fds = lua_newuserdatauv(L, sizeof *fds * (size_t)(n ? n : 1), 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 1, i + 1);
        fds[i].fd = (int)luaL_checkinteger(L, -1);
        fds[i].events = POLLIN;
        lua_pop(L, 1);
    }
    int ready = poll(fds, (nfds_t)n, timeout);
    lua_pushboolean(L, ready > 0);
    return 1;
}

/* cpu_time() -> seconds of CPU (user + system, all threads) this process used */
static int core_cpu_time(lua_State *L)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
    double sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    lua_pushnumber(L, user + sys);
    return 1;
}

/* stack_depth() -> how many frames the calling coroutine's stack holds, this call's own
 * included.  It allocates nothing, so a test may probe every callback of a burst with it
 * (spec/fixtures/watch_burst.lua): debug.getinfo makes a table per frame. */
static int core_stack_depth(lua_State *L)
{
    lua_Debug ar;
    int depth = 0;
    while (lua_getstack(L, depth, &ar))
        depth++;
    lua_pushinteger(L, depth);
    return 1;
}

/* sleep(seconds): a plain sleep, for when there is no session to dispatch */
static int core_sleep(lua_State *L)
{
    lua_Number t = luaL_checknumber(L, 1);
    if (t > 0) {
        struct timespec ts;
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (lua_Number)ts.tv_sec) * 1e9);
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* library_log_level() -> the level libzookeeper formats lines at, process-wide: the highest
 * a session with a logger asks for, 0 when none does */
static int core_library_log_level(lua_State *L)
{
    lua_pushinteger(L, zkl_log_library_level());
    return 1;
}

static int core_free_port(lua_State *L)
{
    int port = zkl_free_port();
    if (port < 0)
        return luaL_error(L, "no free port on 127.0.0.1");
    lua_pushinteger(L, port);
    return 1;
}

/* four_letter(host, port, cmd, timeout_s) -> answer, or nil when unreachable */
static int core_four_letter(lua_State *L)
{
    const char *host = luaL_checkstring(L, 1);
    int port = (int)luaL_checkinteger(L, 2);
    const char *cmd = luaL_checkstring(L, 3);
    int timeout = zkl_opt_timeout_ms(L, 4);
    enum { ANSWER_SIZE = 64 * 1024 };
    char *out = lua_newuserdatauv(L, ANSWER_SIZE, 0);
    int n = zkl_four_letter_word(host, port, cmd, timeout < 0 ? 2000 : timeout, out, ANSWER_SIZE);
    if (n < 0)
        return 0;
    lua_pushlstring(L, out, (size_t)n);
    return 1;
}

/* setenv(name, value): this process's environment, for the programs and libraries it runs
 * (zklua.testing.kdc: MIT Kerberos reads KRB5_CONFIG, KRB5CCNAME and KRB5_CLIENT_KTNAME when
 * a SASL GSSAPI exchange starts).  Call it before clients that read it start: the library's
 * threads read the environment. */
static int core_setenv(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    const char *value = luaL_checkstring(L, 2);
    if (name[0] == '\0' || strchr(name, '='))
        return luaL_argerror(L, 1, "an environment variable's name, without '='");
    if (setenv(name, value, 1) != 0)
        return luaL_error(L, "setenv %s: %s", name, strerror(errno));
    return 0;
}

/* kerberos_principal() -> the principal of this process's default Kerberos credentials and
 * where they are, or nil and why (kerberos.h) */
static int core_kerberos_principal(lua_State *L)
{
    char name[256], where[512], why[512];
    if (zkl_kerberos_default_principal(name, sizeof name, where, sizeof where, why,
                                       sizeof why) != 0) {
        lua_pushnil(L);
        lua_pushstring(L, why);
        return 2;
    }
    lua_pushstring(L, name);
    lua_pushstring(L, where);
    return 2;
}

static const luaL_Reg core_functions[] = {
    {"path_problem", core_path_problem},
    {"digest_credential", core_digest_credential},
    {"tls_check", core_tls_check},
    {"monotonic", core_monotonic},
    {"poll", core_poll},
    {"sleep", core_sleep},
    {"cpu_time", core_cpu_time},
    {"stack_depth", core_stack_depth},
    {"library_log_level", core_library_log_level},
    {"free_port", core_free_port},
    {"four_letter", core_four_letter},
    {"setenv", core_setenv},
    {"kerberos_principal", core_kerberos_principal},
    {NULL, NULL},
};

int luaopen_zklua_core(lua_State *L)
{
    lua_newtable(L);
    luaL_setfuncs(L, core_functions, 0);
    zkl_register_int64(L);
    zkl_register_stat_metatable(L);
    zkl_register_session(L);
    zkl_register_waker(L);
    zkl_register_host(L);
    zkl_register_constants(L);
    zkl_register_lock(L);
    zkl_register_counter(L);
    zkl_register_party(L);
    zkl_register_persistent_node(L);
    zkl_register_ttl_toucher(L);
    zkl_register_barrier(L);
    zkl_register_patient_children(L);
    zkl_register_item_queue(L);
    zkl_register_locking_queue(L);
    zkl_register_allocator(L);
    zkl_register_strategies(L);
    zkl_register_tree_cache(L);
    zkl_register_semaphore(L);
    zkl_register_lease(L);
    zkl_register_set_partitioner(L);
    zkl_register_service_instance(L);
    lua_pushstring(L, ZKLUA_VERSION);
    lua_setfield(L, -2, "version");
    push_client_features(L);
    lua_setfield(L, -2, "zookeeper");
    lua_pushinteger(L, ZKL_MAX_PACKET);
    lua_setfield(L, -2, "max_packet");
    return 1;
}
