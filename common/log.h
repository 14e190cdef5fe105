/* Logging for both sides.
 *
 * The server logs to stderr with a timestamp. The client lives inside someone else's
 * process, so it only prints warnings and errors, each prefixed "cuda-remote:", and never on
 * hot paths. CUDA_REMOTE_LOG=debug|info|warn|error|off sets the level on either side. */
#ifndef CR_LOG_H
#define CR_LOG_H

#include <stdarg.h>

typedef enum {
    CR_LOG_DEBUG = 0,
    CR_LOG_INFO = 1,
    CR_LOG_WARN = 2,
    CR_LOG_ERROR = 3,
    CR_LOG_OFF = 4,
} cr_log_level_t;

/* Reads CUDA_REMOTE_LOG, falling back to default_level. Call once at start-up. */
void cr_log_init(const char *component, cr_log_level_t default_level, int timestamps);
int cr_log_enabled(cr_log_level_t level);
void cr_log(cr_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cr_vlog(cr_log_level_t level, const char *fmt, va_list ap);

#define CR_DEBUG(...)                                                                              \
    do {                                                                                           \
        if (cr_log_enabled(CR_LOG_DEBUG))                                                          \
            cr_log(CR_LOG_DEBUG, __VA_ARGS__);                                                     \
    } while (0)
#define CR_INFO(...) cr_log(CR_LOG_INFO, __VA_ARGS__)
#define CR_WARN(...) cr_log(CR_LOG_WARN, __VA_ARGS__)
#define CR_ERROR(...) cr_log(CR_LOG_ERROR, __VA_ARGS__)

#endif
