/* CUDA user objects (user_object.c): a destructor with a count of references that the
 * program and graphs own, run once the last goes. They live in the stub alone; graphs and
 * executable graphs are named by their server ids, which a session never reuses. The
 * graph module (graph.c) tells this one what happens to graphs, and serves the graph
 * calls of user objects with it. Threads: any; one lock. */
#ifndef CR_USER_OBJECT_H
#define CR_USER_OBJECT_H

#include <cuda.h>
#include <stdint.h>

/* cuGraphRetainUserObject and cuGraphReleaseUserObject of a graph the caller checked is
 * one, by its id. */
CUresult cr_user_objects_retain(uint64_t holder, CUuserObject object, unsigned int count,
                                unsigned int flags);
CUresult cr_user_objects_release(uint64_t holder, CUuserObject object, unsigned int count);
/* `to` (a graph or an executable graph just made) takes references to every user object
 * `from` holds, as many as it holds: a clone, an instantiation, a child graph node. */
void cr_user_objects_copy(uint64_t from, uint64_t to);
/* The executable graph `exec` was updated from `graph`: it holds references like graph's
 * in place of its own, which go as if it were destroyed (cr_user_objects_exec_gone). */
void cr_user_objects_replace(uint64_t exec, uint64_t graph);
/* The graph `id` was destroyed: its references go now. */
void cr_user_objects_graph_gone(uint64_t id);
/* The executable graph `id` was launched on `stream`. */
void cr_user_objects_launched(uint64_t id, CUstream stream);
/* The executable graph `id` was destroyed: its references go once the streams it was
 * launched on have reached this point (a host function on each), as the driver releases
 * them after the graph's last launch completes. */
void cr_user_objects_exec_gone(uint64_t id);

#endif
