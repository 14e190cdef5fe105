/* CUDA graphs: beginning and ending a capture, building a graph node by node, instantiating
 * and launching it. The server holds graphs and their nodes (server/graph.c); graph,
 * executable-graph and node handles are the server's ids. Messages, each
 * [arguments] -> [CUresult, result]:
 *   cuStreamBeginCapture_v2     [stream, mode], or [stream, mode, graph, dependencies] to
 *                               capture into that graph (cuStreamBeginCaptureToGraph)
 *   cuStreamEndCapture          [stream] -> graph
 *   cuGraphCreate               [flags] -> graph
 *   cuGraphClone                [graph] -> graph
 *   cuGraphAddNode              [graph, dependencies, opcode, arguments] + bulk -> node: every
 *                               kind of node made here, as the request it stands for (a
 *                               kernel node: cuLaunchKernel's arguments and parameter bytes),
 *                               its stream 0; opcode 0 is an empty node; dependencies here and
 *                               in every message that adds a node are each a node, or
 *                               [node, its edge's data] (see cuGraphAddDependencies)
 *   cuGraphAddChildGraphNode    [graph, dependencies, child graph (, move)] -> node: the
 *                               node holds a copy of the child, or with move 1 the child
 *                               itself (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
 *   cuGraphChildGraphNodeGetGraph  [node] -> the graph it holds
 *   cuGraphExecChildGraphNodeSetParams  [executable graph, node, graph]
 *   cuGraphConditionalHandleCreate  [graph, default value, flags] -> handle
 *   cuGraphAddNode_v2           [graph, dependencies, handle, type, size] -> [node, [bodies]]:
 *                               a conditional node and its body graphs
 *   cuGraphAddMemAllocNode      [graph, dependencies, bytes] -> [node, address]: allocated
 *                               now, kept across launches (server/graph.c)
 *   cuGraphAddMemFreeNode       [graph, dependencies, address] -> node
 *   cuGraphAddDependencies      [graph, from nodes, to nodes (, their data)]: an edge's
 *                               data (CUgraphEdgeData) as its first bytes read as a
 *                               little-endian integer, sent only when some is not zero
 *   cuGraphRemoveDependencies   [graph, from nodes, to nodes (, their data)]: each edge
 *                               must be there, with that data
 *   cuGraphGetEdges             [graph] -> [[from nodes], [to nodes], [their data]]
 *   cuGraphGetRootNodes         [graph] -> [nodes]
 *   cuGraphNodeGetDependencies, cuGraphNodeGetDependentNodes   [node] -> [[nodes],
 *                               [their edges' data]]; data lists are empty when every edge
 *                               is a default one
 *   cuGraphDestroyNode          [node]
 *   cuGraphNodeFindInClone      [node, cloned graph] -> node
 *   cuGraphKernelNodeGetParams_v2  [node] -> [opcode, arguments] + bulk: the request the
 *                               node stands for, for every cuGraph*NodeGetParams
 *   cuGraphNodeSetParams        [executable graph (0: the node's graph), node, opcode,
 *                               arguments] + bulk: every SetParams of a node kind kept as a
 *                               request (kernel, memset, copy, host, event)
 *   cuGraphExecUpdate_v2        [executable graph, graph] -> CUgraphExecUpdateResult (also
 *                               with CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
 *   cuGraphDebugDotPrint        [graph] -> [[opcode, inner, removed, [dependencies]
 *                               (, [kind, handle, [body]...])]...]: its nodes in the
 *                               order they were added, a dependency whose edge has data
 *                               as [place, data]; the client writes the DOT file
 *   cuGraphInstantiateWithFlags [graph, flags] -> executable graph (failed: why, as
 *                               CUgraphInstantiateResult)
 *   cuGraphLaunch, cuGraphUpload [executable graph, stream], not waited for
 *   cuGraphExecDestroy, cuGraphDestroy [handle]
 *   cuGraphGetNodes             [graph] -> how many nodes it has; [graph, true] -> [that
 *                               many, [their handles]]
 *   cuGraphNodeGetType          [node] -> its CUgraphNodeType
 *   cuGraphNodeSetEnabled       [executable graph, node, enabled]
 *   cuGraphNodeGetEnabled       [executable graph, node] -> enabled
 *   cuGraphExecGetFlags         [executable graph] -> its instantiation flags
 *
 * Threads: any application thread; each call waits for its reply but the launches. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "cr_api_desc.h"
#include "client.h"
#include "context.h"
#include "handles.h"
#include "idmap.h"
#include "launch.h"
#include "memops.h"
#include "memory.h"
#include "module.h"
#include "protocol.h"
#include "request.h"
#include "stream.h"
#include "user_object.h"

/* Sends [a, b] (b only when with_b), waits, and returns the CUresult; *out gets the second
 * element of the reply when asked. */
static CUresult call2(uint16_t opcode, uint64_t a, uint64_t b, int with_b, uint64_t *out)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, opcode);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, with_b ? 2 : 1);
    msgpack_pack_uint64(&m.pk, a);
    if (with_b)
        msgpack_pack_uint64(&m.pk, b);
    if (out)
        return cr_call_u64(&m, out);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    cr_reply_done(&p, &u);
    return r;
}

static CUresult send_async(uint16_t opcode, uint64_t a, uint64_t b)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, opcode);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_uint64(&m.pk, a);
    msgpack_pack_uint64(&m.pk, b);
    return cr_transport_error(cr_msg_send(&m));
}

static void pack_handles(msgpack_packer *pk, const void *const *h, size_t n);
static int default_edges(const CUgraphEdgeData *edges, size_t n);

/* [stream, mode] or [stream, mode, graph, dependencies]: a capture into a graph of its own,
 * or into `into` after those of its nodes (with their edges' data). */
static CUresult begin_capture(CUstream stream, CUstreamCaptureMode mode, CUgraph into,
                              const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t sid;
    CUresult r = cr_stream_wire_id(stream, &sid);
    if (r != CUDA_SUCCESS)
        return r;
    if (sid == 0) /* the legacy stream synchronizes with every other: it cannot capture */
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    uint64_t graph = (uint64_t)(uintptr_t)into;
    if ((r = cr_capture_begin(sid, graph)) != CUDA_SUCCESS)
        return r;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuStreamBeginCapture_v2);
    if (err) {
        r = cr_transport_error(err);
    } else {
        msgpack_pack_array(&m.pk, graph ? 4 : 2);
        msgpack_pack_uint64(&m.pk, sid);
        msgpack_pack_uint64(&m.pk, (uint64_t)mode);
        if (graph) {
            msgpack_pack_uint64(&m.pk, graph);
            cr_pack_deps(&m.pk, deps, edges, n);
        }
        cr_pending_t p = {0};
        msgpack_unpacked u;
        r = cr_call(&m, &p, &u);
        cr_reply_done(&p, &u);
    }
    if (r != CUDA_SUCCESS) {
        int invalid;
        cr_capture_end(sid, &invalid, &graph);
    }
    return r;
}

CUresult cr_hand_cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode)
{
    return begin_capture(stream, mode, NULL, NULL, NULL, 0);
}

CUresult cr_hand_cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph,
                                             const CUgraphNode *deps, const CUgraphEdgeData *edges,
                                             size_t n, CUstreamCaptureMode mode)
{
    if (!graph || (n && !deps) || n > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    return begin_capture(stream, mode, graph, deps, edges, n);
}

/* The first cuStreamBeginCapture, from before capture modes: the global mode, as cudart
 * then behaved. */
CUresult cr_hand_cuStreamBeginCapture(CUstream stream)
{
    return cr_hand_cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult cr_hand_cuStreamEndCapture(CUstream stream, CUgraph *graph)
{
    if (!graph)
        return CUDA_ERROR_INVALID_VALUE;
    *graph = NULL;
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    uint64_t sid, id = 0;
    CUresult r = cr_stream_wire_id(stream, &sid);
    if (r != CUDA_SUCCESS)
        return r;
    int invalid = 0;
    uint64_t into = 0;
    if ((r = cr_capture_end(sid, &invalid, &into)) == CUDA_ERROR_ILLEGAL_STATE)
        return r;
    /* the server ends it too, also an unmatched or invalidated one, whose graph goes (the
     * program's own too, when it captured into one, as NVIDIA's driver does) */
    CUresult ended = call2(CR_OP_cuStreamEndCapture, sid, 0, 0, &id);
    if (r == CUDA_SUCCESS && ended == CUDA_SUCCESS && invalid) {
        cr_hand_cuGraphDestroy((CUgraph)(uintptr_t)id); /* its user objects' references too */
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    if (ended == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && into)
        cr_user_objects_graph_gone(into); /* the server destroyed it */
    if (r == CUDA_SUCCESS && (r = ended) == CUDA_SUCCESS)
        *graph = (CUgraph)(uintptr_t)id;
    return r;
}

/* The reply of a failed instantiation names why in its id, as the driver's result_out. */
static CUresult instantiate(CUgraphExec *exec, CUgraph graph, unsigned long long flags,
                            CUgraphInstantiateResult *why)
{
    if (!exec)
        return CUDA_ERROR_INVALID_VALUE;
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuGraphInstantiateWithFlags);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)graph);
    msgpack_pack_uint64(&m.pk, flags);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    const msgpack_object *id =
        u.data.type == MSGPACK_OBJECT_ARRAY && u.data.via.array.size == 2 &&
                u.data.via.array.ptr[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER
            ? &u.data.via.array.ptr[1]
            : NULL;
    if (r == CUDA_SUCCESS && !id)
        r = CUDA_ERROR_UNKNOWN;
    *exec = r == CUDA_SUCCESS ? (CUgraphExec)(uintptr_t)id->via.u64 : NULL;
    if (r == CUDA_SUCCESS)
        cr_user_objects_copy((uint64_t)(uintptr_t)graph, id->via.u64);
    else if (id && id->via.u64 > CUDA_GRAPH_INSTANTIATE_SUCCESS &&
             id->via.u64 <= CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED)
        *why = (CUgraphInstantiateResult)id->via.u64;
    cr_reply_done(&p, &u);
    return r;
}

CUresult cr_hand_cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                             unsigned long long flags)
{
    CUgraphInstantiateResult why;
    return instantiate(exec, graph, flags, &why);
}

CUresult cr_hand_cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    if (!params)
        return CUDA_ERROR_INVALID_VALUE;
    if (params->hUploadStream) { /* nothing to upload ahead: just check the stream */
        uint64_t sid;
        CUresult r = cr_stream_wire_id(params->hUploadStream, &sid);
        if (r != CUDA_SUCCESS)
            return r;
    }
    CUgraphInstantiateResult why = CUDA_GRAPH_INSTANTIATE_ERROR;
    CUresult r = instantiate(exec, graph, params->flags, &why);
    params->hErrNode_out = NULL;
    params->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : why;
    return r;
}

/* The first cuGraphInstantiate and its _v2, of the same form: no flags, the node that
 * failed and a log of why. The server names no node, so a failure gives NULL and the log
 * says the error. */
static CUresult instantiate_logged(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node,
                                   char *log, size_t size)
{
    CUresult r = cr_hand_cuGraphInstantiateWithFlags(exec, graph, 0);
    if (error_node)
        *error_node = NULL;
    if (log && size) {
        const char *name = NULL;
        if (r != CUDA_SUCCESS)
            cr_hand_cuGetErrorName(r, &name);
        snprintf(log, size, "%s%s", r == CUDA_SUCCESS ? "" : "cuGraphInstantiate: ",
                 r == CUDA_SUCCESS ? ""
                 : name            ? name
                                   : "an error");
    }
    return r;
}

CUresult cr_hand_cuGraphInstantiate(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node,
                                    char *log, size_t size)
{
    return instantiate_logged(exec, graph, error_node, log, size);
}

CUresult cr_hand_cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node,
                                       char *log, size_t size)
{
    return instantiate_logged(exec, graph, error_node, log, size);
}

/* [executable graph, stream], not waited for. A launch on a capturing stream is not
 * capturable: NVIDIA's driver refuses it with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
 * invalidates the capture (seen on an H100, driver 580). */
static CUresult on_stream(uint16_t opcode, CUgraphExec exec, CUstream stream, int capturable)
{
    if (!exec)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t sid;
    CUresult r = cr_stream_wire_id(stream, &sid);
    if (r == CUDA_SUCCESS)
        r = cr_capture_check(sid, capturable);
    return r == CUDA_SUCCESS ? send_async(opcode, (uint64_t)(uintptr_t)exec, sid) : r;
}

CUresult cr_hand_cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
    CUresult r = on_stream(CR_OP_cuGraphLaunch, exec, stream, 0);
    if (r == CUDA_SUCCESS)
        cr_user_objects_launched((uint64_t)(uintptr_t)exec, stream);
    return r;
}

CUresult cr_hand_cuGraphUpload(CUgraphExec exec, CUstream stream)
{
    return on_stream(CR_OP_cuGraphUpload, exec, stream, 1);
}

CUresult cr_hand_cuGraphExecDestroy(CUgraphExec exec)
{
    CUresult r = call2(CR_OP_cuGraphExecDestroy, (uint64_t)(uintptr_t)exec, 0, 0, NULL);
    if (r == CUDA_SUCCESS)
        cr_user_objects_exec_gone((uint64_t)(uintptr_t)exec);
    return r;
}

static void bodies_forget(CUgraph graph, CUgraphNode node);

CUresult cr_hand_cuGraphDestroy(CUgraph graph)
{
    CUresult r = call2(CR_OP_cuGraphDestroy, (uint64_t)(uintptr_t)graph, 0, 0, NULL);
    if (r == CUDA_SUCCESS) {
        cr_user_objects_graph_gone((uint64_t)(uintptr_t)graph);
        bodies_forget(graph, NULL);
    }
    return r;
}

/* The number of nodes (PyTorch asks it to warn of an empty capture); the nodes themselves
 * stay the server's. */
/* [graph] -> count, or [graph, true] -> [count, [node handles]]: the nodes in the order
 * they run, a child graph as one. */
CUresult cr_hand_cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes, size_t *count)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    if (!nodes) {
        uint64_t n = 0;
        CUresult r = call2(CR_OP_cuGraphGetNodes, (uint64_t)(uintptr_t)graph, 0, 0, &n);
        if (r == CUDA_SUCCESS)
            *count = (size_t)n;
        return r;
    }
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuGraphGetNodes);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)graph);
    msgpack_pack_uint64(&m.pk, 1);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    const msgpack_object *ids =
        r == CUDA_SUCCESS && u.data.via.array.size == 3 ? &u.data.via.array.ptr[2] : NULL;
    if (r == CUDA_SUCCESS && (!ids || ids->type != MSGPACK_OBJECT_ARRAY))
        r = CUDA_ERROR_UNKNOWN;
    size_t got = 0;
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < ids->via.array.size && got < *count; i++)
        if (ids->via.array.ptr[i].type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            nodes[got++] = (CUgraphNode)(uintptr_t)ids->via.array.ptr[i].via.u64;
    if (r == CUDA_SUCCESS) {
        for (size_t i = got; i < *count; i++) /* room past the graph's nodes */
            nodes[i] = NULL;
        *count = got;
    }
    cr_reply_done(&p, &u);
    return r;
}

CUresult cr_hand_cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type)
{
    if (!type)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t t = 0;
    CUresult r = call2(CR_OP_cuGraphNodeGetType, (uint64_t)(uintptr_t)node, 0, 0, &t);
    if (r == CUDA_SUCCESS)
        *type = (CUgraphNodeType)t;
    return r;
}

/* --- graphs built node by node ---------------------------------------------------------------- */

CUresult cr_hand_cuGraphCreate(CUgraph *graph, unsigned flags)
{
    if (!graph)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t id = 0;
    CUresult r = call2(CR_OP_cuGraphCreate, flags, 0, 0, &id);
    *graph = r == CUDA_SUCCESS ? (CUgraph)(uintptr_t)id : NULL;
    return r;
}

CUresult cr_hand_cuGraphClone(CUgraph *clone, CUgraph graph)
{
    if (!clone)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t id = 0;
    CUresult r = call2(CR_OP_cuGraphClone, (uint64_t)(uintptr_t)graph, 0, 0, &id);
    *clone = r == CUDA_SUCCESS ? (CUgraph)(uintptr_t)id : NULL;
    if (r == CUDA_SUCCESS)
        cr_user_objects_copy((uint64_t)(uintptr_t)graph, id);
    return r;
}

/* User objects a graph owns (user_object.c): the server is asked only whether the graph
 * is one. */
CUresult cr_hand_cuGraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned int count,
                                         unsigned int flags)
{
    size_t nodes;
    CUresult r = cr_hand_cuGraphGetNodes(graph, NULL, &nodes);
    return r != CUDA_SUCCESS
               ? r
               : cr_user_objects_retain((uint64_t)(uintptr_t)graph, object, count, flags);
}

CUresult cr_hand_cuGraphReleaseUserObject(CUgraph graph, CUuserObject object, unsigned int count)
{
    return cr_user_objects_release((uint64_t)(uintptr_t)graph, object, count);
}

static void pack_handles(msgpack_packer *pk, const void *const *h, size_t n)
{
    msgpack_pack_array(pk, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        msgpack_pack_uint64(pk, (uint64_t)(uintptr_t)h[i]);
}

/* A node's request: `opcode` with arguments `vals`, or a kernel launch's (is_launch), or a
 * batch of memory operations' (memops), its stream left 0 for the launch to fill in; opcode
 * 0 is an empty node. */
typedef struct {
    uint16_t opcode;
    unsigned nvals;
    uint64_t vals[6];
    int is_launch;
    cr_launch_t launch;
    const CUstreamBatchMemOpParams *memops;
    unsigned nmemops;
} node_args_t;

#define MAX_NODE_ATTRS 32 /* more than there are attribute ids */

typedef struct {
    CUlaunchAttribute a[MAX_NODE_ATTRS];
    unsigned n;
} node_attrs_t;


/* opcode, then [arguments] (a launch's as cuLaunchKernel sends them) + its bulk */
static void pack_node_args(cr_msg_t *m, const node_args_t *a)
{
    msgpack_pack_uint16(&m->pk, a->opcode);
    if (a->is_launch) {
        cr_launch_pack(&m->pk, &a->launch, 0, 0);
        cr_msg_bulk(m, a->launch.params.buf, a->launch.params.size);
        return;
    }
    if (a->memops) { /* [stream, operations], as cuStreamBatchMemOp sends them */
        msgpack_pack_array(&m->pk, 2);
        msgpack_pack_uint64(&m->pk, 0);
        cr_memops_pack(&m->pk, a->memops, a->nmemops);
        return;
    }
    msgpack_pack_array(&m->pk, a->nvals);
    for (unsigned i = 0; i < a->nvals; i++)
        msgpack_pack_uint64(&m->pk, a->vals[i]);
}

/* Sends [graph, dependencies, opcode, arguments] + bulk under cuGraphAddNode's name. */
static CUresult add_node(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                         const CUgraphEdgeData *edges, size_t ndeps, const node_args_t *a)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!node || !graph || (ndeps && !deps) || ndeps > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuGraphAddNode);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 4);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)graph);
    cr_pack_deps(&m.pk, deps, edges, ndeps);
    pack_node_args(&m, a);
    uint64_t id = 0;
    CUresult r = cr_call_u64(&m, &id);
    *node = r == CUDA_SUCCESS ? (CUgraphNode)(uintptr_t)id : NULL;
    return r;
}

/* Sends [executable graph (0: the node's graph), node, opcode, arguments] + bulk under
 * cuGraphNodeSetParams's name: the node takes these arguments. */
static CUresult set_node(CUgraphExec exec, CUgraphNode node, const node_args_t *a)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!node)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuGraphNodeSetParams);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 4);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)exec);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)node);
    pack_node_args(&m, a);
    cr_pending_t pend = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &pend, &u);
    cr_reply_done(&pend, &u);
    return r;
}

/* A node's arguments described (args_*), then added or set, then let go. */
static CUresult add_described(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                              const CUgraphEdgeData *edges, size_t n, node_args_t *a,
                              CUresult described)
{
    CUresult r = described == CUDA_SUCCESS ? add_node(node, graph, deps, edges, n, a) : described;
    if (described == CUDA_SUCCESS && a->is_launch)
        cr_launch_free(&a->launch);
    return r;
}

static CUresult set_described(CUgraphExec exec, CUgraphNode node, node_args_t *a,
                              CUresult described)
{
    CUresult r = described == CUDA_SUCCESS ? set_node(exec, node, a) : described;
    if (described == CUDA_SUCCESS && a->is_launch)
        cr_launch_free(&a->launch);
    return r;
}

/* A kernel node: cuLaunchKernel's arguments and parameter bytes, checked here first. */
static CUresult args_kernel(node_args_t *a, const CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    cr_launch_dims_t d = {{p->gridDimX, p->gridDimY, p->gridDimZ},
                          {p->blockDimX, p->blockDimY, p->blockDimZ},
                          p->sharedMemBytes};
    /* a CUkernel names its function as the server sees it */
    CUfunction f = p->func ? p->func : (CUfunction)(void *)p->kern;
    *a = (node_args_t){.opcode = CR_OP_cuLaunchKernel, .is_launch = 1};
    return cr_launch_prepare(&a->launch, f, &d, p->kernelParams, p->extra);
}

/* The v1 parameters are the v2 ones without a kernel and a context. */
static CUDA_KERNEL_NODE_PARAMS from_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    return (CUDA_KERNEL_NODE_PARAMS){p->func,         p->gridDimX,  p->gridDimY,  p->gridDimZ,
                                     p->blockDimX,    p->blockDimY, p->blockDimZ, p->sharedMemBytes,
                                     p->kernelParams, p->extra,     NULL,         NULL};
}

static const uint16_t memset_ops[2][3] = {
    {CR_OP_cuMemsetD8Async, CR_OP_cuMemsetD16Async, CR_OP_cuMemsetD32Async},
    {CR_OP_cuMemsetD2D8Async, CR_OP_cuMemsetD2D16Async, CR_OP_cuMemsetD2D32Async}};

static CUresult args_memset(node_args_t *a, const CUDA_MEMSET_NODE_PARAMS *p)
{
    if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width ||
        !p->height)
        return CUDA_ERROR_INVALID_VALUE;
    int e = p->elementSize == 1 ? 0 : p->elementSize == 2 ? 1 : 2;
    uint64_t value = p->elementSize == 4 ? p->value : p->value & ((1u << (8 * p->elementSize)) - 1);
    if (p->height == 1)
        *a = (node_args_t){memset_ops[0][e], 4, {p->dst, value, p->width, 0}};
    else
        *a = (node_args_t){memset_ops[1][e], 6, {p->dst, p->pitch, value, p->width, p->height, 0}};
    return CUDA_SUCCESS;
}

/* Device-to-device copies of one row; every other copy node needs host memory or arrays. */
static CUresult args_copy(node_args_t *a, const CUDA_MEMCPY3D *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    int device_src =
        p->srcMemoryType == CU_MEMORYTYPE_DEVICE || p->srcMemoryType == CU_MEMORYTYPE_UNIFIED;
    int device_dst =
        p->dstMemoryType == CU_MEMORYTYPE_DEVICE || p->dstMemoryType == CU_MEMORYTYPE_UNIFIED;
    if (!device_src || !device_dst || p->Height > 1 || p->Depth > 1 || p->srcY || p->srcZ ||
        p->dstY || p->dstZ || p->srcLOD || p->dstLOD)
        return CUDA_ERROR_NOT_SUPPORTED;
    *a = (node_args_t){
        CR_OP_cuMemcpyDtoDAsync_v2,
        4,
        {p->dstDevice + p->dstXInBytes, p->srcDevice + p->srcXInBytes, p->WidthInBytes, 0}};
    return CUDA_SUCCESS;
}

/* A host node: the function is kept here under a new id, which the node names; the server
 * asks for it at each launch (server/handlers_launch.c). */
static CUresult args_host(node_args_t *a, const CUDA_HOST_NODE_PARAMS *p)
{
    if (!p || !p->fn)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t host_id;
    CUresult r = cr_launch_keep_host_func(p->fn, p->userData, &host_id);
    *a = (node_args_t){CR_OP_cuLaunchHostFunc, 2, {0, host_id}};
    return r;
}

static CUresult args_event(node_args_t *a, uint16_t opcode, CUevent event)
{
    if (opcode == CR_OP_cuEventRecord) /* [event, stream] */
        *a = (node_args_t){opcode, 2, {(uint64_t)(uintptr_t)event, 0}};
    else /* cuStreamWaitEvent: [stream, event, flags] */
        *a = (node_args_t){opcode, 3, {0, (uint64_t)(uintptr_t)event, 0}};
    return CUDA_SUCCESS;
}

/* A node of batch memory operations: cuStreamBatchMemOp's request. */
static CUresult args_memops(node_args_t *a, const CUstreamBatchMemOpParams *ops, unsigned count,
                            unsigned flags)
{
    CUresult r = flags ? CUDA_ERROR_INVALID_VALUE : cr_memops_check(ops, count);
    *a = (node_args_t){.opcode = CR_OP_cuStreamBatchMemOp_v2, .memops = ops, .nmemops = count};
    return r;
}

/* The generic parameters of the kinds kept as one request. */
static CUresult args_of(node_args_t *a, CUgraphNodeParams *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        const CUDA_KERNEL_NODE_PARAMS_v3 *k = &p->kernel;
        CUDA_KERNEL_NODE_PARAMS v2 = {k->func,      k->gridDimX,       k->gridDimY,
                                      k->gridDimZ,  k->blockDimX,      k->blockDimY,
                                      k->blockDimZ, k->sharedMemBytes, k->kernelParams,
                                      k->extra,     k->kern,           k->ctx};
        return args_kernel(a, &v2);
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS_v2 *m = &p->memset;
        CUDA_MEMSET_NODE_PARAMS v1 = {m->dst,         m->pitch, m->value,
                                      m->elementSize, m->width, m->height};
        return args_memset(a, &v1);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return p->memcpy.flags || p->memcpy.reserved ? CUDA_ERROR_INVALID_VALUE
                                                     : args_copy(a, &p->memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_HOST: {
        CUDA_HOST_NODE_PARAMS h = {p->host.fn, p->host.userData};
        return args_host(a, &h);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
        *a = (node_args_t){0};
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return args_event(a, CR_OP_cuEventRecord, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return args_event(a, CR_OP_cuStreamWaitEvent, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        return args_memops(a, p->memOp.paramArray, p->memOp.count, p->memOp.flags);
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* --- adding nodes --- */

CUresult cr_hand_cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                         size_t n, const CUDA_KERNEL_NODE_PARAMS *p)
{
    node_args_t a;
    return add_described(node, graph, deps, NULL, n, &a, args_kernel(&a, p));
}

CUresult cr_hand_cuGraphAddKernelNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                      size_t n, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS v2 = from_v1(p);
    return cr_hand_cuGraphAddKernelNode_v2(node, graph, deps, n, &v2);
}

CUresult cr_hand_cuGraphAddBatchMemOpNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                          size_t n, const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    node_args_t a;
    return p ? add_described(node, graph, deps, NULL, n, &a,
                             args_memops(&a, p->paramArray, p->count, p->flags))
             : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuGraphAddMemsetNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                      size_t n, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    (void)ctx; /* one context: every node runs in the server's */
    node_args_t a;
    return add_described(node, graph, deps, NULL, n, &a, args_memset(&a, p));
}

CUresult cr_hand_cuGraphAddMemcpyNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                      size_t n, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    (void)ctx;
    node_args_t a;
    return add_described(node, graph, deps, NULL, n, &a, args_copy(&a, p));
}

CUresult cr_hand_cuGraphAddEmptyNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                     size_t n)
{
    node_args_t a = {0};
    return add_described(node, graph, deps, NULL, n, &a, CUDA_SUCCESS);
}

CUresult cr_hand_cuGraphAddEventRecordNode(CUgraphNode *node, CUgraph graph,
                                           const CUgraphNode *deps, size_t n, CUevent event)
{
    node_args_t a;
    return add_described(node, graph, deps, NULL, n, &a,
                         args_event(&a, CR_OP_cuEventRecord, event));
}

CUresult cr_hand_cuGraphAddEventWaitNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                         size_t n, CUevent event)
{
    node_args_t a;
    return add_described(node, graph, deps, NULL, n, &a,
                         args_event(&a, CR_OP_cuStreamWaitEvent, event));
}

CUresult cr_hand_cuGraphAddHostNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                    size_t n, const CUDA_HOST_NODE_PARAMS *p)
{
    node_args_t a;
    return add_described(node, graph, deps, NULL, n, &a, args_host(&a, p));
}

/* A child graph node holding a copy of `child`, or with `move` the child itself (its
 * handle then the node's, destroyed with it). */
static CUresult child_node(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                           const CUgraphEdgeData *edges, size_t n, CUgraph child, int move)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!node || (n && !deps) || n > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuGraphAddChildGraphNode);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, move ? 4 : 3);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)graph);
    cr_pack_deps(&m.pk, deps, edges, n);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)child);
    if (move)
        msgpack_pack_uint64(&m.pk, 1);
    uint64_t id = 0;
    CUresult r = cr_call_u64(&m, &id);
    *node = r == CUDA_SUCCESS ? (CUgraphNode)(uintptr_t)id : NULL;
    if (r != CUDA_SUCCESS)
        return r;
    /* the child's nodes are copied in: so are its references; moved, they are the
     * parent's alone */
    cr_user_objects_copy((uint64_t)(uintptr_t)child, (uint64_t)(uintptr_t)graph);
    if (move)
        cr_user_objects_graph_gone((uint64_t)(uintptr_t)child);
    return r;
}

CUresult cr_hand_cuGraphAddChildGraphNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                          size_t n, CUgraph child)
{
    return child_node(node, graph, deps, NULL, n, child, 0);
}

/* The graph a child graph node holds: the server's, not a copy, so that what the program
 * adds to it or changes there the node does. */
CUresult cr_hand_cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *graph)
{
    if (!graph)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t id = 0;
    CUresult r = call2(CR_OP_cuGraphChildGraphNodeGetGraph, (uint64_t)(uintptr_t)node, 0, 0, &id);
    *graph = r == CUDA_SUCCESS ? (CUgraph)(uintptr_t)id : NULL;
    return r;
}

static CUresult call3(uint16_t opcode, uint64_t a, uint64_t b, uint64_t c);

/* [executable graph, node, graph]: the executable graph's child graph node takes a copy of
 * a graph of the same shape. */
CUresult cr_hand_cuGraphExecChildGraphNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                    CUgraph child)
{
    return call3(CR_OP_cuGraphExecChildGraphNodeSetParams, (uint64_t)(uintptr_t)exec,
                 (uint64_t)(uintptr_t)node, (uint64_t)(uintptr_t)child);
}

/* [graph, dependencies, value] -> [node] or [node, address] (with address). */
static CUresult memory_node(uint16_t opcode, CUgraphNode *node, CUgraph graph,
                            const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n,
                            uint64_t value, CUdeviceptr *address)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!node || (n && !deps) || n > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, opcode);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 3);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)graph);
    cr_pack_deps(&m.pk, deps, edges, n);
    msgpack_pack_uint64(&m.pk, value);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    const msgpack_object *a = u.data.via.array.ptr;
    uint32_t want = address ? 3 : 2;
    if (r == CUDA_SUCCESS &&
        (u.data.via.array.size != want || a[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
         (address && a[2].type != MSGPACK_OBJECT_POSITIVE_INTEGER)))
        r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS) {
        *node = (CUgraphNode)(uintptr_t)a[1].via.u64;
        if (address)
            *address = a[2].via.u64;
    }
    cr_reply_done(&p, &u);
    return r;
}

/* Memory of the graph: allocated when the node is added (its address fixed then, as on a
 * GPU), charged to the tenant, kept across launches; the server refuses more than the
 * tenant's quota with CUDA_ERROR_OUT_OF_MEMORY. */
static CUresult alloc_node(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                           const CUgraphEdgeData *edges, size_t n, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!p || !p->bytesize || p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
        p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE || p->poolProps.location.id < 0 ||
        p->poolProps.location.id >= cr_client()->device_count)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr dptr = 0;
    CUresult r =
        memory_node(CR_OP_cuGraphAddMemAllocNode, node, graph, deps, edges, n, p->bytesize, &dptr);
    if (r == CUDA_SUCCESS) {
        p->dptr = dptr;
        cr_devmap_add(dptr, p->bytesize);
    }
    return r;
}

CUresult cr_hand_cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                        size_t n, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    return alloc_node(node, graph, deps, NULL, n, p);
}

CUresult cr_hand_cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                       size_t n, CUdeviceptr dptr)
{
    return memory_node(CR_OP_cuGraphAddMemFreeNode, node, graph, deps, NULL, n, dptr, NULL);
}

/* --- conditional nodes --- */

/* The driver answers a conditional node with an array of its bodies that it owns for the
 * node's life: kept here with the node and its graph, freed when the node is destroyed or
 * its graph is (and with them what was kept for conditional nodes in its bodies, which go
 * with it: bodies nest at most 16 deep, the server's bound). */
typedef struct bodies {
    struct bodies *next;
    CUgraph graph;
    CUgraphNode node;
    uint32_t size;
    CUgraph list[];
} bodies_t;

static bodies_t *bodies_kept;
static pthread_mutex_t bodies_lock = PTHREAD_MUTEX_INITIALIZER;

/* Frees what was kept for `node` (non-NULL) or for every node of `graph`, and for the
 * nodes of their bodies. bodies_lock held. */
static void forget_locked(CUgraph graph, CUgraphNode node)
{
    for (bodies_t **at = &bodies_kept; *at;) {
        bodies_t *b = *at;
        if (node ? b->node != node : b->graph != graph) {
            at = &b->next;
            continue;
        }
        *at = b->next;
        for (uint32_t i = 0; i < b->size; i++)
            forget_locked(b->list[i], NULL);
        free(b);
        at = &bodies_kept; /* the recursion may have changed the list: again from the start */
    }
}

static void bodies_forget(CUgraph graph, CUgraphNode node)
{
    pthread_mutex_lock(&bodies_lock);
    forget_locked(graph, node);
    pthread_mutex_unlock(&bodies_lock);
}

CUresult cr_hand_cuGraphConditionalHandleCreate(CUgraphConditionalHandle *handle, CUgraph graph,
                                                CUcontext ctx, unsigned int dflt,
                                                unsigned int flags)
{
    (void)ctx; /* the server's one context runs every node */
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!handle || !graph)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuGraphConditionalHandleCreate);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 3);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)graph);
    msgpack_pack_uint64(&m.pk, dflt);
    msgpack_pack_uint64(&m.pk, flags);
    uint64_t h = 0;
    CUresult r = cr_call_u64(&m, &h);
    if (r == CUDA_SUCCESS)
        *handle = h;
    return r;
}

/* A conditional node: the server makes it and its bodies, whose handles come back. */
static CUresult conditional_node(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                 const CUgraphEdgeData *edges, size_t n,
                                 CUDA_CONDITIONAL_NODE_PARAMS *p)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!node || !graph || (n && !deps) || n > UINT32_MAX || !p->size)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuGraphAddNode_v2);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 5);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)graph);
    cr_pack_deps(&m.pk, deps, edges, n);
    msgpack_pack_uint64(&m.pk, p->handle);
    msgpack_pack_uint64(&m.pk, (uint64_t)p->type);
    msgpack_pack_uint64(&m.pk, p->size);
    cr_pending_t pend = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &pend, &u);
    const msgpack_object *a = u.data.via.array.ptr;
    if (r == CUDA_SUCCESS &&
        (u.data.via.array.size != 3 || a[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
         a[2].type != MSGPACK_OBJECT_ARRAY || a[2].via.array.size != p->size))
        r = CUDA_ERROR_UNKNOWN;
    /* the size the server took, so never more than it allows */
    bodies_t *kept =
        r == CUDA_SUCCESS ? malloc(sizeof *kept + (size_t)p->size * sizeof *kept->list) : NULL;
    if (r == CUDA_SUCCESS && !kept)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < p->size; i++) {
        const msgpack_object *id = &a[2].via.array.ptr[i];
        if (id->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            r = CUDA_ERROR_UNKNOWN;
        else
            kept->list[i] = (CUgraph)(uintptr_t)id->via.u64;
    }
    if (r == CUDA_SUCCESS) {
        *node = (CUgraphNode)(uintptr_t)a[1].via.u64;
        kept->graph = graph;
        kept->node = *node;
        kept->size = p->size;
        p->phGraph_out = kept->list;
        pthread_mutex_lock(&bodies_lock);
        kept->next = bodies_kept;
        bodies_kept = kept;
        pthread_mutex_unlock(&bodies_lock);
        kept = NULL;
    }
    cr_reply_done(&pend, &u);
    free(kept);
    return r;
}

/* The generic form, for the kinds above: a node after `deps`, its edges with `edges`' data
 * (NULL: all default). */
static CUresult add_any(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                        const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_GRAPH:
        if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE &&
            p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
            return CUDA_ERROR_INVALID_VALUE;
        return child_node(node, graph, deps, edges, n, p->graph.graph,
                          p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
        CUDA_MEM_ALLOC_NODE_PARAMS a = {p->alloc.poolProps, p->alloc.accessDescs,
                                        p->alloc.accessDescCount, p->alloc.bytesize, 0};
        CUresult r = alloc_node(node, graph, deps, edges, n, &a);
        p->alloc.dptr = a.dptr;
        return r;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return memory_node(CR_OP_cuGraphAddMemFreeNode, node, graph, deps, edges, n, p->free.dptr,
                           NULL);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return conditional_node(node, graph, deps, edges, n, &p->conditional);
    default: {
        node_args_t a;
        return add_described(node, graph, deps, edges, n, &a, args_of(&a, p));
    }
    }
}

CUresult cr_hand_cuGraphAddNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t n,
                                CUgraphNodeParams *p)
{
    return add_any(node, graph, deps, NULL, n, p);
}

CUresult cr_hand_cuGraphAddNode_v2(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                   const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *p)
{
    return add_any(node, graph, deps, edges, n, p);
}

/* [graph, from nodes, to nodes (, their data)]: cuGraphAddDependencies and
 * cuGraphRemoveDependencies; the data only when some edge's is not the default. */
static CUresult edges_call(uint16_t opcode, CUgraph graph, const CUgraphNode *from,
                           const CUgraphNode *to, const CUgraphEdgeData *edges, size_t n)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if ((n && (!from || !to)) || n > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    int data = !default_edges(edges, n);
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, opcode);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, data ? 4 : 3);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)graph);
    pack_handles(&m.pk, (const void *const *)from, n);
    pack_handles(&m.pk, (const void *const *)to, n);
    if (data) {
        msgpack_pack_array(&m.pk, (uint32_t)n);
        for (size_t i = 0; i < n; i++)
            msgpack_pack_uint64(&m.pk, cr_edge_wire(&edges[i]));
    }
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    cr_reply_done(&p, &u);
    return r;
}

CUresult cr_hand_cuGraphAddDependencies(CUgraph graph, const CUgraphNode *from,
                                        const CUgraphNode *to, size_t n)
{
    return edges_call(CR_OP_cuGraphAddDependencies, graph, from, to, NULL, n);
}

CUresult cr_hand_cuGraphAddDependencies_v2(CUgraph graph, const CUgraphNode *from,
                                           const CUgraphNode *to, const CUgraphEdgeData *edges,
                                           size_t n)
{
    return edges_call(CR_OP_cuGraphAddDependencies, graph, from, to, edges, n);
}

/* --- edges --------------------------------------------------------------------------------- */

/* Copies a reply's list of node handles into out (room for *count, or only counted when out
 * is NULL), as the driver answers such queries: the rest of the room NULL, *count the number
 * written (or the number there is, when only counting). */
static CUresult give_nodes(const msgpack_object *ids, CUgraphNode *out, size_t *count)
{
    if (!ids || ids->type != MSGPACK_OBJECT_ARRAY)
        return CUDA_ERROR_UNKNOWN;
    const msgpack_object_array *a = &ids->via.array;
    if (!out) {
        *count = a->size;
        return CUDA_SUCCESS;
    }
    size_t got = 0;
    for (uint32_t i = 0; i < a->size && got < *count; i++) {
        if (a->ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return CUDA_ERROR_UNKNOWN;
        out[got++] = (CUgraphNode)(uintptr_t)a->ptr[i].via.u64;
    }
    for (size_t i = got; i < *count; i++)
        out[i] = NULL;
    *count = got;
    return CUDA_SUCCESS;
}

/* 1 when every edge given (none: NULL) is the default edge. */
static int default_edges(const CUgraphEdgeData *edges, size_t n)
{
    for (size_t i = 0; edges && i < n; i++)
        if (cr_edge_wire(&edges[i]))
            return 0;
    return 1;
}

/* [handle] -> [[nodes]] or [[from nodes], [to nodes]] (two lists: b not NULL), and with
 * `data` their edges' data, into the caller's arrays. */
static CUresult query_nodes(uint16_t opcode, uint64_t handle, CUgraphNode *a, CUgraphNode *b,
                            CUgraphEdgeData *edges, size_t *count, int two, int data)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!count || (two && !a != !b) || (edges && !a))
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, opcode);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, handle);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    if (r == CUDA_SUCCESS) {
        const msgpack_object_array *reply = &u.data.via.array;
        size_t room = *count, second = *count;
        r = reply->size == 2u + (two != 0) + (data != 0) ? give_nodes(&reply->ptr[1], a, count)
                                                         : CUDA_ERROR_UNKNOWN;
        if (r == CUDA_SUCCESS && two)
            r = give_nodes(&reply->ptr[2], b, &second);
        if (r == CUDA_SUCCESS && data)
            r = cr_give_edges(&reply->ptr[2 + (two != 0)], edges, a ? room : 0, a, a ? *count : 0);
    }
    cr_reply_done(&p, &u);
    return r;
}

CUresult cr_hand_cuGraphGetEdges(CUgraph graph, CUgraphNode *from, CUgraphNode *to, size_t *n)
{
    return query_nodes(CR_OP_cuGraphGetEdges, (uint64_t)(uintptr_t)graph, from, to, NULL, n, 1, 1);
}

CUresult cr_hand_cuGraphGetEdges_v2(CUgraph graph, CUgraphNode *from, CUgraphNode *to,
                                    CUgraphEdgeData *edges, size_t *n)
{
    return query_nodes(CR_OP_cuGraphGetEdges, (uint64_t)(uintptr_t)graph, from, to, edges, n, 1, 1);
}

CUresult cr_hand_cuGraphGetRootNodes(CUgraph graph, CUgraphNode *roots, size_t *n)
{
    return query_nodes(CR_OP_cuGraphGetRootNodes, (uint64_t)(uintptr_t)graph, roots, NULL, NULL, n,
                       0, 0);
}

CUresult cr_hand_cuGraphNodeGetDependencies(CUgraphNode node, CUgraphNode *deps, size_t *n)
{
    return query_nodes(CR_OP_cuGraphNodeGetDependencies, (uint64_t)(uintptr_t)node, deps, NULL,
                       NULL, n, 0, 1);
}

CUresult cr_hand_cuGraphNodeGetDependencies_v2(CUgraphNode node, CUgraphNode *deps,
                                               CUgraphEdgeData *edges, size_t *n)
{
    return query_nodes(CR_OP_cuGraphNodeGetDependencies, (uint64_t)(uintptr_t)node, deps, NULL,
                       edges, n, 0, 1);
}

CUresult cr_hand_cuGraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode *dependents, size_t *n)
{
    return query_nodes(CR_OP_cuGraphNodeGetDependentNodes, (uint64_t)(uintptr_t)node, dependents,
                       NULL, NULL, n, 0, 1);
}

CUresult cr_hand_cuGraphNodeGetDependentNodes_v2(CUgraphNode node, CUgraphNode *dependents,
                                                 CUgraphEdgeData *edges, size_t *n)
{
    return query_nodes(CR_OP_cuGraphNodeGetDependentNodes, (uint64_t)(uintptr_t)node, dependents,
                       NULL, edges, n, 0, 1);
}

CUresult cr_hand_cuGraphRemoveDependencies(CUgraph graph, const CUgraphNode *from,
                                           const CUgraphNode *to, size_t n)
{
    return edges_call(CR_OP_cuGraphRemoveDependencies, graph, from, to, NULL, n);
}

CUresult cr_hand_cuGraphRemoveDependencies_v2(CUgraph graph, const CUgraphNode *from,
                                              const CUgraphNode *to, const CUgraphEdgeData *edges,
                                              size_t n)
{
    return edges_call(CR_OP_cuGraphRemoveDependencies, graph, from, to, edges, n);
}

static void params_forget(CUgraphNode node);

CUresult cr_hand_cuGraphDestroyNode(CUgraphNode node)
{
    CUresult r = call2(CR_OP_cuGraphDestroyNode, (uint64_t)(uintptr_t)node, 0, 0, NULL);
    if (r == CUDA_SUCCESS) { /* what was kept for it goes with it */
        bodies_forget(NULL, node);
        params_forget(node);
    }
    return r;
}

CUresult cr_hand_cuGraphNodeFindInClone(CUgraphNode *node, CUgraphNode original, CUgraph clone)
{
    if (!node)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t id = 0;
    CUresult r = call2(CR_OP_cuGraphNodeFindInClone, (uint64_t)(uintptr_t)original,
                       (uint64_t)(uintptr_t)clone, 1, &id);
    if (r == CUDA_SUCCESS)
        *node = (CUgraphNode)(uintptr_t)id;
    return r;
}

/* --- reading a node's arguments back --------------------------------------------------------- */

/* A node's request as the server keeps it: the opcode and its arguments. */
typedef struct {
    uint16_t opcode;
    uint8_t type;        /* an empty node's CUgraphNodeType (memory nodes are empty ones) */
    msgpack_object args; /* in u, an array (nil for an empty node, but a memory node) */
    cr_pending_t p;      /* its bulk bytes: p.sink.dst, p.sink.pos of them */
    msgpack_unpacked u;
} node_read_t;

static CUresult read_node(CUgraphNode node, node_read_t *q)
{
    memset(q, 0, sizeof *q);
    msgpack_unpacked_init(&q->u); /* read_done may follow any return */
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuGraphKernelNodeGetParams_v2);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)node);
    q->p.sink.alloc_max = CR_MAX_LAUNCH_PARAM_BYTES;
    CUresult r = cr_call(&m, &q->p, &q->u);
    const msgpack_object_array *a = r == CUDA_SUCCESS ? &q->u.data.via.array : NULL;
    if (a && (a->size != 4 || a->ptr[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
              a->ptr[1].via.u64 > UINT16_MAX || a->ptr[3].type != MSGPACK_OBJECT_POSITIVE_INTEGER))
        r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS) {
        q->opcode = (uint16_t)a->ptr[1].via.u64;
        q->type = (uint8_t)a->ptr[3].via.u64;
        q->args = a->ptr[2];
    }
    return r;
}

static void read_done(node_read_t *q)
{
    free(q->p.sink.dst);
    cr_reply_done(&q->p, &q->u);
}

/* Argument i of the node's request as a number, 0 when there is none. */
static uint64_t arg_u64(const node_read_t *q, uint32_t i)
{
    const msgpack_object *o = q->args.type == MSGPACK_OBJECT_ARRAY && i < q->args.via.array.size
                                  ? &q->args.via.array.ptr[i]
                                  : NULL;
    return o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : 0;
}

static void arg_dims(const node_read_t *q, uint32_t i, unsigned *d)
{
    const msgpack_object *o = q->args.type == MSGPACK_OBJECT_ARRAY && i < q->args.via.array.size
                                  ? &q->args.via.array.ptr[i]
                                  : NULL;
    for (uint32_t k = 0; k < 3; k++)
        d[k] = o && o->type == MSGPACK_OBJECT_ARRAY && k < o->via.array.size &&
                       o->via.array.ptr[k].type == MSGPACK_OBJECT_POSITIVE_INTEGER
                   ? (unsigned)o->via.array.ptr[k].via.u64
                   : 1;
}

/* The parameters a kernel node's GetParams hands out stay valid while the node keeps them:
 * the driver keeps them with the node, the client keeps them here, by node. A GetParams
 * that finds the same parameters hands out the same ones, so that what an earlier one gave
 * stays valid, as on a GPU; new parameters (after a SetParams) replace them. Freed with
 * the node. */
typedef struct {
    uint32_t n;   /* parameters */
    size_t bytes; /* their bytes, after the pointers */
    void *ptrs[]; /* what kernelParams points to */
} kept_params_t;

static pthread_mutex_t params_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_idmap_t params_given = CR_IDMAP_INIT; /* node id -> kept_params_t */

static int same_params(const void *x, const void *y)
{
    const kept_params_t *a = x, *b = y;
    const uint8_t *ab = (const uint8_t *)(a->ptrs + a->n), *bb = (const uint8_t *)(b->ptrs + b->n);
    if (a->n != b->n || a->bytes != b->bytes || memcmp(ab, bb, a->bytes) != 0)
        return 0;
    for (uint32_t i = 0; i < a->n; i++)
        if ((const uint8_t *)a->ptrs[i] - ab != (const uint8_t *)b->ptrs[i] - bb)
            return 0;
    return 1;
}

static cr_idmap_t memops_given;

/* What node's GetParams hands out, kept in map by node: the block kept before when
 * `same` finds it holds what `fresh` (malloc'd) does, else fresh in its place; NULL out
 * of memory (fresh freed, the block kept before kept). */
static void *hand_out(cr_idmap_t *map, CUgraphNode node, void *fresh,
                      int (*same)(const void *, const void *))
{
    uint64_t old = 0;
    pthread_mutex_lock(&params_lock);
    void *had = cr_idmap_get(map, (uint64_t)(uintptr_t)node, &old) ? (void *)(uintptr_t)old : NULL;
    if (had && same(had, fresh)) {
        free(fresh);
        fresh = had;
    } else if (cr_idmap_put(map, (uint64_t)(uintptr_t)node, (uint64_t)(uintptr_t)fresh)) {
        free(fresh);
        fresh = NULL;
    } else {
        free(had);
    }
    pthread_mutex_unlock(&params_lock);
    return fresh;
}

static void params_forget(CUgraphNode node)
{
    uint64_t old = 0, ops = 0;
    pthread_mutex_lock(&params_lock);
    int had = cr_idmap_remove(&params_given, (uint64_t)(uintptr_t)node, &old);
    int had_ops = cr_idmap_remove(&memops_given, (uint64_t)(uintptr_t)node, &ops);
    pthread_mutex_unlock(&params_lock);
    if (had)
        free((void *)(uintptr_t)old);
    if (had_ops)
        free((void *)(uintptr_t)ops);
}

static CUresult kernel_params(CUgraphNode node, node_read_t *q, void ***out)
{
    const msgpack_object *layout =
        q->args.type == MSGPACK_OBJECT_ARRAY && q->args.via.array.size > 5
            ? &q->args.via.array.ptr[5]
            : NULL;
    if (!layout || layout->type != MSGPACK_OBJECT_ARRAY)
        return CUDA_ERROR_UNKNOWN;
    uint32_t n = layout->via.array.size;
    size_t bulk_len = q->p.sink.pos;
    kept_params_t *k = malloc(sizeof *k + n * sizeof(void *) + bulk_len + 1);
    if (!k)
        return CUDA_ERROR_OUT_OF_MEMORY;
    k->n = n;
    k->bytes = bulk_len;
    uint8_t *bytes = (uint8_t *)(k->ptrs + n);
    if (bulk_len)
        memcpy(bytes, q->p.sink.dst, bulk_len);
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *e = &layout->via.array.ptr[i];
        uint64_t off = e->type == MSGPACK_OBJECT_ARRAY && e->via.array.size == 2 &&
                               e->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER
                           ? e->via.array.ptr[0].via.u64
                           : UINT64_MAX;
        if (off > bulk_len) {
            free(k);
            return CUDA_ERROR_UNKNOWN;
        }
        k->ptrs[i] = bytes + off;
    }
    if (!(k = hand_out(&params_given, node, k, same_params)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = k->ptrs;
    return CUDA_SUCCESS;
}

static int is_launch(uint16_t opcode)
{
    return opcode == CR_OP_cuLaunchKernel || opcode == CR_OP_cuLaunchKernelEx ||
           opcode == CR_OP_cuLaunchCooperativeKernel;
}

/* --- kernel node attributes: those of the cuLaunchKernelEx request the node is kept as
 * ([six launch arguments, [[id, value bytes]...]]); setting one makes the node such a
 * request. A cooperative launch's node has the cooperative attribute. */

static int node_attrs_of(const node_read_t *q, node_attrs_t *at)
{
    at->n = 0;
    memset(at->a, 0, sizeof at->a);
    if (q->opcode == CR_OP_cuLaunchCooperativeKernel) {
        at->a[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        at->a[0].value.cooperative = 1;
        at->n = 1;
        return 0;
    }
    if (q->opcode != CR_OP_cuLaunchKernelEx)
        return 0;
    const msgpack_object *l = q->args.type == MSGPACK_OBJECT_ARRAY && q->args.via.array.size == 7
                                  ? &q->args.via.array.ptr[6]
                                  : NULL;
    if (!l || l->type != MSGPACK_OBJECT_ARRAY || l->via.array.size > MAX_NODE_ATTRS)
        return -1;
    for (uint32_t i = 0; i < l->via.array.size; i++) {
        const msgpack_object *e = &l->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 2 ||
            (e->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER &&
             e->via.array.ptr[0].type != MSGPACK_OBJECT_NEGATIVE_INTEGER) ||
            e->via.array.ptr[1].type != MSGPACK_OBJECT_BIN ||
            e->via.array.ptr[1].via.bin.size != sizeof at->a[0].value)
            return -1;
        at->a[i].id = (CUlaunchAttributeID)e->via.array.ptr[0].via.i64;
        memcpy(&at->a[i].value, e->via.array.ptr[1].via.bin.ptr, sizeof at->a[0].value);
    }
    at->n = l->via.array.size;
    return 0;
}

/* Reads a kernel node and its attributes (read_done(q) after, whatever the result);
 * CUDA_ERROR_INVALID_VALUE for another kind of node. */
static CUresult read_kernel_node(CUgraphNode node, node_read_t *q, node_attrs_t *at)
{
    CUresult r = read_node(node, q);
    if (r == CUDA_SUCCESS && !is_launch(q->opcode))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && node_attrs_of(q, at) != 0)
        r = CUDA_ERROR_UNKNOWN;
    return r;
}

/* Sends the kernel node read in q again, with the attributes `at` (the graph's node). */
static CUresult set_kernel_attrs(CUgraphNode node, const node_read_t *q, const node_attrs_t *at)
{
    const msgpack_object_array *args = &q->args.via.array;
    if (q->args.type != MSGPACK_OBJECT_ARRAY || args->size < 6)
        return CUDA_ERROR_UNKNOWN;
    cr_msg_t m;
    int err = cr_msg_begin(cr_client()->conn, &m, CR_OP_cuGraphNodeSetParams);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 4);
    msgpack_pack_uint64(&m.pk, 0); /* the graph's node */
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)node);
    msgpack_pack_uint16(&m.pk, CR_OP_cuLaunchKernelEx);
    msgpack_pack_array(&m.pk, 7);
    for (uint32_t i = 0; i < 6; i++)
        msgpack_pack_object(&m.pk, args->ptr[i]);
    cr_launch_pack_attrs(&m.pk, at->a, at->n);
    cr_msg_bulk(&m, q->p.sink.dst, q->p.sink.pos);
    cr_pending_t pend = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &pend, &u);
    cr_reply_done(&pend, &u);
    return r;
}

CUresult cr_hand_cuGraphKernelNodeGetAttribute(CUgraphNode node, CUkernelNodeAttrID attr,
                                               CUkernelNodeAttrValue *value)
{
    if (!value || !cr_enum_has(&cr_enum_CUlaunchAttributeID, attr))
        return CUDA_ERROR_INVALID_VALUE;
    node_read_t q;
    node_attrs_t at;
    CUresult r = read_kernel_node(node, &q, &at);
    read_done(&q);
    if (r != CUDA_SUCCESS)
        return r;
    memset(value, 0, sizeof *value); /* one never set reads as its default */
    for (unsigned i = 0; i < at.n; i++)
        if (at.a[i].id == attr)
            *value = at.a[i].value;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuGraphKernelNodeSetAttribute(CUgraphNode node, CUkernelNodeAttrID attr,
                                               const CUkernelNodeAttrValue *value)
{
    if (!value || !cr_enum_has(&cr_enum_CUlaunchAttributeID, attr))
        return CUDA_ERROR_INVALID_VALUE;
    node_read_t q;
    node_attrs_t at;
    CUresult r = read_kernel_node(node, &q, &at);
    if (r == CUDA_SUCCESS) {
        unsigned i = 0;
        while (i < at.n && at.a[i].id != attr)
            i++;
        if (i == MAX_NODE_ATTRS) {
            r = CUDA_ERROR_INVALID_VALUE;
        } else {
            at.a[i].id = attr;
            at.a[i].value = *value;
            at.n += i == at.n;
            r = set_kernel_attrs(node, &q, &at);
        }
    }
    read_done(&q);
    return r;
}

CUresult cr_hand_cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src)
{
    node_read_t qs, qd;
    node_attrs_t at, theirs;
    CUresult r = read_kernel_node(src, &qs, &at);
    read_done(&qs);
    if (r != CUDA_SUCCESS)
        return r;
    r = read_kernel_node(dst, &qd, &theirs);
    if (r == CUDA_SUCCESS)
        r = set_kernel_attrs(dst, &qd, &at);
    read_done(&qd);
    return r;
}

CUresult cr_hand_cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    node_read_t q;
    CUresult r = read_node(node, &q);
    if (r == CUDA_SUCCESS && !is_launch(q.opcode))
        r = CUDA_ERROR_INVALID_VALUE; /* not a kernel node */
    void **params = NULL;
    if (r == CUDA_SUCCESS)
        r = kernel_params(node, &q, &params);
    if (r == CUDA_SUCCESS) {
        unsigned grid[3], block[3];
        arg_dims(&q, 1, grid);
        arg_dims(&q, 2, block);
        memset(p, 0, sizeof *p);
        uint64_t f = arg_u64(&q, 0);
        /* as cudart gives them when it adds a node: the function, the library kernel
         * behind it, the context */
        int is_kernel = cr_handles_valid(f, CR_HT_CUkern);
        p->func = is_kernel ? NULL : (CUfunction)(uintptr_t)f;
        p->kern = (CUkernel)(uintptr_t)(is_kernel ? f : cr_kernel_behind(f));
        p->gridDimX = grid[0], p->gridDimY = grid[1], p->gridDimZ = grid[2];
        p->blockDimX = block[0], p->blockDimY = block[1], p->blockDimZ = block[2];
        p->sharedMemBytes = (unsigned)arg_u64(&q, 3);
        p->kernelParams = params;
        p->ctx = cr_ctx_current();
    }
    read_done(&q);
    return r;
}

CUresult cr_hand_cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS v2;
    CUresult r = cr_hand_cuGraphKernelNodeGetParams_v2(node, &v2);
    if (r == CUDA_SUCCESS)
        *p = (CUDA_KERNEL_NODE_PARAMS_v1){
            v2.func,      v2.gridDimX,  v2.gridDimY,       v2.gridDimZ,     v2.blockDimX,
            v2.blockDimY, v2.blockDimZ, v2.sharedMemBytes, v2.kernelParams, v2.extra};
    return r;
}

/* A batch node's operations, kept by node as a kernel node's parameters are (the same
 * ones handed out again while they do not change). */
typedef struct {
    unsigned n;
    CUstreamBatchMemOpParams ops[];
} kept_memops_t;

static cr_idmap_t memops_given = CR_IDMAP_INIT; /* node id -> kept_memops_t, params_lock */

static int same_memops(const void *x, const void *y)
{
    const kept_memops_t *a = x, *b = y;
    return a->n == b->n && !memcmp(a->ops, b->ops, a->n * sizeof *a->ops);
}

CUresult cr_hand_cuGraphBatchMemOpNodeGetParams(CUgraphNode node, CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    node_read_t q;
    CUresult r = read_node(node, &q);
    const msgpack_object *ops = r == CUDA_SUCCESS && q.opcode == CR_OP_cuStreamBatchMemOp_v2 &&
                                        q.args.type == MSGPACK_OBJECT_ARRAY &&
                                        q.args.via.array.size == 2
                                    ? &q.args.via.array.ptr[1]
                                    : NULL;
    if (r == CUDA_SUCCESS && !ops)
        r = CUDA_ERROR_INVALID_VALUE; /* not a node of memory operations */
    uint32_t count = ops && ops->type == MSGPACK_OBJECT_ARRAY ? ops->via.array.size : 0;
    kept_memops_t *k =
        ops && count <= CR_MEMOPS_MAX ? malloc(sizeof *k + count * sizeof *k->ops) : NULL;
    int n = k ? cr_memops_unpack(ops, k->ops) : -1;
    if (r == CUDA_SUCCESS && n < 0)
        r = k || count > CR_MEMOPS_MAX ? CUDA_ERROR_UNKNOWN : CUDA_ERROR_OUT_OF_MEMORY;
    read_done(&q);
    if (r != CUDA_SUCCESS) {
        free(k);
        return r;
    }
    k->n = (unsigned)n;
    if (!(k = hand_out(&memops_given, node, k, same_memops)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUDA_BATCH_MEM_OP_NODE_PARAMS){cr_ctx_current(), k->n, k->ops, 0};
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuGraphMemsetNodeGetParams(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    node_read_t q;
    CUresult r = read_node(node, &q);
    unsigned elem = 0;
    int two_d = 0;
    switch (r == CUDA_SUCCESS ? q.opcode : 0) {
    case CR_OP_cuMemsetD2D32Async:
        two_d = 1; /* fall through */
    case CR_OP_cuMemsetD32Async:
        elem = 4;
        break;
    case CR_OP_cuMemsetD2D16Async:
        two_d = 1; /* fall through */
    case CR_OP_cuMemsetD16Async:
        elem = 2;
        break;
    case CR_OP_cuMemsetD2D8Async:
        two_d = 1; /* fall through */
    case CR_OP_cuMemsetD8Async:
        elem = 1;
        break;
    default:
        break;
    }
    if (r == CUDA_SUCCESS && !elem)
        r = CUDA_ERROR_INVALID_VALUE; /* not a memset node */
    if (r == CUDA_SUCCESS) {
        memset(p, 0, sizeof *p);
        p->dst = arg_u64(&q, 0);
        p->elementSize = elem;
        if (two_d) { /* [dst, pitch, value, width, height, stream] */
            p->pitch = arg_u64(&q, 1);
            p->value = (unsigned)arg_u64(&q, 2);
            p->width = arg_u64(&q, 3);
            p->height = arg_u64(&q, 4);
        } else { /* [dst, value, count, stream] */
            p->value = (unsigned)arg_u64(&q, 1);
            p->width = arg_u64(&q, 2);
            p->height = 1;
        }
    }
    read_done(&q);
    return r;
}

CUresult cr_hand_cuGraphMemcpyNodeGetParams(CUgraphNode node, CUDA_MEMCPY3D *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    node_read_t q;
    CUresult r = read_node(node, &q);
    if (r == CUDA_SUCCESS && q.opcode != CR_OP_cuMemcpyDtoDAsync_v2)
        r = CUDA_ERROR_INVALID_VALUE; /* not a copy node */
    if (r == CUDA_SUCCESS) { /* [dst, src, bytes, stream]: one row between device addresses */
        memset(p, 0, sizeof *p);
        p->dstMemoryType = CU_MEMORYTYPE_DEVICE;
        p->dstDevice = arg_u64(&q, 0);
        p->srcMemoryType = CU_MEMORYTYPE_DEVICE;
        p->srcDevice = arg_u64(&q, 1);
        p->WidthInBytes = arg_u64(&q, 2);
        p->Height = 1;
        p->Depth = 1;
    }
    read_done(&q);
    return r;
}

CUresult cr_hand_cuGraphHostNodeGetParams(CUgraphNode node, CUDA_HOST_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    node_read_t q;
    CUresult r = read_node(node, &q);
    if (r == CUDA_SUCCESS && q.opcode != CR_OP_cuLaunchHostFunc)
        r = CUDA_ERROR_INVALID_VALUE; /* not a host node */
    void (*fn)(void *) = NULL;
    void *data = NULL;
    if (r == CUDA_SUCCESS && !cr_conn_kept_host_func(cr_client()->conn, arg_u64(&q, 1), &fn, &data))
        r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS)
        *p = (CUDA_HOST_NODE_PARAMS){fn, data};
    read_done(&q);
    return r;
}

static CUresult node_event(CUgraphNode node, int record, CUevent *event)
{
    if (!event)
        return CUDA_ERROR_INVALID_VALUE;
    node_read_t q;
    CUresult r = read_node(node, &q);
    int kind = r != CUDA_SUCCESS                                                             ? -1
               : q.opcode == CR_OP_cuEventRecord || q.opcode == CR_OP_cuEventRecordWithFlags ? 1
               : q.opcode == CR_OP_cuStreamWaitEvent                                         ? 0
                                                                                             : -1;
    if (r == CUDA_SUCCESS && kind != record)
        r = CUDA_ERROR_INVALID_VALUE; /* not a node of that kind */
    if (r == CUDA_SUCCESS)            /* [event, stream(, flags)] / [stream, event, flags] */
        *event = (CUevent)(uintptr_t)arg_u64(&q, record ? 0 : 1);
    read_done(&q);
    return r;
}

CUresult cr_hand_cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    node_read_t q;
    CUresult r = read_node(node, &q);
    if (r == CUDA_SUCCESS && (q.opcode || q.type != CU_GRAPH_NODE_TYPE_MEM_ALLOC))
        r = CUDA_ERROR_INVALID_VALUE; /* not an allocation node */
    if (r == CUDA_SUCCESS) { /* device memory of the context's device, as the graph has it */
        CUcontext ctx = cr_ctx_current();
        memset(p, 0, sizeof *p);
        p->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        p->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        p->poolProps.location.id = ctx ? cr_ctx_device(ctx) : 0;
        p->dptr = arg_u64(&q, 0);
        p->bytesize = arg_u64(&q, 1);
    }
    read_done(&q);
    return r;
}

CUresult cr_hand_cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr *dptr)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    node_read_t q;
    CUresult r = read_node(node, &q);
    if (r == CUDA_SUCCESS && (q.opcode || q.type != CU_GRAPH_NODE_TYPE_MEM_FREE))
        r = CUDA_ERROR_INVALID_VALUE; /* not a free node */
    if (r == CUDA_SUCCESS)
        *dptr = arg_u64(&q, 0);
    read_done(&q);
    return r;
}

CUresult cr_hand_cuGraphEventRecordNodeGetEvent(CUgraphNode node, CUevent *event)
{
    return node_event(node, 1, event);
}

CUresult cr_hand_cuGraphEventWaitNodeGetEvent(CUgraphNode node, CUevent *event)
{
    return node_event(node, 0, event);
}

/* --- changing a node's arguments: in its graph (exec 0), or in an executable graph --- */

CUresult cr_hand_cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams *p)
{
    node_args_t a;
    return set_described(NULL, node, &a, args_of(&a, p));
}

CUresult cr_hand_cuGraphExecNodeSetParams(CUgraphExec exec, CUgraphNode node, CUgraphNodeParams *p)
{
    node_args_t a;
    return exec ? set_described(exec, node, &a, args_of(&a, p)) : CUDA_ERROR_INVALID_VALUE;
}

/* New arguments for a kernel node (the server keeps its attributes). */
CUresult cr_hand_cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p)
{
    node_args_t a;
    return set_described(NULL, node, &a, args_kernel(&a, p));
}

CUresult cr_hand_cuGraphKernelNodeSetParams(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS v2 = from_v1(p);
    return cr_hand_cuGraphKernelNodeSetParams_v2(node, &v2);
}

CUresult cr_hand_cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                   const CUDA_KERNEL_NODE_PARAMS *p)
{
    node_args_t a;
    return exec ? set_described(exec, node, &a, args_kernel(&a, p)) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS v2 = from_v1(p);
    return cr_hand_cuGraphExecKernelNodeSetParams_v2(exec, node, &v2);
}

CUresult cr_hand_cuGraphBatchMemOpNodeSetParams(CUgraphNode node,
                                                const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    node_args_t a;
    return p ? set_described(NULL, node, &a, args_memops(&a, p->paramArray, p->count, p->flags))
             : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuGraphExecBatchMemOpNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                    const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    node_args_t a;
    return exec && p
               ? set_described(exec, node, &a, args_memops(&a, p->paramArray, p->count, p->flags))
               : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuGraphMemsetNodeSetParams(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p)
{
    node_args_t a;
    return set_described(NULL, node, &a, args_memset(&a, p));
}

CUresult cr_hand_cuGraphExecMemsetNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    (void)ctx;
    node_args_t a;
    return exec ? set_described(exec, node, &a, args_memset(&a, p)) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuGraphMemcpyNodeSetParams(CUgraphNode node, const CUDA_MEMCPY3D *p)
{
    node_args_t a;
    return set_described(NULL, node, &a, args_copy(&a, p));
}

CUresult cr_hand_cuGraphExecMemcpyNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    (void)ctx;
    node_args_t a;
    return exec ? set_described(exec, node, &a, args_copy(&a, p)) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuGraphHostNodeSetParams(CUgraphNode node, const CUDA_HOST_NODE_PARAMS *p)
{
    node_args_t a;
    return set_described(NULL, node, &a, args_host(&a, p));
}

CUresult cr_hand_cuGraphExecHostNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                              const CUDA_HOST_NODE_PARAMS *p)
{
    node_args_t a;
    return exec ? set_described(exec, node, &a, args_host(&a, p)) : CUDA_ERROR_INVALID_VALUE;
}

/* An event node's event (opcode: what the node does), in the graph or, in_exec, in an
 * executable graph of it. */
static CUresult set_event(CUgraphExec exec, int in_exec, CUgraphNode node, uint16_t opcode,
                          CUevent event)
{
    node_args_t a;
    return in_exec && !exec ? CUDA_ERROR_INVALID_VALUE
                            : set_described(exec, node, &a, args_event(&a, opcode, event));
}

CUresult cr_hand_cuGraphEventRecordNodeSetEvent(CUgraphNode node, CUevent event)
{
    return set_event(NULL, 0, node, CR_OP_cuEventRecord, event);
}

CUresult cr_hand_cuGraphEventWaitNodeSetEvent(CUgraphNode node, CUevent event)
{
    return set_event(NULL, 0, node, CR_OP_cuStreamWaitEvent, event);
}

CUresult cr_hand_cuGraphExecEventRecordNodeSetEvent(CUgraphExec exec, CUgraphNode node,
                                                    CUevent event)
{
    return set_event(exec, 1, node, CR_OP_cuEventRecord, event);
}

CUresult cr_hand_cuGraphExecEventWaitNodeSetEvent(CUgraphExec exec, CUgraphNode node, CUevent event)
{
    return set_event(exec, 1, node, CR_OP_cuStreamWaitEvent, event);
}

/* The reply [CUresult, CUgraphExecUpdateResult] says why an update failed too. */
CUresult cr_hand_cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph,
                                      CUgraphExecUpdateResultInfo *info)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!info)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuGraphExecUpdate_v2);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)exec);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)graph);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    const msgpack_object *why = u.data.type == MSGPACK_OBJECT_ARRAY && u.data.via.array.size == 2
                                    ? &u.data.via.array.ptr[1]
                                    : NULL;
    info->result = why && why->type == MSGPACK_OBJECT_POSITIVE_INTEGER
                       ? (CUgraphExecUpdateResult)why->via.u64
                       : CU_GRAPH_EXEC_UPDATE_ERROR;
    info->errorNode = info->errorFromNode = NULL; /* node handles are not given out */
    cr_reply_done(&p, &u);
    if (r == CUDA_SUCCESS)
        cr_user_objects_replace((uint64_t)(uintptr_t)exec, (uint64_t)(uintptr_t)graph);
    return r;
}

CUresult cr_hand_cuGraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphNode *error_node,
                                   CUgraphExecUpdateResult *result)
{
    if (!error_node || !result)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphExecUpdateResultInfo info;
    CUresult r = cr_hand_cuGraphExecUpdate_v2(exec, graph, &info);
    *error_node = info.errorNode;
    *result = info.result;
    return r;
}

/* The DOT file of a graph as the server keeps it: its nodes in their order, each named by
 * the call it stands for, with the edges the graph keeps; a child graph's nodes in a
 * cluster of their own, with their edges, before the node that stands for the child; a
 * conditional node's bodies each in a cluster, dashed edges from the node to where they
 * start. */
static int small_uint(const msgpack_object *o, uint64_t *v)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return 0;
    *v = o->via.u64;
    return 1;
}

#define DOT_MAX_DEPTH 17 /* the server nests bodies at most 16 deep */

/* What a conditional node's body `b` is called, for a node of this kind. */
static void body_name(char *out, size_t len, uint64_t kind, uint32_t b)
{
    if (kind == CU_GRAPH_COND_TYPE_IF)
        snprintf(out, len, "%s", b ? "else" : "then");
    else if (kind == CU_GRAPH_COND_TYPE_WHILE)
        snprintf(out, len, "body");
    else
        snprintf(out, len, "case %u", b);
}

static void write_nodes(FILE *f, const msgpack_object_array *nodes, const char *prefix, int depth);

/* Node `i` (named prefix + "n" + i) is conditional: cond is [kind, handle, [body]...]. */
static void write_bodies(FILE *f, const msgpack_object *cond, const char *prefix, uint32_t i,
                         int depth)
{
    uint64_t kind, handle;
    if (cond->type != MSGPACK_OBJECT_ARRAY || cond->via.array.size < 2 ||
        !small_uint(&cond->via.array.ptr[0], &kind) ||
        !small_uint(&cond->via.array.ptr[1], &handle) || depth + 1 >= DOT_MAX_DEPTH)
        return;
    for (uint32_t b = 0; b + 2 < cond->via.array.size; b++) {
        const msgpack_object *body = &cond->via.array.ptr[b + 2];
        char inner[512], name[32];
        if (body->type != MSGPACK_OBJECT_ARRAY ||
            (size_t)snprintf(inner, sizeof inner, "%sn%ub%u_", prefix, i, b) >= sizeof inner)
            continue;
        body_name(name, sizeof name, kind, b);
        fprintf(f, "%*ssubgraph cluster_%s {\n%*slabel=\"%s of %u\";\n", 2 * depth + 2, "", inner,
                2 * depth + 4, "", name, i);
        write_nodes(f, &body->via.array, inner, depth + 1);
        fprintf(f, "%*s}\n", 2 * depth + 2, "");
        for (uint32_t k = 0; k < body->via.array.size; k++) { /* where it starts */
            const msgpack_object *n = &body->via.array.ptr[k];
            uint64_t removed;
            if (n->type == MSGPACK_OBJECT_ARRAY && n->via.array.size >= 4 &&
                small_uint(&n->via.array.ptr[2], &removed) && !removed &&
                n->via.array.ptr[3].type == MSGPACK_OBJECT_ARRAY &&
                n->via.array.ptr[3].via.array.size == 0)
                fprintf(f, "%*s%sn%u -> %sn%u [style=dashed];\n", 2 * depth + 2, "", prefix, i,
                        inner, k);
        }
    }
}

/* One graph's nodes as DOT, each named prefix + "n" + its place, depth levels in. */
static void write_nodes(FILE *f, const msgpack_object_array *nodes, const char *prefix, int depth)
{
    int in_child = 0, children = 0, pad = 2 * depth + 2;
    for (uint32_t i = 0; i < nodes->size; i++) {
        const msgpack_object *n = &nodes->ptr[i];
        uint64_t op = 0, inner = 0, removed = 0, kind = 0, handle = 0;
        if (n->type != MSGPACK_OBJECT_ARRAY || (n->via.array.size != 4 && n->via.array.size != 5) ||
            !small_uint(&n->via.array.ptr[0], &op) || !small_uint(&n->via.array.ptr[1], &inner) ||
            !small_uint(&n->via.array.ptr[2], &removed))
            continue;
        const msgpack_object *cond = n->via.array.size == 5 ? &n->via.array.ptr[4] : NULL;
        int ends_child = !inner && in_child; /* the node that stands for the child graph */
        if (inner && !in_child)
            fprintf(f, "%*ssubgraph cluster_%schild%d {\n%*slabel=\"child graph\";\n", pad, "",
                    prefix, children++, pad + 2, "");
        else if (ends_child)
            fprintf(f, "%*s}\n", pad, "");
        in_child = inner != 0;
        if (removed)
            continue;
        char label[96];
        if (cond && cond->type == MSGPACK_OBJECT_ARRAY && cond->via.array.size >= 2 &&
            small_uint(&cond->via.array.ptr[0], &kind) &&
            small_uint(&cond->via.array.ptr[1], &handle))
            snprintf(label, sizeof label, "%s (handle %llu)",
                     kind == CU_GRAPH_COND_TYPE_IF      ? "IF"
                     : kind == CU_GRAPH_COND_TYPE_WHILE ? "WHILE"
                                                        : "SWITCH",
                     (unsigned long long)handle);
        else
            snprintf(label, sizeof label, "%s",
                     op           ? cr_opcode_name((unsigned)op)
                     : ends_child ? "child graph done"
                                  : "empty");
        fprintf(f, "%*s%sn%u [label=\"%u: %s\"];\n", pad + (in_child ? 2 : 0), "", prefix, i, i,
                label);
        const msgpack_object *deps = &n->via.array.ptr[3];
        for (uint32_t k = 0; deps->type == MSGPACK_OBJECT_ARRAY && k < deps->via.array.size; k++) {
            const msgpack_object *e = &deps->via.array.ptr[k];
            uint64_t d, data = 0; /* an edge with data: [place, data] */
            if (e->type == MSGPACK_OBJECT_ARRAY && e->via.array.size == 2 &&
                e->via.array.ptr[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
                data = e->via.array.ptr[1].via.u64;
                e = &e->via.array.ptr[0];
            }
            if (!small_uint(e, &d) || d == i || d >= nodes->size)
                continue;
            fprintf(f, "%*s%sn%llu -> %sn%u", pad, "", prefix, (unsigned long long)d, prefix, i);
            unsigned port = (unsigned)(data & 0xff), type = (unsigned)(data >> 16 & 0xff);
            if (data) /* a dotted edge, named by its port (and programmatic type) */
                fprintf(f, " [style=dotted, label=\"%s%s\"]",
                        type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC ? "programmatic, " : "",
                        port == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC   ? "port programmatic"
                        : port == CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER ? "port launch order"
                                                                         : "port default");
            fprintf(f, ";\n");
        }
        if (cond)
            write_bodies(f, cond, prefix, i, depth);
    }
    if (in_child)
        fprintf(f, "%*s}\n", pad, "");
}

/* The graph as DOT: each node with its place in the order it was added, its edges;
 * a child graph's nodes in a cluster, a conditional node's bodies each in one. */
static void write_dot(FILE *f, const msgpack_object_array *nodes)
{
    fprintf(f, "digraph cuda_remote_graph {\n"
               "  label=\"nodes numbered in the order they were added\";\n"
               "  node [shape=box];\n");
    write_nodes(f, nodes, "", 0);
    fprintf(f, "}\n");
}

CUresult cr_hand_cuGraphDebugDotPrint(CUgraph graph, const char *path, unsigned flags)
{
    (void)flags; /* what the driver's verbose flags add (parameters, handles) is not kept */
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuGraphDebugDotPrint);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)graph);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    const msgpack_object *nodes =
        r == CUDA_SUCCESS && u.data.via.array.size == 2 ? &u.data.via.array.ptr[1] : NULL;
    if (r == CUDA_SUCCESS && (!nodes || nodes->type != MSGPACK_OBJECT_ARRAY))
        r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS) {
        FILE *f = fopen(path, "w");
        if (f) {
            write_dot(f, &nodes->via.array);
            if (fclose(f) != 0)
                r = CUDA_ERROR_OPERATING_SYSTEM;
        } else {
            r = CUDA_ERROR_OPERATING_SYSTEM; /* as the driver answers a path it cannot write */
        }
    }
    cr_reply_done(&p, &u);
    return r;
}

/* [a, b, c] -> CUresult */
static CUresult call3(uint16_t opcode, uint64_t a, uint64_t b, uint64_t c)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, opcode);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 3);
    msgpack_pack_uint64(&m.pk, a);
    msgpack_pack_uint64(&m.pk, b);
    msgpack_pack_uint64(&m.pk, c);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    cr_reply_done(&p, &u);
    return r;
}

CUresult cr_hand_cuGraphNodeSetEnabled(CUgraphExec exec, CUgraphNode node, unsigned enabled)
{
    return call3(CR_OP_cuGraphNodeSetEnabled, (uint64_t)(uintptr_t)exec, (uint64_t)(uintptr_t)node,
                 enabled != 0);
}

CUresult cr_hand_cuGraphNodeGetEnabled(CUgraphExec exec, CUgraphNode node, unsigned *enabled)
{
    if (!enabled)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t on = 0;
    CUresult r = call2(CR_OP_cuGraphNodeGetEnabled, (uint64_t)(uintptr_t)exec,
                       (uint64_t)(uintptr_t)node, 1, &on);
    if (r == CUDA_SUCCESS)
        *enabled = (unsigned)on;
    return r;
}

CUresult cr_hand_cuGraphExecGetFlags(CUgraphExec exec, cuuint64_t *flags)
{
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t f = 0;
    CUresult r = call2(CR_OP_cuGraphExecGetFlags, (uint64_t)(uintptr_t)exec, 0, 0, &f);
    if (r == CUDA_SUCCESS)
        *flags = f;
    return r;
}
