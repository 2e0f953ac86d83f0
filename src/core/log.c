/*
 * log.c — see log.h.  The rate limit is a one-second window shared by all threads.
 */
#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include <zookeeper/zookeeper.h>

enum { LINES_PER_SECOND = 5 };

static pthread_mutex_t log_mutex = PTHREAD_MUTEX_INITIALIZER;
static int log_level;
static time_t window_start;
static int lines_in_window;
static int lines_dropped;

void zkl_log_set_level(int level)
{
    if (level < 0)
        level = 0;
    if (level > 4)
        level = 4;
    pthread_mutex_lock(&log_mutex);
    log_level = level;
    pthread_mutex_unlock(&log_mutex);
    zoo_set_debug_level((ZooLogLevel)level);
}

int zkl_log_level(void)
{
    pthread_mutex_lock(&log_mutex);
    int level = log_level;
    pthread_mutex_unlock(&log_mutex);
    return level;
}

void zkl_log_library_line(const char *message)
{
    pthread_mutex_lock(&log_mutex);
    if (log_level > 0) {
        time_t now = time(NULL);
        if (now != window_start) {
            if (lines_dropped > 0)
                fprintf(stderr, "zklua: zookeeper: (%d lines dropped)\n", lines_dropped);
            window_start = now;
            lines_in_window = 0;
            lines_dropped = 0;
        }
        if (lines_in_window < LINES_PER_SECOND) {
            lines_in_window++;
            fprintf(stderr, "zklua: zookeeper: %s\n", message);
        } else {
            lines_dropped++;
        }
    }
    pthread_mutex_unlock(&log_mutex);
}
