/* Launches, host functions and occupancy (wire formats in common/protocol.h).
 *
 * A launch is asynchronous: the parameter buffer is built here from the kernel's layout
 * (the bytes the kernel will see, each parameter at its offset) and coalesced with other
 * asynchronous requests. Arguments CUDA rejects on the spot are rejected here too, from the
 * cached device limits; the rest surfaces at the next call that waits.
 *
 * Threads: any application thread; launches wait for no reply, occupancy queries for
 * theirs. Host functions run on the connection's callback thread (conn_callback.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"

#include "answers.h"
#include "capture.h"
#include "client.h"
#include "context.h"
#include "error.h"
#include "handles.h"
#include "log.h"
#include "module.h"
#include "protocol.h"
#include "request.h"
#include "stream.h"

typedef cr_launch_dims_t dims_t;

/* Dynamic shared memory beyond 48 KiB (less the static) needs the function attribute. */
static CUresult check_shared(uint64_t f, const dims_t *d, const int *attrs)
{
    cr_kernel_t *k = cr_kernel(f);
    if (!k)
        return CUDA_SUCCESS; /* the server checks what the client cannot know */
    uint64_t limit = __atomic_load_n(&k->max_dynamic_shared, __ATOMIC_RELAXED);
    if (!limit) {
        uint64_t per_block = (unsigned)attrs[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK];
        limit =
            per_block > k->info->static_shared_bytes ? per_block - k->info->static_shared_bytes : 0;
    }
    return d->shared > limit ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult check_dims(const dims_t *d)
{
    cr_client_t *cl = cr_client();
    CUcontext ctx = cr_ctx_current();
    const int *a = cl->devices[ctx ? cr_ctx_device(ctx) : 0].attrs;
    uint64_t threads = (uint64_t)d->block[0] * d->block[1] * d->block[2];
    for (int i = 0; i < 3; i++)
        if (d->grid[i] == 0 || d->block[i] == 0)
            return CUDA_ERROR_INVALID_VALUE;
    if (d->block[0] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X] ||
        d->block[1] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y] ||
        d->block[2] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z] ||
        d->grid[0] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X] ||
        d->grid[1] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y] ||
        d->grid[2] > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z] ||
        threads > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK])
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

typedef cr_launch_params_t params_t;

static CUresult build_params(uint64_t f, void **kernel_params, void **extra, params_t *out)
{
    const cr_kernel_info_t *k = cr_kernel_layout(f);
    memset(out, 0, sizeof *out);
    if (extra) {
        void *ptr = NULL;
        size_t *size = NULL;
        for (int i = 0; i < 16 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                ptr = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                size = extra[i + 1];
            else
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (!ptr || !size || kernel_params)
            return CUDA_ERROR_INVALID_VALUE;
        out->size = *size;
        out->buf = malloc(out->size ? out->size : 1);
        if (!out->buf)
            return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(out->buf, ptr, out->size);
        if (k) {
            out->params = k->params;
            out->count = k->param_count;
        } else { /* unknown layout: one opaque parameter */
            out->whole = (cr_param_t){0, (uint32_t)out->size};
            out->params = &out->whole;
            out->count = out->size ? 1 : 0;
        }
        return CUDA_SUCCESS;
    }
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE; /* a function whose layout we never saw */
    out->params = k->params;
    out->count = k->param_count;
    out->size = k->param_size;
    if (k->param_count && !kernel_params)
        return CUDA_ERROR_INVALID_VALUE;
    out->buf = calloc(1, out->size ? out->size : 1);
    if (!out->buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < k->param_count; i++) {
        if (!kernel_params[i]) {
            free(out->buf);
            return CUDA_ERROR_INVALID_VALUE;
        }
        memcpy(out->buf + k->params[i].offset, kernel_params[i], k->params[i].size);
    }
    return CUDA_SUCCESS;
}

static void pack_dim3(msgpack_packer *pk, const unsigned d[3])
{
    msgpack_pack_array(pk, 3);
    for (int i = 0; i < 3; i++)
        msgpack_pack_uint32(pk, d[i]);
}

void cr_launch_pack_attrs(msgpack_packer *pk, const CUlaunchAttribute *attrs, unsigned count)
{
    msgpack_pack_array(pk, count);
    for (unsigned i = 0; i < count; i++) {
        msgpack_pack_array(pk, 2);
        msgpack_pack_int(pk, attrs[i].id);
        msgpack_pack_bin(pk, sizeof attrs[i].value);
        msgpack_pack_bin_body(pk, &attrs[i].value, sizeof attrs[i].value);
    }
}

CUresult cr_launch_prepare(cr_launch_t *l, CUfunction f, const dims_t *d, void **kernel_params,
                           void **extra)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = cr_ctx_require();
    if (r != CUDA_SUCCESS)
        return r;
    f = (CUfunction)(uintptr_t)cr_handles_resolve((uint64_t)(uintptr_t)f); /* an object's */
    if (!f || !cr_handles_valid((uint64_t)(uintptr_t)f, CR_HT_CUfunc))
        return CUDA_ERROR_INVALID_HANDLE;
    if ((r = check_dims(d)) != CUDA_SUCCESS)
        return r;
    CUcontext ctx = cr_ctx_current();
    if ((r = check_shared((uint64_t)(uintptr_t)f, d,
                          cl->devices[ctx ? cr_ctx_device(ctx) : 0].attrs)) != CUDA_SUCCESS)
        return r;
    l->f = f;
    l->dims = *d;
    return build_params((uint64_t)(uintptr_t)f, kernel_params, extra, &l->params);
}

void cr_launch_pack(msgpack_packer *pk, const cr_launch_t *l, uint64_t sid, unsigned extra)
{
    const params_t *p = &l->params;
    msgpack_pack_array(pk, 6 + extra);
    msgpack_pack_uint64(pk, (uint64_t)(uintptr_t)l->f);
    pack_dim3(pk, l->dims.grid);
    pack_dim3(pk, l->dims.block);
    msgpack_pack_uint32(pk, l->dims.shared);
    msgpack_pack_uint64(pk, sid);
    msgpack_pack_array(pk, p->count);
    for (uint32_t i = 0; i < p->count; i++) {
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint32(pk, p->params[i].offset);
        msgpack_pack_uint32(pk, p->params[i].size);
    }
}

void cr_launch_free(cr_launch_t *l)
{
    free(l->params.buf);
    l->params.buf = NULL;
}

static CUresult launch(uint16_t opcode, CUfunction f, const dims_t *d, CUstream stream,
                       void **kernel_params, void **extra, const CUlaunchAttribute *attrs,
                       unsigned attr_count)
{
    if (attr_count && !attrs)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t sid;
    cr_launch_t l;
    CUresult r = cr_launch_prepare(&l, f, d, kernel_params, extra);
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = cr_stream_wire_id(stream, &sid)) != CUDA_SUCCESS ||
        (r = cr_capture_check(sid, 1)) != CUDA_SUCCESS) {
        cr_launch_free(&l);
        return r;
    }
    cr_msg_t m;
    int err = cr_msg_begin(cr_client()->conn, &m, opcode);
    if (err) {
        cr_launch_free(&l);
        return cr_transport_error(err);
    }
    cr_launch_pack(&m.pk, &l, sid, opcode == CR_OP_cuLaunchKernelEx);
    if (opcode == CR_OP_cuLaunchKernelEx)
        cr_launch_pack_attrs(&m.pk, attrs, attr_count);
    cr_msg_bulk(&m, l.params.buf, l.params.size);
    err = cr_msg_send(&m); /* small buffers are copied; large ones are written by now */
    cr_launch_free(&l);
    return cr_transport_error(err);
}

CUresult cr_hand_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned shared, CUstream stream,
                                void **kernel_params, void **extra)
{
    dims_t d = {{gx, gy, gz}, {bx, by, bz}, shared};
    return launch(CR_OP_cuLaunchKernel, f, &d, stream, kernel_params, extra, NULL, 0);
}

CUresult cr_hand_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                           unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                           CUstream stream, void **kernel_params)
{
    dims_t d = {{gx, gy, gz}, {bx, by, bz}, shared};
    return launch(CR_OP_cuLaunchCooperativeKernel, f, &d, stream, kernel_params, NULL, NULL, 0);
}

CUresult cr_hand_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernel_params,
                                  void **extra)
{
    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    dims_t d = {{config->gridDimX, config->gridDimY, config->gridDimZ},
                {config->blockDimX, config->blockDimY, config->blockDimZ},
                config->sharedMemBytes};
    return launch(CR_OP_cuLaunchKernelEx, f, &d, config->hStream, kernel_params, extra,
                  config->attrs, config->numAttrs);
}

/* --- host functions ------------------------------------------------------------------------- */

static uint64_t next_host_id = 1; /* atomic */

CUresult cr_launch_keep_host_func(void (*fn)(void *), void *data, uint64_t *host_id)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    *host_id = __atomic_fetch_add(&next_host_id, 1, __ATOMIC_RELAXED);
    return cr_transport_error(cr_conn_keep_host_func(cl->conn, *host_id, fn, data));
}

/* [stream], the call id naming the function registered for it; on a capturing stream
 * [stream, host id]: a host node the capture keeps, which names the function kept here
 * (cuLaunchHostFunc; a stream callback may not be captured, as natively). */
static CUresult host_func(CUstream stream, void (*fn)(void *), void *data, int capturable)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t sid, host_id = 0;
    CUresult r = cr_stream_wire_id(stream, &sid);
    if (r == CUDA_SUCCESS)
        r = cr_capture_check(sid, capturable);
    if (r == CUDA_SUCCESS && cr_capture_capturing(sid))
        r = cr_launch_keep_host_func(fn, data, &host_id);
    if (r != CUDA_SUCCESS)
        return r;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuLaunchHostFunc);
    if (err)
        return cr_transport_error(err);
    /* the server can only name functions registered here, never an address of its own */
    if (!host_id && (err = cr_conn_expect_host_func(m.conn, m.call_id, fn, data)) != 0) {
        cr_msg_cancel(&m);
        return cr_transport_error(err);
    }
    msgpack_pack_array(&m.pk, host_id ? 2 : 1);
    msgpack_pack_uint64(&m.pk, sid);
    if (host_id)
        msgpack_pack_uint64(&m.pk, host_id);
    return cr_transport_error(cr_msg_send(&m));
}

CUresult cr_hand_cuLaunchHostFunc(CUstream stream, CUhostFn fn, void *data)
{
    return host_func(stream, fn, data, 1);
}

typedef struct {
    CUstreamCallback callback;
    CUstream stream;
    void *data;
} stream_callback_t;

static void run_stream_callback(void *arg)
{
    stream_callback_t *c = arg;
    c->callback(c->stream, CUDA_SUCCESS, c->data);
    free(c);
}

CUresult cr_hand_cuStreamAddCallback(CUstream stream, CUstreamCallback callback, void *data,
                                     unsigned int flags)
{
    if (!callback || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    stream_callback_t *c = malloc(sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *c = (stream_callback_t){callback, stream, data};
    CUresult r = host_func(stream, run_stream_callback, c, 0); /* it frees c when it ran */
    if (r != CUDA_SUCCESS)
        free(c);
    return r;
}

/* --- occupancy ------------------------------------------------------------------------------ */

CUresult cr_hand_cuOccupancyMaxPotentialBlockSizeWithFlags(int *min_grid, int *block_size,
                                                           CUfunction f,
                                                           CUoccupancyB2DSize dynamic_smem,
                                                           size_t smem, int block_limit,
                                                           unsigned int flags)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!min_grid || !block_size || !f)
        return CUDA_ERROR_INVALID_VALUE;
    /* the callback lives here: evaluate it for every candidate block size up front */
    cr_msg_t m;
    cr_pending_t p = {0};
    msgpack_unpacked u;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuOccupancyMaxPotentialBlockSizeWithFlags);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 4);
    msgpack_pack_uint64(&m.pk, cr_handles_resolve((uint64_t)(uintptr_t)f));
    msgpack_pack_array(&m.pk, 32);
    for (int bs = 32; bs <= 1024; bs += 32)
        msgpack_pack_uint64(&m.pk, dynamic_smem ? dynamic_smem(bs) : smem);
    msgpack_pack_int(&m.pk, block_limit);
    msgpack_pack_uint32(&m.pk, flags);
    CUresult r = cr_call(&m, &p, &u);
    if (r == CUDA_SUCCESS) {
        const msgpack_object_array *a = &u.data.via.array;
        if (a->size < 3 || a->ptr[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
            a->ptr[2].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
            r = CUDA_ERROR_UNKNOWN;
        } else {
            *min_grid = (int)a->ptr[1].via.u64;
            *block_size = (int)a->ptr[2].via.u64;
        }
    }
    cr_reply_done(&p, &u);
    return r;
}

/* Cluster queries: [function, grid, block, shared, attributes] -> [CUresult, value]. The
 * stream of the configuration plays no part in them and is not sent. */
static void pack_cluster_query(msgpack_packer *pk, CUfunction f, const CUlaunchConfig *config)
{
    msgpack_pack_array(pk, 5);
    msgpack_pack_uint64(pk, cr_handles_resolve((uint64_t)(uintptr_t)f));
    pack_dim3(pk, (unsigned[3]){config->gridDimX, config->gridDimY, config->gridDimZ});
    pack_dim3(pk, (unsigned[3]){config->blockDimX, config->blockDimY, config->blockDimZ});
    msgpack_pack_uint32(pk, config->sharedMemBytes);
    cr_launch_pack_attrs(pk, config->attrs, config->numAttrs);
}

/* The bytes of a launch attribute's value that mean something (the rest of the 64 is
 * padding, which callers leave as their stack had it); -1 for an attribute whose value
 * holds padding of its own, which a cluster query's answer is then not kept for. */
static int attr_value_size(CUlaunchAttributeID id)
{
    switch (id) {
    case CU_LAUNCH_ATTRIBUTE_IGNORE:
        return 0;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        return 2;
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        return 4;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
        return 12;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
        return 16;
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        return 28;
    default:
        return -1;
    }
}

/* A cluster query's key (answers.h): the function and its attributes' version, the
 * configuration without its stream, each attribute's id and meaningful bytes. 0 when it is
 * not kept (too many attributes, one with padding of its own, said once). */
static size_t cluster_key(uint8_t *key, CUfunction f, const CUlaunchConfig *c)
{
    static uint64_t said; /* attribute ids said not kept, as bits */
    uint64_t fn = cr_handles_resolve((uint64_t)(uintptr_t)f), version = cr_kernel_version(fn);
    unsigned dims[7] = {c->gridDimX,  c->gridDimY,  c->gridDimZ,      c->blockDimX,
                        c->blockDimY, c->blockDimZ, c->sharedMemBytes};
    size_t len = 0;
    memcpy(key + len, &fn, sizeof fn);
    len += sizeof fn;
    memcpy(key + len, &version, sizeof version);
    len += sizeof version;
    memcpy(key + len, dims, sizeof dims);
    len += sizeof dims;
    for (unsigned i = 0; i < c->numAttrs; i++) {
        int size = attr_value_size(c->attrs[i].id);
        uint32_t id = (uint32_t)c->attrs[i].id;
        if (size < 0 || len + sizeof id + (size_t)size > CR_ANSWER_KEY_MAX) {
            uint64_t bit = 1ull << (id < 63 ? id : 63);
            if (!(__atomic_fetch_or(&said, bit, __ATOMIC_RELAXED) & bit))
                CR_DEBUG("cluster queries with launch attribute %u are asked each time", id);
            return 0;
        }
        memcpy(key + len, &id, sizeof id);
        len += sizeof id;
        memcpy(key + len, &c->attrs[i].value, (size_t)size);
        len += (size_t)size;
    }
    return len;
}

static CUresult cluster_query(uint16_t opcode, int *out, CUfunction f, const CUlaunchConfig *config)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!out || !config || (config->numAttrs && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    if (!f || !cr_handles_valid((uint64_t)(uintptr_t)f, CR_HT_CUfunc))
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t generation = cr_ctx_attributes_generation(); /* before asking (answers.h) */
    uint8_t key[CR_ANSWER_KEY_MAX];
    size_t len = cluster_key(key, f, config);
    if (cr_answer_find(opcode, key, len, out, sizeof *out))
        return CUDA_SUCCESS;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, opcode);
    if (err)
        return cr_transport_error(err);
    pack_cluster_query(&m.pk, f, config);
    uint64_t value = 0;
    CUresult r = cr_call_u64(&m, &value);
    if (r == CUDA_SUCCESS) {
        *out = (int)value;
        cr_answer_keep(opcode, key, len, generation, out, sizeof *out);
    }
    return r;
}

/* Blocks per multiprocessor (kept, answers.h): [function, its attributes' version, block
 * size, dynamic shared memory, flags]. */
CUresult cr_hand_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *blocks, CUfunction f,
                                                                      int block_size,
                                                                      size_t dynamic_smem,
                                                                      unsigned int flags)
{
    uint64_t fn = cr_handles_resolve((uint64_t)(uintptr_t)f);
    uint64_t key[5] = {fn, cr_kernel_version(fn), (uint64_t)(int64_t)block_size, dynamic_smem,
                       flags};
    uint64_t generation = cr_ctx_attributes_generation();
    int keep = blocks && cr_client() && cr_handles_valid(key[0], CR_HT_CUfunc);
    if (keep && cr_answer_find(CR_OP_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, key,
                               sizeof key, blocks, sizeof *blocks))
        return CUDA_SUCCESS;
    CUresult r = cr_remote_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        blocks, f, block_size, dynamic_smem, flags);
    if (r == CUDA_SUCCESS && keep)
        cr_answer_keep(CR_OP_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, key, sizeof key,
                       generation, blocks, sizeof *blocks);
    return r;
}

CUresult cr_hand_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction f,
                                                             int block_size, size_t dynamic_smem)
{
    return cr_hand_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, f, block_size,
                                                                        dynamic_smem, 0);
}

CUresult cr_hand_cuOccupancyMaxActiveClusters(int *num_clusters, CUfunction f,
                                              const CUlaunchConfig *config)
{
    return cluster_query(CR_OP_cuOccupancyMaxActiveClusters, num_clusters, f, config);
}

CUresult cr_hand_cuOccupancyMaxPotentialClusterSize(int *cluster_size, CUfunction f,
                                                    const CUlaunchConfig *config)
{
    return cluster_query(CR_OP_cuOccupancyMaxPotentialClusterSize, cluster_size, f, config);
}

CUresult cr_hand_cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block_size, CUfunction f,
                                                  CUoccupancyB2DSize dynamic_smem, size_t smem,
                                                  int block_limit)
{
    return cr_hand_cuOccupancyMaxPotentialBlockSizeWithFlags(min_grid, block_size, f, dynamic_smem,
                                                             smem, block_limit, 0);
}
