/*
 * lease_record.c — see lease_record.h.  A small JSON reader (enough of json.loads to read
 * any record a kazoo or zklua process wrote, and to refuse what kazoo would refuse), the
 * json.dumps writer for the one record shape, and UTC calendar arithmetic.
 */
#include "lease_record.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 64, SECONDS_PER_DAY = 86400 };

/* ---------------------------------------------------------------- UTF-8 */

/* Decodes the code point at s (len bytes left): its length in bytes, or 0 if invalid. */
static size_t utf8_next(const unsigned char *s, size_t len, uint32_t *cp)
{
    if (len == 0)
        return 0;
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t n;
    uint32_t v, min;
    if ((c & 0xe0) == 0xc0) {
        n = 2, v = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3, v = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}


/* Appends cp as UTF-8 (surrogates too, as Python keeps a lone one: never equal to valid
 * UTF-8 text). */
static size_t utf8_put(char *out, uint32_t cp)
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

/* ---------------------------------------------------------------- JSON reading */

typedef enum { J_STRING, J_NUMBER, J_TRUE, J_FALSE, J_NULL, J_OTHER } json_type;

typedef struct {
    json_type type;
    char *str; /* J_STRING: decoded, malloc'd */
    size_t len;
    double num; /* J_NUMBER */
} json_value;

typedef struct {
    const char *p, *end;
    int depth;
    const char *why; /* the first problem found */
} json_reader;

static int fail(json_reader *j, const char *why)
{
    if (!j->why)
        j->why = why;
    return -1;
}

static void skip_space(json_reader *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int take_word(json_reader *j, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
        return 0;
    j->p += n;
    return 1;
}

static int hex4(const char *p, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        *v = (*v << 4) | (uint32_t)d;
    }
    return 0;
}

/* After a backslash: decodes one escape into out; returns the bytes written, or -1. */
static int read_escape(json_reader *j, char *out)
{
    if (j->p >= j->end)
        return fail(j, "unterminated string");
    char c = *j->p++;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *hit = c ? strchr(from, c) : NULL;
    if (hit) {
        out[0] = to[hit - from];
        return 1;
    }
    if (c != 'u' || j->end - j->p < 4)
        return fail(j, "bad escape in a string");
    uint32_t cp;
    if (hex4(j->p, &cp) != 0)
        return fail(j, "bad \\u escape in a string");
    j->p += 4;
    uint32_t low;
    if (cp >= 0xd800 && cp <= 0xdbff && j->end - j->p >= 6 && j->p[0] == '\\' &&
        j->p[1] == 'u' && hex4(j->p + 2, &low) == 0 && low >= 0xdc00 && low <= 0xdfff) {
        j->p += 6; /* a surrogate pair */
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    return (int)utf8_put(out, cp);
}

/* At the opening quote: reads a string, decoded into a malloc'd *out (when out is given). */
static int read_string(json_reader *j, char **out, size_t *len)
{
    j->p++; /* the quote */
    const char *start = j->p;
    /* decoding never grows the text: an escape of n chars yields at most n bytes */
    char *buf = malloc((size_t)(j->end - start) + 1);
    if (!buf)
        return fail(j, "out of memory");
    size_t n = 0;
    for (;;) {
        if (j->p >= j->end) {
            free(buf);
            return fail(j, "unterminated string");
        }
        unsigned char c = (unsigned char)*j->p;
        if (c == '"')
            break;
        if (c < 0x20) {
            free(buf);
            return fail(j, "control character in a string");
        }
        j->p++;
        if (c != '\\') {
            buf[n++] = (char)c;
            continue;
        }
        int w = read_escape(j, buf + n);
        if (w < 0) {
            free(buf);
            return -1;
        }
        n += (size_t)w;
    }
    j->p++; /* the closing quote */
    buf[n] = '\0';
    if (out) {
        *out = buf;
        *len = n;
    } else {
        free(buf);
    }
    return 0;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int read_number(json_reader *j, double *num)
{
    const char *start = j->p, *p = j->p;
    if (p < j->end && *p == '-')
        p++;
    if (p >= j->end || !is_digit(*p))
        return fail(j, "not JSON");
    if (*p == '0') {
        p++;
    } else {
        while (p < j->end && is_digit(*p))
            p++;
    }
    if (p < j->end && *p == '.') {
        p++;
        if (p >= j->end || !is_digit(*p))
            return fail(j, "bad number");
        while (p < j->end && is_digit(*p))
            p++;
    }
    if (p < j->end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < j->end && (*p == '+' || *p == '-'))
            p++;
        if (p >= j->end || !is_digit(*p))
            return fail(j, "bad number");
        while (p < j->end && is_digit(*p))
            p++;
    }
    char *copy = strndup(start, (size_t)(p - start));
    if (!copy)
        return fail(j, "out of memory");
    *num = strtod(copy, NULL);
    free(copy);
    j->p = p;
    return 0;
}

static int read_value(json_reader *j, json_value *v);

/* At '{' or '[': reads a container; each member is handed to member() when given (objects
 * only), else read and dropped. */
typedef int (*member_fn)(void *ctx, const char *key, size_t key_len, json_value *v);

static int read_container(json_reader *j, member_fn member, void *ctx)
{
    char close = *j->p == '{' ? '}' : ']';
    int object = close == '}';
    if (++j->depth > MAX_DEPTH)
        return fail(j, "nested too deeply");
    j->p++;
    skip_space(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        j->depth--;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len = 0;
        skip_space(j);
        if (object) {
            if (j->p >= j->end || *j->p != '"' || read_string(j, &key, &key_len) != 0)
                return fail(j, "expected a key in an object");
            skip_space(j);
            if (j->p >= j->end || *j->p != ':') {
                free(key);
                return fail(j, "expected ':' in an object");
            }
            j->p++;
        }
        json_value v = {0};
        int r = read_value(j, &v);
        if (r == 0 && member)
            r = member(ctx, key, key_len, &v);
        free(key);
        free(v.str);
        if (r != 0)
            return -1;
        skip_space(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == close) {
            j->p++;
            j->depth--;
            return 0;
        }
        return fail(j, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int read_value(json_reader *j, json_value *v)
{
    skip_space(j);
    if (j->p >= j->end)
        return fail(j, "not JSON");
    char c = *j->p;
    if (c == '"') {
        v->type = J_STRING;
        return read_string(j, &v->str, &v->len);
    }
    if (c == '{' || c == '[') {
        v->type = J_OTHER;
        return read_container(j, NULL, NULL);
    }
    v->type = J_NUMBER; /* Python's json extensions */
    if (take_word(j, "NaN")) {
        v->num = NAN;
        return 0;
    }
    if (take_word(j, "Infinity")) {
        v->num = INFINITY;
        return 0;
    }
    if (take_word(j, "-Infinity")) {
        v->num = -INFINITY;
        return 0;
    }
    if (take_word(j, "true")) {
        v->type = J_TRUE;
        return 0;
    }
    if (take_word(j, "false")) {
        v->type = J_FALSE;
        return 0;
    }
    if (take_word(j, "null")) {
        v->type = J_NULL;
        return 0;
    }
    return read_number(j, &v->num);
}

/* Moves a string value's text out of v into *field (freeing what was there). */
static void keep_string(char **field, size_t *len, json_value *v)
{
    free(*field);
    *field = v->str;
    *len = v->len;
    v->str = NULL;
}

static int record_member(void *ctx, const char *key, size_t key_len, json_value *v)
{
    zkl_lease_record *r = ctx;
    int is_string = v->type == J_STRING;
    if (key_len == 7 && memcmp(key, "version", 7) == 0) {
        r->has_version = 1; /* Python: 1 == 1.0 == True */
        r->version_is_one = (v->type == J_NUMBER && v->num == 1.0) || v->type == J_TRUE;
    } else if (key_len == 6 && memcmp(key, "holder", 6) == 0) {
        r->has_holder = 1;
        r->holder_is_string = is_string;
        if (is_string)
            keep_string(&r->holder, &r->holder_len, v);
    } else if (key_len == 3 && memcmp(key, "end", 3) == 0) {
        r->has_end = 1;
        r->end_is_string = is_string;
        if (is_string)
            keep_string(&r->end, &r->end_len, v);
    }
    return 0;
}

void zkl_lease_record_clear(zkl_lease_record *r)
{
    free(r->holder);
    free(r->end);
    memset(r, 0, sizeof *r);
}

const char *zkl_lease_record_parse(const char *data, size_t len, zkl_lease_record *r)
{
    memset(r, 0, sizeof *r);
    if (!zkl_utf8_valid(data, len))
        return "not UTF-8";
    json_reader j = {data, data + len, 0, NULL};
    skip_space(&j);
    if (j.p >= j.end || *j.p != '{') {
        json_value v = {0}; /* read it anyway: malformed JSON is told apart from a non-object */
        int r_value = read_value(&j, &v);
        free(v.str);
        return r_value != 0 ? j.why : "not a JSON object";
    }
    if (read_container(&j, record_member, r) != 0) {
        zkl_lease_record_clear(r);
        return j.why;
    }
    skip_space(&j);
    if (j.p != j.end) {
        zkl_lease_record_clear(r);
        return "extra data after the JSON value";
    }
    return NULL;
}

/* ---------------------------------------------------------------- UTC calendar */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int days_in_month(int64_t y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

int zkl_lease_time_format(int64_t t, char out[ZKL_LEASE_TIME_LEN + 1])
{
    int64_t days = t / SECONDS_PER_DAY, secs = t % SECONDS_PER_DAY;
    if (secs < 0) { /* floor division */
        secs += SECONDS_PER_DAY;
        days--;
    }
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    if (y < 1000 || y > 9999)
        return -1;
    snprintf(out, ZKL_LEASE_TIME_LEN + 1, "%04d-%02d-%02dT%02d:%02d:%02d", (int)y, m, d,
             (int)(secs / 3600), (int)(secs / 60 % 60), (int)(secs % 60));
    return 0;
}

/* Reads a field of at least min_digits and at most max_digits digits at *p. */
static int read_field(const char **p, const char *end, int min_digits, int max_digits, int *v)
{
    int n = 0;
    *v = 0;
    while (*p < end && n < max_digits && is_digit(**p)) {
        *v = *v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    return n >= min_digits && (*p >= end || !is_digit(**p)) ? 0 : -1;
}

static int expect(const char **p, const char *end, char c)
{
    if (*p >= end || (**p != c && !(c == 'T' && **p == 't')))
        return -1;
    (*p)++;
    return 0;
}

int zkl_lease_time_parse(const char *text, size_t len, int64_t *t)
{
    const char *p = text, *end = text + len;
    int y, mo, d, h, mi, s;
    if (read_field(&p, end, 4, 4, &y) || expect(&p, end, '-') ||
        read_field(&p, end, 1, 2, &mo) || expect(&p, end, '-'))
        return -1;
    if (p < end && *p == ' ') /* strptime's %d also takes " 5" */
        p++;
    if (read_field(&p, end, 1, 2, &d) || expect(&p, end, 'T') ||
        read_field(&p, end, 1, 2, &h) || expect(&p, end, ':') ||
        read_field(&p, end, 1, 2, &mi) || expect(&p, end, ':') ||
        read_field(&p, end, 1, 2, &s) || p != end)
        return -1;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 ||
        s > 59)
        return -1;
    *t = days_from_civil(y, mo, d) * SECONDS_PER_DAY + h * 3600 + mi * 60 + s;
    return 0;
}

/* ---------------------------------------------------------------- writing */

static const char HEX[] = "0123456789abcdef";

static size_t put_u_escape(char *out, uint32_t unit)
{
    out[0] = '\\';
    out[1] = 'u';
    for (int i = 0; i < 4; i++)
        out[2 + i] = HEX[(unit >> (12 - 4 * i)) & 0xf];
    return 6;
}

/* json.dumps's ensure_ascii escaping of one code point. */
static size_t put_escaped(char *out, uint32_t cp)
{
    static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";
    const char *hit = cp > 0 && cp < 0x80 ? strchr(from, (int)cp) : NULL;
    if (hit) {
        out[0] = '\\';
        out[1] = to[hit - from];
        return 2;
    }
    if (cp >= ' ' && cp <= '~') {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x10000)
        return put_u_escape(out, cp);
    cp -= 0x10000;
    size_t n = put_u_escape(out, 0xd800 | (cp >> 10));
    return n + put_u_escape(out + n, 0xdc00 | (cp & 0x3ff));
}

char *zkl_lease_record_encode(const char *holder, size_t len, int64_t end, size_t *out_len)
{
    char when[ZKL_LEASE_TIME_LEN + 1];
    if (!zkl_utf8_valid(holder, len)) {
        errno = EILSEQ;
        return NULL;
    }
    if (zkl_lease_time_format(end, when) != 0) {
        errno = ERANGE;
        return NULL;
    }
    static const char head[] = "{\"version\": 1, \"holder\": \"", mid[] = "\", \"end\": \"",
                      tail[] = "\"}";
    /* a byte of UTF-8 becomes at most 6 characters (\u00XX) */
    char *out = malloc(sizeof head + 6 * len + sizeof mid + ZKL_LEASE_TIME_LEN + sizeof tail);
    if (!out) {
        errno = ENOMEM;
        return NULL;
    }
    size_t n = sizeof head - 1;
    memcpy(out, head, n);
    const unsigned char *s = (const unsigned char *)holder;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t step = utf8_next(s + i, len - i, &cp);
        if (step == 0) { /* cannot happen: checked above; never loop forever */
            free(out);
            errno = EILSEQ;
            return NULL;
        }
        i += step;
        n += put_escaped(out + n, cp);
    }
    memcpy(out + n, mid, sizeof mid - 1);
    n += sizeof mid - 1;
    memcpy(out + n, when, ZKL_LEASE_TIME_LEN);
    n += ZKL_LEASE_TIME_LEN;
    memcpy(out + n, tail, sizeof tail);
    *out_len = n + sizeof tail - 1;
    return out;
}
