/*
 * recipe_binding.h — the plumbing the recipe userdata (lock, party, barrier, counter) share.
 *
 * Each recipe userdata is a box holding the C recipe object and its session userdata's slot
 * (see zkl_lua_session_slot); the box keeps the session userdata as its user value, so the
 * session outlives the recipe's memory.  Once the session is closed the slot reads NULL and the
 * recipe object is told to forget its session (on the next method call, or when collected).
 * Collecting the box frees the object.  A binding describes its type with a zkl_recipe_type and
 * puts a zkl_recipe_box first in its own box type (which may add fields after it).
 */
#ifndef ZKL_RECIPE_BINDING_H
#define ZKL_RECIPE_BINDING_H

#include <stddef.h>

#include "compat.h"
#include "session_binding.h"

typedef struct {
    void *obj;                /* the recipe object; NULL once freed (or not made yet) */
    zkl_session *const *slot; /* the session userdata's slot; NULL once the session went */
} zkl_recipe_box;

typedef struct {
    const char *metatable;             /* e.g. "zklua.core.Lock" */
    const char *what;                  /* e.g. "lock": "the lock is freed" */
    void (*forget_session)(void *obj); /* the recipe's zkl_X_forget_session */
    void (*free)(void *obj);           /* the recipe's zkl_X_free */
} zkl_recipe_type;

/* The slot of the session userdata at idx 1 (a constructor's first argument); raises when
 * that session is closed. */
zkl_session *const *zkl_recipe_session(lua_State *L);

/* Pushes a new box of size bytes (a zkl_recipe_box first, all zeroed) with t's metatable,
 * keeping the session userdata at idx 1 as its user value; returns it. */
void *zkl_recipe_box_new(lua_State *L, const zkl_recipe_type *t, size_t size);

/* Fills box (on top of the stack) with obj, just made by the recipe's constructor, and slot;
 * raises "cannot make a <what>: <strerror(errno)>" when obj is NULL.  Returns 1 (the box). */
int zkl_recipe_box_set(lua_State *L, const zkl_recipe_type *t, zkl_recipe_box *box, void *obj,
                       zkl_session *const *slot);

/* The box at idx 1 (raises if it is not one of t or is freed), its object told to forget a
 * session that was closed meanwhile. */
zkl_recipe_box *zkl_recipe_check(lua_State *L, const zkl_recipe_type *t);

/* What starting an operation returns: r == 0 -> true; otherwise nil and a word for errno:
 * EISCONN -> isconn (when not NULL), EALREADY -> "busy", anything else -> "closed". */
int zkl_recipe_started(lua_State *L, int r, const char *isconn);

/* The identifier argument at idx (a string, "" when absent) and its length in *len; raises when
 * it is longer than a znode's data can say (2^31 - 1 bytes). */
const char *zkl_recipe_identifier(lua_State *L, int idx, int *len);

/* What an outcome method returns: the outcome's name and the rc it came with.  Returns 2. */
int zkl_recipe_outcome(lua_State *L, const char *name, int rc);

/* Methods that call fn on the object at idx 1 (check(L)) and push what it returns: nothing, a
 * boolean, an integer, a string, or the name names[] gives the enum value. */
#define ZKL_RECIPE_VOID(name, check, fn)                                                        \
    static int name(lua_State *L)                                                               \
    {                                                                                           \
        fn(check(L));                                                                           \
        return 0;                                                                               \
    }
#define ZKL_RECIPE_PUSH_(name, check, fn, push)                                                 \
    static int name(lua_State *L)                                                               \
    {                                                                                           \
        push(L, fn(check(L)));                                                                  \
        return 1;                                                                               \
    }
#define ZKL_RECIPE_BOOLEAN(name, check, fn) ZKL_RECIPE_PUSH_(name, check, fn, lua_pushboolean)
#define ZKL_RECIPE_INTEGER(name, check, fn) ZKL_RECIPE_PUSH_(name, check, fn, lua_pushinteger)
#define ZKL_RECIPE_STRING(name, check, fn) ZKL_RECIPE_PUSH_(name, check, fn, lua_pushstring)
#define ZKL_RECIPE_NAME(name, check, fn, names)                                                 \
    static int name(lua_State *L)                                                               \
    {                                                                                           \
        lua_pushstring(L, (names)[fn(check(L))]);                                               \
        return 1;                                                                               \
    }

/* Registers t's metatable (methods as __index, a __gc freeing the object) and sets
 * module[ctor_name] = ctor; the module table is on top of the stack. */
void zkl_recipe_register(lua_State *L, const zkl_recipe_type *t, const luaL_Reg *methods,
                         const char *ctor_name, lua_CFunction ctor);

#endif
