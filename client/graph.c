/* Graphs made by stream capture: beginning and ending a capture, instantiating the graph
 * and launching it. The server holds the graph (server/graph.c); graph and executable-graph
 * handles are the server's ids. Messages, each [arguments] -> [CUresult, result]:
 *   cuStreamBeginCapture_v2     [stream, mode]
 *   cuStreamEndCapture          [stream] -> graph
 *   cuGraphInstantiateWithFlags [graph, flags] -> executable graph
 *   cuGraphLaunch, cuGraphUpload [executable graph, stream], not waited for
 *   cuGraphExecDestroy, cuGraphDestroy [handle]
 *   cuGraphGetNodes             [graph] -> how many nodes it has (node handles are not
 *                               given out)
 *
 * Threads: any application thread; each call waits for its reply but the launches. */
#include "capture.h"
#include "client.h"
#include "request.h"
#include "stream.h"

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

CUresult cr_hand_cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode)
{
    if (!cr_client())
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
    if ((r = cr_capture_begin(sid)) != CUDA_SUCCESS)
        return r;
    if ((r = call2(CR_OP_cuStreamBeginCapture_v2, sid, (uint64_t)mode, 1, NULL)) != CUDA_SUCCESS) {
        int invalid;
        cr_capture_end(sid, &invalid);
    }
    return r;
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
    if ((r = cr_capture_end(sid, &invalid)) == CUDA_ERROR_ILLEGAL_STATE)
        return r;
    /* the server ends it too, also an unmatched or invalidated one (whose graph goes) */
    CUresult ended = call2(CR_OP_cuStreamEndCapture, sid, 0, 0, &id);
    if (r == CUDA_SUCCESS && ended == CUDA_SUCCESS && invalid) {
        call2(CR_OP_cuGraphDestroy, id, 0, 0, NULL);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    if (r == CUDA_SUCCESS && (r = ended) == CUDA_SUCCESS)
        *graph = (CUgraph)(uintptr_t)id;
    return r;
}

CUresult cr_hand_cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                             unsigned long long flags)
{
    if (!exec)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t id = 0;
    CUresult r =
        call2(CR_OP_cuGraphInstantiateWithFlags, (uint64_t)(uintptr_t)graph, flags, 1, &id);
    *exec = r == CUDA_SUCCESS ? (CUgraphExec)(uintptr_t)id : NULL;
    return r;
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
    CUresult r = cr_hand_cuGraphInstantiateWithFlags(exec, graph, params->flags);
    params->hErrNode_out = NULL;
    params->result_out =
        r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

static CUresult on_stream(uint16_t opcode, CUgraphExec exec, CUstream stream)
{
    if (!exec)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t sid;
    CUresult r = cr_stream_wire_id(stream, &sid);
    if (r == CUDA_SUCCESS) /* a graph launched into a capture is captured node by node */
        r = cr_capture_check(sid, 1);
    return r == CUDA_SUCCESS ? send_async(opcode, (uint64_t)(uintptr_t)exec, sid) : r;
}

CUresult cr_hand_cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
    return on_stream(CR_OP_cuGraphLaunch, exec, stream);
}

CUresult cr_hand_cuGraphUpload(CUgraphExec exec, CUstream stream)
{
    return on_stream(CR_OP_cuGraphUpload, exec, stream);
}

CUresult cr_hand_cuGraphExecDestroy(CUgraphExec exec)
{
    return call2(CR_OP_cuGraphExecDestroy, (uint64_t)(uintptr_t)exec, 0, 0, NULL);
}

CUresult cr_hand_cuGraphDestroy(CUgraph graph)
{
    return call2(CR_OP_cuGraphDestroy, (uint64_t)(uintptr_t)graph, 0, 0, NULL);
}

/* The number of nodes (PyTorch asks it to warn of an empty capture); the nodes themselves
 * stay the server's. */
CUresult cr_hand_cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes, size_t *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    if (nodes && *count)
        return CUDA_ERROR_NOT_SUPPORTED;
    uint64_t n = 0;
    CUresult r = call2(CR_OP_cuGraphGetNodes, (uint64_t)(uintptr_t)graph, 0, 0, &n);
    if (r == CUDA_SUCCESS)
        *count = (size_t)n;
    return r;
}
