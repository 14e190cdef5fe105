/* The client stub's private interfaces, shared by its modules.
 *
 * The stub is loaded into unmodified CUDA programs as libcuda.so.1. Everything it can
 * answer locally (devices, contexts, export tables, pointer attributes, kernel layouts)
 * stays here; the rest goes to cuda-remoted through conn.c, mostly through the generic
 * marshaller in call.c. It never aborts and never prints on hot paths. */
#ifndef CR_CLIENT_INTERNAL_H
#define CR_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "conn.h"
#include "export_tables.h"
#include "cr_client_hand.h"
#include "cr_opcodes.h"
#include "fatbin.h"
#include "idmap.h"
#include "rangemap.h"

#define CR_MAX_DEVICES 16
#define CR_CUDA_VERSION 13000 /* the driver API version this stub implements */

/* --- client.c: connection and state ---------------------------------------------------- */

typedef struct {
    char name[256];
    CUuuid uuid;
    uint64_t total_mem;
    int attrs[CU_DEVICE_ATTRIBUTE_MAX]; /* indexed by CUdevice_attribute */
} cr_device_t;

typedef struct {
    cr_conn_t *conn;
    int server_driver_version;
    char backend[32];
    int device_count;
    cr_device_t devices[CR_MAX_DEVICES];
    /* per table of common/export_tables.h: its size in bytes in the server's driver, 0 when
     * it has the table but says no size, -1 when it lacks it (export_tables.c) */
    int32_t export_table_size[CR_EXPORT_TABLE_COUNT];
} cr_client_t;

/* The connected client, or NULL before a successful cuInit. */
cr_client_t *cr_client(void);
/* Maps a CR_E* transport error to the CUresult the application sees. */
CUresult cr_transport_error(int err);
/* Sends the call built in m, waits for its reply and returns its CUresult (transport
 * failures come back as CUresults too). The reply's other elements can then be read from
 * u->data (an array). The caller always ends with cr_reply_done(p, u). */
CUresult cr_call(cr_msg_t *m, cr_pending_t *p, msgpack_unpacked *u);
void cr_reply_done(cr_pending_t *p, msgpack_unpacked *u);
/* cr_call in two halves, for several calls in flight from one thread: every start is
 * followed by one finish, which returns what cr_call would. */
void cr_call_start(cr_msg_t *m, cr_pending_t *p);
CUresult cr_call_finish(cr_pending_t *p, msgpack_unpacked *u);
/* cr_call with a file descriptor passed along (Unix sockets only). */
CUresult cr_call_fd(cr_msg_t *m, cr_pending_t *p, msgpack_unpacked *u, int fd);

/* The stream id sent for a CUstream: 0 is the legacy default stream; NULL means legacy,
 * or the calling thread's per-thread stream during a _ptds/_ptsz call or with
 * CU_STREAM_PER_THREAD (created on first use). */
CUresult cr_stream_wire_id(CUstream s, uint64_t *id);
/* The per-thread-default-stream flag of the calling thread (set by _ptds/_ptsz stubs). */
int cr_ptds_active(void);
/* Forgets every per-thread stream (the primary context was reset). */
void cr_client_reset_streams(void);

/* --- handles.c: the handle ids this client holds ------------------------------------------- */

void cr_handles_add(uint64_t id, unsigned type);
/* An id for a handle an asynchronous call creates (the server registers it under it). */
uint64_t cr_handles_new_id(void);
void cr_handles_remove(uint64_t id);
/* 1 when id is a live handle of that type (a kernel counts as a function). */
int cr_handles_valid(uint64_t id, unsigned type);
/* Forgets every handle of a type (the primary-context reset destroyed them). */
void cr_handles_forget_type(unsigned type);

/* --- context.c -------------------------------------------------------------------------- */

/* The current context of the calling thread, binding nothing (NULL if none). */
CUcontext cr_ctx_current(void);
/* Runs the context-local-storage destructors of a context (primary context reset). */
void cr_ctx_run_cls_destructors(CUcontext ctx);
/* 1 when ctx is a live context handle of ours. */
int cr_ctx_valid(CUcontext ctx);
/* The primary context of a device without retaining it (runtime interface slot 2). */
CUresult cr_ctx_primary(CUcontext *out, CUdevice dev);
/* CUDA_ERROR_INVALID_CONTEXT unless the calling thread has a current context. */
CUresult cr_ctx_require(void);
int cr_ctx_device(CUcontext ctx);

/* context-local storage, the table c693336e */
CUresult cr_cls_put(CUcontext ctx, void *key, void *value,
                    void (*dtor)(CUcontext, void *, void *));
CUresult cr_cls_delete(CUcontext ctx, void *key);
CUresult cr_cls_get(void **value, CUcontext ctx, void *key);

/* --- memory.c ----------------------------------------------------------------------------- */

enum { CR_MEM_DEVICE = 1, CR_MEM_HOST_PINNED = 2, CR_MEM_HOST_REGISTERED = 3 };

/* Records device ranges the server handed out, so that copies can infer their direction
 * and pointer attributes are answered locally. */
void cr_devmap_add(CUdeviceptr p, size_t size);
void cr_devmap_remove(CUdeviceptr p);
/* Removes the range starting at p; returns its size (0 if there was none). */
size_t cr_devmap_take(CUdeviceptr p);
/* Forgets every device allocation (the primary context was reset). */
void cr_memory_forget_device_allocations(void);
/* 1 when [p, p + len) lies inside one known device allocation or global. */
int cr_devmap_contains(CUdeviceptr p, size_t len);
/* 1 when p lies in device memory (an allocation, a global, or a device address window). */
int cr_is_device_ptr(uint64_t p);
/* The memory type of a host pointer: CR_MEM_HOST_PINNED/REGISTERED, or 0 for pageable. */
int cr_host_mem_type(const void *p, uint64_t *base, uint64_t *size, unsigned *flags);
/* Reserves a device address window in this process so host memory never lands there. */
void cr_reserve_device_window(uint64_t base, uint64_t size);

/* --- shm.c: memory shared with a server on the same host ------------------------------- */

#define CR_SHM_STAGING_SIZE ((size_t)16 << 20) /* one staging area */
#define CR_SHM_SLOT ((size_t)2 << 20)          /* a staged copy's chunk; areas hold several */

/* Offers shared memory to the server when the address is a Unix socket (and
 * CUDA_REMOTE_SHM is not 0): attaches the first staging area. Call once after hello. */
void cr_shm_start(cr_conn_t *c, int is_unix);
int cr_shm_enabled(void);
/* Page-locked host memory the server maps too; NULL when there is none to be had (the
 * caller falls back to memory of its own). */
void *cr_shm_alloc(size_t size);
/* Frees memory from cr_shm_alloc once the server let go of it; 0 if p is not such. */
int cr_shm_free(void *p);
/* 1 when [p, p + len) lies in one region shared with the server: its id and p's offset. */
int cr_shm_find(const void *p, size_t len, uint64_t *region, uint64_t *offset);

/* A staging area for copies of pageable memory, held by one copy at a time. */
typedef struct {
    uint64_t region;
    uint8_t *base;
    size_t size;
    int busy;
} cr_shm_staging_t;
/* A free staging area (made on demand, a few at most), or NULL: use the socket. */
cr_shm_staging_t *cr_shm_staging_take(void);
void cr_shm_staging_give(cr_shm_staging_t *st);

/* --- module.c ----------------------------------------------------------------------------- */

/* What the client knows of a kernel; a CUkernel and the CUfunctions taken from it share
 * one. */
typedef struct {
    const cr_kernel_info_t *info; /* the parameter layout and static attributes */
    uint32_t max_dynamic_shared;  /* set with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     0 until then */
} cr_kernel_t;

/* The kernel behind a kernel or function handle, NULL if unknown. */
cr_kernel_t *cr_kernel(uint64_t handle);
/* Its parameter layout, NULL if unknown. */
const cr_kernel_info_t *cr_kernel_layout(uint64_t handle);

#endif
