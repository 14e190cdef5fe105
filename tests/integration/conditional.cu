// Conditional graph nodes through the stub: WHILE, IF/ELSE and SWITCH nodes whose value
// device code sets (cudaGraphSetConditional), built node by node and by capture into a
// body, nested, edited, updated, instantiated again (a clone refused, as natively); every
// launch's result checked. Also runs natively on a GPU (tests/gpu/run.sh) with the same
// results.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cr_test.h"

#define WIDTH 32

__global__ void loop_step(cudaGraphConditionalHandle h, int *counter, int limit)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int v = ++*counter;
        cudaGraphSetConditional(h, v < limit ? 1u : 0u);
    }
}

__global__ void set_from(cudaGraphConditionalHandle h, const int *value)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        cudaGraphSetConditional(h, (unsigned)*value);
}

__global__ void write_value(int *out, int v)
{
    out[threadIdx.x] = v;
}

__global__ void add_value(int *out, int v)
{
    out[threadIdx.x] += v;
}

static void put(int *dev, int v)
{
    int host[WIDTH];
    for (int i = 0; i < WIDTH; i++)
        host[i] = v;
    CHECK_CUDA(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaDeviceSynchronize()); // the graphs run on a stream that does not wait for it
}

static void expect(const int *dev, int want, const char *what)
{
    int host[WIDTH];
    CHECK_CUDA(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
    for (int i = 0; i < WIDTH; i++)
        CHECK(host[i] == want, "%s: [%d] = %d, expected %d", what, i, host[i], want);
}

static int first(const int *dev)
{
    int v;
    CHECK_CUDA(cudaMemcpy(&v, dev, sizeof v, cudaMemcpyDeviceToHost));
    return v;
}

static cudaGraphNode_t kernel_node(cudaGraph_t g, const cudaGraphNode_t *deps, size_t n,
                                   void *fn, void **args, unsigned threads)
{
    cudaKernelNodeParams p = {};
    p.func = fn;
    p.gridDim = dim3(1);
    p.blockDim = dim3(threads);
    p.kernelParams = args;
    cudaGraphNode_t node;
    CHECK_CUDA(cudaGraphAddKernelNode(&node, g, deps, n, &p));
    return node;
}

// Sets the loop counter to 0, after `n` dependencies.
static cudaGraphNode_t reset_node(cudaGraph_t g, const cudaGraphNode_t *deps, size_t n,
                                  int *counter)
{
    cudaMemsetParams m = {};
    m.dst = counter;
    m.value = 0;
    m.elementSize = 4;
    m.width = 1;
    m.height = 1;
    cudaGraphNode_t node;
    CHECK_CUDA(cudaGraphAddMemsetNode(&node, g, deps, n, &m));
    return node;
}

static cudaGraphNode_t conditional_node(cudaGraph_t g, const cudaGraphNode_t *deps, size_t n,
                                        cudaGraphConditionalHandle h,
                                        cudaGraphConditionalNodeType type, unsigned size,
                                        cudaGraph_t *bodies)
{
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h;
    p.conditional.type = type;
    p.conditional.size = size;
    cudaGraphNode_t node;
    CHECK_CUDA(cudaGraphAddNode(&node, g, deps, nullptr, n, &p));
    CHECK(p.conditional.phGraph_out != nullptr, "no bodies came back");
    for (unsigned i = 0; i < size; i++) {
        bodies[i] = p.conditional.phGraph_out[i];
        CHECK(bodies[i] != nullptr, "body %u is NULL", i);
    }
    return node;
}

static void launch(cudaGraphExec_t exec, cudaStream_t s)
{
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
}

// A WHILE node: its body counts up to a limit, the loop stops when the body says so; a
// memset before it starts the count again at every launch.
static void while_loop(int *counter, cudaStream_t s)
{
    cudaGraph_t g, body;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h;
    CHECK_CUDA(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNode_t reset = reset_node(g, nullptr, 0, counter);
    cudaGraphNode_t loop = conditional_node(g, &reset, 1, h, cudaGraphCondTypeWhile, 1, &body);
    cudaGraphNodeType type;
    CHECK_CUDA(cudaGraphNodeGetType(loop, &type));
    CHECK(type == cudaGraphNodeTypeConditional, "node type %d", (int)type);
    int limit = 7;
    void *args[] = {&h, &counter, &limit};
    cudaGraphNode_t step = kernel_node(body, nullptr, 0, (void *)loop_step, args, 1);
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    for (int i = 0; i < 3; i++) {
        put(counter, -100);
        launch(exec, s);
        CHECK(first(counter) == 7, "the count after a WHILE node: %d", first(counter));
    }
    // the executable graph's copy of the body's kernel takes a new limit (as the driver's)
    cudaKernelNodeParams p = {};
    int nine = 9;
    void *nine_args[] = {&h, &counter, &nine};
    p.func = (void *)loop_step;
    p.gridDim = dim3(1);
    p.blockDim = dim3(1);
    p.kernelParams = nine_args;
    CHECK_CUDA(cudaGraphExecKernelNodeSetParams(exec, step, &p));
    put(counter, -100);
    launch(exec, s);
    CHECK(first(counter) == 9, "the count after the body's kernel was edited: %d", first(counter));
    // a graph with conditional nodes is not cloned, nor instantiated while an executable
    // graph of it lives (CUDA_ERROR_NOT_SUPPORTED both, seen on an H100, driver 580)
    cudaGraph_t clone = nullptr;
    CHECK(cudaGraphClone(&clone, g) == cudaErrorNotSupported, "a clone of a conditional graph");
    cudaGraphExec_t again = nullptr;
    CHECK(cudaGraphInstantiate(&again, g, 0) == cudaErrorNotSupported,
          "a second executable graph of a conditional graph");
    (void)cudaGetLastError();
    // once that one is destroyed, a new one runs the same loop (built again)
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    put(counter, -100);
    launch(exec, s);
    CHECK(first(counter) == 7, "the count after a new executable graph: %d", first(counter));
    // the graph destroyed, its executable graph still runs
    CHECK_CUDA(cudaGraphDestroy(g));
    put(counter, -100);
    launch(exec, s);
    CHECK(first(counter) == 7, "the count after the graph was destroyed: %d", first(counter));
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    printf("conditional: WHILE passed\n");
}

// An IF node with an ELSE body: a kernel before it sets the value from memory; the selected
// body writes out. The executable graph's kernel node given other arguments selects anew.
static void if_else(int *flag, int *out, cudaStream_t s)
{
    cudaGraph_t g, bodies[2];
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h;
    CHECK_CUDA(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
    void *set_args[] = {&h, &flag};
    cudaGraphNode_t set = kernel_node(g, nullptr, 0, (void *)set_from, set_args, 1);
    conditional_node(g, &set, 1, h, cudaGraphCondTypeIf, 2, bodies);
    int one = 1, two = 2;
    void *then_args[] = {&out, &one};
    void *else_args[] = {&out, &two};
    kernel_node(bodies[0], nullptr, 0, (void *)write_value, then_args, WIDTH);
    kernel_node(bodies[1], nullptr, 0, (void *)write_value, else_args, WIDTH);
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    put(out, 0);
    put(flag, 1);
    launch(exec, s);
    expect(out, 1, "IF with a non-zero value");
    put(flag, 0);
    launch(exec, s);
    expect(out, 2, "IF with zero (its ELSE body)");
    put(flag, 5);
    launch(exec, s);
    expect(out, 1, "IF with 5");

    // the value now read from out (1): the IF body runs
    put(flag, 0);
    cudaKernelNodeParams p = {};
    int *from = out;
    void *new_args[] = {&h, &from};
    p.func = (void *)set_from;
    p.gridDim = dim3(1);
    p.blockDim = dim3(1);
    p.kernelParams = new_args;
    CHECK_CUDA(cudaGraphExecKernelNodeSetParams(exec, set, &p));
    put(out, 1);
    launch(exec, s);
    expect(out, 1, "IF after its kernel node read another value");
    put(out, 0); // zero there: the ELSE body
    launch(exec, s);
    expect(out, 2, "ELSE after its kernel node read another value");
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(g));
    printf("conditional: IF/ELSE passed\n");
}

// A SWITCH node of three bodies; a value past them runs none. A WHILE node in one of them
// (nested, on a handle of the top graph).
static void switch_nested(int *sel, int *out, int *counter, cudaStream_t s)
{
    cudaGraph_t g, bodies[3], inner;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h, loop;
    CHECK_CUDA(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
    CHECK_CUDA(cudaGraphConditionalHandleCreate(&loop, g, 1, cudaGraphCondAssignDefault));
    void *set_args[] = {&h, &sel};
    cudaGraphNode_t set = kernel_node(g, nullptr, 0, (void *)set_from, set_args, 1);
    conditional_node(g, &set, 1, h, cudaGraphCondTypeSwitch, 3, bodies);
    int values[3] = {10, 11, 12};
    void *args0[] = {&out, &values[0]}, *args1[] = {&out, &values[1]};
    void *args2[] = {&out, &values[2]};
    kernel_node(bodies[0], nullptr, 0, (void *)write_value, args0, WIDTH);
    kernel_node(bodies[1], nullptr, 0, (void *)write_value, args1, WIDTH);
    cudaGraphNode_t w = kernel_node(bodies[2], nullptr, 0, (void *)write_value, args2, WIDTH);
    // body 2: out = 12, then a loop that adds 1 to out five times
    cudaGraphNode_t reset = reset_node(bodies[2], &w, 1, counter);
    conditional_node(bodies[2], &reset, 1, loop, cudaGraphCondTypeWhile, 1, &inner);
    int limit = 5, plus = 1;
    void *step_args[] = {&loop, &counter, &limit};
    void *add_args[] = {&out, &plus};
    cudaGraphNode_t add = kernel_node(inner, nullptr, 0, (void *)add_value, add_args, WIDTH);
    kernel_node(inner, &add, 1, (void *)loop_step, step_args, 1);
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    int want[4] = {10, 11, 17, -1};
    for (int v = 0; v < 4; v++) {
        put(out, -1);
        put(sel, v);
        launch(exec, s);
        char what[64];
        snprintf(what, sizeof what, "SWITCH with %d", v);
        expect(out, want[v], what);
    }
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(g));
    printf("conditional: SWITCH and a nested WHILE passed\n");
}

// A conditional node made during a capture, its body captured into (the pattern of
// cudaStreamBeginCaptureToGraph); then an executable graph updated from another such graph.
static cudaUserObject_t captured_object; // moved to the graph being captured when set

static cudaGraph_t captured_if(int *flag, int *out, int v, cudaStream_t s, cudaStream_t body_s)
{
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    cudaStreamCaptureStatus st;
    cudaGraph_t g;
    const cudaGraphNode_t *deps;
    size_t ndeps;
    CHECK_CUDA(cudaStreamGetCaptureInfo(s, &st, nullptr, &g, &deps, nullptr, &ndeps));
    CHECK(st == cudaStreamCaptureStatusActive, "capture status %d", (int)st);
    CHECK(g != nullptr && ndeps == 0, "a capture's graph %p with %zu nodes before its first",
          (void *)g, ndeps);
    if (captured_object)
        CHECK_CUDA(cudaGraphRetainUserObject(g, captured_object, 1, cudaGraphUserObjectMove));
    cudaGraphConditionalHandle h;
    CHECK_CUDA(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
    set_from<<<1, 1, 0, s>>>(h, flag);
    CHECK_CUDA(cudaGetLastError());
    cudaGraph_t same;
    CHECK_CUDA(cudaStreamGetCaptureInfo(s, &st, nullptr, &same, &deps, nullptr, &ndeps));
    CHECK(same == g && ndeps == 1, "the capture's graph %p (was %p) with %zu last nodes",
          (void *)same, (void *)g, ndeps);
    cudaGraphNodeType type;
    CHECK_CUDA(cudaGraphNodeGetType(deps[0], &type));
    CHECK(type == cudaGraphNodeTypeKernel, "the last node captured is of type %d", (int)type);
    cudaGraph_t body;
    cudaGraphNode_t node = conditional_node(g, deps, ndeps, h, cudaGraphCondTypeIf, 1, &body);
    CHECK_CUDA(cudaStreamUpdateCaptureDependencies(s, &node, nullptr, 1,
                                                   cudaStreamSetCaptureDependencies));
    CHECK_CUDA(cudaStreamBeginCaptureToGraph(body_s, body, nullptr, nullptr, 0,
                                             cudaStreamCaptureModeThreadLocal));
    write_value<<<1, WIDTH, 0, body_s>>>(out, v);
    add_value<<<1, WIDTH, 0, body_s>>>(out, 100);
    CHECK_CUDA(cudaGetLastError());
    cudaGraph_t ended;
    CHECK_CUDA(cudaStreamEndCapture(body_s, &ended));
    CHECK(ended == body, "the body's capture ended in another graph");
    add_value<<<1, WIDTH, 0, s>>>(out, 1000); // after the IF node
    cudaGraph_t graph;
    CHECK_CUDA(cudaStreamEndCapture(s, &graph));
    CHECK(graph == g, "the capture ended in %p, not the graph it gave out (%p)", (void *)graph,
          (void *)g);
    size_t nodes;
    CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
    CHECK(nodes == 3, "the captured graph has %zu nodes, expected 3", nodes);
    return graph;
}

static int destroyed;

static void destroy_object(void *)
{
    __atomic_add_fetch(&destroyed, 1, __ATOMIC_SEQ_CST);
}

static int destroyed_now(void)
{
    return __atomic_load_n(&destroyed, __ATOMIC_SEQ_CST);
}

static void capture_and_update(int *flag, int *out, cudaStream_t s, cudaStream_t body_s)
{
    // a user object moved to the graph while it is being captured is the graph's after the
    // capture ends
    cudaUserObject_t o;
    CHECK_CUDA(
        cudaUserObjectCreate(&o, nullptr, destroy_object, 1, cudaUserObjectNoDestructorSync));
    captured_object = o;
    cudaGraph_t g = captured_if(flag, out, 5, s, body_s);
    captured_object = nullptr;
    usleep(50000); // a destructor run by mistake would have run by now
    CHECK(destroyed_now() == 0, "the user object went while its graph holds it");
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    put(out, 0);
    put(flag, 1);
    launch(exec, s);
    expect(out, 1105, "a captured IF node, its body run");
    put(out, 0);
    put(flag, 0);
    launch(exec, s);
    expect(out, 1000, "a captured IF node, its body not run");
    // the same shape with another value in its body: the executable graph takes it
    cudaGraph_t other = captured_if(flag, out, 7, s, body_s);
    cudaGraphExecUpdateResultInfo info;
    CHECK_CUDA(cudaGraphExecUpdate(exec, other, &info));
    CHECK(info.result == cudaGraphExecUpdateSuccess, "update result %d", (int)info.result);
    put(out, 0);
    put(flag, 1);
    launch(exec, s);
    expect(out, 1107, "an updated IF node's body");
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK_CUDA(cudaGraphDestroy(other));
    for (int i = 0; i < 500 && !destroyed_now(); i++)
        usleep(10000);
    CHECK(destroyed_now() == 1, "the user object's destructor ran %d times", destroyed_now());
    printf("conditional: capture into a body and update passed\n");
}

// What the driver refuses: a handle of another graph (a graph's handles are numbered 1, 2,
// ..., so one this graph has not), an IF node of three bodies, a WHILE node of two, a second
// node on a handle, instantiating a graph with a handle no node has.
static void refusals(void)
{
    cudaGraph_t g, other;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    CHECK_CUDA(cudaGraphCreate(&other, 0));
    cudaGraphConditionalHandle mine, theirs;
    CHECK_CUDA(cudaGraphConditionalHandleCreate(&mine, g, 0, 0));
    CHECK_CUDA(cudaGraphConditionalHandleCreate(&theirs, other, 0, 0));
    CHECK_CUDA(cudaGraphConditionalHandleCreate(&theirs, other, 0, 0));
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = theirs;
    p.conditional.type = cudaGraphCondTypeIf;
    p.conditional.size = 1;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddNode(&node, g, nullptr, nullptr, 0, &p) != cudaSuccess,
          "a handle of another graph was taken");
    cudaGetLastError();
    cudaGraphExec_t exec = nullptr;
    cudaGraphInstantiateParams params = {};
    cudaError_t r = cudaGraphInstantiateWithParams(&exec, g, &params);
    CHECK(r == cudaErrorInvalidValue &&
              params.result_out == cudaGraphInstantiateConditionalHandleUnused,
          "a graph whose handle no node has was instantiated: error %d, result %d", (int)r,
          (int)params.result_out);
    cudaGetLastError();
    p.conditional.handle = mine;
    p.conditional.size = 3;
    CHECK(cudaGraphAddNode(&node, g, nullptr, nullptr, 0, &p) != cudaSuccess,
          "an IF node of three bodies was taken");
    cudaGetLastError();
    p.conditional.type = cudaGraphCondTypeWhile;
    p.conditional.size = 2;
    CHECK(cudaGraphAddNode(&node, g, nullptr, nullptr, 0, &p) != cudaSuccess,
          "a WHILE node of two bodies was taken");
    cudaGetLastError();
    p.conditional.size = 1;
    CHECK_CUDA(cudaGraphAddNode(&node, g, nullptr, nullptr, 0, &p));
    CHECK(cudaGraphAddNode(&node, g, nullptr, nullptr, 0, &p) != cudaSuccess,
          "a second node on a handle was taken");
    cudaGetLastError();
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK_CUDA(cudaGraphDestroy(other));
    printf("conditional: refusals passed\n");
}

int main()
{
    int *counter, *flag, *out;
    CHECK_CUDA(cudaMalloc(&counter, WIDTH * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&flag, WIDTH * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&out, WIDTH * sizeof(int)));
    cudaStream_t s, body_s;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&body_s, cudaStreamNonBlocking));
    while_loop(counter, s);
    if_else(flag, out, s);
    switch_nested(flag, out, counter, s);
    capture_and_update(flag, out, s, body_s);
    refusals();
    CHECK_CUDA(cudaFree(counter));
    CHECK_CUDA(cudaFree(flag));
    CHECK_CUDA(cudaFree(out));
    printf("conditional: all passed\n");
    return 0;
}
