/* Stream capture, the client's side (capture.c): which streams capture, by wire id. */
#ifndef CR_CAPTURE_H
#define CR_CAPTURE_H

#include <msgpack.h>
#include <stdint.h>

#include "api.h"
#include "cr_client_hand.h"

/* Before work on a stream: CUDA_SUCCESS when the stream does not capture, or captures and
 * the work is `capturable`; else CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, which invalidates
 * the capture, or CUDA_ERROR_STREAM_CAPTURE_INVALIDATED for a capture already invalid. */
CUresult cr_capture_check(uint64_t stream, int capturable);
/* 1 when the stream captures (and the capture is valid): work on it becomes a node. */
int cr_capture_capturing(uint64_t stream);
/* The same for a generically marshalled call naming this stream. */
CUresult cr_capture_check_call(const cr_fn_desc_t *d, uint64_t stream);
/* An event was recorded on a stream (a capture's, or not), or a stream waits on an event:
 * waiting on an event recorded in a capture joins the stream to that capture. */
void cr_capture_event_recorded(uint64_t event, uint64_t stream);
void cr_capture_event_waited(uint64_t stream, uint64_t event);
/* The server began a capture on this stream, into the graph `into` (0: a graph of its
 * own): CUDA_SUCCESS, or CUDA_ERROR_ILLEGAL_STATE when it already captures. */
CUresult cr_capture_begin(uint64_t stream, uint64_t into);
/* The capture this stream began ends, for every stream in it; *invalid says whether it was
 * invalidated, *into the graph it captured into. CUDA_ERROR_ILLEGAL_STATE when the stream
 * does not capture, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED when it joined a capture another
 * stream began. */
CUresult cr_capture_end(uint64_t stream, int *invalid, uint64_t *into);
/* The context was reset: no stream captures any more. */
void cr_capture_forget_all(void);

/* A node's dependencies as the graph messages carry them (graph.c's and the capture's):
 * each a node, or [node, its edge's data] when that data is not the default (edges NULL:
 * every one the default). An edge's data travels as its bytes read as a little-endian
 * integer (cr_edge_wire). */
void cr_pack_deps(msgpack_packer *pk, const CUgraphNode *deps, const CUgraphEdgeData *edges,
                  size_t n);
uint64_t cr_edge_wire(const CUgraphEdgeData *e);
/* The data of a reply's list (empty: every edge the default) for the `given` nodes written,
 * into edges (the rest of its `room` zeroed); without edges to fill, nodes written with data
 * other than the default make it CUDA_ERROR_LOSSY_QUERY, as the driver answers. */
CUresult cr_give_edges(const msgpack_object *o, CUgraphEdgeData *edges, size_t room,
                       const CUgraphNode *written, size_t given);

#endif
