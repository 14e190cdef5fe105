/* The connection guard (guard.c): what a connection may cost before and after it is
 * admitted, and the count of those refused or dropped, by reason. */
#ifndef CR_SERVER_GUARD_H
#define CR_SERVER_GUARD_H

#include <stdint.h>

typedef struct {
    unsigned connections;      /* open at once; 0: as many as the open-file limit allows */
    unsigned per_address;      /* open at once from one source address; 0: no limit */
    unsigned hello_timeout_ms; /* a connection that has not said hello by then is dropped */
    unsigned tenant_sessions;  /* a tenant's sessions at once, unless its entry says */
    uint64_t unsent;           /* a session's replies not yet written, before it waits */
    uint64_t tenant_queued;    /* a tenant's requests waiting to run, before its reading stops */
} cr_guard_limits_t;

/* Why a connection was refused (before it was admitted) or dropped: one list for the log,
 * the metric's labels and their order. */
#define CR_GUARD_REASONS(X)                                                                        \
    X(CR_GUARD_TOO_MANY, "too_many_connections",                                                   \
      "the server has as many connections as it allows (--max-connections)")                       \
    X(CR_GUARD_PER_ADDRESS, "per_address",                                                         \
      "its address has as many connections as it may have (--max-per-address)")                    \
    X(CR_GUARD_HELLO_REFUSED, "hello_refused", "its hello was refused")                            \
    X(CR_GUARD_TLS, "tls_failed", "its TLS handshake failed")                                      \
    X(CR_GUARD_HELLO_TIMEOUT, "hello_timeout", "it sent no hello in time (--hello-timeout)")       \
    X(CR_GUARD_BEFORE_HELLO, "before_hello", "it sent something other than a small hello first")   \
    X(CR_GUARD_MALFORMED, "malformed", "it sent a malformed frame")
enum {
#define CR_GUARD_ENUM(id, name, text) id,
    CR_GUARD_REASONS(CR_GUARD_ENUM)
#undef CR_GUARD_ENUM
        CR_GUARD_REASON_COUNT,
    CR_GUARD_FIRST_DROP = CR_GUARD_HELLO_TIMEOUT, /* from here on: dropped, not refused */
};

/* Sets the limits (at start) and raises the open-file limit to its hard limit; the total
 * of connections is kept below what that allows. */
void cr_guard_configure(const cr_guard_limits_t *limits);
const cr_guard_limits_t *cr_guard_limits(void);
/* A new connection from `address` (host only, or "local"): -1 when it may stay (then
 * cr_guard_release(*key) when it closes), else the CR_GUARD_* reason to refuse it. */
int cr_guard_accept(const char *address, uint64_t *key);
void cr_guard_release(uint64_t key);
int cr_guard_open_connections(void);
/* Counts a refused or dropped connection and logs it (a few lines a second per reason);
 * `detail` (may be NULL) replaces the reason's own words. */
void cr_guard_refuse(int reason, const char *peer, const char *detail);
/* How many connections were refused or dropped for `reason`, and its metric label. */
uint64_t cr_guard_refused(int reason, const char **name);

#endif
