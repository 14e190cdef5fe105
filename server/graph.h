/* Graphs made by stream capture (graph.c): the server keeps what a capturing stream is given
 * and replays it at each launch of the graph. The messages' handlers are in
 * cr_server_hand.h. */
#ifndef CR_SERVER_GRAPH_H
#define CR_SERVER_GRAPH_H

#include "session.h"

/* Where replayed requests go: the router (cr_dispatch), handed over by the executor. */
void cr_graph_set_runner(void (*run)(cr_request_t *req));
/* Before a driver call runs (dispatch.c, executor): 1 when the request was work for a
 * capturing stream, or a wait that joins a stream to a capture, and was kept instead of run
 * (the request is then freed); 0 when it runs as usual. */
int cr_graph_capture(cr_request_t *req);
/* A primary-context reset (executor): every capture under way ends, its graph dropped;
 * graphs already made stay. */
void cr_graph_end_captures(cr_session_t *s);
/* The session ended (executor, after its handles are forgotten): frees its captures. */
void cr_graph_release_all(cr_session_t *s);

#endif
