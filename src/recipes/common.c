/*
 * common.c — see common.h.  Guarantees: a uuid comes only from /dev/urandom (a short read is
 * retried, EOF is EIO, the descriptor is always closed); a path is built in one allocation;
 * the path creates go out in order, one per prefix, and are counted as they are submitted.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/ops.h"

enum { UUID_BYTES = ZKL_UUID_HEX_LEN / 2 };

static int random_bytes(unsigned char *buf, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int err = r == 0 ? EIO : errno;
            close(fd);
            errno = err;
            return -1;
        }
        got += (size_t)r;
    }
    close(fd);
    return 0;
}

int zkl_uuid4_hex(char out[ZKL_UUID_HEX_LEN + 1])
{
    unsigned char b[UUID_BYTES];
    if (random_bytes(b, sizeof b) != 0)
        return -1;
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    for (int i = 0; i < UUID_BYTES; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

void zkl_protected_prefix(char out[ZKL_PROTECTED_PREFIX_LEN + 1],
                          const char hex[ZKL_UUID_HEX_LEN + 1])
{
    snprintf(out, ZKL_PROTECTED_PREFIX_LEN + 1, "_c_%.8s-%.4s-%.4s-%.4s-%.12s-", hex, hex + 8,
             hex + 12, hex + 16, hex + 20);
}

char *zkl_join_path(const char *parent, const char *name)
{
    size_t plen = strlen(parent), nlen = strlen(name);
    if (plen == 1)
        plen = 0; /* "/" */
    char *out = malloc(plen + nlen + 2);
    if (!out)
        return NULL;
    memcpy(out, parent, plen);
    out[plen] = '/';
    memcpy(out + plen + 1, name, nlen + 1);
    return out;
}

int zkl_create_path(zkl_session *s, const char *path, const struct ACL_vector *acl,
                    const zkl_route *route, long *inflight, uint64_t *last_id)
{
    return zkl_create_path_mode(s, path, acl, ZOO_PERSISTENT, route, inflight, last_id);
}

static int create_path(zkl_session *s, const char *path, const char *data, int len,
                       const struct ACL_vector *acl, int mode, const zkl_route *route,
                       long *inflight, uint64_t *last_id)
{
    *last_id = 0;
    char *buf = strdup(path);
    if (!buf)
        return -1;
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        uint64_t id = c == '\0' ? zkl_op_create(s, buf, data, len, acl, mode, 0, route)
                                 : zkl_op_create(s, buf, "", 0, acl, mode, 0, route);
        if (id != 0)
            (*inflight)++;
        if (c == '\0') {
            *last_id = id;
            break;
        }
        *p = c;
    }
    free(buf);
    return 0;
}

int zkl_create_path_mode(zkl_session *s, const char *path, const struct ACL_vector *acl,
                         int mode, const zkl_route *route, long *inflight, uint64_t *last_id)
{
    return create_path(s, path, "", 0, acl, mode, route, inflight, last_id);
}

int zkl_create_path_data(zkl_session *s, const char *path, const char *data, int len,
                         const struct ACL_vector *acl, const zkl_route *route, long *inflight,
                         uint64_t *last_id)
{
    return create_path(s, path, data, len, acl, ZOO_PERSISTENT, route, inflight, last_id);
}

zkl_rc_kind zkl_rc_triage(int rc)
{
    switch (rc) {
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
        return ZKL_RC_RETRY;
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:
        return ZKL_RC_LOST;
    case ZCLOSING:
    case ZAUTHFAILED:
        return ZKL_RC_CLOSED;
    default:
        return ZKL_RC_ANSWER;
    }
}
