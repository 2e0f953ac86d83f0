/*
 * raw_c.c - baseline ZooKeeper client benchmark on plain libzookeeper-mt.
 *
 * Measures, on a fresh root /bench-raw_c-<pid> holding a 64-byte node "get":
 *   async_get    N_ASYNC pipelined zoo_aget calls (submit all, then wait on a
 *                mutex+condvar until the completion callback has counted all
 *                replies; every reply must be ZOK with 64 bytes),
 *   sync_get     N_SYNC_GET sequential zoo_get calls,
 *   sync_create  N_SYNC_CREATE sequential zoo_create calls of persistent
 *                nodes <root>/c-<i> holding 16 bytes.
 * For each workload it reports wall-clock time (CLOCK_MONOTONIC) and process
 * CPU time, user+sys over all threads (getrusage RUSAGE_SELF), as one line:
 *   RESULT <workload> ops=<n> seconds=<s> cpu_us_per_op=<us> ops_per_s=<r>
 * Connecting and cleaning up are not timed. Nothing else goes to stdout;
 * diagnostics go to stderr. Exit status is non-zero on any failure.
 *
 * Usage: bench_raw_c HOSTS [N_ASYNC=20000] [N_SYNC_GET=2000] [N_SYNC_CREATE=2000]
 * Build: gcc -std=c11 -O2 -DTHREADED -Wall -Wextra -Werror bench/raw_c.c \
 *            -o build/bench_raw_c -lzookeeper_mt -lpthread
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

enum {
    SESSION_TIMEOUT_MS = 10000,
    CONNECT_WAIT_S = 15,
    ASYNC_WAIT_S = 120,
    GET_DATA_LEN = 64,
    CREATE_DATA_LEN = 16,
    PATH_MAX_LEN = 256,
};

#define CLIENT_NAME "raw_c"

/* ------------------------------------------------------------------ */
/* Command line                                                        */
/* ------------------------------------------------------------------ */

struct bench_config {
    const char *hosts;
    int n_async;
    int n_sync_get;
    int n_sync_create;
};

static bool parse_count(const char *text, int *out)
{
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < 1 || value > INT_MAX)
        return false;
    *out = (int)value;
    return true;
}

static bool parse_args(int argc, char **argv, struct bench_config *cfg)
{
    if (argc < 2 || argc > 5)
        return false;
    cfg->hosts = argv[1];
    cfg->n_async = 20000;
    cfg->n_sync_get = 2000;
    cfg->n_sync_create = 2000;
    int *counts[] = {&cfg->n_async, &cfg->n_sync_get, &cfg->n_sync_create};
    for (int i = 2; i < argc; i++) {
        if (!parse_count(argv[i], counts[i - 2])) {
            fprintf(stderr, "invalid count '%s' (want a positive integer)\n", argv[i]);
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* Timing                                                              */
/* ------------------------------------------------------------------ */

struct measure_start {
    struct timespec wall;
    double cpu_seconds;
};

static double process_cpu_seconds(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
         + (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

static struct measure_start measure_begin(void)
{
    struct measure_start start;
    start.cpu_seconds = process_cpu_seconds();
    clock_gettime(CLOCK_MONOTONIC, &start.wall);
    return start;
}

static void measure_report(const char *workload, int ops, const struct measure_start *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double cpu = process_cpu_seconds() - start->cpu_seconds;
    double wall = (double)(now.tv_sec - start->wall.tv_sec)
                + (double)(now.tv_nsec - start->wall.tv_nsec) / 1e9;
    printf("RESULT %s ops=%d seconds=%.6f cpu_us_per_op=%.3f ops_per_s=%.1f\n",
           workload, ops, wall, cpu * 1e6 / ops, ops / wall);
    fflush(stdout);
}

static struct timespec deadline_after(int seconds)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += seconds;
    return deadline;
}

/* ------------------------------------------------------------------ */
/* Connection                                                          */
/* ------------------------------------------------------------------ */

enum session_status { SESSION_PENDING, SESSION_CONNECTED, SESSION_FAILED };

struct session_waiter {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    enum session_status status;
};

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)path;
    if (type != ZOO_SESSION_EVENT)
        return;
    struct session_waiter *waiter = ctx;
    pthread_mutex_lock(&waiter->lock);
    if (state == ZOO_CONNECTED_STATE)
        waiter->status = SESSION_CONNECTED;
    else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE)
        waiter->status = SESSION_FAILED;
    pthread_cond_broadcast(&waiter->changed);
    pthread_mutex_unlock(&waiter->lock);
}

static bool wait_until_connected(struct session_waiter *waiter)
{
    struct timespec deadline = deadline_after(CONNECT_WAIT_S);
    int rc = 0;
    pthread_mutex_lock(&waiter->lock);
    while (waiter->status == SESSION_PENDING && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&waiter->changed, &waiter->lock, &deadline);
    bool connected = waiter->status == SESSION_CONNECTED;
    pthread_mutex_unlock(&waiter->lock);
    return connected;
}

/* The waiter must outlive the handle: the watcher may fire until close. */
static zhandle_t *connect_session(const char *hosts, struct session_waiter *waiter)
{
    zhandle_t *zh = zookeeper_init(hosts, session_watcher, SESSION_TIMEOUT_MS,
                                   NULL, waiter, ZOO_NO_LOG_CLIENTENV);
    if (zh == NULL) {
        fprintf(stderr, "zookeeper_init(%s) failed: %s\n", hosts, strerror(errno));
        return NULL;
    }
    /* As zklua configures it: without a delay the library resolves the host list again on
     * every I/O wake-up, which would charge both clients a getaddrinfo per op. */
    zoo_set_servers_resolution_delay(zh, 5000);
    if (!wait_until_connected(waiter)) {
        fprintf(stderr, "could not connect to %s within %d s\n", hosts, CONNECT_WAIT_S);
        zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

/* ------------------------------------------------------------------ */
/* Tree setup and teardown (not timed)                                 */
/* ------------------------------------------------------------------ */

struct bench_paths {
    char root[PATH_MAX_LEN];
    char get_node[PATH_MAX_LEN];
};

/* Writes "<parent>/<name>" into out; false (and a message) if it does not fit. */
static bool join_path(char out[PATH_MAX_LEN], const char *parent, const char *name)
{
    int len = snprintf(out, PATH_MAX_LEN, "%s/%s", parent, name);
    if (len < 0 || len >= PATH_MAX_LEN) {
        fprintf(stderr, "path too long: %s/%s\n", parent, name);
        return false;
    }
    return true;
}

static void make_paths(struct bench_paths *paths)
{
    snprintf(paths->root, sizeof paths->root, "/bench-%s-%ld", CLIENT_NAME, (long)getpid());
    join_path(paths->get_node, paths->root, "get"); /* root is short: always fits */
}

static bool create_node(zhandle_t *zh, const char *path, const char *data, int len)
{
    char created[PATH_MAX_LEN];
    int rc = zoo_create(zh, path, data, len, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
                        created, (int)sizeof created);
    if (rc != ZOK) {
        fprintf(stderr, "create %s: %s\n", path, zerror(rc));
        return false;
    }
    return true;
}

static bool create_tree(zhandle_t *zh, const struct bench_paths *paths)
{
    char payload[GET_DATA_LEN];
    memset(payload, 'g', sizeof payload);
    return create_node(zh, paths->root, NULL, -1)
        && create_node(zh, paths->get_node, payload, GET_DATA_LEN);
}

static bool delete_node(zhandle_t *zh, const char *path)
{
    int rc = zoo_delete(zh, path, -1);
    if (rc != ZOK && rc != ZNONODE) {
        fprintf(stderr, "delete %s: %s\n", path, zerror(rc));
        return false;
    }
    return true;
}

/* Deletes the root and its (childless) children. */
static bool delete_tree(zhandle_t *zh, const char *root)
{
    struct String_vector children = {0, NULL};
    int rc = zoo_get_children(zh, root, 0, &children);
    if (rc == ZNONODE)
        return true;
    if (rc != ZOK) {
        fprintf(stderr, "get_children %s: %s\n", root, zerror(rc));
        return false;
    }
    bool ok = true;
    for (int i = 0; i < children.count && ok; i++) {
        char child[PATH_MAX_LEN];
        ok = join_path(child, root, children.data[i]) && delete_node(zh, child);
    }
    deallocate_String_vector(&children);
    return ok && delete_node(zh, root);
}

/* ------------------------------------------------------------------ */
/* Workload: pipelined async gets                                      */
/* ------------------------------------------------------------------ */

struct async_tally {
    pthread_mutex_t lock;
    pthread_cond_t all_done;
    int expected;   /* completions to wait for; lowered if a submit fails */
    int completed;
    int failed;
};

static void count_get_completion(int rc, const char *value, int value_len,
                                 const struct Stat *stat, const void *data)
{
    (void)value;
    (void)stat;
    struct async_tally *tally = (struct async_tally *)data;
    pthread_mutex_lock(&tally->lock);
    if (rc != ZOK || value_len != GET_DATA_LEN) {
        if (tally->failed++ == 0)
            fprintf(stderr, "async get failed: rc=%s len=%d\n", zerror(rc), value_len);
    }
    if (++tally->completed == tally->expected)
        pthread_cond_signal(&tally->all_done);
    pthread_mutex_unlock(&tally->lock);
}

/* Returns how many gets were submitted successfully. */
static int submit_async_gets(zhandle_t *zh, const char *path, int n, struct async_tally *tally)
{
    for (int i = 0; i < n; i++) {
        int rc = zoo_aget(zh, path, 0, count_get_completion, tally);
        if (rc != ZOK) {
            fprintf(stderr, "zoo_aget #%d: %s\n", i, zerror(rc));
            return i;
        }
    }
    return n;
}

static bool wait_for_completions(struct async_tally *tally, int submitted)
{
    struct timespec deadline = deadline_after(ASYNC_WAIT_S);
    int rc = 0;
    pthread_mutex_lock(&tally->lock);
    tally->expected = submitted;
    while (tally->completed < tally->expected && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&tally->all_done, &tally->lock, &deadline);
    bool all_arrived = tally->completed == tally->expected;
    bool ok = all_arrived && tally->failed == 0;
    pthread_mutex_unlock(&tally->lock);
    if (!all_arrived)
        fprintf(stderr, "async get: timed out waiting for completions\n");
    return ok;
}

/*
 * On timeout the tally is still referenced by pending requests, so it is
 * static: it must stay valid until zookeeper_close flushes them.
 */
static bool bench_async_get(zhandle_t *zh, const struct bench_paths *paths, int n)
{
    static struct async_tally tally = {
        .lock = PTHREAD_MUTEX_INITIALIZER,
        .all_done = PTHREAD_COND_INITIALIZER,
    };
    tally.expected = n;
    struct measure_start start = measure_begin();
    int submitted = submit_async_gets(zh, paths->get_node, n, &tally);
    bool ok = wait_for_completions(&tally, submitted) && submitted == n;
    if (ok)
        measure_report("async_get", n, &start);
    return ok;
}

/* ------------------------------------------------------------------ */
/* Workloads: sequential sync gets and creates                          */
/* ------------------------------------------------------------------ */

static bool sync_get_once(zhandle_t *zh, const char *path)
{
    char buffer[GET_DATA_LEN * 2];
    int len = (int)sizeof buffer;
    struct Stat stat;
    int rc = zoo_get(zh, path, 0, buffer, &len, &stat);
    if (rc != ZOK || len != GET_DATA_LEN) {
        fprintf(stderr, "sync get %s: rc=%s len=%d\n", path, zerror(rc), len);
        return false;
    }
    return true;
}

static bool bench_sync_get(zhandle_t *zh, const struct bench_paths *paths, int n)
{
    struct measure_start start = measure_begin();
    for (int i = 0; i < n; i++) {
        if (!sync_get_once(zh, paths->get_node))
            return false;
    }
    measure_report("sync_get", n, &start);
    return true;
}

static bool bench_sync_create(zhandle_t *zh, const struct bench_paths *paths, int n)
{
    char payload[CREATE_DATA_LEN];
    memset(payload, 'c', sizeof payload);
    struct measure_start start = measure_begin();
    for (int i = 0; i < n; i++) {
        char name[32];
        char path[PATH_MAX_LEN];
        snprintf(name, sizeof name, "c-%d", i);
        if (!join_path(path, paths->root, name)
            || !create_node(zh, path, payload, CREATE_DATA_LEN))
            return false;
    }
    measure_report("sync_create", n, &start);
    return true;
}

/* ------------------------------------------------------------------ */
/* Main                                                                */
/* ------------------------------------------------------------------ */

static bool run_workloads(zhandle_t *zh, const struct bench_config *cfg,
                          const struct bench_paths *paths)
{
    return bench_async_get(zh, paths, cfg->n_async)
        && bench_sync_get(zh, paths, cfg->n_sync_get)
        && bench_sync_create(zh, paths, cfg->n_sync_create);
}

int main(int argc, char **argv)
{
    struct bench_config cfg;
    if (!parse_args(argc, argv, &cfg)) {
        fprintf(stderr, "usage: %s HOSTS [N_ASYNC=20000] [N_SYNC_GET=2000] [N_SYNC_CREATE=2000]\n",
                argv[0]);
        return 2;
    }
    zoo_set_debug_level((ZooLogLevel)0); /* 0 turns library logging off entirely */

    static struct session_waiter waiter = {
        .lock = PTHREAD_MUTEX_INITIALIZER,
        .changed = PTHREAD_COND_INITIALIZER,
        .status = SESSION_PENDING,
    };
    zhandle_t *zh = connect_session(cfg.hosts, &waiter);
    if (zh == NULL)
        return 1;

    struct bench_paths paths;
    make_paths(&paths);
    bool ok = create_tree(zh, &paths) && run_workloads(zh, &cfg, &paths);
    bool cleaned = delete_tree(zh, paths.root);

    int rc = zookeeper_close(zh);
    if (rc != ZOK)
        fprintf(stderr, "zookeeper_close: %s\n", zerror(rc));
    return ok && cleaned && rc == ZOK ? 0 : 1;
}
