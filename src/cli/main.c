/*
 * main.c — the zklua command: runs a Lua script with zklua ready to require.
 *
 *   zklua script.lua [args]   run a script; arg is set as lua5.4 sets it
 *   zklua -e 'code'           run a chunk
 *   zklua --sandbox script.lua | -e 'code'   the same against a throwaway local ZooKeeper
 *   zklua -v | -h             version | usage
 *
 * zklua.core is linked in and preloaded; the Lua half is found next to the executable
 * (a checkout: ./lua; a tree: ../share/lua/5.4), where it was installed (ZKLUA_LUADIR at
 * build time), or through LUA_PATH.  An error prints
 * a readable message and exits 1.  SIGINT and SIGTERM raise an error in the script at its next
 * instruction (a wait in progress returns at once) and keep raising it, so a pcall cannot
 * swallow the stop; sessions are closed by lua_close() on the way out and their ephemeral
 * nodes vanish.  A second signal ends the process at once.
 *
 * --sandbox starts a ZooKeeper server (zklua.sandbox) in a Lua state of its own before the
 * script runs, and points ZKLUA_HOSTS at it.  However the script ends (normally, an error,
 * SIGINT/SIGTERM), its state is closed first (its sessions end cleanly), then the server is
 * stopped by its PID with SIGINT/SIGTERM blocked, so that a second signal cannot cut that
 * short; a second signal while the script still unwinds kills the server (SIGKILL by PID)
 * before the runner dies.
 */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "../core/features.h"
#include "../lua/zklua_version.h"

#ifndef ZKLUA_LUADIR
#define ZKLUA_LUADIR ""
#endif

int luaopen_zklua_core(lua_State *L);

static lua_State *running_state;
static volatile sig_atomic_t interrupted_by;
static volatile sig_atomic_t sandbox_pid; /* the sandbox server's java process, or 0 */

/* Stays installed: every call, return and 1000 instructions raise again until the script
 * has unwound, whatever pcalls it has. */
static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    luaL_error(L, "interrupted by signal %d", (int)interrupted_by);
}

static void on_signal(int sig)
{
    if (interrupted_by) { /* asked twice: stop now, but not leave the sandbox server behind */
        if (sandbox_pid > 0)
            kill((pid_t)sandbox_pid, SIGKILL);
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    interrupted_by = sig;
    if (running_state)
        lua_sethook(running_state, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1000);
}

static void install_signal_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a poll() in progress returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void print_usage(FILE *out)
{
    fprintf(out, "usage: zklua script.lua [args...]\n"
                 "       zklua -e 'lua code' [args...]\n"
                 "       zklua --sandbox script.lua [args...] | -e 'lua code' [args...]\n"
                 "       zklua -v | -h\n"
                 "ZKLUA_HOSTS gives the default hosts of zklua.client() (127.0.0.1:2181).\n"
                 "--sandbox runs the script against a throwaway local ZooKeeper (Debian's\n"
                 "zookeeper package) that ZKLUA_HOSTS points to; it is stopped when the\n"
                 "script ends.\n");
}

/* Message handler: the error as text (error objects have __tostring) plus a traceback. */
static int message_handler(lua_State *L)
{
    const char *msg = luaL_tolstring(L, 1, NULL);
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* Prepends dir/?.lua and dir/?/init.lua to package.path. */
static void add_lua_dir(lua_State *L, const char *dir)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

/* Adds <exe dir>/<relative> when it holds zklua/init.lua; returns whether it did. */
static int add_lua_dir_if_there(lua_State *L, const char *exe_dir, const char *relative)
{
    char probe[PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s/%s/zklua/init.lua", exe_dir, relative);
    if (access(probe, R_OK) != 0)
        return 0;
    snprintf(probe, sizeof probe, "%s/%s", exe_dir, relative);
    add_lua_dir(L, probe);
    return 1;
}

/* The Lua half next to the executable: a checkout (<dir>/lua/zklua/init.lua), or a tree that
 * `make install` or luarocks filled (<dir>/../share/lua/5.4/zklua/init.lua). */
static void add_lua_dir_near_executable(lua_State *L)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    if (!add_lua_dir_if_there(L, exe, "lua"))
        add_lua_dir_if_there(L, exe, "../share/lua/" LUA_VERSION_MAJOR "." LUA_VERSION_MINOR);
}

static void preload_core(lua_State *L)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_zklua_core);
    lua_setfield(L, -2, "zklua.core");
    lua_pop(L, 1);
}

/* arg as lua5.4 builds it: arg[0] the script, arg[1..] its arguments, arg[-1] the program. */
static void set_arg_table(lua_State *L, char **argv, int argc, int script)
{
    lua_createtable(L, argc - script - 1, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

/* Calls the function below nargs arguments with a traceback on error and SIGINT/SIGTERM
 * armed to interrupt it; leaves nresults on the stack, or prints the error. */
static int run_protected(lua_State *L, int nargs, int nresults)
{
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, message_handler);
    lua_insert(L, base);
    running_state = L;
    if (interrupted_by) /* the signal came while nothing ran (e.g. the sandbox was starting) */
        lua_sethook(L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1000);
    int status = lua_pcall(L, nargs, nresults, base);
    running_state = NULL;
    lua_sethook(L, NULL, 0, 0); /* finalizers must run without it */
    lua_remove(L, base);
    if (status != LUA_OK) {
        fprintf(stderr, "zklua: %s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    return status;
}

static int run_chunk(lua_State *L, int load_status, char **argv, int argc, int first_arg)
{
    if (load_status != LUA_OK) {
        fprintf(stderr, "zklua: %s\n", lua_tostring(L, -1));
        return 1;
    }
    int nargs = 0;
    for (int i = first_arg; i < argc; i++, nargs++)
        lua_pushstring(L, argv[i]);
    return run_protected(L, nargs, 0) == LUA_OK ? 0 : 1;
}

/* A Lua state with the standard libraries and zklua ready to require. */
static lua_State *new_state(void)
{
    lua_State *L = luaL_newstate();
    if (!L)
        return NULL;
    luaL_openlibs(L);
    if (ZKLUA_LUADIR[0])
        add_lua_dir(L, ZKLUA_LUADIR);
    add_lua_dir_near_executable(L);
    preload_core(L);
    return L;
}

static const char SANDBOX_START[] = "local s = require('zklua.sandbox').start()\n"
                                    "ZKLUA_SANDBOX = s\n"
                                    "return s.hosts, s.pid\n";
static const char SANDBOX_STOP[] = "if ZKLUA_SANDBOX then ZKLUA_SANDBOX:stop() end\n";

/* Starts the sandbox server in a Lua state of its own (so that the script's state, with its
 * sessions, can be closed before the server stops) and sets ZKLUA_HOSTS; NULL on failure,
 * reported, the server (if it got started) stopped by lua_close()'s finalizers. */
static lua_State *start_sandbox(void)
{
    lua_State *S = new_state();
    if (!S) {
        fprintf(stderr, "zklua: out of memory\n");
        return NULL;
    }
    if (luaL_loadbuffer(S, SANDBOX_START, sizeof SANDBOX_START - 1, "=(sandbox)") != LUA_OK ||
        run_protected(S, 0, 2) != LUA_OK) {
        if (lua_isstring(S, -1))
            fprintf(stderr, "zklua: %s\n", lua_tostring(S, -1));
        lua_close(S);
        return NULL;
    }
    const char *hosts = lua_tostring(S, -2);
    lua_Integer pid = lua_tointeger(S, -1);
    if (!hosts || setenv("ZKLUA_HOSTS", hosts, 1) != 0) {
        fprintf(stderr, "zklua: cannot set ZKLUA_HOSTS for the sandbox\n");
        lua_close(S);
        return NULL;
    }
    sandbox_pid = pid > 0 && pid <= INT32_MAX ? (sig_atomic_t)pid : 0;
    fprintf(stderr, "zklua: sandbox ZooKeeper on %s (pid %d), stopped when the script ends\n",
            hosts, (int)sandbox_pid);
    lua_pop(S, 2);
    return S;
}

/* Stops the sandbox server by its PID, SIGINT and SIGTERM blocked meanwhile (the process
 * exits right after: they stay blocked). */
static void stop_sandbox(lua_State *S)
{
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop_signals, NULL);
    if (luaL_loadbuffer(S, SANDBOX_STOP, sizeof SANDBOX_STOP - 1, "=(sandbox)") != LUA_OK ||
        lua_pcall(S, 0, 0, 0) != LUA_OK)
        fprintf(stderr, "zklua: stopping the sandbox: %s\n", lua_tostring(S, -1));
    sandbox_pid = 0;
    lua_close(S);
}

/* Whether argv[first...] names something to run (a script, "-" or -e with code); prints the
 * usage when not. */
static int arguments_usable(char **argv, int argc, int first)
{
    if (argc <= first || (strcmp(argv[first], "-e") == 0 && argc < first + 2)) {
        print_usage(stderr);
        return 0;
    }
    if (argv[first][0] == '-' && argv[first][1] != '\0' && strcmp(argv[first], "-e") != 0) {
        fprintf(stderr, "zklua: unknown option '%s'\n", argv[first]);
        print_usage(stderr);
        return 0;
    }
    return 1;
}

/* Runs the chunk (-e) or the script named at argv[first]. */
static int run_script(lua_State *L, char **argv, int argc, int first)
{
    if (strcmp(argv[first], "-e") == 0) {
        const char *code = argv[first + 1];
        set_arg_table(L, argv, argc, first + 1);
        return run_chunk(L, luaL_loadbuffer(L, code, strlen(code), "=(command line)"), argv, argc,
                         first + 2);
    }
    set_arg_table(L, argv, argc, first);
    const char *script = strcmp(argv[first], "-") == 0 ? NULL : argv[first];
    return run_chunk(L, luaL_loadfile(L, script), argv, argc, first + 1);
}

int main(int argc, char **argv)
{
    int sandbox = argc > 1 && strcmp(argv[1], "--sandbox") == 0;
    int first = sandbox ? 2 : 1;
    if (argc > first && (strcmp(argv[first], "-v") == 0 || strcmp(argv[first], "--version") == 0)) {
        printf("zklua %s (%s; ZooKeeper C client %s, %s: %s)\n", ZKLUA_VERSION, LUA_RELEASE,
               ZKL_ZK_VERSION, ZKL_ZK_BUILD, ZKL_ZK_FEATURES);
        return 0;
    }
    if (argc > first && (strcmp(argv[first], "-h") == 0 || strcmp(argv[first], "--help") == 0)) {
        print_usage(stdout);
        return 0;
    }
    if (!arguments_usable(argv, argc, first))
        return 2;
    install_signal_handlers();

    lua_State *sandbox_state = NULL;
    if (sandbox && !(sandbox_state = start_sandbox()))
        return interrupted_by ? 128 + interrupted_by : 1;
    int rc = 1;
    lua_State *L = new_state();
    if (L) {
        rc = run_script(L, argv, argc, first);
        lua_close(L); /* closes every session: their ephemeral nodes vanish */
    } else {
        fprintf(stderr, "zklua: out of memory\n");
    }
    if (sandbox_state)
        stop_sandbox(sandbox_state); /* after the script's sessions are closed */
    if (interrupted_by)
        return 128 + interrupted_by;
    return rc;
}
