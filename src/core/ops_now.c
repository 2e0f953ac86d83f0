/*
 * ops_now.c — see ops.h, "Direct ops".  The synchronous twins of the common ops.
 *
 * Why they exist: libzookeeper-mt hands the reply of an async op from its I/O thread to its
 * completion thread, which queues our event and wakes the owner: two thread hops per op.  The
 * library's own synchronous calls are completed by the I/O thread itself, which wakes the
 * waiting caller directly: one hop.  On a loopback link the extra hop (a futex wake-up and a
 * context switch) costs about as much as the rest of a read, so a script doing one blocking
 * call after another runs them through here.  (zklua's own build of the C client runs
 * completions on the I/O thread, io-thread-completions.patch, so there an async op is one hop
 * too; a direct op still skips the event's allocation and the queue.)
 *
 * A direct op runs only when nothing can be reordered by it: the session is CONNECTED, no event
 * waits to be delivered, no async op is in flight (their completions would otherwise reach
 * the caller after a later op's result) and no watch is out (its event could reach the caller
 * after the reply of a read that already sees the change: ZooKeeper promises the opposite).
 * Otherwise it returns 0 and the caller submits the op the async way.  Watches set here are
 * ordinary ones: they fire as ZKL_EV_WATCH events with the op's id.  The result fills the
 * caller's event, which never goes through the queue: no allocation for the event, and a get's
 * value or a create's path stays in the session's read buffer until the caller has used it.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "path.h"
#include "session_private.h"

enum {
    FIRST_READ_BUFFER = 64 * 1024, /* most values fit: one round trip */
    SEQUENCE_SUFFIX = 16           /* room for a sequential node's 10 digits */
};

/* Whether the op may run directly now; if so, makes *op a fresh op event for it. */
static int direct_op(zkl_session *s, zkl_event *op, zkl_op_type type)
{
    /* The library's own state too: the owner hears of a drop only through the queue, and a
     * synchronous call made in between would wait on a handle that is reconnecting. */
    if (!s->zh || s->state != ZKL_CONNECTED || s->held || s->watches_out > 0 ||
        !zkl_queue_is_idle(&s->queue) || zoo_state(s->zh) != ZOO_CONNECTED_STATE)
        return 0;
    memset(op, 0, sizeof *op);
    op->kind = ZKL_EV_OP;
    op->op = type;
    op->id = ++s->next_op_id;
    op->session = s;
    op->generation = s->generation;
    return 1;
}

/* The library reports ZCLOSING for what it drops while closing: say why it was closed.  A
 * watch registered here is counted as the queue's ops' are (session.c, count_watches). */
static int done(zkl_event *op, int rc)
{
    if (rc == ZCLOSING)
        rc = atomic_load(&op->session->closing_rc);
    else if (rc == ZOPERATIONTIMEOUT) /* a connection given up for silence (ops.c, finish) */
        rc = ZCONNECTIONLOSS;
    op->rc = rc;
    if (op->watch_registered)
        op->session->watches_out++;
    return 1;
}

static void *watch_ctx(const zkl_event *op)
{
    return (void *)(uintptr_t)op->id;
}

/* The session's buffer for direct reads and created paths (FIRST_READ_BUFFER bytes, made on
 * first use): a 64 KiB malloc and free for every read cost more than the rest of the call. */
static char *read_buffer(zkl_session *s)
{
    if (!s->read_buffer)
        s->read_buffer = malloc(FIRST_READ_BUFFER);
    return s->read_buffer;
}

int zkl_op_get_now(zkl_session *s, zkl_event *op, const char *path, int watch)
{
    if (!direct_op(s, op, ZKL_OP_GET))
        return 0;
    op->watch_requested = watch != 0;
    char *buffer = read_buffer(s);
    if (!buffer)
        return done(op, ZSYSTEMERROR);
    int len = FIRST_READ_BUFFER;
    int rc = zoo_wget(s->zh, path, watch ? zkl_on_watch : NULL, watch ? watch_ctx(op) : NULL,
                      buffer, &len, &op->stat);
    op->watch_registered = op->watch_requested && rc == ZOK;
    if (rc != ZOK)
        return done(op, rc);
    op->has_stat = 1;
    if (op->stat.dataLength <= FIRST_READ_BUFFER) {
        op->data = buffer; /* read from there before the session's next direct op */
        op->data_borrowed = 1;
        op->data_null = len < 0; /* ZooKeeper's null value (-1) */
        op->data_len = len < 0 ? 0 : len;
        return done(op, ZOK);
    }
    /* the value did not fit: ask again for exactly its size (the watch is set already) */
    int capacity = op->stat.dataLength;
    for (;;) {
        char *big = malloc((size_t)capacity + 1);
        if (!big)
            return done(op, ZSYSTEMERROR);
        len = capacity;
        rc = zoo_get(s->zh, path, 0, big, &len, &op->stat);
        if (rc == ZOK && op->stat.dataLength > capacity) { /* it grew meanwhile */
            free(big);
            capacity = op->stat.dataLength;
            continue;
        }
        if (rc != ZOK) {
            free(big);
            return done(op, rc);
        }
        op->data = big;
        op->data_null = len < 0;
        op->data_len = len < 0 ? 0 : len;
        op->data[op->data_len] = '\0';
        return done(op, ZOK);
    }
}

int zkl_op_exists_now(zkl_session *s, zkl_event *op, const char *path, int watch)
{
    if (!direct_op(s, op, ZKL_OP_EXISTS))
        return 0;
    op->watch_requested = watch != 0;
    int rc = zoo_wexists(s->zh, path, watch ? zkl_on_watch : NULL, watch ? watch_ctx(op) : NULL,
                         &op->stat);
    op->has_stat = rc == ZOK;
    /* an exists watch is registered on a missing node too */
    op->watch_registered = op->watch_requested && (rc == ZOK || rc == ZNONODE);
    return done(op, rc);
}

int zkl_op_children_now(zkl_session *s, zkl_event *op, const char *path, int watch)
{
    if (!direct_op(s, op, ZKL_OP_CHILDREN))
        return 0;
    op->watch_requested = watch != 0;
    struct String_vector children = {0, NULL};
    int rc = zoo_wget_children2(s->zh, path, watch ? zkl_on_watch : NULL,
                                watch ? watch_ctx(op) : NULL, &children, &op->stat);
    if (rc == ZOK) {
        op->has_stat = 1;
        /* the vector's strings become the event's: no copies */
        op->strings = children.data;
        op->string_count = children.count;
    }
    op->watch_registered = op->watch_requested && rc == ZOK;
    return done(op, rc);
}

int zkl_op_create_now(zkl_session *s, zkl_event *op, const char *path, const char *value,
                      int len, const struct ACL_vector *acl, int flags, int want_stat)
{
    /* one over the server's limit goes the queued way, which fails it unsent (ops.c) */
    if (zkl_request_size(path, len, acl) > ZKL_MAX_PACKET || !direct_op(s, op, ZKL_OP_CREATE))
        return 0;
    int capacity = (int)strlen(path) + SEQUENCE_SUFFIX;
    if (capacity < FIRST_READ_BUFFER && read_buffer(s)) { /* the created path: no malloc */
        op->data = s->read_buffer;
        op->data_borrowed = 1;
    } else {
        op->data = malloc((size_t)capacity + 1);
    }
    if (!op->data)
        return done(op, ZSYSTEMERROR);
    /* as the async create (and kazoo): CREATE2, which returns the stat, only when asked */
    const char *data = zkl_wire_value(value, len);
    int rc = want_stat
                 ? zoo_create2(s->zh, path, data, len, acl, flags, op->data, capacity, &op->stat)
                 : zoo_create(s->zh, path, data, len, acl, flags, op->data, capacity);
    op->data[rc == ZOK ? capacity : 0] = '\0';
    op->data_len = (int)strlen(op->data);
    op->has_stat = rc == ZOK && want_stat;
    return done(op, rc);
}

int zkl_op_set_now(zkl_session *s, zkl_event *op, const char *path, const char *value, int len,
                   int version)
{
    if (!direct_op(s, op, ZKL_OP_SET))
        return 0;
    int rc = zoo_set2(s->zh, path, zkl_wire_value(value, len), len, version, &op->stat);
    op->has_stat = rc == ZOK;
    return done(op, rc);
}

int zkl_op_delete_now(zkl_session *s, zkl_event *op, const char *path, int version)
{
    if (!direct_op(s, op, ZKL_OP_DELETE))
        return 0;
    return done(op, zoo_delete(s->zh, path, version));
}
