/* Stream capture: not remoted yet, so no stream is ever capturing. Frameworks ask on hot
 * paths (PyTorch before most allocations), so the answers are local; beginning a capture
 * returns CUDA_ERROR_NOT_SUPPORTED like every function not remoted.
 *
 * Threads: any; nothing here waits. */
#include "client.h"

CUresult cr_hand_cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuStreamGetCaptureInfo(CUstream stream, CUstreamCaptureStatus *status,
                                        cuuint64_t *id)
{
    CUresult r = cr_hand_cuStreamIsCapturing(stream, status);
    if (r == CUDA_SUCCESS && id)
        *id = 0;
    return r;
}

CUresult cr_hand_cuStreamGetCaptureInfo_v3(CUstream stream, CUstreamCaptureStatus *status,
                                           cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                                           const CUgraphEdgeData **edges, size_t *count)
{
    CUresult r = cr_hand_cuStreamGetCaptureInfo(stream, status, id);
    if (r != CUDA_SUCCESS)
        return r;
    if (graph)
        *graph = NULL;
    if (deps)
        *deps = NULL;
    if (edges)
        *edges = NULL;
    if (count)
        *count = 0;
    return CUDA_SUCCESS;
}

/* cudart 13 and cuBLAS ask this one (the v3 without edges) before their launches. */
CUresult cr_hand_cuStreamGetCaptureInfo_v2(CUstream stream, CUstreamCaptureStatus *status,
                                           cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                                           size_t *count)
{
    return cr_hand_cuStreamGetCaptureInfo_v3(stream, status, id, graph, deps, NULL, count);
}

CUresult cr_hand_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    static __thread CUstreamCaptureMode current = CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode previous = current;
    current = *mode;
    *mode = previous;
    return CUDA_SUCCESS;
}
