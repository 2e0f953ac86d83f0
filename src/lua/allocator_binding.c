/*
 * allocator_binding.c — the zklua.core allocator userdata: a thin wrapper over
 * src/recipes/partitioning/allocator.c, and the JSON helpers the Lua half needs for the set.
 *
 *   core.allocator(session, path, identifier, weight, rejoin, acl) -> allocator
 *   a:start(seed_json) / a:leave() -> true, or nil and "busy" | "closed"
 *   a:phase() -> "idle" | "joining" | "running" | "leaving";  a:rc(), a:ready(), a:fresh(),
 *   a:settled() (zkl_allocator_settled),
 *   a:is_leader(), a:id(), a:inflight(), a:publish_rc(), a:epoch()
 *   a:set_settle(ms) (zkl_allocator_set_settle)
 *   a:take() -> acquired items, their tokens, items to release, items lost, compute epoch|nil
 *   a:released(item) -> true when that item was being released
 *   a:members() -> sorted identifiers, {identifier -> weight}
 *   a:partitions() -> sorted items
 *   a:assignment() -> generation, {member -> {items}}, {members it was computed for}
 *     (generation only: none)
 *   a:generation(); a:moved() -> the items that changed owner since the last call
 *   a:touch(); a:publish(epoch, {member -> {items}} | nil) -> true (published), false
 *     (unchanged), or nil and "stale" | "invalid" | "too big" | "out of memory"
 *   core.allocator_encode_items(list) -> JSON text, or nil and the 1-based index of an item
 *     that is not a non-empty UTF-8 string without NUL
 *   core.allocator_canonical_items(list) -> the list sorted by bytes without repeats, and its
 *     JSON text; or nil and the index of a bad item (as encode_items)
 *   core.allocator_decode_items(text) -> list, or nil and why
 *   core.allocator_node_name(s) -> s escaped for a znode name
 *   core.allocator_max_node(node_path) -> the largest data the allocator writes there
 *   core.allocator_claim_window: the item ops an allocator has in flight at most
 *   core.allocator_chunk_header(data), allocator_new_tag(version), allocator_chunk_stale(name,
 *     tag), allocator_cut_items(list, limit): chunked sets (src/recipes/partitioning/allocator_chunks.c)
 *
 * The logic is in allocator.c; lua/zklua/recipes/partitioning/allocator.lua runs the hooks and the strategy
 * when told to (a notify event, ZKL_ALLOCATOR_NOTIFY_NEWS, target a:id()): no Lua is called
 * from C.  Contract (SUSPENDED, LOST, stop): src/recipes/partitioning/allocator.h; LOST shows here in the
 * next take() (items lost) and in the phase.  Collecting the userdata frees the allocator with
 * zkl_allocator_free() (a running one gives its items up in the background).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../recipes/partitioning/allocator.h"
#include "../recipes/partitioning/allocator_private.h"
#include "bindings.h"
#include "convert.h"
#include "recipe_binding.h"

static void forget_session(void *obj) { zkl_allocator_forget_session(obj); }
static void free_allocator(void *obj) { zkl_allocator_free(obj); }

static const zkl_recipe_type ALLOCATOR_TYPE = {"zklua.core.Allocator", "allocator",
                                               forget_session, free_allocator};

static zkl_allocator *check_allocator(lua_State *L)
{
    return zkl_recipe_check(L, &ALLOCATOR_TYPE)->obj;
}

/* A string that may name an item or a member: non-empty UTF-8 without NUL. */
static int good_name(const char *s, size_t n)
{
    return n > 0 && memchr(s, '\0', n) == NULL && zkl_utf8_valid(s, n);
}

/* core.allocator(session, path, identifier, weight, rejoin, acl) */
static int allocator_new(lua_State *L)
{
    zkl_session *const *slot = zkl_recipe_session(L);
    const char *path = luaL_checkstring(L, 2);
    size_t len;
    const char *identifier = luaL_checklstring(L, 3, &len);
    if (!good_name(identifier, len))
        return luaL_argerror(L, 3, "identifier must be non-empty UTF-8 without NUL");
    lua_Number weight = luaL_checknumber(L, 4);
    if (!(weight > 0) || !isfinite(weight))
        return luaL_argerror(L, 4, "weight must be a finite number > 0");
    int rejoin = lua_toboolean(L, 5);
    const struct ACL_vector *acl = zkl_opt_acl_list(L, 6, "acl");
    zkl_recipe_box *box = zkl_recipe_box_new(L, &ALLOCATOR_TYPE, sizeof *box);
    return zkl_recipe_box_set(L, &ALLOCATOR_TYPE, box,
                              zkl_allocator_new(*slot, path, identifier, weight, rejoin, acl),
                              slot);
}

static int allocator_start(lua_State *L)
{
    zkl_allocator *a = check_allocator(L);
    size_t len;
    const char *seed = luaL_checklstring(L, 2, &len);
    return zkl_recipe_started(L, zkl_allocator_start(a, seed, len), NULL);
}

static int allocator_leave(lua_State *L)
{
    return zkl_recipe_started(L, zkl_allocator_leave(check_allocator(L)), NULL);
}

ZKL_RECIPE_NAME(allocator_phase, check_allocator, zkl_allocator_phase_of, zkl_allocator_phase_names)
ZKL_RECIPE_INTEGER(allocator_rc, check_allocator, zkl_allocator_rc)
ZKL_RECIPE_BOOLEAN(allocator_ready, check_allocator, zkl_allocator_ready)
ZKL_RECIPE_BOOLEAN(allocator_fresh, check_allocator, zkl_allocator_fresh)
ZKL_RECIPE_BOOLEAN(allocator_settled, check_allocator, zkl_allocator_settled)
ZKL_RECIPE_BOOLEAN(allocator_is_leader, check_allocator, zkl_allocator_is_leader)
ZKL_RECIPE_INTEGER(allocator_id, check_allocator, zkl_allocator_id)
ZKL_RECIPE_INTEGER(allocator_inflight, check_allocator, zkl_allocator_inflight)
ZKL_RECIPE_INTEGER(allocator_publish_rc, check_allocator, zkl_allocator_publish_rc)
ZKL_RECIPE_INTEGER(allocator_epoch, check_allocator, zkl_allocator_epoch)

static int allocator_set_settle(lua_State *L)
{
    zkl_allocator *a = check_allocator(L);
    lua_Integer ms = luaL_checkinteger(L, 2);
    luaL_argcheck(L, ms >= 0 && ms <= 3600000, 2, "settle must be 0 to 3600000 ms");
    zkl_allocator_set_settle(a, (long)ms);
    return 0;
}

static void push_strings(lua_State *L, char **list, size_t n)
{
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, list[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

/* The news as Lua values; the C news is freed even when a push raises (out of memory):
 * it lives in a userdata whose __gc frees it. */
static int news_gc(lua_State *L)
{
    zkl_allocator_news_free(lua_touserdata(L, 1));
    return 0;
}

static int allocator_take(lua_State *L)
{
    zkl_allocator *a = check_allocator(L);
    zkl_allocator_news *news = lua_newuserdatauv(L, sizeof *news, 0);
    memset(news, 0, sizeof *news);
    if (luaL_newmetatable(L, "zklua.core.AllocatorNews")) {
        lua_pushcfunction(L, news_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    if (zkl_allocator_take(a, news) != 0)
        return luaL_error(L, "allocator: out of memory");
    lua_createtable(L, (int)news->acquired_count, 0);
    lua_createtable(L, (int)news->acquired_count, 0);
    for (size_t i = 0; i < news->acquired_count; i++) {
        lua_pushstring(L, news->acquired[i].item);
        lua_rawseti(L, -3, (lua_Integer)i + 1);
        lua_pushinteger(L, (lua_Integer)news->acquired[i].token);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    push_strings(L, news->release, news->release_count);
    push_strings(L, news->lost, news->lost_count);
    if (news->compute)
        lua_pushinteger(L, (lua_Integer)news->compute);
    else
        lua_pushnil(L);
    zkl_allocator_news_free(news);
    return 5;
}

static int allocator_released(lua_State *L)
{
    zkl_allocator *a = check_allocator(L);
    lua_pushboolean(L, zkl_allocator_released(a, luaL_checkstring(L, 2)));
    return 1;
}

static int allocator_members(lua_State *L)
{
    zkl_allocator *a = check_allocator(L);
    size_t n = zkl_allocator_member_count(a);
    lua_createtable(L, (int)n, 0);
    lua_createtable(L, 0, (int)n);
    for (size_t i = 0; i < n; i++) {
        double weight;
        const char *id = zkl_allocator_member(a, i, &weight);
        lua_pushstring(L, id);
        lua_rawseti(L, -3, (lua_Integer)i + 1);
        lua_pushnumber(L, weight);
        lua_setfield(L, -2, id);
    }
    return 2;
}

static int allocator_partitions(lua_State *L)
{
    zkl_allocator *a = check_allocator(L);
    size_t n = zkl_allocator_item_count(a);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, zkl_allocator_item(a, i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int allocator_assignment(lua_State *L)
{
    int64_t generation;
    const zkl_json *members;
    const zkl_json *obj = zkl_allocator_assignment(check_allocator(L), &generation, &members);
    lua_pushinteger(L, (lua_Integer)generation);
    if (!obj)
        return 1;
    lua_createtable(L, 0, (int)obj->count);
    for (size_t i = 0; i < obj->count; i++) {
        const zkl_json *items = obj->values[i];
        lua_createtable(L, (int)items->count, 0);
        for (size_t j = 0; j < items->count; j++) {
            lua_pushstring(L, items->values[j]->string); /* canonical: strings only */
            lua_rawseti(L, -2, (lua_Integer)j + 1);
        }
        lua_setfield(L, -2, obj->keys[i]);
    }
    size_t n = members ? members->count : 0;
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) { /* canonical: strings only */
        lua_pushstring(L, members->values[i]->string);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 3;
}

ZKL_RECIPE_VOID(allocator_touch, check_allocator, zkl_allocator_touch)

static int allocator_generation(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)zkl_allocator_generation(check_allocator(L)));
    return 1;
}

/* a:moved() -> the items that changed owner since the last call (sorted as C found them) */
static int allocator_moved(lua_State *L)
{
    zkl_allocator *a = check_allocator(L);
    char **list;
    size_t n;
    if (zkl_allocator_moved(a, &list, &n) != 0)
        return luaL_error(L, "allocator: out of memory");
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, list[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
    return 1;
}

/* Appends the JSON array of the strings in the table at idx: 0, or the 1-based index of the
 * first entry that is not a good name (-1: not a table of them at all). */
static lua_Integer encode_list(lua_State *L, int idx, zkl_json_buf *b)
{
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    zkl_json_buf_raw(b, "[", 1);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        size_t len;
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        if (!s || !good_name(s, len)) {
            lua_pop(L, 1);
            return i;
        }
        if (i > 1)
            zkl_json_buf_raw(b, ",", 1);
        zkl_json_buf_string(b, s, len);
        lua_pop(L, 1);
    }
    zkl_json_buf_raw(b, "]", 1);
    return 0;
}

/* The JSON buffer lives in a userdata whose __gc frees it, so a raise cannot leak it. */
static int buf_gc(lua_State *L)
{
    zkl_json_buf_free(lua_touserdata(L, 1));
    return 0;
}

static zkl_json_buf *new_buf(lua_State *L)
{
    zkl_json_buf *b = lua_newuserdatauv(L, sizeof *b, 0);
    zkl_json_buf_init(b);
    if (luaL_newmetatable(L, "zklua.core.JsonBuffer")) {
        lua_pushcfunction(L, buf_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return b;
}

/* Encodes {member -> {items}} at idx; 0, or -1 when it is not one. */
static int encode_assignment(lua_State *L, int idx, zkl_json_buf *b)
{
    zkl_json_buf_raw(b, "{", 1);
    int first = 1;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        size_t len;
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &len) : NULL;
        if (!key || !good_name(key, len) || lua_type(L, -1) != LUA_TTABLE) {
            lua_pop(L, 2);
            return -1;
        }
        if (!first)
            zkl_json_buf_raw(b, ",", 1);
        first = 0;
        zkl_json_buf_string(b, key, len);
        zkl_json_buf_raw(b, ":", 1);
        if (encode_list(L, lua_gettop(L), b) != 0) {
            lua_pop(L, 2);
            return -1;
        }
        lua_pop(L, 1);
    }
    zkl_json_buf_raw(b, "}", 1);
    return 0;
}

static int allocator_publish(lua_State *L)
{
    zkl_allocator *a = check_allocator(L);
    uint64_t epoch = (uint64_t)luaL_checkinteger(L, 2);
    int r;
    if (lua_isnoneornil(L, 3)) {
        r = zkl_allocator_publish(a, epoch, NULL, 0);
    } else {
        luaL_checktype(L, 3, LUA_TTABLE);
        zkl_json_buf *b = new_buf(L);
        if (encode_assignment(L, 3, b) != 0) {
            lua_pushnil(L);
            lua_pushliteral(L, "invalid");
            return 2;
        }
        if (b->failed)
            return luaL_error(L, "allocator: out of memory");
        r = zkl_allocator_publish(a, epoch, b->data, b->len);
    }
    if (r >= 0) {
        lua_pushboolean(L, r == 1);
        return 1;
    }
    lua_pushnil(L);
    lua_pushstring(L, errno == ESTALE    ? "stale"
                      : errno == EMSGSIZE ? "too big"
                      : errno == EINVAL   ? "invalid"
                                          : "out of memory");
    return 2;
}

/* core.allocator_encode_items(list) -> text, or nil and the index of a bad item */
static int encode_items(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    zkl_json_buf *b = new_buf(L);
    lua_Integer bad = encode_list(L, 1, b);
    if (bad) {
        lua_pushnil(L);
        lua_pushinteger(L, bad);
        return 2;
    }
    if (b->failed)
        return luaL_error(L, "allocator: out of memory");
    lua_pushlstring(L, b->data, b->len);
    return 1;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* core.allocator_canonical_items(list) -> the set as stored (sorted by bytes, as the C side
 * orders items, without repeats) and its JSON text, or nil and the index of a bad item.  One
 * pass in C: a member's seed of 10k items cost about 13 ms in Lua (checked, sorted, encoded
 * twice), and a hundred members of one process start one after the other. */
static int canonical_items(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    if ((size_t)n > SIZE_MAX / sizeof(const char *) - 1)
        return luaL_error(L, "allocator: too many items");
    /* the strings stay referenced by the table at 1, which no Lua code runs to change */
    const char **names = lua_newuserdatauv(L, ((size_t)n + 1) * sizeof *names, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        size_t len;
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        lua_pop(L, 1);
        if (!s || !good_name(s, len)) {
            lua_pushnil(L);
            lua_pushinteger(L, i);
            return 2;
        }
        names[i - 1] = s;
    }
    qsort(names, (size_t)n, sizeof *names, compare_names);
    lua_createtable(L, (int)(n < INT_MAX ? n : INT_MAX), 0);
    int list = lua_gettop(L);
    zkl_json_buf *b = new_buf(L);
    zkl_json_buf_raw(b, "[", 1);
    lua_Integer kept = 0;
    for (lua_Integer i = 0; i < n; i++) {
        if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
            continue;
        size_t len = strlen(names[i]); /* good_name: no NUL inside */
        if (kept > 0)
            zkl_json_buf_raw(b, ",", 1);
        zkl_json_buf_string(b, names[i], len);
        lua_pushlstring(L, names[i], len);
        lua_rawseti(L, list, ++kept);
    }
    zkl_json_buf_raw(b, "]", 1);
    if (b->failed)
        return luaL_error(L, "allocator: out of memory");
    lua_pushvalue(L, list);
    lua_pushlstring(L, b->data, b->len);
    return 2;
}

static int tree_gc(lua_State *L)
{
    zkl_json **tree = lua_touserdata(L, 1);
    zkl_json_free(*tree);
    *tree = NULL;
    return 0;
}

/* core.allocator_decode_items(text) -> list, or nil and why */
static int decode_items(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    zkl_json **tree = lua_newuserdatauv(L, sizeof *tree, 0);
    *tree = NULL;
    if (luaL_newmetatable(L, "zklua.core.JsonTree")) {
        lua_pushcfunction(L, tree_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    const char *error = NULL;
    *tree = zkl_json_parse(text, len, &error);
    if (!*tree || (*tree)->type != ZKL_JSON_ARRAY) {
        lua_pushnil(L);
        lua_pushstring(L, *tree ? "not a JSON array" : error);
        return 2;
    }
    const zkl_json *list = *tree;
    lua_createtable(L, (int)list->count, 0);
    for (size_t i = 0; i < list->count; i++) {
        if (list->values[i]->type != ZKL_JSON_STRING) {
            lua_pushnil(L);
            lua_pushliteral(L, "an entry is not a string");
            return 2;
        }
        lua_pushstring(L, list->values[i]->string);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int node_name(lua_State *L)
{
    char *name = zkl_allocator_node_name(luaL_checkstring(L, 1));
    if (!name)
        return luaL_error(L, "out of memory");
    lua_pushstring(L, name);
    free(name);
    return 1;
}

static int max_node(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)zkl_allocator_max_node(luaL_checkstring(L, 1)));
    return 1;
}

/* core.allocator_chunk_header(data) -> "none" | "chunked" | "newer" | "bad", tag, chunks,
 * format: what a set's or assignment's node holds (allocator_chunks.c) */
static int chunk_header(lua_State *L)
{
    size_t len;
    const char *data = luaL_optlstring(L, 1, "", &len);
    zkl_alloc_header h;
    int kind = zkl_alloc_chunk_header(data, (int)len, &h);
    zkl_json_free(h.tree);
    lua_pushstring(L, kind == ZKL_CHUNKED_NONE  ? "none"
                      : kind == ZKL_CHUNKED_YES ? "chunked"
                      : kind == ZKL_CHUNKED_NEWER ? "newer"
                                                  : "bad");
    lua_pushstring(L, h.tag);
    lua_pushinteger(L, (lua_Integer)h.chunks);
    lua_pushinteger(L, h.format);
    return 4;
}

/* core.allocator_new_tag(replaced_version) -> a fresh tag for a writer's chunks */
static int new_tag(lua_State *L)
{
    char tag[ZKL_TAG_MAX];
    if (zkl_alloc_new_tag(tag, (int)luaL_checkinteger(L, 1)) != 0)
        return luaL_error(L, "allocator: cannot read /dev/urandom for a chunk tag");
    lua_pushstring(L, tag);
    return 1;
}

/* core.allocator_chunk_stale(name, tag) -> whether the writer that committed tag deletes name */
static int chunk_stale(lua_State *L)
{
    lua_pushboolean(L, zkl_alloc_chunk_stale(luaL_checkstring(L, 1), luaL_checkstring(L, 2)));
    return 1;
}

/* core.allocator_cut_items(list, limit) -> {json array texts of at most limit bytes}, or nil
 * and the 1-based index of a bad item */
static int cut_items(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    size_t limit = (size_t)luaL_checkinteger(L, 2);
    size_t n = (size_t)lua_rawlen(L, 1);
    const char **items = lua_newuserdatauv(L, (n ? n : 1) * sizeof *items, 0);
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, 1, (lua_Integer)i + 1);
        size_t len;
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        lua_pop(L, 1); /* (the list keeps the string alive) */
        if (!s || !good_name(s, len)) {
            lua_pushnil(L);
            lua_pushinteger(L, (lua_Integer)i + 1);
            return 2;
        }
        items[i] = s;
    }
    char **chunks;
    size_t count;
    if (zkl_alloc_cut_array(items, n, limit, &chunks, &count) != 0)
        return luaL_error(L, "allocator: an item over a chunk's size, or out of memory");
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        lua_pushstring(L, chunks[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    for (size_t i = 0; i < count; i++)
        free(chunks[i]);
    free(chunks);
    return 1;
}

static const luaL_Reg allocator_methods[] = {
    {"start", allocator_start},
    {"leave", allocator_leave},
    {"phase", allocator_phase},
    {"rc", allocator_rc},
    {"ready", allocator_ready},
    {"fresh", allocator_fresh},
    {"is_leader", allocator_is_leader},
    {"settled", allocator_settled},
    {"id", allocator_id},
    {"inflight", allocator_inflight},
    {"publish_rc", allocator_publish_rc},
    {"epoch", allocator_epoch},
    {"set_settle", allocator_set_settle},
    {"take", allocator_take},
    {"released", allocator_released},
    {"members", allocator_members},
    {"partitions", allocator_partitions},
    {"assignment", allocator_assignment},
    {"touch", allocator_touch},
    {"generation", allocator_generation},
    {"moved", allocator_moved},
    {"publish", allocator_publish},
    {NULL, NULL},
};

void zkl_register_allocator(lua_State *L)
{
    zkl_recipe_register(L, &ALLOCATOR_TYPE, allocator_methods, "allocator", allocator_new);
    static const luaL_Reg helpers[] = {
        {"allocator_encode_items", encode_items},
        {"allocator_canonical_items", canonical_items},
        {"allocator_decode_items", decode_items},
        {"allocator_node_name", node_name},
        {"allocator_max_node", max_node},
        {"allocator_chunk_header", chunk_header},
        {"allocator_new_tag", new_tag},
        {"allocator_chunk_stale", chunk_stale},
        {"allocator_cut_items", cut_items},
        {NULL, NULL},
    };
    luaL_setfuncs(L, helpers, 0);
    lua_pushinteger(L, ZKL_ALLOCATOR_CLAIM_WINDOW);
    lua_setfield(L, -2, "allocator_claim_window");
}
