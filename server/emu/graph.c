/* Graphs of the emulated device: the driver's graph API as far as the server builds graphs
 * for it (server/device_graph.c): kernel, memset, copy, empty, event record and event wait
 * nodes, instantiated and launched on a stream.
 *
 * A node may depend only on nodes added before it, so the order of addition is an order
 * every dependency allows; a launch submits the nodes in that order to the launch stream,
 * each as the call it stands for would be (a kernel as cuLaunchKernelEx with the node's
 * attributes, a memset as cuMemsetD2D*Async, a copy as cuMemcpy3DAsync), so they run one
 * after the other, checked as those calls check. Kernel parameters are copied when the node
 * is added, as the driver copies them. An executable graph is a copy of the nodes; it holds
 * no device state, so destroying it while its launches run is safe. Its kernel, memset and
 * copy nodes may be given new parameters and turned off and on, and its event nodes other
 * events, by the graph's node they copy, as the driver allows.
 *
 * Conditional nodes (cuGraphAddNode): handles are numbered 1, 2, ... in the order they are
 * made against a graph created by cuGraphCreate (its root: a body's handles are its
 * root's), as the driver numbers them (seen on driver 580), so a graph built again with its
 * handles made in the same order has the same handles. Each serves one conditional node;
 * instantiation refuses a handle that serves none (CUDA_ERROR_INVALID_VALUE, as the
 * driver). An executable graph holds the values (cr__cond_t), and device code of its
 * kernels sets them with cudaGraphSetConditional, which the PTX interpreter hands to
 * kernel.c for the launch's values. A launch waits for its stream, sets each handle that
 * has CU_GRAPH_COND_ASSIGN_DEFAULT to its default, and at a conditional node waits for the
 * stream, reads the value and runs the body it selects (IF, IF/ELSE, SWITCH) or runs the
 * body while it is non-zero (WHILE): the work before it has run, as on a GPU. Bodies are
 * graphs of their own, owned by their node; cuGraphDestroyNode takes a node (and its
 * bodies) out of its graph.
 *
 * Threads: like the driver's graphs, a graph and its executable graphs are used by one
 * thread at a time (the server's session executor). */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

#include "array.h"

#define MAX_NODE_ATTRS 16

typedef struct enode {
    CUgraphNodeType type;
    CUgraph owner;
    size_t index;               /* its place in its graph */
    const struct enode *origin; /* an executable graph's node: the graph's node it copies */
    int disabled;               /* an executable graph's node turned off: it runs nothing */
    /* a kernel */
    CUfunction f;
    unsigned grid[3], block[3], shared;
    uint8_t *params;
    uint32_t param_size;
    CUlaunchAttribute attrs[MAX_NODE_ATTRS];
    unsigned nattrs;
    /* a memset, a copy, an event record or wait */
    CUDA_MEMSET_NODE_PARAMS memset;
    CUDA_MEMCPY3D copy;
    CUevent event;
    /* a conditional */
    CUgraphConditionalNodeType cond_type;
    CUgraphConditionalHandle handle; /* 1..n in its root */
    unsigned size;                   /* its bodies */
    CUgraph *bodies;
} enode_t;

typedef struct {
    unsigned dflt, flags;
    int used; /* a conditional node of the root (or of a body in it) has it */
} ehandle_t;

typedef struct egraph {
    enode_t **nodes; /* NULL: a destroyed node's place */
    size_t count, cap;
    struct egraph *root; /* a body's: the graph made by cuGraphCreate it is in; NULL there */
    ehandle_t *handles;  /* the root's conditional handles, handle h at [h - 1]; an
                            executable graph's copy of them */
    size_t nhandles, handle_cap;
    cr__cond_t *cond; /* an executable graph's values, when it has handles */
} egraph_t;

static void graph_free(egraph_t *g);

static void node_free(enode_t *n)
{
    if (n) {
        for (unsigned i = 0; n->bodies && i < n->size; i++)
            graph_free((egraph_t *)n->bodies[i]);
        free(n->bodies);
        free(n->params);
        free(n);
    }
}

CUresult cr_emu_cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    CR__ENTER();
    if (!phGraph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    egraph_t *g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

static void graph_free(egraph_t *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->count; i++)
        node_free(g->nodes[i]);
    if (g->cond)
        cr__cond_unref(g->cond);
    free(g->handles);
    free(g->nodes);
    free(g);
}

CUresult cr_emu_cuGraphDestroy(CUgraph hGraph)
{
    CR__ENTER();
    if (!hGraph)
        return CUDA_ERROR_INVALID_VALUE;
    graph_free((egraph_t *)hGraph);
    return CUDA_SUCCESS;
}

/* Appends n (taken, freed on failure) to the graph after its dependencies, which must be
 * the graph's own nodes. */
static CUresult add(CUgraphNode *out, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                    enode_t *n)
{
    egraph_t *g = (egraph_t *)hGraph;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (!out || !g || (ndeps && !deps))
        goto fail;
    for (size_t i = 0; i < ndeps; i++)
        if (!deps[i] || ((enode_t *)deps[i])->owner != hGraph)
            goto fail;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (cr_array_room((void **)&g->nodes, &g->cap, g->count, sizeof *g->nodes))
        goto fail;
    n->owner = hGraph;
    n->index = g->count;
    g->nodes[g->count++] = n;
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
fail:
    node_free(n);
    return rc;
}

/* Edges after the nodes were added (the driver's graph of an executable graph whose edges
 * carry data: a programmatic edge between kernels). The nodes run in the order they were
 * added, which such an edge must keep (from a node added before); its data is checked as
 * NVIDIA's header states the driver's rules, and runs as a full dependency. */
CUresult cr_emu_cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
                                          const CUgraphNode *to, const CUgraphEdgeData *edgeData,
                                          size_t numDependencies)
{
    CR__ENTER();
    if (!hGraph || (numDependencies && (!from || !to)))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numDependencies; i++) {
        const enode_t *a = (const enode_t *)from[i], *b = (const enode_t *)to[i];
        CUgraphEdgeData e = edgeData ? edgeData[i] : (CUgraphEdgeData){0};
        int reserved = 0;
        for (size_t k = 0; k < sizeof e.reserved; k++)
            reserved |= e.reserved[k];
        int programmatic = e.type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
        if (!a || !b || a->owner != hGraph || b->owner != hGraph || a == b || e.to_port ||
            reserved || e.type > CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC ||
            e.from_port > CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER ||
            (e.from_port && a->type != CU_GRAPH_NODE_TYPE_KERNEL) ||
            (programmatic && (!e.from_port || b->type != CU_GRAPH_NODE_TYPE_KERNEL)))
            return CUDA_ERROR_INVALID_VALUE;
        if (a->index > b->index) /* the order of addition would not keep it */
            return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

static enode_t *node_new(CUgraphNodeType type)
{
    enode_t *n = calloc(1, sizeof *n);
    if (n)
        n->type = type;
    return n;
}

CUresult cr_emu_cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                        const CUgraphNode *dependencies, size_t numDependencies,
                                        const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    CR__ENTER();
    if (!nodeParams || (!nodeParams->func && !nodeParams->kern))
        return CUDA_ERROR_INVALID_VALUE;
    enode_t *n = node_new(CU_GRAPH_NODE_TYPE_KERNEL);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    const CUDA_KERNEL_NODE_PARAMS *p = nodeParams;
    n->f = p->func ? p->func : (CUfunction)p->kern; /* cuLaunchKernel takes either */
    n->grid[0] = p->gridDimX, n->grid[1] = p->gridDimY, n->grid[2] = p->gridDimZ;
    n->block[0] = p->blockDimX, n->block[1] = p->blockDimY, n->block[2] = p->blockDimZ;
    n->shared = p->sharedMemBytes;
    CUresult rc = cr__launch_params(n->f, p->kernelParams, p->extra, &n->params, &n->param_size);
    if (rc != CUDA_SUCCESS) {
        node_free(n);
        return rc;
    }
    return add(phGraphNode, hGraph, dependencies, numDependencies, n);
}

CUresult cr_emu_cuGraphKernelNodeSetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                              const CUkernelNodeAttrValue *value)
{
    CR__ENTER();
    enode_t *n = (enode_t *)hNode;
    if (!n || n->type != CU_GRAPH_NODE_TYPE_KERNEL || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) { /* valid for launches (or streams) only, as NVIDIA's header has them */
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        return CUDA_ERROR_INVALID_VALUE;
    default:
        break;
    }
    unsigned i = 0;
    while (i < n->nattrs && n->attrs[i].id != attr)
        i++;
    if (i == MAX_NODE_ATTRS)
        return CUDA_ERROR_INVALID_VALUE;
    n->attrs[i].id = attr;
    n->attrs[i].value = *value;
    if (i == n->nattrs)
        n->nattrs++;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies,
                                     const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    CR__ENTER();
    (void)ctx; /* the one context */
    if (!memsetParams || (memsetParams->elementSize != 1 && memsetParams->elementSize != 2 &&
                          memsetParams->elementSize != 4))
        return CUDA_ERROR_INVALID_VALUE;
    enode_t *n = node_new(CU_GRAPH_NODE_TYPE_MEMSET);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->memset = *memsetParams;
    return add(phGraphNode, hGraph, dependencies, numDependencies, n);
}

CUresult cr_emu_cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies,
                                     const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    CR__ENTER();
    (void)ctx;
    if (!copyParams)
        return CUDA_ERROR_INVALID_VALUE;
    enode_t *n = node_new(CU_GRAPH_NODE_TYPE_MEMCPY);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->copy = *copyParams;
    return add(phGraphNode, hGraph, dependencies, numDependencies, n);
}

CUresult cr_emu_cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                    const CUgraphNode *dependencies, size_t numDependencies)
{
    CR__ENTER();
    enode_t *n = node_new(CU_GRAPH_NODE_TYPE_EMPTY);
    return n ? add(phGraphNode, hGraph, dependencies, numDependencies, n)
             : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult add_event_node(CUgraphNode *out, CUgraph hGraph, const CUgraphNode *deps,
                               size_t ndeps, CUevent event, CUgraphNodeType type)
{
    if (!event)
        return CUDA_ERROR_INVALID_VALUE;
    enode_t *n = node_new(type);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->event = event;
    return add(out, hGraph, deps, ndeps, n);
}

CUresult cr_emu_cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies, size_t numDependencies,
                                          CUevent event)
{
    CR__ENTER();
    return add_event_node(phGraphNode, hGraph, dependencies, numDependencies, event,
                          CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult cr_emu_cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                        const CUgraphNode *dependencies, size_t numDependencies,
                                        CUevent event)
{
    CR__ENTER();
    return add_event_node(phGraphNode, hGraph, dependencies, numDependencies, event,
                          CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

void cr__cond_ref(cr__cond_t *c)
{
    __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

void cr__cond_unref(cr__cond_t *c)
{
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(c);
}

/* Values for these handles, each its default to start with. */
static cr__cond_t *cond_new(const ehandle_t *handles, size_t n)
{
    if (n > UINT32_MAX)
        return NULL;
    cr__cond_t *c = malloc(sizeof *c + n * sizeof c->v[0]);
    if (!c)
        return NULL;
    c->refs = 1;
    c->n = (uint32_t)n;
    for (size_t i = 0; i < n; i++)
        c->v[i] = handles[i].dflt;
    return c;
}

/* An executable copy of g's nodes (bodies too), each knowing the node it copies; NULL when
 * out of memory. */
static egraph_t *exec_copy(const egraph_t *g)
{
    egraph_t *e = calloc(1, sizeof *e);
    if (!e || (g->count && !(e->nodes = calloc(g->count, sizeof *e->nodes))))
        goto oom;
    for (; e->count < g->count; e->count++) {
        const enode_t *from = g->nodes[e->count];
        if (!from)
            continue;
        enode_t *n = malloc(sizeof *n);
        if (!n)
            goto oom;
        *n = *from;
        n->origin = from;
        n->params = NULL;
        n->bodies = NULL;
        e->nodes[e->count] = n;
        if (from->param_size && !(n->params = malloc(from->param_size)))
            goto oom;
        if (from->param_size)
            memcpy(n->params, from->params, from->param_size);
        if (from->bodies && !(n->bodies = calloc(from->size, sizeof *n->bodies)))
            goto oom;
        for (unsigned b = 0; from->bodies && b < from->size; b++)
            if (!(n->bodies[b] = (CUgraph)exec_copy((const egraph_t *)from->bodies[b])))
                goto oom;
    }
    e->cap = e->count;
    return e;
oom:
    graph_free(e);
    return NULL;
}

CUresult cr_emu_cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                            unsigned long long flags)
{
    CR__ENTER();
    const egraph_t *g = (const egraph_t *)hGraph;
    if (!phGraphExec || !g || (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < g->nhandles; i++)
        if (!g->handles[i].used)
            return CUDA_ERROR_INVALID_VALUE; /* CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED */
    egraph_t *e = exec_copy(g);
    if (!e || (g->nhandles && (!(e->handles = malloc(g->nhandles * sizeof *e->handles)) ||
                               !(e->cond = cond_new(g->handles, g->nhandles))))) {
        graph_free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (g->nhandles)
        memcpy(e->handles, g->handles, g->nhandles * sizeof *e->handles);
    e->nhandles = g->nhandles;
    *phGraphExec = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

static CUresult launch_node(const enode_t *n, CUstream stream, cr__cond_t *cond)
{
    switch (n->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        size_t size = n->param_size;
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, n->params, CU_LAUNCH_PARAM_BUFFER_SIZE,
                         &size, CU_LAUNCH_PARAM_END};
        CUlaunchConfig config = {
            .gridDimX = n->grid[0],
            .gridDimY = n->grid[1],
            .gridDimZ = n->grid[2],
            .blockDimX = n->block[0],
            .blockDimY = n->block[1],
            .blockDimZ = n->block[2],
            .sharedMemBytes = n->shared,
            .hStream = stream,
            .attrs = (CUlaunchAttribute *)n->attrs,
            .numAttrs = n->nattrs,
        };
        return cr__launch_graph_kernel(&config, n->f, extra, cond);
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS *m = &n->memset;
        size_t pitch = m->height > 1 ? m->pitch : m->width * m->elementSize;
        switch (m->elementSize) {
        case 1:
            return cr_emu_cuMemsetD2D8Async(m->dst, pitch, (unsigned char)m->value, m->width,
                                            m->height, stream);
        case 2:
            return cr_emu_cuMemsetD2D16Async(m->dst, pitch, (unsigned short)m->value, m->width,
                                             m->height, stream);
        default:
            return cr_emu_cuMemsetD2D32Async(m->dst, pitch, m->value, m->width, m->height, stream);
        }
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return cr_emu_cuMemcpy3DAsync_v2(&n->copy, stream);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cr_emu_cuEventRecord(n->event, stream);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cr_emu_cuStreamWaitEvent(stream, n->event, 0);
    default: /* empty */
        return CUDA_SUCCESS;
    }
}

static CUresult run_nodes(const egraph_t *e, CUstream stream, cr__cond_t *cond);

/* A conditional node: the work before it done, its value read, its body or bodies run. */
static CUresult run_conditional(const enode_t *n, CUstream stream, cr__cond_t *cond)
{
    for (;;) {
        CUresult rc = cr_emu_cuStreamSynchronize(stream);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (!cond || !n->handle || n->handle > cond->n)
            return CUDA_ERROR_INVALID_VALUE; /* instantiation made one value per handle */
        uint32_t v = __atomic_load_n(&cond->v[n->handle - 1], __ATOMIC_ACQUIRE);
        const egraph_t *body = NULL;
        switch (n->cond_type) {
        case CU_GRAPH_COND_TYPE_IF:
            body = v ? (egraph_t *)n->bodies[0] : n->size > 1 ? (egraph_t *)n->bodies[1] : NULL;
            break;
        case CU_GRAPH_COND_TYPE_SWITCH:
            body = v < n->size ? (egraph_t *)n->bodies[v] : NULL;
            break;
        default: /* WHILE */
            body = v ? (egraph_t *)n->bodies[0] : NULL;
        }
        if (!body)
            return CUDA_SUCCESS;
        if ((rc = run_nodes(body, stream, cond)) != CUDA_SUCCESS ||
            n->cond_type != CU_GRAPH_COND_TYPE_WHILE)
            return rc;
    }
}

static CUresult run_nodes(const egraph_t *e, CUstream stream, cr__cond_t *cond)
{
    for (size_t i = 0; i < e->count; i++) {
        const enode_t *n = e->nodes[i];
        if (!n || n->disabled)
            continue;
        CUresult rc = n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL ? run_conditional(n, stream, cond)
                                                                : launch_node(n, stream, cond);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    CR__ENTER();
    const egraph_t *e = (const egraph_t *)hGraphExec;
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    if (e->cond) { /* the defaults, once a launch before this one has set its last value */
        CUresult rc = cr_emu_cuStreamSynchronize(hStream);
        if (rc != CUDA_SUCCESS)
            return rc;
        for (size_t i = 0; i < e->nhandles; i++)
            if (e->handles[i].flags & CU_GRAPH_COND_ASSIGN_DEFAULT)
                __atomic_store_n(&e->cond->v[i], e->handles[i].dflt, __ATOMIC_RELEASE);
    }
    return run_nodes(e, hStream, e->cond);
}

CUresult cr_emu_cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    CR__ENTER();
    (void)hStream; /* nothing to place on the device ahead of a launch */
    return hGraphExec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_emu_cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CR__ENTER();
    if (!hGraphExec)
        return CUDA_ERROR_INVALID_VALUE;
    graph_free((egraph_t *)hGraphExec);
    return CUDA_SUCCESS;
}

/* The executable graph's copy of graph node hNode, of this type. */
static enode_t *exec_node(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraphNodeType type)
{
    const egraph_t *e = (const egraph_t *)hGraphExec;
    const enode_t *from = (const enode_t *)hNode;
    if (!e || !from || from->index >= e->count)
        return NULL;
    enode_t *n = e->nodes[from->index];
    return n->origin == from && n->type == type ? n : NULL;
}

CUresult cr_emu_cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    CR__ENTER();
    enode_t *n = exec_node(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_KERNEL);
    const CUDA_KERNEL_NODE_PARAMS *p = nodeParams;
    if (!n || !p || (!p->func && !p->kern))
        return CUDA_ERROR_INVALID_VALUE;
    CUfunction f = p->func ? p->func : (CUfunction)p->kern;
    uint8_t *params;
    uint32_t size;
    CUresult rc = cr__launch_params(f, p->kernelParams, p->extra, &params, &size);
    if (rc != CUDA_SUCCESS)
        return rc;
    free(n->params);
    n->params = params;
    n->param_size = size;
    n->f = f;
    n->grid[0] = p->gridDimX, n->grid[1] = p->gridDimY, n->grid[2] = p->gridDimZ;
    n->block[0] = p->blockDimX, n->block[1] = p->blockDimY, n->block[2] = p->blockDimZ;
    n->shared = p->sharedMemBytes;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                               const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                               CUcontext ctx)
{
    CR__ENTER();
    (void)ctx;
    enode_t *n = exec_node(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_MEMSET);
    if (!n || !memsetParams || memsetParams->elementSize != n->memset.elementSize)
        return CUDA_ERROR_INVALID_VALUE; /* the driver keeps the element size too */
    n->memset = *memsetParams;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                               const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    CR__ENTER();
    (void)ctx;
    enode_t *n = exec_node(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_MEMCPY);
    if (!n || !copyParams)
        return CUDA_ERROR_INVALID_VALUE;
    n->copy = *copyParams;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                      unsigned int isEnabled)
{
    CR__ENTER();
    const enode_t *from = (const enode_t *)hNode;
    enode_t *n = from ? exec_node(hGraphExec, hNode, from->type) : NULL;
    if (!n || (n->type != CU_GRAPH_NODE_TYPE_KERNEL && n->type != CU_GRAPH_NODE_TYPE_MEMSET &&
               n->type != CU_GRAPH_NODE_TYPE_MEMCPY))
        return CUDA_ERROR_INVALID_VALUE;
    n->disabled = !isEnabled;
    return CUDA_SUCCESS;
}

static CUresult set_event(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraphNodeType type,
                          CUevent event)
{
    enode_t *n = exec_node(hGraphExec, hNode, type);
    if (!n || !event)
        return CUDA_ERROR_INVALID_VALUE;
    n->event = event;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   CUevent event)
{
    CR__ENTER();
    return set_event(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}

CUresult cr_emu_cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                 CUevent event)
{
    CR__ENTER();
    return set_event(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}

/* --- conditional nodes --- */

static egraph_t *root_of(egraph_t *g)
{
    return g->root ? g->root : g;
}

CUresult cr_emu_cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
                                               CUgraph hGraph, CUcontext ctx,
                                               unsigned int defaultLaunchValue, unsigned int flags)
{
    CR__ENTER();
    (void)ctx;
    if (!pHandle_out || !hGraph || (flags & ~CU_GRAPH_COND_ASSIGN_DEFAULT))
        return CUDA_ERROR_INVALID_VALUE;
    egraph_t *root = root_of((egraph_t *)hGraph);
    if (cr_array_room((void **)&root->handles, &root->handle_cap, root->nhandles,
                      sizeof *root->handles))
        return CUDA_ERROR_OUT_OF_MEMORY;
    root->handles[root->nhandles++] = (ehandle_t){defaultLaunchValue, flags, 0};
    *pHandle_out = root->nhandles;
    return CUDA_SUCCESS;
}

/* Only conditional nodes come this way: the server adds every other kind by its own call. */
CUresult cr_emu_cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                  const CUgraphNode *dependencies,
                                  const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                  CUgraphNodeParams *nodeParams)
{
    CR__ENTER();
    if (!hGraph || !nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; dependencyData && i < numDependencies; i++)
        if (dependencyData[i].type || dependencyData[i].from_port || dependencyData[i].to_port)
            return CUDA_ERROR_NOT_SUPPORTED;
    if (nodeParams->type != CU_GRAPH_NODE_TYPE_CONDITIONAL)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUDA_CONDITIONAL_NODE_PARAMS *p = &nodeParams->conditional;
    egraph_t *root = root_of((egraph_t *)hGraph);
    /* a handle of this graph that no node has yet (one node per handle, as the driver) */
    if (!p->handle || p->handle > root->nhandles || root->handles[p->handle - 1].used || !p->size ||
        (p->type == CU_GRAPH_COND_TYPE_IF && p->size > 2) ||
        (p->type == CU_GRAPH_COND_TYPE_WHILE && p->size != 1) ||
        (p->type != CU_GRAPH_COND_TYPE_IF && p->type != CU_GRAPH_COND_TYPE_WHILE &&
         p->type != CU_GRAPH_COND_TYPE_SWITCH))
        return CUDA_ERROR_INVALID_VALUE;
    enode_t *n = node_new(CU_GRAPH_NODE_TYPE_CONDITIONAL);
    if (!n || !(n->bodies = calloc(p->size, sizeof *n->bodies))) {
        node_free(n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    n->cond_type = p->type;
    n->handle = p->handle;
    for (; n->size < p->size; n->size++) {
        egraph_t *body = calloc(1, sizeof *body);
        if (!body) {
            node_free(n);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        body->root = root;
        n->bodies[n->size] = (CUgraph)body;
    }
    CUresult rc = add(phGraphNode, hGraph, dependencies, numDependencies, n);
    if (rc == CUDA_SUCCESS) {
        root->handles[p->handle - 1].used = 1;
        p->phGraph_out = n->bodies;
    }
    return rc;
}

/* Conditional node n and those in its bodies, all the way down, give up their handles. */
static void release_handles(egraph_t *root, const enode_t *n)
{
    if (n->type != CU_GRAPH_NODE_TYPE_CONDITIONAL)
        return;
    if (n->handle && n->handle <= root->nhandles)
        root->handles[n->handle - 1].used = 0;
    for (unsigned b = 0; b < n->size; b++) {
        const egraph_t *body = (const egraph_t *)n->bodies[b];
        for (size_t i = 0; i < body->count; i++)
            if (body->nodes[i])
                release_handles(root, body->nodes[i]);
    }
}

CUresult cr_emu_cuGraphDestroyNode(CUgraphNode hNode)
{
    CR__ENTER();
    enode_t *n = (enode_t *)hNode;
    egraph_t *g = n ? (egraph_t *)n->owner : NULL;
    if (!g || n->index >= g->count || g->nodes[n->index] != n)
        return CUDA_ERROR_INVALID_VALUE;
    g->nodes[n->index] = NULL;
    release_handles(root_of(g), n);
    node_free(n);
    return CUDA_SUCCESS;
}
