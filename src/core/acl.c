/*
 * acl.c — see acl.h.  A copy always allocates its data array (at least one slot), so a copied
 * empty vector has non-NULL data, as the library expects of an ACL it is handed.
 */
#include "acl.h"

#include <stdlib.h>
#include <string.h>

int zkl_acl_copy(struct ACL_vector *dst, const struct ACL_vector *src)
{
    dst->count = 0;
    dst->data = calloc(src->count > 0 ? (size_t)src->count : 1, sizeof *dst->data);
    if (!dst->data)
        return -1;
    for (int i = 0; i < src->count; i++) {
        dst->data[i].perms = src->data[i].perms;
        dst->data[i].id.scheme = strdup(src->data[i].id.scheme ? src->data[i].id.scheme : "");
        dst->data[i].id.id = strdup(src->data[i].id.id ? src->data[i].id.id : "");
        dst->count++;
        if (!dst->data[i].id.scheme || !dst->data[i].id.id)
            return -1;
    }
    return 0;
}

void zkl_acl_free(struct ACL_vector *v)
{
    for (int i = 0; i < v->count; i++) {
        free(v->data[i].id.scheme);
        free(v->data[i].id.id);
    }
    free(v->data);
    v->data = NULL;
    v->count = 0;
}
