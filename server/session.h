/* Sessions, one per client connection, and what they hold: the session module's public
 * interface (session.c, handles.c, allocations.c, legacy_stream.c, context_loss.c,
 * executor.c, admission.c, hello.c; outbox.c writes its output). The session's struct is
 * private to them (session_private.h).
 *
 * Threads: the libuv loop thread accepts, reads and closes connections; each admitted
 * session has an executor thread that runs its requests in order and never waits on the
 * device; calls that wait run on waiter threads; the backend's own threads run host
 * functions. Requests arrive in a session's inbox from the loop; replies are written by
 * the thread that sends them when nothing is queued before them, else by the loop. */
#ifndef CR_SERVER_SESSION_H
#define CR_SERVER_SESSION_H

#include <stdint.h>

#include "backend.h"
#include "cr_api_desc.h"
#include "frame.h"
#include "tenants.h"

/* What other modules keep per session, one slot each: only that module reads or writes its
 * slot, with the discipline it states, and empties it before the session ends. */
typedef enum {
    CR_SLOT_SCHED,      /* sched.c: the open batches of measured launches (executor only) */
    CR_SLOT_SHM,        /* shm.c: the shared-memory regions */
    CR_SLOT_HOST_FUNCS, /* handlers_launch.c: host functions and their gates */
    CR_SLOT_GRAPHS,     /* graph.c: the captures under way (executor only) */
    CR_SLOT_MEMOPS,     /* memops.c: the stream waits not yet done (its own lock) */
    CR_SLOT_COUNT
} cr_session_slot_t;

typedef struct cr_server_s cr_server_t;
typedef struct cr_session_s cr_session_t;
typedef struct cr_request_s cr_request_t;

typedef struct {
    uint64_t id;
    uint8_t type;  /* cr_handle_type_t */
    uint8_t owned; /* created by the session: destroyed when it ends */
    void *obj;     /* the backend's handle */
    /* streams: legacy default-stream ordering (session.c) */
    int blocking;
    int dirty;           /* has work the legacy stream has not waited for */
    uint64_t synced_gen; /* legacy work generation this stream last waited for */
    CUevent marker;
    /* what another module keeps about the object (handlers_code.c: a library's or module's
     * globals and their initial contents), released with extra_free when the handle goes */
    void *extra;
    void (*extra_free)(void *extra);
    uint64_t charged;         /* device memory charged to the tenant for it (globals) */
    struct cr_batch_s *batch; /* streams: the open batch of measured launches (sched.c) */
    unsigned gate;            /* streams: 1 + index of its host-function gate, 0: none yet */
    uint32_t gate_count;      /* streams: host functions gated so far (handlers_launch.c) */
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

/* What a session is. The backend and id never change; the tenant and name are set at its
 * hello, before any request runs. */
const cr_backend_t *cr_session_backend(const cr_session_t *s);
uint64_t cr_session_id(const cr_session_t *s);
cr_tenant_t *cr_session_tenant(const cr_session_t *s);
const char *cr_session_peer(const cr_session_t *s);
/* "program (pid N) on host" once it said hello, else its address. */
const char *cr_session_name(const cr_session_t *s);
/* 1 once its connection is gone (any thread). */
int cr_session_closing(const cr_session_t *s);

/* The slot a module keeps its per-session state in. */
void **cr_session_slot(cr_session_t *s, cr_session_slot_t slot);
/* Counts work for the session and its tenant. direction: CR_COPY_HTOD or CR_COPY_DTOH. */
void cr_session_count_launches(cr_session_t *s, uint64_t n);
/* Device time of the session's kernels (sched.c measures it). */
void cr_session_count_device_time(cr_session_t *s, uint64_t ns);
/* The session made a driver call: NVML lists it as a process using the GPU. */
void cr_session_note_driver_call(cr_session_t *s);
/* Counts a failed call (cr_session_note_result does for every result it sees). */
void cr_session_count_error(cr_session_t *s);
void cr_session_count_copy(cr_session_t *s, int direction, uint64_t bytes);

/* A session as status shows it. */
typedef struct {
    uint64_t id;
    char who[320]; /* "program (pid N) on host" */
    char program[64];
    uint32_t pid;     /* on its own host */
    int drove_device; /* it made a driver call, not only messages */
    char peer[128];
    char auth[300]; /* how it authenticated: "token", "certificate CN=alice", "none"; "/TLS" */
    const cr_tenant_t *tenant;
    uint64_t memory, requests, queued;
    int64_t connected_ns;
    int ending; /* its client is gone; its resources are being released */
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
/* Makes handle `id` belong to handle `parent` from now on (a graph moved into a node):
 * it goes with it. 0, or CR_ENOTFOUND. */
int cr_session_handle_reparent(cr_session_t *s, uint64_t id, uint64_t parent);
/* Gives a handle what another module keeps about its object: device memory charged for it
 * (uncharged when it goes) and `extra`, freed then with extra_free. 0, or CR_ENOTFOUND. */
int cr_session_handle_attach(cr_session_t *s, uint64_t id, uint64_t charged, void *extra,
                             void (*extra_free)(void *extra));
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
/* Calls fn for each of the session's handles (executor only: no other thread adds or
 * removes handles meanwhile). */
void cr_session_handles_each(cr_session_t *s,
                             void (*fn)(cr_session_t *s, cr_handle_t *h, void *arg), void *arg);
/* The stream for a stream id (0 = the legacy stream), NULL if unknown. */
cr_handle_t *cr_session_stream(cr_session_t *s, uint64_t id);
/* Before enqueuing work on a stream: keep the legacy default-stream semantics among the
 * session's streams (executor only). */
void cr_session_stream_prepare(cr_session_t *s, cr_handle_t *stream);
/* After a context reset: the legacy stream has no earlier work to order (executor). */
void cr_session_legacy_forget(cr_session_t *s);
/* Records an event on every stream of the session; *events gets a malloc'd array the
 * caller passes to cr_session_wait_events on a waiter thread (executor only). */
CUresult cr_session_mark_streams(cr_session_t *s, CUevent **events, unsigned *count);
/* Waits for and destroys events made by cr_session_mark_streams. */
CUresult cr_session_wait_events(cr_session_t *s, CUevent *events, unsigned count);
/* Frees every allocation, stream, event and pool of the session (waits for its work). */
void cr_session_release_resources(cr_session_t *s, int keep_code);
/* What a driver call must answer with instead of running (CUDA_SUCCESS: run it): the
 * error that broke the session's context, or for a call that waits, the first failure of
 * an earlier asynchronous one, which it then takes. */
CUresult cr_session_call_error(cr_session_t *s, int waits);
/* Records the first error of an asynchronous request. */
void cr_session_defer_error(cr_session_t *s, CUresult r);
/* A result on its way to the client: if it says the context is broken (a kernel fault),
 * the session remembers it, tells the client once, and fails every later call with it. */
void cr_session_note_result(cr_session_t *s, CUresult r);
/* What to do once every session was told that the device context is lost: the loop
 * restarts the server process (context_loss.c). */
void cr_context_loss_on_lost(void (*fn)(void));
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
/* Frees one of the session's allocations (p its start) once the work the session enqueued
 * so far is done, on a waiter thread (executor only): forgotten at once, so that later
 * requests may not use it, and uncharged once freed; then done(arg, result), when given.
 * CUDA_ERROR_INVALID_VALUE when p starts none; another error (done not called) when the
 * free cannot be started, the allocation then still the session's. */
CUresult cr_session_free_when_idle(cr_session_t *s, CUdeviceptr p,
                                   void (*done)(void *arg, CUresult r), void *arg);
/* A global of one of the session's libraries or modules (owner: its handle id), learnt
 * when the client asks for its address. */
void cr_session_track_code(cr_session_t *s, CUdeviceptr p, size_t size, uint64_t owner);
/* Page-locked memory of the session's that the device reaches (shm.c: mapped host memory,
 * by its device address), which the session owns like its allocations while attached. */
void cr_session_track_host(cr_session_t *s, CUdeviceptr p, uint64_t size);
void cr_session_untrack_host(cr_session_t *s, CUdeviceptr p);
/* 1 when [p, p + len) lies inside one allocation, global or mapped host region of the
 * session, or in ranges where it mapped memory one after another: device addresses a
 * client passes must be its own. */
int cr_session_owns(cr_session_t *s, CUdeviceptr p, uint64_t len);

/* The virtual-memory API (virtual_memory.c). Reserved address ranges: */
int cr_session_vmm_reserve(cr_session_t *s, CUdeviceptr base, uint64_t size); /* 0 or CR_E* */
/* 1 when [p, p + size) lies in one of its reservations; _is_reservation: exactly one. */
int cr_session_vmm_reserved(cr_session_t *s, CUdeviceptr p, uint64_t size);
int cr_session_vmm_is_reservation(cr_session_t *s, CUdeviceptr base, uint64_t size);
void cr_session_vmm_unreserve(cr_session_t *s, CUdeviceptr base);
/* Physical memory it created, of `size` bytes already charged: the id its client names it
 * by (0: out of memory). */
uint64_t cr_session_vmm_add_physical(cr_session_t *s, uint64_t backend, uint64_t size);
/* The backend's handle (and size) behind a live id: 1, or 0 for an id not its own. */
int cr_session_vmm_physical(cr_session_t *s, uint64_t id, uint64_t *backend, uint64_t *size);
/* The client released a handle (cuMemRelease succeeded). */
void cr_session_vmm_release(cr_session_t *s, uint64_t id);
/* cuMemRetainAllocationHandle succeeded for addr: the id of what is mapped there, its
 * handle count raised (0: none of its own). */
uint64_t cr_session_vmm_retain(cr_session_t *s, CUdeviceptr addr);
/* Mappings: recorded once the backend mapped; 0, or nonzero (unknown id, overlap). */
int cr_session_vmm_map(cr_session_t *s, CUdeviceptr base, uint64_t size, uint64_t id);
/* 1 when [p, p + len) is mapped memory of its; _unmappable: whole mappings exactly. */
int cr_session_vmm_mapped(cr_session_t *s, CUdeviceptr p, uint64_t len);
int cr_session_vmm_unmappable(cr_session_t *s, CUdeviceptr base, uint64_t size);
/* The backend unmapped [base, base + size): forgets the mappings; memory released and no
 * longer mapped goes back to the tenant. */
void cr_session_vmm_unmap(cr_session_t *s, CUdeviceptr base, uint64_t size);
/* Unmaps, releases and frees all of it in the backend and gives the tenant its bytes back
 * (a session's end, a context reset). */
void cr_session_vmm_release_all(cr_session_t *s);

#endif
