/*
 * main.c — the zklua command: runs a Lua script with zklua ready to require.
 *
 *   zklua script.lua [args]   run a script; arg is set as lua5.4 sets it
 *   zklua -e 'code'           run a chunk
 *   zklua -v | -h             version | usage
 *
 * zklua.core is linked in and preloaded; the Lua half is found next to the executable
 * (a checkout: ./lua) or where it was installed (ZKLUA_LUADIR at build time).  An error prints
 * a readable message and exits 1.  SIGINT and SIGTERM raise an error in the script at its next
 * instruction (a wait in progress returns at once) and keep raising it, so a pcall cannot
 * swallow the stop; sessions are closed by lua_close() on the way out and their ephemeral
 * nodes vanish.  A second signal ends the process at once.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "../lua/zklua_version.h"

#ifndef ZKLUA_LUADIR
#define ZKLUA_LUADIR ""
#endif

int luaopen_zklua_core(lua_State *L);

static lua_State *running_state;
static volatile sig_atomic_t interrupted_by;

/* Stays installed: every call, return and 1000 instructions raise again until the script
 * has unwound, whatever pcalls it has. */
static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    luaL_error(L, "interrupted by signal %d", (int)interrupted_by);
}

static void on_signal(int sig)
{
    if (interrupted_by) { /* asked twice: stop now */
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
                 "       zklua -v | -h\n"
                 "ZKLUA_HOSTS gives the default hosts of zklua.client() (127.0.0.1:2181).\n");
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

/* The checkout layout: <dir of the executable>/lua/zklua/init.lua */
static void add_checkout_lua_dir(lua_State *L)
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
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/lua/zklua/init.lua", exe);
    if (access(probe, R_OK) == 0) {
        snprintf(probe, sizeof probe, "%s/lua", exe);
        add_lua_dir(L, probe);
    }
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

static int run_protected(lua_State *L, int nargs)
{
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, message_handler);
    lua_insert(L, base);
    running_state = L;
    int status = lua_pcall(L, nargs, 0, base);
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
    return run_protected(L, nargs) == LUA_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("zklua %s (%s)\n", ZKLUA_VERSION, LUA_RELEASE);
        return 0;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        print_usage(stdout);
        return 0;
    }
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "zklua: out of memory\n");
        return 1;
    }
    luaL_openlibs(L);
    if (ZKLUA_LUADIR[0])
        add_lua_dir(L, ZKLUA_LUADIR);
    add_checkout_lua_dir(L);
    preload_core(L);
    install_signal_handlers();

    int rc;
    if (strcmp(argv[1], "-e") == 0) {
        if (argc < 3) {
            print_usage(stderr);
            lua_close(L);
            return 2;
        }
        set_arg_table(L, argv, argc, 2);
        rc = run_chunk(L, luaL_loadbuffer(L, argv[2], strlen(argv[2]), "=(command line)"), argv,
                       argc, 3);
    } else if (argv[1][0] == '-' && argv[1][1] != '\0') {
        fprintf(stderr, "zklua: unknown option '%s'\n", argv[1]);
        print_usage(stderr);
        lua_close(L);
        return 2;
    } else {
        set_arg_table(L, argv, argc, 1);
        const char *script = strcmp(argv[1], "-") == 0 ? NULL : argv[1];
        rc = run_chunk(L, luaL_loadfile(L, script), argv, argc, 2);
    }
    lua_close(L); /* closes every session: their ephemeral nodes vanish */
    if (interrupted_by)
        return 128 + interrupted_by;
    return rc;
}
