/* Stream capture, the client's side. The server records the work a capturing stream is
 * given and replays it at each launch of the graph (server/graph.c); this file keeps which
 * streams capture, by the same rules the server follows, so that the questions frameworks
 * ask on hot paths (PyTorch before most allocations, cuBLAS before its launches) are
 * answered here, and refuses at once what a capture cannot hold.
 *
 * A capture holds kernel launches, memsets, device-to-device copies, event records and
 * waits. Copies to or from host memory and host functions would need this process at each
 * replay, and calls that wait on a capturing stream cannot be captured: they fail with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture, whose end then fails
 * with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, as on a GPU. Another stream joins a capture by
 * waiting on an event recorded in it; the capture ends, for every stream in it, at
 * cuStreamEndCapture on the stream that began it.
 *
 * It also keeps how both modules send a node's dependencies with their edges' data, and
 * read it back (cr_pack_deps, cr_give_edges).
 *
 * Threads: any; one lock over the table, and none taken while no stream captures. */
#include "capture.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "client.h"
#include "cr_opcodes.h"
#include "request.h"
#include "stream.h"

typedef struct {
    uint64_t stream; /* wire id */
    uint64_t id;     /* the capture's id, shared by the streams that joined it */
    uint64_t origin; /* the stream that began it */
    uint64_t into;   /* the graph it captures into (cuStreamBeginCaptureToGraph), 0: its own */
    int invalid;
} capturing_t;

typedef struct {
    uint64_t event; /* an event recorded in a capture, by handle */
    uint64_t id;
} mark_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static capturing_t *streams;
static size_t stream_count, stream_cap;
static mark_t *marks;
static size_t mark_count, mark_cap;
static unsigned active; /* atomic: stream_count, read without the lock */
static uint64_t next_id = 1;

static capturing_t *find_locked(uint64_t stream)
{
    for (size_t i = 0; i < stream_count; i++)
        if (streams[i].stream == stream)
            return &streams[i];
    return NULL;
}

static int add_locked(uint64_t stream, uint64_t id, uint64_t origin, uint64_t into)
{
    if (cr_array_room((void **)&streams, &stream_cap, stream_count, sizeof *streams))
        return -1;
    streams[stream_count++] = (capturing_t){stream, id, origin, into, 0};
    __atomic_store_n(&active, (unsigned)stream_count, __ATOMIC_RELEASE);
    return 0;
}

/* Ends capture `id` on every stream and forgets its events. */
static void end_locked(uint64_t id)
{
    size_t k = 0;
    for (size_t i = 0; i < stream_count; i++)
        if (streams[i].id != id)
            streams[k++] = streams[i];
    stream_count = k;
    k = 0;
    for (size_t i = 0; i < mark_count; i++)
        if (marks[i].id != id)
            marks[k++] = marks[i];
    mark_count = k;
    __atomic_store_n(&active, (unsigned)stream_count, __ATOMIC_RELEASE);
}

static void invalidate_locked(uint64_t id)
{
    for (size_t i = 0; i < stream_count; i++)
        if (streams[i].id == id)
            streams[i].invalid = 1;
}

CUresult cr_capture_check(uint64_t stream, int capturable)
{
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    capturing_t *c = find_locked(stream);
    if (c && c->invalid) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (c && !capturable) {
        invalidate_locked(c->id);
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

int cr_capture_capturing(uint64_t stream)
{
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&lock);
    capturing_t *c = find_locked(stream);
    int yes = c && !c->invalid;
    pthread_mutex_unlock(&lock);
    return yes;
}

CUresult cr_capture_check_call(const cr_fn_desc_t *d, uint64_t stream)
{
    switch (d->opcode) {
    case CR_OP_cuMemsetD8Async:
    case CR_OP_cuMemsetD16Async:
    case CR_OP_cuMemsetD32Async:
    case CR_OP_cuMemsetD2D8Async:
    case CR_OP_cuMemsetD2D16Async:
    case CR_OP_cuMemsetD2D32Async:
    case CR_OP_cuMemcpyDtoDAsync_v2:
    case CR_OP_cuEventRecord:
    case CR_OP_cuEventRecordWithFlags:
    case CR_OP_cuStreamWaitEvent:
    case CR_OP_cuMemAllocAsync: /* the graph's memory (server/graph.c) */
    case CR_OP_cuMemAllocFromPoolAsync:
    case CR_OP_cuMemFreeAsync:
        return cr_capture_check(stream, 1);
    case CR_OP_cuStreamQuery:
        return cr_capture_check(stream, 0);
    default: /* questions about a stream are fine; work on it and waits are not */
        return d->flags & (CR_FN_ASYNC | CR_FN_WAITS) ? cr_capture_check(stream, 0) : CUDA_SUCCESS;
    }
}

void cr_capture_event_recorded(uint64_t event, uint64_t stream)
{
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE)) /* marks exist only while captures do */
        return;
    pthread_mutex_lock(&lock);
    capturing_t *c = find_locked(stream);
    size_t i = 0;
    while (i < mark_count && marks[i].event != event)
        i++;
    if (c) { /* (re)marked as this capture's */
        if (i == mark_count && cr_array_room((void **)&marks, &mark_cap, mark_count, sizeof *marks))
            c->invalid = 1; /* cannot remember it: a wait on it would not join */
        else
            marks[i == mark_count ? mark_count++ : i] = (mark_t){event, c->id};
    } else if (i < mark_count) { /* recorded outside any capture now */
        marks[i] = marks[--mark_count];
    }
    pthread_mutex_unlock(&lock);
}

void cr_capture_event_waited(uint64_t stream, uint64_t event)
{
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < mark_count; i++) {
        if (marks[i].event != event)
            continue;
        capturing_t *origin = NULL;
        for (size_t k = 0; k < stream_count && !origin; k++)
            if (streams[k].id == marks[i].id)
                origin = &streams[k];
        if (origin && !find_locked(stream)) {
            uint64_t id = origin->id, from = origin->origin, into = origin->into;
            if (add_locked(stream, id, from, into))
                invalidate_locked(id);
        }
        break;
    }
    pthread_mutex_unlock(&lock);
}

CUresult cr_capture_begin(uint64_t stream, uint64_t into)
{
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_SUCCESS;
    if (find_locked(stream))
        r = CUDA_ERROR_ILLEGAL_STATE;
    else if (add_locked(stream, next_id, stream, into))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else
        next_id++;
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cr_capture_end(uint64_t stream, int *invalid, uint64_t *into)
{
    pthread_mutex_lock(&lock);
    capturing_t *c = find_locked(stream);
    CUresult r = CUDA_SUCCESS;
    if (!c) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else if (c->origin != stream) {
        r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
        invalidate_locked(c->id);
    } else {
        *invalid = c->invalid;
        *into = c->into;
        end_locked(c->id);
    }
    pthread_mutex_unlock(&lock);
    return r;
}

void cr_capture_forget_all(void)
{
    pthread_mutex_lock(&lock);
    stream_count = mark_count = 0;
    __atomic_store_n(&active, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
}

/* --- what frameworks ask -------------------------------------------------------------------- */

CUresult cr_hand_cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status)
{
    uint64_t id;
    return cr_hand_cuStreamGetCaptureInfo(stream, status, &id);
}

CUresult cr_hand_cuStreamGetCaptureInfo(CUstream stream, CUstreamCaptureStatus *status,
                                        cuuint64_t *id)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (id)
        *id = 0;
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    uint64_t wire;
    CUresult r = cr_stream_wire_id(stream, &wire);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&lock);
    capturing_t *c = find_locked(wire);
    if (c) {
        *status =
            c->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (id)
            *id = c->id;
    }
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

/* --- edges with data, as the graph messages carry them ----------------------------------- */

uint64_t cr_edge_wire(const CUgraphEdgeData *e)
{
    uint64_t w = 0;
    for (int i = 7; i >= 0; i--)
        w = w << 8 | ((const unsigned char *)e)[i];
    return w;
}

void cr_pack_deps(msgpack_packer *pk, const CUgraphNode *deps, const CUgraphEdgeData *edges,
                  size_t n)
{
    msgpack_pack_array(pk, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        uint64_t data = edges ? cr_edge_wire(&edges[i]) : 0;
        if (data) {
            msgpack_pack_array(pk, 2);
            msgpack_pack_uint64(pk, (uint64_t)(uintptr_t)deps[i]);
            msgpack_pack_uint64(pk, data);
        } else {
            msgpack_pack_uint64(pk, (uint64_t)(uintptr_t)deps[i]);
        }
    }
}

CUresult cr_give_edges(const msgpack_object *o, CUgraphEdgeData *edges, size_t room,
                       const CUgraphNode *written, size_t given)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || (o->via.array.size && o->via.array.size < given))
        return CUDA_ERROR_UNKNOWN;
    for (size_t i = 0; edges && i < room; i++)
        memset(&edges[i], 0, sizeof edges[i]);
    for (size_t i = 0; written && o->via.array.size && i < given; i++) {
        const msgpack_object *w = &o->via.array.ptr[i];
        if (w->type != MSGPACK_OBJECT_POSITIVE_INTEGER || w->via.u64 >> 24)
            return CUDA_ERROR_UNKNOWN;
        if (!edges && w->via.u64)
            return CUDA_ERROR_LOSSY_QUERY;
        if (edges) {
            edges[i].from_port = (unsigned char)w->via.u64;
            edges[i].to_port = (unsigned char)(w->via.u64 >> 8);
            edges[i].type = (unsigned char)(w->via.u64 >> 16);
        }
    }
    return CUDA_SUCCESS;
}

/* The nodes a capturing stream's next work depends on, as the driver answers them: an
 * array it owns until the next such call (here: the thread's next). */
static __thread CUgraphNode *tails;
static __thread size_t tails_cap;
static __thread CUgraphEdgeData *tail_edges; /* their edges' data */
static __thread size_t tail_edges_cap;

/* [stream] -> [graph, [nodes], [their edges' data]]: the graph being captured into and the
 * stream's last nodes, asked of the server only when the program wants them (to add nodes
 * to the graph). */
static CUresult capture_graph(uint64_t wire, CUgraph *graph, const CUgraphNode **deps,
                              const CUgraphEdgeData **edges, size_t *count)
{
    cr_client_t *cl = cr_client();
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuStreamGetCaptureInfo_v3);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, wire);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    const msgpack_object *a = u.data.via.array.ptr;
    if (r == CUDA_SUCCESS &&
        (u.data.via.array.size != 4 || a[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
         a[2].type != MSGPACK_OBJECT_ARRAY))
        r = CUDA_ERROR_UNKNOWN;
    uint32_t n = r == CUDA_SUCCESS ? a[2].via.array.size : 0;
    if (n && (cr_array_room((void **)&tails, &tails_cap, n - 1, sizeof *tails) ||
              (edges &&
               cr_array_room((void **)&tail_edges, &tail_edges_cap, n - 1, sizeof *tail_edges))))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
        if (a[2].via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            r = CUDA_ERROR_UNKNOWN;
        else
            tails[i] = (CUgraphNode)(uintptr_t)a[2].via.array.ptr[i].via.u64;
    }
    if (r == CUDA_SUCCESS) /* the dependencies' data: LOSSY when asked for them without it */
        r = cr_give_edges(&a[3], edges ? tail_edges : NULL, edges ? n : 0, deps ? tails : NULL,
                          deps ? n : 0);
    if (r == CUDA_SUCCESS) {
        if (graph)
            *graph = (CUgraph)(uintptr_t)a[1].via.u64;
        if (deps)
            *deps = n ? tails : NULL;
        if (edges)
            *edges = n ? tail_edges : NULL;
        if (count)
            *count = n;
    }
    cr_reply_done(&p, &u);
    return r;
}

/* The status is answered here; the graph and the stream's last nodes, when asked for,
 * by the server (the graph then has a handle, which the capture's end gives too), with
 * their edges' data (given to cuStreamBeginCaptureToGraph or
 * cuStreamUpdateCaptureDependencies; CUDA_ERROR_LOSSY_QUERY for nodes asked without it). */
CUresult cr_hand_cuStreamGetCaptureInfo_v3(CUstream stream, CUstreamCaptureStatus *status,
                                           cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                                           const CUgraphEdgeData **edges, size_t *count)
{
    if (edges && !deps)
        return CUDA_ERROR_INVALID_VALUE;
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
    uint64_t wire;
    if (*status != CU_STREAM_CAPTURE_STATUS_ACTIVE || (!graph && !deps && !count) ||
        cr_stream_wire_id(stream, &wire) != CUDA_SUCCESS)
        return CUDA_SUCCESS;
    return capture_graph(wire, graph, deps, edges, count);
}

/* cudart 13 and cuBLAS ask this one (the v3 without edges) before their launches. */
CUresult cr_hand_cuStreamGetCaptureInfo_v2(CUstream stream, CUstreamCaptureStatus *status,
                                           cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                                           size_t *count)
{
    return cr_hand_cuStreamGetCaptureInfo_v3(stream, status, id, graph, deps, NULL, count);
}

/* Nodes named (of the capture's graph, from cuStreamGetCaptureInfo or added to it) become
 * what the stream's next work depends on, at the server; with none named the captured
 * work keeps its order (a stricter order than asked is still a valid one). */
CUresult cr_hand_cuStreamUpdateCaptureDependencies_v2(CUstream stream, CUgraphNode *deps,
                                                      const CUgraphEdgeData *edges, size_t count,
                                                      unsigned flags)
{
    CUstreamCaptureStatus status;
    CUresult r = cr_hand_cuStreamIsCapturing(stream, &status);
    if (r != CUDA_SUCCESS)
        return r;
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return CUDA_ERROR_ILLEGAL_STATE;
    if ((count && !deps) || count > UINT32_MAX ||
        (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES &&
         flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES))
        return CUDA_ERROR_INVALID_VALUE;
    if (!count) /* adding nothing; setting nothing keeps a stricter order, still a valid one */
        return CUDA_SUCCESS;
    uint64_t wire;
    if ((r = cr_stream_wire_id(stream, &wire)) != CUDA_SUCCESS)
        return r;
    /* [stream, [nodes, or [node, edge data]], flags] */
    cr_msg_t m;
    int err = cr_msg_begin(cr_client()->conn, &m, CR_OP_cuStreamUpdateCaptureDependencies_v2);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 3);
    msgpack_pack_uint64(&m.pk, wire);
    cr_pack_deps(&m.pk, deps, edges, count);
    msgpack_pack_uint64(&m.pk, flags);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    r = cr_call(&m, &p, &u);
    cr_reply_done(&p, &u);
    return r;
}

CUresult cr_hand_cuStreamUpdateCaptureDependencies(CUstream stream, CUgraphNode *deps, size_t count,
                                                   unsigned flags)
{
    return cr_hand_cuStreamUpdateCaptureDependencies_v2(stream, deps, NULL, count, flags);
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
