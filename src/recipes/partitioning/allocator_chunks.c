/*
 * allocator_chunks.c — the allocator's chunked values: a set or an assignment too big for one
 * znode, stored as a header in the value's own node and its content in numbered chunk nodes
 * beside it.  Formats only (no ops): what a header says, how a value is cut into chunks and
 * put back together, what chunk nodes are named, and which of them a writer may delete.
 *
 * Layout (format 2; format 1 is the one-znode JSON the allocator always wrote):
 *   <node>            {"zklua_chunked":2,"tag":T,"chunks":N,...}: the header.  The set's adds
 *                     "count":C; the assignment's "generation", "leader", "members" as before.
 *   <node>-chunks/T-<i>  (i = 00000 .. N-1) the content: the set's chunks are JSON arrays of
 *                     items, the assignment's JSON objects {member: [items]} (a member's items
 *                     may go on in the next chunk).  Written once, never changed.
 *   T = <base>-<nonce>: base is one more than the header version the writer replaces (0: it
 *   creates the header), 10 digits; nonce 16 hex digits.
 *
 * Guarantees (the write protocol, allocator.c and allocator.lua, rests on them):
 * - A writer creates every chunk of a new tag first, then replaces the header by
 *   compare-and-set (or creates it), then deletes the chunks zkl_alloc_chunk_stale() names.
 *   So a reader that read a header and all its chunks read one whole value, never parts of two;
 *   a chunk missing means the header changed meanwhile (read it again), and a writer that
 *   died before its header went in left only chunks no header names (the next writer's
 *   clean-up deletes them).
 * - Only chunks of writers whose compare-and-set must fail are deleted: those with a base not
 *   above the committing writer's (they replace a header version that is gone) and another tag.
 * - A header of a format newer than 2 is reported as such (ZKL_CHUNKED_NEWER), never read as
 *   something else; a format-1 value is not a header (ZKL_CHUNKED_NONE).  A format-1 reader
 *   given a header: the Lua one raises "not a JSON array", the C one (zklua before format 2)
 *   reads an empty set — which is why a value is chunked only when every live member says it
 *   reads format 2 (its member node's "chunked":2), and only when it does not fit one node.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator_private.h"
#include "../common.h"

int zkl_alloc_chunk_header(const char *data, int len, zkl_alloc_header *h)
{
    memset(h, 0, sizeof *h);
    /* a format-1 set is an array and a format-1 assignment has no "zklua_chunked": cheap test */
    if (!data || len <= 0 || !memmem(data, (size_t)len, "\"zklua_chunked\"", 15))
        return ZKL_CHUNKED_NONE;
    zkl_json *tree = zkl_json_parse(data, (size_t)len, NULL);
    const zkl_json *v = zkl_json_get(tree, "zklua_chunked");
    if (!v) {
        zkl_json_free(tree);
        return ZKL_CHUNKED_NONE;
    }
    int rc = ZKL_CHUNKED_BAD;
    const zkl_json *tag = zkl_json_get(tree, "tag");
    const zkl_json *n = zkl_json_get(tree, "chunks");
    if (v->type == ZKL_JSON_NUMBER && v->number > ZKL_CHUNKED_FORMAT) {
        h->format = v->number < 1e9 ? (int)v->number : 999999999;
        rc = ZKL_CHUNKED_NEWER;
    } else if (v->type == ZKL_JSON_NUMBER && v->number == ZKL_CHUNKED_FORMAT && tag &&
               tag->type == ZKL_JSON_STRING && tag->string_len > 0 && tag->string_len < 64 &&
               !strchr(tag->string, '/') && n && n->type == ZKL_JSON_NUMBER && n->number >= 0 &&
               n->number <= ZKL_CHUNKS_MAX && n->number == (double)(size_t)n->number) {
        h->format = ZKL_CHUNKED_FORMAT;
        h->chunks = (size_t)n->number;
        snprintf(h->tag, sizeof h->tag, "%s", tag->string);
        h->tree = tree;
        return ZKL_CHUNKED_YES;
    }
    zkl_json_free(tree);
    return rc;
}

char *zkl_alloc_chunk_path(const char *chunks_path, const char *tag, size_t i)
{
    size_t n = strlen(chunks_path) + strlen(tag) + 32;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s-%05zu", chunks_path, tag, i);
    return p;
}

int zkl_alloc_new_tag(char tag[ZKL_TAG_MAX], int replaced_version)
{
    char nonce[ZKL_UUID_HEX_LEN + 1];
    if (zkl_uuid4_hex(nonce) != 0)
        return -1;
    snprintf(tag, ZKL_TAG_MAX, "%010d-%.16s", replaced_version + 1, nonce);
    return 0;
}

int zkl_alloc_chunk_stale(const char *name, const char *tag)
{
    char *end;
    long base = strtol(name, &end, 10);
    long mine = strtol(tag, NULL, 10);
    size_t tag_len = strlen(tag);
    if (end == name || *end != '-')
        return 0; /* not a chunk of ours: left alone */
    return base <= mine && !(strncmp(name, tag, tag_len) == 0 && name[tag_len] == '-');
}

/* ---------------------------------------------------------------- cutting */

/* Moves cur's text to the end of *out (cur is emptied): 0, or -1 when cur failed or out of
 * memory (*out still owns every chunk pushed before, whatever realloc did). */
static int push_chunk(zkl_json_buf *cur, char ***out, size_t *n)
{
    if (cur->failed)
        return -1;
    char **grown = realloc(*out, (*n + 1) * sizeof *grown);
    if (!grown)
        return -1;
    *out = grown;
    (*out)[(*n)++] = cur->data;
    zkl_json_buf_init(cur);
    return 0;
}

int zkl_alloc_cut_array(const char *const *items, size_t count, size_t limit, char ***out,
                        size_t *n)
{
    *out = NULL;
    *n = 0;
    zkl_json_buf cur, one;
    zkl_json_buf_init(&cur);
    zkl_json_buf_init(&one);
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        one.len = 0;
        zkl_json_buf_string(&one, items[i], strlen(items[i]));
        if (one.failed || one.len + 2 > limit) {
            rc = -1;
            break;
        }
        if (cur.len > 0 && cur.len + 1 + one.len + 1 > limit) {
            zkl_json_buf_raw(&cur, "]", 1);
            rc = push_chunk(&cur, out, n);
        }
        zkl_json_buf_raw(&cur, cur.len == 0 ? "[" : ",", 1);
        zkl_json_buf_raw(&cur, one.data, one.len);
    }
    if (rc == 0 && cur.len > 0) {
        zkl_json_buf_raw(&cur, "]", 1);
        rc = push_chunk(&cur, out, n);
    }
    zkl_json_buf_free(&cur);
    zkl_json_buf_free(&one);
    if (rc != 0) {
        for (size_t i = 0; i < *n; i++)
            free((*out)[i]);
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int zkl_alloc_cut_assignment(const zkl_json *obj, size_t limit, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    zkl_json_buf cur, one, key;
    zkl_json_buf_init(&cur);
    zkl_json_buf_init(&one);
    zkl_json_buf_init(&key);
    int rc = obj && obj->type == ZKL_JSON_OBJECT ? 0 : -1;
    for (size_t m = 0; rc == 0 && m < obj->count; m++) {
        const zkl_json *list = obj->values[m];
        key.len = 0;
        zkl_json_buf_string(&key, obj->keys[m], strlen(obj->keys[m]));
        int open = 0; /* this member's array is open in cur */
        for (size_t j = 0; rc == 0 && j <= list->count; j++) {
            if (j == list->count && (open || list->count > 0))
                break;
            one.len = 0;
            if (j < list->count)
                zkl_json_buf_string(&one, list->values[j]->string, strlen(list->values[j]->string));
            if (one.failed || key.len + one.len + 8 > limit) {
                rc = -1;
                break;
            }
            /* what goes in: ,"key":[item  or  ,item ; and the ]} that closes */
            size_t need = (open ? 1 + one.len : 1 + key.len + 2 + one.len) + 2;
            if (cur.len > 0 && cur.len + need > limit) {
                zkl_json_buf_raw(&cur, open ? "]}" : "}", open ? 2 : 1);
                rc = push_chunk(&cur, out, n);
                open = 0;
            }
            if (!open) {
                zkl_json_buf_raw(&cur, cur.len == 0 ? "{" : ",", 1);
                zkl_json_buf_raw(&cur, key.data, key.len);
                zkl_json_buf_raw(&cur, ":[", 2);
                zkl_json_buf_raw(&cur, one.data, one.len);
                open = 1;
            } else {
                zkl_json_buf_raw(&cur, ",", 1);
                zkl_json_buf_raw(&cur, one.data, one.len);
            }
        }
        if (open)
            zkl_json_buf_raw(&cur, "]", 1);
    }
    if (rc == 0 && cur.len > 0) {
        zkl_json_buf_raw(&cur, "}", 1);
        rc = push_chunk(&cur, out, n);
    }
    zkl_json_buf_free(&cur);
    zkl_json_buf_free(&one);
    zkl_json_buf_free(&key);
    if (rc != 0) {
        for (size_t i = 0; i < *n; i++)
            free((*out)[i]);
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

/* ---------------------------------------------------------------- putting back together */

int zkl_alloc_join_set(char *const *chunks, const int *lens, size_t n, zkl_json_buf *out)
{
    zkl_json_buf_raw(out, "[", 1);
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        const char *c = chunks[i];
        int len = lens[i];
        if (len < 2 || c[0] != '[' || c[len - 1] != ']')
            return -1;
        if (len == 2)
            continue;
        if (!first)
            zkl_json_buf_raw(out, ",", 1);
        zkl_json_buf_raw(out, c + 1, (size_t)len - 2);
        first = 0;
    }
    zkl_json_buf_raw(out, "]", 1);
    return out->failed ? -1 : 0;
}

/* One chunk's {member: [items], ...}: each member's items (the array's text, as written)
 * appended to its buffer, members matched by their key's text (one writer wrote every chunk
 * of a tag the same canonical way).  Text only, like the skim: 1M items are not parsed here
 * (a follower parses its own part, the leader the whole).  0, or -1 (not of that shape). */
static int join_chunk(const char *c, size_t len, char ***keys, size_t **key_lens,
                      zkl_json_buf **bufs, size_t *count)
{
    const char *p = c, *end = c + len;
    p = zkl_alloc_skip_ws(p, end);
    if (p >= end || *p != '{')
        return -1;
    p = zkl_alloc_skip_ws(p + 1, end);
    int first = 1;
    while (p < end && *p != '}') {
        if (!first) {
            if (*p != ',')
                return -1;
            p = zkl_alloc_skip_ws(p + 1, end);
        }
        first = 0;
        const char *k;
        size_t klen;
        p = zkl_alloc_skip_key(p, end, &k, &klen);
        const char *v = p;
        if (!p || p >= end || *p != '[' || !(p = zkl_alloc_skip_value(p, end)))
            return -1;
        const char *body = zkl_alloc_skip_ws(v + 1, p - 1), *body_end = p - 1;
        size_t m = 0;
        while (m < *count && !((*key_lens)[m] == klen && memcmp((*keys)[m], k, klen) == 0))
            m++;
        if (m == *count) { /* a new member (members are few: a linear lookup) */
            char **gk = realloc(*keys, (m + 1) * sizeof *gk);
            if (gk)
                *keys = gk;
            size_t *gl = gk ? realloc(*key_lens, (m + 1) * sizeof *gl) : NULL;
            if (gl)
                *key_lens = gl;
            zkl_json_buf *gb = gl ? realloc(*bufs, (m + 1) * sizeof *gb) : NULL;
            if (gb)
                *bufs = gb;
            if (!gb || !((*keys)[m] = malloc(klen)))
                return -1;
            memcpy((*keys)[m], k, klen);
            (*key_lens)[m] = klen;
            zkl_json_buf_init(&(*bufs)[m]);
            (*count)++;
        }
        if (body < body_end) {
            if ((*bufs)[m].len > 0)
                zkl_json_buf_raw(&(*bufs)[m], ",", 1);
            zkl_json_buf_raw(&(*bufs)[m], body, (size_t)(body_end - body));
        }
        p = zkl_alloc_skip_ws(p, end);
    }
    if (p >= end || zkl_alloc_skip_ws(p + 1, end) != end)
        return -1;
    return 0;
}

int zkl_alloc_join_assignment(const zkl_json *header, char *const *chunks, const int *lens,
                              size_t n, zkl_json_buf *out)
{
    /* per member, the items of every chunk in order */
    size_t count = 0;
    char **keys = NULL;
    size_t *key_lens = NULL;
    zkl_json_buf *bufs = NULL;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = join_chunk(chunks[i], (size_t)lens[i], &keys, &key_lens, &bufs, &count);
    const zkl_json *gen = zkl_json_get(header, "generation");
    const zkl_json *leader = zkl_json_get(header, "leader");
    const zkl_json *members = zkl_json_get(header, "members");
    if (rc == 0) {
        zkl_json_buf_raw(out, "{\"generation\":", 14);
        zkl_json_buf_number(out, gen && gen->type == ZKL_JSON_NUMBER ? gen->number : 0);
        zkl_json_buf_raw(out, ",\"leader\":", 10);
        if (leader && leader->type == ZKL_JSON_STRING)
            zkl_json_buf_string(out, leader->string, leader->string_len);
        else
            zkl_json_buf_raw(out, "\"\"", 2);
        zkl_json_buf_raw(out, ",\"members\":", 11);
        if (members)
            zkl_json_buf_value(out, members);
        else
            zkl_json_buf_raw(out, "[]", 2);
        zkl_json_buf_raw(out, ",\"assignment\":{", 15);
        for (size_t k = 0; k < count; k++) {
            if (k > 0)
                zkl_json_buf_raw(out, ",", 1);
            zkl_json_buf_raw(out, keys[k], key_lens[k]);
            zkl_json_buf_raw(out, ":[", 2);
            zkl_json_buf_raw(out, bufs[k].data ? bufs[k].data : "", bufs[k].len);
            zkl_json_buf_raw(out, "]", 1);
            rc |= bufs[k].failed ? -1 : 0;
        }
        zkl_json_buf_raw(out, "}}", 2);
    }
    for (size_t k = 0; k < count; k++) {
        free(keys[k]);
        zkl_json_buf_free(&bufs[k]);
    }
    free(keys);
    free(key_lens);
    free(bufs);
    return rc == 0 && !out->failed ? 0 : -1;
}
