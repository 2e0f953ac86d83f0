/*
 * acl.h — owned copies of ZooKeeper ACL vectors.
 *
 * Guarantees: zkl_acl_copy() gives dst its own storage for every entry (the source may go
 * away at once); a NULL scheme or id is copied as "".  Whatever it did copy before failing is
 * counted in dst->count, so zkl_acl_free(dst) always releases it.  zkl_acl_free() leaves an
 * empty vector (count 0, data NULL), so freeing twice is harmless.
 */
#ifndef ZKL_ACL_H
#define ZKL_ACL_H

#include <zookeeper/zookeeper.h>

/* 0, or -1 when out of memory (dst holds what was copied: free it with zkl_acl_free). */
int zkl_acl_copy(struct ACL_vector *dst, const struct ACL_vector *src);
void zkl_acl_free(struct ACL_vector *v);

#endif
