/*
 * constants.c — every number and name the Lua half shares with C, exported once, as luv
 * exports its constants, so that no Lua file copies one by hand:
 *
 *   core.codes.<NAME>              ZooKeeper's return codes (ZOK, ZNONODE, ZCLOSING = -116, ...)
 *   core.notify.LOST               the notify code every recipe sends when its holder lost what
 *                                  it held with the session (lock, party, barrier, ...: all 1)
 *   core.notify.<recipe>.<NAME>    each recipe's notify codes (lock.DECIDED, tree_cache.EVENTS, ...)
 *   core.names.<recipe>.<kind>     the names the binding gives a recipe's enums, in enum order
 *                                  (value v is names[v + 1]): phase, outcome, state, failure, event
 *
 * Guarantees: each name table below is the only one for its enum (the bindings push from it),
 * each name written once (NAME_TABLES), with designated initializers (the order follows the
 * enum) and checked at compile time to name every value (_Static_assert on its count); every
 * recipe's LOST notify is checked to be core.notify.LOST.
 */
#include <zookeeper/zookeeper.h>

#include "../recipes/partitioning/allocator.h"
#include "../recipes/barrier.h"
#include "../recipes/counter.h"
#include "../recipes/item_queue.h"
#include "../recipes/lease.h"
#include "../recipes/lock.h"
#include "../recipes/locking_queue.h"
#include "../recipes/party.h"
#include "../recipes/patient_children.h"
#include "../recipes/persistent_node.h"
#include "../recipes/semaphore.h"
#include "../recipes/partitioning/set_partitioner.h"
#include "../recipes/tree_cache.h"
#include "bindings.h"

#define COUNT(table) ((int)(sizeof(table) / sizeof((table)[0])))

/* NAME_TABLES(T): every enum whose names Lua sees, each named once, as
 * T(recipe, kind, table, last value, [value] = "name", ...). The table is defined from it
 * with designated initializers (the order follows the enum), checked at compile time to name
 * every value up to `last`, and listed in core.names.<recipe>.<kind>. */
#define NAME_TABLES(T)                                                                          \
    T(lock, phase, zkl_lock_phase_names, ZKL_LOCK_ABANDONING, [ZKL_LOCK_IDLE] = "idle",         \
      [ZKL_LOCK_ACQUIRING] = "acquiring", [ZKL_LOCK_HELD] = "held",                             \
      [ZKL_LOCK_RELEASING] = "releasing", [ZKL_LOCK_ABANDONING] = "abandoning")                 \
    T(lock, outcome, zkl_lock_outcome_names, ZKL_LOCK_FAILED, [ZKL_LOCK_PENDING] = "pending",   \
      [ZKL_LOCK_GOT] = "got", [ZKL_LOCK_BUSY] = "busy", [ZKL_LOCK_CANCELLED] = "cancelled",     \
      [ZKL_LOCK_GAVE_UP] = "gave_up", [ZKL_LOCK_FAILED] = "failed")                             \
    T(semaphore, phase, zkl_semaphore_phase_names, ZKL_SEM_ABANDONING, [ZKL_SEM_IDLE] = "idle", \
      [ZKL_SEM_ACQUIRING] = "acquiring", [ZKL_SEM_HELD] = "held",                               \
      [ZKL_SEM_RELEASING] = "releasing", [ZKL_SEM_ABANDONING] = "abandoning")                   \
    T(semaphore, outcome, zkl_semaphore_outcome_names, ZKL_SEM_FAILED,                          \
      [ZKL_SEM_PENDING] = "pending", [ZKL_SEM_GOT] = "got", [ZKL_SEM_BUSY] = "busy",            \
      [ZKL_SEM_CANCELLED] = "cancelled", [ZKL_SEM_GAVE_UP] = "gave_up",                         \
      [ZKL_SEM_MISMATCH] = "mismatch", [ZKL_SEM_FAILED] = "failed")                             \
    T(party, phase, zkl_party_phase_names, ZKL_PARTY_LEAVING, [ZKL_PARTY_IDLE] = "idle",        \
      [ZKL_PARTY_JOINING] = "joining", [ZKL_PARTY_JOINED] = "joined",                           \
      [ZKL_PARTY_LEAVING] = "leaving")                                                          \
    T(persistent_node, phase, zkl_pnode_phase_names, ZKL_PNODE_FAILED,                          \
      [ZKL_PNODE_IDLE] = "idle", [ZKL_PNODE_RUNNING] = "running",                               \
      [ZKL_PNODE_STOPPING] = "stopping", [ZKL_PNODE_FAILED] = "failed")                         \
    T(barrier, outcome, zkl_barrier_outcome_names, ZKL_BARRIER_FAILED,                          \
      [ZKL_BARRIER_PENDING] = "pending", [ZKL_BARRIER_DONE] = "done",                           \
      [ZKL_BARRIER_GAVE_UP] = "gave_up", [ZKL_BARRIER_FAILED] = "failed")                       \
    T(counter, outcome, zkl_counter_outcome_names, ZKL_COUNTER_NOT_SET,                         \
      [ZKL_COUNTER_OK] = "ok", [ZKL_COUNTER_FAILED] = "failed",                                 \
      [ZKL_COUNTER_BAD_DATA] = "bad_data", [ZKL_COUNTER_OVERFLOW] = "overflow",                 \
      [ZKL_COUNTER_NOT_SET] = "not_set")                                                        \
    T(lease, phase, zkl_lease_phase_names, ZKL_LEASE_FINISHING, [ZKL_LEASE_IDLE] = "idle",      \
      [ZKL_LEASE_WORKING] = "working", [ZKL_LEASE_NEEDS_TIME] = "needs_time",                   \
      [ZKL_LEASE_FINISHING] = "finishing")                                                      \
    T(lease, outcome, zkl_lease_outcome_names, ZKL_LEASE_FAILED,                                \
      [ZKL_LEASE_PENDING] = "pending", [ZKL_LEASE_OBTAINED] = "obtained",                       \
      [ZKL_LEASE_HELD_ELSEWHERE] = "held_elsewhere",                                            \
      [ZKL_LEASE_OTHER_VERSION] = "other_version", [ZKL_LEASE_BAD_RECORD] = "bad_record",       \
      [ZKL_LEASE_ABANDONED] = "abandoned", [ZKL_LEASE_FAILED] = "failed")                       \
    T(locking_queue, phase, zkl_locking_queue_phase_names, ZKL_LQ_ABANDONING,                   \
      [ZKL_LQ_IDLE] = "idle", [ZKL_LQ_GETTING] = "getting", [ZKL_LQ_HOLDING] = "holding",       \
      [ZKL_LQ_CONSUMING] = "consuming", [ZKL_LQ_RELEASING] = "releasing",                       \
      [ZKL_LQ_ABANDONING] = "abandoning")                                                       \
    T(locking_queue, outcome, zkl_locking_queue_outcome_names, ZKL_LQ_FAILED,                   \
      [ZKL_LQ_PENDING] = "pending", [ZKL_LQ_GOT] = "got", [ZKL_LQ_CONSUMED] = "consumed",       \
      [ZKL_LQ_RELEASED] = "released", [ZKL_LQ_NOT_HELD] = "not_held",                           \
      [ZKL_LQ_GAVE_UP] = "gave_up", [ZKL_LQ_FAILED] = "failed")                                 \
    T(item_queue, phase, zkl_item_queue_phase_names, ZKL_ITEM_QUEUE_GETTING,                    \
      [ZKL_ITEM_QUEUE_IDLE] = "idle", [ZKL_ITEM_QUEUE_GETTING] = "getting")                     \
    T(item_queue, outcome, zkl_item_queue_outcome_names, ZKL_ITEM_QUEUE_FAILED,                 \
      [ZKL_ITEM_QUEUE_PENDING] = "pending", [ZKL_ITEM_QUEUE_GOT] = "got",                       \
      [ZKL_ITEM_QUEUE_EMPTY] = "empty", [ZKL_ITEM_QUEUE_FAILED] = "failed")                     \
    T(patient_children, phase, zkl_patient_phase_names, ZKL_PATIENT_SETTLED,                    \
      [ZKL_PATIENT_IDLE] = "idle", [ZKL_PATIENT_SETTLING] = "settling",                         \
      [ZKL_PATIENT_SETTLED] = "settled")                                                        \
    T(allocator, phase, zkl_allocator_phase_names, ZKL_ALLOCATOR_LEAVING,                       \
      [ZKL_ALLOCATOR_IDLE] = "idle", [ZKL_ALLOCATOR_JOINING] = "joining",                       \
      [ZKL_ALLOCATOR_RUNNING] = "running", [ZKL_ALLOCATOR_LEAVING] = "leaving")                 \
    T(set_partitioner, state, zkl_sp_state_names, ZKL_SP_FAILURE,                               \
      [ZKL_SP_ALLOCATING] = "ALLOCATING", [ZKL_SP_ACQUIRED] = "ACQUIRED",                       \
      [ZKL_SP_RELEASE] = "RELEASE", [ZKL_SP_FAILURE] = "FAILURE")                               \
    T(set_partitioner, failure, zkl_sp_failure_names, ZKL_SP_FAILED_PARTITION,                  \
      [ZKL_SP_NOT_FAILED] = "none", [ZKL_SP_FAILED_LOST] = "lost",                              \
      [ZKL_SP_FAILED_CLOSED] = "closed", [ZKL_SP_FAILED_FINISHED] = "finished",                 \
      [ZKL_SP_FAILED_CONFLICT] = "conflict", [ZKL_SP_FAILED_ERROR] = "error",                   \
      [ZKL_SP_FAILED_PARTITION] = "partition")                                                  \
    T(tree_cache, phase, zkl_tree_cache_phase_names, ZKL_TREE_CLOSED,                           \
      [ZKL_TREE_LATENT] = "latent", [ZKL_TREE_STARTED] = "started",                             \
      [ZKL_TREE_CLOSED] = "closed")                                                             \
    T(tree_cache, event, zkl_tree_event_names, ZKL_TREE_FAULT,                                  \
      [ZKL_TREE_NODE_ADDED] = "NODE_ADDED", [ZKL_TREE_NODE_UPDATED] = "NODE_UPDATED",           \
      [ZKL_TREE_NODE_REMOVED] = "NODE_REMOVED",                                                 \
      [ZKL_TREE_CONNECTION_SUSPENDED] = "CONNECTION_SUSPENDED",                                 \
      [ZKL_TREE_CONNECTION_RECONNECTED] = "CONNECTION_RECONNECTED",                             \
      [ZKL_TREE_CONNECTION_LOST] = "CONNECTION_LOST", [ZKL_TREE_INITIALIZED] = "INITIALIZED",   \
      [ZKL_TREE_FAULT] = "FAULT")

#define DEFINE_NAMES(recipe, kind, table, last, ...)                                           \
    const char *const table[] = {__VA_ARGS__};                                                  \
    _Static_assert(COUNT(table) == (last) + 1, #table " must name every value up to " #last);
NAME_TABLES(DEFINE_NAMES)

/* ---------------------------------------------------------------- numbers */

typedef struct {
    const char *name;
    int value;
} named_int;

#define CODE(c) {#c, c}
static const named_int CODES[] = {
    CODE(ZOK),
    CODE(ZSYSTEMERROR),
    CODE(ZRUNTIMEINCONSISTENCY),
    CODE(ZDATAINCONSISTENCY),
    CODE(ZCONNECTIONLOSS),
    CODE(ZMARSHALLINGERROR),
    CODE(ZUNIMPLEMENTED),
    CODE(ZOPERATIONTIMEOUT),
    CODE(ZBADARGUMENTS),
    CODE(ZINVALIDSTATE),
    CODE(ZNEWCONFIGNOQUORUM),
    CODE(ZRECONFIGINPROGRESS),
    CODE(ZSSLCONNECTIONERROR),
    CODE(ZAPIERROR),
    CODE(ZNONODE),
    CODE(ZNOAUTH),
    CODE(ZBADVERSION),
    CODE(ZNOCHILDRENFOREPHEMERALS),
    CODE(ZNODEEXISTS),
    CODE(ZNOTEMPTY),
    CODE(ZSESSIONEXPIRED),
    CODE(ZINVALIDCALLBACK),
    CODE(ZINVALIDACL),
    CODE(ZAUTHFAILED),
    CODE(ZCLOSING),
    CODE(ZNOTHING),
    CODE(ZSESSIONMOVED),
    CODE(ZNOTREADONLY),
    CODE(ZEPHEMERALONLOCALSESSION),
    CODE(ZNOWATCHER),
    CODE(ZRECONFIGDISABLED),
    CODE(ZSESSIONCLOSEDREQUIRESASLAUTH),
    CODE(ZTHROTTLEDOP),
};

/* Every recipe's "the holder lost it with the session" is the same code: zklua.recipes.lost
 * listens for it alone. */
enum { NOTIFY_LOST = ZKL_LOCK_NOTIFY_LOST };
_Static_assert((int)ZKL_PARTY_NOTIFY_LOST == (int)NOTIFY_LOST, "party's LOST notify differs");
_Static_assert((int)ZKL_BARRIER_NOTIFY_LOST == (int)NOTIFY_LOST, "barrier's LOST notify differs");
_Static_assert((int)ZKL_SEM_NOTIFY_LOST == (int)NOTIFY_LOST, "semaphore's LOST notify differs");
_Static_assert((int)ZKL_LOCKING_QUEUE_NOTIFY_LOST == (int)NOTIFY_LOST, "locking queue's LOST differs");
_Static_assert((int)ZKL_PNODE_NOTIFY_LOST == (int)NOTIFY_LOST, "persistent node's LOST differs");

static const named_int LOCK_NOTIFY[] = {
    {"LOST", ZKL_LOCK_NOTIFY_LOST}, {"DECIDED", ZKL_LOCK_NOTIFY_DECIDED}, {NULL, 0}};
static const named_int LOST_NOTIFY[] = {{"LOST", NOTIFY_LOST}, {NULL, 0}};
static const named_int PNODE_NOTIFY[] = {
    {"LOST", ZKL_PNODE_NOTIFY_LOST}, {"CREATED", ZKL_PNODE_NOTIFY_CREATED}, {NULL, 0}};
static const named_int ALLOCATOR_NOTIFY[] = {{"NEWS", ZKL_ALLOCATOR_NOTIFY_NEWS}, {NULL, 0}};
static const named_int PATIENT_NOTIFY[] = {{"SETTLED", ZKL_PATIENT_NOTIFY_SETTLED},
                                           {"CHANGED", ZKL_PATIENT_NOTIFY_CHANGED},
                                           {"FAILED", ZKL_PATIENT_NOTIFY_FAILED},
                                           {NULL, 0}};
static const named_int SP_NOTIFY[] = {
    {"PARTITION", ZKL_SP_NOTIFY_PARTITION}, {"STATE", ZKL_SP_NOTIFY_STATE}, {NULL, 0}};
static const named_int TREE_CACHE_NOTIFY[] = {{"EVENTS", ZKL_TREE_CACHE_NOTIFY_EVENTS},
                                              {NULL, 0}};

static const struct {
    const char *recipe;
    const named_int *codes;
} NOTIFY[] = {
    {"lock", LOCK_NOTIFY},
    {"party", LOST_NOTIFY},
    {"barrier", LOST_NOTIFY},
    {"semaphore", LOST_NOTIFY},
    {"locking_queue", LOST_NOTIFY},
    {"allocator", ALLOCATOR_NOTIFY},
    {"patient_children", PATIENT_NOTIFY},
    {"set_partitioner", SP_NOTIFY},
    {"tree_cache", TREE_CACHE_NOTIFY},
    {"persistent_node", PNODE_NOTIFY},
};

#define LIST_NAMES(recipe, kind, table, last, ...) {#recipe, #kind, table, COUNT(table)},
static const struct {
    const char *recipe, *kind;
    const char *const *names;
    int count;
} NAMES[] = {NAME_TABLES(LIST_NAMES)};

static void set_ints(lua_State *L, const named_int *ints, int n)
{
    for (int i = 0; i < n && ints[i].name; i++) {
        lua_pushinteger(L, ints[i].value);
        lua_setfield(L, -2, ints[i].name);
    }
}

/* t[key] on top of the stack: the table there, made when missing. */
static void sub_table(lua_State *L, const char *key)
{
    lua_getfield(L, -1, key);
    if (lua_istable(L, -1))
        return;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, key);
}

void zkl_register_constants(lua_State *L)
{
    lua_newtable(L);
    set_ints(L, CODES, COUNT(CODES));
    lua_setfield(L, -2, "codes");

    lua_newtable(L);
    lua_pushinteger(L, NOTIFY_LOST);
    lua_setfield(L, -2, "LOST");
    for (int i = 0; i < COUNT(NOTIFY); i++) {
        lua_newtable(L);
        set_ints(L, NOTIFY[i].codes, 16);
        lua_setfield(L, -2, NOTIFY[i].recipe);
    }
    lua_setfield(L, -2, "notify");

    lua_newtable(L);
    for (int i = 0; i < COUNT(NAMES); i++) {
        sub_table(L, NAMES[i].recipe);
        lua_createtable(L, NAMES[i].count, 0);
        for (int v = 0; v < NAMES[i].count; v++) {
            lua_pushstring(L, NAMES[i].names[v]);
            lua_rawseti(L, -2, v + 1);
        }
        lua_setfield(L, -2, NAMES[i].kind);
        lua_pop(L, 1);
    }
    lua_setfield(L, -2, "names");
}
