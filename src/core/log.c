/*
 * log.c — see log.h.
 *
 * libzookeeper's log callback gets no context, only the formatted line, so the context is the
 * callback itself: ZKL_LOG_SLOTS small functions, each reading the sink bound to its slot.
 * A slot is bound before zookeeper_init2() and released after zookeeper_close() has joined the
 * handle's threads, so a callback never sees a sink that is gone.
 *
 * A library line reads "<date> <time>,<ms>:<pid>(0x<tid>):ZOO_<LEVEL>@<function>@<line>: <text>";
 * the sink keeps the level, the place (function@line) and the text, and hands the owner
 * "libzookeeper <function>@<line>: <text>".
 */
#include "log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "event.h"
#include "queue.h"
#include "reconnect.h"
#include "tls.h"

enum { LEVELS = 5 }; /* 0 (none) .. ZOO_LOG_LEVEL_DEBUG */

static pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(zkl_log_sink *) slot_sinks[ZKL_LOG_SLOTS];
static int bound_at_level[LEVELS]; /* bound sinks per level; guarded by registry_mutex */
static atomic_int library_level;

const char *zkl_log_level_name(int level)
{
    static const char *const names[LEVELS] = {"NONE", "ERROR", "WARN", "INFO", "DEBUG"};
    return level >= 0 && level < LEVELS ? names[level] : "INFO";
}

int zkl_log_library_level(void)
{
    return atomic_load(&library_level);
}

/* ---- one line ---- */

typedef struct {
    int level;
    char where[ZKL_LOG_WHERE_SIZE]; /* "function@line", maybe truncated */
    const char *text;
    int text_len; /* without trailing blanks and newlines */
} library_line;

static int level_of(const char *name, size_t len)
{
    for (int level = 1; level < LEVELS; level++) {
        const char *candidate = zkl_log_level_name(level);
        if (strlen(candidate) == len && memcmp(candidate, name, len) == 0)
            return level;
    }
    return ZOO_LOG_LEVEL_INFO;
}

static int trimmed_length(const char *text)
{
    size_t n = strlen(text);
    while (n > 0 && strchr(" \t\r\n", text[n - 1]))
        n--;
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* Splits a library line; a line in another shape is kept whole, as INFO from nowhere. */
static void parse_line(const char *message, library_line *out)
{
    out->level = ZOO_LOG_LEVEL_INFO;
    out->where[0] = '\0';
    out->text = message;
    out->text_len = trimmed_length(message);
    const char *tag = strstr(message, "):ZOO_");
    if (!tag)
        return;
    const char *level = tag + strlen("):ZOO_");
    const char *at = strchr(level, '@');
    const char *colon = at ? strstr(at + 1, ": ") : NULL;
    if (!colon)
        return;
    out->level = level_of(level, (size_t)(at - level));
    size_t len = (size_t)(colon - (at + 1));
    if (len >= sizeof out->where)
        len = sizeof out->where - 1;
    memcpy(out->where, at + 1, len);
    out->where[len] = '\0';
    out->text = colon + 2;
    out->text_len = trimmed_length(out->text);
}

/* ---- the sink ---- */

int zkl_log_sink_init(zkl_log_sink *sink, struct zkl_queue *queue, int level,
                      struct zkl_reconnect *reconnect)
{
    memset(sink, 0, sizeof *sink);
    if (pthread_mutex_init(&sink->mutex, NULL) != 0)
        return -1;
    sink->queue = queue;
    sink->reconnect = reconnect;
    sink->level = level < 0 ? 0 : level >= LEVELS ? LEVELS - 1 : level;
    sink->slot = -1;
    atomic_init(&sink->queued, 0);
    return 0;
}

void zkl_log_sink_destroy(zkl_log_sink *sink)
{
    pthread_mutex_destroy(&sink->mutex);
}

/* Queues "libzookeeper <where>: <text>" plus what was suppressed; on failure the line is lost
 * (out of memory: nothing better to do on a library thread). */
static void push_line(zkl_log_sink *sink, const library_line *line, long repeats, long dropped)
{
    char repeats_note[64] = "", dropped_note[64] = "";
    if (repeats > 0)
        snprintf(repeats_note, sizeof repeats_note, " (%ld similar lines suppressed)", repeats);
    if (dropped > 0)
        snprintf(dropped_note, sizeof dropped_note, " (%ld other lines dropped)", dropped);
    const char *fmt = line->where[0] ? "libzookeeper %s: %.*s%s%s" : "libzookeeper%s: %.*s%s%s";
    int n = snprintf(NULL, 0, fmt, line->where, line->text_len, line->text, repeats_note,
                     dropped_note);
    zkl_event *ev = calloc(1, sizeof *ev);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!ev || !text) {
        free(ev);
        free(text);
        return;
    }
    snprintf(text, (size_t)n + 1, fmt, line->where, line->text_len, line->text, repeats_note,
             dropped_note);
    ev->kind = ZKL_EV_LOG;
    ev->type = line->level;
    ev->data = text;
    ev->data_len = n;
    atomic_fetch_add(&sink->queued, 1);
    zkl_queue_push(sink->queue, ev);
}

/* The place's record, the least recently shown one reused when the place is new. */
static zkl_log_place *place_of(zkl_log_sink *sink, const char *where)
{
    zkl_log_place *reuse = &sink->places[0];
    for (int i = 0; i < ZKL_LOG_PLACES; i++) {
        zkl_log_place *p = &sink->places[i];
        if (p->where[0] && strcmp(p->where, where) == 0)
            return p;
        if (!p->where[0] || p->last_shown < reuse->last_shown)
            reuse = p;
        if (!p->where[0])
            break;
    }
    snprintf(reuse->where, sizeof reuse->where, "%s", where);
    reuse->last_shown = -1e9;
    reuse->suppressed = 0;
    return reuse;
}

/* Decides under the sink's mutex whether a line passes; fills what it reports if it does. */
static int admit_locked(zkl_log_sink *sink, const library_line *line, long *repeats,
                        long *dropped)
{
    double now = zkl_monotonic_seconds();
    if (line->level <= ZOO_LOG_LEVEL_WARN) {
        zkl_log_place *place = place_of(sink, line->where);
        if (now - place->last_shown < ZKL_LOG_REPEAT_S) {
            place->suppressed++;
            return 0;
        }
        *repeats = place->suppressed;
        place->suppressed = 0;
        place->last_shown = now;
    }
    if (now - sink->burst_start >= 1.0) {
        sink->burst_start = now;
        sink->burst_count = 0;
    }
    if (sink->burst_count >= ZKL_LOG_BURST || atomic_load(&sink->queued) >= ZKL_LOG_QUEUED) {
        sink->dropped += 1 + *repeats; /* the repeats it would have reported go with it */
        return 0;
    }
    sink->burst_count++;
    *dropped = sink->dropped;
    sink->dropped = 0;
    return 1;
}

/* The library's report of a failed connection attempt, or of a connection that broke: every
 * such line comes from handle_socket_error_msg(), "Socket <host> zk retcode=<rc>, errno=...". */
static int is_socket_failure(const library_line *line)
{
    static const char marker[] = " zk retcode=";
    if (line->level != ZOO_LOG_LEVEL_ERROR || strncmp(line->text, "Socket ", 7) != 0)
        return 0;
    const char *end = line->text + line->text_len;
    for (const char *c = line->text; c + sizeof marker - 1 <= end; c++)
        if (memcmp(c, marker, sizeof marker - 1) == 0)
            return 1;
    return 0;
}

/* Passes a line the session asked for on to its owner, within the rate limits. */
static void forward_line(zkl_log_sink *sink, const library_line *line)
{
    long repeats = 0, dropped = 0;
    pthread_mutex_lock(&sink->mutex);
    int admitted = admit_locked(sink, line, &repeats, &dropped);
    pthread_mutex_unlock(&sink->mutex);
    if (admitted)
        push_line(sink, line, repeats, dropped);
}

/* On the library's I/O thread, at its "error in ssl connect" line: OpenSSL's reason, kept
 * for the session and added to the line's text (in buf). */
static void add_tls_reason(zkl_log_sink *sink, library_line *line, char *buf, size_t size)
{
    char reason[ZKL_LOG_TLS_REASON_SIZE];
    if (zkl_tls_thread_failure(reason, sizeof reason) != 0)
        snprintf(reason, sizeof reason, "%s",
                 strstr(line->text, "timed out") ? "the server did not answer the handshake"
                                                 : "the server closed the connection during "
                                                   "the handshake");
    pthread_mutex_lock(&sink->mutex);
    snprintf(sink->last_tls_failure, sizeof sink->last_tls_failure, "%s", reason);
    pthread_mutex_unlock(&sink->mutex);
    int n = snprintf(buf, size, "%.*s: %s", line->text_len, line->text, reason);
    line->text = buf;
    line->text_len = n < 0 ? 0 : (n >= (int)size ? (int)size - 1 : n);
}

int zkl_log_sink_last_tls_failure(zkl_log_sink *sink, char *buf, size_t size)
{
    pthread_mutex_lock(&sink->mutex);
    int found = sink->last_tls_failure[0] != '\0';
    if (found)
        snprintf(buf, size, "%s", sink->last_tls_failure);
    pthread_mutex_unlock(&sink->mutex);
    return found ? 0 : -1;
}

/* On the library's I/O thread, at its "Starting SASL negotiation: " or "During SASL
 * negotiation: " line: Cyrus SASL's error string and detail, kept for the session. */
static void keep_sasl_reason(zkl_log_sink *sink, const library_line *line)
{
    static const char marker[] = "SASL negotiation: ";
    const char *end = line->text + line->text_len;
    for (const char *c = line->text; c + sizeof marker - 1 <= end; c++) {
        if (memcmp(c, marker, sizeof marker - 1) == 0) {
            const char *reason = c + sizeof marker - 1;
            pthread_mutex_lock(&sink->mutex);
            snprintf(sink->last_sasl_failure, sizeof sink->last_sasl_failure, "%.*s",
                     (int)(end - reason), reason);
            pthread_mutex_unlock(&sink->mutex);
            return;
        }
    }
}

int zkl_log_sink_last_sasl_failure(zkl_log_sink *sink, char *buf, size_t size)
{
    pthread_mutex_lock(&sink->mutex);
    int found = sink->last_sasl_failure[0] != '\0';
    if (found)
        snprintf(buf, size, "%s", sink->last_sasl_failure);
    pthread_mutex_unlock(&sink->mutex);
    return found ? 0 : -1;
}

void zkl_log_sink_connected(zkl_log_sink *sink)
{
    pthread_mutex_lock(&sink->mutex);
    sink->last_tls_failure[0] = '\0';
    pthread_mutex_unlock(&sink->mutex);
}

/* Any thread: one line the library logged for this sink's handle.  A failed connection
 * attempt then goes to the pacer, which may pause this (the library's I/O) thread. */
static void take_line(zkl_log_sink *sink, const char *message)
{
    library_line line;
    parse_line(message, &line);
    char with_reason[512];
    if (line.level == ZOO_LOG_LEVEL_ERROR && strstr(message, "ssl connect"))
        add_tls_reason(sink, &line, with_reason, sizeof with_reason);
    if (line.level == ZOO_LOG_LEVEL_ERROR && strstr(message, "SASL negotiation: "))
        keep_sasl_reason(sink, &line);
    if (line.level <= sink->level)
        forward_line(sink, &line);
    if (sink->reconnect && is_socket_failure(&line))
        zkl_reconnect_attempt_failed(sink->reconnect);
}

void zkl_log_sink_taken(zkl_log_sink *sink)
{
    atomic_fetch_sub(&sink->queued, 1);
}

/* ---- slots: one callback per slot, since the library hands a callback no context ---- */

static void take_line_of_slot(int slot, const char *message)
{
    zkl_log_sink *sink = atomic_load(&slot_sinks[slot]);
    if (sink)
        take_line(sink, message);
}

#define ZKL_SLOT_FN(a, b)                                                                      \
    static void log_slot_##a##b(const char *message)                                           \
    {                                                                                          \
        take_line_of_slot((a) * 8 + (b), message);                                             \
    }
#define ZKL_SLOT_ROW(a)                                                                        \
    ZKL_SLOT_FN(a, 0)                                                                          \
    ZKL_SLOT_FN(a, 1)                                                                          \
    ZKL_SLOT_FN(a, 2)                                                                          \
    ZKL_SLOT_FN(a, 3)                                                                          \
    ZKL_SLOT_FN(a, 4)                                                                          \
    ZKL_SLOT_FN(a, 5)                                                                          \
    ZKL_SLOT_FN(a, 6)                                                                          \
    ZKL_SLOT_FN(a, 7)
ZKL_SLOT_ROW(0)
ZKL_SLOT_ROW(1)
ZKL_SLOT_ROW(2)
ZKL_SLOT_ROW(3)
ZKL_SLOT_ROW(4)
ZKL_SLOT_ROW(5)
ZKL_SLOT_ROW(6)
ZKL_SLOT_ROW(7)
ZKL_SLOT_ROW(8)
ZKL_SLOT_ROW(9)
ZKL_SLOT_ROW(10)
ZKL_SLOT_ROW(11)
ZKL_SLOT_ROW(12)
ZKL_SLOT_ROW(13)
ZKL_SLOT_ROW(14)
ZKL_SLOT_ROW(15)
ZKL_SLOT_ROW(16)
ZKL_SLOT_ROW(17)
ZKL_SLOT_ROW(18)
ZKL_SLOT_ROW(19)
ZKL_SLOT_ROW(20)
ZKL_SLOT_ROW(21)
ZKL_SLOT_ROW(22)
ZKL_SLOT_ROW(23)
ZKL_SLOT_ROW(24)
ZKL_SLOT_ROW(25)
ZKL_SLOT_ROW(26)
ZKL_SLOT_ROW(27)
ZKL_SLOT_ROW(28)
ZKL_SLOT_ROW(29)
ZKL_SLOT_ROW(30)
ZKL_SLOT_ROW(31)
#define ZKL_SLOT_NAMES(a)                                                                      \
    log_slot_##a##0, log_slot_##a##1, log_slot_##a##2, log_slot_##a##3, log_slot_##a##4,       \
        log_slot_##a##5, log_slot_##a##6, log_slot_##a##7

static const log_callback_fn slot_callbacks[] = {
    ZKL_SLOT_NAMES(0), ZKL_SLOT_NAMES(1), ZKL_SLOT_NAMES(2), ZKL_SLOT_NAMES(3),
    ZKL_SLOT_NAMES(4), ZKL_SLOT_NAMES(5), ZKL_SLOT_NAMES(6), ZKL_SLOT_NAMES(7),
    ZKL_SLOT_NAMES(8), ZKL_SLOT_NAMES(9), ZKL_SLOT_NAMES(10), ZKL_SLOT_NAMES(11),
    ZKL_SLOT_NAMES(12), ZKL_SLOT_NAMES(13), ZKL_SLOT_NAMES(14), ZKL_SLOT_NAMES(15),
    ZKL_SLOT_NAMES(16), ZKL_SLOT_NAMES(17), ZKL_SLOT_NAMES(18), ZKL_SLOT_NAMES(19),
    ZKL_SLOT_NAMES(20), ZKL_SLOT_NAMES(21), ZKL_SLOT_NAMES(22), ZKL_SLOT_NAMES(23),
    ZKL_SLOT_NAMES(24), ZKL_SLOT_NAMES(25), ZKL_SLOT_NAMES(26), ZKL_SLOT_NAMES(27),
    ZKL_SLOT_NAMES(28), ZKL_SLOT_NAMES(29), ZKL_SLOT_NAMES(30), ZKL_SLOT_NAMES(31),
};
_Static_assert(sizeof slot_callbacks / sizeof slot_callbacks[0] == ZKL_LOG_SLOTS,
               "one callback per slot");

static void drop_line(const char *message)
{
    (void)message;
}

/* The library formats a line only when its global level allows it: the highest any bound
 * sink wants, at least ERROR (failed connection attempts) while any is bound, 0 (off; the
 * library's own default is INFO) when none is. */
static void apply_library_level_locked(void)
{
    int level = 0;
    for (int l = LEVELS - 1; l >= 0 && level == 0; l--)
        if (bound_at_level[l] > 0)
            level = l > ZOO_LOG_LEVEL_ERROR ? l : ZOO_LOG_LEVEL_ERROR;
    atomic_store(&library_level, level);
    zoo_set_debug_level((ZooLogLevel)level);
}

static int claim_slot_locked(zkl_log_sink *sink)
{
    for (int i = 0; i < ZKL_LOG_SLOTS; i++) {
        if (atomic_load(&slot_sinks[i]) == NULL) {
            atomic_store(&slot_sinks[i], sink);
            return i;
        }
    }
    return -1;
}

/* Every slot is taken: the session's logger hears so once instead of hearing nothing. */
static void note_slot_shortage(zkl_log_sink *sink)
{
    if (sink->slot_shortage_noted || sink->level == 0)
        return;
    sink->slot_shortage_noted = 1;
    char text[160];
    snprintf(text, sizeof text,
             "%d sessions are open: this one's library lines are not shown, and its "
             "reconnections are not paced", ZKL_LOG_SLOTS);
    library_line line = {.level = ZOO_LOG_LEVEL_WARN, .where = "", .text = text,
                         .text_len = trimmed_length(text)};
    push_line(sink, &line, 0, 0);
}

log_callback_fn zkl_log_sink_bind(zkl_log_sink *sink)
{
    pthread_mutex_lock(&registry_mutex);
    if (!sink->bound) {
        sink->slot = claim_slot_locked(sink);
        if (sink->slot >= 0) {
            sink->bound = 1;
            bound_at_level[sink->level]++;
        }
    }
    apply_library_level_locked();
    pthread_mutex_unlock(&registry_mutex);
    if (sink->slot < 0)
        note_slot_shortage(sink);
    return sink->slot >= 0 ? slot_callbacks[sink->slot] : drop_line;
}

void zkl_log_sink_unbind(zkl_log_sink *sink)
{
    pthread_mutex_lock(&registry_mutex);
    if (sink->bound) {
        atomic_store(&slot_sinks[sink->slot], NULL);
        bound_at_level[sink->level]--;
        sink->bound = 0;
        sink->slot = -1;
        apply_library_level_locked();
    }
    pthread_mutex_unlock(&registry_mutex);
}
