/* The driver's own graph for an executable graph.
 *
 * graph.c keeps a graph as the requests its nodes stand for and can replay them one by
 * one; when every node is a kernel, a memset, a device-to-device copy, an event record or
 * wait (or empty), it builds one of these instead at the first launch: the same requests,
 * checked as their handlers check them (cr_launch_parse for kernels: the session's
 * function, its exact layout, attributes its tenant may have), added in their order as a
 * chain of the driver's nodes, so they run one after the other as a replay runs them, and
 * instantiated. A launch is then one driver call, admitted and measured by the scheduler as
 * one unit.
 *
 * What a replay checks at every launch is checked here before every launch too, from what
 * was recorded when the nodes were added: each function and event still the session's and
 * the same object (a module unloaded and another loaded must not run through a stale
 * node), each memset's and copy's memory still the session's. Kernel parameters were
 * copied by the driver when their node was added, as the requests had them.
 *
 * Work it does not take: host functions (the client runs them), cuLaunchKernelEx
 * attributes that name events, memsets and copies of nothing; graph.c replays those graphs.
 *
 * Threads: the session's executor only (graph.c's discipline). */
#include "device_graph.h"

#include <stdlib.h>
#include <string.h>

#include "cr_opcodes.h"
#include "handlers.h"
#include "scheduler.h"

typedef enum { CHECK_FUNCTION, CHECK_EVENT, CHECK_MEMORY } check_kind_t;

typedef struct {
    check_kind_t kind;
    uint64_t id;     /* a function's or event's id; a memory range's start */
    const void *obj; /* the function or event it named */
    uint64_t len;    /* a memory range's length */
} check_t;

struct cr_device_graph {
    const cr_backend_t *backend;
    uint64_t flags;
    CUgraph graph; /* until instantiated */
    CUgraphExec exec;
    CUgraphNode last; /* the chain's end */
    size_t nodes, kernels;
    check_t *checks;
    size_t nchecks, cap;
};

int cr_memory_op_extents(uint16_t opcode, const uint64_t v[6], cr_extent_t out[2])
{
    uint64_t elem = 1;
    switch (opcode) {
    case CR_OP_cuMemsetD32Async:
        elem += 2; /* fall through */
    case CR_OP_cuMemsetD16Async:
        elem += 1;              /* fall through */
    case CR_OP_cuMemsetD8Async: /* [dst, value, count, stream] */
        if (v[2] > UINT64_MAX / elem)
            return -1;
        out[0] = (cr_extent_t){v[0], v[2] * elem};
        return 1;
    case CR_OP_cuMemsetD2D32Async:
        elem += 2; /* fall through */
    case CR_OP_cuMemsetD2D16Async:
        elem += 1;                  /* fall through */
    case CR_OP_cuMemsetD2D8Async: { /* [dst, pitch, value, width, height, stream] */
        if (v[3] > UINT64_MAX / elem)
            return -1;
        uint64_t row = v[3] * elem;
        if (v[4] > 1 && (v[1] < row || v[1] > (UINT64_MAX - row) / (v[4] - 1)))
            return -1;
        if (!v[4])
            return 0;
        out[0] = (cr_extent_t){v[0], v[1] * (v[4] - 1) + row};
        return 1;
    }
    case CR_OP_cuMemcpyDtoDAsync_v2: /* [dst, src, bytes, stream] */
        out[0] = (cr_extent_t){v[0], v[2]};
        out[1] = (cr_extent_t){v[1], v[2]};
        return 2;
    default:
        return 0;
    }
}

cr_device_graph_t *cr_device_graph_new(cr_session_t *s, uint64_t flags)
{
    const cr_backend_t *b = cr_session_backend(s);
    const cr_driver_t *d = &b->d;
    if (!d->cuGraphCreate || !d->cuGraphAddKernelNode_v2 || !d->cuGraphAddMemsetNode ||
        !d->cuGraphAddMemcpyNode || !d->cuGraphAddEventRecordNode || !d->cuGraphAddEventWaitNode ||
        !d->cuGraphKernelNodeSetAttribute || !d->cuGraphInstantiateWithFlags || !d->cuGraphLaunch ||
        !d->cuGraphExecDestroy || !d->cuGraphDestroy)
        return NULL;
    cr_device_graph_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->backend = b;
    g->flags = flags;
    if (d->cuGraphCreate(&g->graph, 0) != CUDA_SUCCESS) {
        free(g);
        return NULL;
    }
    return g;
}

static int check_add(cr_device_graph_t *g, check_kind_t kind, uint64_t id, const void *obj,
                     uint64_t len)
{
    if (g->nchecks == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        check_t *c = realloc(g->checks, cap * sizeof *c);
        if (!c)
            return -1;
        g->checks = c;
        g->cap = cap;
    }
    g->checks[g->nchecks++] = (check_t){kind, id, obj, len};
    return 0;
}

/* A node just added: the chain goes on from it. */
static CUresult chained(cr_device_graph_t *g, CUresult r, CUgraphNode node)
{
    if (r == CUDA_SUCCESS) {
        g->last = node;
        g->nodes++;
    }
    return r;
}

static CUresult add_kernel(cr_device_graph_t *g, cr_request_t *req)
{
    const cr_driver_t *d = &g->backend->d;
    cr_session_t *s = req->session;
    cr_launch_t l;
    CUresult r = cr_launch_parse(req, &l);
    if (r != CUDA_SUCCESS)
        return r;
    if (l.names_events) { /* the events would be recorded by a node the server cannot check */
        cr_launch_clear(&l);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    /* cudart names kernels by their CUkernel; the driver's node takes one in `kern` */
    int is_kernel = cr_session_handle(s, CR_HT_CUkern, l.function_id) != NULL;
    CUDA_KERNEL_NODE_PARAMS p = {
        .func = is_kernel ? NULL : l.f,
        .gridDimX = l.grid[0],
        .gridDimY = l.grid[1],
        .gridDimZ = l.grid[2],
        .blockDimX = l.block[0],
        .blockDimY = l.block[1],
        .blockDimZ = l.block[2],
        .sharedMemBytes = l.shared,
        .kernelParams = l.params,
        .kern = is_kernel ? (CUkernel)l.f : NULL,
        .ctx = is_kernel ? g->backend->ctx : NULL,
    };
    CUgraphNode node;
    r = d->cuGraphAddKernelNode_v2(&node, g->graph, g->last ? &g->last : NULL, g->last ? 1 : 0, &p);
    for (unsigned i = 0; r == CUDA_SUCCESS && i < l.nattrs; i++)
        if (l.attrs[i].id != CU_LAUNCH_ATTRIBUTE_IGNORE)
            r = d->cuGraphKernelNodeSetAttribute(node, l.attrs[i].id, &l.attrs[i].value);
    if (r == CUDA_SUCCESS && l.cooperative) {
        CUkernelNodeAttrValue v = {.cooperative = 1};
        r = d->cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v);
    }
    cr_launch_clear(&l);
    if (r == CUDA_SUCCESS && check_add(g, CHECK_FUNCTION, l.function_id, l.f, 0) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS)
        g->kernels++;
    return chained(g, r, node);
}

static CUresult add_memory_op(cr_device_graph_t *g, cr_request_t *req, uint16_t opcode)
{
    const cr_driver_t *d = &g->backend->d;
    uint64_t v[6] = {0};
    for (uint32_t i = 0; i < req->argc && i < 6; i++)
        if (cr_arg_u64(req, i, &v[i]))
            return CUDA_ERROR_INVALID_VALUE;
    cr_extent_t ext[2];
    int n = cr_memory_op_extents(opcode, v, ext);
    if (n < 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < n; i++) {
        if (!cr_session_owns(req->session, ext[i].start, ext[i].len))
            return CUDA_ERROR_INVALID_VALUE;
        if (!ext[i].len) /* the driver's nodes take no empty work; a replay does */
            return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (n == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraphNode node;
    CUresult r;
    CUcontext ctx = g->backend->ctx;
    const CUgraphNode *deps = g->last ? &g->last : NULL;
    size_t ndeps = g->last ? 1 : 0;
    if (opcode == CR_OP_cuMemcpyDtoDAsync_v2) {
        CUDA_MEMCPY3D c = {
            .srcMemoryType = CU_MEMORYTYPE_DEVICE,
            .srcDevice = v[1],
            .dstMemoryType = CU_MEMORYTYPE_DEVICE,
            .dstDevice = v[0],
            .WidthInBytes = v[2],
            .Height = 1,
            .Depth = 1,
        };
        r = d->cuGraphAddMemcpyNode(&node, g->graph, deps, ndeps, &c, ctx);
    } else {
        int two_d = opcode == CR_OP_cuMemsetD2D8Async || opcode == CR_OP_cuMemsetD2D16Async ||
                    opcode == CR_OP_cuMemsetD2D32Async;
        unsigned elem = opcode == CR_OP_cuMemsetD32Async || opcode == CR_OP_cuMemsetD2D32Async ? 4
                        : opcode == CR_OP_cuMemsetD16Async || opcode == CR_OP_cuMemsetD2D16Async
                            ? 2
                            : 1;
        uint64_t value = two_d ? v[2] : v[1];
        CUDA_MEMSET_NODE_PARAMS m = {
            .dst = v[0],
            .pitch = two_d ? v[1] : 0,
            .value = (unsigned)(elem == 4 ? value : value & (elem == 2 ? 0xffffu : 0xffu)),
            .elementSize = elem,
            .width = two_d ? v[3] : v[2],
            .height = two_d ? v[4] : 1,
        };
        r = d->cuGraphAddMemsetNode(&node, g->graph, deps, ndeps, &m, ctx);
    }
    for (int i = 0; r == CUDA_SUCCESS && i < n; i++)
        if (check_add(g, CHECK_MEMORY, ext[i].start, NULL, ext[i].len) != 0)
            r = CUDA_ERROR_OUT_OF_MEMORY;
    return chained(g, r, node);
}

/* cuEventRecord(WithFlags) [event, stream, (flags)], cuStreamWaitEvent [stream, event, flags] */
static CUresult add_event(cr_device_graph_t *g, cr_request_t *req, int wait)
{
    const cr_driver_t *d = &g->backend->d;
    uint64_t id;
    if (cr_arg_u64(req, wait ? 1 : 0, &id))
        return CUDA_ERROR_INVALID_VALUE;
    CUevent ev = cr_session_handle(req->session, CR_HT_CUevent, id);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    CUgraphNode node;
    const CUgraphNode *deps = g->last ? &g->last : NULL;
    size_t ndeps = g->last ? 1 : 0;
    CUresult r = wait ? d->cuGraphAddEventWaitNode(&node, g->graph, deps, ndeps, ev)
                      : d->cuGraphAddEventRecordNode(&node, g->graph, deps, ndeps, ev);
    if (r == CUDA_SUCCESS && check_add(g, CHECK_EVENT, id, ev, 0) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    return chained(g, r, node);
}

CUresult cr_device_graph_add(cr_device_graph_t *g, cr_request_t *req)
{
    if (!g->graph)
        return CUDA_ERROR_INVALID_VALUE;
    uint16_t opcode = req->hdr.opcode;
    switch (opcode) {
    case CR_OP_cuLaunchKernel:
    case CR_OP_cuLaunchKernelEx:
    case CR_OP_cuLaunchCooperativeKernel:
        return add_kernel(g, req);
    case CR_OP_cuMemsetD8Async:
    case CR_OP_cuMemsetD16Async:
    case CR_OP_cuMemsetD32Async:
    case CR_OP_cuMemsetD2D8Async:
    case CR_OP_cuMemsetD2D16Async:
    case CR_OP_cuMemsetD2D32Async:
    case CR_OP_cuMemcpyDtoDAsync_v2:
        return add_memory_op(g, req, opcode);
    case CR_OP_cuEventRecord:
        return add_event(g, req, 0);
    case CR_OP_cuEventRecordWithFlags: { /* a record node, external or not */
        uint64_t flags;
        return req->argc == 3 && !cr_arg_u64(req, 2, &flags) &&
                       (flags & ~(uint64_t)CU_EVENT_RECORD_EXTERNAL) == 0
                   ? add_event(g, req, 0)
                   : CUDA_ERROR_INVALID_VALUE;
    }
    case CR_OP_cuStreamWaitEvent: { /* a wait node, external or not */
        uint64_t flags;
        return req->argc == 3 && !cr_arg_u64(req, 2, &flags) &&
                       (flags & ~(uint64_t)CU_EVENT_WAIT_EXTERNAL) == 0
                   ? add_event(g, req, 1)
                   : CUDA_ERROR_INVALID_VALUE;
    }
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult cr_device_graph_instantiate(cr_device_graph_t *g)
{
    const cr_driver_t *d = &g->backend->d;
    if (!g->graph || g->exec)
        return CUDA_ERROR_INVALID_VALUE;
    /* node priorities are the only flag that changes how these nodes run */
    CUresult r = d->cuGraphInstantiateWithFlags(
        &g->exec, g->graph, g->flags & CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
    if (r != CUDA_SUCCESS)
        g->exec = NULL;
    else if (d->cuGraphDestroy(g->graph) == CUDA_SUCCESS) /* the executable graph is a copy */
        g->graph = NULL;
    return r;
}

int cr_device_graph_current(const cr_device_graph_t *g, cr_session_t *s)
{
    for (size_t i = 0; i < g->nchecks; i++) {
        const check_t *c = &g->checks[i];
        switch (c->kind) {
        case CHECK_FUNCTION: {
            CUfunction f;
            const cr_kernel_param_t *kp;
            uint32_t count;
            if (cr_session_kernel_params(s, c->id, &f, &kp, &count) != CUDA_SUCCESS || f != c->obj)
                return 0;
            break;
        }
        case CHECK_EVENT:
            if (cr_session_handle(s, CR_HT_CUevent, c->id) != c->obj)
                return 0;
            break;
        case CHECK_MEMORY:
            if (!cr_session_owns(s, c->id, c->len))
                return 0;
            break;
        }
    }
    return 1;
}

CUresult cr_device_graph_launch(cr_device_graph_t *g, cr_session_t *s, cr_handle_t *stream)
{
    const cr_driver_t *d = &g->backend->d;
    if (!g->exec)
        return CUDA_ERROR_INVALID_VALUE;
    cr_session_stream_prepare(s, stream);
    CUresult r = cr_sched_launch_begin(s, stream);
    if (r == CUDA_SUCCESS) {
        r = d->cuGraphLaunch(g->exec, stream->obj);
        cr_sched_launch_end(s, stream, r);
    }
    if (r == CUDA_SUCCESS && g->kernels)
        cr_session_count_launches(s, g->kernels);
    return r;
}

size_t cr_device_graph_nodes(const cr_device_graph_t *g, size_t *kernels)
{
    *kernels = g->kernels;
    return g->nodes;
}

void cr_device_graph_free(cr_device_graph_t *g)
{
    if (!g)
        return;
    const cr_driver_t *d = &g->backend->d;
    if (g->exec)
        d->cuGraphExecDestroy(g->exec); /* the driver lets launches under way finish */
    if (g->graph)
        d->cuGraphDestroy(g->graph);
    free(g->checks);
    free(g);
}
