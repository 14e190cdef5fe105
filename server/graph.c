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
 * An executable graph whose nodes are all kernels, memsets, device copies and event records
 * and waits becomes, at its first launch, the driver's own graph (device_graph.c): the kept
 * requests, checked as their handlers check them, with the graph's edges (a child graph's
 * nodes with theirs, in its node's place); each launch rechecks what they name and is one
 * driver call, scheduled as one unit. Any other executable graph (a host node, say), and one whose
 * nodes would fail, is replayed: its kept requests, in the order they came, one after the
 * other on the stream the graph is launched on, each dispatched as if the client had just
 * sent it, so it is checked (handles, memory the tenant owns, launch layouts) and
 * scheduled (admission, device time) like any other, at every launch. The edges are kept,
 * with their data (CUgraphEdgeData; a replay runs them whole), for the driver's graph and
 * for the program to read back (cuGraphGetEdges and the like, cuGraphExecUpdate's
 * comparison): those the additions name, and a capture's, each captured node depending on
 * its stream's last node and on what the streams it waited on had done when their events
 * were recorded. An edge may lead to a node added earlier: replays and builds run the nodes
 * in an order that keeps every edge (run_order), and a cycle fails the instantiation. A
 * destroyed node leaves an empty place, so that every index stays. An executable graph is
 * a copy of its graph's nodes, whose nodes may be turned off (they then run as empty
 * nodes) and given other arguments.
 *
 * A conditional node is an empty node with its handle, kind and bodies (nest_t), graphs
 * of their own the program fills. Its value is set on the device, so a graph that has
 * one is never replayed: it is built as the driver's graph when instantiated, with the
 * handles its anchor numbered (device_graph.c), and built again after edits. The driver's
 * rules hold here too: one node per handle, no instantiation while a handle has none, one
 * executable graph at a time, no clone. A capture gives its graph a handle when
 * cuStreamGetCaptureInfo asks for it, so that the program can add nodes to it (a
 * conditional node, then cuStreamUpdateCaptureDependencies to go on after it).
 *
 * Streams join a capture by waiting on an event recorded in it (the client follows the same
 * rule, client/capture.c); such a wait, and a wait on an event of the same capture, are
 * dependencies the order already keeps, and are dropped. Such event records are replayed
 * but hidden: not nodes of the graph, as on a GPU. A child graph node holds a copy of its
 * graph (a nest_t, as a conditional node holds its bodies), which the program may get and
 * edit (cuGraphChildGraphNodeGetGraph) and a replay runs in the node's place; a graph
 * launched into a capture invalidates it, as on a GPU (the client refuses it first). A
 * child graph may be moved into its node instead (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE): the
 * node holds it, memory nodes and all, and its handle becomes the node's. A graph with
 * memory nodes keeps the driver's rules: no clone, no node or edge destroyed, one
 * executable graph at a time (each piece of its memory counts the executable graphs
 * holding it), none in a graph a node holds unless moved there with it. The capture ends
 * for every stream in it when the stream that began it ends it. A session's kept bytes are
 * bounded (MAX_SESSION_BYTES, MAX_NODES per graph; past them the capture is invalidated or
 * the node refused), and so are its streams capturing at once (MAX_CAPTURING; a capture
 * past it is refused).
 *
 * Messages: see client/graph.c. Replayed requests go to the router the executor hands over
 * at start-up (cr_graph_set_runner). Threads: the session's executor only (the slot's
 * discipline); graphs are freed with their handles, or at the session's end. */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "cr_server_hand.h"
#include "device_graph.h"
#include "log.h"
#include "memops.h"
#include "request.h"
#include "scheduler.h"
#include "session.h"

#define MAX_SESSION_BYTES ((uint64_t)256 << 20) /* kept by all of a session's graphs */
#define MAX_NODES (1u << 20)                    /* in one graph */
#define MAX_CAPTURING 1024                      /* streams capturing at once in a session */
/* what a node costs the server besides its bytes (its record, its handle's id), counted
 * in the session's kept bytes so that empty nodes are bounded too */
#define NODE_COST (sizeof(node_t) + sizeof(uint64_t))
/* what each body of a conditional node costs (its graph, its pointer, its handle's entry
 * in the session's table), counted likewise */
#define BODY_COST (sizeof(graph_t) + sizeof(graph_t *) + sizeof(cr_handle_t))
/* what a graph's anchor (a driver graph and its handles) is counted as, likewise */
#define ANCHOR_COST 4096u

typedef struct graph graph_t;

enum { BODY = 1, CHILD = 2 };
#define MAX_LEVEL 16 /* graphs held in graphs held in... (bounds every recursion here) */

/* The graphs a node holds, each a graph of its own that the program may fill or edit
 * through its handle (a child of the node's handle): a conditional node's bodies, with its
 * handle (made against its graph's anchor) and kind (CU_GRAPH_COND_TYPE_*); a child graph
 * node's graph, the one body (its handle, once given out, in `given`). */
typedef struct {
    uint64_t handle, given;
    uint32_t type, size;
    graph_t *bodies[];
} nest_t;

typedef struct {
    uint16_t opcode;    /* 0: an empty node */
    uint8_t stream_arg; /* which argument names the stream */
    uint32_t body_len;
    uint64_t bulk_len;
    uint8_t *bytes;   /* body, then bulk */
    uint8_t type;     /* an empty node's CUgraphNodeType: EMPTY (0 too), GRAPH, MEM_ALLOC, FREE */
    uint8_t disabled; /* an executable graph's node turned off: it runs as an empty node */
    uint8_t removed;  /* destroyed (cuGraphDestroyNode): an empty place that keeps the others'
                         indices, which node handles and executable graphs go by */
    uint8_t hidden;   /* an event record captured to join streams: replayed, but not a node
                         of the graph, as on a GPU (edges go past it) */
    uint32_t ndeps;   /* its edges: the nodes it depends on, by index */
    uint32_t *deps;
    uint8_t *kinds; /* each edge's data (edge_kind), by the same index; NULL: all default */
    nest_t *nest;   /* a conditional node's bodies, a child graph node's graph */
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
    unsigned execs; /* executable graphs holding it: the driver allows one at a time */
} graph_mem_t;

struct graph {
    unsigned refs;   /* its handle or its capture, and a launch replaying it */
    uint64_t serial; /* unique in the process: what an executable graph was made from */
    uint64_t copied; /* the serial of the graph it is a copy (a clone) of, 0 for none */
    node_t *nodes;
    size_t count, cap;
    uint64_t bytes;
    uint64_t *account;  /* the session's kept bytes */
    int invalid;        /* a node could not be kept */
    graph_mem_t **mems; /* made by its allocation nodes */
    size_t mem_count, mem_cap;
    uint64_t *node_ids; /* the handle id given out for each node, 0 for none yet */
    size_t node_id_cap;
    cr_graph_anchor_t *anchor; /* what its conditional handles are made against, or NULL */
    uint32_t handles;          /* a copy's: the anchor's handles when it was made */
    uint8_t owned;             /* a node's: BODY (a conditional node's) or CHILD (a child
                                  graph node's); 0 for a graph of its own */
    uint8_t level;             /* how deep it is held: 0 for a graph of its own */
    uint8_t moved;             /* a child graph moved into its node, not copied
                                  (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE): its handle is the
                                  node's, for no other use of its own */
    uint32_t conds;            /* its conditional nodes */
};

/* Whether an executable graph runs as the driver's graph (device_graph.c). */
typedef enum {
    DEVICE_UNTRIED, /* not yet launched since it was made (or since EDITED) */
    DEVICE_EDITED,  /* its nodes changed: the next launch replays them, the one after that
                       builds, so that a program that edits before every launch pays a
                       replay each time, not a build */
    DEVICE_BUILT,   /* `device` is its nodes as the driver's graph */
    DEVICE_NEVER,   /* it has work the driver's graph cannot take: replayed */
} device_state_t;

typedef struct {
    graph_t *graph;  /* its own copy of the nodes */
    uint64_t source; /* the serial of the graph it was made from */
    uint64_t flags;  /* it was instantiated with */
    device_state_t state;
    cr_device_graph_t *device;
    CUresult error;          /* why the driver's graph could not be built (NEVER) */
    cr_graph_anchor_t *held; /* a graph with conditional nodes: the anchor of the graph
                                it was made from, whose one executable graph it is */
} exec_t;

typedef struct {
    graph_t *graph; /* alive as long as the node's handle: the graph's handle is its parent */
    size_t index;   /* the node's place in the graph's order */
} node_ref_t;

/* Nodes by index that a node to add, or a capture's first node, depends on, and the data
 * of those edges (in idx's allocation). */
typedef struct {
    uint32_t *idx;
    uint32_t n;
    uint8_t *kinds;
} deps_t;

/* What edge data the dependencies of deps_read may carry: that of edges to a node that is
 * not a kernel, or to a kernel node (or to a capture's next node, checked when it comes). */
enum { DATA_TO_OTHER = 1, DATA_TO_KERNEL };

static int deps_read(cr_session_t *s, const graph_t *g, const msgpack_object *o, deps_t *d,
                     int data);
static void exec_build(cr_session_t *s, exec_t *e, uint64_t eid, uint64_t sid);
static CUresult node_handle(cr_session_t *s, graph_t *g, size_t index, uint64_t *id);

static uint64_t next_serial = 1; /* atomic */

typedef struct {
    uint64_t stream, origin;
    graph_t *graph;
    uint32_t *tails; /* what the stream's next node depends on: the last it captured, and */
    uint32_t ntails; /* what it joined since (event waits), by index */
    uint64_t into;   /* the handle id of the graph it captures into, 0: a graph of its own */
    uint8_t *kinds;  /* the data of those edges (given with cuStreamBeginCaptureToGraph or
                        cuStreamUpdateCaptureDependencies), by the same index; NULL: none */
} capture_t;

typedef struct {
    uint64_t event;
    graph_t *graph;
    uint32_t *tails; /* what the recording stream's next node would have depended on: */
    uint32_t ntails; /* what a stream that waits on the event depends on */
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

static void graph_unref(void *p);

static void nest_free(nest_t *c)
{
    for (uint32_t i = 0; c && i < c->size; i++)
        graph_unref(c->bodies[i]);
    free(c);
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
    for (size_t i = 0; i < g->count; i++) {
        free(g->nodes[i].bytes);
        free(g->nodes[i].deps);
        free(g->nodes[i].kinds);
        nest_free(g->nodes[i].nest);
    }
    cr_graph_anchor_unref(g->anchor);
    *g->account -= g->bytes;
    free(g->nodes);
    free(g);
}

static int mems_held(const graph_t *g, int delta);

static void exec_free(void *p)
{
    exec_t *e = p;
    cr_device_graph_free(e->device);
    if (e->held)
        cr_graph_anchor_drop_exec(e->held);
    mems_held(e->graph, -1);
    graph_unref(e->graph);
    free(e);
}

/* 1 when g has conditional nodes or handles: it runs only as the driver's graph (the
 * driver refuses to instantiate one with a handle no node has, and so does a build). */
static int conditional(const graph_t *g)
{
    return g->conds || cr_graph_anchor_count(g->anchor) > 0;
}

/* 1 when g or a graph it holds has memory nodes (a moved child graph may). The driver's
 * rules for such a graph: it is not cloned, none of its nodes or edges is destroyed, and
 * one executable graph of it lives at a time. */
static int holds_memory(const graph_t *g)
{
    if (g->mem_count)
        return 1;
    for (size_t i = 0; i < g->count; i++)
        for (uint32_t b = 0; g->nodes[i].nest && b < g->nodes[i].nest->size; b++)
            if (holds_memory(g->nodes[i].nest->bodies[b]))
                return 1;
    return 0;
}

/* Counts an executable graph's copy g as a holder of its memory (+1) or no more (-1);
 * with delta 0 only asks: 1 when an executable graph holds some of g's memory. */
static int mems_held(const graph_t *g, int delta)
{
    int held = 0;
    for (size_t i = 0; i < g->mem_count; i++) {
        held |= g->mems[i]->execs > 0;
        if (delta > 0)
            g->mems[i]->execs++;
        else if (delta < 0)
            g->mems[i]->execs--;
    }
    for (size_t i = 0; i < g->count; i++)
        for (uint32_t b = 0; g->nodes[i].nest && b < g->nodes[i].nest->size; b++)
            held |= mems_held(g->nodes[i].nest->bodies[b], delta);
    return held;
}

/* An order of g's nodes that runs every node after the nodes it depends on, into *order
 * (free it; NULL for an empty graph): the order of addition wherever the edges allow it
 * (every edge from a node to one added later), else a node's dependencies first.
 * CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE for a cycle, or out of memory. Iterative: a
 * chain of millions of nodes must not exhaust the stack. */
static CUresult run_order(const graph_t *g, uint32_t **order)
{
    *order = NULL;
    if (!g->count)
        return CUDA_SUCCESS;
    uint32_t *out = malloc(g->count * sizeof *out);
    uint8_t *state = calloc(g->count, 1);                 /* 0 not seen, 1 on the path, 2 placed */
    uint32_t(*path)[2] = malloc(g->count * sizeof *path); /* [node, next dependency] */
    CUresult r = out && state && path ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    size_t placed = 0;
    for (size_t root = 0; r == CUDA_SUCCESS && root < g->count; root++) {
        if (state[root])
            continue;
        size_t depth = 0;
        path[depth][0] = (uint32_t)root;
        path[depth++][1] = 0;
        state[root] = 1;
        while (depth && r == CUDA_SUCCESS) {
            uint32_t v = path[depth - 1][0];
            const node_t *n = &g->nodes[v];
            if (path[depth - 1][1] < n->ndeps) {
                uint32_t d = n->deps[path[depth - 1][1]++];
                if (state[d] == 1)
                    r = CUDA_ERROR_INVALID_VALUE; /* a cycle */
                else if (state[d] == 0) {
                    state[d] = 1;
                    path[depth][0] = d;
                    path[depth++][1] = 0;
                }
            } else {
                state[v] = 2;
                out[placed++] = v;
                depth--;
            }
        }
    }
    free(state);
    free(path);
    if (r != CUDA_SUCCESS) {
        free(out);
        return r;
    }
    *order = out;
    return CUDA_SUCCESS;
}

/* 1 when g and every graph its nodes hold have no cycle (then they have a run order). */
static int acyclic(const graph_t *g)
{
    uint32_t *order;
    if (run_order(g, &order) != CUDA_SUCCESS)
        return 0;
    free(order);
    for (size_t i = 0; i < g->count; i++)
        for (uint32_t b = 0; g->nodes[i].nest && !g->nodes[i].removed && b < g->nodes[i].nest->size;
             b++)
            if (!acyclic(g->nodes[i].nest->bodies[b]))
                return 0;
    return 1;
}

/* Its nodes changed (new arguments, turned on or off, updated): the driver's graph made of
 * them is stale. A graph with conditional nodes cannot be replayed: it is built again at
 * its next launch. */
static void exec_changed(exec_t *e)
{
    cr_device_graph_free(e->device);
    e->device = NULL;
    e->state = conditional(e->graph) ? DEVICE_UNTRIED : DEVICE_EDITED;
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
    case CR_OP_cuLaunchHostFunc:      /* a host node: [stream, host id] */
    case CR_OP_cuStreamBatchMemOp_v2: /* [stream, operations] */
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
    g->nodes[g->count++] = (node_t){opcode, (uint8_t)arg, body_len, bulk_len, bytes};
    g->bytes += size;
    *g->account += size;
    return 0;
}

/* The bytes a node's edges count: 4 each, one more each when some carry data. */
static uint64_t edges_cost(uint32_t n, const uint8_t *kinds)
{
    return (uint64_t)n * (sizeof(uint32_t) + (kinds ? 1 : 0));
}

/* Node `index` of g depends on the n nodes at idx, with the edges' data `kinds` (NULL: all
 * default), instead of what it had: 0, or -1 past the session's bound or out of memory
 * (then unchanged). */
static int set_deps(graph_t *g, size_t index, const uint32_t *idx, const uint8_t *kinds, uint32_t n)
{
    node_t *node = &g->nodes[index];
    int some = 0;
    for (uint32_t i = 0; kinds && i < n; i++)
        some |= kinds[i] != 0;
    uint64_t old = edges_cost(node->ndeps, node->kinds), size = edges_cost(n, some ? kinds : NULL);
    uint32_t *deps = NULL;
    uint8_t *data = NULL;
    if (n) {
        if (*g->account - old + size > MAX_SESSION_BYTES || !(deps = malloc(n * sizeof *deps)) ||
            (some && !(data = malloc(n)))) {
            free(deps);
            return -1;
        }
        memcpy(deps, idx, n * sizeof *deps);
        if (data)
            memcpy(data, kinds, n);
    }
    free(node->deps);
    free(node->kinds);
    node->deps = deps;
    node->kinds = data;
    node->ndeps = n;
    g->bytes = g->bytes - old + size;
    *g->account = *g->account - old + size;
    return 0;
}

/* The data of node n's edge i (edge_kind's form). */
static uint8_t kind_of(const node_t *n, uint32_t i)
{
    return n->kinds ? n->kinds[i] : 0;
}

/* An edge's data (CUgraphEdgeData), which travels as its first bytes read as a
 * little-endian integer (from_port | to_port << 8 | type << 16; the reserved bytes zero),
 * kept as from_port | type << 4 (0: the default edge). The driver's rules: no node type
 * has input ports, only kernel nodes output ports (PROGRAMMATIC, LAUNCH_ORDER), and a
 * programmatic edge leaves by one of those. 0, or -1 for data the driver refuses. */
static int edge_kind(uint64_t wire, uint8_t *kind)
{
    uint64_t from_port = wire & 0xff, to_port = (wire >> 8) & 0xff, type = wire >> 16;
    if (to_port || type > CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC ||
        from_port > CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER ||
        (type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC &&
         from_port == CU_GRAPH_KERNEL_NODE_PORT_DEFAULT))
        return -1;
    *kind = (uint8_t)(from_port | type << 4);
    return 0;
}

static uint64_t edge_wire(uint8_t kind)
{
    return (uint64_t)(kind & 0xf) | (uint64_t)(kind >> 4) << 16;
}

static CUgraphEdgeData edge_data(uint8_t kind)
{
    return (CUgraphEdgeData){.from_port = (unsigned char)(kind & 0xf),
                             .type = (unsigned char)(kind >> 4)};
}

static int is_kernel(const node_t *n)
{
    return n->opcode && node_kind(n->opcode) == CR_OP_cuLaunchKernel;
}

typedef struct {
    uint32_t from, to; /* node indices */
    uint8_t kind;      /* its data (edge_kind) */
} edge_t;

/* Whether an edge with data `kind` may leave node `from` for a node that is a kernel
 * (to_kernel) or not: a port leaves a kernel node, and a programmatic edge joins two. */
static int kind_fits(const node_t *from, int to_kernel, uint8_t kind)
{
    int programmatic = kind >> 4 == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    return !kind || (is_kernel(from) && (!programmatic || to_kernel));
}

static int edge_fits(const graph_t *g, const edge_t *e)
{
    return kind_fits(&g->nodes[e->from], is_kernel(&g->nodes[e->to]), e->kind);
}

/* Whether two nodes are the same request (edges aside). */
static int same_node(const node_t *a, const node_t *b)
{
    return a->opcode == b->opcode && a->body_len == b->body_len && a->bulk_len == b->bulk_len &&
           (!a->body_len && !a->bulk_len
                ? 1
                : memcmp(a->bytes, b->bytes, a->body_len + a->bulk_len) == 0);
}

static int depends_on(const node_t *n, uint32_t index)
{
    for (uint32_t i = 0; i < n->ndeps; i++)
        if (n->deps[i] == index)
            return 1;
    return 0;
}

/* Whether node n has the edge from node `index` with data `kind`. */
static int edge_there(const node_t *n, uint32_t index, uint8_t kind)
{
    for (uint32_t i = 0; i < n->ndeps; i++)
        if (n->deps[i] == index && kind_of(n, i) == kind)
            return 1;
    return 0;
}

/* Adds the edge from -> node `to` of g with data `kind`: 1 when added, 0 when it was there
 * (with any data), -1 out of memory or past the session's bound. */
static int add_edge(graph_t *g, uint32_t from, size_t to, uint8_t kind)
{
    node_t *n = &g->nodes[to];
    if (depends_on(n, from))
        return 0;
    size_t count = (size_t)n->ndeps + 1;
    uint32_t *idx = malloc(count * sizeof *idx);
    uint8_t *kinds = calloc(count, 1);
    int err = -1;
    if (idx && kinds) {
        if (n->ndeps)
            memcpy(idx, n->deps, n->ndeps * sizeof *idx);
        if (n->kinds)
            memcpy(kinds, n->kinds, n->ndeps);
        idx[n->ndeps] = from;
        kinds[n->ndeps] = kind;
        err = set_deps(g, to, idx, kinds, n->ndeps + 1);
    }
    free(idx);
    free(kinds);
    return err ? -1 : 1;
}

/* Removes the edge from -> node `to` of g whose data is `kind` (any: -1); 1 when there was
 * one. */
static int remove_edge(graph_t *g, uint32_t from, size_t to, int kind)
{
    node_t *n = &g->nodes[to];
    for (uint32_t i = 0; i < n->ndeps; i++)
        if (n->deps[i] == from && (kind < 0 || kind == kind_of(n, i))) {
            uint64_t was = edges_cost(n->ndeps, n->kinds);
            n->deps[i] = n->deps[--n->ndeps];
            if (n->kinds)
                n->kinds[i] = n->kinds[n->ndeps];
            uint64_t now = edges_cost(n->ndeps, n->kinds);
            g->bytes -= was - now;
            *g->account -= was - now;
            return 1;
        }
    return 0;
}

/* The node just kept for a capturing stream depends on what the stream's last work was,
 * and is that from now on. 0, or -1 (the capture is then invalid). */
static int follow(capture_t *cap)
{
    graph_t *g = cap->graph;
    uint32_t last = (uint32_t)(g->count - 1);
    uint32_t *one = NULL;
    for (uint32_t i = 0; cap->kinds && i < cap->ntails; i++) /* a programmatic edge: kernels */
        if (!edge_fits(g, &(edge_t){cap->tails[i], last, cap->kinds[i]}))
            return -1;
    if (set_deps(g, last, cap->tails, cap->kinds, cap->ntails) != 0 || !(one = malloc(sizeof *one)))
        return -1;
    free(cap->tails);
    free(cap->kinds);
    one[0] = last;
    cap->tails = one;
    cap->ntails = 1;
    cap->kinds = NULL;
    return 0;
}

/* The capturing stream's next node depends on the n nodes at `tails` too, with the edges'
 * data `kinds` (NULL: default): what a stream whose event it waited on had done, or nodes
 * the program named. 0 or -1. */
static int join(capture_t *cap, const uint32_t *tails, const uint8_t *kinds, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        int seen = 0;
        for (uint32_t i = 0; i < cap->ntails && !seen; i++)
            seen = cap->tails[i] == tails[k];
        uint8_t kind = kinds ? kinds[k] : 0;
        if (seen)
            continue;
        uint32_t *t = realloc(cap->tails, ((size_t)cap->ntails + 1) * sizeof *t);
        if (!t)
            return -1;
        cap->tails = t;
        if (kind || cap->kinds) { /* the data of every edge, once one has some */
            uint8_t *more = cap->kinds ? realloc(cap->kinds, (size_t)cap->ntails + 1)
                                       : calloc((size_t)cap->ntails + 1, 1);
            if (!more)
                return -1;
            more[cap->ntails] = kind;
            cap->kinds = more;
        }
        t[cap->ntails++] = tails[k];
    }
    return 0;
}

/* A capturing stream waited on an event recorded in the capture: its next node depends on
 * what the event's stream had done then, too. 0 or -1. */
static int join_tails(capture_t *cap, const mark_t *m)
{
    return join(cap, m->tails, NULL, m->ntails);
}

/* The event of m was recorded on a stream whose work so far is cap's tails. 0 or -1. */
static int mark_tails(mark_t *m, const capture_t *cap)
{
    uint32_t *t = cap->ntails ? malloc(cap->ntails * sizeof *t) : NULL;
    if (cap->ntails && !t)
        return -1;
    if (t)
        memcpy(t, cap->tails, cap->ntails * sizeof *t);
    free(m->tails);
    m->tails = t;
    m->ntails = cap->ntails;
    return 0;
}

/* Charges g (and its session) for a conditional node's bodies: 0, or -1 past the session's
 * bound. uncharge_bodies gives it back. */
static int charge_bodies(graph_t *g, uint32_t bodies)
{
    uint64_t cost = (uint64_t)bodies * BODY_COST;
    if (*g->account + cost > MAX_SESSION_BYTES)
        return -1;
    g->bytes += cost;
    *g->account += cost;
    return 0;
}

static void uncharge_bodies(graph_t *g, uint32_t bodies)
{
    uint64_t cost = (uint64_t)bodies * BODY_COST;
    g->bytes -= cost;
    *g->account -= cost;
}

/* Takes back g's last node, which has no handle yet: CUDA_ERROR_OUT_OF_MEMORY, why it is
 * taken back. */
static CUresult drop_last(graph_t *g)
{
    node_t *n = &g->nodes[--g->count];
    uint64_t size =
        (uint64_t)n->body_len + n->bulk_len + NODE_COST + edges_cost(n->ndeps, n->kinds);
    g->bytes -= size;
    *g->account -= size;
    free(n->bytes);
    free(n->deps);
    free(n->kinds);
    if (n->nest) {
        if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            g->conds--;
            cr_graph_anchor_mark(g->anchor, n->nest->handle, 0);
        }
        uncharge_bodies(g, n->nest->size);
        nest_free(n->nest);
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static int keep(graph_t *g, const cr_request_t *req, int arg)
{
    return keep_bytes(g, req->hdr.opcode, arg, req->body, req->hdr.body_len, req->bulk,
                      req->hdr.bulk_len);
}

static graph_t *graph_copy(const graph_t *g);

/* A copy of c, its bodies copied too, or NULL. */
static nest_t *nest_copy(const nest_t *c)
{
    nest_t *copy = calloc(1, sizeof *copy + c->size * sizeof *copy->bodies);
    if (!copy)
        return NULL;
    copy->handle = c->handle;
    copy->type = c->type; /* a copy's bodies have no handles yet */
    for (; copy->size < c->size; copy->size++)
        if (!(copy->bodies[copy->size] = graph_copy(c->bodies[copy->size]))) {
            nest_free(copy);
            return NULL;
        }
    return copy;
}

/* Appends a copy of n to g, with its edges when with_deps (their indices stay right when
 * all of n's graph is copied in order). 0 or -1. */
static int keep_node(graph_t *g, const node_t *n, int with_deps)
{
    if (keep_bytes(g, n->opcode, n->stream_arg, n->bytes, n->body_len, n->bytes + n->body_len,
                   n->bulk_len) != 0)
        return -1;
    node_t *copy = &g->nodes[g->count - 1];
    copy->type = n->type;
    copy->disabled = n->disabled;
    copy->removed = n->removed;
    copy->hidden = n->hidden;
    if (n->nest) {
        if (charge_bodies(g, n->nest->size) != 0)
            return drop_last(g), -1;
        if (!(copy->nest = nest_copy(n->nest))) {
            uncharge_bodies(g, n->nest->size);
            return drop_last(g), -1;
        }
        g->conds += n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL;
    }
    return with_deps ? set_deps(g, g->count - 1, n->deps, n->kinds, n->ndeps) : 0;
}

/* How many levels of held graphs g holds (0: none). */
static unsigned height(const graph_t *g)
{
    unsigned h = 0;
    for (size_t i = 0; i < g->count; i++)
        for (uint32_t b = 0; g->nodes[i].nest && b < g->nodes[i].nest->size; b++) {
            unsigned below = 1 + height(g->nodes[i].nest->bodies[b]);
            h = below > h ? below : h;
        }
    return h;
}

/* g is held `level` deep, and what it holds deeper. */
static void relevel(graph_t *g, unsigned level)
{
    g->level = (uint8_t)level;
    for (size_t i = 0; i < g->count; i++)
        for (uint32_t b = 0; g->nodes[i].nest && b < g->nodes[i].nest->size; b++)
            relevel(g->nodes[i].nest->bodies[b], level + 1);
}

/* Appends a child graph node holding a copy of `child` to g, or `child` itself when `move`
 * (the caller then makes it the node's). 0, or -1 (nothing kept). */
static int keep_child(graph_t *g, graph_t *child, int move)
{
    nest_t *c = calloc(1, sizeof *c + sizeof *c->bodies);
    if (!c || charge_bodies(g, 1) != 0) {
        free(c);
        return -1;
    }
    c->size = 1;
    if (move)
        child->refs++;
    if (!(c->bodies[0] = move ? child : graph_copy(child)) ||
        keep_bytes(g, 0, 0, NULL, 0, NULL, 0) != 0) {
        uncharge_bodies(g, 1);
        nest_free(c);
        return -1;
    }
    c->bodies[0]->owned = CHILD;
    relevel(c->bodies[0], g->level + 1);
    node_t *n = &g->nodes[g->count - 1];
    n->type = CU_GRAPH_NODE_TYPE_GRAPH;
    n->nest = c;
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
    if (copy && g->anchor) {
        cr_graph_anchor_ref(g->anchor);
        copy->anchor = g->anchor;
        copy->handles = (uint32_t)cr_graph_anchor_count(g->anchor); /* at most 4096 */
    }
    if (copy) {
        copy->owned = g->owned;
        copy->level = g->level;
        copy->copied = g->serial;
    }
    for (size_t i = 0; copy && i < g->count; i++) {
        if (keep_node(copy, &g->nodes[i], 1) != 0) {
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

/* Appends a memory node of `type` (MEM_ALLOC, MEM_FREE): an empty node whose body keeps
 * what cuGraphMem*NodeGetParams answer, [address, bytes] or [address]. 0 or -1. */
static int keep_memory_node(graph_t *g, uint8_t type, CUdeviceptr ptr, uint64_t bytes)
{
    uint8_t body[32];
    size_t n = 0;
    body[n++] = type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ? 0x92 : 0x91; /* an array of 2 or 1 */
    body[n++] = 0xcf;                                               /* uint 64 */
    for (int i = 7; i >= 0; i--)
        body[n++] = (uint8_t)(ptr >> (8 * i));
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        body[n++] = 0xcf;
        for (int i = 7; i >= 0; i--)
            body[n++] = (uint8_t)(bytes >> (8 * i));
    }
    if (keep_bytes(g, 0, 0, body, (uint32_t)n, NULL, 0) != 0)
        return -1;
    g->nodes[g->count - 1].type = type;
    return 0;
}

/* Memory for g: allocated and charged to the tenant now (CUDA_ERROR_OUT_OF_MEMORY past its
 * quota), held by g, with an empty node standing for its allocation (its last node). A
 * graph held by a node takes no memory nodes, as on a GPU (a child graph moved into its
 * node keeps those it had). */
static CUresult graph_alloc(cr_session_t *s, graph_t *g, uint64_t bytes, CUdeviceptr *out)
{
    if (g->owned)
        return CUDA_ERROR_NOT_SUPPORTED;
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
    if (!held || keep_memory_node(g, CU_GRAPH_NODE_TYPE_MEM_ALLOC, ptr, bytes) != 0) {
        if (held)
            g->mem_count--;                            /* m, the last */
        cr_session_free_when_idle(s, ptr, NULL, NULL); /* nothing used it yet */
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
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
        graph_mem_t *m = g->owned || cr_arg_u64(req, 0, &ptr) ? NULL : graph_mem_of(g, ptr);
        if (!m || keep_memory_node(g, CU_GRAPH_NODE_TYPE_MEM_FREE, ptr, 0) != 0) {
            g->invalid = 1;
        } else {
            m->freed_in_graph = 1;
            if (follow(cap) != 0)
                g->invalid = 1;
        }
        cr_request_finish(req, m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
        return;
    }
    CUdeviceptr got = 0;
    CUresult r = g->invalid                   ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                 : cr_arg_u64(req, 1, &bytes) ? CUDA_ERROR_INVALID_VALUE
                                              : graph_alloc(req->session, g, bytes, &got);
    if (r == CUDA_SUCCESS && follow(cap) != 0)
        g->invalid = 1;
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
    uint64_t sid, event = 0;
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
            capture_t joined = {sid, origin->origin, m->graph, NULL, 0, origin->into};
            if (c->count >= MAX_CAPTURING ||
                cr_array_room((void **)&c->caps, &c->cap, c->count, sizeof *c->caps) ||
                join_tails(&joined, m) != 0) {
                free(joined.tails);
                m->graph->invalid = 1;
            } else {
                c->caps[c->count++] = joined;
            }
            cr_request_finish(req, CUDA_SUCCESS); /* kept: answered if it waits */
            return 1;
        }
        if (cap && m && m->graph == cap->graph) { /* an edge; the order keeps it already */
            if (join_tails(cap, m) != 0)
                cap->graph->invalid = 1;
            cr_request_finish(req, CUDA_SUCCESS); /* kept: answered if it waits */
            return 1;
        }
    }
    int joins = 0; /* an event record that only marks where a capture's streams join */
    if (op == CR_OP_cuEventRecord || op == CR_OP_cuEventRecordWithFlags) {
        uint64_t flags = 0;
        mark_t *m = cr_arg_u64(req, 0, &event) ? NULL : mark_of(c, event);
        if (cap && !m) {
            if (cr_array_room((void **)&c->marks, &c->mark_cap, c->mark_count, sizeof *c->marks))
                cap->graph->invalid = 1;
            else
                m = &c->marks[c->mark_count++], *m = (mark_t){event, NULL, NULL, 0};
        }
        if (cap && m) {
            m->graph = cap->graph;
            if (mark_tails(m, cap) != 0)
                cap->graph->invalid = 1;
            joins = op == CR_OP_cuEventRecord ||
                    (!cr_arg_u64(req, 2, &flags) && !(flags & CU_EVENT_RECORD_EXTERNAL));
        } else if (m) { /* recorded outside any capture now */
            free(m->tails);
            *m = c->marks[--c->mark_count];
        }
    }
    if (!cap)
        return 0;
    if (op == CR_OP_cuStreamBatchMemOp_v2 &&
        (req->argc != 2 || cr_memops_check(req->session, &req->args[1]) != CUDA_SUCCESS)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE); /* refused, as outside a capture */
        return 1;
    }
    int kept = keep(cap->graph, req, arg) == 0;
    if (kept && joins) /* depends on the stream's work, which stays the stream's last */
        kept = set_deps(cap->graph, cap->graph->count - 1, cap->tails, NULL, cap->ntails) == 0;
    else if (kept)
        kept = follow(cap) == 0;
    if (kept)
        cap->graph->nodes[cap->graph->count - 1].hidden = (uint8_t)joins;
    if (!kept && !cap->graph->invalid) {
        cap->graph->invalid = 1;
        CR_WARN("session %llu: a capture past %u nodes or %llu MiB kept by the session's "
                "graphs, or out of memory: invalidated",
                (unsigned long long)cr_session_id(req->session), MAX_NODES,
                (unsigned long long)(MAX_SESSION_BYTES >> 20));
    }
    cr_request_finish(req, CUDA_SUCCESS); /* kept: answered if it waits */
    return 1;
}

/* Ends the capture of graph g on every stream and forgets its events. */
static void end_capture(captures_t *c, graph_t *g)
{
    size_t k = 0;
    for (size_t i = 0; i < c->count; i++)
        if (c->caps[i].graph != g) {
            c->caps[k++] = c->caps[i];
        } else {
            free(c->caps[i].tails);
            free(c->caps[i].kinds);
        }
    c->count = k;
    k = 0;
    for (size_t i = 0; i < c->mark_count; i++)
        if (c->marks[i].graph != g)
            c->marks[k++] = c->marks[i];
        else
            free(c->marks[i].tails);
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

/* The data of the n dependencies deps_read read, as a capture keeps it: its own copy, or
 * NULL when every edge is a default one. 0 or -1. */
static int tail_kinds(const deps_t *d, uint8_t **kinds)
{
    *kinds = NULL;
    int some = 0;
    for (uint32_t i = 0; i < d->n; i++)
        some |= d->kinds[i] != 0;
    if (some && !(*kinds = malloc(d->n)))
        return -1;
    if (some)
        memcpy(*kinds, d->kinds, d->n);
    return 0;
}

/* [stream, mode], or [stream, mode, graph, dependencies] (cuStreamBeginCaptureToGraph):
 * a capture into a graph of its own, or into that graph after those of its nodes (with
 * their edges' data for the first node captured). */
void cr_srv_cuStreamBeginCapture_v2(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t sid, mode, into = 0;
    if ((req->argc != 2 && req->argc != 4) || cr_arg_u64(req, 0, &sid) ||
        cr_arg_u64(req, 1, &mode) || mode > CU_STREAM_CAPTURE_MODE_RELAXED ||
        (req->argc == 4 && (cr_arg_u64(req, 2, &into) || !into))) {
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
    graph_t *target = into ? cr_session_handle(s, CR_HT_CUgraph, into) : NULL;
    deps_t d = {NULL, 0, NULL};
    if (into && (!target || !deps_read(s, target, &req->args[3], &d, DATA_TO_KERNEL))) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    captures_t *c = captures(s, 1);
    if (c && capture_of(c, sid)) {
        free(d.idx);
        cr_request_finish(req, CUDA_ERROR_ILLEGAL_STATE);
        return;
    }
    graph_t *g = !c || c->count >= MAX_CAPTURING ? NULL : target ? target : graph_new(&c->bytes);
    uint8_t *kinds = NULL;
    if (!g || cr_array_room((void **)&c->caps, &c->cap, c->count, sizeof *c->caps) ||
        tail_kinds(&d, &kinds) != 0) {
        if (!target)
            graph_unref(g);
        free(d.idx);
        cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    if (target)
        target->refs++; /* the capture's, beside its handle's */
    c->caps[c->count++] = (capture_t){sid, sid, g, d.idx, d.n, into, kinds};
    cr_request_finish(req, CUDA_SUCCESS);
}

/* [stream] -> [graph, [nodes], [their edges' data]]: the graph a stream captures into and
 * the nodes its next work will depend on (the data list empty when every edge is a default
 * one), for the program to add nodes to it (a conditional node, say). A
 * capture of a graph of its own gives it a handle now, as a capture into a graph the
 * program made has; the capture's end answers that handle. */
void cr_srv_cuStreamGetCaptureInfo_v3(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t sid;
    capture_t *cap =
        req->argc == 1 && !cr_arg_u64(req, 0, &sid) ? capture_of(captures(s, 0), sid) : NULL;
    if (!cap) {
        reply_id(req, CUDA_ERROR_ILLEGAL_STATE, 0);
        return;
    }
    graph_t *g = cap->graph;
    CUresult r = CUDA_SUCCESS;
    if (!cap->into) {
        uint64_t id;
        int given = cr_session_add_handle(s, CR_HT_CUgraph, g, 0, &id) == 0;
        if (given) /* the handle's reference, beside the capture's */
            g->refs++;
        if (given && cr_session_handle_attach(s, id, 0, g, graph_unref) != 0) {
            g->refs--;
            cr_session_remove_handle(s, id);
            given = 0;
        }
        if (!given) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else { /* every stream in the capture captures into it now */
            captures_t *c = captures(s, 0);
            for (size_t i = 0; i < c->count; i++)
                if (c->caps[i].graph == g)
                    c->caps[i].into = id;
        }
    }
    uint64_t *ids = cap->ntails ? calloc(cap->ntails, sizeof *ids) : NULL;
    if (cap->ntails && !ids)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < cap->ntails; i++)
        r = node_handle(s, g, cap->tails[i], &ids[i]);
    cr_reply_t reply;
    uint32_t data = r == CUDA_SUCCESS && cap->kinds ? cap->ntails : 0;
    if (cr_reply_begin(req, &reply, r, 3) == 0) {
        msgpack_pack_uint64(&reply.pk, r == CUDA_SUCCESS ? cap->into : 0);
        msgpack_pack_array(&reply.pk, r == CUDA_SUCCESS ? cap->ntails : 0);
        for (uint32_t i = 0; r == CUDA_SUCCESS && i < cap->ntails; i++)
            msgpack_pack_uint64(&reply.pk, ids[i]);
        msgpack_pack_array(&reply.pk, data);
        for (uint32_t i = 0; i < data; i++)
            msgpack_pack_uint64(&reply.pk, edge_wire(cap->kinds[i]));
        cr_reply_send(req, &reply, 0);
    }
    free(ids);
    cr_request_free(req);
}

/* [stream, [nodes], flags]: the stream's next work depends on these nodes of its capture's
 * graph (CU_STREAM_SET_CAPTURE_DEPENDENCIES) or on them too (ADD), each given as a node or
 * [node, its edge's data]. */
void cr_srv_cuStreamUpdateCaptureDependencies_v2(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t sid, flags;
    capture_t *cap = req->argc == 3 && !cr_arg_u64(req, 0, &sid) && !cr_arg_u64(req, 2, &flags)
                         ? capture_of(captures(s, 0), sid)
                         : NULL;
    deps_t d = {NULL, 0, NULL};
    if (!cap) {
        cr_request_finish(req, CUDA_ERROR_ILLEGAL_STATE);
        return;
    }
    if ((flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES &&
         flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES) ||
        !deps_read(s, cap->graph, &req->args[1], &d, DATA_TO_KERNEL)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES) {
        uint8_t *kinds;
        if (tail_kinds(&d, &kinds) != 0) {
            free(d.idx);
            cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
            return;
        }
        free(cap->tails);
        free(cap->kinds);
        cap->tails = d.idx;
        cap->ntails = d.n;
        cap->kinds = kinds;
        cr_request_finish(req, CUDA_SUCCESS);
        return;
    }
    CUresult r = join(cap, d.idx, d.kinds, d.n) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    free(d.idx);
    cr_request_finish(req, r);
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
    uint64_t into = cap->into;
    if (cap->origin != sid) { /* only the stream that began it ends it */
        g->invalid = 1;
        reply_id(req, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, 0);
        return;
    }
    end_capture(c, g);
    if (g->invalid) {
        /* a graph captured into goes too, as NVIDIA's driver destroys it (seen on an H100):
         * its handle's reference with the handle, the capture's here */
        if (into && cr_session_handle(s, CR_HT_CUgraph, into) == g)
            cr_session_remove_handle(s, into);
        graph_unref(g);
        reply_id(req, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 0);
        return;
    }
    if (into) { /* the graph keeps its handle; the capture's reference goes */
        graph_unref(g);
        reply_id(req, CUDA_SUCCESS, into);
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
    if (!g || g->moved) { /* a moved child graph runs only in its node */
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
    /* refused as the driver refuses them; a failure's id is the driver's
     * CUgraphInstantiateResult (cuGraphInstantiateWithParams's result_out) */
    if (!acyclic(g)) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE);
        return;
    }
    if (conditional(g) && cr_graph_anchor_unused(g->anchor)) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED);
        return;
    }
    /* the driver's rule for a graph with conditional nodes, and for one with memory nodes
     * (whose memory an executable graph then holds): one executable graph at a time */
    if (mems_held(g, 0) || (conditional(g) && cr_graph_anchor_take_exec(g->anchor) != 0)) {
        reply_id(req, CUDA_ERROR_NOT_SUPPORTED, 0);
        return;
    }
    /* a snapshot: nodes added to the graph later are not the executable graph's */
    exec_t *e = malloc(sizeof *e);
    graph_t *copy = e ? graph_copy(g) : NULL;
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (copy && cr_session_add_handle(s, CR_HT_CUgraphExec, e, 0, &id) == 0) {
        *e = (exec_t){copy,
                      g->serial,
                      flags,
                      DEVICE_UNTRIED,
                      NULL,
                      CUDA_SUCCESS,
                      conditional(g) ? g->anchor : NULL};
        mems_held(copy, 1);
        r = CUDA_SUCCESS;
        if (cr_session_handle_attach(s, id, 0, e, exec_free) != 0) {
            cr_session_remove_handle(s, id);
            exec_free(e);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else if (conditional(copy)) { /* it has no replay to fall back on: built now */
            exec_build(s, e, id, 0);
            if (e->state != DEVICE_BUILT) {
                r = e->error;
                cr_session_remove_handle(s, id);
            }
        }
    } else {
        if (conditional(g))
            cr_graph_anchor_drop_exec(g->anchor);
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

/* The nodes of g and of its conditional nodes' bodies, all levels. */
static size_t tree_count(const graph_t *g)
{
    size_t n = g->count;
    for (size_t i = 0; i < g->count; i++)
        for (uint32_t b = 0; g->nodes[i].nest && b < g->nodes[i].nest->size; b++)
            n += tree_count(g->nodes[i].nest->bodies[b]);
    return n;
}

/* The last nodes of g (those nothing in g depends on), as dev's nodes base + i, into
 * *ends (free it). CUDA_SUCCESS or out of memory. */
static CUresult graph_ends(const graph_t *g, size_t base, uint32_t **ends, uint32_t *nends)
{
    *ends = NULL;
    *nends = 0;
    uint8_t *needed = g->count ? calloc(g->count, 1) : NULL;
    uint32_t *out = g->count ? malloc(g->count * sizeof *out) : NULL;
    if (g->count && (!needed || !out)) {
        free(needed);
        free(out);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < g->count; i++)
        for (uint32_t k = 0; !g->nodes[i].hidden && k < g->nodes[i].ndeps; k++)
            needed[g->nodes[i].deps[k]] = 1;
    for (size_t i = 0; i < g->count; i++)
        if (!needed[i] && !g->nodes[i].removed && !g->nodes[i].hidden)
            out[(*nends)++] = (uint32_t)(base + i);
    free(needed);
    *ends = out;
    return CUDA_SUCCESS;
}

/* Adds g's nodes to dev, node i as dev's node base + i, the nodes of the graphs its nodes
 * hold numbered from *next on (which it advances); a node of g without dependencies depends
 * on `roots` (dev's nodes: what a child graph node depends on). A child graph's nodes go
 * into the same graph, with their edges, and its node after them; a conditional node's
 * bodies into the bodies the driver makes for it. `sid`: a stream of the session's, which
 * the requests name. CUDA_SUCCESS or why not (*at: the node that failed). */
static CUresult build_nodes(cr_session_t *s, cr_device_graph_t *dev, const graph_t *g, size_t base,
                            size_t *next, uint64_t sid, size_t *at, const uint32_t *roots,
                            uint32_t nroots)
{
    uint32_t *order;
    CUresult r = run_order(g, &order);
    msgpack_zone zone;
    msgpack_zone_init(&zone, 2048);
    uint32_t *deps = NULL;
    CUgraphEdgeData *edges = NULL; /* the node's edges' data, when it has any */
    for (size_t k = 0; r == CUDA_SUCCESS && k < g->count; k++) {
        size_t i = order[k];
        const node_t *n = &g->nodes[i];
        *at = base + i;
        /* a hidden event record is no node of the graph on a GPU (nothing depends on it);
         * nothing depends on a destroyed node's place either */
        if (n->hidden || n->removed)
            continue;
        uint32_t ndeps = n->ndeps ? n->ndeps : nroots;
        uint32_t *grown = ndeps ? realloc(deps, ndeps * sizeof *deps) : deps;
        if (ndeps && !grown) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        deps = grown;
        CUgraphEdgeData *more = n->kinds ? realloc(edges, n->ndeps * sizeof *edges) : edges;
        if (n->kinds && !more) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        edges = more;
        for (uint32_t d = 0; d < ndeps; d++)
            deps[d] = n->ndeps ? (uint32_t)(base + n->deps[d]) : roots[d];
        for (uint32_t d = 0; n->kinds && d < n->ndeps; d++)
            edges[d] = edge_data(n->kinds[d]);
        if (n->type == CU_GRAPH_NODE_TYPE_GRAPH && n->nest) {
            const graph_t *child = n->nest->bodies[0];
            size_t child_base = *next;
            *next += child->count;
            uint32_t *ends = NULL, nends = 0;
            r = build_nodes(s, dev, child, child_base, next, sid, at, deps, ndeps);
            if (r == CUDA_SUCCESS)
                r = graph_ends(child, child_base, &ends, &nends);
            *at = base + i;
            if (r == CUDA_SUCCESS) /* after the child's last nodes; an empty child: in its place */
                r = cr_device_graph_add_empty(dev, base + i, nends ? ends : deps,
                                              nends ? nends : ndeps);
            free(ends);
        } else if (n->nest) {
            r = cr_device_graph_add_conditional(dev, base + i, n->nest->handle, n->nest->type,
                                                n->nest->size, deps, ndeps);
            for (uint32_t b = 0; r == CUDA_SUCCESS && b < n->nest->size; b++) {
                const graph_t *body = n->nest->bodies[b];
                size_t body_base = *next;
                *next += body->count;
                CUgraph outer = cr_device_graph_enter(dev, base + i, b);
                r = build_nodes(s, dev, body, body_base, next, sid, at, NULL, 0);
                cr_device_graph_leave(dev, outer);
            }
        } else if (n->opcode == 0) {
            r = cr_device_graph_add_empty(dev, base + i, deps, ndeps);
        } else {
            cr_request_t *req = node_request(s, n, sid, &zone, 0);
            r = req ? cr_device_graph_add(dev, base + i, req, !n->disabled, deps,
                                          n->kinds ? edges : NULL, ndeps)
                    : CUDA_ERROR_OUT_OF_MEMORY;
            cr_request_free(req);
            msgpack_zone_clear(&zone);
        }
    }
    free(deps);
    free(edges);
    free(order);
    msgpack_zone_destroy(&zone);
    return r;
}

/* Makes e's nodes the driver's graph, unless one is work the driver's graph does not take
 * as the server must have it (a host node, say) or would fail now: then e is replayed,
 * until its nodes change (a graph with conditional nodes cannot be: e->error says why).
 * `sid`: a stream of the session's, which the requests name. */
static void exec_build(cr_session_t *s, exec_t *e, uint64_t eid, uint64_t sid)
{
    const graph_t *g = e->graph;
    size_t total = tree_count(g), next = g->count, at = 0;
    cr_device_graph_t *dev =
        cr_device_graph_new(s, e->flags, total, conditional(g) ? g->anchor : NULL, g->handles);
    CUresult r =
        dev ? build_nodes(s, dev, g, 0, &next, sid, &at, NULL, 0) : CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS)
        r = cr_device_graph_instantiate(dev);
    if (r == CUDA_SUCCESS) {
        size_t kernels, nodes = cr_device_graph_nodes(dev, &kernels);
        CR_DEBUG("session %llu: executable graph %llu runs as the driver's graph (%zu nodes, "
                 "%zu kernels%s)",
                 (unsigned long long)cr_session_id(s), (unsigned long long)eid, nodes, kernels,
                 conditional(g) ? ", conditional nodes" : "");
        e->device = dev;
        e->state = DEVICE_BUILT;
        return;
    }
    cr_device_graph_free(dev);
    /* out of memory may pass; anything else stays as it is until the nodes change */
    e->state = r == CUDA_ERROR_OUT_OF_MEMORY ? DEVICE_UNTRIED : DEVICE_NEVER;
    e->error = r;
    CR_DEBUG("session %llu: executable graph %llu %s (node %zu: error %d)",
             (unsigned long long)cr_session_id(s), (unsigned long long)eid,
             conditional(g) ? "cannot be built" : "is replayed node by node", at, (int)r);
}

/* Node `index` of e has new arguments: they reach e's driver's graph in place, or it is
 * dropped (built again later). */
static void exec_node_changed(cr_session_t *s, exec_t *e, size_t index)
{
    const node_t *n = &e->graph->nodes[index];
    if (e->state != DEVICE_BUILT) {
        exec_changed(e);
        return;
    }
    if (n->opcode == 0 || n->hidden) /* not in the driver's graph */
        return;
    msgpack_zone zone;
    msgpack_zone_init(&zone, 1024);
    cr_request_t *req = node_request(s, n, 0, &zone, 0);
    CUresult r = req ? cr_device_graph_update(e->device, index, req) : CUDA_ERROR_OUT_OF_MEMORY;
    cr_request_free(req);
    msgpack_zone_destroy(&zone);
    if (r != CUDA_SUCCESS) {
        CR_DEBUG("session %llu: node %zu of an executable graph cannot change in place (error "
                 "%d): its driver's graph is built again",
                 (unsigned long long)cr_session_id(s), index, (int)r);
        exec_changed(e);
    }
}

/* Dispatches g's nodes in their run order on stream sid, a child graph's where its node
 * is: 0, or -1 out of memory (executable graphs have no cycle: instantiation checks). */
static int replay(cr_session_t *s, const graph_t *g, uint64_t sid, msgpack_zone *zone,
                  uint64_t call_id)
{
    runner_t run = __atomic_load_n(&run_node, __ATOMIC_ACQUIRE);
    uint32_t *order;
    if (run_order(g, &order) != CUDA_SUCCESS)
        return -1;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < g->count; k++) {
        const node_t *n = &g->nodes[order[k]];
        if (n->type == CU_GRAPH_NODE_TYPE_GRAPH && n->nest && !n->removed) {
            rc = replay(s, n->nest->bodies[0], sid, zone, call_id);
            continue;
        }
        if (n->opcode == 0 || n->disabled) /* runs as an empty node */
            continue;
        cr_request_t *node = node_request(s, n, sid, zone, call_id);
        if (!node) {
            rc = -1;
            break;
        }
        if (!cr_request_is_launch(node))
            cr_sched_flush(s); /* launches in a measured batch are consecutive */
        run(node);
        msgpack_zone_clear(zone);
    }
    free(order);
    return rc;
}

/* [executable graph, stream]: the driver's graph of its nodes launched on that stream, or
 * its nodes dispatched in order there; refused on a capturing stream. */
void cr_srv_cuGraphLaunch(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t eid, sid;
    if (req->argc != 2 || cr_arg_u64(req, 0, &eid) || cr_arg_u64(req, 1, &sid)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    exec_t *e = cr_session_handle(s, CR_HT_CUgraphExec, eid);
    cr_handle_t *stream = cr_session_stream(s, sid);
    if (!e || !stream) {
        cr_request_finish(req, e ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE);
        return;
    }
    graph_t *g = e->graph;
    captures_t *c = captures(s, 0);
    capture_t *cap = capture_of(c, sid);
    if (cap) { /* NVIDIA's driver refuses a graph launch on a capturing stream, and the
                  capture is then invalid (seen on an H100, driver 580) */
        cap->graph->invalid = 1;
        cr_request_finish(req, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        return;
    }
    if (conditional(g)) { /* built again when edited or no longer current: never replayed */
        if (e->state == DEVICE_BUILT && !cr_device_graph_current(e->device, s))
            exec_changed(e);
        if (e->state != DEVICE_BUILT)
            exec_build(s, e, eid, sid);
        cr_request_finish(req, e->state == DEVICE_BUILT
                                   ? cr_device_graph_launch(e->device, s, stream)
                                   : e->error);
        return;
    }
    if (e->state == DEVICE_EDITED)
        e->state = DEVICE_UNTRIED; /* replayed this time */
    else if (e->state == DEVICE_UNTRIED)
        exec_build(s, e, eid, sid);
    if (e->state == DEVICE_BUILT) {
        if (cr_device_graph_current(e->device, s)) {
            cr_request_finish(req, cr_device_graph_launch(e->device, s, stream));
            return;
        }
        /* a function, event or memory it names is no longer what it was: the replay
         * reports it as the requests would */
        exec_changed(e);
        e->state = DEVICE_UNTRIED;
    }
    g->refs++; /* a node's replay cannot destroy it, but keep that true */
    msgpack_zone zone;
    msgpack_zone_init(&zone, 2048);
    uint64_t call_id = req->hdr.call_id;
    cr_request_finish(req, CUDA_SUCCESS); /* a launch queues its nodes */
    if (replay(s, g, sid, &zone, call_id) != 0)
        cr_session_defer_error(s, CUDA_ERROR_OUT_OF_MEMORY);
    msgpack_zone_destroy(&zone);
    graph_unref(g);
}

/* [executable graph, stream]: makes the driver's graph ahead of the first launch. */
void cr_srv_cuGraphUpload(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t eid, sid;
    exec_t *e = NULL;
    CUresult r = CUDA_SUCCESS;
    if (req->argc != 2 || cr_arg_u64(req, 0, &eid) || cr_arg_u64(req, 1, &sid) ||
        !(e = cr_session_handle(s, CR_HT_CUgraphExec, eid)))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!cr_session_stream(s, sid))
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (e->state != DEVICE_BUILT && e->state != DEVICE_NEVER &&
             !capture_of(captures(s, 0), sid))
        exec_build(s, e, eid, sid); /* uploading says it will be launched as it is */
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
    uint64_t id;
    const graph_t *g = req->argc == 1 && !cr_arg_u64(req, 0, &id)
                           ? cr_session_handle(req->session, CR_HT_CUgraph, id)
                           : NULL;
    if (g && g->owned) /* it goes with its node */
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
    else
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

/* [graph] -> a copy of it (its nodes have no handles in the copy); none of a graph with
 * conditional nodes, as the driver refuses (CUDA_ERROR_NOT_SUPPORTED on driver 580) */
void cr_srv_cuGraphClone(cr_request_t *req)
{
    uint64_t id;
    graph_t *g = req->argc == 1 && !cr_arg_u64(req, 0, &id)
                     ? cr_session_handle(req->session, CR_HT_CUgraph, id)
                     : NULL;
    /* the driver clones no graph with conditional or memory nodes */
    if (!g || g->conds || holds_memory(g)) {
        reply_id(req, g ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE, 0);
        return;
    }
    graph_t *copy = graph_copy(g);
    if (copy) { /* a graph of its own, even when g is held by a node */
        copy->owned = 0;
        relevel(copy, 0);
    }
    reply_graph(req, copy);
}

/* The node a node id names in graph g, or NULL. */
static node_ref_t *node_of(cr_session_t *s, const graph_t *g, const msgpack_object *o)
{
    uint64_t id;
    node_ref_t *n = cr_obj_u64(o, &id) ? NULL : cr_session_handle(s, CR_HT_CUgraphNode, id);
    return n && n->graph == g ? n : NULL;
}

/* One dependency of a node to add: a node of g, or [node, its edge's data] (edge_wire's
 * form) as `data` allows (DATA_*: by the driver's rules, a port only out of a kernel node,
 * a programmatic edge only between two). The node, or NULL. */
static node_ref_t *dep_of(cr_session_t *s, const graph_t *g, const msgpack_object *o, int data,
                          uint8_t *kind)
{
    *kind = 0;
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return node_of(s, g, o);
    uint64_t wire;
    node_ref_t *n = o->via.array.size == 2 ? node_of(s, g, &o->via.array.ptr[0]) : NULL;
    if (!n || cr_obj_u64(&o->via.array.ptr[1], &wire) || edge_kind(wire, kind) != 0 ||
        !kind_fits(&g->nodes[n->index], data == DATA_TO_KERNEL, *kind))
        return NULL;
    return n;
}

/* The dependencies of a node to add: nodes of g (each once, with the data of the first
 * edge named), into deps->idx and deps->kinds. Added before the new node, they already run
 * before it. */
static int deps_read(cr_session_t *s, const graph_t *g, const msgpack_object *o, deps_t *d,
                     int data)
{
    *d = (deps_t){NULL, 0, NULL};
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > g->count)
        return 0;
    size_t size = o->via.array.size;
    if (size && !(d->idx = malloc(size * (sizeof *d->idx + 1))))
        return 0;
    d->kinds = size ? (uint8_t *)(d->idx + size) : NULL;
    for (uint32_t i = 0; i < size; i++) {
        uint8_t kind;
        node_ref_t *n = dep_of(s, g, &o->via.array.ptr[i], data, &kind);
        if (!n) {
            free(d->idx);
            *d = (deps_t){NULL, 0, NULL};
            return 0;
        }
        int seen = 0;
        for (uint32_t k = 0; k < d->n; k++)
            seen |= d->idx[k] == n->index;
        if (!seen) {
            d->kinds[d->n] = kind;
            d->idx[d->n++] = (uint32_t)n->index;
        }
    }
    return 1;
}

/* Gives g's last node the dependencies d (and frees them). 0 or -1. */
static int deps_give(graph_t *g, deps_t *d)
{
    int err = set_deps(g, g->count - 1, d->idx, d->kinds, d->n);
    free(d->idx);
    *d = (deps_t){NULL, 0, NULL};
    return err;
}

/* Memory a memset or copy node names must be the session's when it is added (and again at
 * each launch). */
static CUresult node_memory_ok(cr_session_t *s, uint16_t opcode, const msgpack_object_array *a)
{
    uint64_t v[6] = {0};
    for (uint32_t i = 0; i < a->size && i < 6; i++)
        if (cr_obj_u64(&a->ptr[i], &v[i]))
            return CUDA_ERROR_INVALID_VALUE;
    cr_extent_t ext[2];
    int n = cr_memory_op_extents(opcode, v, ext);
    for (int i = 0; i < n; i++)
        if (!cr_session_owns(s, ext[i].start, ext[i].len))
            return CUDA_ERROR_INVALID_VALUE;
    return n < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
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
    case CR_OP_cuLaunchKernel:
    case CR_OP_cuLaunchKernelEx:
    case CR_OP_cuLaunchCooperativeKernel:
        return CR_OP_cuLaunchKernel; /* one kind: a kernel node may take attributes */
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
    case CR_OP_cuLaunchKernel:   /* a function of the session's (the launch checks the rest, */
    case CR_OP_cuLaunchKernelEx: /* attributes included, at every replay) */
    case CR_OP_cuLaunchCooperativeKernel: {
        CUfunction f;
        const cr_kernel_param_t *kp;
        uint32_t count;
        return cr_obj_u64(&a->ptr[0], &v) ? CUDA_ERROR_INVALID_VALUE
                                          : cr_session_kernel_params(s, v, &f, &kp, &count);
    }
    case CR_OP_cuLaunchHostFunc: /* [stream, host id]: the client keeps the function */
        return a->size == 2 && !cr_obj_u64(&a->ptr[1], &v) && v ? CUDA_SUCCESS
                                                                : CUDA_ERROR_INVALID_VALUE;
    case CR_OP_cuStreamBatchMemOp_v2: /* [stream, operations] */
        return a->size == 2 ? cr_memops_check(s, &a->ptr[1]) : CUDA_ERROR_INVALID_VALUE;
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
        node->opcode = opcode;
        node->stream_arg = (uint8_t)arg;
        node->body_len = (uint32_t)body.size;
        node->bulk_len = bulk_len;
        node->bytes = bytes; /* its edges, its place and whether it is on stay */
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

/* 1 for a node the program sees: neither a hidden event record nor destroyed. */
static int visible(const node_t *n)
{
    return !n->removed && !n->hidden;
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
        count += visible(&g->nodes[i]);
    if (!g || !with_handles) {
        reply_id(req, g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE, count);
        return;
    }
    uint64_t *ids = count ? malloc(count * sizeof *ids) : NULL;
    CUresult r = count && !ids ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    for (size_t i = 0, k = 0; r == CUDA_SUCCESS && i < g->count; i++)
        if (visible(&g->nodes[i]))
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
    case CR_OP_cuStreamBatchMemOp_v2:
        type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
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
    deps_t d = {NULL, 0, NULL};
    int to = opcode <= UINT16_MAX && node_kind((uint16_t)opcode) == CR_OP_cuLaunchKernel
                 ? DATA_TO_KERNEL
                 : DATA_TO_OTHER;
    CUresult r = !g || !deps_read(s, g, &req->args[1], &d, to)
                     ? CUDA_ERROR_INVALID_VALUE
                     : check_node(s, opcode, &req->args[3], &arg);
    if (r == CUDA_SUCCESS &&
        keep_args(g, (uint16_t)opcode, arg, &req->args[3], req->bulk, req->hdr.bulk_len) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS && deps_give(g, &d) != 0)
        r = drop_last(g);
    free(d.idx);
    if (r != CUDA_SUCCESS) {
        reply_id(req, r, 0);
        return;
    }
    reply_node(req, g, g->count - 1);
}

/* [graph, default value, flags] -> a conditional handle for nodes of the graph (a body's
 * are its top graph's: the driver takes a handle in the graph it was made for and in its
 * children), made against the graph's anchor */
void cr_srv_cuGraphConditionalHandleCreate(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t gid, dflt, flags, handle = 0;
    graph_t *g = req->argc == 3 && !cr_arg_u64(req, 0, &gid) && !cr_arg_u64(req, 1, &dflt) &&
                         !cr_arg_u64(req, 2, &flags) && dflt <= UINT32_MAX
                     ? cr_session_handle(s, CR_HT_CUgraph, gid)
                     : NULL;
    CUresult r = g && flags <= UINT32_MAX ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && g->owned == CHILD) /* a child graph's are not copied: see there */
        r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS && !g->anchor) {
        if (*g->account + ANCHOR_COST > MAX_SESSION_BYTES)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else if (!(g->anchor = cr_graph_anchor_new(s)))
            r = CUDA_ERROR_NOT_SUPPORTED;
        if (g->anchor) { /* the graph's, given back with its bytes */
            g->bytes += ANCHOR_COST;
            *g->account += ANCHOR_COST;
        }
    }
    if (r == CUDA_SUCCESS)
        r = cr_graph_anchor_handle(g->anchor, (unsigned)dflt, (unsigned)flags, &handle);
    reply_id(req, r, handle);
}

/* Gives conditional node `node` (a handle id) of g handles for its bodies into ids:
 * children of the node's handle, as the driver's bodies go with their node. */
static CUresult body_handles(cr_session_t *s, graph_t *g, uint64_t node, uint64_t *ids)
{
    node_ref_t *ref = cr_session_handle(s, CR_HT_CUgraphNode, node);
    const nest_t *c = ref ? g->nodes[ref->index].nest : NULL;
    for (uint32_t b = 0; c && b < c->size; b++) {
        graph_t *body = c->bodies[b];
        if (cr_session_add_child_handle(s, CR_HT_CUgraph, body, ref, &ids[b]) != 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        body->refs++;
        if (cr_session_handle_attach(s, ids[b], 0, body, graph_unref) != 0) {
            body->refs--;
            cr_session_remove_handle(s, ids[b]);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    return CUDA_SUCCESS;
}

#define MAX_BODIES 1024 /* of a switch node */

/* [graph, dependencies, handle, type, size] -> [node, [bodies]]: a conditional node (the
 * driver's form of cuGraphAddNode; every other kind comes as cuGraphAddNode) on a handle
 * made for the graph, with `size` empty bodies for the program to fill. */
void cr_srv_cuGraphAddNode_v2(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t gid, handle, type, size;
    graph_t *g = req->argc == 5 && !cr_arg_u64(req, 0, &gid) && !cr_arg_u64(req, 2, &handle) &&
                         !cr_arg_u64(req, 3, &type) && !cr_arg_u64(req, 4, &size)
                     ? cr_session_handle(s, CR_HT_CUgraph, gid)
                     : NULL;
    deps_t d = {NULL, 0, NULL};
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (g && (g->owned == CHILD || g->level + 1 > MAX_LEVEL)) /* see the child graph node */
        r = CUDA_ERROR_NOT_SUPPORTED;
    else if (g && cr_graph_anchor_owns(g->anchor, SIZE_MAX, handle) &&
             !cr_graph_anchor_taken(g->anchor, handle) && size >= 1 &&
             ((type == CU_GRAPH_COND_TYPE_IF && size <= 2) ||
              (type == CU_GRAPH_COND_TYPE_WHILE && size == 1) ||
              (type == CU_GRAPH_COND_TYPE_SWITCH && size <= MAX_BODIES)) &&
             deps_read(s, g, &req->args[1], &d, DATA_TO_OTHER))
        r = CUDA_SUCCESS;
    nest_t *c = r == CUDA_SUCCESS ? calloc(1, sizeof *c + size * sizeof *c->bodies) : NULL;
    if (r == CUDA_SUCCESS && !c)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (c && charge_bodies(g, (uint32_t)size) != 0) { /* given back if no node is kept */
        free(c);
        c = NULL;
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (; c && c->size < size; c->size++) {
        graph_t *body = graph_new(g->account);
        if (!body) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        body->owned = BODY;
        body->level = (uint8_t)(g->level + 1);
        body->anchor = g->anchor;
        cr_graph_anchor_ref(g->anchor);
        c->bodies[c->size] = body;
    }
    if (r == CUDA_SUCCESS) {
        c->handle = handle;
        c->type = (uint32_t)type;
    }
    if (r == CUDA_SUCCESS && keep_bytes(g, 0, 0, NULL, 0, NULL, 0) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        node_t *n = &g->nodes[g->count - 1];
        n->type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        n->nest = c;
        g->conds++;
        cr_graph_anchor_mark(g->anchor, handle, 1);
        c = NULL;
        if (deps_give(g, &d) != 0)
            r = drop_last(g);
    }
    if (c) /* no node kept it */
        uncharge_bodies(g, (uint32_t)size);
    nest_free(c);
    free(d.idx);
    uint64_t node = 0, bodies[MAX_BODIES];
    if (r == CUDA_SUCCESS)
        r = node_handle(s, g, g->count - 1, &node);
    if (r == CUDA_SUCCESS)
        r = body_handles(s, g, node, bodies);
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 2) == 0) {
        msgpack_pack_uint64(&reply.pk, r == CUDA_SUCCESS ? node : 0);
        msgpack_pack_array(&reply.pk, r == CUDA_SUCCESS ? (uint32_t)size : 0);
        for (uint64_t b = 0; r == CUDA_SUCCESS && b < size; b++)
            msgpack_pack_uint64(&reply.pk, bodies[b]);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

/* 1 when g is `outer` or a graph held in it. */
static int within(const graph_t *outer, const graph_t *g)
{
    if (outer == g)
        return 1;
    for (size_t i = 0; i < outer->count; i++)
        for (uint32_t b = 0; outer->nodes[i].nest && b < outer->nodes[i].nest->size; b++)
            if (within(outer->nodes[i].nest->bodies[b], g))
                return 1;
    return 0;
}

/* 1 when one of session s's captures records into g. */
static int capturing_into(cr_session_t *s, const graph_t *g)
{
    const captures_t *c = captures(s, 0);
    for (size_t i = 0; c && i < c->count; i++)
        if (c->caps[i].graph == g)
            return 1;
    return 0;
}

/* [graph, dependencies, child graph (, move)] -> a node holding a copy of the child, or
 * with move 1 (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) the child itself */
void cr_srv_cuGraphAddChildGraphNode(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t gid, cid, move = 0;
    graph_t *g = (req->argc == 3 || (req->argc == 4 && !cr_arg_u64(req, 3, &move))) &&
                         !cr_arg_u64(req, 0, &gid)
                     ? cr_session_handle(s, CR_HT_CUgraph, gid)
                     : NULL;
    graph_t *child =
        g && !cr_arg_u64(req, 2, &cid) ? cr_session_handle(s, CR_HT_CUgraph, cid) : NULL;
    deps_t d = {NULL, 0, NULL};
    /* a graph moved into a node is that node's alone; one moved must be a graph of its own
     * (not held, not being captured into) that does not hold g */
    if (!g || !child || child == g || child->moved || move > 1 ||
        (move && (child->owned || within(child, g) || capturing_into(s, child))) ||
        !deps_read(s, g, &req->args[1], &d, DATA_TO_OTHER)) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, 0);
        return;
    }
    /* a graph with memory nodes is a child only when moved, as on a GPU; one with
     * conditional nodes is no child (its handles are its own graph's); graphs held past
     * MAX_LEVEL are not */
    if ((!move && holds_memory(child)) || conditional(child) ||
        g->level + 1 + height(child) > MAX_LEVEL) {
        free(d.idx);
        reply_id(req, CUDA_ERROR_NOT_SUPPORTED, 0);
        return;
    }
    size_t before = g->count;
    uint64_t nid = 0;
    if (keep_child(g, child, (int)move) != 0 || deps_give(g, &d) != 0 ||
        (move && node_handle(s, g, g->count - 1, &nid) != CUDA_SUCCESS)) { /* nothing stays */
        while (g->count > before)
            drop_last(g);
        if (move) {
            child->owned = 0;
            relevel(child, 0);
        }
        free(d.idx);
        reply_id(req, CUDA_ERROR_OUT_OF_MEMORY, 0);
        return;
    }
    if (move) { /* its handle is the node's from now on, and goes with it */
        child->moved = 1;
        g->nodes[g->count - 1].nest->given = cid;
        cr_session_handle_reparent(s, cid, nid);
    }
    reply_node(req, g, g->count - 1);
}

/* [graph, from nodes, to nodes (, their edges' data)] (cuGraphAdd/RemoveDependencies): the
 * graph, and its *n edges by index into *edges (free it); NULL when the message is
 * malformed, a node is not the graph's, data is not the driver's, or out of memory
 * (*edges NULL). */
static graph_t *edges_arg(cr_request_t *req, edge_t **edges, uint32_t *n)
{
    cr_session_t *s = req->session;
    uint64_t gid;
    *edges = NULL;
    graph_t *g = (req->argc == 3 || req->argc == 4) && !cr_arg_u64(req, 0, &gid)
                     ? cr_session_handle(s, CR_HT_CUgraph, gid)
                     : NULL;
    const msgpack_object *from = g ? &req->args[1] : NULL, *to = g ? &req->args[2] : NULL;
    const msgpack_object *data = g && req->argc == 4 ? &req->args[3] : NULL;
    if (!g || from->type != MSGPACK_OBJECT_ARRAY || to->type != MSGPACK_OBJECT_ARRAY ||
        from->via.array.size != to->via.array.size ||
        (data &&
         (data->type != MSGPACK_OBJECT_ARRAY || data->via.array.size != from->via.array.size)))
        return NULL;
    *n = from->via.array.size;
    if (*n && !(*edges = malloc(*n * sizeof **edges)))
        return NULL;
    for (uint32_t i = 0; i < *n; i++) {
        node_ref_t *a = node_of(s, g, &from->via.array.ptr[i]);
        node_ref_t *b = node_of(s, g, &to->via.array.ptr[i]);
        uint64_t wire = 0;
        uint8_t kind = 0;
        if (!a || !b || (data && cr_obj_u64(&data->via.array.ptr[i], &wire)) ||
            edge_kind(wire, &kind) != 0) {
            free(*edges);
            *edges = NULL;
            return NULL;
        }
        (*edges)[i] = (edge_t){(uint32_t)a->index, (uint32_t)b->index, kind};
    }
    return g;
}

/* [graph, from nodes, to nodes (, data)]: every edge is added, or none; an edge to a node added
 * before it makes the run order depart from the order of addition (run_order), and a
 * cycle is refused when the graph is instantiated, as the driver does. */
void cr_srv_cuGraphAddDependencies(cr_request_t *req)
{
    edge_t *e;
    uint32_t n = 0;
    graph_t *g = edges_arg(req, &e, &n);
    CUresult r = g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (uint32_t i = 0; i < n && r == CUDA_SUCCESS; i++)
        if (e[i].from == e[i].to || !edge_fits(g, &e[i]))
            r = CUDA_ERROR_INVALID_VALUE;
    uint8_t *added = r == CUDA_SUCCESS && n ? calloc(n, 1) : NULL;
    if (n && r == CUDA_SUCCESS && !added)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
        int got = add_edge(g, e[i].from, e[i].to, e[i].kind);
        added[i] = got == 1;
        if (got < 0) {
            for (uint32_t k = 0; k < i; k++) /* back to the edges there were */
                if (added[k])
                    remove_edge(g, e[k].from, e[k].to, e[k].kind);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    free(added);
    free(e);
    cr_request_finish(req, r);
}

/* [executable graph (0: the node's own graph), node, opcode, arguments] + bulk: the node
 * takes these arguments, checked as when it was added; it stays of its kind. In an
 * executable graph its copy of the node changes, from its next launch on; in the graph,
 * the executable graphs made from it later have them. */
/* A kernel node given new arguments as a plain launch keeps the form it was launched in:
 * a cooperative launch stays one, a cuLaunchKernelEx keeps its attributes (the driver's
 * node keeps them too). *args becomes the seven of that form, in zone. 0, or -1 when the
 * node's kept request cannot be read. */
static int keep_launch_form(const node_t *old, uint64_t *opcode, msgpack_object *args,
                            msgpack_zone *zone)
{
    if (*opcode != CR_OP_cuLaunchKernel)
        return 0;
    if (old->opcode == CR_OP_cuLaunchCooperativeKernel) {
        *opcode = CR_OP_cuLaunchCooperativeKernel; /* the same arguments */
        return 0;
    }
    if (old->opcode != CR_OP_cuLaunchKernelEx || args->type != MSGPACK_OBJECT_ARRAY ||
        args->via.array.size != 6)
        return 0;
    size_t off = 0;
    msgpack_object kept;
    msgpack_object *both = msgpack_zone_malloc(zone, 7 * sizeof *both);
    if (!both ||
        msgpack_unpack((const char *)old->bytes, old->body_len, &off, zone, &kept) !=
            MSGPACK_UNPACK_SUCCESS ||
        kept.type != MSGPACK_OBJECT_ARRAY || kept.via.array.size != 7)
        return -1;
    memcpy(both, args->via.array.ptr, 6 * sizeof *both);
    both[6] = kept.via.array.ptr[6];
    args->via.array.ptr = both;
    args->via.array.size = 7;
    *opcode = CR_OP_cuLaunchKernelEx;
    return 0;
}

/* The copy made from the graph of this serial among the graphs held in g (conditional
 * nodes' bodies, child graph nodes' graphs), all the way down; NULL for none. */
static graph_t *held_copy(const graph_t *g, uint64_t serial)
{
    for (size_t i = 0; i < g->count; i++) {
        const nest_t *c = g->nodes[i].removed ? NULL : g->nodes[i].nest;
        for (uint32_t b = 0; c && b < c->size; b++) {
            graph_t *held = c->bodies[b];
            if (held->copied == serial || (held = held_copy(held, serial)))
                return held;
        }
    }
    return NULL;
}

/* The graph of executable graph e that stands for graph g: e's own when e was made from
 * g; the copy in it of g when g is held by a node (a body, a child graph node's graph), so
 * that edits of such a node reach e, as the driver takes them (seen on an H100); else
 * NULL. */
static graph_t *exec_graph(const exec_t *e, const graph_t *g)
{
    return g->serial == e->source ? e->graph : g->owned ? held_copy(e->graph, g->serial) : NULL;
}

void cr_srv_cuGraphNodeSetParams(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t eid, nid, opcode;
    node_ref_t *n = req->argc == 4 && !cr_arg_u64(req, 0, &eid) && !cr_arg_u64(req, 1, &nid) &&
                            !cr_arg_u64(req, 2, &opcode)
                        ? cr_session_handle(s, CR_HT_CUgraphNode, nid)
                        : NULL;
    exec_t *e = n && eid ? cr_session_handle(s, CR_HT_CUgraphExec, eid) : NULL;
    graph_t *g = !n ? NULL : !eid ? n->graph : e ? exec_graph(e, n->graph) : NULL;
    msgpack_object args = req->args[3];
    msgpack_zone zone;
    msgpack_zone_init(&zone, 1024);
    int arg = 0;
    CUresult r = !g || n->index >= g->count || opcode == 0 || opcode > UINT16_MAX ||
                         node_kind(g->nodes[n->index].opcode) != node_kind((uint16_t)opcode)
                     ? CUDA_ERROR_INVALID_VALUE
                 : keep_launch_form(&g->nodes[n->index], &opcode, &args, &zone) != 0
                     ? CUDA_ERROR_OUT_OF_MEMORY
                     : check_node(s, opcode, &args, &arg);
    if (r == CUDA_SUCCESS &&
        replace_args(g, n->index, (uint16_t)opcode, arg, &args, req->bulk, req->hdr.bulk_len) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (e && r == CUDA_SUCCESS && g == e->graph)
        exec_node_changed(s, e, n->index);
    else if (e) /* a held graph's node, or a failed replacement (which may have changed
                   the node): its driver's graph is built again */
        exec_changed(e);
    msgpack_zone_destroy(&zone);
    cr_request_finish(req, r);
}

/* Whether b has a's shape, as cuGraphExecUpdate needs it: the same nodes in the same
 * order, each of the same kind, with the same edges, the graphs they hold of the same shape
 * too. CU_GRAPH_EXEC_UPDATE_SUCCESS, or why not. */
static CUgraphExecUpdateResult same_shape(const graph_t *a, const graph_t *b)
{
    if (a->count != b->count)
        return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    for (size_t i = 0; i < a->count; i++) {
        const node_t *now = &a->nodes[i], *next = &b->nodes[i];
        int same_edges = now->ndeps == next->ndeps;
        for (uint32_t k = 0; same_edges && k < now->ndeps; k++)
            same_edges = edge_there(next, now->deps[k], kind_of(now, k));
        if (now->removed != next->removed || now->hidden != next->hidden || !same_edges)
            return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        if (now->opcode != next->opcode || now->type != next->type || !now->nest != !next->nest ||
            (now->nest &&
             (now->nest->type != next->nest->type || now->nest->size != next->nest->size)))
            return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        for (uint32_t k = 0; now->nest && k < now->nest->size; k++) {
            CUgraphExecUpdateResult why = same_shape(now->nest->bodies[k], next->nest->bodies[k]);
            if (why != CU_GRAPH_EXEC_UPDATE_SUCCESS)
                return why;
        }
    }
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

/* Whether two graphs of the same shape have the same nodes (arguments included), all the
 * way down. */
static int same_nodes(const graph_t *a, const graph_t *b)
{
    for (size_t i = 0; i < a->count; i++) {
        if (!same_node(&a->nodes[i], &b->nodes[i]))
            return 0;
        for (uint32_t k = 0; a->nodes[i].nest && k < a->nodes[i].nest->size; k++)
            if (!same_nodes(a->nodes[i].nest->bodies[k], b->nodes[i].nest->bodies[k]))
                return 0;
    }
    return 1;
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
    if (!e || !g || g->moved) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, CU_GRAPH_EXEC_UPDATE_ERROR);
        return;
    }
    CUgraphExecUpdateResult why =
        g->invalid ? CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED : same_shape(e->graph, g);
    if (why != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        reply_id(req, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, why);
        return;
    }
    graph_t *copy = graph_copy(g);
    if (!copy) {
        reply_id(req, CUDA_ERROR_OUT_OF_MEMORY, CU_GRAPH_EXEC_UPDATE_ERROR);
        return;
    }
    for (size_t i = 0; i < copy->count; i++) /* nodes turned off stay off */
        copy->nodes[i].disabled = e->graph->nodes[i].disabled;
    graph_t *was = e->graph;
    mems_held(was, -1);
    mems_held(copy, 1);
    e->graph = copy;
    int held_changed = 0; /* in the graphs its nodes hold */
    for (size_t i = 0; i < copy->count; i++)
        for (uint32_t b = 0; copy->nodes[i].nest && b < copy->nodes[i].nest->size; b++)
            held_changed |=
                !same_nodes(was->nodes[i].nest->bodies[b], copy->nodes[i].nest->bodies[b]);
    if (held_changed) /* its driver's graph goes (replayed or built again at the next launch) */
        exec_changed(e);
    for (size_t i = 0; !held_changed && i < copy->count; i++) /* in place if they can */
        if (!same_node(&was->nodes[i], &copy->nodes[i]))
            exec_node_changed(s, e, i);
    graph_unref(was); /* a launch replaying it holds its own reference */
    reply_id(req, CUDA_SUCCESS, CU_GRAPH_EXEC_UPDATE_SUCCESS);
}

/* The nodes of g in its picture: a child graph's nodes each, then the child graph node. */
static size_t flat_count(const graph_t *g)
{
    size_t n = g->count;
    for (size_t i = 0; i < g->count; i++)
        if (g->nodes[i].type == CU_GRAPH_NODE_TYPE_GRAPH && g->nodes[i].nest)
            n += flat_count(g->nodes[i].nest->bodies[0]);
    return n;
}

/* Where each node of g is in the picture when g's first is at `first`; NULL when out of
 * memory. */
static uint32_t *flat_places(const graph_t *g, size_t first)
{
    uint32_t *at = malloc((g->count ? g->count : 1) * sizeof *at);
    for (size_t i = 0; at && i < g->count; i++) {
        if (g->nodes[i].type == CU_GRAPH_NODE_TYPE_GRAPH && g->nodes[i].nest)
            first += flat_count(g->nodes[i].nest->bodies[0]);
        at[i] = (uint32_t)first++;
    }
    return at;
}

static void pack_deps(msgpack_packer *pk, const uint32_t *deps, uint32_t n, const uint32_t *at,
                      const uint8_t *kinds)
{
    msgpack_pack_array(pk, n);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t place = at ? at[deps[k]] : deps[k];
        if (kinds && kinds[k]) { /* [place, the edge's data] */
            msgpack_pack_array(pk, 2);
            msgpack_pack_uint32(pk, place);
            msgpack_pack_uint64(pk, edge_wire(kinds[k]));
        } else {
            msgpack_pack_uint32(pk, place);
        }
    }
}

/* Packs g's nodes for the picture, g's first at `first`, as [opcode, inner, removed,
 * [dependencies]] each, and a conditional node with [type, handle, [body]...] after, each
 * body's nodes packed so, placed from 0; a node without dependencies depends on `roots`
 * (places). */
static void pack_flat(msgpack_packer *pk, const graph_t *g, size_t first, int inner,
                      const uint32_t *roots, uint32_t nroots)
{
    uint32_t *at = flat_places(g, first);
    for (size_t i = 0; i < g->count; i++) {
        const node_t *n = &g->nodes[i];
        uint32_t *mine = NULL, nmine = 0; /* a child graph node's: the child's last nodes */
        if (n->type == CU_GRAPH_NODE_TYPE_GRAPH && n->nest) {
            const graph_t *child = n->nest->bodies[0];
            size_t child_first = at ? at[i] - flat_count(child) : first;
            uint32_t *child_at = flat_places(child, child_first);
            uint32_t *deps = n->ndeps ? malloc(n->ndeps * sizeof *deps) : NULL;
            for (uint32_t k = 0; deps && at && k < n->ndeps; k++)
                deps[k] = at[n->deps[k]];
            pack_flat(pk, child, child_first, 1, n->ndeps ? deps : roots,
                      n->ndeps ? (deps ? n->ndeps : 0) : nroots);
            free(deps);
            if (child_at && graph_ends(child, 0, &mine, &nmine) == CUDA_SUCCESS)
                for (uint32_t k = 0; k < nmine; k++)
                    mine[k] = child_at[mine[k]];
            free(child_at);
        }
        const nest_t *cond =
            n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && !n->removed ? n->nest : NULL;
        msgpack_pack_array(pk, cond ? 5 : 4);
        msgpack_pack_uint16(pk, n->opcode);
        msgpack_pack_uint8(pk, (uint8_t)inner);
        msgpack_pack_uint8(pk, n->removed || n->hidden);
        if (nmine)
            pack_deps(pk, mine, nmine, NULL, NULL);
        else if (n->ndeps)
            pack_deps(pk, n->deps, at ? n->ndeps : 0, at, n->kinds);
        else
            pack_deps(pk, roots, nroots, NULL, NULL);
        free(mine);
        if (cond) { /* bodies nest at most MAX_LEVEL deep */
            msgpack_pack_array(pk, 2 + cond->size);
            msgpack_pack_uint32(pk, cond->type);
            msgpack_pack_uint64(pk, cond->handle);
            for (uint32_t b = 0; b < cond->size; b++) {
                msgpack_pack_array(pk, (uint32_t)flat_count(cond->bodies[b]));
                pack_flat(pk, cond->bodies[b], 0, 0, NULL, 0);
            }
        }
    }
    free(at);
}

/* [graph] -> [[opcode, inner, removed, [dependencies by place]]...]: its nodes in the order
 * they were added (opcode 0: an empty node; inner: a node of a child graph, whose nodes
 * come just before the child graph node; removed: a destroyed node's place, or a hidden
 * one), a conditional node with its kind, handle and bodies (pack_flat), for
 * cuGraphDebugDotPrint. */
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
        msgpack_pack_array(&reply.pk, (uint32_t)flat_count(g));
        pack_flat(&reply.pk, g, 0, 0, NULL, 0);
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
    deps_t d = {NULL, 0, NULL};
    if (!g || !deps_read(s, g, &req->args[1], &d, DATA_TO_OTHER)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    CUdeviceptr ptr = 0;
    CUresult r = graph_alloc(s, g, bytes, &ptr);
    if (r == CUDA_SUCCESS && deps_give(g, &d) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY; /* the node stays, a root: its memory is the graph's */
    free(d.idx);
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
    deps_t d = {NULL, 0, NULL};
    if (g && g->owned) { /* see graph_alloc */
        cr_request_finish(req, CUDA_ERROR_NOT_SUPPORTED);
        return;
    }
    if (!m || !deps_read(s, g, &req->args[1], &d, DATA_TO_OTHER)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    if (keep_memory_node(g, CU_GRAPH_NODE_TYPE_MEM_FREE, ptr, 0) != 0) {
        free(d.idx);
        cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    if (deps_give(g, &d) != 0) {
        cr_request_finish(req, drop_last(g));
        return;
    }
    m->freed_in_graph = 1;
    reply_node(req, g, g->count - 1);
}

/* The node of an executable graph a request names ([executable graph, node, ...]): its
 * copy in the executable graph, or NULL; *exec gets the executable graph, *top whether the
 * node is one of its own graph's (not of a graph held in it). */
static node_t *exec_node(cr_request_t *req, uint32_t argc, exec_t **exec, int *top)
{
    cr_session_t *s = req->session;
    uint64_t eid, nid;
    exec_t *e = req->argc == argc && !cr_arg_u64(req, 0, &eid)
                    ? cr_session_handle(s, CR_HT_CUgraphExec, eid)
                    : NULL;
    node_ref_t *n =
        e && !cr_arg_u64(req, 1, &nid) ? cr_session_handle(s, CR_HT_CUgraphNode, nid) : NULL;
    graph_t *g = n ? exec_graph(e, n->graph) : NULL;
    *exec = e;
    *top = e && g == e->graph;
    return g && n->index < g->count ? &g->nodes[n->index] : NULL;
}

/* [executable graph, node, enabled]: a kernel, memset or copy node turned off runs as an
 * empty node from the next launch on, until turned on again. */
void cr_srv_cuGraphNodeSetEnabled(cr_request_t *req)
{
    exec_t *e;
    int top;
    node_t *n = exec_node(req, 3, &e, &top);
    uint64_t on;
    int kind = n ? node_kind(n->opcode) : 0;
    if (!n || cr_arg_u64(req, 2, &on) ||
        (kind != CR_OP_cuLaunchKernel && kind != CR_OP_cuMemsetD8Async &&
         kind != CR_OP_cuMemcpyDtoDAsync_v2)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    if (n->disabled != !on && e->state == DEVICE_BUILT &&
        (!top || /* in place only by the driver's graph's own nodes' indices */
         cr_device_graph_enable(e->device, (size_t)(n - e->graph->nodes), (int)on) != CUDA_SUCCESS))
        exec_changed(e);
    else if (n->disabled != !on && e->state == DEVICE_NEVER)
        exec_changed(e); /* it may be buildable now */
    n->disabled = !on;
    cr_request_finish(req, CUDA_SUCCESS);
}

/* [executable graph, node] -> 1 when it runs, 0 when turned off */
void cr_srv_cuGraphNodeGetEnabled(cr_request_t *req)
{
    exec_t *e;
    int top;
    node_t *n = exec_node(req, 2, &e, &top);
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

/* --- edges ----------------------------------------------------------------------------------- */

/* The handles of these nodes of g, into *ids (free it). */
static CUresult handles_of(cr_session_t *s, graph_t *g, const uint32_t *idx, size_t n,
                           uint64_t **ids)
{
    *ids = n ? malloc(n * sizeof **ids) : NULL;
    CUresult r = n && !*ids ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
        r = node_handle(s, g, idx[i], &(*ids)[i]);
    return r;
}

static void pack_ids(msgpack_packer *pk, const uint64_t *ids, size_t n)
{
    msgpack_pack_array(pk, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        msgpack_pack_uint64(pk, ids[i]);
}

/* Replies [CUresult, [handles of these n nodes of g]] and, with `also`, [the handles of
 * those] after it; with `kinds`, the n edges' data after them (edge_wire's form; none at
 * all when every edge is a default one). Owns idx, also and kinds. */
static void reply_nodes(cr_request_t *req, graph_t *g, uint32_t *idx, uint32_t *also,
                        uint8_t *kinds, size_t n)
{
    uint64_t *a = NULL, *b = NULL;
    CUresult r = handles_of(req->session, g, idx, n, &a);
    if (r == CUDA_SUCCESS && also)
        r = handles_of(req->session, g, also, n, &b);
    int some = 0;
    for (size_t i = 0; kinds && i < n; i++)
        some |= kinds[i] != 0;
    cr_reply_t reply;
    if (r != CUDA_SUCCESS) {
        cr_request_finish(req, r);
    } else {
        if (cr_reply_begin(req, &reply, r, 1 + (also != NULL) + (kinds != NULL)) == 0) {
            pack_ids(&reply.pk, a, n);
            if (also)
                pack_ids(&reply.pk, b, n);
            if (kinds) {
                msgpack_pack_array(&reply.pk, some ? (uint32_t)n : 0);
                for (size_t i = 0; some && i < n; i++)
                    msgpack_pack_uint64(&reply.pk, edge_wire(kinds[i]));
            }
            cr_reply_send(req, &reply, 0);
        }
        cr_request_free(req);
    }
    free(a);
    free(b);
    free(idx);
    free(also);
    free(kinds);
}

static graph_t *graph_arg(cr_request_t *req)
{
    uint64_t id;
    return req->argc == 1 && !cr_arg_u64(req, 0, &id)
               ? cr_session_handle(req->session, CR_HT_CUgraph, id)
               : NULL;
}

static node_ref_t *node_arg(cr_request_t *req, uint32_t argc)
{
    uint64_t id;
    node_ref_t *n = req->argc == argc && !cr_arg_u64(req, 0, &id)
                        ? cr_session_handle(req->session, CR_HT_CUgraphNode, id)
                        : NULL;
    return n && n->index < n->graph->count && !n->graph->nodes[n->index].removed ? n : NULL;
}

/* [child graph node] -> the graph it holds (not a copy: what the program adds to it or
 * changes there, the node does; it goes with the node) */
void cr_srv_cuGraphChildGraphNodeGetGraph(cr_request_t *req)
{
    cr_session_t *s = req->session;
    node_ref_t *ref = node_arg(req, 1);
    nest_t *c = ref ? ref->graph->nodes[ref->index].nest : NULL;
    if (!c || ref->graph->nodes[ref->index].type != CU_GRAPH_NODE_TYPE_GRAPH) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, 0);
        return;
    }
    graph_t *child = c->bodies[0];
    if (c->given && cr_session_handle(s, CR_HT_CUgraph, c->given) == child) {
        reply_id(req, CUDA_SUCCESS, c->given);
        return;
    }
    /* a child of the node's handle, as a conditional node's bodies are */
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (cr_session_add_child_handle(s, CR_HT_CUgraph, child, ref, &c->given) == 0) {
        child->refs++;
        if (cr_session_handle_attach(s, c->given, 0, child, graph_unref) == 0) {
            r = CUDA_SUCCESS;
        } else {
            child->refs--;
            cr_session_remove_handle(s, c->given);
        }
    }
    reply_id(req, r, r == CUDA_SUCCESS ? c->given : 0);
}

/* [executable graph, child graph node, graph]: the executable graph's copy of the node
 * holds a copy of that graph from now on, which must have the shape of the one it holds
 * (the same nodes in the same order, each of the same kind, with the same edges). */
void cr_srv_cuGraphExecChildGraphNodeSetParams(cr_request_t *req)
{
    cr_session_t *s = req->session;
    exec_t *e;
    int top;
    node_t *n = exec_node(req, 3, &e, &top);
    uint64_t gid;
    graph_t *g = n && !cr_arg_u64(req, 2, &gid) ? cr_session_handle(s, CR_HT_CUgraph, gid) : NULL;
    if (!g || n->type != CU_GRAPH_NODE_TYPE_GRAPH || !n->nest || n->removed || g->invalid ||
        g->conds || g->mem_count ||
        same_shape(n->nest->bodies[0], g) != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    graph_t *copy = graph_copy(g);
    if (!copy) {
        cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    copy->owned = 1;
    graph_unref(n->nest->bodies[0]); /* a replay runs to its end before any other request */
    n->nest->bodies[0] = copy;
    exec_changed(e);
    cr_request_finish(req, CUDA_SUCCESS);
}

/* [graph] -> [[from nodes], [to nodes], [their data]]: every edge */
void cr_srv_cuGraphGetEdges(cr_request_t *req)
{
    graph_t *g = graph_arg(req);
    if (!g) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    size_t n = 0; /* a hidden node's edges are not the graph's (nothing depends on it) */
    for (size_t i = 0; i < g->count; i++)
        n += visible(&g->nodes[i]) ? g->nodes[i].ndeps : 0;
    uint32_t *from = n ? malloc(n * sizeof *from) : NULL, *to = n ? malloc(n * sizeof *to) : NULL;
    uint8_t *kinds = malloc(n ? n : 1);
    if ((n && (!from || !to)) || !kinds) {
        free(from);
        free(to);
        free(kinds);
        cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < g->count; i++)
        for (uint32_t d = 0; visible(&g->nodes[i]) && d < g->nodes[i].ndeps; d++, k++) {
            from[k] = g->nodes[i].deps[d];
            to[k] = (uint32_t)i;
            kinds[k] = kind_of(&g->nodes[i], d);
        }
    reply_nodes(req, g, from, to, kinds, n);
}

/* [graph] -> [nodes without dependencies] */
void cr_srv_cuGraphGetRootNodes(cr_request_t *req)
{
    graph_t *g = graph_arg(req);
    uint32_t *idx = g && g->count ? malloc(g->count * sizeof *idx) : NULL;
    if (!g || (g->count && !idx)) {
        cr_request_finish(req, g ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < g->count; i++)
        if (visible(&g->nodes[i]) && g->nodes[i].ndeps == 0)
            idx[n++] = (uint32_t)i;
    reply_nodes(req, g, idx, NULL, NULL, n);
}

/* [node] -> [[the nodes it depends on], [their edges' data]] */
void cr_srv_cuGraphNodeGetDependencies(cr_request_t *req)
{
    node_ref_t *r = node_arg(req, 1);
    const node_t *n = r ? &r->graph->nodes[r->index] : NULL;
    uint32_t *idx = n && n->ndeps ? malloc(n->ndeps * sizeof *idx) : NULL;
    uint8_t *kinds = n ? calloc(n->ndeps ? n->ndeps : 1, 1) : NULL;
    if (!n || (n->ndeps && !idx) || !kinds) {
        free(idx);
        free(kinds);
        cr_request_finish(req, n ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE);
        return;
    }
    if (n->ndeps)
        memcpy(idx, n->deps, n->ndeps * sizeof *idx);
    if (n->kinds)
        memcpy(kinds, n->kinds, n->ndeps);
    reply_nodes(req, r->graph, idx, NULL, kinds, n->ndeps);
}

/* [node] -> [[the nodes that depend on it], [those edges' data]]: nodes added before it
 * too (an edge may lead back in the order of addition) */
void cr_srv_cuGraphNodeGetDependentNodes(cr_request_t *req)
{
    node_ref_t *r = node_arg(req, 1);
    graph_t *g = r ? r->graph : NULL;
    uint32_t *idx = g ? malloc(g->count * sizeof *idx) : NULL;
    uint8_t *kinds = g ? malloc(g->count) : NULL;
    if (!g || !idx || !kinds) {
        free(idx);
        free(kinds);
        cr_request_finish(req, g ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < g->count; i++)
        for (uint32_t d = 0; visible(&g->nodes[i]) && d < g->nodes[i].ndeps; d++)
            if (g->nodes[i].deps[d] == r->index) {
                kinds[n] = kind_of(&g->nodes[i], d);
                idx[n++] = (uint32_t)i;
            }
    reply_nodes(req, g, idx, NULL, kinds, n);
}

/* [graph, from nodes, to nodes (, data)]: edges removed; each must be there, with that
 * data. The nodes keep their
 * order, which no longer needs to hold but does no harm. */
void cr_srv_cuGraphRemoveDependencies(cr_request_t *req)
{
    edge_t *e;
    uint32_t n = 0;
    graph_t *g = edges_arg(req, &e, &n);
    /* no edge of a graph with memory nodes goes, as on a GPU */
    CUresult r = g && !holds_memory(g) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (uint32_t i = 0; i < n && r == CUDA_SUCCESS; i++) /* there, with that data */
        if (!edge_there(&g->nodes[e[i].to], e[i].from, e[i].kind))
            r = CUDA_ERROR_INVALID_VALUE;
    for (uint32_t i = 0; i < n && r == CUDA_SUCCESS; i++)
        remove_edge(g, e[i].from, e[i].to, e[i].kind);
    free(e);
    cr_request_finish(req, r);
}

/* Conditional node n and those in its bodies, all the way down, give up their handles. */
static void release_handles(cr_graph_anchor_t *a, const node_t *n)
{
    cr_graph_anchor_mark(a, n->nest->handle, 0);
    for (uint32_t b = 0; b < n->nest->size; b++) {
        const graph_t *body = n->nest->bodies[b];
        for (size_t i = 0; i < body->count; i++)
            if (body->nodes[i].type == CU_GRAPH_NODE_TYPE_CONDITIONAL && body->nodes[i].nest &&
                !body->nodes[i].removed)
                release_handles(a, &body->nodes[i]);
    }
}

/* [node]: the node and its edges go; its place stays, empty, so that the other nodes keep
 * their indices (their handles and executable graphs go by them). A node that holds graphs
 * (a child graph's, a conditional node's bodies) takes them with it. */
void cr_srv_cuGraphDestroyNode(cr_request_t *req)
{
    node_ref_t *r = node_arg(req, 1);
    if (!r) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    graph_t *g = r->graph;
    size_t index = r->index;
    node_t *n = &g->nodes[index];
    if (holds_memory(g)) { /* the driver's rule: a graph with memory nodes keeps its nodes */
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    uint64_t size = (uint64_t)n->body_len + n->bulk_len;
    set_deps(g, index, NULL, NULL, 0); /* never fails: it only frees */
    free(n->bytes);
    n->bytes = NULL;
    n->body_len = 0;
    n->bulk_len = 0;
    n->opcode = 0;
    n->removed = 1;
    if (n->nest) { /* the graphs it holds; their handles go with the node's */
        if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
            release_handles(g->anchor, n);
        uncharge_bodies(g, n->nest->size);
        nest_free(n->nest);
        n->nest = NULL;
        g->conds -= n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL;
    }
    g->bytes -= size;
    *g->account -= size;
    for (size_t i = 0; i < g->count; i++) /* an edge may lead to a node added before */
        remove_edge(g, (uint32_t)index, i, -1);
    uint64_t id = g->node_ids[index];
    g->node_ids[index] = 0;
    cr_session_remove_handle(req->session, id);
    cr_request_finish(req, CUDA_SUCCESS);
}

/* [node, cloned graph] -> the cloned graph's node made from it */
void cr_srv_cuGraphNodeFindInClone(cr_request_t *req)
{
    uint64_t cid;
    node_ref_t *r = node_arg(req, 2);
    graph_t *clone =
        r && !cr_arg_u64(req, 1, &cid) ? cr_session_handle(req->session, CR_HT_CUgraph, cid) : NULL;
    if (!clone || clone->copied != r->graph->serial || r->index >= clone->count ||
        clone->nodes[r->index].removed) {
        reply_id(req, CUDA_ERROR_INVALID_VALUE, 0);
        return;
    }
    reply_node(req, clone, r->index);
}

/* --- reading a node back ---------------------------------------------------------------------- */

/* [node] -> [opcode, arguments, empty node's type] + bulk: the request the node stands
 * for, as it keeps it (opcode 0 for an empty node: its type, and for a memory node
 * [address(, bytes)]), for every cuGraph*NodeGetParams. */
void cr_srv_cuGraphKernelNodeGetParams_v2(cr_request_t *req)
{
    node_ref_t *r = node_arg(req, 1);
    if (!r) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    const node_t *n = &r->graph->nodes[r->index];
    void *bulk = n->bulk_len ? malloc(n->bulk_len) : NULL; /* the node may change meanwhile */
    if (n->bulk_len && !bulk) {
        cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, CUDA_SUCCESS, 3) == 0) {
        msgpack_pack_uint16(&reply.pk, n->opcode);
        if (n->body_len) /* a msgpack value already */
            reply.pk.callback(reply.pk.data, (const char *)n->bytes, n->body_len);
        else
            msgpack_pack_nil(&reply.pk);
        msgpack_pack_uint8(&reply.pk, n->opcode ? 0 : n->type);
        if (bulk) {
            memcpy(bulk, n->bytes + n->body_len, n->bulk_len);
            cr_reply_bulk(&reply, bulk, n->bulk_len, free, bulk);
            bulk = NULL;
        }
        cr_reply_send(req, &reply, 0);
    }
    free(bulk);
    cr_request_free(req);
}
