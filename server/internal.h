/* cuda-remoted's private interfaces, shared by its modules.
 *
 * Threads: the libuv loop thread does all socket I/O and framing; each session has an
 * executor thread that runs its requests in order and never waits on the device; calls
 * that wait run on waiter threads (waiter.c); the backend's own threads run host
 * functions. Requests arrive in a session's inbox from the loop; replies leave through its
 * outbox, which the loop drains. */
#ifndef CR_SERVER_INTERNAL_H
#define CR_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <uv.h>

#include "address.h"
#include "buf.h"
#include "cr_api_desc.h"
#include "cr_driver.h"
#include "export_tables.h"
#include "frame.h"
#include "idmap.h"
#include "rangemap.h"

/* --- backend.c -------------------------------------------------------------------------- */

typedef struct {
    char name[256];
    CUuuid uuid;
    size_t total_mem;
    int attrs[CU_DEVICE_ATTRIBUTE_MAX];
} cr_device_desc_t;

typedef struct {
    const char *kind;        /* "cuda" or "emu" */
    char path[512];          /* the driver library (cuda) */
    cr_driver_t d;
    void *dl;
    CUdevice device;
    CUcontext ctx;           /* the one context every session runs in */
    int driver_version;
    cr_device_desc_t desc;
    uint64_t window_base, window_size; /* device addresses, when the backend knows them */
    /* per table of common/export_tables.h: its size in bytes as the driver has it, 0 when
     * it has the table but says no size, -1 when it lacks it */
    int32_t export_table_size[CR_EXPORT_TABLE_COUNT];
} cr_backend_t;

typedef struct {
    const char *kind;        /* "auto", "cuda" or "emu" */
    const char *driver_path; /* NULL: search the usual places */
    int device;
    uint64_t emu_memory;     /* 0: the emulated device's default */
    const char *emu_trace;
    int emu_context_faults;  /* a kernel fault breaks the whole emulated context, as on a GPU */
    unsigned emu_compute_capability; /* major * 10 + minor the emulated device reports; 0: 9.0 */
} cr_backend_options_t;

int cr_backend_open(const cr_backend_options_t *opt, cr_backend_t *b, char *err, size_t err_len);
/* Fills b->export_table_size: the `cuda` backend asks its driver for each table it knows,
 * the emulated device declares the ones the stub serves for it. */
void cr_backend_describe_export_tables(cr_backend_t *b);
/* Makes the backend's context current on the calling thread (every server thread that
 * calls the driver does this first). */
void cr_backend_bind_thread(const cr_backend_t *b);
/* Whether this thread is one of the server's own bound ones (not the driver's callback
 * thread, which must not call the driver). */
int cr_backend_thread_bound(void);
/* Device printf of kernels on `stream` goes to fn(user, text, len) from the backend's threads,
 * before the work completes; release(user) once the stream is gone. The emulated device does
 * this; a GPU's printf reaches the server's stdout instead (CR_EUNSUPPORTED, release not
 * called). */
int cr_backend_capture_output(const cr_backend_t *b, void *stream,
                              void (*fn)(void *user, const char *text, size_t len),
                              void (*release)(void *user), void *user);

/* --- buffers.c: reused copy buffers ------------------------------------------------------- */

/* A plain buffer for a request's bulk payload (cached when it is one CR_COPY_CHUNK). */
void *cr_bulk_get(size_t size);
void cr_bulk_put(void *p, size_t size);

/* A page-locked staging buffer of at least `size` bytes, from a size-class cache. */
typedef struct {
    void *ptr;
    size_t cap;
    int cls;                 /* size class, -1 when not cached */
} cr_staging_t;
CUresult cr_staging_get(const cr_backend_t *b, size_t size, cr_staging_t *out);
/* Returns it to the cache, or frees it when the cache is full (any thread bound to the
 * backend). */
void cr_staging_put(const cr_backend_t *b, cr_staging_t *st);

/* --- tenants.c ------------------------------------------------------------------------------- */

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
    unsigned waiting;        /* executors waiting to launch */
    unsigned inflight;       /* launches admitted and not yet finished on the device */
    double vtime;            /* device ns / weight: the least goes next within a level */
    double launch_ns;        /* estimated device time of one launch, 0: not known yet */
    double slice_ns;         /* device time charged since it last took the device */
    int64_t progress_ns;     /* when its work last finished, or it took the device */
    int64_t idle_since;      /* when its work in flight last finished */
    double think_ns;         /* its loop's gap: from its work finishing to its next launch */
    double credit_ns;        /* capped tenants: device time it may still use (at credit_at) */
    int64_t credit_at;
    double round_ns;         /* device time of its last round between two gaps */
    double round_acc_ns;     /* device time of the round going on */
    double recent_ns;        /* device time, decaying: its share lately */
    int64_t recent_at;
} cr_sched_tenant_t;

typedef struct cr_tenant_s {
    struct cr_tenant_s *next;
    char name[64];
    char token[256];         /* never logged */
    uint64_t quota;          /* bytes of device memory, 0: the whole device (atomic) */
    double weight;           /* share of device time under contention */
    double compute_limit;    /* its device time at most this part of the wall time, even on an
                                idle device; 0: no limit (atomic) */
    int priority;            /* CR_PRIORITY_* (atomic) */
    int admin;               /* `cuda-remote status` shows it everyone (atomic) */
    int removed;             /* gone from the file: takes no new sessions */
    unsigned max_sessions;   /* at once; 0: the server's limit (--max-sessions-per-tenant) */
    /* usage, atomic */
    uint64_t used;           /* device memory charged */
    uint64_t sessions;       /* connected now */
    uint64_t queued_bytes;   /* its sessions' requests waiting to run (atomic) */
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

/* --- guard.c: what a connection may cost before and after it is admitted ------------------ */

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
      "its address has as many connections as it may have (--max-per-address)")                   \
    X(CR_GUARD_HELLO_REFUSED, "hello_refused", "its hello was refused")                           \
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

/* --- waiter.c: threads for calls that wait on the device ---------------------------------- */

/* Binds waiter threads to the backend's context. Call once at start-up. */
void cr_waiter_init(const cr_backend_t *b);
/* Runs fn(arg) on a waiter thread. 0 or CR_ENOMEM. */
int cr_waiter_run(void (*fn)(void *), void *arg);

/* --- session.c ----------------------------------------------------------------------------- */

typedef struct cr_server_s cr_server_t;
typedef struct cr_session_s cr_session_t;
typedef struct cr_request_s cr_request_t;

typedef struct {
    uint64_t id;
    uint8_t type;            /* cr_handle_type_t */
    uint8_t owned;           /* created by the session: destroyed when it ends */
    void *obj;               /* the backend's handle */
    /* streams: legacy default-stream ordering (session.c) */
    int blocking;
    int dirty;               /* has work the legacy stream has not waited for */
    uint64_t synced_gen;     /* legacy work generation this stream last waited for */
    CUevent marker;
    /* what another module keeps about the object (handlers_code.c: a library's or module's
     * globals and their initial contents), released with extra_free when the handle goes */
    void *extra;
    void (*extra_free)(void *extra);
    uint64_t charged;        /* device memory charged to the tenant for it (globals) */
    struct cr_batch_s *batch; /* streams: the open batch of measured launches (sched.c) */
    unsigned gate;           /* streams: 1 + index of its host-function gate, 0: none yet */
    uint32_t gate_count;     /* streams: host functions gated so far (handlers_launch.c) */
    /* functions, kernels, a library's modules: the id of the module, library or kernel they
     * came from; they are forgotten with it (the driver frees them with it) */
    uint64_t parent;
    /* functions and kernels: their parameters' sizes as the backend reports them, asked at
     * the first launch (executor only) */
    int params_known;
    uint32_t param_count;
    struct cr_kernel_param_s *params;
} cr_handle_t;

/* One kernel parameter: where it lies in the parameter buffer, and its size. */
typedef struct cr_kernel_param_s {
    uint32_t offset, size;
} cr_kernel_param_t;

struct cr_session_s {
    cr_server_t *server;
    const cr_backend_t *backend;
    uint64_t id;
    char peer[128];          /* address of the connection */
    char who[320];           /* "program (pid N) on host" after hello */
    int hello_done;
    cr_tenant_t *tenant;     /* set at hello */

    /* loop side */
    uv_stream_t *stream;     /* uv_tcp_t or uv_pipe_t, owned by server.c */

    pthread_mutex_t lock;    /* everything below */
    pthread_cond_t cond;
    cr_request_t *inbox_head, *inbox_tail;
    size_t inbox_bytes;      /* received, not yet run: the loop stops reading above a mark */
    int reading_paused;      /* the loop stopped reading this connection */
    int resume_reading;      /* the executor caught up: the loop may read again */
    int closing;             /* the connection is gone: finish and clean up */
    int refs;                /* executor, connection, queued output, tasks */
    int tasks;               /* waiter tasks and host functions still using the backend */
    cr_idmap_t handles;      /* id -> cr_handle_t * */
    cr_idmap_t by_object;    /* backend handle -> id */
    uint64_t next_handle;
    cr_rangemap_t allocations; /* device memory the session holds (value: charged bytes) */
    cr_rangemap_t code_ranges; /* globals of its code (value: the library/module id) */
    cr_idmap_t host_func_acks; /* call ids acknowledged by the client */
    cr_idmap_t gated;        /* call id -> host function whose stream waits for its answer */
    struct cr_gates_s *gates; /* host-function gates (handlers_launch.c); executor only */
    int gates_tried;
    CUresult deferred_error; /* first failure of an asynchronous request, not yet reported */
    CUresult context_error;  /* a kernel fault broke the client's context: every call fails */
    int probe_wanted;        /* the executor should ask whether the device context is lost */
    cr_idmap_t regions;      /* shared-memory regions: id -> shm.c's region */
    int shm_announced;       /* logged that this session shares memory */

    /* executor only */
    pthread_t executor;
    cr_handle_t legacy;      /* the session's own legacy default stream (id 0) */
    uint64_t legacy_gen;
    struct cr_batch_s *open_batches; /* launches measured, end not yet recorded (sched.c) */

    /* output: written straight from the sending thread when nothing is queued before it
     * (no hand-off to the loop on the way out), else queued for the loop */
    int fd;                  /* the connection's socket, -1 once it closes */
    int direct_busy;         /* a thread is writing straight to fd */
    int writes_in_flight;    /* messages handed to libuv, not yet written */
    struct cr_outmsg_s *out_head, *out_tail;
    int out_queued;          /* on the server's list of sessions with output */
    int close_requested;     /* close the connection once the output is written */
    uint64_t out_bytes;      /* output queued or being written */
    uint64_t staged_bytes;   /* device-to-host bytes staged for output still to come */
    int output_waiting;      /* the executor waits for the client to read */
    struct cr_session_s *next_with_output;
    uint64_t stat_requests;  /* atomic */

    /* accounting, for `cuda-remote status` and /metrics */
    cr_usage_t usage;        /* atomic */
    uint64_t memory;         /* device memory charged for this session (atomic) */
    int64_t connected_ns;    /* CLOCK_REALTIME */
    int listed;              /* said hello: shown (under lock) */
    size_t inbox_count;      /* requests received, not yet run (under lock) */
    struct cr_session_s *all_prev, *all_next; /* every session (session.c) */
};

/* Creates a stream for the session at the priority its tenant allows for `asked`
 * (handlers_stream.c). */
CUresult cr_session_create_stream(cr_session_t *s, CUstream *out, unsigned flags, int asked);

/* Counts work for the session and its tenant. direction: CR_COPY_HTOD or CR_COPY_DTOH. */
void cr_session_count_launch(cr_session_t *s);
/* Counts a failed call (cr_session_note_result does for every result it sees). */
void cr_session_count_error(cr_session_t *s);
void cr_session_count_copy(cr_session_t *s, int direction, uint64_t bytes);

/* A session as status shows it. */
typedef struct {
    uint64_t id;
    char who[320];           /* "program (pid N) on host" */
    char peer[128];
    const cr_tenant_t *tenant;
    uint64_t memory, requests, queued;
    int64_t connected_ns;
    int ending;              /* its client is gone; its resources are being released */
    cr_usage_t usage;
} cr_session_info_t;
/* Calls fn for every session that said hello, oldest first, under the sessions' lock. */
void cr_sessions_foreach(void (*fn)(const cr_session_info_t *info, void *arg), void *arg);

/* How much received, unrun input a session may hold before its connection is paused
 * (--max-queued); call before serving. */
void cr_session_set_input_limit(size_t bytes);
/* Creates a session for a new connection; it has no executor until it is admitted. */
cr_session_t *cr_session_new(cr_server_t *server, const cr_backend_t *b, uint64_t id,
                             const char *peer);
/* Decides on a session's hello (loop thread): 0 when its token names a tenant that may
 * have another session; then its executor runs, and the hello must be submitted to it,
 * which answers it. Else the refusal (with its reason) is sent to the client, `why` says
 * it for the log, and the connection should close. */
int cr_session_admit(cr_session_t *s, cr_request_t *req, char *why, size_t why_len);
/* Output bytes of the session's that have been written or dropped (any thread). */
void cr_session_output_done(cr_session_t *s, uint64_t bytes);
/* Device-to-host bytes about to be staged for the session's output, and their release
 * once written: the executor runs nothing more while a session's unsent output passes
 * its bound, so a client that does not read holds only its own work back. */
void cr_session_output_stage(cr_session_t *s, uint64_t bytes);
void cr_session_output_unstage(cr_session_t *s, uint64_t bytes);
/* Hands a complete request to the session's executor (loop thread; executor.c). Returns 1 when the
 * session holds so much unrun input that the loop should stop reading it for now; the
 * executor asks for reading to resume (resume_reading) once it has caught up. */
int cr_executor_submit(cr_session_t *s, cr_request_t *req);
/* The connection closed or failed: the executor cleans up and drops its reference. */
void cr_session_close(cr_session_t *s, const char *why);
void cr_session_ref(cr_session_t *s);
void cr_session_unref(cr_session_t *s);
/* Work that uses the session's backend objects off the executor (a waiter task, a host
 * function): the session's resources are released only after every task ended. */
void cr_session_task_begin(cr_session_t *s);
void cr_session_task_end(cr_session_t *s);
/* The one way to finish a session's work where it may wait on the device: fn(arg) runs on
 * a waiter thread as a task of the session. When no waiter thread can start, it runs on
 * the calling thread, which then waits: work is never dropped or refused for want of a
 * thread. The caller is a thread that may wait and call the driver (the executor or a
 * waiter), never the driver's callback thread. */
void cr_session_finish_on_waiter(cr_session_t *s, void (*fn)(void *), void *arg);

/* Handles: ids on the wire, backend objects inside. Callers hold no lock. An object seen
 * before keeps its id. */
int cr_session_add_handle(cr_session_t *s, uint8_t type, void *obj, int owned, uint64_t *id);
/* Registers an object the session owns under an id its client chose (CR_CLIENT_ID_BASE and
 * up). 0, or CR_EEXISTS when the id or the object is taken. */
int cr_session_add_handle_as(cr_session_t *s, uint8_t type, void *obj, uint64_t id);
/* Like cr_session_add_handle for an object that belongs to another the session knows
 * (a module's function, a library's kernel or module): removing `parent_obj`'s handle
 * removes this one too, so a freed function can never be named again. */
int cr_session_add_child_handle(cr_session_t *s, uint8_t type, void *obj, void *parent_obj,
                                uint64_t *id);
/* The object behind an id of the given type; `function` ids also accept kernel ids (cudart
 * passes a CUkernel as a CUfunction). NULL for id 0 or a foreign/unknown id. */
void *cr_session_handle(cr_session_t *s, uint8_t type, uint64_t id);
/* Forgets a handle and, with it, the handles that belong to it. */
void cr_session_remove_handle(cr_session_t *s, uint64_t id);
/* The function behind a function or kernel id, with its parameters as the backend reports
 * them (asked once; `*count` above CR_MAX_LAUNCH_PARAMS means more than a launch may name).
 * CUDA_ERROR_INVALID_HANDLE for an unknown id; the backend's error when it cannot tell.
 * `*params` stays valid until the handle is removed. Executor only. */
CUresult cr_session_kernel_params(cr_session_t *s, uint64_t id, CUfunction *f,
                                  const cr_kernel_param_t **params, uint32_t *count);
/* The stream for a stream id (0 = the legacy stream), NULL if unknown. */
cr_handle_t *cr_session_stream(cr_session_t *s, uint64_t id);
/* Before enqueuing work on a stream: keep the legacy default-stream semantics among the
 * session's streams (executor only). */
void cr_session_stream_prepare(cr_session_t *s, cr_handle_t *stream);
/* Records an event on every stream of the session; *events gets a malloc'd array the
 * caller passes to cr_session_wait_events on a waiter thread (executor only). */
CUresult cr_session_mark_streams(cr_session_t *s, CUevent **events, unsigned *count);
/* Waits for and destroys events made by cr_session_mark_streams. */
CUresult cr_session_wait_events(cr_session_t *s, CUevent *events, unsigned count);
/* Frees every allocation, stream, event and pool of the session (waits for its work). */
void cr_session_release_resources(cr_session_t *s, int keep_code);
/* Records the first error of an asynchronous request. */
void cr_session_defer_error(cr_session_t *s, CUresult r);
/* A result on its way to the client: if it says the context is broken (a kernel fault),
 * the session remembers it, tells the client once, and fails every later call with it. */
void cr_session_note_result(cr_session_t *s, CUresult r);
/* 1 for the errors after which a GPU context is unusable. */
int cr_is_context_error(CUresult r);

/* Device memory: charged to the session's tenant (CUDA_ERROR_OUT_OF_MEMORY past its quota)
 * before it is allocated, uncharged once freed. */
CUresult cr_session_charge(cr_session_t *s, uint64_t bytes);
void cr_session_uncharge(cr_session_t *s, uint64_t bytes);
/* The session's allocations: recorded with their charged size, which untrack returns (0
 * when p does not start one of them). */
void cr_session_track_alloc(cr_session_t *s, CUdeviceptr p, size_t size);
uint64_t cr_session_untrack_alloc(cr_session_t *s, CUdeviceptr p);
uint64_t cr_session_alloc_size(cr_session_t *s, CUdeviceptr p);
/* A global of one of the session's libraries or modules (owner: its handle id), learnt
 * when the client asks for its address. */
void cr_session_track_code(cr_session_t *s, CUdeviceptr p, size_t size, uint64_t owner);
/* 1 when [p, p + len) lies inside one allocation or global of the session: device
 * addresses a client passes must be its own. */
int cr_session_owns(cr_session_t *s, CUdeviceptr p, uint64_t len);

/* --- sched.c: device time per tenant, and whose launches go next ------------------------- */

/* Starts measuring and dispatching (the harvester thread). 0 or CR_ENOMEM. */
int cr_sched_start(const cr_backend_t *b);
/* Before a launch on `stream` (executor): waits until the session's tenant may put more
 * work on the device, then makes sure the launch is measured. CUDA_SUCCESS, or an error
 * when the session is closing or out of memory (do not launch). */
CUresult cr_sched_launch_begin(cr_session_t *s, cr_handle_t *stream);
/* After the launch that cr_sched_launch_begin admitted; r is its result. */
void cr_sched_launch_end(cr_session_t *s, cr_handle_t *stream, CUresult r);
/* Ends the session's open batches (executor): before any request other than a launch and
 * before the executor waits, so no admitted work is left unmeasured. */
void cr_sched_flush(cr_session_t *s);
/* Wakes executors waiting for admission (a session is closing). */
void cr_sched_wake(void);
/* The tenant's part of the device time all tenants used lately (0 to 1), and its launches
 * in flight on the device now. */
void cr_sched_figures(const cr_tenant_t *t, double *share, unsigned *inflight);

/* --- handlers_code.c ---------------------------------------------------------------------- */

/* Gives every global of the session's libraries and modules its initial contents again:
 * a primary-context reset on a GPU reloads code into a fresh context. */
void cr_code_reinit_globals(cr_session_t *s);

/* --- shm.c: memory shared with clients on the same host ---------------------------------- */

/* --no-shm: decline every region (clients then move their bytes over the socket). */
void cr_shm_set_enabled(int on);
/* @shm_attach and @shm_detach (executor): cr_srv_shm_attach, cr_srv_shm_detach. */
/* The server's address of [offset, offset + bytes) in one of the session's regions, NULL
 * when that is not inside a region. Valid until the region is detached, which waits for
 * the session's streams (executor). */
void *cr_shm_host_ptr(cr_session_t *s, uint64_t region, uint64_t offset, uint64_t bytes);
/* Unmaps every region of the session (its work has finished). */
void cr_shm_release_all(cr_session_t *s);

/* --- server.c --------------------------------------------------------------------------- */

typedef struct cr_outmsg_s {
    struct cr_outmsg_s *next;
    cr_buf_t head;           /* header and body */
    const void *bulk;
    size_t bulk_len;
    size_t sent;             /* bytes of head + bulk already written */
    void (*release)(void *); /* called with release_arg once written (or dropped) */
    void *release_arg;
    uv_write_t write;
    cr_session_t *session;
} cr_outmsg_t;

/* Host functions (handlers_launch.c). The client answered call_id (loop thread): opens
 * its stream's gate, or lets the host function that holds the driver's thread return. */
void cr_host_func_done(cr_session_t *s, uint64_t call_id);
/* The client is gone: opens every gate its streams wait on. */
void cr_host_funcs_open_all(cr_session_t *s);
/* Frees the gates, once the session's streams are done. */
void cr_host_func_gates_free(cr_session_t *s);

/* Queues a message for the client (any thread). Takes ownership of m. */
void cr_server_send(cr_session_t *s, cr_outmsg_t *m);
/* Wakes the loop to look at the session (output, close and resume requests). */
void cr_server_wake(cr_session_t *s);
/* Closes the session's connection once its queued output is written (any thread). */
void cr_server_close_connection(cr_session_t *s);
/* A listening socket, bound and listening before any server process starts, so that it
 * outlives a restart of the server process (supervisor.c). */
typedef struct {
    int fd;
    int is_unix;
    char bound[300]; /* the address really bound (the port for port 0) */
} cr_listener_t;

/* Exit status of a server process that lost the device context: the supervisor starts a
 * fresh one. */
#define CR_EXIT_RESTART 75

/* --listen addresses one server takes */
#define CR_MAX_LISTEN 16

/* Serves clients on the listeners (and /metrics on `metrics`, unless NULL) until
 * SIGINT/SIGTERM. Returns the exit status. */
int cr_server_run(const cr_backend_t *b, const cr_listener_t *listeners, int listener_count,
                  const cr_listener_t *metrics);
/* Ends this server process once its sessions have been told (any thread): listeners are
 * closed, connections close after their queued output, and the process exits with
 * CR_EXIT_RESTART (at the latest after a short grace period). */
void cr_server_restart(void);
/* Binds and listens on text (host:port, or unix:/path when allow_unix). 0 or CR_E*
 * (logged). */
int cr_listen_bind(const char *text, int allow_unix, cr_listener_t *out);
/* In the first process: returns in each server process it starts (0 for the first, n for
 * the n-th restart); the supervisor itself exits with the last one's status. */
int cr_supervise(void);
/* Accepts connections on a bound listener with on_conn and data on the handle, or NULL
 * (logged). */
uv_stream_t *cr_listen_adopt(uv_loop_t *loop, const cr_listener_t *l, uv_connection_cb on_conn,
                             void *data);

/* --- status.c and metrics.c: what the server and its tenants are doing ------------------- */

/* Notes the server's start (for its uptime), in the supervisor. */
void cr_status_start(void);
/* How many times the server process was started afresh (supervisor.c), for status and
 * metrics. */
void cr_status_set_restarts(int n);
int cr_status_restarts(void);
/* @status (cr_srv_status) answers with the server, tenants and sessions the caller's
 * tenant may see. */
/* Serves Prometheus metrics at /metrics on a bound listener. 0 or CR_E* (logged). */
int cr_metrics_listen(uv_loop_t *loop, const cr_backend_t *b, const cr_listener_t *l);

/* One tenant's figures, collected for status and metrics. */
typedef struct {
    const cr_tenant_t *tenant;
    char name[64];
    uint64_t quota, used, sessions, sessions_total, queued;
    double weight, compute_limit;
    int priority, admin, removed;
    cr_usage_t usage;
    double share;            /* of the device time used lately (cr_sched_figures) */
    unsigned inflight;       /* launches on the device now */
} cr_tenant_info_t;
/* Every tenant's figures (*count of them; free the array), or NULL when out of memory. */
cr_tenant_info_t *cr_status_tenants(size_t *count);
/* Seconds since cr_status_start. */
double cr_status_uptime(void);

#endif
