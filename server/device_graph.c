/* The driver's own graph for an executable graph.
 *
 * graph.c keeps a graph as the requests its nodes stand for and can replay them one by
 * one; when every node is a kernel, a memset, a device-to-device copy, an event record or
 * wait (or empty), it builds one of these instead at the first launch: the same requests,
 * checked as their handlers check them (cr_launch_parse for kernels: the session's
 * function, its exact layout, attributes its tenant may have), added in their order with
 * the edges graph.c keeps (so that branches may overlap, as in the driver's graph the
 * program would have made), and instantiated. A launch is then one driver call, admitted
 * and measured by the scheduler as one unit.
 *
 * What a replay checks at every launch is checked here before every launch too, from what
 * was recorded when the nodes were added: each function and event still the session's and
 * the same object (a module unloaded and another loaded must not run through a stale
 * node), each memset's and copy's memory still the session's. Kernel parameters were
 * copied by the driver when their node was added, as the requests had them.
 *
 * A node's new arguments (cuGraphExec*SetParams, cuGraphExecUpdate) and its turning off
 * and on reach the executable graph in place (cuGraphExecKernelNodeSetParams and the like,
 * cuGraphNodeSetEnabled), checked as at addition; what the driver cannot take in place (a
 * kernel node with attributes) makes graph.c build again. Turned-off nodes are in the
 * graph, turned off, and their checks wait until they are turned on.
 *
 * Work it does not take: host functions (the client runs them), cuLaunchKernelEx
 * attributes that name events, memsets and copies of nothing; graph.c replays those graphs.
 * Launch attributes the driver takes for launches only and that only allow more overlap
 * or state a preference are left out of kernel nodes (launch_only); edges with data (a
 * programmatic edge between kernels, and those a captured launch that allows programmatic
 * overlap has from the kernels it follows, split_deps) are added to a kernel node after
 * it, when the driver has the call for them.
 *
 * Conditional nodes: their handles are made against a driver graph before any node names
 * them (an anchor, one per graph.c graph that has handles), and the node must be in the
 * graph the handle was made in. The driver numbers a graph's handles 1, 2, ... as they are
 * made, and lets a graph be instantiated only while no other executable graph of it lives,
 * so every build makes a driver graph of its own and the anchor's handles in it again, in
 * the same order (the same numbers, checked), then its nodes, and its conditional nodes'
 * bodies' nodes in the bodies the driver made for them. Such a driver's graph takes no
 * change in place (graph.c builds it again).
 *
 * Threads: the session's executor only (graph.c's discipline). */
#include "device_graph.h"

#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "cr_opcodes.h"
#include "handlers.h"
#include "log.h"
#include "scheduler.h"

typedef enum { CHECK_FUNCTION, CHECK_EVENT, CHECK_MEMORY } check_kind_t;

typedef struct {
    check_kind_t kind;
    size_t node;     /* the graph.c node it is for */
    uint64_t id;     /* a function's or event's id; a memory range's start */
    const void *obj; /* the function or event it named */
    uint64_t len;    /* a memory range's length */
} check_t;

/* A node's checks, as many for every request of its kind (a memset 1, a copy 2). */
typedef struct {
    check_t c[2];
    unsigned n;
} node_checks_t;

/* What became of a graph.c node. */
typedef struct {
    CUgraphNode node; /* NULL: none (a hidden or destroyed graph.c node) */
    CUgraph *bodies;  /* a conditional node's, the driver's array */
    unsigned nbodies;
    uint8_t kind;    /* KERNEL, MEMORY, RECORD or WAIT below; 0: empty */
    uint8_t plain;   /* a kernel node without attributes: new arguments go in place */
    uint8_t enabled; /* turned on: its checks count */
    uint32_t check;  /* its checks: [check, check + checks) */
    uint32_t checks;
} dnode_t;

enum { KERNEL = 1, MEMORY, RECORD, WAIT };

struct cr_device_graph {
    const cr_backend_t *backend;
    uint64_t flags;
    CUgraph graph;  /* its nodes are what the executable graph's updates name */
    CUgraph target; /* where nodes are added now: the graph, or a conditional node's body */
    cr_graph_anchor_t *anchor; /* its handles are in graph too (the first nhandles) */
    size_t nhandles;
    CUgraphExec exec;
    CUgraphNode *deps; /* what the node being added depends on */
    size_t ndeps, deps_cap;
    size_t nodes, kernels;
    dnode_t *map; /* by graph.c node index */
    size_t map_count;
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

#define MAX_ANCHOR_HANDLES 4096 /* conditional handles of one graph */

typedef struct {
    uint64_t value;
    unsigned dflt, flags;
    int taken; /* a node of the graph has it */
} anchor_handle_t;

struct cr_graph_anchor {
    unsigned refs;
    unsigned execs; /* live executable graphs instantiated from its graph */
    const cr_backend_t *backend;
    CUgraph graph;
    anchor_handle_t *handles;
    size_t nhandles, cap;
};

cr_graph_anchor_t *cr_graph_anchor_new(cr_session_t *s)
{
    const cr_backend_t *b = cr_session_backend(s);
    if (!b->d.cuGraphCreate || !b->d.cuGraphDestroy || !b->d.cuGraphConditionalHandleCreate ||
        !b->d.cuGraphAddNode_v2 || !b->d.cuGraphDestroyNode)
        return NULL;
    cr_graph_anchor_t *a = calloc(1, sizeof *a);
    if (!a || b->d.cuGraphCreate(&a->graph, 0) != CUDA_SUCCESS) {
        free(a);
        return NULL;
    }
    a->refs = 1;
    a->backend = b;
    return a;
}

void cr_graph_anchor_ref(cr_graph_anchor_t *a)
{
    a->refs++;
}

void cr_graph_anchor_unref(cr_graph_anchor_t *a)
{
    if (!a || --a->refs > 0)
        return;
    a->backend->d.cuGraphDestroy(a->graph);
    free(a->handles);
    free(a);
}

CUresult cr_graph_anchor_handle(cr_graph_anchor_t *a, unsigned dflt, unsigned flags,
                                uint64_t *handle)
{
    if (flags & ~CU_GRAPH_COND_ASSIGN_DEFAULT)
        return CUDA_ERROR_INVALID_VALUE;
    if (a->nhandles >= MAX_ANCHOR_HANDLES ||
        cr_array_room((void **)&a->handles, &a->cap, a->nhandles, sizeof *a->handles))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUgraphConditionalHandle h;
    CUresult r =
        a->backend->d.cuGraphConditionalHandleCreate(&h, a->graph, a->backend->ctx, dflt, flags);
    if (r == CUDA_SUCCESS) {
        a->handles[a->nhandles++] = (anchor_handle_t){h, dflt, flags, 0};
        *handle = h;
    }
    return r;
}

static anchor_handle_t *anchor_find(const cr_graph_anchor_t *a, uint64_t handle)
{
    for (size_t i = 0; a && i < a->nhandles; i++)
        if (a->handles[i].value == handle)
            return &a->handles[i];
    return NULL;
}

int cr_graph_anchor_owns(const cr_graph_anchor_t *a, size_t count, uint64_t handle)
{
    const anchor_handle_t *h = anchor_find(a, handle);
    return h && (size_t)(h - a->handles) < count;
}

size_t cr_graph_anchor_count(const cr_graph_anchor_t *a)
{
    return a ? a->nhandles : 0;
}

int cr_graph_anchor_taken(const cr_graph_anchor_t *a, uint64_t handle)
{
    const anchor_handle_t *h = anchor_find(a, handle);
    return h && h->taken;
}

int cr_graph_anchor_unused(const cr_graph_anchor_t *a)
{
    for (size_t i = 0; a && i < a->nhandles; i++)
        if (!a->handles[i].taken)
            return 1;
    return 0;
}

void cr_graph_anchor_mark(cr_graph_anchor_t *a, uint64_t handle, int taken)
{
    anchor_handle_t *h = anchor_find(a, handle);
    if (h)
        h->taken = taken;
}

int cr_graph_anchor_take_exec(cr_graph_anchor_t *a)
{
    if (a->execs)
        return -1;
    a->execs++;
    cr_graph_anchor_ref(a);
    return 0;
}

void cr_graph_anchor_drop_exec(cr_graph_anchor_t *a)
{
    a->execs--;
    cr_graph_anchor_unref(a);
}

/* Makes the anchor's first `count` handles in `graph`, in their order: CUDA_SUCCESS when the
 * driver numbers each as it did in the anchor (device code names them by those numbers). */
static CUresult anchor_replay(const cr_graph_anchor_t *a, size_t count, CUgraph graph)
{
    const cr_backend_t *b = a->backend;
    for (size_t i = 0; i < count && i < a->nhandles; i++) {
        const anchor_handle_t *h = &a->handles[i];
        CUgraphConditionalHandle made;
        CUresult r = b->d.cuGraphConditionalHandleCreate(&made, graph, b->ctx, h->dflt, h->flags);
        if (r != CUDA_SUCCESS)
            return r;
        if (made != h->value) {
            CR_WARN("graph: the driver numbered a conditional handle %llu in a new graph, %llu "
                    "before: graphs with conditional nodes cannot run",
                    (unsigned long long)made, (unsigned long long)h->value);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    return CUDA_SUCCESS;
}

cr_device_graph_t *cr_device_graph_new(cr_session_t *s, uint64_t flags, size_t nodes,
                                       cr_graph_anchor_t *anchor, size_t handles)
{
    const cr_backend_t *b = cr_session_backend(s);
    const cr_driver_t *d = &b->d;
    if (!d->cuGraphCreate || !d->cuGraphAddKernelNode_v2 || !d->cuGraphAddMemsetNode ||
        !d->cuGraphAddMemcpyNode || !d->cuGraphAddEventRecordNode || !d->cuGraphAddEventWaitNode ||
        !d->cuGraphKernelNodeSetAttribute || !d->cuGraphInstantiateWithFlags || !d->cuGraphLaunch ||
        !d->cuGraphExecDestroy || !d->cuGraphDestroy || !d->cuGraphNodeSetEnabled ||
        !d->cuGraphExecKernelNodeSetParams_v2 || !d->cuGraphExecMemsetNodeSetParams ||
        !d->cuGraphExecMemcpyNodeSetParams || !d->cuGraphExecEventRecordNodeSetEvent ||
        !d->cuGraphExecEventWaitNodeSetEvent)
        return NULL;
    cr_device_graph_t *g = calloc(1, sizeof *g);
    if (!g || !(g->map = calloc(nodes ? nodes : 1, sizeof *g->map))) {
        free(g);
        return NULL;
    }
    g->backend = b;
    g->flags = flags;
    g->map_count = nodes;
    if (d->cuGraphCreate(&g->graph, 0) != CUDA_SUCCESS) {
        g->graph = NULL;
        cr_device_graph_free(g);
        return NULL;
    }
    g->target = g->graph;
    if (anchor) {
        cr_graph_anchor_ref(anchor);
        g->anchor = anchor;
        g->nhandles = handles;
        if (anchor_replay(anchor, handles, g->graph) != CUDA_SUCCESS) {
            cr_device_graph_free(g);
            return NULL;
        }
    }
    return g;
}

static void check_note(node_checks_t *nc, check_kind_t kind, uint64_t id, const void *obj,
                       uint64_t len)
{
    nc->c[nc->n++] = (check_t){kind, 0, id, obj, len};
}

/* Node `index` is now `node` of this kind (0: empty), with these checks. */
static CUresult added(cr_device_graph_t *g, size_t index, CUgraphNode node, uint8_t kind,
                      const node_checks_t *nc)
{
    for (unsigned i = 0; i < nc->n; i++)
        if (cr_array_room((void **)&g->checks, &g->cap, g->nchecks + i, sizeof *g->checks))
            return CUDA_ERROR_OUT_OF_MEMORY;
    dnode_t *m = &g->map[index];
    *m = (dnode_t){node, NULL, 0, kind, 0, 1, (uint32_t)g->nchecks, nc->n};
    for (unsigned i = 0; i < nc->n; i++) {
        g->checks[g->nchecks] = nc->c[i];
        g->checks[g->nchecks++].node = index;
    }
    if (kind) /* work */
        g->nodes++;
    return CUDA_SUCCESS;
}

/* A node's checks replaced by those of its new arguments (as many). */
static void rechecked(cr_device_graph_t *g, const dnode_t *m, const node_checks_t *nc)
{
    for (unsigned i = 0; i < nc->n && i < m->checks; i++) {
        size_t node = g->checks[m->check + i].node;
        g->checks[m->check + i] = nc->c[i];
        g->checks[m->check + i].node = node;
    }
}

/* The driver's kernel node for a parsed launch (params point into l). */
static CUDA_KERNEL_NODE_PARAMS kernel_params(const cr_device_graph_t *g, cr_session_t *s,
                                             const cr_launch_t *l)
{
    /* cudart names kernels by their CUkernel; the driver's node takes one in `kern` */
    int is_kernel = cr_session_handle(s, CR_HT_CUkern, l->function_id) != NULL;
    return (CUDA_KERNEL_NODE_PARAMS){
        .func = is_kernel ? NULL : l->f,
        .gridDimX = l->grid[0],
        .gridDimY = l->grid[1],
        .gridDimZ = l->grid[2],
        .blockDimX = l->block[0],
        .blockDimY = l->block[1],
        .blockDimZ = l->block[2],
        .sharedMemBytes = l->shared,
        .kernelParams = l->params,
        .kern = is_kernel ? (CUkernel)l->f : NULL,
        .ctx = is_kernel ? g->backend->ctx : NULL,
    };
}

/* Launch attributes the driver takes for launches only (its header: "valid for
 * launches"), which a kernel node does without: programmatic stream serialization (the
 * node's edges from the kernels it follows become programmatic ones instead, split_deps),
 * a shared-memory carveout preference. Captured launches carry them. */
static int launch_only(CUlaunchAttributeID id)
{
    return id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ||
           id == CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
}

/* 1 when launch l allows programmatic overlap with the kernel before it. */
static int programmatic(const cr_launch_t *l)
{
    for (unsigned i = 0; i < l->nattrs; i++)
        if (l->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
            l->attrs[i].value.programmaticStreamSerializationAllowed)
            return 1;
    return 0;
}

/* Splits the kernel node's dependencies (g->deps, graph.c's `deps`) into those it is added
 * after (left in g->deps) and edges with data, added once it is (*from, *data, *n; free
 * them): the data graph.c kept (`edges`, NULL: none), and for a launch that allows
 * programmatic overlap, a programmatic edge from each kernel it follows (what we take the
 * driver to make of such a launch when it captures it; not yet seen on a GPU). Without the
 * driver's call for such edges every edge stays whole. */
static CUresult split_deps(cr_device_graph_t *g, const uint32_t *deps, const CUgraphEdgeData *edges,
                           int pdl, CUgraphNode **from, CUgraphEdgeData **data, size_t *n)
{
    *from = NULL;
    *data = NULL;
    *n = 0;
    if (!g->backend->d.cuGraphAddDependencies_v2 || (!edges && !pdl) || !g->ndeps)
        return CUDA_SUCCESS;
    if (!(*from = malloc(g->ndeps * sizeof **from)) || !(*data = malloc(g->ndeps * sizeof **data)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t kept = 0;
    for (size_t i = 0; i < g->ndeps; i++) {
        CUgraphEdgeData e = edges ? edges[i] : (CUgraphEdgeData){0};
        if (!e.type && !e.from_port && pdl && g->map[deps[i]].kind == KERNEL)
            e = (CUgraphEdgeData){.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,
                                  .type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC};
        if (e.type || e.from_port) {
            (*from)[*n] = g->deps[i];
            (*data)[(*n)++] = e;
        } else {
            g->deps[kept++] = g->deps[i];
        }
    }
    g->ndeps = kept;
    return CUDA_SUCCESS;
}

static CUresult add_kernel(cr_device_graph_t *g, size_t index, cr_request_t *req,
                           const uint32_t *deps, const CUgraphEdgeData *edges)
{
    const cr_driver_t *d = &g->backend->d;
    cr_launch_t l;
    CUresult r = cr_launch_parse(req, &l);
    if (r != CUDA_SUCCESS)
        return r;
    if (l.names_events) { /* the events would be recorded by a node the server cannot check */
        cr_launch_clear(&l);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    CUDA_KERNEL_NODE_PARAMS p = kernel_params(g, req->session, &l);
    CUgraphNode node, *from;
    CUgraphEdgeData *data;
    size_t nedges;
    r = split_deps(g, deps, edges, programmatic(&l), &from, &data, &nedges);
    if (r == CUDA_SUCCESS)
        r = d->cuGraphAddKernelNode_v2(&node, g->target, g->deps, g->ndeps, &p);
    for (size_t i = 0; r == CUDA_SUCCESS && i < nedges; i++)
        r = d->cuGraphAddDependencies_v2(g->target, &from[i], &node, &data[i], 1);
    free(from);
    free(data);
    for (unsigned i = 0; r == CUDA_SUCCESS && i < l.nattrs; i++)
        if (l.attrs[i].id != CU_LAUNCH_ATTRIBUTE_IGNORE && !launch_only(l.attrs[i].id))
            r = d->cuGraphKernelNodeSetAttribute(node, l.attrs[i].id, &l.attrs[i].value);
    if (r == CUDA_SUCCESS && l.cooperative) {
        CUkernelNodeAttrValue v = {.cooperative = 1};
        r = d->cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v);
    }
    node_checks_t nc = {.n = 0};
    check_note(&nc, CHECK_FUNCTION, l.function_id, l.f, 0);
    int plain = !l.nattrs && !l.cooperative;
    cr_launch_clear(&l);
    if (r == CUDA_SUCCESS)
        r = added(g, index, node, KERNEL, &nc);
    if (r == CUDA_SUCCESS) {
        g->map[index].plain = (uint8_t)plain;
        g->kernels++;
    }
    return r;
}

/* A memset's or device copy's parameters as the driver's node takes them, and its checks:
 * its memory must be the session's now. */
typedef struct {
    int copy;
    CUDA_MEMCPY3D c;
    CUDA_MEMSET_NODE_PARAMS m;
} memory_op_t;

static CUresult memory_op(cr_request_t *req, memory_op_t *op, node_checks_t *nc)
{
    uint16_t opcode = req->hdr.opcode;
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
        check_note(nc, CHECK_MEMORY, ext[i].start, NULL, ext[i].len);
    }
    if (n == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    memset(op, 0, sizeof *op);
    if ((op->copy = opcode == CR_OP_cuMemcpyDtoDAsync_v2)) {
        op->c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        op->c.srcDevice = v[1];
        op->c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        op->c.dstDevice = v[0];
        op->c.WidthInBytes = v[2];
        op->c.Height = 1;
        op->c.Depth = 1;
        return CUDA_SUCCESS;
    }
    int two_d = opcode == CR_OP_cuMemsetD2D8Async || opcode == CR_OP_cuMemsetD2D16Async ||
                opcode == CR_OP_cuMemsetD2D32Async;
    unsigned elem = opcode == CR_OP_cuMemsetD32Async || opcode == CR_OP_cuMemsetD2D32Async   ? 4
                    : opcode == CR_OP_cuMemsetD16Async || opcode == CR_OP_cuMemsetD2D16Async ? 2
                                                                                             : 1;
    uint64_t value = two_d ? v[2] : v[1];
    op->m.dst = v[0];
    op->m.pitch = two_d ? v[1] : 0;
    op->m.value = (unsigned)(elem == 4 ? value : value & (elem == 2 ? 0xffffu : 0xffu));
    op->m.elementSize = elem;
    op->m.width = two_d ? v[3] : v[2];
    op->m.height = two_d ? v[4] : 1;
    return CUDA_SUCCESS;
}

static CUresult add_memory_op(cr_device_graph_t *g, size_t index, cr_request_t *req)
{
    const cr_driver_t *d = &g->backend->d;
    memory_op_t op;
    node_checks_t nc = {.n = 0};
    CUresult r = memory_op(req, &op, &nc);
    if (r != CUDA_SUCCESS)
        return r;
    CUgraphNode node;
    CUcontext ctx = g->backend->ctx;
    r = op.copy ? d->cuGraphAddMemcpyNode(&node, g->target, g->deps, g->ndeps, &op.c, ctx)
                : d->cuGraphAddMemsetNode(&node, g->target, g->deps, g->ndeps, &op.m, ctx);
    return r == CUDA_SUCCESS ? added(g, index, node, MEMORY, &nc) : r;
}

/* cuEventRecord(WithFlags) [event, stream, (flags)], cuStreamWaitEvent [stream, event, flags]:
 * a record or wait node, external or not. */
static CUresult add_event(cr_device_graph_t *g, size_t index, cr_request_t *req)
{
    const cr_driver_t *d = &g->backend->d;
    int wait = req->hdr.opcode == CR_OP_cuStreamWaitEvent;
    uint64_t id, flags = 0;
    uint64_t external = wait ? CU_EVENT_WAIT_EXTERNAL : CU_EVENT_RECORD_EXTERNAL;
    if (cr_arg_u64(req, wait ? 1 : 0, &id) ||
        (req->argc > 2 && (cr_arg_u64(req, 2, &flags) || (flags & ~external))))
        return CUDA_ERROR_INVALID_VALUE;
    CUevent ev = cr_session_handle(req->session, CR_HT_CUevent, id);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    CUgraphNode node;
    CUresult r = wait ? d->cuGraphAddEventWaitNode(&node, g->target, g->deps, g->ndeps, ev)
                      : d->cuGraphAddEventRecordNode(&node, g->target, g->deps, g->ndeps, ev);
    node_checks_t nc = {.n = 0};
    check_note(&nc, CHECK_EVENT, id, ev, 0);
    return r == CUDA_SUCCESS ? added(g, index, node, wait ? WAIT : RECORD, &nc) : r;
}

/* g->deps: the driver's nodes of these graph.c nodes, all added before. */
static CUresult deps_of(cr_device_graph_t *g, const uint32_t *deps, uint32_t ndeps)
{
    if (ndeps > g->deps_cap) {
        CUgraphNode *d = realloc(g->deps, ndeps * sizeof *d);
        if (!d)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g->deps = d;
        g->deps_cap = ndeps;
    }
    for (uint32_t i = 0; i < ndeps; i++)
        if (deps[i] >= g->map_count || !(g->deps[i] = g->map[deps[i]].node))
            return CUDA_ERROR_INVALID_VALUE; /* graph.c keeps no edge to what is not here */
    g->ndeps = ndeps;
    return CUDA_SUCCESS;
}

CUresult cr_device_graph_add_empty(cr_device_graph_t *g, size_t index, const uint32_t *deps,
                                   uint32_t ndeps)
{
    if (g->exec || index >= g->map_count || g->map[index].node)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = deps_of(g, deps, ndeps);
    CUgraphNode node;
    if (r == CUDA_SUCCESS)
        r = g->backend->d.cuGraphAddEmptyNode(&node, g->target, g->deps, g->ndeps);
    node_checks_t none = {.n = 0};
    return r == CUDA_SUCCESS ? added(g, index, node, 0, &none) : r;
}

CUresult cr_device_graph_add(cr_device_graph_t *g, size_t index, cr_request_t *req, int enabled,
                             const uint32_t *deps, const CUgraphEdgeData *edges, uint32_t ndeps)
{
    if (g->exec || index >= g->map_count || g->map[index].node)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = deps_of(g, deps, ndeps);
    if (r != CUDA_SUCCESS)
        return r;
    switch (req->hdr.opcode) {
    case CR_OP_cuLaunchKernel:
    case CR_OP_cuLaunchKernelEx:
    case CR_OP_cuLaunchCooperativeKernel:
        r = add_kernel(g, index, req, deps, edges);
        break;
    case CR_OP_cuMemsetD8Async:
    case CR_OP_cuMemsetD16Async:
    case CR_OP_cuMemsetD32Async:
    case CR_OP_cuMemsetD2D8Async:
    case CR_OP_cuMemsetD2D16Async:
    case CR_OP_cuMemsetD2D32Async:
    case CR_OP_cuMemcpyDtoDAsync_v2:
        r = add_memory_op(g, index, req);
        break;
    case CR_OP_cuEventRecord:
    case CR_OP_cuEventRecordWithFlags:
    case CR_OP_cuStreamWaitEvent:
        r = add_event(g, index, req);
        break;
    default:
        r = CUDA_ERROR_NOT_SUPPORTED;
    }
    if (r == CUDA_SUCCESS && !enabled)
        g->map[index].enabled = 0; /* turned off once instantiated */
    return r;
}

CUresult cr_device_graph_add_conditional(cr_device_graph_t *g, size_t index, uint64_t handle,
                                         unsigned type, unsigned size, const uint32_t *deps,
                                         uint32_t ndeps)
{
    if (g->exec || !g->anchor || index >= g->map_count || g->map[index].node ||
        !cr_graph_anchor_owns(g->anchor, g->nhandles, handle))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = deps_of(g, deps, ndeps);
    if (r != CUDA_SUCCESS)
        return r;
    CUgraphNodeParams p = {.type = CU_GRAPH_NODE_TYPE_CONDITIONAL};
    p.conditional = (CUDA_CONDITIONAL_NODE_PARAMS){
        .handle = handle,
        .type = (CUgraphConditionalNodeType)type,
        .size = size,
        .ctx = g->backend->ctx,
    };
    CUgraphNode node;
    r = g->backend->d.cuGraphAddNode_v2(&node, g->target, g->deps, NULL, g->ndeps, &p);
    node_checks_t none = {.n = 0};
    if (r == CUDA_SUCCESS && (r = added(g, index, node, 0, &none)) == CUDA_SUCCESS) {
        g->map[index].bodies = p.conditional.phGraph_out;
        g->map[index].nbodies = size;
    }
    return r;
}

CUgraph cr_device_graph_enter(cr_device_graph_t *g, size_t index, unsigned body)
{
    CUgraph outer = g->target;
    /* no such body: nothing can be added until leave (the driver refuses a NULL graph) */
    g->target =
        index < g->map_count && body < g->map[index].nbodies ? g->map[index].bodies[body] : NULL;
    return outer;
}

void cr_device_graph_leave(cr_device_graph_t *g, CUgraph outer)
{
    g->target = outer;
}

CUresult cr_device_graph_instantiate(cr_device_graph_t *g)
{
    const cr_driver_t *d = &g->backend->d;
    if (g->exec)
        return CUDA_ERROR_INVALID_VALUE;
    /* node priorities are the only flag that changes how these nodes run */
    CUresult r = d->cuGraphInstantiateWithFlags(
        &g->exec, g->graph, g->flags & CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
    if (r != CUDA_SUCCESS) {
        g->exec = NULL;
        return r;
    }
    for (size_t i = 0; r == CUDA_SUCCESS && i < g->map_count; i++)
        if (g->map[i].node && !g->map[i].enabled)
            r = d->cuGraphNodeSetEnabled(g->exec, g->map[i].node, 0);
    return r;
}

CUresult cr_device_graph_update(cr_device_graph_t *g, size_t index, cr_request_t *req)
{
    const cr_driver_t *d = &g->backend->d;
    dnode_t *m = index < g->map_count ? &g->map[index] : NULL;
    if (!g->exec || !m || !m->node || g->anchor)
        return CUDA_ERROR_NOT_SUPPORTED;
    node_checks_t nc = {.n = 0};
    CUresult r;
    if (m->kind == KERNEL) {
        cr_launch_t l;
        if (!m->plain || req->hdr.opcode != CR_OP_cuLaunchKernel)
            return CUDA_ERROR_NOT_SUPPORTED; /* attributes stay with the node */
        if ((r = cr_launch_parse(req, &l)) != CUDA_SUCCESS)
            return r;
        CUDA_KERNEL_NODE_PARAMS p = kernel_params(g, req->session, &l);
        r = d->cuGraphExecKernelNodeSetParams_v2(g->exec, m->node, &p);
        check_note(&nc, CHECK_FUNCTION, l.function_id, l.f, 0);
        cr_launch_clear(&l);
    } else if (m->kind == MEMORY) {
        memory_op_t op;
        if ((r = memory_op(req, &op, &nc)) != CUDA_SUCCESS)
            return r;
        if (nc.n != m->checks)
            return CUDA_ERROR_NOT_SUPPORTED; /* a memset became a copy: graph.c refuses it */
        CUcontext ctx = g->backend->ctx;
        r = op.copy ? d->cuGraphExecMemcpyNodeSetParams(g->exec, m->node, &op.c, ctx)
                    : d->cuGraphExecMemsetNodeSetParams(g->exec, m->node, &op.m, ctx);
    } else if (m->kind == RECORD || m->kind == WAIT) {
        int wait = m->kind == WAIT;
        uint64_t id;
        if (wait != (req->hdr.opcode == CR_OP_cuStreamWaitEvent) ||
            cr_arg_u64(req, wait ? 1 : 0, &id))
            return CUDA_ERROR_NOT_SUPPORTED;
        CUevent ev = cr_session_handle(req->session, CR_HT_CUevent, id);
        if (!ev)
            return CUDA_ERROR_INVALID_HANDLE;
        r = wait ? d->cuGraphExecEventWaitNodeSetEvent(g->exec, m->node, ev)
                 : d->cuGraphExecEventRecordNodeSetEvent(g->exec, m->node, ev);
        check_note(&nc, CHECK_EVENT, id, ev, 0);
    } else {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (r == CUDA_SUCCESS)
        rechecked(g, m, &nc);
    return r;
}

CUresult cr_device_graph_enable(cr_device_graph_t *g, size_t index, int on)
{
    dnode_t *m = index < g->map_count ? &g->map[index] : NULL;
    if (!g->exec || !m || !m->node || g->anchor)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = g->backend->d.cuGraphNodeSetEnabled(g->exec, m->node, on ? 1 : 0);
    if (r == CUDA_SUCCESS)
        m->enabled = on ? 1 : 0;
    return r;
}

int cr_device_graph_current(const cr_device_graph_t *g, cr_session_t *s)
{
    for (size_t i = 0; i < g->nchecks; i++) {
        const check_t *c = &g->checks[i];
        if (!g->map[c->node].enabled) /* a node turned off runs nothing */
            continue;
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
        d->cuGraphDestroy(g->graph); /* its executable graph is the driver's own copy */
    cr_graph_anchor_unref(g->anchor);
    free(g->map);
    free(g->deps);
    free(g->checks);
    free(g);
}
