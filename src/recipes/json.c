/*
 * json.c — see json.h.  A recursive-descent parser bounded by ZKL_JSON_MAX_DEPTH, and a
 * growing buffer for writing.  Guarantees: every allocation of a tree that fails to parse is
 * freed before returning; the writer never emits bytes that would not parse back.
 */
#include "json.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- UTF-8 */

size_t zkl_utf8_decode(const char *text, size_t n, uint32_t *code_point)
{
    const unsigned char *s = (const unsigned char *)text;
    if (n == 0)
        return 0;
    unsigned c = s[0];
    size_t len;
    uint32_t min, cp;
    if (c < 0x80) {
        *code_point = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        min = 0x80;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        min = 0x800;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        min = 0x10000;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    *code_point = cp;
    return len;
}

int zkl_utf8_valid(const char *s, size_t n)
{
    size_t i = 0;
    uint32_t cp;
    while (i < n) {
        size_t len = zkl_utf8_decode(s + i, n - i, &cp);
        if (len == 0)
            return 0;
        i += len;
    }
    return 1;
}

/* ---------------------------------------------------------------- writer */

void zkl_json_buf_init(zkl_json_buf *b)
{
    memset(b, 0, sizeof *b);
}

void zkl_json_buf_free(zkl_json_buf *b)
{
    free(b->data);
    zkl_json_buf_init(b);
}

static int reserve(zkl_json_buf *b, size_t more)
{
    if (b->failed)
        return -1;
    if (b->len + more + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data) {
        b->failed = 1;
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

void zkl_json_buf_raw(zkl_json_buf *b, const char *s, size_t n)
{
    if (reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void zkl_json_buf_number(zkl_json_buf *b, double v)
{
    char text[40];
    if (!isfinite(v))
        v = 0; /* JSON has no infinities; callers check their numbers */
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        snprintf(text, sizeof text, "%.0f", v);
    } else {
        int prec = 15; /* the shortest of 15..17 digits that reads back exactly */
        do
            snprintf(text, sizeof text, "%.*g", prec, v);
        while (strtod(text, NULL) != v && ++prec <= 17);
    }
    zkl_json_buf_raw(b, text, strlen(text));
}

/* The letter of Jackson's short escape for control byte c, or 0 when it has none. */
static char jackson_short_escape(unsigned char c)
{
    switch (c) {
    case '\b':
        return 'b';
    case '\t':
        return 't';
    case '\n':
        return 'n';
    case '\f':
        return 'f';
    case '\r':
        return 'r';
    default:
        return 0;
    }
}

/* Appends s as a JSON string: '"' and '\\' escaped by a backslash, other control bytes as
 * \u00xx (lowercase hex) or, in Jackson's style, by their short escape where JSON has one and
 * else as \u00XX (uppercase hex). */
static int buf_string(zkl_json_buf *b, const char *s, size_t n, int jackson)
{
    if (!zkl_utf8_valid(s, n))
        return -1;
    zkl_json_buf_raw(b, "\"", 1);
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        zkl_json_buf_raw(b, s + start, i - start);
        char esc[8];
        char letter = jackson ? jackson_short_escape(c) : 0;
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else if (letter)
            snprintf(esc, sizeof esc, "\\%c", letter);
        else
            snprintf(esc, sizeof esc, jackson ? "\\u%04X" : "\\u%04x", c);
        zkl_json_buf_raw(b, esc, strlen(esc));
        start = i + 1;
    }
    zkl_json_buf_raw(b, s + start, n - start);
    zkl_json_buf_raw(b, "\"", 1);
    return 0;
}

int zkl_json_buf_string(zkl_json_buf *b, const char *s, size_t n)
{
    return buf_string(b, s, n, 0);
}

int zkl_json_buf_string_jackson(zkl_json_buf *b, const char *s, size_t n)
{
    return buf_string(b, s, n, 1);
}

int zkl_json_buf_value(zkl_json_buf *b, const zkl_json *v)
{
    switch (v->type) {
    case ZKL_JSON_NULL:
        zkl_json_buf_raw(b, "null", 4);
        return 0;
    case ZKL_JSON_BOOL:
        zkl_json_buf_raw(b, v->boolean ? "true" : "false", v->boolean ? 4 : 5);
        return 0;
    case ZKL_JSON_NUMBER:
        zkl_json_buf_number(b, v->number);
        return 0;
    case ZKL_JSON_STRING:
        return zkl_json_buf_string_jackson(b, v->string, v->string_len);
    case ZKL_JSON_ARRAY:
    case ZKL_JSON_OBJECT:
        break;
    }
    int object = v->type == ZKL_JSON_OBJECT;
    zkl_json_buf_raw(b, object ? "{" : "[", 1);
    for (size_t i = 0; i < v->count; i++) {
        if (i > 0)
            zkl_json_buf_raw(b, ",", 1);
        if (object) {
            if (!v->keys[i] || zkl_json_buf_string_jackson(b, v->keys[i], strlen(v->keys[i])) != 0)
                return -1;
            zkl_json_buf_raw(b, ":", 1);
        }
        if (zkl_json_buf_value(b, v->values[i]) != 0)
            return -1;
    }
    zkl_json_buf_raw(b, object ? "}" : "]", 1);
    return 0;
}

/* ---------------------------------------------------------------- parser */

typedef struct {
    const char *p, *end;
    const char *error;
    int depth;
    int python; /* Python's json.loads dialect (see json.h) */
} parser;

static void skip_space(parser *ps)
{
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static zkl_json *fail(parser *ps, const char *error)
{
    if (!ps->error)
        ps->error = error;
    return NULL;
}

static zkl_json *new_value(parser *ps, zkl_json_type type)
{
    zkl_json *v = calloc(1, sizeof *v);
    if (!v)
        return fail(ps, "out of memory");
    v->type = type;
    return v;
}

static int literal(parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return 0;
    ps->p += n;
    return 1;
}

static int hex4(parser *ps, unsigned *out)
{
    if (ps->end - ps->p < 4)
        return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = ps->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    ps->p += 4;
    *out = v;
    return 0;
}

static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The code point of a \u escape (ps->p just after "\u"), joining a surrogate pair. */
static int unicode_escape(parser *ps, unsigned *cp)
{
    unsigned hi;
    if (hex4(ps, &hi) != 0)
        return -1;
    *cp = hi;
    if (hi >= 0xdc00 && hi <= 0xdfff)
        return ps->python ? 0 : -1; /* a lone low surrogate */
    if (hi < 0xd800 || hi > 0xdbff)
        return 0;
    const char *after_hi = ps->p;
    unsigned lo;
    if (ps->end - ps->p >= 2 && ps->p[0] == '\\' && ps->p[1] == 'u') {
        ps->p += 2;
        if (hex4(ps, &lo) == 0 && lo >= 0xdc00 && lo <= 0xdfff) {
            *cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
            return 0;
        }
    }
    ps->p = after_hi; /* a lone high surrogate */
    return ps->python ? 0 : -1;
}

/* One escape after a backslash, appended to out; returns bytes written or 0 on error. */
static size_t escape(parser *ps, char *out)
{
    if (ps->p >= ps->end)
        return 0;
    char c = *ps->p++;
    switch (c) {
    case '"': case '\\': case '/': out[0] = c; return 1;
    case 'b': out[0] = '\b'; return 1;
    case 'f': out[0] = '\f'; return 1;
    case 'n': out[0] = '\n'; return 1;
    case 'r': out[0] = '\r'; return 1;
    case 't': out[0] = '\t'; return 1;
    case 'u': {
        unsigned cp;
        if (unicode_escape(ps, &cp) != 0 || (cp == 0 && !ps->python))
            return 0;
        return put_utf8(out, cp);
    }
    default:
        return 0;
    }
}

/* A string (ps->p on its opening quote), malloc'd, *len its length; NULL on error. */
static char *parse_string(parser *ps, size_t *len)
{
    ps->p++; /* the quote */
    const char *start = ps->p;
    while (ps->p < ps->end && *ps->p != '"') /* its size bounds the decoded size */
        ps->p += *ps->p == '\\' && ps->p + 1 < ps->end ? 2 : 1;
    if (ps->p >= ps->end)
        return (char *)fail(ps, "unterminated string");
    size_t raw = (size_t)(ps->p - start);
    ps->p = start;
    char *out = malloc(raw + 1);
    if (!out)
        return (char *)fail(ps, "out of memory");
    size_t n = 0;
    while (*ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) {
            free(out);
            return (char *)fail(ps, "control character in a string");
        }
        if (c == '\\') {
            ps->p++;
            size_t k = escape(ps, out + n);
            if (k == 0) {
                free(out);
                return (char *)fail(ps, "bad escape in a string");
            }
            n += k;
            continue;
        }
        uint32_t cp;
        size_t k = zkl_utf8_decode(ps->p, (size_t)(ps->end - ps->p), &cp);
        if (k == 0) {
            free(out);
            return (char *)fail(ps, "a string is not UTF-8");
        }
        memcpy(out + n, ps->p, k);
        n += k;
        ps->p += k;
    }
    ps->p++; /* the closing quote */
    out[n] = '\0';
    *len = n;
    return out;
}

static zkl_json *parse_number(parser *ps)
{
    const char *s = ps->p;
    if (ps->p < ps->end && *ps->p == '-')
        ps->p++;
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
        return fail(ps, "bad number");
    if (*ps->p == '0')
        ps->p++;
    else
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
            return fail(ps, "bad number");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
            return fail(ps, "bad number");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    }
    char *text = strndup(s, (size_t)(ps->p - s));
    if (!text)
        return fail(ps, "out of memory");
    zkl_json *v = new_value(ps, ZKL_JSON_NUMBER);
    if (v)
        v->number = strtod(text, NULL);
    free(text);
    return v;
}

static zkl_json *parse_value(parser *ps);

/* Appends child (and key, for objects) to v; -1 when out of memory (child then freed). */
static int append(parser *ps, zkl_json *v, zkl_json *child, char *key)
{
    if ((v->count & (v->count - 1)) == 0) { /* grow at 0, 1, 2, 4, 8, ... */
        size_t cap = v->count ? v->count * 2 : 1;
        zkl_json **values = realloc(v->values, cap * sizeof *values);
        if (values)
            v->values = values;
        char **keys = v->type == ZKL_JSON_OBJECT ? realloc(v->keys, cap * sizeof *keys) : NULL;
        if (keys)
            v->keys = keys;
        if (!values || (v->type == ZKL_JSON_OBJECT && !keys)) {
            zkl_json_free(child);
            free(key);
            fail(ps, "out of memory");
            return -1;
        }
    }
    v->values[v->count] = child;
    if (v->type == ZKL_JSON_OBJECT)
        v->keys[v->count] = key;
    v->count++;
    return 0;
}

/* An array or object (ps->p on its bracket). */
static zkl_json *parse_container(parser *ps, int object)
{
    char close = object ? '}' : ']';
    if (++ps->depth > (ps->python ? ZKL_JSON_PYTHON_MAX_DEPTH : ZKL_JSON_MAX_DEPTH))
        return fail(ps, "nested too deep");
    ps->p++;
    zkl_json *v = new_value(ps, object ? ZKL_JSON_OBJECT : ZKL_JSON_ARRAY);
    if (!v)
        return NULL;
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return v;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len = 0;
        skip_space(ps);
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"' || !(key = parse_string(ps, &key_len)))
                break;
            if (strlen(key) != key_len) { /* holds NUL (Python's form): matches no lookup */
                free(key);
                key = NULL;
            }
            skip_space(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                fail(ps, "expected ':'");
                break;
            }
            ps->p++;
        }
        zkl_json *child = parse_value(ps);
        if (!child) {
            free(key);
            break;
        }
        if (append(ps, v, child, key) != 0)
            break;
        skip_space(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return v;
        }
        fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
        break;
    }
    fail(ps, object ? "bad object" : "bad array");
    zkl_json_free(v);
    return NULL;
}

static zkl_json *parse_value(parser *ps)
{
    skip_space(ps);
    if (ps->p >= ps->end)
        return fail(ps, "unexpected end");
    char c = *ps->p;
    if (c == '{' || c == '[')
        return parse_container(ps, c == '{');
    if (c == '"') {
        size_t len = 0;
        char *s = parse_string(ps, &len);
        if (!s)
            return NULL;
        zkl_json *v = new_value(ps, ZKL_JSON_STRING);
        if (!v) {
            free(s);
            return NULL;
        }
        v->string = s;
        v->string_len = len;
        return v;
    }
    if (ps->python) { /* Python's json extensions */
        static const char *const words[] = {"NaN", "Infinity", "-Infinity"};
        const double values[] = {NAN, INFINITY, -INFINITY};
        for (int i = 0; i < 3; i++) {
            if (literal(ps, words[i])) {
                zkl_json *v = new_value(ps, ZKL_JSON_NUMBER);
                if (v)
                    v->number = values[i];
                return v;
            }
        }
    }
    if (c == '-' || (c >= '0' && c <= '9'))
        return parse_number(ps);
    if (literal(ps, "true") || literal(ps, "false")) {
        zkl_json *v = new_value(ps, ZKL_JSON_BOOL);
        if (v)
            v->boolean = ps->p[-1] == 'e' && ps->p[-2] == 'u';
        return v;
    }
    if (literal(ps, "null"))
        return new_value(ps, ZKL_JSON_NULL);
    return fail(ps, "unexpected character");
}

static zkl_json *parse(const char *text, size_t len, int python, const char **error)
{
    parser ps = {text, text + len, NULL, 0, python};
    zkl_json *v = parse_value(&ps);
    if (v) {
        skip_space(&ps);
        if (ps.p != ps.end) {
            zkl_json_free(v);
            v = fail(&ps, "trailing characters");
        }
    }
    if (!v && error)
        *error = ps.error ? ps.error : "bad JSON";
    return v;
}

zkl_json *zkl_json_parse(const char *text, size_t len, const char **error)
{
    return parse(text, len, 0, error);
}

zkl_json *zkl_json_parse_python(const char *text, size_t len, const char **error)
{
    return parse(text, len, 1, error);
}

void zkl_json_free(zkl_json *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->count; i++) {
        zkl_json_free(v->values[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->values);
    free(v->keys);
    free(v->string);
    free(v);
}

const zkl_json *zkl_json_get(const zkl_json *object, const char *key)
{
    if (!object || object->type != ZKL_JSON_OBJECT)
        return NULL;
    for (size_t i = object->count; i-- > 0;) {
        if (object->keys[i] && strcmp(object->keys[i], key) == 0)
            return object->values[i];
    }
    return NULL;
}
