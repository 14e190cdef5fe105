/* The connection guard: what a connection may cost the server before and after its
 * client is admitted.
 *
 * A connection is only a socket until its hello names a tenant: it gets no thread, no
 * buffer of its own and no more than one small frame (the hello), and it must send that
 * within the hello deadline. Connections are counted per source address (the host of a
 * TCP peer; a Unix-socket client's user, so that one local user cannot crowd out another)
 * and in all, against limits set at start; the total never passes what the process's file
 * limit allows. Every connection
 * refused or dropped is counted by reason (for /metrics) and logged, at most LOG_BURST
 * lines a second per reason and then the number of the others, so that a flood cannot
 * fill the log.
 *
 * Loop thread only, except the counters, which are atomic. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "clock.h"
#include "guard.h"
#include "idmap.h"
#include "log.h"

static cr_guard_limits_t limits = {
    .connections = 4096,
    .per_address = 256,
    .hello_timeout_ms = 10000,
};
static uint64_t refused[CR_GUARD_REASON_COUNT];    /* atomic */
static int64_t last_logged[CR_GUARD_REASON_COUNT]; /* ns: the second being counted */
static unsigned logged[CR_GUARD_REASON_COUNT];     /* lines in that second */
static uint64_t unlogged[CR_GUARD_REASON_COUNT];
static cr_idmap_t per_address; /* address hash -> connections */
static int open_connections;

static const char *const reason_names[] = {
#define CR_GUARD_NAME(id, name, text) name,
    CR_GUARD_REASONS(CR_GUARD_NAME)
#undef CR_GUARD_NAME
};
static const char *const reason_texts[] = {
#define CR_GUARD_TEXT(id, name, text) text,
    CR_GUARD_REASONS(CR_GUARD_TEXT)
#undef CR_GUARD_TEXT
};

#define LOG_BURST 10

/* Files the server keeps for itself beside its connections: the driver's, shared-memory
 * regions, logs, the metrics endpoint. */
#define RESERVED_FILES 256

void cr_guard_configure(const cr_guard_limits_t *l)
{
    limits = *l;
    /* a connection costs one descriptor: raise the soft limit to the hard one, then keep
     * the total where accept() cannot fail for want of descriptors */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t want = rl.rlim_max;
        if (rl.rlim_cur < want) {
            rlim_t was = rl.rlim_cur;
            rl.rlim_cur = want;
            if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
                CR_INFO("open-file limit raised from %llu to %llu", (unsigned long long)was,
                        (unsigned long long)want);
            else
                getrlimit(RLIMIT_NOFILE, &rl);
        }
        uint64_t room =
            rl.rlim_cur > 2 * RESERVED_FILES ? rl.rlim_cur - RESERVED_FILES : rl.rlim_cur / 2;
        if (limits.connections == 0 || limits.connections > room) {
            if (limits.connections)
                CR_WARN("--max-connections %u: the open-file limit (%llu) allows %llu",
                        limits.connections, (unsigned long long)rl.rlim_cur,
                        (unsigned long long)room);
            limits.connections = (unsigned)(room > 1000000 ? 1000000 : room);
        }
    }
}

const cr_guard_limits_t *cr_guard_limits(void)
{
    return &limits;
}

/* FNV-1a: addresses are keyed by a hash; two that collide share a count, which only
 * makes the limit stricter for both. */
static uint64_t address_key(const char *address)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)address; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h ? h : 1;
}

int cr_guard_accept(const char *address, uint64_t *key)
{
    *key = address_key(address);
    uint64_t n = 0;
    cr_idmap_get(&per_address, *key, &n);
    if ((unsigned)open_connections >= limits.connections)
        return CR_GUARD_TOO_MANY;
    if (limits.per_address && n >= limits.per_address)
        return CR_GUARD_PER_ADDRESS;
    if (cr_idmap_put(&per_address, *key, n + 1) != 0)
        return CR_GUARD_TOO_MANY;
    open_connections++;
    return -1;
}

void cr_guard_release(uint64_t key)
{
    uint64_t n = 0;
    if (!cr_idmap_get(&per_address, key, &n))
        return;
    if (n <= 1)
        cr_idmap_remove(&per_address, key, NULL);
    else
        cr_idmap_put(&per_address, key, n - 1);
    open_connections--;
}

int cr_guard_open_connections(void)
{
    return open_connections;
}

void cr_guard_refuse(int reason, const char *peer, const char *detail)
{
    if (reason < 0 || reason >= CR_GUARD_REASON_COUNT)
        return;
    __atomic_add_fetch(&refused[reason], 1, __ATOMIC_RELAXED);
    /* up to LOG_BURST lines a second per reason, then one line that counts the rest */
    int64_t now = cr_now_ns();
    if (now - last_logged[reason] >= 1000000000) {
        last_logged[reason] = now;
        logged[reason] = 0;
    }
    if (logged[reason] >= LOG_BURST) {
        unlogged[reason]++;
        return;
    }
    logged[reason]++;
    char more[80] = "";
    if (unlogged[reason])
        snprintf(more, sizeof more, " (and %llu more since the last such line)",
                 (unsigned long long)unlogged[reason]);
    CR_WARN("connection from %s %s: %s%s", peer,
            reason < CR_GUARD_FIRST_DROP ? "refused" : "dropped",
            detail ? detail : reason_texts[reason], more);
    unlogged[reason] = 0;
}

uint64_t cr_guard_refused(int reason, const char **name)
{
    if (reason < 0 || reason >= CR_GUARD_REASON_COUNT)
        return 0;
    if (name)
        *name = reason_names[reason];
    return __atomic_load_n(&refused[reason], __ATOMIC_RELAXED);
}
