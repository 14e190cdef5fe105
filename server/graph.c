/* CUDA graphs, kept and replayed by the server: made by stream capture or node by node.
 *
 * A capturing stream's work is not run: each request it is given (kernel launches,
 * memsets, device-to-device copies, event records and waits) is kept as it came, body and
 * bulk bytes. A node added by hand is kept the same way, as the request it stands for
 * (`cuGraphAddNode`'s message names it), its stream argument left for the launch; its
 * function or memory is checked when it is added. Stream-ordered allocations on a capturing
 * stream become the graph's memory, as an allocation node's (below), and frees of it free
 * nodes. A host function is kept when it names the client's host node (cuLaunchHostFunc's
 * second argument): the client runs it at every launch, as it runs any host function.
 * Launching the graph replays the kept requests, in the order they came, on the stream
 * the graph is launched on: each is
 * dispatched as if the client had just sent it, so it is checked (handles, memory the
 * tenant owns, launch layouts) and scheduled (admission, device time) like any other, at
 * every launch. A graph holds no device state of its own and works the same on every
 * backend; what it gives up is the driver's own graph, with its lower launch cost on the
 * device. Nodes run one after the other on the launch stream: the order they were captured
 * or added in respects every dependency given then; an edge added later that goes
 * backwards is refused. An executable graph is a copy of its graph's nodes, whose nodes
 * may be turned off (they then run as empty nodes) and given other arguments.
 *
 * Streams join a capture by waiting on an event recorded in it (the client follows the same
 * rule, client/capture.c); such a wait, and a wait on an event of the same capture, are
 * dependencies the order already keeps, and are dropped. A graph launched into a capture,
 * like a child graph node, adds a copy of its nodes. The capture ends for every stream in
 * it when the stream that began it ends it. A session's kept bytes are bounded
 * (MAX_SESSION_BYTES, MAX_NODES per graph; past them the capture is invalidated or the
 * node refused), and so are its streams capturing at once (MAX_CAPTURING; a capture past
 * it is refused).
 *
 * Messages: see client/graph.c. Replayed requests go to the router the executor hands over
 * at start-up (cr_graph_set_runner). Threads: the session's executor only (the slot's
 * discipline); graphs are freed with their handles, or at the session's end. */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "cr_server_hand.h"
#include "log.h"
#include "request.h"
#include "scheduler.h"
#include "session.h"

#define MAX_SESSION_BYTES ((uint64_t)256 << 20) /* kept by all of a session's graphs */
#define MAX_NODES (1u << 20)                    /* in one graph */
#define MAX_CAPTURING 1024                      /* streams capturing at once in a session */
/* what a node costs the server besides its bytes (its record, its handle's id), counted
 * in the session's kept bytes so that empty nodes are bounded too */
#define NODE_COST (sizeof(node_t) + sizeof(uint64_t))

typedef struct {
    uint16_t opcode;    /* 0: an empty node */
    uint8_t stream_arg; /* which argument names the stream */
    uint8_t inner;      /* a node of a child graph, which counts as one node (its last) */
    uint32_t body_len;
    uint64_t bulk_len;
    uint8_t *bytes;   /* body, then bulk */
    uint8_t type;     /* an empty node's CUgraphNodeType: EMPTY (0 too), GRAPH, MEM_ALLOC, FREE */
    uint8_t disabled; /* an executable graph's node turned off: it runs as an empty node */
} node_t;

static int node_kind(uint16_t opcode);

/* The memory an allocation node made: allocated and charged to the tenant when the node
 * was added (its address fixed then, as on a GPU), kept across launches; the node and a
 * free node of it run as empty nodes. Shared by the graph's copies and executable graphs;
 * with a free node in the graph it is freed once the last of them is gone, else it stays
 * the program's to free, as on a GPU. */
typedef struct {
    unsigned refs;
    cr_session_t *session;
    CUdeviceptr ptr;
    int freed_in_graph;
} graph_mem_t;

typedef struct {
    unsigned refs;   /* its handle or its capture, and a launch replaying it */
    uint64_t serial; /* unique in the process: what an executable graph was made from */
    node_t *nodes;
    size_t count, cap;
    uint64_t bytes;
    uint64_t *account;  /* the session's kept bytes */
    int invalid;        /* a node could not be kept */
    graph_mem_t **mems; /* made by its allocation nodes */
    size_t mem_count, mem_cap;
    uint64_t *node_ids; /* the handle id given out for each node, 0 for none yet */
    size_t node_id_cap;
} graph_t;

typedef struct {
    graph_t *graph;  /* its own copy of the nodes */
    uint64_t source; /* the serial of the graph it was made from */
    uint64_t flags;  /* it was instantiated with */
} exec_t;

typedef struct {
    graph_t *graph; /* alive as long as the node's handle: the graph's handle is its parent */
    size_t index;   /* the node's place in the graph's order */
} node_ref_t;

static uint64_t next_serial = 1; /* atomic */

typedef struct {
    uint64_t stream, origin;
    graph_t *graph;
} capture_t;

typedef struct {
    uint64_t event;
    graph_t *graph;
} mark_t;

typedef struct {
    capture_t *caps;
    size_t count, cap;
    mark_t *marks;
    size_t mark_count, mark_cap;
    uint64_t bytes; /* kept by the session's graphs */
} captures_t;

typedef void (*runner_t)(cr_request_t *req);
static runner_t run_node; /* atomic: the router, handed over by each executor's start */

void cr_graph_set_runner(void (*run)(cr_request_t *req))
{
    __atomic_store_n(&run_node, run, __ATOMIC_RELEASE);
}

static graph_t *graph_new(uint64_t *account)
{
    graph_t *g = calloc(1, sizeof *g);
    if (g) {
        g->refs = 1;
        g->account = account;
        g->serial = __atomic_fetch_add(&next_serial, 1, __ATOMIC_RELAXED);
    }
    return g;
}

static captures_t *captures(cr_session_t *s, int create)
{
    captures_t **slot = (captures_t **)cr_session_slot(s, CR_SLOT_GRAPHS);
    if (!*slot && create)
        *slot = calloc(1, sizeof **slot);
    return *slot;
}

static void mem_unref(graph_mem_t *m)
{
    if (--m->refs > 0)
        return;
    /* at the session's end its memory is freed with the rest */
    if (m->freed_in_graph && !cr_session_closing(m->session) &&
        cr_session_free_when_idle(m->session, m->ptr, NULL, NULL) == CUDA_ERROR_OUT_OF_MEMORY)
        CR_WARN("session %llu: a graph's memory at %#llx stays until the session ends",
                (unsigned long long)cr_session_id(m->session), (unsigned long long)m->ptr);
    free(m);
}

static void graph_unref(void *p)
{
    graph_t *g = p;
    if (!g || --g->refs > 0)
        return;
    for (size_t i = 0; i < g->mem_count; i++)
        mem_unref(g->mems[i]);
    free(g->mems);
    free(g->node_ids);
    for (size_t i = 0; i < g->count; i++)
        free(g->nodes[i].bytes);
    *g->account -= g->bytes;
    free(g->nodes);
    free(g);
}

static void exec_free(void *p)
{
    exec_t *e = p;
    graph_unref(e->graph);
    free(e);
}

/* The argument naming the stream of a request a capture keeps, or -1 for others. */
static int stream_arg(uint16_t opcode)
{
    switch (opcode) {
    case CR_OP_cuLaunchKernel:
    case CR_OP_cuLaunchKernelEx:
    case CR_OP_cuLaunchCooperativeKernel:
        return 4; /* [function, grid, block, shared, stream, layout, ...] */
    case CR_OP_cuMemsetD8Async:
    case CR_OP_cuMemsetD16Async:
    case CR_OP_cuMemsetD32Async:
    case CR_OP_cuMemcpyDtoDAsync_v2:
        return 3;
    case CR_OP_cuMemsetD2D8Async:
    case CR_OP_cuMemsetD2D16Async:
    case CR_OP_cuMemsetD2D32Async:
        return 5;
    case CR_OP_cuEventRecord:
    case CR_OP_cuEventRecordWithFlags:
        return 1;
    case CR_OP_cuStreamWaitEvent:
    case CR_OP_cuLaunchHostFunc: /* a host node: [stream, host id] */
        return 0;
    default:
        return -1;
    }
}

static capture_t *capture_of(captures_t *c, uint64_t stream)
{
    for (size_t i = 0; c && i < c->count; i++)
        if (c->caps[i].stream == stream)
            return &c->caps[i];
    return NULL;
}

static mark_t *mark_of(captures_t *c, uint64_t event)
{
    for (size_t i = 0; c && i < c->mark_count; i++)
        if (c->marks[i].event == event)
            return &c->marks[i];
    return NULL;
}

/* Appends a node of these bytes (body, then bulk) to g: 0, or -1 past the bounds or out of
 * memory. */
static int keep_bytes(graph_t *g, uint16_t opcode, int arg, const void *body, uint32_t body_len,
                      const void *bulk, uint64_t bulk_len)
{
    uint64_t size = body_len + bulk_len + NODE_COST;
    if (g->invalid || g->count >= MAX_NODES || *g->account + size > MAX_SESSION_BYTES ||
        cr_array_room((void **)&g->nodes, &g->cap, g->count, sizeof *g->nodes))
        return -1;
    uint8_t *bytes = malloc(size ? size : 1);
    if (!bytes)
        return -1;
    if (body_len) /* an empty node has none */
        memcpy(bytes, body, body_len);
    if (bulk_len)
        memcpy(bytes + body_len, bulk, bulk_len);
    g->nodes[g->count++] = (node_t){opcode, (uint8_t)arg, 0, body_len, bulk_len, bytes};
    g->bytes += size;
    *g->account += size;
    return 0;
}

static int keep(graph_t *g, const cr_request_t *req, int arg)
{
    return keep_bytes(g, req->hdr.opcode, arg, req->body, req->hdr.body_len, req->bulk,
                      req->hdr.bulk_len);
}

static int keep_node(graph_t *g, const node_t *n)
{
    if (keep_bytes(g, n->opcode, n->stream_arg, n->bytes, n->body_len, n->bytes + n->body_len,
                   n->bulk_len) != 0)
        return -1;
    g->nodes[g->count - 1].inner = n->inner;
    g->nodes[g->count - 1].type = n->type;
    g->nodes[g->count - 1].disabled = n->disabled;
    return 0;
}

/* Appends the nodes of `child` as one node of g: its nodes, marked inner, and an empty node
 * that stands for them. 0, or -1 (g then holds part of them: invalidate or drop it). */
static int keep_child(graph_t *g, const graph_t *child)
{
    for (size_t i = 0; i < child->count; i++) {
        if (keep_node(g, &child->nodes[i]) != 0)
            return -1;
        g->nodes[g->count - 1].inner = 1;
    }
    if (keep_bytes(g, 0, 0, NULL, 0, NULL, 0) != 0)
        return -1;
    g->nodes[g->count - 1].type = CU_GRAPH_NODE_TYPE_GRAPH;
    return 0;
}

/* Adds m to g's memory (a reference). 0 or -1. */
static int hold_mem(graph_t *g, graph_mem_t *m)
{
    if (cr_array_room((void **)&g->mems, &g->mem_cap, g->mem_count, sizeof *g->mems))
        return -1;
    g->mems[g->mem_count++] = m;
    m->refs++;
    return 0;
}

/* A copy of g's nodes as a graph of its own (same account, same memory), or NULL. */
static graph_t *graph_copy(const graph_t *g)
{
    graph_t *copy = graph_new(g->account);
    for (size_t i = 0; copy && i < g->count; i++) {
        if (keep_node(copy, &g->nodes[i]) != 0) {
            graph_unref(copy);
            copy = NULL;
        }
    }
    for (size_t i = 0; copy && i < g->mem_count; i++) {
        if (hold_mem(copy, g->mems[i]) != 0) {
            graph_unref(copy);
            copy = NULL;
        }
    }
    return copy;
}

/* Memory for g: allocated and charged to the tenant now (CUDA_ERROR_OUT_OF_MEMORY past its
 * quota), held by g, with an empty node standing for its allocation (its last node). */
static CUresult graph_alloc(cr_session_t *s, graph_t *g, uint64_t bytes, CUdeviceptr *out)
{
    if (!bytes || bytes > SIZE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    graph_mem_t *m = calloc(1, sizeof *m);
    CUresult r = m ? cr_session_charge(s, bytes) : CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        free(m);
        return r;
    }
    CUdeviceptr ptr = 0;
    if ((r = cr_session_backend(s)->d.cuMemAlloc_v2(&ptr, (size_t)bytes)) != CUDA_SUCCESS) {
        cr_session_uncharge(s, bytes);
        free(m);
        return r;
    }
    cr_session_track_alloc(s, ptr, (size_t)bytes);
    *m = (graph_mem_t){0, s, ptr, 0};
    int held = hold_mem(g, m) == 0;
    if (!held || keep_bytes(g, 0, 0, NULL, 0, NULL, 0) != 0) {
        if (held)
            g->mem_count--;                            /* m, the last */
        cr_session_free_when_idle(s, ptr, NULL, NULL); /* nothing used it yet */
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->nodes[g->count - 1].type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    *out = ptr;
    return CUDA_SUCCESS;
}

/* Memory g allocated that no free node of it frees yet, or NULL. */
static graph_mem_t *graph_mem_of(const graph_t *g, CUdeviceptr ptr)
{
    for (size_t i = 0; i < g->mem_count; i++)
        if (g->mems[i]->ptr == ptr && !g->mems[i]->freed_in_graph)
            return g->mems[i];
    return NULL;
}

static void reply_id(cr_request_t *req, CUresult r, uint64_t id);

/* A stream-ordered allocation or free on a capturing stream (the request's stream is in
 * the capture cap): an allocation becomes the graph's memory, allocated now and answered
 * at once; a free of such memory a free node. A free of other memory invalidates the
 * capture, as on a GPU. */
static void capture_memory(cr_request_t *req, capture_t *cap)
{
    uint64_t bytes, ptr;
    graph_t *g = cap->graph;
    if (req->hdr.opcode == CR_OP_cuMemFreeAsync) {
        graph_mem_t *m = cr_arg_u64(req, 0, &ptr) ? NULL : graph_mem_of(g, ptr);
        if (!m || keep_bytes(g, 0, 0, NULL, 0, NULL, 0) != 0) {
            g->invalid = 1;
        } else {
            m->freed_in_graph = 1;
            g->nodes[g->count - 1].type = CU_GRAPH_NODE_TYPE_MEM_FREE;
        }
        cr_request_finish(req, m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
        return;
    }
    CUdeviceptr got = 0;
    CUresult r = g->invalid                   ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                 : cr_arg_u64(req, 1, &bytes) ? CUDA_ERROR_INVALID_VALUE
                                              : graph_alloc(req->session, g, bytes, &got);
    reply_id(req, r, got);
}

/* The argument naming the stream of a stream-ordered allocation or free, or -1. */
static int memory_stream_arg(uint16_t opcode)
{
    switch (opcode) {
    case CR_OP_cuMemAllocAsync: /* [out, bytes, stream] */
        return 2;
    case CR_OP_cuMemAllocFromPoolAsync: /* [out, bytes, pool, stream]: the graph's own pool */
        return 3;
    case CR_OP_cuMemFreeAsync: /* [address, stream] */
        return 1;
    default:
        return -1;
    }
}

int cr_graph_capture(cr_request_t *req)
{
    int arg = stream_arg(req->hdr.opcode), mem_arg = memory_stream_arg(req->hdr.opcode);
    uint64_t sid, event;
    captures_t *c = captures(req->session, 0);
    if ((arg < 0 && mem_arg < 0) || !c ||
        cr_arg_u64(req, (uint32_t)(arg < 0 ? mem_arg : arg), &sid))
        return 0;
    capture_t *cap = capture_of(c, sid);
    uint16_t op = req->hdr.opcode;
    if (mem_arg >= 0) {
        if (!cap)
            return 0;
        capture_memory(req, cap);
        return 1;
    }
    if (op == CR_OP_cuStreamWaitEvent) {
        mark_t *m = cr_arg_u64(req, 1, &event) ? NULL : mark_of(c, event);
        if (m && !cap) { /* the stream joins the capture the event was recorded in */
            capture_t *origin = NULL;
            for (size_t i = 0; i < c->count && !origin; i++)
                if (c->caps[i].graph == m->graph)
                    origin = &c->caps[i];
            if (!origin || !cr_session_stream(req->session, sid))
                return 0; /* an unknown stream: the wait fails as usual */
            capture_t joined = {sid, origin->origin, m->graph};
            if (c->count >= MAX_CAPTURING ||
                cr_array_room((void **)&c->caps, &c->cap, c->count, sizeof *c->caps))
                m->graph->invalid = 1;
            else
                c->caps[c->count++] = joined;
            cr_request_free(req);
            return 1;
        }
        if (cap && m && m->graph == cap->graph) { /* kept by the order of the nodes */
            cr_request_free(req);
            return 1;
        }
    }
    if (op == CR_OP_cuEventRecord || op == CR_OP_cuEventRecordWithFlags) {
        mark_t *m = cr_arg_u64(req, 0, &event) ? NULL : mark_of(c, event);
        if (cap && m) {
            m->graph = cap->graph;
        } else if (cap) {
            if (cr_array_room((void **)&c->marks, &c->mark_cap, c->mark_count, sizeof *c->marks))
                cap->graph->invalid = 1;
            else
                c->marks[c->mark_count++] = (mark_t){event, cap->graph};
        } else if (m) { /* recorded outside any capture now */
            *m = c->marks[--c->mark_count];
        }
    }
    if (!cap)
        return 0;
    if (keep(cap->graph, req, arg) != 0 && !cap->graph->invalid) {
        cap->graph->invalid = 1;
        CR_WARN("session %llu: a capture past %u nodes or %llu MiB kept by the session's "
                "graphs, or out of memory: invalidated",
                (unsigned long long)cr_session_id(req->session), MAX_NODES,
                (unsigned long long)(MAX_SESSION_BYTES >> 20));
    }
    cr_request_free(req);
    return 1;
}

/* Ends the capture of graph g on every stream and forgets its events. */
static void end_capture(captures_t *c, graph_t *g)
{
    size_t k = 0;
    for (size_t i = 0; i < c->count; i++)
        if (c->caps[i].graph != g)
            c->caps[k++] = c->caps[i];
    c->count = k;
    k = 0;
    for (size_t i = 0; i < c->mark_count; i++)
        if (c->marks[i].graph != g)
            c->marks[k++] = c->marks[i];
    c->mark_count = k;
}

void cr_graph_end_captures(cr_session_t *s)
{
    captures_t *c = captures(s, 0);
    while (c && c->count) {
        graph_t *g = c->caps[0].graph;
        end_capture(c, g);
        graph_unref(g);
    }
}

void cr_graph_release_all(cr_session_t *s)
{
    captures_t *c = captures(s, 0);
    if (!c)
        return;
    cr_graph_end_captures(s);
    free(c->caps);
    free(c->marks);
    free(c);
    *cr_session_slot(s, CR_SLOT_GRAPHS) = NULL;
}

/* --- the messages ---------------------------------------------------------------------------- */

static void reply_id(cr_request_t *req, CUresult r, uint64_t id)
{
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 1) == 0) {
        msgpack_pack_uint64(&reply.pk, id);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

/* Gives g (one reference) a handle of the session and replies its id; frees g when that
 * fails. */
static void reply_graph(cr_request_t *req, graph_t *g)
{
    cr_session_t *s = req->session;
    uint64_t id = 0;
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (g && cr_session_add_handle(s, CR_HT_CUgraph, g, 0, &id) == 0) {
        r = CUDA_SUCCESS;
        if (cr_session_handle_attach(s, id, 0, g, graph_unref) != 0) {
            cr_session_remove_handle(s, id);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (r != CUDA_SUCCESS)
        graph_unref(g);
    reply_id(req, r, r == CUDA_SUCCESS ? id : 0);
}

void cr_srv_cuStreamBeginCapture_v2(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t sid, mode;
    if (req->argc != 2 || cr_arg_u64(req, 0, &sid) || cr_arg_u64(req, 1, &mode) ||
        mode > CU_STREAM_CAPTURE_MODE_RELAXED) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    if (sid == 0) { /* the legacy stream synchronizes with every other */
        cr_request_finish(req, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        return;
    }
    if (!cr_session_stream(s, sid)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_HANDLE);
        return;
    }
    captures_t *c = captures(s, 1);
    if (c && capture_of(c, sid)) {
        cr_request_finish(req, CUDA_ERROR_ILLEGAL_STATE);
        return;
    }
    graph_t *g = c && c->count < MAX_CAPTURING ? graph_new(&c->bytes) : NULL;
    if (!g || cr_array_room((void **)&c->caps, &c->cap, c->count, sizeof *c->caps)) {
        graph_unref(g);
        cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    c->caps[c->count++] = (capture_t){sid, sid, g};
    cr_request_finish(req, CUDA_SUCCESS);
}

void cr_srv_cuStreamEndCapture(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t sid;
    if (req->argc != 1 || cr_arg_u64(req, 0, &sid)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    captures_t *c = captures(s, 0);
    capture_t *cap = capture_of(c, sid);
    if (!cap) {
        reply_id(req, CUDA_ERROR_ILLEGAL_STATE, 0);
        return;
    }
    graph_t *g = cap->graph;
    if (cap->origin != sid) { /* only the stream that began it ends it */
        g->invalid = 1;
        reply_id(req, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, 0);
        return;
    }
    end_capture(c, g);
    if (g->invalid) {
        graph_unref(g);
        reply_id(req, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 0);
        return;
    }
    reply_graph(req, g); /* the capture's reference becomes the handle's */
}

void cr_srv_cuGraphInstantiateWithFlags(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t gid, flags, id = 0;
    if (req->argc != 2 || cr_arg_u64(req, 0, &gid) || cr_arg_u64(req, 1, &flags)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    graph_t *g = cr_session_handle(s, CR_HT_CUgraph, gid);
    if (!g) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, 0);
        return;
    }
    /* freeing at launch, uploading and node priorities change nothing here; a graph that
     * the device launches needs the driver's own */
    const uint64_t known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                           CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
                           CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) {
        reply_id(req, CUDA_ERROR_NOT_SUPPORTED, 0);
        return;
    }
    if (flags & ~known) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, 0);
        return;
    }
    /* a snapshot: nodes added to the graph later are not the executable graph's */
    exec_t *e = malloc(sizeof *e);
    graph_t *copy = e ? graph_copy(g) : NULL;
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (copy && cr_session_add_handle(s, CR_HT_CUgraphExec, e, 0, &id) == 0) {
        *e = (exec_t){copy, g->serial, flags};
        r = CUDA_SUCCESS;
        if (cr_session_handle_attach(s, id, 0, e, exec_free) != 0) {
            cr_session_remove_handle(s, id);
            exec_free(e);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    } else {
        graph_unref(copy);
        free(e);
    }
    reply_id(req, r, id);
}

/* Node i of g as a request of session s, its stream replaced by `sid`, decoded into zone. */
static cr_request_t *node_request(cr_session_t *s, const node_t *n, uint64_t sid,
                                  msgpack_zone *zone, uint64_t call_id)
{
    size_t off = 0;
    msgpack_object root;
    if (msgpack_unpack((const char *)n->bytes, n->body_len, &off, zone, &root) !=
            MSGPACK_UNPACK_SUCCESS ||
        root.type != MSGPACK_OBJECT_ARRAY || root.via.array.size <= n->stream_arg)
        return NULL;
    msgpack_sbuffer body;
    msgpack_sbuffer_init(&body);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &body, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, root.via.array.size);
    for (uint32_t i = 0; i < root.via.array.size; i++) {
        if (i == n->stream_arg)
            msgpack_pack_uint64(&pk, sid);
        else
            msgpack_pack_object(&pk, root.via.array.ptr[i]);
    }
    cr_frame_header_t h = {0};
    h.opcode = n->opcode;
    h.flags = CR_FRAME_ASYNC;
    h.call_id = call_id;
    h.body_len = (uint32_t)body.size;
    h.bulk_len = n->bulk_len;
    cr_request_t *req = body.size <= UINT32_MAX ? cr_request_new(s, &h) : NULL;
    if (req) {
        memcpy(req->body, body.data, body.size);
        if (n->bulk_len)
            memcpy(req->bulk, n->bytes + n->body_len, n->bulk_len);
        if (cr_request_decode(req, zone) != 0) {
            cr_request_free(req);
            req = NULL;
        }
    }
    msgpack_sbuffer_destroy(&body);
    return req;
}

/* [executable graph, stream]: the graph's nodes, dispatched in order on that stream, or
 * kept by the capture that stream is under. */
void cr_srv_cuGraphLaunch(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t eid, sid;
    if (req->argc != 2 || cr_arg_u64(req, 0, &eid) || cr_arg_u64(req, 1, &sid)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    exec_t *e = cr_session_handle(s, CR_HT_CUgraphExec, eid);
    if (!e || !cr_session_stream(s, sid)) {
        cr_request_finish(req, e ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE);
        return;
    }
    graph_t *g = e->graph;
    captures_t *c = captures(s, 0);
    capture_t *cap = capture_of(c, sid);
    if (cap) { /* launched into a capture: a child graph node of that capture's graph */
        if (g->mem_count || keep_child(cap->graph, g) != 0)
            cap->graph->invalid = 1;
        cr_request_free(req);
        return;
    }
    g->refs++; /* a node's replay cannot destroy it, but keep that true */
    runner_t run = __atomic_load_n(&run_node, __ATOMIC_ACQUIRE);
    msgpack_zone zone;
    msgpack_zone_init(&zone, 2048);
    uint64_t call_id = req->hdr.call_id;
    cr_request_free(req);
    for (size_t i = 0; i < g->count; i++) {
        if (g->nodes[i].opcode == 0 || g->nodes[i].disabled) /* runs as an empty node */
            continue;
        cr_request_t *node = node_request(s, &g->nodes[i], sid, &zone, call_id);
        if (!node) {
            cr_session_defer_error(s, CUDA_ERROR_OUT_OF_MEMORY);
            break;
        }
        if (!cr_request_is_launch(node))
            cr_sched_flush(s); /* launches in a measured batch are consecutive */
        run(node);
        msgpack_zone_clear(&zone);
    }
    msgpack_zone_destroy(&zone);
    graph_unref(g);
}

void cr_srv_cuGraphUpload(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t eid, sid;
    CUresult r = CUDA_SUCCESS; /* nothing to place on the device ahead of the launch */
    if (req->argc != 2 || cr_arg_u64(req, 0, &eid) || cr_arg_u64(req, 1, &sid) ||
        !cr_session_handle(s, CR_HT_CUgraphExec, eid))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!cr_session_stream(s, sid))
        r = CUDA_ERROR_INVALID_HANDLE;
    cr_request_finish(req, r);
}

static void destroy(cr_request_t *req, uint8_t type)
{
    cr_session_t *s = req->session;
    uint64_t id;
    if (req->argc != 1 || cr_arg_u64(req, 0, &id) || !cr_session_handle(s, type, id)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    cr_session_remove_handle(s, id); /* its executable graphs keep the graph's nodes */
    cr_request_finish(req, CUDA_SUCCESS);
}

void cr_srv_cuGraphExecDestroy(cr_request_t *req)
{
    destroy(req, CR_HT_CUgraphExec);
}

void cr_srv_cuGraphDestroy(cr_request_t *req)
{
    destroy(req, CR_HT_CUgraph);
}

/* --- graphs built node by node ---------------------------------------------------------------- */

/* [flags] -> an empty graph */
void cr_srv_cuGraphCreate(cr_request_t *req)
{
    uint64_t flags;
    captures_t *c = captures(req->session, 1);
    if (req->argc != 1 || cr_arg_u64(req, 0, &flags) || flags != 0) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    reply_graph(req, c ? graph_new(&c->bytes) : NULL);
}

/* [graph] -> a copy of it (its nodes have no handles in the copy) */
void cr_srv_cuGraphClone(cr_request_t *req)
{
    uint64_t id;
    graph_t *g = req->argc == 1 && !cr_arg_u64(req, 0, &id)
                     ? cr_session_handle(req->session, CR_HT_CUgraph, id)
                     : NULL;
    if (!g) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, 0);
        return;
    }
    reply_graph(req, graph_copy(g));
}

/* The node a node id names in graph g, or NULL. */
static node_ref_t *node_of(cr_session_t *s, const graph_t *g, const msgpack_object *o)
{
    uint64_t id;
    node_ref_t *n = cr_obj_u64(o, &id) ? NULL : cr_session_handle(s, CR_HT_CUgraphNode, id);
    return n && n->graph == g ? n : NULL;
}

/* Dependencies must be nodes of g; added before the new node, they already run before it. */
static int deps_ok(cr_session_t *s, const graph_t *g, const msgpack_object *o)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > g->count)
        return 0;
    for (uint32_t i = 0; i < o->via.array.size; i++)
        if (!node_of(s, g, &o->via.array.ptr[i]))
            return 0;
    return 1;
}

/* Memory a memset or copy node names must be the session's when it is added (and again at
 * each launch, when the node runs as a request). */
static CUresult node_memory_ok(cr_session_t *s, uint16_t opcode, const msgpack_object_array *a)
{
    uint64_t v[6] = {0};
    for (uint32_t i = 0; i < a->size && i < 6; i++)
        if (cr_obj_u64(&a->ptr[i], &v[i]))
            return CUDA_ERROR_INVALID_VALUE;
    unsigned elem = 1;
    switch (opcode) {
    case CR_OP_cuMemsetD32Async:
        elem += 2; /* fall through */
    case CR_OP_cuMemsetD16Async:
        elem += 1;              /* fall through */
    case CR_OP_cuMemsetD8Async: /* [dst, value, count, stream] */
        return v[2] <= UINT64_MAX / elem && cr_session_owns(s, v[0], v[2] * elem)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    case CR_OP_cuMemsetD2D32Async:
        elem += 2; /* fall through */
    case CR_OP_cuMemsetD2D16Async:
        elem += 1;                  /* fall through */
    case CR_OP_cuMemsetD2D8Async: { /* [dst, pitch, value, width, height, stream] */
        uint64_t row = v[3] * elem;
        if (v[3] > UINT64_MAX / elem || (v[4] > 1 && v[1] < row) ||
            (v[4] > 1 && v[1] > (UINT64_MAX - row) / (v[4] - 1)))
            return CUDA_ERROR_INVALID_VALUE;
        return !v[4] || cr_session_owns(s, v[0], v[1] * (v[4] - 1) + row)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    }
    case CR_OP_cuMemcpyDtoDAsync_v2: /* [dst, src, bytes, stream] */
        return cr_session_owns(s, v[0], v[2]) && cr_session_owns(s, v[1], v[2])
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_SUCCESS;
    }
}

/* What kind of node a kept request is: nodes may change their arguments, not their kind. */
static int node_kind(uint16_t opcode)
{
    switch (opcode) {
    case CR_OP_cuMemsetD8Async:
    case CR_OP_cuMemsetD16Async:
    case CR_OP_cuMemsetD32Async:
    case CR_OP_cuMemsetD2D8Async:
    case CR_OP_cuMemsetD2D16Async:
    case CR_OP_cuMemsetD2D32Async:
        return CR_OP_cuMemsetD8Async; /* one kind: a memset may change its width */
    default:
        return opcode;
    }
}

/* The arguments of a node of kind `opcode` (as cuGraphAddNode and cuGraphNodeSetParams
 * carry them, opcode 0 for an empty node): well formed, and naming only what the session
 * has (a kernel node's function, a memset's or copy's memory, a host node's id); *arg gets
 * its stream argument's place. */
static CUresult check_node(cr_session_t *s, uint64_t opcode, const msgpack_object *args, int *arg)
{
    *arg = opcode <= UINT16_MAX ? stream_arg((uint16_t)opcode) : -1;
    if (opcode == 0)
        return (*arg = 0, CUDA_SUCCESS);
    if (*arg < 0 || args->type != MSGPACK_OBJECT_ARRAY || args->via.array.size <= (unsigned)*arg)
        return CUDA_ERROR_INVALID_VALUE;
    const msgpack_object_array *a = &args->via.array;
    uint64_t v;
    switch (opcode) {
    case CR_OP_cuLaunchKernel: { /* a function of the session's */
        CUfunction f;
        const cr_kernel_param_t *kp;
        uint32_t count;
        return cr_obj_u64(&a->ptr[0], &v) ? CUDA_ERROR_INVALID_VALUE
                                          : cr_session_kernel_params(s, v, &f, &kp, &count);
    }
    case CR_OP_cuLaunchHostFunc: /* [stream, host id]: the client keeps the function */
        return a->size == 2 && !cr_obj_u64(&a->ptr[1], &v) && v ? CUDA_SUCCESS
                                                                : CUDA_ERROR_INVALID_VALUE;
    default:
        return node_memory_ok(s, (uint16_t)opcode, a);
    }
}

/* Packs a node's arguments as the request it stands for keeps them: *body (free it). */
static int pack_args(uint16_t opcode, const msgpack_object *args, msgpack_sbuffer *body)
{
    msgpack_sbuffer_init(body);
    msgpack_packer pk;
    msgpack_packer_init(&pk, body, msgpack_sbuffer_write);
    if (opcode != 0)
        msgpack_pack_object(&pk, *args);
    return body->size <= UINT32_MAX ? 0 : -1;
}

/* Appends a node of these arguments (checked) to g. 0 or -1. */
static int keep_args(graph_t *g, uint16_t opcode, int arg, const msgpack_object *args,
                     const void *bulk, uint64_t bulk_len)
{
    msgpack_sbuffer body;
    int err = pack_args(opcode, args, &body) ||
              keep_bytes(g, opcode, arg, body.data, (uint32_t)body.size, bulk, bulk_len);
    msgpack_sbuffer_destroy(&body);
    return err ? -1 : 0;
}

/* Node `index` of g takes these arguments (checked, of its kind). 0 or -1 (then unchanged). */
static int replace_args(graph_t *g, size_t index, uint16_t opcode, int arg,
                        const msgpack_object *args, const void *bulk, uint64_t bulk_len)
{
    node_t *node = &g->nodes[index];
    msgpack_sbuffer body;
    uint64_t old = (uint64_t)node->body_len + node->bulk_len;
    uint64_t size = bulk_len;
    uint8_t *bytes = NULL;
    int err = pack_args(opcode, args, &body);
    size += body.size;
    if (!err && *g->account - old + size > MAX_SESSION_BYTES)
        err = -1;
    if (!err && !(bytes = malloc(size ? size : 1)))
        err = -1;
    if (!err) {
        if (body.size)
            memcpy(bytes, body.data, body.size);
        if (bulk_len)
            memcpy(bytes + body.size, bulk, bulk_len);
        free(node->bytes);
        *node = (node_t){opcode, (uint8_t)arg, node->inner, (uint32_t)body.size, bulk_len, bytes};
        g->bytes = g->bytes - old + size;
        *g->account = *g->account - old + size;
    }
    msgpack_sbuffer_destroy(&body);
    return err;
}

/* The handle of node `index` of g, a child of g's handle: the one given out before, or a
 * new one. */
static CUresult node_handle(cr_session_t *s, graph_t *g, size_t index, uint64_t *id)
{
    if (index < g->node_id_cap && g->node_ids[index] &&
        cr_session_handle(s, CR_HT_CUgraphNode, g->node_ids[index])) {
        *id = g->node_ids[index];
        return CUDA_SUCCESS;
    }
    size_t cap = g->node_id_cap;
    if (index >= cap) {
        size_t want = cap ? cap : 16;
        while (want <= index)
            want *= 2;
        uint64_t *ids = realloc(g->node_ids, want * sizeof *ids);
        if (!ids)
            return CUDA_ERROR_OUT_OF_MEMORY;
        memset(ids + cap, 0, (want - cap) * sizeof *ids);
        g->node_ids = ids;
        g->node_id_cap = want;
    }
    node_ref_t *n = malloc(sizeof *n);
    if (!n || cr_session_add_child_handle(s, CR_HT_CUgraphNode, n, g, id) != 0) {
        free(n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *n = (node_ref_t){g, index};
    if (cr_session_handle_attach(s, *id, 0, n, free) != 0) {
        cr_session_remove_handle(s, *id);
        free(n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->node_ids[index] = *id;
    return CUDA_SUCCESS;
}

/* Replies the handle of node `index` of g, and `value` after it when with_value. */
static void reply_node_and(cr_request_t *req, graph_t *g, size_t index, uint64_t value,
                           int with_value)
{
    uint64_t id = 0;
    CUresult r = node_handle(req->session, g, index, &id);
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, with_value ? 2 : 1) == 0) {
        msgpack_pack_uint64(&reply.pk, r == CUDA_SUCCESS ? id : 0);
        if (with_value)
            msgpack_pack_uint64(&reply.pk, value);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

static void reply_node(cr_request_t *req, graph_t *g, size_t index)
{
    reply_node_and(req, g, index, 0, 0);
}

/* [graph] -> the number of its nodes; [graph, true] -> [that number, [their handles]] */
void cr_srv_cuGraphGetNodes(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t id, with_handles = 0;
    graph_t *g = (req->argc == 1 || (req->argc == 2 && !cr_arg_u64(req, 1, &with_handles))) &&
                         !cr_arg_u64(req, 0, &id)
                     ? cr_session_handle(s, CR_HT_CUgraph, id)
                     : NULL;
    size_t count = 0; /* a child graph counts as one node: the empty node that stands for it */
    for (size_t i = 0; g && i < g->count; i++)
        count += !g->nodes[i].inner;
    if (!g || !with_handles) {
        reply_id(req, g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE, count);
        return;
    }
    uint64_t *ids = count ? malloc(count * sizeof *ids) : NULL;
    CUresult r = count && !ids ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    for (size_t i = 0, k = 0; r == CUDA_SUCCESS && i < g->count; i++)
        if (!g->nodes[i].inner)
            r = node_handle(s, g, i, &ids[k++]);
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 2) == 0) {
        msgpack_pack_uint64(&reply.pk, count);
        msgpack_pack_array(&reply.pk, r == CUDA_SUCCESS ? (uint32_t)count : 0);
        for (size_t k = 0; r == CUDA_SUCCESS && k < count; k++)
            msgpack_pack_uint64(&reply.pk, ids[k]);
        cr_reply_send(req, &reply, 0);
    }
    free(ids);
    cr_request_free(req);
}

/* [node] -> its CUgraphNodeType */
void cr_srv_cuGraphNodeGetType(cr_request_t *req)
{
    uint64_t id;
    node_ref_t *n = req->argc == 1 && !cr_arg_u64(req, 0, &id)
                        ? cr_session_handle(req->session, CR_HT_CUgraphNode, id)
                        : NULL;
    if (!n || n->index >= n->graph->count) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, 0);
        return;
    }
    const node_t *node = &n->graph->nodes[n->index];
    uint64_t type;
    switch (node->opcode) {
    case 0:
        type = node->type ? node->type : CU_GRAPH_NODE_TYPE_EMPTY;
        break;
    case CR_OP_cuLaunchKernel:
        type = CU_GRAPH_NODE_TYPE_KERNEL;
        break;
    case CR_OP_cuMemcpyDtoDAsync_v2:
        type = CU_GRAPH_NODE_TYPE_MEMCPY;
        break;
    case CR_OP_cuLaunchHostFunc:
        type = CU_GRAPH_NODE_TYPE_HOST;
        break;
    case CR_OP_cuEventRecord:
    case CR_OP_cuEventRecordWithFlags:
        type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
        break;
    case CR_OP_cuStreamWaitEvent:
        type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
        break;
    default: /* the memsets; captured launches of other forms are kernels */
        type = node_kind(node->opcode) == CR_OP_cuMemsetD8Async ? CU_GRAPH_NODE_TYPE_MEMSET
                                                                : CU_GRAPH_NODE_TYPE_KERNEL;
        break;
    }
    reply_id(req, CUDA_SUCCESS, type);
}

/* [graph, dependencies, opcode, arguments] + bulk -> a node: the request `opcode` with
 * these arguments (its stream argument a placeholder), kept as a capture keeps it; opcode 0
 * is an empty node. Every Add*Node of the client arrives as this. */
void cr_srv_cuGraphAddNode(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t gid, opcode;
    graph_t *g = req->argc == 4 && !cr_arg_u64(req, 0, &gid) && !cr_arg_u64(req, 2, &opcode)
                     ? cr_session_handle(s, CR_HT_CUgraph, gid)
                     : NULL;
    int arg = 0;
    CUresult r = !g || !deps_ok(s, g, &req->args[1]) ? CUDA_ERROR_INVALID_VALUE
                                                     : check_node(s, opcode, &req->args[3], &arg);
    if (r != CUDA_SUCCESS) {
        reply_id(req, r, 0);
        return;
    }
    if (keep_args(g, (uint16_t)opcode, arg, &req->args[3], req->bulk, req->hdr.bulk_len) != 0) {
        reply_id(req, CUDA_ERROR_OUT_OF_MEMORY, 0);
        return;
    }
    reply_node(req, g, g->count - 1);
}

/* [graph, dependencies, child graph] -> a node standing for a copy of the child's nodes */
void cr_srv_cuGraphAddChildGraphNode(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t gid, cid;
    graph_t *g = req->argc == 3 && !cr_arg_u64(req, 0, &gid)
                     ? cr_session_handle(s, CR_HT_CUgraph, gid)
                     : NULL;
    graph_t *child =
        g && !cr_arg_u64(req, 2, &cid) ? cr_session_handle(s, CR_HT_CUgraph, cid) : NULL;
    if (!g || !child || child == g || !deps_ok(s, g, &req->args[1])) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, 0);
        return;
    }
    if (child->mem_count) { /* a graph with memory nodes cannot be a child, as on a GPU */
        reply_id(req, CUDA_ERROR_NOT_SUPPORTED, 0);
        return;
    }
    size_t before = g->count;
    if (keep_child(g, child) != 0) { /* nothing of it stays */
        while (g->count > before) {
            node_t *n = &g->nodes[--g->count];
            g->bytes -= (uint64_t)n->body_len + n->bulk_len + NODE_COST;
            *g->account -= (uint64_t)n->body_len + n->bulk_len + NODE_COST;
            free(n->bytes);
        }
        reply_id(req, CUDA_ERROR_OUT_OF_MEMORY, 0);
        return;
    }
    reply_node(req, g, g->count - 1);
}

/* [graph, from nodes, to nodes]: edges from a node to one added after it already hold;
 * one to a node added before it would need the nodes reordered, which is not done. */
void cr_srv_cuGraphAddDependencies(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t gid;
    graph_t *g = req->argc == 3 && !cr_arg_u64(req, 0, &gid)
                     ? cr_session_handle(s, CR_HT_CUgraph, gid)
                     : NULL;
    const msgpack_object *from = g ? &req->args[1] : NULL, *to = g ? &req->args[2] : NULL;
    if (!g || from->type != MSGPACK_OBJECT_ARRAY || to->type != MSGPACK_OBJECT_ARRAY ||
        from->via.array.size != to->via.array.size) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    CUresult r = CUDA_SUCCESS;
    for (uint32_t i = 0; i < from->via.array.size && r == CUDA_SUCCESS; i++) {
        node_ref_t *a = node_of(s, g, &from->via.array.ptr[i]);
        node_ref_t *b = node_of(s, g, &to->via.array.ptr[i]);
        if (!a || !b || a == b)
            r = CUDA_ERROR_INVALID_VALUE;
        else if (a->index > b->index)
            r = CUDA_ERROR_NOT_SUPPORTED;
    }
    cr_request_finish(req, r);
}

/* [executable graph (0: the node's own graph), node, opcode, arguments] + bulk: the node
 * takes these arguments, checked as when it was added; it stays of its kind. In an
 * executable graph its copy of the node changes, from its next launch on; in the graph,
 * the executable graphs made from it later have them. */
void cr_srv_cuGraphNodeSetParams(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t eid, nid, opcode;
    node_ref_t *n = req->argc == 4 && !cr_arg_u64(req, 0, &eid) && !cr_arg_u64(req, 1, &nid) &&
                            !cr_arg_u64(req, 2, &opcode)
                        ? cr_session_handle(s, CR_HT_CUgraphNode, nid)
                        : NULL;
    exec_t *e = n && eid ? cr_session_handle(s, CR_HT_CUgraphExec, eid) : NULL;
    graph_t *g = !n ? NULL : !eid ? n->graph : e && n->graph->serial == e->source ? e->graph : NULL;
    int arg = 0;
    CUresult r = !g || n->index >= g->count || opcode == 0 || opcode > UINT16_MAX ||
                         node_kind(g->nodes[n->index].opcode) != node_kind((uint16_t)opcode)
                     ? CUDA_ERROR_INVALID_VALUE
                     : check_node(s, opcode, &req->args[3], &arg);
    if (r == CUDA_SUCCESS && replace_args(g, n->index, (uint16_t)opcode, arg, &req->args[3],
                                          req->bulk, req->hdr.bulk_len) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    cr_request_finish(req, r);
}

/* [executable graph, graph] -> CUgraphExecUpdateResult: the executable graph takes the
 * graph's nodes from its next launch on, when the two have the same nodes in the same
 * order, each of the same kind (kernel nodes may change function and arguments, memsets
 * and copies their memory and values); else it is left as it was. Its nodes keep the
 * handles of the graph it was made from, for cuGraphExecNodeSetParams. */
void cr_srv_cuGraphExecUpdate_v2(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t eid, gid;
    exec_t *e = req->argc == 2 && !cr_arg_u64(req, 0, &eid)
                    ? cr_session_handle(s, CR_HT_CUgraphExec, eid)
                    : NULL;
    graph_t *g = e && !cr_arg_u64(req, 1, &gid) ? cr_session_handle(s, CR_HT_CUgraph, gid) : NULL;
    if (!e || !g) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, CU_GRAPH_EXEC_UPDATE_ERROR);
        return;
    }
    if (g->invalid || g->count != e->graph->count) {
        reply_id(req, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
                 CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
        return;
    }
    for (size_t i = 0; i < g->count; i++) {
        const node_t *now = &e->graph->nodes[i], *next = &g->nodes[i];
        if (now->inner != next->inner) {
            reply_id(req, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
                     CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
            return;
        }
        if (now->opcode != next->opcode) {
            reply_id(req, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
                     CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
            return;
        }
    }
    graph_t *copy = graph_copy(g);
    if (!copy) {
        reply_id(req, CUDA_ERROR_OUT_OF_MEMORY, CU_GRAPH_EXEC_UPDATE_ERROR);
        return;
    }
    for (size_t i = 0; i < copy->count; i++) /* nodes turned off stay off */
        copy->nodes[i].disabled = e->graph->nodes[i].disabled;
    graph_unref(e->graph); /* a launch replaying it holds its own reference */
    e->graph = copy;
    reply_id(req, CUDA_SUCCESS, CU_GRAPH_EXEC_UPDATE_SUCCESS);
}

/* [graph] -> [[opcode, inner]...]: its nodes in the order they run (opcode 0: an empty
 * node; inner: a node of a child graph, which ends at the next empty node that is not),
 * for cuGraphDebugDotPrint. */
void cr_srv_cuGraphDebugDotPrint(cr_request_t *req)
{
    uint64_t id;
    graph_t *g = req->argc == 1 && !cr_arg_u64(req, 0, &id)
                     ? cr_session_handle(req->session, CR_HT_CUgraph, id)
                     : NULL;
    if (!g) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, CUDA_SUCCESS, 1) == 0) {
        msgpack_pack_array(&reply.pk, (uint32_t)g->count);
        for (size_t i = 0; i < g->count; i++) {
            msgpack_pack_array(&reply.pk, 2);
            msgpack_pack_uint16(&reply.pk, g->nodes[i].opcode);
            msgpack_pack_uint8(&reply.pk, g->nodes[i].inner);
        }
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

/* [graph, dependencies, bytes] -> [node, address]: device memory allocated and charged to
 * the tenant now (CUDA_ERROR_OUT_OF_MEMORY past its quota), the graph's from now on; the
 * node runs as an empty node. */
void cr_srv_cuGraphAddMemAllocNode(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t gid, bytes;
    graph_t *g = req->argc == 3 && !cr_arg_u64(req, 0, &gid) && !cr_arg_u64(req, 2, &bytes)
                     ? cr_session_handle(s, CR_HT_CUgraph, gid)
                     : NULL;
    if (!g || !deps_ok(s, g, &req->args[1])) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    CUdeviceptr ptr = 0;
    CUresult r = graph_alloc(s, g, bytes, &ptr);
    if (r != CUDA_SUCCESS)
        cr_request_finish(req, r);
    else
        reply_node_and(req, g, g->count - 1, ptr, 1);
}

/* [graph, dependencies, address] -> node: frees, with the graph, memory one of its
 * allocation nodes made; the node runs as an empty node. */
void cr_srv_cuGraphAddMemFreeNode(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t gid, ptr;
    graph_t *g = req->argc == 3 && !cr_arg_u64(req, 0, &gid) && !cr_arg_u64(req, 2, &ptr)
                     ? cr_session_handle(s, CR_HT_CUgraph, gid)
                     : NULL;
    graph_mem_t *m = g ? graph_mem_of(g, ptr) : NULL;
    if (!m || !deps_ok(s, g, &req->args[1])) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    if (keep_bytes(g, 0, 0, NULL, 0, NULL, 0) != 0) {
        cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    m->freed_in_graph = 1;
    g->nodes[g->count - 1].type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    reply_node(req, g, g->count - 1);
}

/* The node of an executable graph a request names ([executable graph, node, ...]): its
 * copy in the executable graph, or NULL. */
static node_t *exec_node(cr_request_t *req, uint32_t argc)
{
    cr_session_t *s = req->session;
    uint64_t eid, nid;
    exec_t *e = req->argc == argc && !cr_arg_u64(req, 0, &eid)
                    ? cr_session_handle(s, CR_HT_CUgraphExec, eid)
                    : NULL;
    node_ref_t *n =
        e && !cr_arg_u64(req, 1, &nid) ? cr_session_handle(s, CR_HT_CUgraphNode, nid) : NULL;
    return n && n->graph->serial == e->source && n->index < e->graph->count
               ? &e->graph->nodes[n->index]
               : NULL;
}

/* [executable graph, node, enabled]: a kernel, memset or copy node turned off runs as an
 * empty node from the next launch on, until turned on again. */
void cr_srv_cuGraphNodeSetEnabled(cr_request_t *req)
{
    node_t *n = exec_node(req, 3);
    uint64_t on;
    int kind = n ? node_kind(n->opcode) : 0;
    if (!n || cr_arg_u64(req, 2, &on) ||
        (kind != CR_OP_cuLaunchKernel && kind != CR_OP_cuLaunchKernelEx &&
         kind != CR_OP_cuLaunchCooperativeKernel && kind != CR_OP_cuMemsetD8Async &&
         kind != CR_OP_cuMemcpyDtoDAsync_v2)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    n->disabled = !on;
    cr_request_finish(req, CUDA_SUCCESS);
}

/* [executable graph, node] -> 1 when it runs, 0 when turned off */
void cr_srv_cuGraphNodeGetEnabled(cr_request_t *req)
{
    node_t *n = exec_node(req, 2);
    reply_id(req, n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE, n && !n->disabled);
}

/* [executable graph] -> the flags it was instantiated with */
void cr_srv_cuGraphExecGetFlags(cr_request_t *req)
{
    uint64_t id;
    exec_t *e = req->argc == 1 && !cr_arg_u64(req, 0, &id)
                    ? cr_session_handle(req->session, CR_HT_CUgraphExec, id)
                    : NULL;
    reply_id(req, e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE, e ? e->flags : 0);
}
