/* Launches, host functions and occupancy (wire formats in common/protocol.h). */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cr_server_hand.h"
#include "dispatch.h"
#include "error.h"
#include "handlers.h"
#include "idmap.h"
#include "log.h"
#include "loop.h"
#include "protocol.h"
#include "scheduler.h"
#include "session.h"

static int dim3(const msgpack_object *o, unsigned out[3])
{
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 3)
        return CR_EPROTO;
    for (int i = 0; i < 3; i++) {
        uint64_t v;
        if (cr_obj_u64(&o->via.array.ptr[i], &v) || v > UINT32_MAX)
            return CR_EPROTO;
        out[i] = (unsigned)v;
    }
    return 0;
}

/* One [offset, size] entry of a launch's layout, inside the request's parameter bytes. */
static int layout_entry(const cr_request_t *req, const msgpack_object *e, uint64_t *off,
                        uint64_t *size)
{
    return e->type == MSGPACK_OBJECT_ARRAY && e->via.array.size == 2 &&
           !cr_obj_u64(&e->via.array.ptr[0], off) && !cr_obj_u64(&e->via.array.ptr[1], size) &&
           *off <= req->hdr.bulk_len && *size <= req->hdr.bulk_len - *off;
}

/* [function, grid, block, shared, stream, [[offset, size]...]] + bulk parameter buffer.
 *
 * The backend reads every parameter at the size the kernel has, wherever its pointer
 * points, so the layout must name exactly the kernel's parameters at exactly their sizes:
 * a shorter entry, or a missing one, would have it read past the request into other
 * tenants' bytes (or dereference NULL). One entry for a kernel with another count of
 * parameters is a whole buffer laid out as the kernel's (cuLaunchKernel's `extra`); it must
 * hold every parameter. */
static CUresult parse_params(cr_request_t *req, cr_launch_t *l)
{
    cr_session_t *s = req->session;
    uint64_t fid, shared, sid;
    const msgpack_object_array *layout;
    if (req->argc < 6 || cr_arg_u64(req, 0, &fid) || dim3(&req->args[1], l->grid) ||
        dim3(&req->args[2], l->block) || cr_arg_u64(req, 3, &shared) || shared > UINT32_MAX ||
        cr_arg_u64(req, 4, &sid) || cr_arg_array(req, 5, &layout) ||
        layout->size > CR_MAX_LAUNCH_PARAMS)
        return CUDA_ERROR_INVALID_VALUE;
    l->function_id = fid;
    l->shared = (unsigned)shared;
    const cr_kernel_param_t *kp;
    uint32_t count;
    CUresult r = cr_session_kernel_params(s, fid, &l->f, &kp, &count);
    if (r != CUDA_SUCCESS)
        return r;
    if (!(l->stream = cr_session_stream(s, sid)))
        return CUDA_ERROR_INVALID_HANDLE;
    int whole = layout->size == 1 && count != 1;
    if (!whole && layout->size != count)
        return CUDA_ERROR_INVALID_VALUE;
    l->params = calloc((size_t)count + 1, sizeof *l->params);
    if (!l->params)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t off, size;
        if (!layout_entry(req, &layout->ptr[whole ? 0 : i], &off, &size))
            return CUDA_ERROR_INVALID_VALUE;
        if (whole) { /* the kernel's parameter i lies at its own offset in the buffer */
            if (kp[i].offset > size || kp[i].size > size - kp[i].offset)
                return CUDA_ERROR_INVALID_VALUE;
            off += kp[i].offset;
        } else if (size != kp[i].size) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        l->params[i] = req->bulk + off;
    }
    return CUDA_SUCCESS;
}

/* [[id, value bytes]...] into l->attrs (at most CR_MAX_LAUNCH_ATTRS); events inside the
 * values are the session's ids, replaced by the driver's events. */
static CUresult parse_attrs(cr_session_t *s, const msgpack_object_array *list, cr_launch_t *l)
{
    if (list->size > CR_MAX_LAUNCH_ATTRS)
        return CUDA_ERROR_INVALID_VALUE;
    for (uint32_t i = 0; i < list->size; i++) {
        const msgpack_object *e = &list->ptr[i];
        CUlaunchAttribute *a = &l->attrs[i];
        uint64_t id;
        memset(a, 0, sizeof *a);
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 2 ||
            cr_obj_u64(&e->via.array.ptr[0], &id) ||
            e->via.array.ptr[1].type != MSGPACK_OBJECT_BIN ||
            e->via.array.ptr[1].via.bin.size != sizeof a->value)
            return CUDA_ERROR_INVALID_VALUE;
        a->id = (CUlaunchAttributeID)id;
        memcpy(&a->value, e->via.array.ptr[1].via.bin.ptr, sizeof a->value);
        CUresult r = cr_session_check_attribute(s, (unsigned)id, &a->value);
        if (r != CUDA_SUCCESS)
            return r;
        if (id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT ||
            id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT) {
            CUevent *ev = id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT
                              ? &a->value.programmaticEvent.event
                              : &a->value.launchCompletionEvent.event;
            void *obj = cr_session_handle(s, CR_HT_CUevent, (uint64_t)(uintptr_t)*ev);
            if (!obj)
                return CUDA_ERROR_INVALID_HANDLE;
            *ev = obj;
            l->names_events = 1;
        }
        l->nattrs++;
    }
    return CUDA_SUCCESS;
}

CUresult cr_launch_parse(cr_request_t *req, cr_launch_t *l)
{
    memset(l, 0, offsetof(cr_launch_t, attrs));
    l->cooperative = req->hdr.opcode == CR_OP_cuLaunchCooperativeKernel;
    CUresult r = parse_params(req, l);
    if (r == CUDA_SUCCESS && req->hdr.opcode == CR_OP_cuLaunchKernelEx) {
        const msgpack_object_array *list;
        r = req->argc != 7 || cr_arg_array(req, 6, &list) ? CUDA_ERROR_INVALID_VALUE
                                                          : parse_attrs(req->session, list, l);
    } else if (r == CUDA_SUCCESS && req->argc != 6) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r != CUDA_SUCCESS)
        cr_launch_clear(l);
    return r;
}

void cr_launch_clear(cr_launch_t *l)
{
    free(l->params);
    l->params = NULL;
}

/* cuLaunchKernel, cuLaunchCooperativeKernel and cuLaunchKernelEx: checked, admitted by the
 * scheduler, measured. */
static void launch(cr_request_t *req)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    cr_launch_t l;
    CUresult r = cr_launch_parse(req, &l);
    if (r != CUDA_SUCCESS) {
        cr_request_finish(req, r);
        return;
    }
    CUlaunchConfig config = {
        .gridDimX = l.grid[0],
        .gridDimY = l.grid[1],
        .gridDimZ = l.grid[2],
        .blockDimX = l.block[0],
        .blockDimY = l.block[1],
        .blockDimZ = l.block[2],
        .sharedMemBytes = l.shared,
        .hStream = l.stream->obj,
        .attrs = l.attrs,
        .numAttrs = l.nattrs,
    };
    cr_session_stream_prepare(s, l.stream);
    if (req->hdr.opcode == CR_OP_cuLaunchKernelEx && !d->cuLaunchKernelEx)
        r = CUDA_ERROR_NOT_SUPPORTED;
    else if ((r = cr_sched_launch_begin(s, l.stream)) == CUDA_SUCCESS) {
        if (req->hdr.opcode == CR_OP_cuLaunchKernelEx)
            r = d->cuLaunchKernelEx(&config, l.f, l.params, NULL);
        else if (l.cooperative)
            r = d->cuLaunchCooperativeKernel(l.f, l.grid[0], l.grid[1], l.grid[2], l.block[0],
                                             l.block[1], l.block[2], l.shared, l.stream->obj,
                                             l.params);
        else
            r = d->cuLaunchKernel(l.f, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                                  l.block[2], l.shared, l.stream->obj, l.params, NULL);
        cr_sched_launch_end(s, l.stream, r);
    }
    if (r == CUDA_SUCCESS)
        cr_session_count_launches(s, 1);
    cr_launch_clear(&l);
    cr_request_finish(req, r);
}

void cr_srv_cuLaunchKernel(cr_request_t *req)
{
    launch(req);
}

void cr_srv_cuLaunchCooperativeKernel(cr_request_t *req)
{
    launch(req);
}

void cr_srv_cuLaunchKernelEx(cr_request_t *req)
{
    launch(req);
}

/* [function, grid, block, shared, attributes] -> [CUresult, value] */
static void cluster_query(cr_request_t *req,
                          CUresult (*query)(int *, CUfunction, const CUlaunchConfig *))
{
    cr_session_t *s = req->session;
    cr_launch_t l = {0};
    const msgpack_object_array *list;
    unsigned grid[3], block[3];
    uint64_t fid, shared;
    CUfunction f = NULL;
    CUresult r = CUDA_SUCCESS;
    if (req->argc != 5 || cr_arg_u64(req, 0, &fid) || dim3(&req->args[1], grid) ||
        dim3(&req->args[2], block) || cr_arg_u64(req, 3, &shared) || shared > UINT32_MAX ||
        cr_arg_array(req, 4, &list))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!(f = cr_session_handle(s, CR_HT_CUfunc, fid)))
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (!query)
        r = CUDA_ERROR_NOT_SUPPORTED;
    else
        r = parse_attrs(s, list, &l);
    int value = 0;
    if (r == CUDA_SUCCESS) {
        CUlaunchConfig config = {
            .gridDimX = grid[0],
            .gridDimY = grid[1],
            .gridDimZ = grid[2],
            .blockDimX = block[0],
            .blockDimY = block[1],
            .blockDimZ = block[2],
            .sharedMemBytes = (unsigned)shared,
            .attrs = l.attrs,
            .numAttrs = l.nattrs,
        };
        r = query(&value, f, &config);
    }
    if (r != CUDA_SUCCESS) {
        cr_request_finish(req, r);
        return;
    }
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 1) == 0) {
        msgpack_pack_int(&reply.pk, value);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

void cr_srv_cuOccupancyMaxActiveClusters(cr_request_t *req)
{
    cluster_query(req, cr_session_backend(req->session)->d.cuOccupancyMaxActiveClusters);
}

void cr_srv_cuOccupancyMaxPotentialClusterSize(cr_request_t *req)
{
    cluster_query(req, cr_session_backend(req->session)->d.cuOccupancyMaxPotentialClusterSize);
}

/* --- host functions: run in the client, in stream order ------------------------------------
 *
 * A GPU's driver runs the host functions of every stream of the context on one thread:
 * holding that thread while a client runs its function would hold every other session's
 * host functions, and the device-to-host copies that finish with one, for as long (seen on
 * an H100). So the driver's thread only asks the client to run the function, and the
 * stream itself waits on the device (cuStreamWaitValue32) for its gate, a word of
 * page-locked host memory that the server opens when the client says the function
 * returned, or when the client is gone. Each stream has its own gate, counting its host
 * functions. Where the device cannot wait on memory, the driver's thread waits instead. */

#define GATES 1024 /* streams of a session with a gate of their own; later ones wait the old way */

struct cr_gates_s {
    uint32_t *words;  /* page-locked, mapped */
    CUdeviceptr base; /* their device address */
    unsigned used;
};

/* A session's host functions (its slot): made by its executor at the first, read by the
 * driver's callback thread and the loop, freed once its streams are done. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int closed;       /* the client is gone: no answer will come */
    cr_idmap_t gated; /* call id -> host_func_t whose stream waits on its gate */
    cr_idmap_t acks;  /* answered calls whose host function holds the driver's thread */
    struct cr_gates_s *gates;
    int gates_tried;
} host_funcs_t;

static host_funcs_t *host_funcs(cr_session_t *s, int make)
{
    host_funcs_t **slot = (host_funcs_t **)cr_session_slot(s, CR_SLOT_HOST_FUNCS);
    host_funcs_t *hf = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!hf && make && (hf = calloc(1, sizeof *hf)) != NULL) {
        pthread_mutex_init(&hf->lock, NULL);
        pthread_cond_init(&hf->cond, NULL);
        __atomic_store_n(slot, hf, __ATOMIC_RELEASE);
    }
    return hf;
}

typedef struct {
    cr_session_t *session;
    host_funcs_t *funcs;
    uint64_t call_id;
    uint64_t host_id; /* a graph's host node: the client's id of it, else 0 */
    uint32_t *gate;   /* NULL: the driver's thread waits for the client */
    uint32_t count;   /* the gate opens at this count */
    int refs;         /* gated: the driver's call and the client's answer (or its end) */
} host_func_t;

static void host_func_unref(host_func_t *h)
{
    if (__atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        cr_session_unref(h->session);
        free(h);
    }
}

static void gate_open(uint32_t *gate, uint32_t count)
{
    uint32_t now = __atomic_load_n(gate, __ATOMIC_ACQUIRE);
    while ((int32_t)(count - now) > 0 &&
           !__atomic_compare_exchange_n(gate, &now, count, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
        ;
}

static void ask_client(host_func_t *h)
{
    msgpack_packer pk;
    cr_outmsg_t *m = cr_message_new(CR_OP_HOST_FUNC, h->call_id, 0, &pk);
    if (m) {
        msgpack_pack_array(&pk, h->host_id ? 1 : 0);
        if (h->host_id)
            msgpack_pack_uint64(&pk, h->host_id);
        cr_message_finish(m, CR_OP_HOST_FUNC, h->call_id, 0);
        cr_server_send(h->session, m);
    }
}

/* On the driver's callback thread, gated: ask, and return at once. */
static void host_func_ask(void *arg)
{
    host_func_t *h = arg;
    ask_client(h);
    host_func_unref(h);
}

/* On the driver's callback thread, without a gate: ask, and hold the thread (and so the
 * stream) until the client says it returned or is gone. */
static void host_func_hold(void *arg)
{
    host_func_t *h = arg;
    host_funcs_t *hf = h->funcs;
    ask_client(h);
    pthread_mutex_lock(&hf->lock);
    while (!hf->closed && !cr_idmap_remove(&hf->acks, h->call_id, NULL))
        pthread_cond_wait(&hf->cond, &hf->lock);
    pthread_mutex_unlock(&hf->lock);
    host_func_unref(h);
}

/* The stream's gate and its device address, or NULL (executor only). The first call finds
 * out whether the device can wait on mapped host memory at all. */
static uint32_t *stream_gate(cr_session_t *s, host_funcs_t *hf, cr_handle_t *stream,
                             CUdeviceptr *dev)
{
    const cr_driver_t *d = &cr_session_backend(s)->d;
    if (!hf->gates_tried) {
        hf->gates_tried = 1;
        struct cr_gates_s *g = calloc(1, sizeof *g);
        void *p = NULL;
        if (g && d->cuMemHostAlloc && d->cuMemHostGetDevicePointer_v2 &&
            d->cuStreamWaitValue32_v2 && d->cuMemFreeHost &&
            d->cuMemHostAlloc(&p, GATES * sizeof *g->words,
                              CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) ==
                CUDA_SUCCESS) {
            memset(p, 0, GATES * sizeof *g->words);
            /* a wait that is already satisfied tells whether the device can wait here */
            if (d->cuMemHostGetDevicePointer_v2(&g->base, p, 0) == CUDA_SUCCESS &&
                d->cuStreamWaitValue32_v2(cr_session_stream(s, 0)->obj, g->base, 0,
                                          CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS) {
                g->words = p;
                hf->gates = g;
            }
        }
        if (!hf->gates) {
            CR_DEBUG("session %llu: host functions hold the driver's callback thread (the "
                     "device cannot wait on host memory here)",
                     (unsigned long long)cr_session_id(s));
            if (p)
                d->cuMemFreeHost(p);
            free(g);
        }
    }
    struct cr_gates_s *g = hf->gates;
    if (!g)
        return NULL;
    if (!stream->gate) {
        if (g->used == GATES)
            return NULL;
        stream->gate = ++g->used;
    }
    *dev = g->base + (stream->gate - 1) * sizeof *g->words;
    return &g->words[stream->gate - 1];
}

/* Call ids the server gives a graph's host nodes at each launch (a launch replays one
 * request for all of them): above every id a client counts to. */
#define HOST_NODE_CALL_IDS (1ull << 62)
static uint64_t next_host_node_call = HOST_NODE_CALL_IDS; /* atomic */

/* [stream] (call id: the client's registration), or [stream, host id] for a graph's host
 * node, which the client keeps under that id */
void cr_srv_cuLaunchHostFunc(cr_request_t *req)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    uint64_t sid, host_id = 0;
    if ((req->argc != 1 && req->argc != 2) || cr_arg_u64(req, 0, &sid) ||
        (req->argc == 2 && (cr_arg_u64(req, 1, &host_id) || host_id == 0))) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    cr_handle_t *stream = cr_session_stream(s, sid);
    host_funcs_t *hf = stream ? host_funcs(s, 1) : NULL;
    host_func_t *h = hf ? calloc(1, sizeof *h) : NULL;
    if (!h) {
        cr_request_finish(req, stream ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_HANDLE);
        return;
    }
    h->session = s;
    h->funcs = hf;
    h->host_id = host_id;
    h->call_id =
        host_id ? __atomic_fetch_add(&next_host_node_call, 1, __ATOMIC_RELAXED) : req->hdr.call_id;
    h->refs = 1;
    cr_session_ref(s);
    cr_session_stream_prepare(s, stream);
    CUdeviceptr gate_dev;
    h->gate = stream_gate(s, hf, stream, &gate_dev);
    CUresult r;
    if (!h->gate) {
        r = d->cuLaunchHostFunc(stream->obj, host_func_hold, h);
        if (r != CUDA_SUCCESS)
            host_func_unref(h);
        cr_request_finish(req, r);
        return;
    }
    /* h may be gone as soon as the driver has it: what comes after uses these */
    uint32_t *gate = h->gate, count = h->count = ++stream->gate_count;
    h->refs = 2; /* the driver's call, and the answer */
    /* listed before the driver may run it: the answer can come back at once */
    pthread_mutex_lock(&hf->lock);
    int open_now = hf->closed || cr_session_closing(s) ||
                   cr_idmap_put(&hf->gated, h->call_id, (uint64_t)(uintptr_t)h);
    pthread_mutex_unlock(&hf->lock);
    r = d->cuLaunchHostFunc(stream->obj, host_func_ask, h);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_lock(&hf->lock);
        int listed = !open_now && cr_idmap_remove(&hf->gated, h->call_id, NULL);
        pthread_mutex_unlock(&hf->lock);
        if (listed || open_now) /* no answer will come (else the client's end took it) */
            host_func_unref(h);
        host_func_unref(h);     /* nor the driver's call */
        gate_open(gate, count); /* later host functions of the stream do not wait for it */
        cr_request_finish(req, r);
        return;
    }
    if (open_now) { /* nobody will answer */
        gate_open(gate, count);
        host_func_unref(h);
    }
    /* the stream goes on once the client answered; a failure here leaves it open */
    if ((r = d->cuStreamWaitValue32_v2(stream->obj, gate_dev, count, CU_STREAM_WAIT_VALUE_GEQ)) !=
        CUDA_SUCCESS)
        CR_WARN("session %llu: a host function's stream cannot wait for it: %s",
                (unsigned long long)cr_session_id(s), cr_cuda_error_name(r));
    cr_request_finish(req, r);
}

void cr_host_func_done(cr_session_t *s, uint64_t call_id)
{
    uint64_t v;
    host_funcs_t *hf = host_funcs(s, 0);
    if (!hf) /* it ran none: nothing to answer */
        return;
    pthread_mutex_lock(&hf->lock);
    int gated = cr_idmap_remove(&hf->gated, call_id, &v);
    if (!gated) { /* the host function holds the driver's thread: it waits for this */
        cr_idmap_put(&hf->acks, call_id, 1);
        pthread_cond_broadcast(&hf->cond);
    }
    pthread_mutex_unlock(&hf->lock);
    if (!gated)
        return;
    host_func_t *h = (host_func_t *)(uintptr_t)v;
    gate_open(h->gate, h->count);
    host_func_unref(h);
}

void cr_srv_host_func_done(cr_request_t *req)
{
    cr_host_func_done(req->session, req->hdr.call_id);
    cr_request_free(req);
}

void cr_host_funcs_open_all(cr_session_t *s)
{
    host_funcs_t *hf = host_funcs(s, 0);
    if (!hf)
        return;
    pthread_mutex_lock(&hf->lock);
    hf->closed = 1; /* what holds the driver's thread returns */
    pthread_cond_broadcast(&hf->cond);
    pthread_mutex_unlock(&hf->lock);
    for (;;) {
        size_t pos = 0;
        uint64_t id, v;
        pthread_mutex_lock(&hf->lock);
        int found = cr_idmap_next(&hf->gated, &pos, &id, &v);
        if (found)
            cr_idmap_remove(&hf->gated, id, NULL);
        pthread_mutex_unlock(&hf->lock);
        if (!found)
            return;
        host_func_t *h = (host_func_t *)(uintptr_t)v;
        gate_open(h->gate, h->count);
        host_func_unref(h);
    }
}

void cr_host_func_gates_free(cr_session_t *s)
{
    host_funcs_t *hf = host_funcs(s, 0);
    if (!hf)
        return;
    __atomic_store_n((host_funcs_t **)cr_session_slot(s, CR_SLOT_HOST_FUNCS), NULL,
                     __ATOMIC_RELEASE);
    if (hf->gates) {
        cr_session_backend(s)->d.cuMemFreeHost(hf->gates->words);
        free(hf->gates);
    }
    cr_idmap_free(&hf->gated);
    cr_idmap_free(&hf->acks);
    pthread_mutex_destroy(&hf->lock);
    pthread_cond_destroy(&hf->cond);
    free(hf);
}

/* --- occupancy ------------------------------------------------------------------------------ */

/* The client evaluated its dynamic-shared-memory callback for block sizes 32..1024; the
 * driver's callback reads that table (thread-local: one query per thread at a time). */
static __thread const uint64_t *smem_table;

static size_t smem_for_block(int block_size)
{
    int i = block_size <= 32 ? 0 : (block_size + 31) / 32 - 1;
    return smem_table[i > 31 ? 31 : i];
}

void cr_srv_cuOccupancyMaxPotentialBlockSizeWithFlags(cr_request_t *req)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    uint64_t fid, table[32], flags;
    int64_t limit;
    const msgpack_object_array *smem;
    if (req->argc != 4 || cr_arg_u64(req, 0, &fid) || cr_arg_array(req, 1, &smem) ||
        smem->size != 32 || cr_arg_i64(req, 2, &limit) || cr_arg_u64(req, 3, &flags)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    for (int i = 0; i < 32; i++)
        if (cr_obj_u64(&smem->ptr[i], &table[i])) {
            cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
            return;
        }
    CUfunction f = cr_session_handle(s, CR_HT_CUfunc, fid);
    if (!f) {
        cr_request_finish(req, CUDA_ERROR_INVALID_HANDLE);
        return;
    }
    int min_grid = 0, block = 0;
    smem_table = table;
    CUresult r = d->cuOccupancyMaxPotentialBlockSizeWithFlags
                     ? d->cuOccupancyMaxPotentialBlockSizeWithFlags(
                           &min_grid, &block, f, smem_for_block, 0, (int)limit, (unsigned)flags)
                     : CUDA_ERROR_NOT_SUPPORTED;
    smem_table = NULL;
    if (r != CUDA_SUCCESS) {
        cr_request_finish(req, r);
        return;
    }
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 2) == 0) {
        msgpack_pack_int(&reply.pk, min_grid);
        msgpack_pack_int(&reply.pk, block);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}
