/* The driver's own graph for an executable graph (device_graph.c): what graph.c launches
 * in one call instead of replaying its nodes one by one, when every node is work the
 * driver's graph can hold (kernels, memsets, device copies, event records and waits,
 * empty nodes), with the graph's edges. */
#ifndef CR_SERVER_DEVICE_GRAPH_H
#define CR_SERVER_DEVICE_GRAPH_H

#include "request.h"
#include "session.h"

typedef struct cr_device_graph cr_device_graph_t;

/* The device memory a memset or device-to-device copy request touches, from its arguments
 * as numbers (v: the first six): the [start, start + len) ranges, 1 or 2, in out[]; 0 for
 * other requests; -1 when the arguments overflow. */
typedef struct {
    CUdeviceptr start;
    uint64_t len;
} cr_extent_t;
int cr_memory_op_extents(uint16_t opcode, const uint64_t v[6], cr_extent_t out[2]);

/* A graph's conditional handles (cuGraphConditionalHandleCreate needs a driver graph before
 * any node names the handle): made against an empty driver graph, which only numbers them;
 * each build of the graph makes them again, in the same order, in a driver graph of its
 * own, where the driver numbers them the same (1, 2, ... in a graph: seen on driver 580;
 * the build checks it). Shared, counted, by the graph, its conditional nodes' bodies, its
 * copies and their driver's graphs. */
typedef struct cr_graph_anchor cr_graph_anchor_t;
cr_graph_anchor_t *cr_graph_anchor_new(cr_session_t *s); /* NULL: out of memory, unsupported */
void cr_graph_anchor_ref(cr_graph_anchor_t *a);
void cr_graph_anchor_unref(cr_graph_anchor_t *a);
/* A new handle (CU_GRAPH_COND_ASSIGN_DEFAULT or 0 in flags), or the driver's error. */
CUresult cr_graph_anchor_handle(cr_graph_anchor_t *a, unsigned dflt, unsigned flags,
                                uint64_t *handle);
/* 1 when `handle` is one of the first `count` made against a. */
int cr_graph_anchor_owns(const cr_graph_anchor_t *a, size_t count, uint64_t handle);
/* How many handles were made against a (0 for NULL). */
size_t cr_graph_anchor_count(const cr_graph_anchor_t *a);
/* Whether a conditional node of the graph (or of a body in it) has `handle`: the driver
 * gives a handle one node. Marked when such a node is added, cleared when it goes. */
int cr_graph_anchor_taken(const cr_graph_anchor_t *a, uint64_t handle);
/* 1 when a handle made against a has no node (the driver then refuses to instantiate). */
int cr_graph_anchor_unused(const cr_graph_anchor_t *a);
void cr_graph_anchor_mark(cr_graph_anchor_t *a, uint64_t handle, int taken);
/* The driver lets a graph with conditional nodes have one executable graph at a time (a
 * second cuGraphInstantiate fails with CUDA_ERROR_NOT_SUPPORTED until the first is
 * destroyed: seen on driver 580). Take: -1 when one holds it already, else 0 (a reference
 * taken); drop when that executable graph is destroyed. */
int cr_graph_anchor_take_exec(cr_graph_anchor_t *a);
void cr_graph_anchor_drop_exec(cr_graph_anchor_t *a);

/* Starts a driver graph for session s, standing for a graph.c graph of `nodes` nodes (its
 * bodies' nodes included, numbered after), to be instantiated with these flags
 * (CUDA_GRAPH_INSTANTIATE_FLAG_*). With an anchor (a graph with conditional handles), the
 * anchor's first `handles` handles are made in it first, each checked to be the anchor's,
 * and nothing can change in place once it is instantiated (cr_device_graph_update and
 * _enable refuse: the graph is built again). NULL when out of memory, the backend lacks
 * the driver's graph calls, or the driver numbers the handles otherwise. */
cr_device_graph_t *cr_device_graph_new(cr_session_t *s, uint64_t flags, size_t nodes,
                                       cr_graph_anchor_t *anchor, size_t handles);
/* Adds the work of node `index`'s request (decoded, as a replay would dispatch it),
 * depending on the nodes `deps` (graph.c indices of nodes added before), those edges with
 * the data `edges` (NULL: every one the default; taken by a kernel node, whole for any
 * other); turned off once instantiated unless `enabled`. CUDA_SUCCESS;
 * CUDA_ERROR_NOT_SUPPORTED for work the driver's graph does not take as the server must
 * have it (then replay the graph); else the error the request would get now, or the
 * driver's. */
CUresult cr_device_graph_add(cr_device_graph_t *g, size_t index, cr_request_t *req, int enabled,
                             const uint32_t *deps, const CUgraphEdgeData *edges, uint32_t ndeps);
/* Adds node `index` as an empty node (an allocation, a free, a child graph's end...). */
CUresult cr_device_graph_add_empty(cr_device_graph_t *g, size_t index, const uint32_t *deps,
                                   uint32_t ndeps);
/* Adds node `index` as a conditional node of this type (CU_GRAPH_COND_TYPE_*) with `size`
 * bodies, on one of its handles; its bodies' nodes are added after it, each body's
 * between cr_device_graph_enter(g, index, body) and cr_device_graph_leave(g, the value
 * enter returned). */
CUresult cr_device_graph_add_conditional(cr_device_graph_t *g, size_t index, uint64_t handle,
                                         unsigned type, unsigned size, const uint32_t *deps,
                                         uint32_t ndeps);
CUgraph cr_device_graph_enter(cr_device_graph_t *g, size_t index, unsigned body);
void cr_device_graph_leave(cr_device_graph_t *g, CUgraph outer);
/* Instantiates it once every node is added. */
CUresult cr_device_graph_instantiate(cr_device_graph_t *g);
/* Node `index` has new arguments (its new request), or is turned on or off: applied to the
 * instantiated graph in place, checked as when added. An error when it cannot be (the
 * graph must then be built again). */
CUresult cr_device_graph_update(cr_device_graph_t *g, size_t index, cr_request_t *req);
CUresult cr_device_graph_enable(cr_device_graph_t *g, size_t index, int on);
/* 1 when everything its turned-on nodes name is still the session's as when it was added
 * or updated: each function and event the same object, each memset's and copy's memory the
 * session's (freed memory may be another tenant's now). Check before each launch. */
int cr_device_graph_current(const cr_device_graph_t *g, cr_session_t *s);
/* Launches it on the session's stream as one unit the scheduler admits and measures;
 * its kernels count as the session's launches. */
CUresult cr_device_graph_launch(cr_device_graph_t *g, cr_session_t *s, cr_handle_t *stream);
/* Its nodes of work (empty ones aside), and its kernels among them. */
size_t cr_device_graph_nodes(const cr_device_graph_t *g, size_t *kernels);
void cr_device_graph_free(cr_device_graph_t *g);

#endif
