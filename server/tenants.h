/* Tenants (tenants.c): who may connect (by token or client certificate), their device-memory quota, weight,
 * compute limit and priority, from the tenants file; SIGHUP reloads it. Usage counters are
 * atomics, updated by sessions and the scheduler. */
#ifndef CR_SERVER_TENANTS_H
#define CR_SERVER_TENANTS_H

#include <stdint.h>
#include <cuda.h>

enum { CR_PRIORITY_LOW, CR_PRIORITY_NORMAL, CR_PRIORITY_HIGH };

/* Work done, counted per session and per tenant (atomic). */
typedef struct {
    uint64_t launches;
    uint64_t bytes_h2d, bytes_d2h; /* copies between host and device, either way */
    uint64_t errors;               /* calls that failed (CUDA_ERROR_NOT_READY is no failure) */
    uint64_t device_ns;            /* device time of its kernels (sched.c) */
} cr_usage_t;

/* A tenant as the scheduler sees it (sched.c; under the scheduler's lock). */
typedef struct {
    struct cr_tenant_s *next_known; /* tenants that launched at least once */
    int known;
    unsigned waiting;    /* executors waiting to launch */
    unsigned inflight;   /* launches admitted and not yet finished on the device */
    double vtime;        /* device ns / weight: the least goes next within a level */
    double launch_ns;    /* estimated device time of one launch, 0: not known yet */
    double slice_ns;     /* device time charged since it last took the device */
    int64_t progress_ns; /* when its work last finished, or it took the device */
    int64_t idle_since;  /* when its work in flight last finished */
    double think_ns;     /* its loop's gap: from its work finishing to its next launch */
    double credit_ns;    /* capped tenants: device time it may still use (at credit_at) */
    int64_t credit_at;
    double round_ns;     /* device time of its last round between two gaps */
    double round_acc_ns; /* device time of the round going on */
    double recent_ns;    /* device time, decaying: its share lately */
    int64_t recent_at;
} cr_sched_tenant_t;

typedef struct cr_tenant_s {
    struct cr_tenant_s *next;
    char name[64];
    char token[256];       /* never logged; "": known by its certificate only */
    char cert[256];        /* "CN=...", "DNS:..." or "URI:...": the client certificate that
                              names it, "": none (under the tenants' lock) */
    uint64_t quota;        /* bytes of device memory, 0: the whole device (atomic) */
    double weight;         /* share of device time under contention */
    double compute_limit;  /* its device time at most this part of the wall time, even on an
                                idle device; 0: no limit (atomic) */
    int priority;          /* CR_PRIORITY_* (atomic) */
    int admin;             /* `cuda-remote status` shows it everyone (atomic) */
    int removed;           /* gone from the file: takes no new sessions */
    unsigned max_sessions; /* at once; 0: the server's limit (--max-sessions-per-tenant) */
    /* usage, atomic */
    uint64_t used;         /* device memory charged */
    uint64_t sessions;     /* connected now */
    uint64_t queued_bytes; /* its sessions' requests waiting to run (atomic) */
    uint64_t shared;       /* host memory its sessions share with the server (shm.c; atomic) */
    uint64_t sessions_total;
    cr_usage_t usage;
    cr_sched_tenant_t sched;
} cr_tenant_t;

const char *cr_priority_name(int priority);
/* Reads the tenants file (--tenants), or with NULL makes the single tenant "default". 0,
 * or CR_E* with a reason. */
int cr_tenants_load(const char *path, char *err, size_t len);
/* Reads the file again (SIGHUP); keeps the current tenants when it is wrong. */
void cr_tenants_reload(void);
/* 1 when tenants come from a file (clients must present a token). */
int cr_tenants_from_file(void);
/* The tenant a hello's token names (token NULL when the client sent none); NULL with the
 * reason to give the client when it is refused. */
cr_tenant_t *cr_tenants_find(const char *token, size_t len, const char **why);
/* The tenant whose "cert" names a client certificate: has_name(cert, arg) says whether the
 * verified certificate carries that name. NULL: none (or no tenants file). */
cr_tenant_t *cr_tenants_find_cert(int (*has_name)(const char *name, void *arg), void *arg);
/* Charges device memory to a tenant: CUDA_ERROR_OUT_OF_MEMORY when it would pass its
 * quota (exactly: used + bytes may equal the quota). */
CUresult cr_tenant_charge(cr_tenant_t *t, uint64_t bytes);
void cr_tenant_uncharge(cr_tenant_t *t, uint64_t bytes);
/* The priority a stream of tenant t gets when it asks for `asked`, in the device's range
 * [greatest, least] (numerically greatest <= least): a high tenant's streams all get the
 * greatest, a low tenant's the least; a normal tenant keeps what it asked for, except that
 * with a tenants file the greatest is left to high tenants. */
int cr_tenant_stream_priority(const cr_tenant_t *t, int asked, int least, int greatest);
/* Calls fn for every tenant, in the file's order, under the tenants' lock. */
void cr_tenants_foreach(void (*fn)(const cr_tenant_t *t, void *arg), void *arg);

#endif
