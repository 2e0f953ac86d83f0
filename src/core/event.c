/*
 * event.c — freeing events and building transactions (zkl_multi).
 *
 * A zkl_multi owns copies of every path, value and ACL its ops point into, so the caller's
 * buffers may go away as soon as an add returns; the library reads the ops again when the
 * reply arrives, which is why all of it lives until the event is freed.
 */
#include "event.h"

#include <stdlib.h>
#include <string.h>

#include "acl.h"

void zkl_multi_free(zkl_multi *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->count; i++) {
        free(m->path_bufs[i]);
        zkl_acl_free(&m->acls[i]);
    }
    for (int i = 0; i < m->owned_count; i++)
        free(m->owned[i]);
    free(m->ops);
    free(m->results);
    free(m->stats);
    free(m->path_bufs);
    free(m->acls);
    free(m->owned);
    free(m);
}

static void free_request(zkl_request *r)
{
    if (!r)
        return;
    free(r->owned_path);
    free(r->owned_value);
    for (int i = 0; i < 3; i++)
        free(r->owned_strings[i]);
    zkl_acl_free(&r->owned_acl);
    free(r);
}

void zkl_event_clear(zkl_event *ev)
{
    free_request(ev->request);
    if (!ev->data_borrowed)
        free(ev->data);
    free(ev->path);
    if (ev->strings) {
        for (int i = 0; i < ev->string_count; i++)
            free(ev->strings[i]);
        free(ev->strings);
    }
    if (ev->acls) {
        for (int i = 0; i < ev->acl_count; i++) {
            free(ev->acls[i].scheme);
            free(ev->acls[i].id);
        }
        free(ev->acls);
    }
    zkl_multi_free(ev->multi);
    free(ev->batch);
    memset(ev, 0, sizeof *ev);
}

void zkl_event_free(zkl_event *ev)
{
    if (!ev)
        return;
    zkl_event_clear(ev);
    free(ev);
}

zkl_multi *zkl_multi_new(void)
{
    return calloc(1, sizeof(zkl_multi));
}

/* Create and set ops point into the acls and stats arrays: after those moved (realloc), the
 * ops already built must point at their new places. */
static void repoint_ops(zkl_multi *m)
{
    for (int i = 0; i < m->count; i++) {
        if (m->ops[i].type == ZOO_CREATE_OP)
            m->ops[i].create_op.acl = &m->acls[i];
        else if (m->ops[i].type == ZOO_SETDATA_OP)
            m->ops[i].set_op.stat = &m->stats[i];
    }
}

static int grow_ops(zkl_multi *m)
{
    if (m->count < m->capacity)
        return 0;
    int cap = m->capacity ? m->capacity * 2 : 4;
    zoo_op_t *ops = realloc(m->ops, sizeof *ops * cap);
    if (ops)
        m->ops = ops;
    zoo_op_result_t *results = realloc(m->results, sizeof *results * cap);
    if (results)
        m->results = results;
    struct Stat *stats = realloc(m->stats, sizeof *stats * cap);
    if (stats)
        m->stats = stats;
    char **bufs = realloc(m->path_bufs, sizeof *bufs * cap);
    if (bufs)
        m->path_bufs = bufs;
    struct ACL_vector *acls = realloc(m->acls, sizeof *acls * cap);
    if (acls)
        m->acls = acls;
    repoint_ops(m); /* also when something else failed: acls or stats may have moved */
    if (!ops || !results || !stats || !bufs || !acls)
        return -1;
    m->capacity = cap;
    return 0;
}

/* Keeps a copy of len bytes (plus a terminating zero) for the life of the multi. */
static const char *own_copy(zkl_multi *m, const char *src, int len)
{
    if (!src)
        return NULL;
    if (m->owned_count == m->owned_capacity) {
        int cap = m->owned_capacity ? m->owned_capacity * 2 : 8;
        char **owned = realloc(m->owned, sizeof *owned * cap);
        if (!owned)
            return NULL;
        m->owned = owned;
        m->owned_capacity = cap;
    }
    char *copy = malloc((size_t)len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, src, (size_t)len);
    copy[len] = '\0';
    m->owned[m->owned_count++] = copy;
    return copy;
}

static const char *own_string(zkl_multi *m, const char *s)
{
    return own_copy(m, s, (int)strlen(s));
}

/* Starts op slot m->count with empty side buffers; the caller fills ops[count] and bumps it. */
static int begin_op(zkl_multi *m)
{
    if (grow_ops(m) != 0)
        return -1;
    int i = m->count;
    memset(&m->results[i], 0, sizeof m->results[i]);
    memset(&m->stats[i], 0, sizeof m->stats[i]);
    m->path_bufs[i] = NULL;
    m->acls[i].count = 0;
    m->acls[i].data = NULL;
    return 0;
}

/* ZooKeeper's null value: no bytes and length -1. */
static int is_null(const char *data, int len)
{
    return !data && len == -1;
}

int zkl_multi_add_create(zkl_multi *m, const char *path, const char *data, int len,
                         const struct ACL_vector *acl, int flags)
{
    if (begin_op(m) != 0)
        return -1;
    int i = m->count;
    /* room for the path plus a 10-digit sequence suffix */
    int buflen = (int)strlen(path) + 16;
    m->path_bufs[i] = malloc((size_t)buflen);
    const char *p = own_string(m, path);
    const char *d = is_null(data, len) ? NULL : own_copy(m, data ? data : "", len);
    if (!m->path_bufs[i] || !p || (!d && !is_null(data, len)) ||
        zkl_acl_copy(&m->acls[i], acl) != 0) {
        m->count++; /* so zkl_multi_free releases this slot's buffers */
        return -1;
    }
    zoo_create_op_init(&m->ops[i], p, d, len, &m->acls[i], flags, m->path_bufs[i], buflen);
    m->count++;
    return 0;
}

int zkl_multi_add_delete(zkl_multi *m, const char *path, int version)
{
    if (begin_op(m) != 0)
        return -1;
    const char *p = own_string(m, path);
    if (!p)
        return -1;
    zoo_delete_op_init(&m->ops[m->count], p, version);
    m->count++;
    return 0;
}

int zkl_multi_add_set(zkl_multi *m, const char *path, const char *data, int len, int version)
{
    if (begin_op(m) != 0)
        return -1;
    int i = m->count;
    const char *p = own_string(m, path);
    const char *d = is_null(data, len) ? NULL : own_copy(m, data ? data : "", len);
    if (!p || (!d && !is_null(data, len)))
        return -1;
    zoo_set_op_init(&m->ops[i], p, d, len, version, &m->stats[i]);
    m->count++;
    return 0;
}

int zkl_multi_add_check(zkl_multi *m, const char *path, int version)
{
    if (begin_op(m) != 0)
        return -1;
    const char *p = own_string(m, path);
    if (!p)
        return -1;
    zoo_check_op_init(&m->ops[m->count], p, version);
    m->count++;
    return 0;
}
