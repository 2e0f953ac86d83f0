/*
 * lease_record.c — see lease_record.h.  The record is read with json.c in Python's dialect
 * (zkl_json_parse_python: what json.loads reads), written by json.dumps's rules for its one
 * shape (ensure_ascii escapes), and its time converted by UTC calendar arithmetic.
 */
#include "lease_record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SECONDS_PER_DAY = 86400 };

/* ---------------------------------------------------------------- reading */

/* A string field's text moved out of the tree into *field. */
static void take_string(zkl_json *v, char **field, size_t *len)
{
    *field = v->string;
    *len = v->string_len;
    v->string = NULL;
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
    const char *why = NULL;
    zkl_json *doc = zkl_json_parse_python(data, len, &why);
    if (!doc)
        return why;
    if (doc->type != ZKL_JSON_OBJECT) {
        zkl_json_free(doc);
        return "not a JSON object";
    }
    const zkl_json *version = zkl_json_get(doc, "version");
    zkl_json *holder = (zkl_json *)zkl_json_get(doc, "holder");
    zkl_json *end = (zkl_json *)zkl_json_get(doc, "end");
    r->has_version = version != NULL; /* Python: 1 == 1.0 == True */
    r->version_is_one = version && ((version->type == ZKL_JSON_NUMBER && version->number == 1.0) ||
                                    (version->type == ZKL_JSON_BOOL && version->boolean));
    r->has_holder = holder != NULL;
    r->holder_is_string = holder && holder->type == ZKL_JSON_STRING;
    if (r->holder_is_string)
        take_string(holder, &r->holder, &r->holder_len);
    r->has_end = end != NULL;
    r->end_is_string = end && end->type == ZKL_JSON_STRING;
    if (r->end_is_string)
        take_string(end, &r->end, &r->end_len);
    zkl_json_free(doc);
    return NULL;
}

/* ---------------------------------------------------------------- UTC calendar */

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

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
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t step = zkl_utf8_decode(holder + i, len - i, &cp);
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
