/* Internal header of the emulated device: shared state, handles, the allocator, streams and
 * the declarations of every cr_emu_* driver function.
 *
 * Every cr_emu_<sym> is declared here as `__typeof__(sym) cr_emu_<sym>`, so a definition whose
 * signature differs from the driver's fails to compile ("conflicting types").
 *
 * Lock order (never take an earlier one while holding a later one):
 *   event lock -> streams lock (global) -> one stream's lock.
 * The memory lock (allocator, allocation table, pools) and the handle registry lock are
 * leaves: nothing else is taken while they are held. */
#ifndef CR_EMU_H
#define CR_EMU_H

#define CUDA_ENABLE_DEPRECATED 1 /* declare the deprecated functions without warnings */
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "emu_api.h"
#include "fatbin.h"

/* X(symbol): every driver function the emu implements. */
// clang-format off
#define CR_EMU_FUNCTIONS(X)                                                                        \
    /* device.c */                                                                                 \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)          \
    X(cuDeviceGetUuid) X(cuDeviceGetUuid_v2) X(cuDeviceTotalMem_v2) X(cuDeviceGetAttribute)        \
    X(cuDeviceGetPCIBusId) X(cuDeviceGetByPCIBusId) X(cuDeviceComputeCapability)                   \
    X(cuDeviceGetProperties) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2)           \
    X(cuDevicePrimaryCtxReset_v2) X(cuDevicePrimaryCtxGetState) X(cuDevicePrimaryCtxSetFlags_v2)   \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxGetDevice_v2)                   \
    X(cuCtxSynchronize) X(cuCtxSynchronize_v2) X(cuCtxGetLimit) X(cuCtxSetLimit)                   \
    X(cuCtxGetStreamPriorityRange) X(cuCtxGetCacheConfig) X(cuCtxSetCacheConfig)                   \
    X(cuCtxGetApiVersion) X(cuCtxGetFlags) X(cuCtxSetFlags) X(cuCtxGetId)                          \
    /* memory.c */                                                                                 \
    X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAllocPitch_v2) X(cuMemGetInfo_v2)                      \
    X(cuMemGetAddressRange_v2) X(cuPointerGetAttribute) X(cuPointerGetAttributes)                  \
    X(cuMemAllocHost_v2) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostRegister_v2)                \
    X(cuMemHostUnregister) X(cuMemHostGetFlags) X(cuMemHostGetDevicePointer_v2)                    \
    /* vmm.c */                                                                                    \
    X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate)     \
    X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAccess)                  \
    X(cuMemGetAllocationPropertiesFromHandle) X(cuMemRetainAllocationHandle)                       \
    /* copy.c */                                                                                   \
    X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoD_v2) X(cuMemcpy) X(cuMemcpyAsync)          \
    X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2) X(cuMemcpy2D_v2)       \
    X(cuMemcpy2DUnaligned_v2) X(cuMemcpy2DAsync_v2) X(cuMemcpy3D_v2) X(cuMemcpy3DAsync_v2)         \
    X(cuMemsetD8_v2) X(cuMemsetD16_v2) X(cuMemsetD32_v2) X(cuMemsetD2D8_v2) X(cuMemsetD2D16_v2)    \
    X(cuMemsetD2D32_v2) X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async)                 \
    X(cuMemsetD2D8Async) X(cuMemsetD2D16Async) X(cuMemsetD2D32Async)                               \
    /* pool.c */                                                                                   \
    X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuDeviceGetDefaultMemPool) X(cuDeviceGetMemPool)        \
    X(cuDeviceSetMemPool) X(cuMemGetDefaultMemPool) X(cuMemGetMemPool) X(cuMemSetMemPool)          \
    X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuMemAllocFromPoolAsync) X(cuMemPoolSetAttribute)     \
    X(cuMemPoolGetAttribute) X(cuMemPoolTrimTo)                                                    \
    /* stream.c */                                                                                 \
    X(cuStreamCreate) X(cuStreamCreateWithPriority) X(cuStreamDestroy_v2) X(cuStreamSynchronize)   \
    X(cuStreamQuery) X(cuStreamWaitEvent) X(cuStreamGetPriority) X(cuStreamGetFlags)               \
    X(cuStreamSetAttribute) X(cuStreamGetAttribute)                                                \
    X(cuStreamGetId) X(cuStreamGetCtx) X(cuStreamGetCtx_v2) X(cuStreamGetDevice)                   \
    X(cuLaunchHostFunc) X(cuStreamAddCallback) X(cuEventCreate) X(cuEventRecord)                   \
    X(cuEventRecordWithFlags) X(cuEventQuery) X(cuEventSynchronize) X(cuEventElapsedTime)          \
    X(cuEventElapsedTime_v2) X(cuEventDestroy_v2) X(cuStreamWaitValue32_v2)                        \
    X(cuStreamBatchMemOp_v2)                                                                       \
    /* module.c */                                                                                 \
    X(cuLibraryLoadData) X(cuModuleLoadData) X(cuModuleLoadDataEx) X(cuModuleLoadFatBinary)        \
    X(cuLibraryGetKernel) X(cuLibraryGetGlobal) X(cuLibraryGetModule) X(cuLibraryUnload)           \
    X(cuLibraryGetKernelCount) X(cuLibraryEnumerateKernels) X(cuKernelGetFunction)                 \
    X(cuKernelGetName) X(cuKernelGetLibrary) X(cuKernelGetAttribute) X(cuKernelSetAttribute)       \
    X(cuKernelSetCacheConfig) X(cuKernelGetParamInfo) X(cuModuleGetFunction)                       \
    X(cuModuleGetGlobal_v2) X(cuModuleUnload) X(cuModuleGetFunctionCount)                          \
    X(cuModuleEnumerateFunctions) X(cuModuleGetLoadingMode) X(cuFuncGetAttribute)                  \
    X(cuFuncSetAttribute) X(cuFuncSetCacheConfig) X(cuFuncGetName) X(cuFuncGetModule)              \
    X(cuFuncGetParamInfo) X(cuFuncIsLoaded) X(cuFuncLoad)                                          \
    /* link.c */                                                                                   \
    X(cuLinkCreate_v2) X(cuLinkAddData_v2) X(cuLinkAddFile_v2) X(cuLinkComplete) X(cuLinkDestroy)  \
    /* launch.c */                                                                                 \
    X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuLaunchCooperativeKernel)                             \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                                 \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags) X(cuOccupancyMaxPotentialBlockSize)    \
    X(cuOccupancyMaxPotentialBlockSizeWithFlags) X(cuOccupancyAvailableDynamicSMemPerBlock)        \
    X(cuOccupancyMaxPotentialClusterSize) X(cuOccupancyMaxActiveClusters)                          \
    /* graph.c */                                                                                  \
    X(cuGraphCreate) X(cuGraphDestroy) X(cuGraphAddKernelNode_v2) X(cuGraphKernelNodeSetAttribute) \
    X(cuGraphAddMemsetNode) X(cuGraphAddMemcpyNode) X(cuGraphAddEmptyNode)                         \
    X(cuGraphAddEventRecordNode) X(cuGraphAddEventWaitNode) X(cuGraphInstantiateWithFlags)         \
    X(cuGraphLaunch) X(cuGraphUpload) X(cuGraphExecDestroy) X(cuGraphExecKernelNodeSetParams_v2)   \
    X(cuGraphExecMemsetNodeSetParams) X(cuGraphExecMemcpyNodeSetParams) X(cuGraphNodeSetEnabled)   \
    X(cuGraphExecEventRecordNodeSetEvent) X(cuGraphExecEventWaitNodeSetEvent)                      \
    X(cuGraphConditionalHandleCreate) X(cuGraphAddNode_v2) X(cuGraphDestroyNode)                   \
    X(cuGraphAddDependencies_v2)                                                                   \
    /* tensormap.c */                                                                              \
    X(cuTensorMapEncodeTiled) X(cuTensorMapEncodeIm2col)
// clang-format on

#define CR__EMU_DECLARE(sym) extern __typeof__(sym) cr_emu_##sym;
CR_EMU_FUNCTIONS(CR__EMU_DECLARE)
#undef CR__EMU_DECLARE

/* ---- the emulated device's fixed properties ---- */

/* Device memory follows GPU rules: streams may touch the same bytes unordered, and what
 * results is the program's business. ThreadSanitizer is told to ignore the emulated
 * device's own accesses to it (copies, memsets), not its bookkeeping. */
#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define CR__DEVICE_ACCESS_BEGIN()                                                                  \
    (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define CR__DEVICE_ACCESS_END()                                                                    \
    (AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define CR__DEVICE_ACCESS_BEGIN() ((void)0)
#define CR__DEVICE_ACCESS_END() ((void)0)
#endif

/* The device's resources are an H100's at every compute capability it may report
 * (cr_emu_config_t.compute_capability): the capability decides only which code it runs and
 * which architecture features it advertises. */
#define CR__DEFAULT_SM 90
#define CR__SM_COUNT 132
#define CR__WARP 32
#define CR__MAX_THREADS_PER_BLOCK 1024
#define CR__MAX_THREADS_PER_SM 2048
#define CR__MAX_BLOCKS_PER_SM 32
#define CR__REGS_PER_SM 65536
#define CR__REGS_PER_BLOCK 65536
#define CR__REG_ALLOC_UNIT 256 /* registers, per warp */
#define CR__SHARED_PER_BLOCK 49152
#define CR__SHARED_PER_BLOCK_OPTIN 232448
#define CR__SHARED_PER_SM 233472
#define CR__SHARED_RESERVED_PER_BLOCK 1024
#define CR__SHARED_ALLOC_UNIT 128
#define CR__MAX_GRID_X 2147483647u
#define CR__MAX_GRID_YZ 65535u
#define CR__MAX_BLOCK_XY 1024u
#define CR__MAX_BLOCK_Z 64u
#define CR__PRIORITY_LEAST 0
#define CR__PRIORITY_GREATEST (-5)
#define CR__ALIGN_SMALL 512u
#define CR__ALIGN_LARGE ((uint64_t)2 << 20)
#define CR__PITCH_ALIGN 512u
#define CR__DRIVER_VERSION 13000

/* ---- global state (device.c) ---- */

typedef struct cr__stream_s cr__stream_t;
typedef struct cr__pool_s cr__pool_t;
typedef struct cr__op_s cr__op_t;

typedef struct {
    _Atomic int initialized;
    pthread_mutex_t init_lock;
    uint64_t memory_bytes;
    uint64_t va_base;
    char *trace_path;
    uint64_t ctx_handle; /* the one context */
    _Atomic int ctx_retains;
    _Atomic unsigned ctx_flags;
    _Atomic int cache_config;
    cr_emu_launch_hook_t hook;
    void *hook_user;
    int no_execute;       /* cr_emu_set_execution(0): launches are only recorded */
    int context_faults;   /* cr_emu_config_t.context_faults */
    int serial_callbacks; /* cr_emu_config_t.serial_callbacks */
    unsigned sm; /* compute capability, major * 10 + minor: set before cuInit, fixed after */
    _Atomic int context_fault; /* with context_faults: the fault every call now returns */
} cr__emu_t;

extern cr__emu_t cr__emu;

/* Entry checks: 0 or the CUresult to return. cr__check_init: cuInit was called.
 * cr__check_ctx: also a context is current on the calling thread. */
CUresult cr__check_init(void);
CUresult cr__check_ctx(void);
/* Whether [p, p + len) is page-locked host memory (memory.c). */
int cr__host_mapped(uintptr_t p, size_t len);
CUresult cr__error_to_cuda(int err); /* one CR_E* -> CUresult mapping */
int64_t cr__now_ns(void);            /* CLOCK_MONOTONIC */

#define CR__ENTER_INIT()                                                                           \
    do {                                                                                           \
        CUresult enter_rc_ = cr__check_init();                                                     \
        if (enter_rc_ != CUDA_SUCCESS)                                                             \
            return enter_rc_;                                                                      \
    } while (0)
#define CR__ENTER()                                                                                \
    do {                                                                                           \
        CUresult enter_rc_ = cr__check_ctx();                                                      \
        if (enter_rc_ != CUDA_SUCCESS)                                                             \
            return enter_rc_;                                                                      \
    } while (0)

/* ---- handles (handle.c) ----
 * Every handle the emu hands out is an opaque token that is never reused; a registry maps it
 * to its object. Objects are reference counted: a lookup returns a reference, so an object
 * stays valid while a call or a queued operation uses it even if its handle is destroyed. */

typedef enum {
    CR__H_CONTEXT = 1,
    CR__H_STREAM = 2,
    CR__H_EVENT = 3,
    CR__H_LIBRARY = 4,
    CR__H_MODULE = 5,
    CR__H_KERNEL = 6,
    CR__H_FUNCTION = 7,
    CR__H_POOL = 8,
    CR__H_LINK = 9,
} cr__htype_t;
#define CR__HMASK(t) (1u << (t))

typedef struct cr__obj_s cr__obj_t;
struct cr__obj_s {
    _Atomic long refs;
    void (*release)(cr__obj_t *obj); /* called when the last reference goes */
};

void cr__obj_init(cr__obj_t *obj, void (*release)(cr__obj_t *));
void cr__obj_ref(cr__obj_t *obj);
void cr__obj_unref(cr__obj_t *obj);

/* Registers `ptr` (owned by `owner`, which gains a reference) under a new handle of `type`.
 * Returns the handle, or 0 when out of memory. */
uint64_t cr__handle_new(cr__htype_t type, cr__obj_t *owner, void *ptr);
/* Looks a handle up among the types in `mask`. On success returns ptr, sets *owner (now
 * referenced: the caller unrefs it) and *type if non-NULL. NULL when unknown. */
void *cr__handle_get(uint64_t handle, unsigned mask, cr__obj_t **owner, cr__htype_t *type);
/* Unregisters a handle of a type in `mask` and drops the registry's reference.
 * Returns 0, or -1 when the handle was not registered (only one caller wins a race). */
int cr__handle_del(uint64_t handle, unsigned mask);

/* ---- device memory (memory.c) ---- */

typedef enum {
    CR__ALLOC_USER = 1,   /* cuMemAlloc, cuMemAllocPitch */
    CR__ALLOC_GLOBAL = 2, /* a module's __device__/__constant__ variable */
    CR__ALLOC_POOL = 3,   /* stream-ordered, from a memory pool */
    CR__ALLOC_MAPPED = 4, /* physical memory mapped into a reserved range (vmm.c) */
} cr__alloc_kind_t;

typedef struct {
    uint64_t base;
    uint64_t size;     /* as requested */
    uint64_t reserved; /* arena bytes held: size rounded to the alignment */
    uint64_t buffer_id;
    cr__alloc_kind_t kind;
    int free_pending; /* cuMemFreeAsync queued: no longer valid for new work */
    cr__pool_t *pool; /* kind POOL: its pool (referenced) */
} cr__alloc_t;

extern pthread_rwlock_t cr__mem_lock;

int cr__arena_init(void); /* maps the arena; CR_E* */
/* Device memory in use: the arena's allocations and vmm.c's physical memory. Caller holds
 * cr__mem_lock. */
uint64_t cr__mem_used_locked(void);

/* ---- virtual memory management (vmm.c) ---- */

int cr__vmm_init(void); /* reserves the region after the arena; CR_E* */
/* The size of the reservable region for an arena of memory_bytes. */
uint64_t cr__vmm_region_size(uint64_t memory_bytes);
int cr__in_vmm_region(uint64_t addr);
extern uint64_t cr__vmm_physical; /* bytes of physical memory alive (cr__mem_lock) */
/* Reserves `bytes` rounded to the alignment for the size; *reserved gets the rounded size.
 * Caller holds cr__mem_lock for writing. Returns 0 or CR_ENOMEM. */
int cr__arena_take(uint64_t bytes, uint64_t *base, uint64_t *reserved);
/* Returns [base, base + reserved) to the arena, releasing fully free pages to the OS.
 * Caller holds cr__mem_lock for writing. */
void cr__arena_give(uint64_t base, uint64_t reserved);
static inline uint64_t cr__round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}
uint64_t cr__alloc_granule(uint64_t bytes); /* 512 or 2 MiB */

/* Allocation table, under cr__mem_lock (write for insert/remove). */
int cr__alloc_insert(const cr__alloc_t *a);            /* 0 or CR_ENOMEM */
cr__alloc_t *cr__alloc_find(uint64_t addr);            /* the allocation containing addr, or NULL */
int cr__alloc_remove(uint64_t base, cr__alloc_t *out); /* 0 or CR_ENOTFOUND */

/* Allocates device memory of a kind outside pools (user, global). 0 or CR_ENOMEM/CR_EINVAL. */
int cr__mem_alloc(uint64_t bytes, cr__alloc_kind_t kind, uint64_t *dptr);
/* Frees an allocation that starts at dptr, if its kind is in kind_mask (1 << kind), at once.
 * 0 or CR_EINVAL. */
int cr__mem_free(uint64_t dptr, unsigned kind_mask);
/* Marks the allocation that starts at dptr (kind in kind_mask) as being freed: no new work
 * may use it. 0, or CR_EINVAL when there is no such allocation or it is already marked. */
int cr__mem_mark_free(uint64_t dptr, unsigned kind_mask);
/* An operation that returns a marked allocation to its pool or the arena. NULL if no memory. */
cr__op_t *cr__mem_release_op(uint64_t base);
/* 0 when [addr, addr + len) lies inside one live allocation (or adjacent mappings of
 * vmm.c), else CUDA_ERROR_INVALID_VALUE. */
CUresult cr__mem_check(uint64_t addr, uint64_t len);
/* 1 when addr is a device address: the arena or the reservable region of vmm.c. */
int cr__in_arena(uint64_t addr);
/* 1 when [p, p + len) lies inside page-locked host memory (cuMemAllocHost/HostAlloc/
 * HostRegister). */
int cr__host_is_pinned(const void *p, size_t len);
/* The page-locked host range containing p, which kernels reach at its own address (mapped
 * host memory, as with unified addressing): 1 with [*base, *base + *size), else 0. */
int cr__host_range(uint64_t p, uint64_t *base, uint64_t *size);

/* ---- pools (pool.c) ---- */

int cr__pools_init(void);
uint64_t cr__pool_handle_of(const cr__pool_t *pool); /* its CUmemoryPool handle */
/* Releases an allocation that belongs to a pool (already removed from the table): caches it
 * or returns it to the arena. Caller holds cr__mem_lock for writing. Drops the pool reference
 * the allocation held. */
void cr__pool_release_locked(cr__alloc_t *a);

/* ---- streams (stream.c) ---- */

typedef struct {
    cr__stream_t *stream; /* referenced */
    uint64_t seq;
} cr__dep_t;

/* One unit of work in a stream. Allocated by the submitter (the op type's struct starts with
 * this), owned by the stream once submitted, freed by `destroy` after it ran. */
struct cr__op_s {
    cr__op_t *next;
    uint64_t seq;
    /* Runs on the stream's worker thread; returns CUDA_SUCCESS or an asynchronous error. */
    CUresult (*run)(cr__op_t *op, cr__stream_t *stream);
    void (*destroy)(cr__op_t *op); /* NULL = free(op) */
    cr__dep_t *deps;               /* malloc'd; released with the op */
    unsigned dep_count;
    int run_inline; /* being run by the submitting thread (try_inline) */
};

#define CR__STREAM_ATTRS 32 /* attribute ids below this are kept */

struct cr__stream_s {
    cr__obj_t obj;
    uint64_t handle; /* 0 for the legacy stream */
    uint64_t id;     /* cuStreamGetId; 0 for the legacy stream */
    unsigned flags;
    int priority;
    int is_legacy;
    /* stream attributes other than the priority, kept as set (hints for a GPU; under lock) */
    CUlaunchAttributeValue attrs[CR__STREAM_ATTRS];
    uint32_t attrs_set; /* bit per attribute id */
    pthread_mutex_t lock;
    pthread_cond_t work_cond; /* worker: ops queued or destroying */
    pthread_cond_t done_cond; /* waiters: completed advanced */
    cr__op_t *head, *tail;
    uint64_t submitted;         /* seq of the last op submitted (under streams lock + lock) */
    _Atomic uint64_t completed; /* seq of the last op completed */
    int thread_started;
    int spun; /* the idle worker already looked for work before sleeping */
    int destroying;
    int in_list;
    CUresult error; /* first asynchronous error, reported once by a synchronize */
    CUresult fault; /* a kernel fault: reported by every synchronize (sticky) */
    /* device printf output of its launches (cr_emu_stream_set_output), NULL: stdout */
    void (*out_fn)(void *user, const char *text, size_t len);
    void (*out_release)(void *user);
    void *out_user;
    cr__stream_t *prev, *next; /* list of all streams, under the streams lock */
};

int cr__streams_init(void);
/* Resolves a stream handle (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD = legacy) to a
 * referenced stream, or NULL for an unknown handle. */
cr__stream_t *cr__stream_get(CUstream h);
void cr__stream_put(cr__stream_t *s);
/* Submits `op` (takes ownership, also of op->deps) to s, adding the legacy-stream
 * dependencies. Returns CUDA_SUCCESS (and the op's sequence number in *seq if non-NULL) or
 * an error (op freed). */
CUresult cr__stream_submit(cr__stream_t *s, cr__op_t *op, uint64_t *seq);
/* When work submitted to s now would start at once (s idle and, by the legacy-stream rules,
 * nothing it would wait for pending), runs op on the calling thread as s's next operation
 * (later work on s waits for it), sets *rc to its result and returns 1. Otherwise returns 0
 * and leaves op to the caller. op must have no deps. */
int cr__stream_try_inline(cr__stream_t *s, cr__op_t *op, CUresult *rc);
/* Runs op as s's next operation and waits for it: inline when s is ready, else queued. */
CUresult cr__stream_run_sync(cr__stream_t *s, cr__op_t *op);
/* Adds a dependency on (t, seq) to op (grows op->deps). 0 or CR_ENOMEM. */
int cr__op_add_dep(cr__op_t *op, cr__stream_t *t, uint64_t seq);
void cr__op_free(cr__op_t *op);
/* Blocks until s completed seq. */
void cr__stream_wait(cr__stream_t *s, uint64_t seq);
/* Runs op (takes ownership; op->run gets a NULL stream) once all work submitted so far to
 * every stream has completed: at once on the calling thread when nothing is pending, else
 * later on an internal thread. Never blocks on pending work. For deferred frees. */
CUresult cr__after_all(cr__op_t *op);
/* Waits for all work submitted so far to every stream; returns (and clears) the first
 * asynchronous error. */
CUresult cr__sync_all(void);
/* Records the event `handle` on s (launch attributes). CUDA_ERROR_INVALID_HANDLE if unknown. */
CUresult cr__event_record(uint64_t handle, cr__stream_t *s);
int cr__event_valid(uint64_t handle);

/* ---- modules and kernels (module.c) ---- */

typedef struct cr__library_s cr__library_t;
typedef struct {
    cr__library_t *lib;
    const cr_kernel_info_t *info;
    uint64_t kernel_handle; /* 0 for kernels of cuModuleLoad* modules */
    uint64_t func_handle;
    /* settable attributes (atomics: concurrent cuFuncSetAttribute and launches) */
    _Atomic int max_dynamic_shared;
    _Atomic int carveout;
    _Atomic int cache_config;
    _Atomic int non_portable_cluster;
    _Atomic int cluster_policy;
    _Atomic int required_cluster[3];
} cr__kernel_t;

typedef struct {
    char *name;
    uint64_t address;
    uint64_t size;
} cr__global_t;

struct cr__library_s {
    cr__obj_t obj;
    uint64_t lib_handle; /* 0 for cuModuleLoad* modules */
    uint64_t mod_handle;
    cr_image_t *image;
    const cr_image_entry_t *entry; /* the entry the device loads (cr__emu.sm) */
    uint32_t kernel_count;
    cr__kernel_t *kernels; /* parallel to image->kernels */
    uint32_t global_count;
    cr__global_t *globals;
    /* the PTX the interpreter runs, compiled at the first launch (kernel.c) */
    pthread_mutex_t ptx_lock;
    int ptx_state; /* 0 not yet, 1 compiled, -1 no PTX or it failed to compile */
    struct cr_ptx_module_s *ptx;
};

/* Resolves a CUkernel or CUfunction handle (cudart passes a CUkernel cast to CUfunction).
 * On success returns the kernel and sets *owner (referenced). */
cr__kernel_t *cr__kernel_get(uint64_t handle, cr__obj_t **owner);
/* Attribute values for cuFuncGetAttribute/cuKernelGetAttribute. */
CUresult cr__kernel_attribute(const cr__kernel_t *k, CUfunction_attribute attrib, int *value);
int cr__kernel_max_threads(const cr__kernel_t *k);
/* The parameter buffer a launch of f with these kernelParams or extra would pass (launch.c):
 * CUDA_SUCCESS and *out (free it), *size its bytes; else the error the launch would get. */
CUresult cr__launch_params(CUfunction f, void **kernelParams, void **extra, uint8_t **out,
                           uint32_t *size);

/* The conditional values of an executable graph (graph.c): handle h (1..n, numbered in its
 * graph as the driver numbers them) is v[h - 1]. Shared by the executable graph and every
 * launch of its kernels not yet run, so that destroying it while they wait is safe. */
typedef struct {
    unsigned refs; /* atomic */
    uint32_t n;
    uint32_t v[];
} cr__cond_t;
void cr__cond_ref(cr__cond_t *c);
void cr__cond_unref(cr__cond_t *c);
/* cuLaunchKernelEx of a graph's kernel node, whose device code may set `cond`'s values
 * (cudaGraphSetConditional); cond may be NULL (launch.c). */
CUresult cr__launch_graph_kernel(const CUlaunchConfig *config, CUfunction f, void **extra,
                                 cr__cond_t *cond);

/* The device address and size of a global variable of lib. 0 or CR_ENOTFOUND. */
int cr__library_global(const cr__library_t *lib, const char *name, uint64_t *address,
                       uint64_t *size);

/* ---- kernel execution (kernel.c) ---- */

typedef struct {
    cr__library_t *lib;
    const cr__kernel_t *kernel;
    uint32_t grid[3], block[3];
    uint32_t shared;
    const uint8_t *params;
    uint32_t param_size;
    cr__cond_t *cond; /* a graph's kernel: the values its device code may set; else NULL */
} cr__run_t;

/* Runs a launch on the PTX interpreter, on the stream's worker thread. Returns CUDA_SUCCESS
 * or the CUresult of its fault (logged). */
CUresult cr__kernel_run(const cr__run_t *run, cr__stream_t *s);
/* 1 when the library's image has PTX the interpreter can run (else its launches fail with
 * CUDA_ERROR_NOT_SUPPORTED at once). */
int cr__library_has_ptx(const cr__library_t *lib);
/* The arch of the image's newest PTX entry, whatever the device, or 0 when it has none. */
unsigned cr__library_newest_ptx(const cr__library_t *lib);
/* Frees what the interpreter keeps for a library (from library_release). */
void cr__library_ptx_free(cr__library_t *lib);
/* Makes a fault sticky for s (first one wins). */
void cr__stream_fault(cr__stream_t *s, CUresult fault);

/* ---- launches (launch.c) ---- */

int cr__trace_open(const char *path); /* 0 or CR_EIO */
/* Maximum resident blocks per SM for a kernel (occupancy). */
int cr__occupancy_blocks(const cr__kernel_t *k, int block_size, size_t dynamic_shared);

#endif
