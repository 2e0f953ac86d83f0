/*
 * json.h — the small JSON the allocator's and service discovery's znodes hold (no Lua here): a parser into a tree
 * and an append-only writer.
 *
 * Guarantees:
 * - The parser accepts RFC 8259 JSON (one value, surrounding whitespace) and nothing else;
 *   nesting deeper than ZKL_JSON_MAX_DEPTH is refused (no stack exhaustion on hostile data),
 *   strings are decoded to UTF-8 (surrogate pairs joined; a lone surrogate is an error) and
 *   a string holding "\u0000" is refused, so every decoded string is a C string.
 *   Numbers are doubles.  On error it returns NULL and names the problem; nothing leaks.
 * - zkl_json_parse_python() reads what Python's json.loads reads (kazoo's records): also
 *   NaN, Infinity and -Infinity, lone surrogates (kept as their 3-byte form, which never
 *   equals valid UTF-8 text), "\u0000" in strings (string_len counts it; an object key
 *   holding it matches no lookup), nesting to ZKL_JSON_PYTHON_MAX_DEPTH.  Its text must
 *   be UTF-8 already (check with zkl_utf8_valid()).
 * - The writer escapes strings as JSON requires and refuses bytes that are not UTF-8, so
 *   what it writes always parses back to the same strings.  A buffer that ran out of memory
 *   stays failed (every later append is a no-op) and says so once at the end.
 */
#ifndef ZKL_JSON_H
#define ZKL_JSON_H

#include <stddef.h>
#include <stdint.h>

enum { ZKL_JSON_MAX_DEPTH = 16, ZKL_JSON_PYTHON_MAX_DEPTH = 64 };

typedef enum {
    ZKL_JSON_NULL,
    ZKL_JSON_BOOL,
    ZKL_JSON_NUMBER,
    ZKL_JSON_STRING,
    ZKL_JSON_ARRAY,
    ZKL_JSON_OBJECT
} zkl_json_type;

typedef struct zkl_json zkl_json;
struct zkl_json {
    zkl_json_type type;
    int boolean;
    double number;
    char *string;      /* STRING: NUL-terminated UTF-8 */
    size_t string_len; /* STRING: its length in bytes (a "\u0000" counts, in Python's form) */
    size_t count;      /* ARRAY, OBJECT: how many members */
    zkl_json **values; /* ARRAY, OBJECT */
    char **keys;       /* OBJECT: one per value (NULL: a key holding NUL, Python's form) */
};

/* Parses text[0..len): the tree, or NULL with *error (a static message) set. */
zkl_json *zkl_json_parse(const char *text, size_t len, const char **error);
/* The same, reading Python's json.loads dialect (see the top). */
zkl_json *zkl_json_parse_python(const char *text, size_t len, const char **error);
void zkl_json_free(zkl_json *v);
/* An object's member named key (the last one when repeated), or NULL. */
const zkl_json *zkl_json_get(const zkl_json *object, const char *key);

/* Whether s[0..n) is UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF). */
int zkl_utf8_valid(const char *s, size_t n);
/* The code point of the UTF-8 sequence at s (n bytes available) in *cp: its length in bytes,
 * or 0 when it is not valid UTF-8 (as zkl_utf8_valid judges). */
size_t zkl_utf8_decode(const char *s, size_t n, uint32_t *cp);

typedef struct {
    char *data; /* NUL-terminated while not failed */
    size_t len, cap;
    int failed; /* out of memory */
} zkl_json_buf;

void zkl_json_buf_init(zkl_json_buf *b);
void zkl_json_buf_free(zkl_json_buf *b);
void zkl_json_buf_raw(zkl_json_buf *b, const char *s, size_t n);
/* Appends s as a JSON string: 0, or -1 (nothing appended) when s is not UTF-8. */
int zkl_json_buf_string(zkl_json_buf *b, const char *s, size_t n);
/* Appends a finite number, as short as reads back exactly (integers without a point). */
void zkl_json_buf_number(zkl_json_buf *b, double v);
/* Appends s as Jackson (Java) writes a string: \b \t \n \f \r short forms, other control
 * characters as \u00XX (upper-case hex), the rest as it is: 0, or -1 when s is not UTF-8. */
int zkl_json_buf_string_jackson(zkl_json_buf *b, const char *s, size_t n);
/* Appends the tree v (strings as zkl_json_buf_string_jackson writes them): 0, or -1 when a
 * string in it is not UTF-8 or a key holds NUL (what was appended before stays). */
int zkl_json_buf_value(zkl_json_buf *b, const zkl_json *v);

#endif
