/* Kernel launches, the launch trace and occupancy of the emulated device.
 *
 * A launch is checked like the device would check it, its parameter buffer is built at call
 * time from the kernel's layout (each parameter at its offset, gaps zero), and it is queued
 * on its stream. When the stream reaches it, the kernel runs on the PTX interpreter (kernel.c;
 * or a test's hook instead) and the launch is appended to the trace file as one JSON line
 * written with a single write(2):
 *
 *   {"seq":N,"kernel":"<mangled name>","grid":[x,y,z],"block":[x,y,z],"shared":S,
 *    "stream":ID,"priority":P,"params":"<lowercase hex>","attrs":[[id,value,...],...]}
 *
 * N counts launches from 1 in the order streams reach them; ID is the stream's id (0 for the
 * legacy stream), P its priority; attrs lists the cuLaunchKernelEx attributes (a cooperative
 * launch records [2,1]). */
#include "emu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "log.h"

#define MAX_ATTR_VALUES 5
#define MAX_PARAM_BYTES 32764 /* the driver's limit on the parameter buffer */

typedef struct {
    int id;
    int count;
    int64_t values[MAX_ATTR_VALUES];
    double ratio; /* ACCESS_POLICY_WINDOW hitRatio, printed as a number */
} attr_t;

typedef struct {
    cr__op_t op;
    cr__library_t *lib; /* referenced */
    const cr__kernel_t *kernel;
    uint32_t grid[3], block[3];
    uint32_t shared;
    uint8_t *params;
    uint32_t param_size;
    attr_t *attrs;
    unsigned attr_count;
    cr__cond_t *cond; /* referenced; NULL outside graphs */
} launch_op_t;

static int trace_fd = -1;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER; /* seq and file order agree */
static uint64_t trace_seq;

int cr__trace_open(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        CR_ERROR("emu: cannot open the launch trace %s: %s", path, strerror(errno));
        return CR_EIO;
    }
    if (trace_fd >= 0)
        close(trace_fd);
    trace_fd = fd;
    return 0;
}

/* ---- the trace line ---- */

typedef struct {
    char *buf;
    size_t len, cap;
    int failed;
} sbuf_t;

static void sb_reserve(sbuf_t *b, size_t more)
{
    if (b->failed || b->len + more + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *n = realloc(b->buf, cap);
    if (!n) {
        b->failed = 1;
        return;
    }
    b->buf = n;
    b->cap = cap;
}

static void sb_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    sb_reserve(b, (size_t)n);
    if (b->failed)
        return;
    va_start(ap, fmt);
    vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static void sb_json_string(sbuf_t *b, const char *s)
{
    sb_printf(b, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            sb_printf(b, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            sb_printf(b, "\\u%04x", c);
        else
            sb_printf(b, "%c", c);
    }
    sb_printf(b, "\"");
}

static void trace_write(const launch_op_t *l, const cr__stream_t *s, uint64_t seq)
{
    static const char hex[] = "0123456789abcdef";
    sbuf_t b = {0};
    sb_printf(&b, "{\"seq\":%llu,\"kernel\":", (unsigned long long)seq);
    sb_json_string(&b, l->kernel->info->name);
    sb_printf(&b,
              ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shared\":%u,\"stream\":%llu,"
              "\"priority\":%d,\"params\":\"",
              l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2], l->shared,
              (unsigned long long)s->id, s->priority);
    sb_reserve(&b, 2 * (size_t)l->param_size);
    if (!b.failed) {
        for (uint32_t i = 0; i < l->param_size; i++) {
            b.buf[b.len++] = hex[l->params[i] >> 4];
            b.buf[b.len++] = hex[l->params[i] & 15];
        }
    }
    sb_printf(&b, "\",\"attrs\":[");
    for (unsigned i = 0; i < l->attr_count; i++) {
        const attr_t *a = &l->attrs[i];
        sb_printf(&b, "%s[%d", i ? "," : "", a->id);
        for (int j = 0; j < a->count; j++)
            sb_printf(&b, ",%lld", (long long)a->values[j]);
        if (a->id == CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW)
            sb_printf(&b, ",%.9g", a->ratio);
        sb_printf(&b, "]");
    }
    sb_printf(&b, "]}\n");
    if (b.failed) {
        CR_ERROR("emu: out of memory writing the launch trace");
    } else if (write(trace_fd, b.buf, b.len) != (ssize_t)b.len) {
        CR_ERROR("emu: cannot write the launch trace: %s", strerror(errno));
    }
    free(b.buf);
}

/* ---- the launch operation ---- */

static CUresult launch_run(cr__op_t *op, cr__stream_t *s)
{
    launch_op_t *l = (launch_op_t *)op;
    CUresult rc = CUDA_SUCCESS;
    cr_emu_launch_hook_t hook;
    void *user;
    int execute;
    pthread_mutex_lock(&cr__emu.init_lock);
    hook = cr__emu.hook;
    user = cr__emu.hook_user;
    execute = !cr__emu.no_execute;
    pthread_mutex_unlock(&cr__emu.init_lock);
    if (hook) {
        const cr_image_entry_t *e = l->lib->entry;
        cr_emu_launch_t launch = {
            .kernel = l->kernel->info->name,
            .image = l->lib->image,
            .code = e->data,
            .code_size = e->size,
            .code_kind = (int)e->kind,
            .code_arch = e->arch,
            .grid = {l->grid[0], l->grid[1], l->grid[2]},
            .block = {l->block[0], l->block[1], l->block[2]},
            .shared_bytes = l->shared,
            .params = l->params,
            .param_size = l->param_size,
            .stream_id = s->id,
            .priority = s->priority,
            .library = l->lib,
        };
        int res = hook(&launch, user);
        if (res < 0) { /* a CR_E* code: reported once */
            CR_WARN("emu: kernel %s failed: %s", launch.kernel, cr_strerror(res));
            rc = CUDA_ERROR_LAUNCH_FAILED;
        } else if (res > 0) {
            rc = (CUresult)res;
            cr__stream_fault(s, rc);
        }
    } else if (execute) {
        cr__run_t run = {
            .lib = l->lib,
            .kernel = l->kernel,
            .grid = {l->grid[0], l->grid[1], l->grid[2]},
            .block = {l->block[0], l->block[1], l->block[2]},
            .shared = l->shared,
            .params = l->params,
            .param_size = l->param_size,
            .cond = l->cond,
        };
        rc = cr__kernel_run(&run, s);
        if (rc != CUDA_SUCCESS)
            cr__stream_fault(s, rc);
    }
    pthread_mutex_lock(&trace_lock);
    uint64_t seq = ++trace_seq;
    if (trace_fd >= 0)
        trace_write(l, s, seq);
    pthread_mutex_unlock(&trace_lock);
    return rc;
}

static void launch_destroy(cr__op_t *op)
{
    launch_op_t *l = (launch_op_t *)op;
    cr__obj_unref(&l->lib->obj);
    if (l->cond)
        cr__cond_unref(l->cond);
    free(l->params);
    free(l->attrs);
    free(l);
}

/* Builds the parameter buffer from kernelParams or extra. */
static CUresult build_params(const cr__kernel_t *k, void **kernelParams, void **extra,
                             uint8_t **out)
{
    const cr_kernel_info_t *info = k->info;
    uint32_t size = info->param_size;
    uint8_t *buf;
    if (kernelParams && extra)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > MAX_PARAM_BYTES)
        return CUDA_ERROR_INVALID_VALUE;
    buf = calloc(1, size ? size : 1);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (extra) {
        const void *pbuf = NULL;
        const size_t *psize = NULL;
        for (unsigned i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                pbuf = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                psize = extra[i + 1];
            else
                goto invalid;
        }
        if (size > 0 && (!pbuf || !psize || *psize < size))
            goto invalid;
        if (size > 0)
            memcpy(buf, pbuf, size);
    } else if (info->param_count > 0) {
        if (!kernelParams)
            goto invalid;
        for (uint32_t i = 0; i < info->param_count; i++) {
            const cr_param_t *p = &info->params[i];
            if (!kernelParams[i] || p->offset > size || p->size > size - p->offset)
                goto invalid;
            memcpy(buf + p->offset, kernelParams[i], p->size);
        }
    }
    *out = buf;
    return CUDA_SUCCESS;
invalid:
    free(buf);
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cr__launch_params(CUfunction f, void **kernelParams, void **extra, uint8_t **out,
                           uint32_t *size)
{
    cr__obj_t *owner = NULL;
    cr__kernel_t *k = cr__kernel_get((uint64_t)(uintptr_t)f, &owner);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = build_params(k, kernelParams, extra, out);
    *size = k->info->param_size;
    cr__obj_unref(owner);
    return rc;
}

typedef struct {
    uint32_t grid[3], block[3];
    uint32_t shared;
    CUstream stream;
    const CUlaunchAttribute *attrs;
    unsigned attr_count;
    int cooperative;  /* cuLaunchCooperativeKernel */
    cr__cond_t *cond; /* a graph's kernel node: its executable graph's conditional values */
} launch_args_t;

/* Checks and records one launch attribute; events to record after the launch go to *events. */
static CUresult take_attribute(const CUlaunchAttribute *in, attr_t *out, uint64_t *events,
                               unsigned *event_count, int *cooperative, uint32_t cluster[3])
{
    const CUlaunchAttributeValue *v = &in->value;
    out->id = (int)in->id;
    out->count = 0;
    switch (in->id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        out->values[out->count++] = (int64_t)(uintptr_t)v->accessPolicyWindow.base_ptr;
        out->values[out->count++] = (int64_t)v->accessPolicyWindow.num_bytes;
        out->values[out->count++] = v->accessPolicyWindow.hitProp;
        out->values[out->count++] = v->accessPolicyWindow.missProp;
        out->ratio = v->accessPolicyWindow.hitRatio;
        if (!(out->ratio >= 0.0 && out->ratio <= 1.0))
            return CUDA_ERROR_INVALID_VALUE;
        break;
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        out->values[out->count++] = v->cooperative;
        *cooperative = *cooperative || v->cooperative;
        break;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        out->values[out->count++] = v->syncPolicy;
        break;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        out->values[out->count++] = cluster[0] = v->clusterDim.x;
        out->values[out->count++] = cluster[1] = v->clusterDim.y;
        out->values[out->count++] = cluster[2] = v->clusterDim.z;
        break;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        out->values[out->count++] = v->preferredClusterDim.x;
        out->values[out->count++] = v->preferredClusterDim.y;
        out->values[out->count++] = v->preferredClusterDim.z;
        break;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        out->values[out->count++] = v->clusterSchedulingPolicyPreference;
        break;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        out->values[out->count++] = v->programmaticStreamSerializationAllowed;
        break;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT: {
        /* Kernels finish at once here: both events are recorded right after the launch. */
        CUevent ev = in->id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT
                         ? v->programmaticEvent.event
                         : v->launchCompletionEvent.event;
        if (!cr__event_valid((uint64_t)(uintptr_t)ev))
            return CUDA_ERROR_INVALID_HANDLE;
        events[(*event_count)++] = (uint64_t)(uintptr_t)ev;
        if (in->id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT) {
            out->values[out->count++] = v->programmaticEvent.flags;
            out->values[out->count++] = v->programmaticEvent.triggerAtBlockStart;
        } else {
            out->values[out->count++] = v->launchCompletionEvent.flags;
        }
        break;
    }
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        out->values[out->count++] = v->priority;
        break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        out->values[out->count++] = v->memSyncDomainMap.default_;
        out->values[out->count++] = v->memSyncDomainMap.remote;
        break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        out->values[out->count++] = v->memSyncDomain;
        break;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        out->values[out->count++] = v->sharedMemCarveout;
        break;
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
        out->values[out->count++] = v->nvlinkUtilCentricScheduling;
        break;
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE: /* graph nodes only */
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* 1 when launches run on the interpreter (execution on, no test hook). */
static int will_execute(void)
{
    pthread_mutex_lock(&cr__emu.init_lock);
    int yes = !cr__emu.hook && !cr__emu.no_execute;
    pthread_mutex_unlock(&cr__emu.init_lock);
    return yes;
}

static CUresult launch(uint64_t fh, const launch_args_t *a, void **kernelParams, void **extra)
{
    cr__obj_t *owner = NULL;
    launch_op_t *l = NULL;
    cr__stream_t *s = NULL;
    uint64_t *events = NULL;
    unsigned event_count = 0;
    uint32_t cluster[3] = {1, 1, 1};
    int cooperative = a->cooperative;
    CUresult rc;
    cr__kernel_t *k = cr__kernel_get(fh, &owner);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    rc = CUDA_ERROR_INVALID_VALUE;
    if (a->attr_count && !a->attrs)
        goto out;
    /* dimensions */
    if (!a->grid[0] || !a->grid[1] || !a->grid[2] || !a->block[0] || !a->block[1] || !a->block[2])
        goto out;
    if (a->grid[0] > CR__MAX_GRID_X || a->grid[1] > CR__MAX_GRID_YZ ||
        a->grid[2] > CR__MAX_GRID_YZ || a->block[0] > CR__MAX_BLOCK_XY ||
        a->block[1] > CR__MAX_BLOCK_XY || a->block[2] > CR__MAX_BLOCK_Z)
        goto out;
    uint64_t threads = (uint64_t)a->block[0] * a->block[1] * a->block[2];
    if (threads > CR__MAX_THREADS_PER_BLOCK)
        goto out;
    /* over __launch_bounds__ a GPU answers CUDA_ERROR_INVALID_VALUE (seen on an H100) */
    if (k->info->max_threads_per_block && threads > k->info->max_threads_per_block)
        goto out;
    if (threads > (uint64_t)cr__kernel_max_threads(k)) {
        rc = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES; /* too many registers for the block */
        goto out;
    }
    /* shared memory */
    if ((int64_t)a->shared > atomic_load(&k->max_dynamic_shared) ||
        (uint64_t)a->shared + k->info->static_shared_bytes > CR__SHARED_PER_BLOCK_OPTIN)
        goto out;
    /* a cubin holds SASS, which is not interpreted: without PTX the kernel cannot run here */
    if (will_execute() && !cr__library_has_ptx(k->lib)) {
        unsigned newest = cr__library_newest_ptx(k->lib);
        if (newest)
            CR_WARN("emu: no PTX for kernel %s that a compute capability %u.%u device could JIT: "
                    "its image's newest is compute_%u (--emu-compute-capability chooses the "
                    "device's)",
                    k->info->name, cr__emu.sm / 10, cr__emu.sm % 10, newest);
        else
            CR_WARN("emu: no PTX for kernel %s: the emulated device runs kernels from PTX, "
                    "which its image lacks (nvcc's default flags embed it)",
                    k->info->name);
        rc = CUDA_ERROR_NOT_SUPPORTED;
        goto out;
    }
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!(l = calloc(1, sizeof *l)))
        goto out;
    l->op.run = launch_run;
    l->op.destroy = launch_destroy;
    l->lib = k->lib;
    cr__obj_ref(&k->lib->obj);
    l->kernel = k;
    if ((l->cond = a->cond))
        cr__cond_ref(l->cond);
    memcpy(l->grid, a->grid, sizeof l->grid);
    memcpy(l->block, a->block, sizeof l->block);
    l->shared = a->shared;
    l->param_size = k->info->param_size;
    if (a->attr_count > 64) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if (a->attr_count && (!(l->attrs = calloc(a->attr_count, sizeof *l->attrs)) ||
                          !(events = calloc(a->attr_count, sizeof *events))))
        goto out;
    for (unsigned i = 0; i < a->attr_count; i++) {
        if (a->attrs[i].id == CU_LAUNCH_ATTRIBUTE_IGNORE)
            continue;
        rc = take_attribute(&a->attrs[i], &l->attrs[l->attr_count], events, &event_count,
                            &cooperative, cluster);
        if (rc != CUDA_SUCCESS)
            goto out;
        l->attr_count++;
    }
    if (a->cooperative) { /* cuLaunchCooperativeKernel */
        if (!l->attrs && !(l->attrs = calloc(1, sizeof *l->attrs))) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        l->attrs[0] = (attr_t){.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .count = 1, .values = {1}};
        l->attr_count = 1;
    }
    /* clusters: each dimension divides the grid; at most 8 blocks (16 non-portable) */
    if (cluster[0] != 1 || cluster[1] != 1 || cluster[2] != 1) {
        uint64_t size = (uint64_t)cluster[0] * cluster[1] * cluster[2];
        unsigned max = atomic_load(&k->non_portable_cluster) ? 16 : 8;
        rc = CUDA_ERROR_INVALID_CLUSTER_SIZE;
        if (!cluster[0] || !cluster[1] || !cluster[2] || size > max || a->grid[0] % cluster[0] ||
            a->grid[1] % cluster[1] || a->grid[2] % cluster[2])
            goto out;
    }
    if (cooperative) {
        uint64_t blocks = (uint64_t)a->grid[0] * a->grid[1] * a->grid[2];
        uint64_t resident =
            (uint64_t)cr__occupancy_blocks(k, (int)threads, a->shared) * CR__SM_COUNT;
        rc = CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
        if (blocks > resident)
            goto out;
    }
    if ((rc = build_params(k, kernelParams, extra, &l->params)) != CUDA_SUCCESS)
        goto out;
    rc = CUDA_ERROR_INVALID_HANDLE;
    if (!(s = cr__stream_get(a->stream)))
        goto out;
    rc = cr__stream_submit(s, &l->op, NULL);
    l = NULL; /* the stream owns it, even on failure */
    for (unsigned i = 0; rc == CUDA_SUCCESS && i < event_count; i++)
        rc = cr__event_record(events[i], s);
out:
    if (l)
        launch_destroy(&l->op);
    cr__stream_put(s);
    free(events);
    cr__obj_unref(owner);
    return rc;
}

CUresult cr_emu_cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                               unsigned int gridDimZ, unsigned int blockDimX,
                               unsigned int blockDimY, unsigned int blockDimZ,
                               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                               void **extra)
{
    CR__ENTER();
    launch_args_t a = {.grid = {gridDimX, gridDimY, gridDimZ},
                       .block = {blockDimX, blockDimY, blockDimZ},
                       .shared = sharedMemBytes,
                       .stream = hStream};
    return launch((uint64_t)(uintptr_t)f, &a, kernelParams, extra);
}

CUresult cr_emu_cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                          unsigned int gridDimY, unsigned int gridDimZ,
                                          unsigned int blockDimX, unsigned int blockDimY,
                                          unsigned int blockDimZ, unsigned int sharedMemBytes,
                                          CUstream hStream, void **kernelParams)
{
    CR__ENTER();
    launch_args_t a = {.grid = {gridDimX, gridDimY, gridDimZ},
                       .block = {blockDimX, blockDimY, blockDimZ},
                       .shared = sharedMemBytes,
                       .stream = hStream,
                       .cooperative = 1};
    return launch((uint64_t)(uintptr_t)f, &a, kernelParams, NULL);
}

/* The arguments of cuLaunchKernelEx's config. */
static launch_args_t ex_args(const CUlaunchConfig *config)
{
    return (launch_args_t){.grid = {config->gridDimX, config->gridDimY, config->gridDimZ},
                           .block = {config->blockDimX, config->blockDimY, config->blockDimZ},
                           .shared = config->sharedMemBytes,
                           .stream = config->hStream,
                           .attrs = config->attrs,
                           .attr_count = config->numAttrs};
}

CUresult cr_emu_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                 void **extra)
{
    CR__ENTER();
    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    launch_args_t a = ex_args(config);
    return launch((uint64_t)(uintptr_t)f, &a, kernelParams, extra);
}

CUresult cr__launch_graph_kernel(const CUlaunchConfig *config, CUfunction f, void **extra,
                                 cr__cond_t *cond)
{
    launch_args_t a = ex_args(config);
    a.cond = cond;
    return launch((uint64_t)(uintptr_t)f, &a, NULL, extra);
}

/* ---- occupancy ---- */

int cr__occupancy_blocks(const cr__kernel_t *k, int block_size, size_t dynamic_shared)
{
    const cr_kernel_info_t *info = k->info;
    if (block_size <= 0 || block_size > cr__kernel_max_threads(k))
        return 0;
    int warps = (block_size + CR__WARP - 1) / CR__WARP;
    int blocks = CR__MAX_BLOCKS_PER_SM;
    int by_warps = CR__MAX_THREADS_PER_SM / CR__WARP / warps;
    if (by_warps < blocks)
        blocks = by_warps;
    if (info->num_regs) {
        int per_warp = (int)cr__round_up((uint64_t)info->num_regs * CR__WARP, CR__REG_ALLOC_UNIT);
        int by_regs = CR__REGS_PER_SM / per_warp / warps;
        if (by_regs < blocks)
            blocks = by_regs;
    }
    uint64_t shared = (uint64_t)info->static_shared_bytes + dynamic_shared;
    if (shared > CR__SHARED_PER_BLOCK_OPTIN)
        return 0;
    uint64_t per_block =
        cr__round_up(shared + CR__SHARED_RESERVED_PER_BLOCK, CR__SHARED_ALLOC_UNIT);
    uint64_t by_shared = CR__SHARED_PER_SM / per_block;
    if (by_shared < (uint64_t)blocks)
        blocks = (int)by_shared;
    return blocks;
}

#define GET_KERNEL(k, owner, f)                                                                    \
    cr__obj_t *owner;                                                                              \
    cr__kernel_t *k = cr__kernel_get((uint64_t)(uintptr_t)(f), &owner);                            \
    if (!k)                                                                                        \
    return CUDA_ERROR_INVALID_HANDLE

CUresult cr_emu_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks,
                                                                     CUfunction func, int blockSize,
                                                                     size_t dynamicSMemSize,
                                                                     unsigned int flags)
{
    CR__ENTER();
    if (!numBlocks || blockSize <= 0 || (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE))
        return CUDA_ERROR_INVALID_VALUE;
    GET_KERNEL(k, owner, func);
    *numBlocks = cr__occupancy_blocks(k, blockSize, dynamicSMemSize);
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                            int blockSize, size_t dynamicSMemSize)
{
    return cr_emu_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                                       dynamicSMemSize, 0);
}

CUresult
cr_emu_cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
                                                 CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                 size_t dynamicSMemSize, int blockSizeLimit,
                                                 unsigned int flags)
{
    CR__ENTER();
    if (!minGridSize || !blockSize || blockSizeLimit < 0 ||
        (flags & ~(unsigned)(CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)))
        return CUDA_ERROR_INVALID_VALUE;
    GET_KERNEL(k, owner, func);
    int limit = cr__kernel_max_threads(k);
    if (blockSizeLimit > 0 && blockSizeLimit < limit)
        limit = blockSizeLimit;
    /* As cudart's occupancy calculator: try block sizes from the largest down in warp steps,
     * keep the one with the most resident threads (the largest on ties). */
    int best_size = 0, best_blocks = 0, best_threads = 0;
    int start = limit / CR__WARP * CR__WARP;
    if (start == 0)
        start = limit;
    for (int size = start; size > 0; size -= (size % CR__WARP) ? size % CR__WARP : CR__WARP) {
        size_t smem =
            blockSizeToDynamicSMemSize ? blockSizeToDynamicSMemSize(size) : dynamicSMemSize;
        int blocks = cr__occupancy_blocks(k, size, smem);
        if (blocks * size > best_threads) {
            best_threads = blocks * size;
            best_blocks = blocks;
            best_size = size;
        }
        if (best_threads == CR__MAX_THREADS_PER_SM)
            break;
    }
    *blockSize = best_size;
    *minGridSize = best_blocks * CR__SM_COUNT;
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                                 CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                 size_t dynamicSMemSize, int blockSizeLimit)
{
    return cr_emu_cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func,
                                                            blockSizeToDynamicSMemSize,
                                                            dynamicSMemSize, blockSizeLimit, 0);
}

CUresult cr_emu_cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func,
                                                        int numBlocks, int blockSize)
{
    CR__ENTER();
    if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    GET_KERNEL(k, owner, func);
    size_t avail = 0;
    /* numBlocks blocks must fit by threads and registers with no dynamic memory at all */
    if (cr__occupancy_blocks(k, blockSize, 0) >= numBlocks) {
        uint64_t per_block =
            CR__SHARED_PER_SM / (uint64_t)numBlocks / CR__SHARED_ALLOC_UNIT * CR__SHARED_ALLOC_UNIT;
        uint64_t used = (uint64_t)k->info->static_shared_bytes + CR__SHARED_RESERVED_PER_BLOCK;
        if (per_block > used)
            avail = per_block - used;
        if (avail + k->info->static_shared_bytes > CR__SHARED_PER_BLOCK_OPTIN)
            avail = CR__SHARED_PER_BLOCK_OPTIN - k->info->static_shared_bytes;
    }
    *dynamicSmemSize = avail;
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

/* The cluster size a config asks for (product of its CLUSTER_DIMENSION), else the kernel's
 * required cluster, else 1. */
static int config_cluster(const CUlaunchConfig *config, const cr__kernel_t *k)
{
    for (unsigned i = 0; config->attrs && i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            const CUlaunchAttributeValue *v = &config->attrs[i].value;
            return (int)(v->clusterDim.x * v->clusterDim.y * v->clusterDim.z);
        }
    int w = atomic_load(&k->required_cluster[0]), h = atomic_load(&k->required_cluster[1]),
        d = atomic_load(&k->required_cluster[2]);
    return w && h && d ? w * h * d : 1;
}

CUresult cr_emu_cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func,
                                                   const CUlaunchConfig *config)
{
    CR__ENTER();
    if (!clusterSize || !config)
        return CUDA_ERROR_INVALID_VALUE;
    GET_KERNEL(k, owner, func);
    int threads = (int)(config->blockDimX * config->blockDimY * config->blockDimZ);
    int size = atomic_load(&k->non_portable_cluster) ? 16 : 8;
    /* a cluster runs on SMs of one GPC (18 SMs here): blocks per SM bound it too */
    int per_sm = cr__occupancy_blocks(k, threads, config->sharedMemBytes);
    if (per_sm * 18 < size)
        size = per_sm * 18;
    *clusterSize = size;
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func,
                                             const CUlaunchConfig *config)
{
    CR__ENTER();
    if (!numClusters || !config)
        return CUDA_ERROR_INVALID_VALUE;
    GET_KERNEL(k, owner, func);
    int threads = (int)(config->blockDimX * config->blockDimY * config->blockDimZ);
    int cluster = config_cluster(config, k);
    int max = atomic_load(&k->non_portable_cluster) ? 16 : 8;
    CUresult rc = CUDA_SUCCESS;
    if (cluster <= 0 || cluster > max) {
        rc = CUDA_ERROR_INVALID_CLUSTER_SIZE;
    } else {
        /* 7 GPCs of 18 SMs and one of 6: clusters do not span GPCs */
        int per_sm = cr__occupancy_blocks(k, threads, config->sharedMemBytes);
        *numClusters = 7 * (per_sm * 18 / cluster) + per_sm * 6 / cluster;
    }
    cr__obj_unref(owner);
    return rc;
}
