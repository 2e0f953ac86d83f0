/*
 * event.h — the records that travel from libzookeeper's threads to the owner thread.
 *
 * Every operation submitted through a session is one zkl_event from submission to delivery:
 * the completion callback fills its result in place (deep copies: the library frees what it
 * hands a callback when the callback returns), and the owner thread receives the same record
 * from zkl_session_next().  Watch firings and session state changes are events too.
 * Exactly one OP event is delivered for every op id a session hands out, whatever happens to
 * the connection: that is the guarantee futures stand on.
 */
#ifndef ZKL_EVENT_H
#define ZKL_EVENT_H

#include <stdint.h>
#include <zookeeper/zookeeper.h>

#include "route.h"

typedef enum {
    ZKL_EV_OP = 1,    /* an operation completed (or failed) */
    ZKL_EV_WATCH = 2, /* a one-shot watch fired */
    ZKL_EV_STATE = 3, /* kazoo-style connection state changed */
    ZKL_EV_SESSION = 4, /* internal: the library's raw session event, never delivered */
    ZKL_EV_NOTIFY = 5, /* a C recipe tells its Lua owner that something changed */
    ZKL_EV_TIMER = 6,  /* internal: a C timer is due (timers.h), never delivered */
    ZKL_EV_LOG = 7     /* a libzookeeper log line for this session (log.h) */
} zkl_event_kind;

typedef enum {
    ZKL_OP_CREATE,
    ZKL_OP_DELETE,
    ZKL_OP_EXISTS,
    ZKL_OP_GET,
    ZKL_OP_CHILDREN,
    ZKL_OP_SET,
    ZKL_OP_GET_ACL,
    ZKL_OP_SET_ACL,
    ZKL_OP_SYNC,
    ZKL_OP_MULTI,
    ZKL_OP_AUTH,
    ZKL_OP_RECONFIG
} zkl_op_type;

/* kazoo's KazooState. */
typedef enum { ZKL_LOST = 0, ZKL_CONNECTED = 1, ZKL_SUSPENDED = 2 } zkl_state;

/* KeeperState as kazoo names it; values are ours, not the library's. */
typedef enum {
    ZKL_CS_CONNECTING = 0,
    ZKL_CS_CONNECTED,
    ZKL_CS_CONNECTED_RO,
    ZKL_CS_EXPIRED_SESSION,
    ZKL_CS_AUTH_FAILED,
    ZKL_CS_CLOSED
} zkl_client_state;

typedef struct zkl_acl {
    int perms;
    char *scheme;
    char *id;
} zkl_acl;

/* A transaction: built by zkl_multi_add_*, owned by the op once submitted. */
typedef struct zkl_multi {
    int count, capacity;
    zoo_op_t *ops;
    zoo_op_result_t *results;
    struct Stat *stats;  /* one per op, filled for set ops */
    char **path_bufs;    /* one per op, filled with the created path for create ops */
    struct ACL_vector *acls; /* one per op: a copy of a create op's ACL */
    char **owned;        /* copies of paths and data the ops point into */
    int owned_count, owned_capacity;
} zkl_multi;

/* The arguments of an op (ops.c): borrowed from the caller while the op is handed to the
 * library at once, or the op's own copies (the owned_* fields) while it waits to be sent. */
typedef struct zkl_request {
    const char *path;
    const char *value; /* NULL: empty */
    int len;
    int version, flags, want_stat, watch;
    int64_t ttl; /* a create's, ms; 0: none */
    long long since_ms; /* CLOCK_MONOTONIC ms when it began to wait (ops.c) */
    int batch;          /* a batched write or read (ops.c): may go out in one multi with
                           its neighbours of the same kind */
    const struct ACL_vector *acl;
    const char *joining, *leaving, *members; /* a reconfig's (NULL: none) */
    int64_t from_config;
    char *owned_path, *owned_value, *owned_strings[3];
    struct ACL_vector owned_acl;
} zkl_request;

struct zkl_session;

typedef struct zkl_event {
    struct zkl_event *next, *prev; /* queue or pending-list links */
    struct zkl_event *unsent_next; /* an op waiting to be sent (ops.c) */
    zkl_request *request;          /* ... and what it will send */
    struct zkl_session *session;   /* for completion callbacks, which get only the event */
    zkl_event_kind kind;
    uint64_t id;        /* op id; for a watch, the id of the op that set it */
    unsigned generation; /* which zhandle of the session produced it */

    /* ZKL_EV_OP */
    zkl_op_type op;
    int rc;              /* ZOK or a ZooKeeper error code */
    int internal;        /* submitted by the core itself: not delivered */
    int windowed;        /* handed to the library: counted in the session's window (ops.c) */
    int in_multi_read;   /* a batched listing that went in a multiRead (ops.c) */
    zkl_route route;     /* route.fn set: delivered to C (route.h), not to the caller */
    int watch_requested; /* the op asked for a watch */
    int watch_registered;/* ... and the library registered it (it will fire or be dropped) */
    char *data;          /* get, reconfig: value; create/sync: path */
    int data_len;
    int data_null;       /* get: the node's value is ZooKeeper's null (data is empty) */
    int data_borrowed;   /* data is not the event's to free (a direct read's session buffer) */
    int has_stat;
    struct Stat stat;
    int64_t czxid;       /* a batched create's (ops.h), when it has no stat: the multi's zxid */
    char **strings;      /* children */
    int string_count;
    zkl_acl *acls;
    int acl_count;
    zkl_multi *multi;
    void *batch;         /* the multi this op was the last of (ops.c): one block, freed with
                            the event when the library never answered it */

    /* ZKL_EV_WATCH: type is the library's event type; path is chroot-relative */
    int type;
    int zk_state;
    char *path;

    /* ZKL_EV_NOTIFY: id names the recipe, type carries its code */

    /* ZKL_EV_LOG: type is the level (1 ERROR .. 4 DEBUG), data the text */

    /* ZKL_EV_STATE */
    zkl_state state;
    zkl_client_state client_state;
} zkl_event;

/* Frees what the event holds, then (zkl_event_free) the event itself. */
void zkl_event_clear(zkl_event *ev);
void zkl_event_free(zkl_event *ev);

zkl_multi *zkl_multi_new(void);
void zkl_multi_free(zkl_multi *m);
/* Each returns 0, or -1 when out of memory. Strings are copied. */
/* data NULL with len -1 writes ZooKeeper's null value (as zoo_create and zoo_set take it). */
int zkl_multi_add_create(zkl_multi *m, const char *path, const char *data, int len,
                         const struct ACL_vector *acl, int flags);
int zkl_multi_add_delete(zkl_multi *m, const char *path, int version);
int zkl_multi_add_set(zkl_multi *m, const char *path, const char *data, int len, int version);
int zkl_multi_add_check(zkl_multi *m, const char *path, int version);

#endif
