/* Logging: one line per message, written with a single write(2) so lines from several
 * threads do not interleave. */
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static cr_log_level_t log_level = CR_LOG_WARN;
static const char *log_component = "cuda-remote";
static int log_timestamps;

void cr_log_init(const char *component, cr_log_level_t default_level, int timestamps)
{
    static const char *const names[] = {"debug", "info", "warn", "error", "off"};
    const char *env = getenv("CUDA_REMOTE_LOG");
    log_component = component;
    log_timestamps = timestamps;
    log_level = default_level;
    if (env) {
        for (int i = 0; i <= CR_LOG_OFF; i++)
            if (strcasecmp(env, names[i]) == 0)
                log_level = (cr_log_level_t)i;
    }
}

int cr_log_enabled(cr_log_level_t level)
{
    return level >= log_level && level < CR_LOG_OFF;
}

void cr_vlog(cr_log_level_t level, const char *fmt, va_list ap)
{
    static const char *const tags[] = {"debug: ", "", "warning: ", "error: "};
    char line[2048];
    size_t n = 0;
    if (!cr_log_enabled(level))
        return;
    if (log_timestamps) {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        n += strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S", &tm);
        n += (size_t)snprintf(line + n, sizeof line - n, ".%03ld ", ts.tv_nsec / 1000000);
    }
    n += (size_t)snprintf(line + n, sizeof line - n, "%s: %s", log_component, tags[level]);
    if (n < sizeof line) {
        int m = vsnprintf(line + n, sizeof line - n, fmt, ap);
        n = m < 0 ? n : n + (size_t)m;
    }
    if (n >= sizeof line - 1)
        n = sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}

void cr_log(cr_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cr_vlog(level, fmt, ap);
    va_end(ap);
}
