/*
 * allocator_formats.c — what the allocator's znodes hold and are named: an item or identifier
 * escaped into a znode name, the set (a JSON array of strings) and the assignment (who owns
 * what, and for which members) in the canonical forms that two assignments are compared by.
 *
 * Guarantees: names are reversible and always legal znode names (no '/', never "." or "..");
 * canonical forms sort members and items bytewise, so the same assignment always has the
 * same text whatever order a strategy returned it in; data that is not of the expected shape
 * is refused (or, for a set, read as its strings only), never half-read.  A follower skims an
 * assignment's text (zkl_alloc_skim_assignment: where the members and its own items are,
 * without allocating) and parses only those parts; the whole is parsed when needed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator_private.h"

static int byte_cmp(const void *pa, const void *pb)
{
    return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

/* ---------------------------------------------------------------- node names */

static int plain_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.' || c == '~';
}

char *zkl_allocator_node_name(const char *s)
{
    size_t n = strlen(s);
    int whole = strcmp(s, ".") == 0 || strcmp(s, "..") == 0; /* not znode names */
    char *out = malloc(3 * n + 1);
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (plain_byte(c) && !whole) {
            out[k++] = (char)c;
        } else {
            snprintf(out + k, 4, "%%%02X", c);
            k += 3;
        }
    }
    out[k] = '\0';
    return out;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *zkl_allocator_node_unname(const char *name)
{
    size_t n = strlen(name);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (name[i] != '%') {
            out[k++] = name[i];
            continue;
        }
        int hi = i + 2 < n ? hex_value(name[i + 1]) : -1;
        int lo = hi >= 0 ? hex_value(name[i + 2]) : -1;
        if (lo < 0 || (hi == 0 && lo == 0)) {
            free(out);
            return NULL;
        }
        out[k++] = (char)(hi * 16 + lo);
        i += 2;
    }
    out[k] = '\0';
    return out;
}

/* ---------------------------------------------------------------- the set and the assignment */

/* Reads the set's data: sorted, without repeats; anything but strings is skipped. */
int zkl_alloc_read_items(const char *data, int len, char ***out, size_t *count)
{
    *out = NULL;
    *count = 0;
    zkl_json *tree = zkl_json_parse(data ? data : "", data ? (size_t)len : 0, NULL);
    if (!tree || tree->type != ZKL_JSON_ARRAY) {
        zkl_json_free(tree);
        return 0; /* not a set: empty */
    }
    char **items = malloc((tree->count ? tree->count : 1) * sizeof *items);
    if (!items) {
        zkl_json_free(tree);
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < tree->count; i++) {
        zkl_json *v = tree->values[i];
        if (v->type == ZKL_JSON_STRING && v->string[0]) {
            items[n++] = v->string;
            v->string = NULL; /* moved */
        }
    }
    zkl_json_free(tree);
    qsort(items, n, sizeof *items, byte_cmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && strcmp(items[k - 1], items[i]) == 0)
            free(items[i]);
        else
            items[k++] = items[i];
    }
    *out = items;
    *count = k;
    return 0;
}

/* The canonical text of an assignment object (members and their items sorted bytewise):
 * 0, or -1 when obj is not an object of arrays of non-empty strings (or out of memory). */
int zkl_alloc_canonical_assignment(const zkl_json *obj, zkl_json_buf *out)
{
    if (!obj || obj->type != ZKL_JSON_OBJECT)
        return -1;
    size_t n = obj->count;
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return -1;
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = 1; i < n; i++) { /* insertion sort by key: members are few */
        size_t k = order[i], j = i;
        while (j > 0 && strcmp(obj->keys[order[j - 1]], obj->keys[k]) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = k;
    }
    int rc = 0;
    zkl_json_buf_raw(out, "{", 1);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const zkl_json *items = obj->values[order[i]];
        const char *key = obj->keys[order[i]];
        if (items->type != ZKL_JSON_ARRAY || key[0] == '\0' ||
            (i > 0 && strcmp(obj->keys[order[i - 1]], key) == 0)) {
            rc = -1;
            break;
        }
        const char **sorted = malloc((items->count ? items->count : 1) * sizeof *sorted);
        if (!sorted) {
            rc = -1;
            break;
        }
        for (size_t j = 0; j < items->count && rc == 0; j++) {
            if (items->values[j]->type != ZKL_JSON_STRING || !items->values[j]->string[0])
                rc = -1;
            else
                sorted[j] = items->values[j]->string;
        }
        if (rc == 0) {
            qsort(sorted, items->count, sizeof *sorted, byte_cmp);
            if (i > 0)
                zkl_json_buf_raw(out, ",", 1);
            zkl_json_buf_string(out, key, strlen(key));
            zkl_json_buf_raw(out, ":[", 2);
            for (size_t j = 0; j < items->count; j++) {
                if (j > 0)
                    zkl_json_buf_raw(out, ",", 1);
                zkl_json_buf_string(out, sorted[j], strlen(sorted[j]));
            }
            zkl_json_buf_raw(out, "]", 1);
        }
        free(sorted);
    }
    zkl_json_buf_raw(out, "}", 1);
    free(order);
    return rc == 0 && !out->failed ? 0 : -1;
}

/* The canonical text of a list of members (sorted bytewise): 0, or -1 when list is not an
 * array of non-empty strings (or out of memory).  A missing list is the empty one. */
static int canonical_members(const zkl_json *list, zkl_json_buf *out)
{
    size_t n = list ? list->count : 0;
    if (list && list->type != ZKL_JSON_ARRAY)
        return -1;
    const char **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (list->values[i]->type != ZKL_JSON_STRING || !list->values[i]->string[0]) {
            free(sorted);
            return -1;
        }
        sorted[i] = list->values[i]->string;
    }
    qsort(sorted, n, sizeof *sorted, byte_cmp);
    zkl_json_buf_raw(out, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            zkl_json_buf_raw(out, ",", 1);
        zkl_json_buf_string(out, sorted[i], strlen(sorted[i]));
    }
    zkl_json_buf_raw(out, "]", 1);
    free(sorted);
    return out->failed ? -1 : 0;
}

/* What two assignments are compared by: the members it was computed for, then who owns
 * what, both canonical. */
int zkl_alloc_assignment_key(const zkl_json *members, const zkl_json *assignment, zkl_json_buf *out)
{
    if (canonical_members(members, out) != 0)
        return -1;
    return zkl_alloc_canonical_assignment(assignment, out);
}

/* Whether members and assignment have the shapes zkl_alloc_assignment_key() accepts (without
 * sorting anything: what every follower checks of every assignment it reads). */
int zkl_alloc_assignment_valid(const zkl_json *members, const zkl_json *assignment)
{
    if (members && members->type != ZKL_JSON_ARRAY)
        return 0;
    for (size_t i = 0; members && i < members->count; i++)
        if (members->values[i]->type != ZKL_JSON_STRING || !members->values[i]->string[0])
            return 0;
    if (!assignment || assignment->type != ZKL_JSON_OBJECT)
        return 0;
    for (size_t m = 0; m < assignment->count; m++) {
        const zkl_json *items = assignment->values[m];
        const char *key = assignment->keys[m];
        if (!key || !key[0] || items->type != ZKL_JSON_ARRAY)
            return 0;
        for (size_t k = 0; k < m; k++) /* members are few */
            if (strcmp(assignment->keys[k], key) == 0)
                return 0;
        for (size_t j = 0; j < items->count; j++)
            if (items->values[j]->type != ZKL_JSON_STRING || !items->values[j]->string[0])
                return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- skimming an assignment */

const char *zkl_alloc_skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

const char *zkl_alloc_skip_string(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '\\')
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

const char *zkl_alloc_skip_value(const char *p, const char *end)
{
    size_t depth = 0;
    do {
        if (p >= end)
            return NULL;
        if (*p == '"') {
            p = zkl_alloc_skip_string(p, end);
            if (!p)
                return NULL;
        } else if (*p == '{' || *p == '[') {
            depth++;
            p++;
        } else if (*p == '}' || *p == ']') {
            if (depth == 0)
                return NULL;
            depth--;
            p++;
        } else if (depth > 0) {
            p++; /* , : whitespace, scalars inside a container */
        } else {
            while (p < end && !strchr(",}] \t\r\n", *p))
                p++;
        }
    } while (depth > 0);
    return p;
}

const char *zkl_alloc_skip_key(const char *p, const char *end, const char **key,
                               size_t *key_len)
{
    if (p >= end || *p != '"')
        return NULL;
    *key = p;
    p = zkl_alloc_skip_string(p, end);
    if (!p)
        return NULL;
    *key_len = (size_t)(p - *key);
    p = zkl_alloc_skip_ws(p, end);
    if (p >= end || *p != ':')
        return NULL;
    return zkl_alloc_skip_ws(p + 1, end);
}

int zkl_alloc_skim_assignment(const char *text, size_t len, const char *key, size_t key_len,
                              zkl_alloc_skim *out)
{
    memset(out, 0, sizeof *out);
    const char *p = text, *end = text + len;
    int in_assignment = 0;
    p = zkl_alloc_skip_ws(p, end);
    if (p >= end || *p != '{')
        return -1;
    p++;
    for (;;) {
        p = zkl_alloc_skip_ws(p, end);
        if (p < end && *p == '}') {
            if (!in_assignment)
                return out->members && out->assignment ? 0 : -1;
            in_assignment = 0; /* the assignment object ends: back at the top */
            p++;
            continue;
        }
        if (p < end && *p == ',') {
            p = zkl_alloc_skip_ws(p + 1, end);
        }
        const char *k;
        size_t klen;
        p = zkl_alloc_skip_key(p, end, &k, &klen);
        if (!p || p >= end)
            return -1;
        const char *v = p;
        if (!in_assignment && klen == 12 && memcmp(k, "\"assignment\"", 12) == 0) {
            if (*v != '{')
                return -1;
            out->assignment = v;
            in_assignment = 1;
            p = v + 1;
            continue;
        }
        p = zkl_alloc_skip_value(p, end);
        if (!p)
            return -1;
        if (in_assignment) {
            if (klen == key_len && memcmp(k, key, key_len) == 0) {
                out->mine = v;
                out->mine_len = (size_t)(p - v);
            }
        } else if (klen == 9 && memcmp(k, "\"members\"", 9) == 0) {
            out->members = v;
            out->members_len = (size_t)(p - v);
        } else if (klen == 12 && memcmp(k, "\"generation\"", 12) == 0) {
            out->generation = v;
            out->generation_len = (size_t)(p - v);
        }
    }
}
