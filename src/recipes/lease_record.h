/*
 * lease_record.h — the lease_holder record of kazoo's NonBlockingLease, read and written as
 * kazoo 2.8 does (no Lua here).
 *
 * kazoo writes json.dumps({"version": 1, "holder": ident, "end": end}).encode("utf-8"), i.e.
 *   {"version": 1, "holder": "<ident>", "end": "%Y-%m-%dT%H:%M:%S"}
 * with json's defaults: ", " and ": " separators and ensure_ascii (every character outside
 * ' '..'~' escaped, \uXXXX in lowercase hex, surrogate pairs above U+FFFF).  The end is a
 * naive UTC time, whole seconds.  zkl_lease_record_encode() writes exactly those bytes, so a
 * record is the same whichever side wrote it.
 *
 * Reading follows json.loads and kazoo's checks: the data must be UTF-8 JSON (Python's
 * extensions NaN/Infinity accepted, control characters in strings refused, nesting limited),
 * and a JSON object for the fields to be looked up; the last of duplicate keys wins.  A
 * version equal to 1 as Python compares it (1, 1.0, true) is version 1.
 *
 * Times are seconds since the Unix epoch, UTC, converted by calendar arithmetic (no time
 * zone, no libc time functions): the same on every host.
 */
#ifndef ZKL_LEASE_RECORD_H
#define ZKL_LEASE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

enum { ZKL_LEASE_TIME_LEN = 19 }; /* "YYYY-MM-DDTHH:MM:SS" */

typedef struct {
    int has_version, version_is_one;
    int has_holder, holder_is_string;
    char *holder; /* UTF-8 (malloc'd) when holder_is_string */
    size_t holder_len;
    int has_end, end_is_string;
    char *end; /* as stored (malloc'd) when end_is_string */
    size_t end_len;
} zkl_lease_record;

/* Parses data into *r (zeroed first): NULL, or why it is not JSON kazoo could read (a static
 * string); *r is then cleared.  Free with zkl_lease_record_clear(). */
const char *zkl_lease_record_parse(const char *data, size_t len, zkl_lease_record *r);
void zkl_lease_record_clear(zkl_lease_record *r);

/* Reads text as Python's strptime(text, "%Y-%m-%dT%H:%M:%S") (one- or two-digit fields, a
 * 'T' in either case, a valid date and time): 0 and *t, or -1. */
int zkl_lease_time_parse(const char *text, size_t len, int64_t *t);
/* Writes t as "%Y-%m-%dT%H:%M:%S" and a NUL: 0, or -1 when its year is outside 1000..9999
 * (where kazoo's own strptime could not read it back). */
int zkl_lease_time_format(int64_t t, char out[ZKL_LEASE_TIME_LEN + 1]);

/* The record for holder (UTF-8) ending at end, malloc'd, *out_len its length; NULL with
 * errno EILSEQ (holder is not UTF-8), ERANGE (end out of range) or ENOMEM. */
char *zkl_lease_record_encode(const char *holder, size_t len, int64_t end, size_t *out_len);

/* zkl_utf8_valid (json.h) checks holders: valid UTF-8, no surrogates, no overlong forms. */

#endif
