/*
 * service_instance.c — see service_instance.h.  The writer emits the members in Jackson's
 * order for OldServiceInstance/ServiceInstance (their fields' declaration order); the reader
 * walks the tree of json.c's parser.  Guarantees: every error path frees what it allocated.
 */
#include "service_instance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

const char *const zkl_service_type_names[] = {NULL, "DYNAMIC", "STATIC", "PERMANENT",
                                              "DYNAMIC_SEQUENTIAL"};

enum { SERVICE_TYPE_COUNT = sizeof zkl_service_type_names / sizeof zkl_service_type_names[0] };

int zkl_service_type_named(const char *name)
{
    for (int i = 1; i < SERVICE_TYPE_COUNT; i++)
        if (strcmp(zkl_service_type_names[i], name) == 0)
            return i;
    return -1;
}

/* ---------------------------------------------------------------- writing */

/* Appends "key": */
static void key(zkl_json_buf *b, const char *name, int first)
{
    if (!first)
        zkl_json_buf_raw(b, ",", 1);
    zkl_json_buf_string_jackson(b, name, strlen(name));
    zkl_json_buf_raw(b, ":", 1);
}

static int string_or_null(zkl_json_buf *b, const char *s)
{
    if (!s) {
        zkl_json_buf_raw(b, "null", 4);
        return 0;
    }
    return zkl_json_buf_string_jackson(b, s, strlen(s));
}

static void int_or_null(zkl_json_buf *b, int has, int32_t v)
{
    if (has)
        zkl_json_buf_number(b, v);
    else
        zkl_json_buf_raw(b, "null", 4);
}

/* Java's String.trim(): drops leading and trailing bytes <= ' '. */
static void trim(const char **s, size_t *n)
{
    while (*n > 0 && (unsigned char)(*s)[0] <= ' ') {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && (unsigned char)(*s)[*n - 1] <= ' ')
        (*n)--;
}

/* Appends one part {"value":…,"variable":…}: 0, or -1 (not UTF-8). */
static int uri_part(zkl_json_buf *b, const char *s, size_t n, int variable, int first)
{
    if (!first)
        zkl_json_buf_raw(b, ",", 1);
    zkl_json_buf_raw(b, "{\"value\":", 9);
    if (zkl_json_buf_string_jackson(b, s, n) != 0)
        return -1;
    zkl_json_buf_raw(b, variable ? ",\"variable\":true}" : ",\"variable\":false}",
                     variable ? 17 : 18);
    return 0;
}

/* Appends Curator's UriSpec of spec: tokens split at '{' and '}' (StringTokenizer with the
 * delimiters returned: no empty token), a token inside braces a variable (trimmed). */
static int uri_spec(zkl_json_buf *b, const char *spec, const char **error)
{
    zkl_json_buf_raw(b, "{\"parts\":[", 10);
    int inside = 0, first = 1;
    const char *p = spec;
    while (*p) {
        if (*p == '{') {
            if (inside) {
                *error = "uriSpec: { is not allowed inside of a variable specification";
                return -1;
            }
            inside = 1;
            p++;
            continue;
        }
        if (*p == '}') {
            if (!inside) {
                *error = "uriSpec: } must be preceded by {";
                return -1;
            }
            inside = 0;
            p++;
            continue;
        }
        size_t n = strcspn(p, "{}");
        const char *token = p;
        size_t len = n;
        if (inside)
            trim(&token, &len);
        if (uri_part(b, token, len, inside, first) != 0) {
            *error = "uriSpec must be UTF-8";
            return -1;
        }
        first = 0;
        p += n;
    }
    if (inside) {
        *error = "uriSpec: Final variable not closed - expected }";
        return -1;
    }
    zkl_json_buf_raw(b, "]}", 2);
    return 0;
}

static int payload(zkl_json_buf *b, const char *text, const char **error)
{
    if (!text) {
        zkl_json_buf_raw(b, "null", 4);
        return 0;
    }
    zkl_json *tree = zkl_json_parse(text, strlen(text), error);
    if (!tree)
        return -1;
    int rc = zkl_json_buf_value(b, tree);
    zkl_json_free(tree);
    if (rc != 0)
        *error = "payload: a key holds NUL";
    return rc;
}

char *zkl_service_instance_encode(const zkl_service_instance *in, int with_enabled,
                                  size_t *len, const char **error)
{
    zkl_json_buf b;
    zkl_json_buf_init(&b);
    zkl_json_buf_raw(&b, "{", 1);
    key(&b, "name", 1);
    if (string_or_null(&b, in->name) != 0) {
        *error = "name must be UTF-8";
        goto fail;
    }
    key(&b, "id", 0);
    if (string_or_null(&b, in->id) != 0) {
        *error = "id must be UTF-8";
        goto fail;
    }
    key(&b, "address", 0);
    if (string_or_null(&b, in->address) != 0) {
        *error = "address must be UTF-8";
        goto fail;
    }
    key(&b, "port", 0);
    int_or_null(&b, in->has_port, in->port);
    key(&b, "sslPort", 0);
    int_or_null(&b, in->has_ssl_port, in->ssl_port);
    key(&b, "payload", 0);
    if (payload(&b, in->payload_json, error) != 0)
        goto fail;
    key(&b, "registrationTimeUTC", 0);
    zkl_json_buf_number(&b, (double)in->registration_time_utc);
    key(&b, "serviceType", 0);
    if (in->service_type > ZKL_SERVICE_TYPE_NULL && (int)in->service_type < SERVICE_TYPE_COUNT)
        string_or_null(&b, zkl_service_type_names[in->service_type]);
    else
        zkl_json_buf_raw(&b, "null", 4);
    key(&b, "uriSpec", 0);
    if (!in->uri_spec)
        zkl_json_buf_raw(&b, "null", 4);
    else if (uri_spec(&b, in->uri_spec, error) != 0)
        goto fail;
    if (with_enabled) {
        key(&b, "enabled", 0);
        zkl_json_buf_raw(&b, in->enabled ? "true" : "false", in->enabled ? 4 : 5);
    }
    zkl_json_buf_raw(&b, "}", 1);
    if (b.failed) {
        *error = "out of memory";
        goto fail;
    }
    *len = b.len;
    return b.data;
fail:
    zkl_json_buf_free(&b);
    return NULL;
}

/* ---------------------------------------------------------------- reading */

/* *out = a copy of the string member (NULL when null or missing): 0, or -1 with *error. */
static int read_string(const zkl_json *obj, const char *name, char **out, const char **error,
                       const char *wrong)
{
    const zkl_json *v = zkl_json_get(obj, name);
    if (!v || v->type == ZKL_JSON_NULL)
        return 0;
    if (v->type != ZKL_JSON_STRING) {
        *error = wrong;
        return -1;
    }
    *out = strdup(v->string);
    if (!*out) {
        *error = "out of memory";
        return -1;
    }
    return 0;
}

/* A whole number member within int32 (Java's Integer/int), or absent/null (*has 0). */
static int read_int(const zkl_json *obj, const char *name, int *has, int32_t *out,
                    const char **error, const char *wrong)
{
    const zkl_json *v = zkl_json_get(obj, name);
    *has = 0;
    if (!v || v->type == ZKL_JSON_NULL)
        return 0;
    if (v->type != ZKL_JSON_NUMBER || v->number != floor(v->number) ||
        v->number < -2147483648.0 || v->number > 2147483647.0) {
        *error = wrong;
        return -1;
    }
    *has = 1;
    *out = (int32_t)v->number;
    return 0;
}

static int read_payload(const zkl_json *obj, zkl_service_instance *out, const char **error)
{
    const zkl_json *v = zkl_json_get(obj, "payload");
    if (!v || v->type == ZKL_JSON_NULL)
        return 0;
    zkl_json_buf b;
    zkl_json_buf_init(&b);
    if (zkl_json_buf_value(&b, v) != 0 || b.failed) {
        zkl_json_buf_free(&b);
        *error = b.failed ? "out of memory" : "payload: a key holds NUL";
        return -1;
    }
    out->payload_json = b.data;
    return 0;
}

/* The template of a {"parts":[{"value":…,"variable":…},…]} member. */
static int read_uri_spec(const zkl_json *obj, zkl_service_instance *out, const char **error)
{
    const zkl_json *v = zkl_json_get(obj, "uriSpec");
    if (!v || v->type == ZKL_JSON_NULL)
        return 0;
    const zkl_json *parts = v->type == ZKL_JSON_OBJECT ? zkl_json_get(v, "parts") : NULL;
    if (!parts || parts->type != ZKL_JSON_ARRAY) {
        *error = "uriSpec must be an object with a \"parts\" array";
        return -1;
    }
    zkl_json_buf b;
    zkl_json_buf_init(&b);
    zkl_json_buf_raw(&b, "", 0); /* allocates: an empty spec is "", not NULL */
    for (size_t i = 0; i < parts->count; i++) {
        const zkl_json *part = parts->values[i];
        const zkl_json *value = part->type == ZKL_JSON_OBJECT ? zkl_json_get(part, "value") : NULL;
        const zkl_json *variable =
            part->type == ZKL_JSON_OBJECT ? zkl_json_get(part, "variable") : NULL;
        if (!value || value->type != ZKL_JSON_STRING ||
            (variable && variable->type != ZKL_JSON_BOOL)) {
            zkl_json_buf_free(&b);
            *error = "uriSpec: every part must have a string \"value\" and a boolean \"variable\"";
            return -1;
        }
        int is_variable = variable && variable->boolean;
        if (is_variable)
            zkl_json_buf_raw(&b, "{", 1);
        zkl_json_buf_raw(&b, value->string, value->string_len);
        if (is_variable)
            zkl_json_buf_raw(&b, "}", 1);
    }
    if (b.failed) {
        zkl_json_buf_free(&b);
        *error = "out of memory";
        return -1;
    }
    out->uri_spec = b.data; /* never NULL: the empty append above allocated it */
    return 0;
}

static int read_members(const zkl_json *obj, zkl_service_instance *out, const char **error)
{
    if (read_string(obj, "name", &out->name, error, "name must be a string") != 0 ||
        read_string(obj, "id", &out->id, error, "id must be a string") != 0 ||
        read_string(obj, "address", &out->address, error, "address must be a string") != 0 ||
        read_int(obj, "port", &out->has_port, &out->port, error,
                 "port must be a whole number within 32 bits") != 0 ||
        read_int(obj, "sslPort", &out->has_ssl_port, &out->ssl_port, error,
                 "sslPort must be a whole number within 32 bits") != 0 ||
        read_payload(obj, out, error) != 0 || read_uri_spec(obj, out, error) != 0)
        return -1;
    const zkl_json *v = zkl_json_get(obj, "registrationTimeUTC");
    if (v && v->type != ZKL_JSON_NULL) {
        if (v->type != ZKL_JSON_NUMBER || v->number != floor(v->number) ||
            fabs(v->number) > 9007199254740992.0) {
            *error = "registrationTimeUTC must be a whole number (ms)";
            return -1;
        }
        out->registration_time_utc = (int64_t)v->number;
    }
    v = zkl_json_get(obj, "serviceType");
    if (v && v->type != ZKL_JSON_NULL) {
        int type = v->type == ZKL_JSON_STRING ? zkl_service_type_named(v->string) : -1;
        if (type < 0) {
            *error = "serviceType must be DYNAMIC, STATIC, PERMANENT or DYNAMIC_SEQUENTIAL";
            return -1;
        }
        out->service_type = (zkl_service_type)type;
    }
    v = zkl_json_get(obj, "enabled");
    if (v && v->type != ZKL_JSON_NULL) {
        if (v->type != ZKL_JSON_BOOL) {
            *error = "enabled must be a boolean";
            return -1;
        }
        out->enabled = v->boolean;
    }
    return 0;
}

int zkl_service_instance_decode(const char *data, size_t len, zkl_service_instance *out,
                                const char **error)
{
    memset(out, 0, sizeof *out);
    out->enabled = 1; /* an instance without "enabled" is enabled (Curator's default) */
    zkl_json *tree = zkl_json_parse(data, len, error);
    if (!tree)
        return -1;
    int rc = 0;
    if (tree->type != ZKL_JSON_OBJECT) {
        *error = "a service instance must be a JSON object";
        rc = -1;
    } else {
        rc = read_members(tree, out, error);
    }
    zkl_json_free(tree);
    if (rc != 0)
        zkl_service_instance_clear(out);
    return rc;
}

void zkl_service_instance_clear(zkl_service_instance *out)
{
    free(out->name);
    free(out->id);
    free(out->address);
    free(out->payload_json);
    free(out->uri_spec);
    memset(out, 0, sizeof *out);
}
