// graphs: CUDA graphs made by stream capture, as PyTorch's CUDA graphs and inference servers
// use them: a memset, kernels and a device-to-device copy captured on a stream run only when
// the graph is launched, once per launch, on the stream it is launched on; kernel arguments
// are the captured values while memory is read at each launch; two streams forked and
// joined by events in one capture; an executable graph updated from a graph captured again
// with other arguments (and refused one of another shape); a graph launched into another
// capture is refused; what a capture
// cannot hold (a copy from host memory, a synchronize) fails and invalidates it; ending a
// capture from a stream that did not begin it fails; a graph whose memory was freed fails
// at its launch without touching the memory. Then a graph built node by node: memset,
// kernel, copy, event record, empty and child-graph nodes with dependencies; a kernel
// node's arguments changed in the executable graph; a clone; an executable graph is a
// snapshot; a node on memory the program does not have is refused when added; an edge
// backwards in the order nodes were added is not supported; the graph's DOT picture; host
// nodes, built and captured, run in order at every launch; a graph's nodes listed with their
// kinds; memset and host nodes' arguments changed in an executable graph and in a graph, a
// node turned off and on; memory allocated and freed by nodes of a graph, and by
// stream-ordered calls in a capture; user objects owned by the program and by graphs; a
// capture into a graph the program made; kernel node attributes; an executable graph's
// nodes given new arguments and turned off and on after launches; a graph whose module was
// unloaded or memory freed after its first launch fails at the next; a graph with memory
// nodes keeps the driver's rules, and one moved into a child graph node runs there; edges
// keep their data.
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include <cuda.h>

#include "cr_test.h"

__global__ void axpb(const float *x, float *y, float a, float b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + b;
}

__global__ void add(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] += x[i];
}

// host nodes write here, in the order they run (the callback thread runs them one by one)
static std::string trail;
static void note(void *tag)
{
    trail += *(const char *)tag;
}

static const int N = 4096;
static const size_t BYTES = N * sizeof(float);

static void fill(float *dev, float v)
{
    std::vector<float> h(N, v);
    CHECK_CUDA(cudaMemcpy(dev, h.data(), BYTES, cudaMemcpyHostToDevice));
}

static void expect_all(const float *dev, float want, const char *what)
{
    std::vector<float> h(N);
    CHECK_CUDA(cudaMemcpy(h.data(), dev, BYTES, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        CHECK(h[i] == want, "%s: element %d is %g, expected %g", what, i, h[i], want);
}

// One launch of exec on s, x filled with xv and y (and z, when given) with -9 first.
static void launch_fresh(cudaGraphExec_t exec, cudaStream_t s, float *x, float xv, float *y,
                         float *z = nullptr)
{
    fill(x, xv);
    fill(y, -9.0f);
    if (z)
        fill(z, -9.0f);
    CHECK_CUDA(cudaDeviceSynchronize()); // s does not wait for the legacy stream
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
}

// The DOT file cudaGraphDebugDotPrint writes of g.
static std::string dot_of(cudaGraph_t g)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/cr-graphs-%d.dot", (int)getpid());
    CHECK_CUDA(cudaGraphDebugDotPrint(g, path, 0));
    FILE *dot = fopen(path, "r");
    CHECK(dot, "no DOT file at %s", path);
    std::string text;
    for (int c; (c = fgetc(dot)) != EOF;)
        text += (char)c;
    fclose(dot);
    unlink(path);
    return text;
}

// a memset node's parameters: `width` floats of dst set to zero
static cudaMemsetParams zeroing(float *dst, size_t width)
{
    cudaMemsetParams mp = {};
    mp.dst = dst;
    mp.value = 0;
    mp.elementSize = 4;
    mp.width = width;
    mp.height = 1;
    return mp;
}

static cudaStreamCaptureStatus status_of(cudaStream_t s)
{
    cudaStreamCaptureStatus st;
    CHECK_CUDA(cudaStreamIsCapturing(s, &st));
    return st;
}

// whether an event was recorded (one never recorded has no time)
static bool recorded(cudaEvent_t e)
{
    float ms;
    cudaError_t r = cudaEventElapsedTime(&ms, e, e);
    cudaGetLastError();
    return r == cudaSuccess;
}

// event nodes given other events, in the graph and in an executable graph of it; and the
// entry points programs built against older CUDA find by version: cuGraphInstantiate with
// an error node and a log, the first cuStreamBeginCapture
static void event_nodes_and_older_entry_points(float *y, cudaStream_t s)
{
    cudaEvent_t first, second, third, waited, got;
    CHECK_CUDA(cudaEventCreate(&first));
    CHECK_CUDA(cudaEventCreate(&second));
    CHECK_CUDA(cudaEventCreate(&third));
    CHECK_CUDA(cudaEventCreate(&waited));
    CHECK_CUDA(cudaEventRecord(waited, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    cudaGraph_t g;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    cudaGraphNode_t n_set, n_record, n_wait;
    cudaMemsetParams mp = zeroing(y, N);
    CHECK_CUDA(cudaGraphAddMemsetNode(&n_set, g, nullptr, 0, &mp));
    CHECK_CUDA(cudaGraphAddEventRecordNode(&n_record, g, &n_set, 1, first));
    CHECK_CUDA(cudaGraphAddEventWaitNode(&n_wait, g, &n_record, 1, first));
    CHECK_CUDA(cudaGraphEventRecordNodeSetEvent(n_record, second));
    CHECK_CUDA(cudaGraphEventWaitNodeSetEvent(n_wait, waited));
    CHECK_CUDA(cudaGraphEventRecordNodeGetEvent(n_record, &got));
    CHECK(got == second, "the record node's event reads back as %p", (void *)got);
    CHECK_CUDA(cudaGraphEventWaitNodeGetEvent(n_wait, &got));
    CHECK(got == waited, "the wait node's event reads back as %p", (void *)got);
    EXPECT_CUDA_ERROR(cudaGraphEventRecordNodeSetEvent(n_set, second), cudaErrorInvalidValue);
    cudaGetLastError();
    cudaGraphExec_t ge;
    CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
    CHECK_CUDA(cudaGraphLaunch(ge, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(recorded(second) && !recorded(first), "the record node recorded %s",
          recorded(first) ? "the event it was added with" : "nothing");
    // in the executable graph only: the graph's node keeps its event
    CHECK_CUDA(cudaGraphExecEventRecordNodeSetEvent(ge, n_record, third));
    CHECK_CUDA(cudaGraphExecEventWaitNodeSetEvent(ge, n_wait, waited));
    CHECK_CUDA(cudaGraphLaunch(ge, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(recorded(third), "the executable graph's record node did not record its new event");
    CHECK_CUDA(cudaGraphEventRecordNodeGetEvent(n_record, &got));
    CHECK(got == second, "the graph's node took its executable graph's event");
    CHECK_CUDA(cudaGraphExecDestroy(ge));

    typedef CUresult (*instantiate_t)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
    for (int version : {10000, 11000}) {
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuGraphInstantiate", &fn, version,
                                                    cudaEnableDefault, &found));
        CHECK(fn && found == cudaDriverEntryPointSuccess, "cuGraphInstantiate %d not found",
              version);
        CUgraphExec old_exec = nullptr;
        CUgraphNode error_node = nullptr;
        char log[128] = "";
        CUresult r = ((instantiate_t)fn)(&old_exec, (CUgraph)g, &error_node, log, sizeof log);
        CHECK(r == CUDA_SUCCESS && old_exec, "cuGraphInstantiate %d: %d", version, (int)r);
        CHECK_CUDA(cudaGraphLaunch((cudaGraphExec_t)old_exec, s));
        CHECK_CUDA(cudaStreamSynchronize(s));
        CHECK_CUDA(cudaGraphExecDestroy((cudaGraphExec_t)old_exec));
        r = ((instantiate_t)fn)(&old_exec, nullptr, &error_node, log, sizeof log);
        CHECK(r != CUDA_SUCCESS && memchr(log, 0, sizeof log),
              "cuGraphInstantiate %d of no graph: %d", version, (int)r);
    }
    void *begin = nullptr;
    cudaDriverEntryPointQueryResult found;
    CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuStreamBeginCapture", &begin, 10000,
                                                cudaEnableDefault, &found));
    CHECK(begin && found == cudaDriverEntryPointSuccess, "the first cuStreamBeginCapture not found");
    CHECK(((CUresult(*)(CUstream))begin)((CUstream)s) == CUDA_SUCCESS,
          "the first cuStreamBeginCapture failed");
    CHECK(status_of(s) == cudaStreamCaptureStatusActive, "the first cuStreamBeginCapture: no capture");
    CHECK_CUDA(cudaMemsetAsync(y, 0, BYTES, s));
    cudaGraph_t captured;
    CHECK_CUDA(cudaStreamEndCapture(s, &captured));
    size_t count = 0;
    CHECK_CUDA(cudaGraphGetNodes(captured, nullptr, &count));
    CHECK(count == 1, "the first cuStreamBeginCapture captured %zu nodes", count);
    CHECK_CUDA(cudaGraphDestroy(captured));
    CHECK_CUDA(cudaGraphDestroy(g));
    for (cudaEvent_t e : {first, second, third, waited})
        CHECK_CUDA(cudaEventDestroy(e));
    printf("event nodes given other events; cuGraphInstantiate 10000 and 11000 and the first "
           "cuStreamBeginCapture found by version and working\n");
}

// user objects: destructors run (on a thread of the driver's, some time after) once the
// program's and the graphs' references are all gone; an executable graph keeps its
// references until the work it was launched into is done, and takes another graph's in
// place of its own when updated from it
static int destroyed[5];
static void destroy_object(void *which)
{
    __atomic_add_fetch(&destroyed[(size_t)which], 1, __ATOMIC_SEQ_CST);
}

static bool destroyed_soon(int which)
{
    for (int i = 0; i < 500 && !__atomic_load_n(&destroyed[which], __ATOMIC_SEQ_CST); i++)
        usleep(10000);
    return __atomic_load_n(&destroyed[which], __ATOMIC_SEQ_CST) == 1;
}

static bool still_there(int which)
{
    usleep(50000); // a destructor queued by mistake would have run by now
    return __atomic_load_n(&destroyed[which], __ATOMIC_SEQ_CST) == 0;
}

static volatile int gate_open;
static void gate(void *)
{
    while (!gate_open)
        usleep(1000);
}

static void user_objects(float *y, cudaStream_t s)
{
    cudaUserObject_t o;
    EXPECT_CUDA_ERROR(cudaUserObjectCreate(&o, (void *)0, destroy_object, 1, 0),
                      cudaErrorInvalidValue);
    EXPECT_CUDA_ERROR(
        cudaUserObjectCreate(&o, (void *)0, destroy_object, 0, cudaUserObjectNoDestructorSync),
        cudaErrorInvalidValue);
    // the program's references alone
    CHECK_CUDA(cudaUserObjectCreate(&o, (void *)0, destroy_object, 2, cudaUserObjectNoDestructorSync));
    CHECK_CUDA(cudaUserObjectRelease(o, 1));
    CHECK(still_there(0), "destroyed with a reference left");
    CHECK_CUDA(cudaUserObjectRetain(o, 3));
    EXPECT_CUDA_ERROR(cudaUserObjectRetain(o, 0), cudaErrorInvalidValue);
    CHECK_CUDA(cudaUserObjectRelease(o, 4));
    CHECK(destroyed_soon(0), "not destroyed once its references were all released");

    // a graph's reference, a clone's, an executable graph's until its launch is done
    cudaGraph_t g, clone;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    cudaGraphNode_t set;
    cudaMemsetParams mp = zeroing(y, N);
    CHECK_CUDA(cudaGraphAddMemsetNode(&set, g, nullptr, 0, &mp));
    CHECK_CUDA(cudaUserObjectCreate(&o, (void *)1, destroy_object, 1, cudaUserObjectNoDestructorSync));
    CHECK_CUDA(cudaGraphRetainUserObject(g, o, 2, 0));
    EXPECT_CUDA_ERROR(cudaGraphRetainUserObject(g, o, 1, 2), cudaErrorInvalidValue);
    CHECK_CUDA(cudaGraphReleaseUserObject(g, o, 1));
    CHECK_CUDA(cudaUserObjectRelease(o, 1)); // the graph's one reference remains
    CHECK(still_there(1), "destroyed while a graph holds it");
    CHECK_CUDA(cudaGraphClone(&clone, g));
    cudaGraphExec_t ge;
    CHECK_CUDA(cudaGraphInstantiate(&ge, clone, 0));
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK_CUDA(cudaGraphDestroy(clone));
    CHECK(still_there(1), "destroyed while an executable graph holds it");
    gate_open = 0;
    CHECK_CUDA(cudaLaunchHostFunc(s, gate, nullptr)); // holds the stream
    CHECK_CUDA(cudaGraphLaunch(ge, s));
    CHECK_CUDA(cudaGraphExecDestroy(ge));
    CHECK(still_there(1), "destroyed before the executable graph's launch ran");
    gate_open = 1;
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(destroyed_soon(1), "not destroyed once the last launch of its executable graph ran");

    // references moved from the program, and a child graph node's
    cudaGraph_t child, parent;
    CHECK_CUDA(cudaGraphCreate(&child, 0));
    CHECK_CUDA(cudaGraphCreate(&parent, 0));
    CHECK_CUDA(cudaUserObjectCreate(&o, (void *)2, destroy_object, 1, cudaUserObjectNoDestructorSync));
    CHECK_CUDA(cudaGraphRetainUserObject(child, o, 1, cudaGraphUserObjectMove));
    cudaGraphNode_t node;
    CHECK_CUDA(cudaGraphAddChildGraphNode(&node, parent, nullptr, 0, child));
    CHECK_CUDA(cudaGraphDestroy(child));
    CHECK(still_there(2), "destroyed while a child graph node's graph holds it");
    CHECK_CUDA(cudaGraphDestroy(parent));
    CHECK(destroyed_soon(2), "not destroyed with the last graph that held it");

    // an executable graph updated from another graph holds that graph's references in place
    // of its own
    cudaGraph_t first, second;
    CHECK_CUDA(cudaGraphCreate(&first, 0));
    CHECK_CUDA(cudaGraphCreate(&second, 0));
    CHECK_CUDA(cudaGraphAddMemsetNode(&set, first, nullptr, 0, &mp));
    CHECK_CUDA(cudaGraphAddMemsetNode(&set, second, nullptr, 0, &mp));
    cudaUserObject_t o2;
    CHECK_CUDA(cudaUserObjectCreate(&o, (void *)3, destroy_object, 1, cudaUserObjectNoDestructorSync));
    CHECK_CUDA(cudaUserObjectCreate(&o2, (void *)4, destroy_object, 1, cudaUserObjectNoDestructorSync));
    CHECK_CUDA(cudaGraphRetainUserObject(first, o, 1, cudaGraphUserObjectMove));
    CHECK_CUDA(cudaGraphRetainUserObject(second, o2, 1, cudaGraphUserObjectMove));
    CHECK_CUDA(cudaGraphInstantiate(&ge, first, 0));
    CHECK_CUDA(cudaGraphDestroy(first));
    CHECK(still_there(3), "destroyed while an executable graph made from its graph holds it");
    cudaGraphExecUpdateResultInfo info;
    CHECK_CUDA(cudaGraphExecUpdate(ge, second, &info));
    CHECK(destroyed_soon(3), "still held by an executable graph updated from another graph");
    CHECK_CUDA(cudaGraphDestroy(second));
    CHECK(still_there(4), "destroyed while an executable graph updated from its graph holds it");
    CHECK_CUDA(cudaGraphExecDestroy(ge));
    CHECK(destroyed_soon(4), "not destroyed with the executable graph updated from its graph");
    cudaGetLastError(); // the refusals above were the last error
    printf("user objects destroyed when their last reference went, graphs' included\n");
}

// a capture into a graph the program made, after one of its nodes; an invalidated one
// destroys the graph
static void capture_into_graph(cudaStream_t s)
{
    float *x, *y;
    CHECK_CUDA(cudaMalloc(&x, BYTES));
    CHECK_CUDA(cudaMalloc(&y, BYTES));
    fill(x, 1.0f);
    fill(y, -1.0f);
    cudaGraph_t g, got = nullptr;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    cudaGraphNode_t set;
    cudaMemsetParams mp = zeroing(y, N);
    CHECK_CUDA(cudaGraphAddMemsetNode(&set, g, nullptr, 0, &mp));
    CHECK_CUDA(cudaStreamBeginCaptureToGraph(s, g, &set, nullptr, 1, cudaStreamCaptureModeGlobal));
    CHECK(status_of(s) == cudaStreamCaptureStatusActive, "no capture into the graph");
    dim3 grid((N + 255) / 256), block(256);
    axpb<<<grid, block, 0, s>>>(x, y, 2.0f, 3.0f, N);
    add<<<grid, block, 0, s>>>(x, y, N);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamEndCapture(s, &got));
    CHECK(got == g, "the capture ended with graph %p, not the one it captured into %p",
          (void *)got, (void *)g);
    size_t count = 0;
    CHECK_CUDA(cudaGraphGetNodes(g, nullptr, &count));
    CHECK(count == 3, "the graph has %zu nodes after the capture into it, expected 3", count);
    cudaGraphNode_t nodes[3], dep = nullptr;
    CHECK_CUDA(cudaGraphGetNodes(g, nodes, &count));
    size_t ndeps = 1;
    CHECK_CUDA(cudaGraphNodeGetDependencies(nodes[1], &dep, nullptr, &ndeps));
    CHECK(ndeps == 1 && dep == set, "the first captured node depends on %zu nodes, not the one given",
          ndeps);
    expect_all(y, -1.0f, "y after a capture into a graph (nothing ran)");
    cudaGraphExec_t ge;
    CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
    CHECK_CUDA(cudaGraphLaunch(ge, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(y, 6.0f, "y after the graph captured into ran (0, then 2x+3, then +x)");
    CHECK_CUDA(cudaGraphExecDestroy(ge));

    // invalidated, the capture takes the graph with it (as NVIDIA's driver does)
    CHECK_CUDA(cudaStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal));
    EXPECT_CUDA_ERROR(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    EXPECT_CUDA_ERROR(cudaStreamEndCapture(s, &got), cudaErrorStreamCaptureInvalidated);
    CHECK(got == nullptr, "an invalidated capture into a graph gave a graph");
    EXPECT_CUDA_ERROR(cudaGraphGetNodes(g, nullptr, &count), cudaErrorInvalidValue);
    cudaGetLastError();
    CHECK_CUDA(cudaFree(x));
    CHECK_CUDA(cudaFree(y));
    printf("a capture into a graph the program made, after one of its nodes\n");
}

// kernel node attributes: unset ones read as their default, one set reads back, is copied
// to another node and stays when the node is given other arguments; the graph runs
static void kernel_node_attributes(cudaStream_t s)
{
    float *x, *y;
    CHECK_CUDA(cudaMalloc(&x, BYTES));
    CHECK_CUDA(cudaMalloc(&y, BYTES));
    fill(x, 1.0f);
    fill(y, -1.0f);
    cudaGraph_t g;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    float two = 2.0f, one = 1.0f;
    int n = N;
    void *axpb_args[] = {&x, &y, &two, &one, &n}, *add_args[] = {&x, &y, &n};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)axpb;
    kp.gridDim = dim3((N + 255) / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = axpb_args;
    cudaGraphNode_t k1, k2, set;
    CHECK_CUDA(cudaGraphAddKernelNode(&k1, g, nullptr, 0, &kp));
    kp.func = (void *)add;
    kp.kernelParams = add_args;
    CHECK_CUDA(cudaGraphAddKernelNode(&k2, g, &k1, 1, &kp));
    cudaMemsetParams mp = zeroing(x, 1);
    CHECK_CUDA(cudaGraphAddMemsetNode(&set, g, &k2, 1, &mp));

    cudaLaunchAttributeValue v;
    memset(&v, 0x5a, sizeof v);
    CHECK_CUDA(cudaGraphKernelNodeGetAttribute(k1, cudaLaunchAttributePriority, &v));
    CHECK(v.priority == 0, "an unset priority reads as %d", v.priority);
    v.priority = -2;
    CHECK_CUDA(cudaGraphKernelNodeSetAttribute(k1, cudaLaunchAttributePriority, &v));
    memset(&v, 0, sizeof v);
    CHECK_CUDA(cudaGraphKernelNodeGetAttribute(k1, cudaLaunchAttributePriority, &v));
    CHECK(v.priority == -2, "the priority set reads back as %d", v.priority);
    CHECK_CUDA(cudaGraphKernelNodeCopyAttributes(k2, k1));
    memset(&v, 0, sizeof v);
    CHECK_CUDA(cudaGraphKernelNodeGetAttribute(k2, cudaLaunchAttributePriority, &v));
    CHECK(v.priority == -2, "the copied priority reads as %d", v.priority);
    float three = 3.0f;
    void *axpb3_args[] = {&x, &y, &three, &one, &n};
    kp.func = (void *)axpb;
    kp.kernelParams = axpb3_args;
    CHECK_CUDA(cudaGraphKernelNodeSetParams(k1, &kp));
    memset(&v, 0, sizeof v);
    CHECK_CUDA(cudaGraphKernelNodeGetAttribute(k1, cudaLaunchAttributePriority, &v));
    CHECK(v.priority == -2, "new arguments lost the priority: %d", v.priority);
    EXPECT_CUDA_ERROR(cudaGraphKernelNodeGetAttribute(set, cudaLaunchAttributePriority, &v),
                      cudaErrorInvalidValue);
    EXPECT_CUDA_ERROR(cudaGraphKernelNodeGetAttribute(k1, (cudaLaunchAttributeID)9999, &v),
                      cudaErrorInvalidValue);
    cudaGetLastError();

    cudaGraphExec_t ge;
    CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
    CHECK_CUDA(cudaGraphLaunch(ge, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(y, 5.0f, "y after the graph with attributes ran (3x + 1, then + x)");
    CHECK_CUDA(cudaGraphExecDestroy(ge));
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK_CUDA(cudaFree(x));
    CHECK_CUDA(cudaFree(y));
    printf("kernel node attributes set, read, copied and kept\n");
}

// What a graph names can go after its first launch, which made it the driver's graph on the
// server: a kernel's module unloaded, a memset's memory freed. The next launch must fail, not
// run a stale node (or write memory that may be another tenant's now).
typedef CUresult (*load_fn)(CUmodule *, const void *);
typedef CUresult (*function_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*unload_fn)(CUmodule);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);

static void *driver_entry(const char *name)
{
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CHECK_CUDA(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
    CHECK(fn && q == cudaDriverEntryPointSuccess, "no %s", name);
    return fn;
}

static const char set_value_ptx[] = R"(.version 8.0
.target sm_75
.address_size 64
.visible .entry set_value(.param .u64 p, .param .u32 v)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd0, [p];
    cvta.to.global.u64 %rd1, %rd0;
    ld.param.u32 %r0, [v];
    st.global.u32 [%rd1], %r0;
    ret;
}
)";

static unsigned read_word(const unsigned *dev)
{
    unsigned v = 0;
    CHECK_CUDA(cudaMemcpy(&v, dev, sizeof v, cudaMemcpyDeviceToHost));
    return v;
}

static void stale_after_first_launch(cudaStream_t s)
{
    load_fn load = (load_fn)driver_entry("cuModuleLoadData");
    function_fn function = (function_fn)driver_entry("cuModuleGetFunction");
    unload_fn unload = (unload_fn)driver_entry("cuModuleUnload");
    launch_fn launch = (launch_fn)driver_entry("cuLaunchKernel");
    unsigned *word;
    CHECK_CUDA(cudaMalloc(&word, sizeof *word));
    CHECK_CUDA(cudaMemset(word, 0, sizeof *word));
    CHECK_CUDA(cudaDeviceSynchronize()); // s does not wait for the legacy stream's memsets

    CUmodule mod;
    CUfunction set_value;
    CHECK(load(&mod, set_value_ptx) == CUDA_SUCCESS, "cuModuleLoadData");
    CHECK(function(&set_value, mod, "set_value") == CUDA_SUCCESS, "cuModuleGetFunction");
    unsigned seven = 7;
    void *args[] = {&word, &seven};
    cudaGraph_t g;
    cudaGraphExec_t e;
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(launch(set_value, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS,
          "captured cuLaunchKernel");
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    CHECK_CUDA(cudaGraphInstantiate(&e, g, 0));
    CHECK_CUDA(cudaGraphLaunch(e, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(read_word(word) == 7, "the module's kernel in a graph wrote %u", read_word(word));
    CHECK_CUDA(cudaMemset(word, 0, sizeof *word));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK(unload(mod) == CUDA_SUCCESS, "cuModuleUnload");
    cudaError_t launched = cudaGraphLaunch(e, s);
    cudaError_t synced = cudaStreamSynchronize(s);
    CHECK(launched != cudaSuccess || synced != cudaSuccess,
          "a graph ran a kernel of a module unloaded after its first launch");
    CHECK(read_word(word) == 0, "a stale kernel node wrote %u", read_word(word));
    cudaGetLastError();
    CHECK_CUDA(cudaGraphExecDestroy(e));
    CHECK_CUDA(cudaGraphDestroy(g));

    unsigned *gone;
    CHECK_CUDA(cudaMalloc(&gone, 4096));
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK_CUDA(cudaMemsetAsync(gone, 0x11, 4096, s));
    CHECK_CUDA(cudaMemsetAsync(word, 0x22, sizeof *word, s));
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    CHECK_CUDA(cudaGraphInstantiate(&e, g, 0));
    CHECK_CUDA(cudaGraphLaunch(e, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(read_word(gone) == 0x11111111u && read_word(word) == 0x22222222u,
          "memset nodes wrote %#x and %#x", read_word(gone), read_word(word));
    CHECK_CUDA(cudaMemset(word, 0, sizeof *word));
    CHECK_CUDA(cudaFree(gone));
    launched = cudaGraphLaunch(e, s);
    synced = cudaStreamSynchronize(s);
    CHECK(launched != cudaSuccess || synced != cudaSuccess,
          "a graph wrote memory freed after its first launch");
    cudaGetLastError();
    // and again: it fails as long as it names the freed memory
    launched = cudaGraphLaunch(e, s);
    synced = cudaStreamSynchronize(s);
    CHECK(launched != cudaSuccess || synced != cudaSuccess, "a second launch of it passed");
    cudaGetLastError();
    CHECK_CUDA(cudaGraphExecDestroy(e));
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK_CUDA(cudaFree(word));
}

// An executable graph's memset, copy and kernel nodes given new arguments, and a node turned
// off and on, after launches (the server has made it the driver's graph by then, and edits
// it in place): each launch does what the node says at that time.
static void edits_after_launches(float *x, float *y, cudaStream_t s)
{
    float *z;
    CHECK_CUDA(cudaMalloc(&z, BYTES));
    cudaGraph_t g;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    cudaMemsetParams mp = zeroing(y, N);
    cudaGraphNode_t set, kernel, copy;
    CHECK_CUDA(cudaGraphAddMemsetNode(&set, g, nullptr, 0, &mp));
    float a = 2.0f, b = 1.0f;
    int n = N;
    float *kx = x, *ky = y;
    void *args[] = {&kx, &ky, &a, &b, &n};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)axpb;
    kp.gridDim = dim3((N + 255) / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    CHECK_CUDA(cudaGraphAddKernelNode(&kernel, g, &set, 1, &kp));
    CHECK_CUDA(cudaGraphAddMemcpyNode1D(&copy, g, &kernel, 1, z, y, BYTES,
                                        cudaMemcpyDeviceToDevice));
    cudaGraphExec_t e;
    CHECK_CUDA(cudaGraphInstantiate(&e, g, 0));
    fill(x, 1.0f);
    for (int i = 0; i < 3; i++)
        CHECK_CUDA(cudaGraphLaunch(e, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(z, 3.0f, "z = 2x + 1");
    a = 4.0f; // the kernel node's new arguments
    CHECK_CUDA(cudaGraphExecKernelNodeSetParams(e, kernel, &kp));
    CHECK_CUDA(cudaGraphLaunch(e, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(z, 5.0f, "z = 4x + 1 after new kernel arguments");
    CHECK_CUDA(cudaGraphNodeSetEnabled(e, kernel, 0)); // y is only zeroed now
    CHECK_CUDA(cudaGraphLaunch(e, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(z, 0.0f, "z with the kernel node turned off");
    CHECK_CUDA(cudaGraphNodeSetEnabled(e, kernel, 1));
    CHECK_CUDA(cudaGraphLaunch(e, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(z, 5.0f, "z with the kernel node on again");
    // the copy to x instead of z, and the memset of y to 1.0f: x = 4x + 1 at each launch
    CHECK_CUDA(cudaGraphExecMemcpyNodeSetParams1D(e, copy, x, y, BYTES,
                                                  cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaGraphNodeSetEnabled(e, kernel, 0));
    const float one = 1.0f;
    memcpy(&mp.value, &one, 4);
    CHECK_CUDA(cudaGraphExecMemsetNodeSetParams(e, set, &mp));
    fill(z, 9.0f);
    CHECK_CUDA(cudaGraphLaunch(e, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(x, 1.0f, "x copied from y set to 1");
    expect_all(z, 9.0f, "z, no longer the copy's");
    CHECK_CUDA(cudaGraphNodeSetEnabled(e, kernel, 1));
    for (int i = 0; i < 2; i++)
        CHECK_CUDA(cudaGraphLaunch(e, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(x, 21.0f, "x = 4(4 * 1 + 1) + 1 after two launches");
    CHECK_CUDA(cudaGraphExecDestroy(e));
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK_CUDA(cudaFree(z));
}

// Adds y = a*x + b to g after `after` (if not NULL), then y += x after it.
static void scale_add(cudaGraph_t g, cudaGraphNode_t after, float *x, float *y, float a, float b,
                      cudaGraphNode_t *made = nullptr)
{
    int n = N;
    void *scale_args[] = {&x, &y, &a, &b, &n}; // the node copies the values at addition
    cudaKernelNodeParams kp = {};
    kp.func = (void *)axpb;
    kp.gridDim = dim3((N + 255) / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = scale_args;
    cudaGraphNode_t scale, sum;
    CHECK_CUDA(cudaGraphAddKernelNode(&scale, g, &after, after ? 1 : 0, &kp));
    void *add_args[] = {&x, &y, &n};
    kp.func = (void *)add;
    kp.kernelParams = add_args;
    CHECK_CUDA(cudaGraphAddKernelNode(&sum, g, &scale, 1, &kp));
    if (made) {
        made[0] = scale;
        made[1] = sum;
    }
}

// A child graph node holds a copy of its graph, which cudaGraphChildGraphNodeGetGraph gives
// (not a copy: nodes added there are the node's); an executable graph's copies of that
// graph's nodes take new arguments and are turned off and on, as the driver allows (seen
// on an H100); an executable graph's child graph node takes another graph of the same
// shape (cudaGraphExecChildGraphNodeSetParams).
static void child_graph_nodes(float *x, float *y, cudaStream_t s)
{
    cudaGraph_t child, parent, held, again;
    CHECK_CUDA(cudaGraphCreate(&child, 0));
    CHECK_CUDA(cudaGraphCreate(&parent, 0));
    cudaMemsetParams mp = zeroing(y, N);
    cudaGraphNode_t set, node;
    CHECK_CUDA(cudaGraphAddMemsetNode(&set, child, nullptr, 0, &mp));
    CHECK_CUDA(cudaGraphAddChildGraphNode(&node, parent, nullptr, 0, child));
    CHECK_CUDA(cudaGraphAddMemsetNode(&set, child, nullptr, 0, &mp)); // not in the node's copy
    CHECK_CUDA(cudaGraphChildGraphNodeGetGraph(node, &held));
    size_t count = 0;
    CHECK_CUDA(cudaGraphGetNodes(held, nullptr, &count));
    CHECK(held != child && count == 1, "the node's graph %p (the child %p) has %zu nodes",
          (void *)held, (void *)child, count);
    CHECK_CUDA(cudaGraphChildGraphNodeGetGraph(node, &again));
    CHECK(again == held, "asked twice, the node's graph is %p and %p", (void *)held,
          (void *)again);
    // nodes added to the held graph run with the parent: y = 0, then y = 2x + 1, y += x
    cudaGraphNode_t first;
    count = 1;
    CHECK_CUDA(cudaGraphGetNodes(held, &first, &count));
    cudaGraphNode_t kernels[2];
    scale_add(held, first, x, y, 2.0f, 1.0f, kernels);
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, parent, 0));
    fill(x, 1.0f);
    fill(y, -9.0f);
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(y, 4.0f, "y after the child graph node's graph was added to");
    // the executable graph's copy of the held graph's kernel: y = 3x + 1, y += x
    float a = 3.0f, b = 1.0f;
    int n = N;
    void *args[] = {&x, &y, &a, &b, &n};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)axpb;
    kp.gridDim = dim3((N + 255) / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    CHECK_CUDA(cudaGraphExecKernelNodeSetParams(exec, kernels[0], &kp));
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(y, 5.0f, "y after the held graph's kernel took new arguments in the exec");
    CHECK_CUDA(cudaGraphNodeSetEnabled(exec, kernels[1], 0)); // y = 3x + 1 alone
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(y, 4.0f, "y with the held graph's last kernel turned off in the exec");
    CHECK_CUDA(cudaGraphNodeSetEnabled(exec, kernels[1], 1));
    // the child graph's own node is not the executable graph's (the node holds a copy)
    CHECK(cudaGraphExecMemsetNodeSetParams(exec, set, &mp) != cudaSuccess,
          "the child graph's own node was taken as the executable graph's");
    cudaGetLastError();
    // the executable graph's node takes a graph of the same shape: y = 5x, y += x
    cudaGraph_t other, smaller;
    CHECK_CUDA(cudaGraphCreate(&other, 0));
    cudaGraphNode_t other_set;
    CHECK_CUDA(cudaGraphAddMemsetNode(&other_set, other, nullptr, 0, &mp));
    scale_add(other, other_set, x, y, 5.0f, 0.0f);
    CHECK_CUDA(cudaGraphExecChildGraphNodeSetParams(exec, node, other));
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(y, 6.0f, "y after the executable graph's child graph node took another graph");
    // one of another shape is refused, and the node keeps what it had
    CHECK_CUDA(cudaGraphCreate(&smaller, 0));
    CHECK_CUDA(cudaGraphAddMemsetNode(&set, smaller, nullptr, 0, &mp));
    CHECK(cudaGraphExecChildGraphNodeSetParams(exec, node, smaller) != cudaSuccess,
          "a graph of another shape was taken");
    cudaGetLastError();
    fill(y, -9.0f);
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(y, 6.0f, "y after a graph of another shape was refused");
    // the parent graph is not changed by the executable graph's edit
    cudaGraphExec_t fresh;
    CHECK_CUDA(cudaGraphInstantiate(&fresh, parent, 0));
    CHECK_CUDA(cudaGraphLaunch(fresh, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(y, 4.0f, "y after a new executable graph of the parent");
    CHECK_CUDA(cudaGraphExecDestroy(fresh));
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(other));
    CHECK_CUDA(cudaGraphDestroy(smaller));
    CHECK_CUDA(cudaGraphDestroy(parent));
    CHECK_CUDA(cudaGraphDestroy(child));
    printf("child graph nodes: the node's graph given out and edited, another graph taken\n");
}

// Edges to nodes added earlier (cudaGraphAddDependencies after the nodes): a node runs after
// what it depends on, whatever the order of addition; a cycle is refused when the graph is
// instantiated (cudaErrorInvalidValue, result cudaGraphInstantiateInvalidStructure).
static void edges_to_earlier_nodes(float *x, float *y, cudaStream_t s)
{
    cudaGraph_t g;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    // added first: y = 3x + 1, then y += x; added last: y = 0, which both must follow
    cudaGraphNode_t kernels[2], zero;
    scale_add(g, nullptr, x, y, 3.0f, 1.0f, kernels);
    cudaMemsetParams mp = zeroing(y, N);
    CHECK_CUDA(cudaGraphAddMemsetNode(&zero, g, nullptr, 0, &mp));
    CHECK_CUDA(cudaGraphAddDependencies(g, &zero, &kernels[0], nullptr, 1));
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    fill(x, 2.0f);
    fill(y, -9.0f);
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(y, 9.0f, "y after a memset added last that the kernels depend on");
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    // the last kernel before the memset too: a cycle
    CHECK_CUDA(cudaGraphAddDependencies(g, &kernels[1], &zero, nullptr, 1));
    cudaGraphInstantiateParams params = {};
    cudaGraphExec_t cyclic = nullptr;
    cudaError_t r = cudaGraphInstantiateWithParams(&cyclic, g, &params);
    CHECK(r == cudaErrorInvalidValue && params.result_out == cudaGraphInstantiateInvalidStructure,
          "a graph with a cycle instantiated: error %d, result %d", (int)r,
          (int)params.result_out);
    cudaGetLastError();
    CHECK_CUDA(cudaGraphRemoveDependencies(g, &kernels[1], &zero, nullptr, 1));
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_all(y, 9.0f, "y once the cycle's edge was removed");
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(g));
    printf("edges to nodes added earlier: run after them; a cycle refused\n");
}

// Edge data (cudaGraphEdgeData): a programmatic edge between two kernel nodes is kept with
// its data and read back by every query (without room for the data, a query that would
// lose it fails with cudaErrorLossyQuery); an edge is removed only with its data; data
// the driver's rules refuse (a port on a memset node, an input port, a programmatic edge
// from the default port) is refused; the graph runs (the edge's two kernels touch
// different memory, so its result holds however closely they follow). Through the stub
// also: its DOT picture draws the edge dotted, named by its data.
static void edges_with_data(float *x, float *y, float *z, cudaStream_t s, bool stub)
{
    cudaGraph_t g;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    cudaGraphNode_t kernels[2], third, zero;
    scale_add(g, nullptr, x, y, 2.0f, 1.0f, kernels); // y = 3x + 1
    int n = N;
    float a = 3.0f, b = 0.0f;
    void *args[] = {&x, &z, &a, &b, &n};
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeKernel;
    p.kernel.func = (void *)axpb;
    p.kernel.gridDim = dim3((N + 255) / 256);
    p.kernel.blockDim = dim3(256);
    p.kernel.kernelParams = args;
    cudaGraphEdgeData pdl = {};
    pdl.from_port = cudaGraphKernelNodePortProgrammatic;
    pdl.type = cudaGraphDependencyTypeProgrammatic;
    CHECK_CUDA(cudaGraphAddNode(&third, g, &kernels[1], &pdl, 1, &p)); // z = 3x
    cudaGraphNode_t from[4], to[4];
    cudaGraphEdgeData data[4];
    size_t count = 4;
    CHECK_CUDA(cudaGraphGetEdges(g, from, to, data, &count));
    CHECK(count == 2, "%zu edges, not 2", count);
    for (size_t i = 0; i < count; i++) {
        bool programmatic = from[i] == kernels[1] && to[i] == third;
        CHECK(programmatic || (from[i] == kernels[0] && to[i] == kernels[1]), "edge %zu unknown",
              i);
        CHECK(data[i].from_port == (programmatic ? cudaGraphKernelNodePortProgrammatic : 0) &&
                  data[i].to_port == 0 &&
                  data[i].type == (programmatic ? cudaGraphDependencyTypeProgrammatic : 0),
              "edge %zu reads back with port %d, type %d", i, (int)data[i].from_port,
              (int)data[i].type);
    }
    count = 4;
    EXPECT_CUDA_ERROR(cudaGraphGetEdges(g, from, to, nullptr, &count), cudaErrorLossyQuery);
    cudaGetLastError();
    count = 4;
    CHECK_CUDA(cudaGraphNodeGetDependencies(third, from, data, &count));
    CHECK(count == 1 && from[0] == kernels[1] && data[0].type == cudaGraphDependencyTypeProgrammatic,
          "the node's dependencies: %zu, type %d", count, (int)data[0].type);
    count = 4;
    CHECK_CUDA(cudaGraphNodeGetDependentNodes(kernels[1], to, data, &count));
    CHECK(count == 1 && to[0] == third && data[0].from_port == cudaGraphKernelNodePortProgrammatic,
          "the node's dependents: %zu, port %d", count, (int)data[0].from_port);
    count = 4;
    CHECK_CUDA(cudaGraphNodeGetDependentNodes(kernels[0], to, nullptr, &count)); // default
    CHECK(count == 1 && to[0] == kernels[1], "the first kernel's dependents: %zu", count);
    // removed only with its data
    EXPECT_CUDA_ERROR(cudaGraphRemoveDependencies(g, &kernels[1], &third, nullptr, 1),
                      cudaErrorInvalidValue);
    cudaGetLastError();
    // refused as the driver documents, and nothing of a refused node stays
    size_t nodes = 0, nodes_after = 0;
    CHECK_CUDA(cudaGraphGetNodes(g, nullptr, &nodes));
    cudaGraphNodeParams set = {};
    set.type = cudaGraphNodeTypeMemset;
    set.memset.dst = z;
    set.memset.elementSize = 4;
    set.memset.width = N;
    set.memset.height = 1;
    cudaGraphNode_t refused;
    EXPECT_CUDA_ERROR(cudaGraphAddNode(&refused, g, &kernels[1], &pdl, 1, &set),
                      cudaErrorInvalidValue); // a programmatic edge to a memset
    cudaGetLastError();
    CHECK_CUDA(cudaGraphGetNodes(g, nullptr, &nodes_after));
    CHECK(nodes_after == nodes, "a refused node stayed: %zu nodes, were %zu", nodes_after, nodes);
    cudaMemsetParams mp = zeroing(z, N);
    CHECK_CUDA(cudaGraphAddMemsetNode(&zero, g, nullptr, 0, &mp));
    EXPECT_CUDA_ERROR(cudaGraphAddDependencies(g, &zero, &kernels[0], &pdl, 1),
                      cudaErrorInvalidValue);
    cudaGraphEdgeData bad = {};
    bad.to_port = 1;
    EXPECT_CUDA_ERROR(cudaGraphAddDependencies(g, &kernels[0], &third, &bad, 1),
                      cudaErrorInvalidValue);
    bad = {};
    bad.type = cudaGraphDependencyTypeProgrammatic;
    EXPECT_CUDA_ERROR(cudaGraphAddDependencies(g, &kernels[0], &third, &bad, 1),
                      cudaErrorInvalidValue);
    cudaGetLastError();
    CHECK_CUDA(cudaGraphAddDependencies(g, &zero, &kernels[0], nullptr, 1)); // z = 0 first
    count = 4; // a dependent added before the node
    CHECK_CUDA(cudaGraphNodeGetDependentNodes(zero, to, nullptr, &count));
    CHECK(count == 1 && to[0] == kernels[0], "the memset's dependents: %zu", count);
    count = 0;
    CHECK_CUDA(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &count)); // counting loses none
    CHECK(count == 3, "%zu edges after the refusals, not 3", count);
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    launch_fresh(exec, s, x, 2.0f, y, z);
    expect_all(y, 7.0f, "y in a graph with a programmatic edge");
    expect_all(z, 6.0f, "z after a programmatic edge");
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    if (stub) { // the stub's DOT picture draws the edge with its data
        std::string text = dot_of(g);
        CHECK(text.find("n1 -> n2 [style=dotted, label=\"programmatic, port programmatic\"];") !=
                      std::string::npos &&
                  text.find("n0 -> n1;") != std::string::npos,
              "the DOT file lacks the edges:\n%s", text.c_str());
    }
    CHECK_CUDA(cudaGraphRemoveDependencies(g, &kernels[1], &third, &pdl, 1));
    count = 4;
    CHECK_CUDA(cudaGraphNodeGetDependencies(third, from, nullptr, &count));
    CHECK(count == 0, "the programmatic edge stayed: %zu dependencies", count);
    CHECK_CUDA(cudaGraphDestroy(g));
    printf("edge data: kept, read back, removed with its data, refused where the driver does\n");
}

// Edge data given to a capture: cudaStreamBeginCaptureToGraph after a kernel node with a
// programmatic edge, read back by cudaStreamGetCaptureInfo (cudaErrorLossyQuery without
// room for it) and taken by the first kernel captured; cudaStreamUpdateCaptureDependencies
// with data likewise. The captured kernels write memory the earlier ones do not (or the
// same values again), so the results hold however closely they follow. Through the stub
// also: a memset after a programmatic dependency invalidates the capture.
static void capture_edge_data(float *x, float *y, float *z, cudaStream_t s, bool stub)
{
    dim3 grid((N + 255) / 256), block(256);
    cudaGraph_t g, same;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    cudaGraphNode_t kernels[2];
    scale_add(g, nullptr, x, y, 2.0f, 1.0f, kernels); // y = 3x + 1
    cudaGraphEdgeData pdl = {};
    pdl.from_port = cudaGraphKernelNodePortProgrammatic;
    pdl.type = cudaGraphDependencyTypeProgrammatic;
    CHECK_CUDA(cudaStreamBeginCaptureToGraph(s, g, &kernels[1], &pdl, 1,
                                             cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus st;
    const cudaGraphNode_t *deps = nullptr;
    const cudaGraphEdgeData *data = nullptr;
    size_t n = 0;
    CHECK_CUDA(cudaStreamGetCaptureInfo(s, &st, nullptr, nullptr, &deps, &data, &n));
    CHECK(n == 1 && deps[0] == kernels[1] && data &&
              data[0].type == cudaGraphDependencyTypeProgrammatic &&
              data[0].from_port == cudaGraphKernelNodePortProgrammatic,
          "the capture's dependency: %zu, type %d", n, data ? (int)data[0].type : -1);
    EXPECT_CUDA_ERROR(cudaStreamGetCaptureInfo(s, &st, nullptr, nullptr, &deps, nullptr, &n),
                      cudaErrorLossyQuery);
    cudaGetLastError();
    axpb<<<grid, block, 0, s>>>(x, z, 3.0f, 0.0f, N); // z = 3x
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamGetCaptureInfo(s, &st, nullptr, nullptr, &deps, &data, &n));
    CHECK(n == 1 && data && data[0].type == 0 && data[0].from_port == 0,
          "after a captured kernel the dependency is a default one (type %d)",
          data ? (int)data[0].type : -1);
    cudaGraphNode_t third = deps[0];
    CHECK_CUDA(cudaStreamUpdateCaptureDependencies(s, &third, &pdl, 1,
                                                   cudaStreamSetCaptureDependencies));
    axpb<<<grid, block, 0, s>>>(x, z, 3.0f, 0.0f, N); // the same values again
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamEndCapture(s, &same));
    CHECK(same == g, "the capture ended in another graph");
    cudaGraphNode_t from[4], to[4];
    cudaGraphEdgeData edges[4];
    size_t count = 4;
    CHECK_CUDA(cudaGraphGetEdges(g, from, to, edges, &count));
    int programmatic = 0;
    for (size_t i = 0; i < count; i++)
        programmatic += edges[i].type == cudaGraphDependencyTypeProgrammatic &&
                        (from[i] == kernels[1] || from[i] == third);
    CHECK(count == 3 && programmatic == 2, "%zu edges, %d programmatic ones", count, programmatic);
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    launch_fresh(exec, s, x, 2.0f, y, z);
    expect_all(y, 7.0f, "y before the captured kernels");
    expect_all(z, 6.0f, "z by kernels captured after programmatic dependencies");
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    if (stub) { // a programmatic dependency of a memset: the capture is invalid
        cudaGraph_t other;
        CHECK_CUDA(cudaStreamBeginCaptureToGraph(s, g, &third, &pdl, 1,
                                                 cudaStreamCaptureModeGlobal));
        CHECK_CUDA(cudaMemsetAsync(z, 0, BYTES, s)); // kept; the capture is invalid now
        EXPECT_CUDA_ERROR(cudaStreamEndCapture(s, &other), cudaErrorStreamCaptureInvalidated);
        cudaGetLastError();
    } else {
        CHECK_CUDA(cudaGraphDestroy(g));
    }
    printf("edge data given to a capture: read back, taken by the next kernel captured\n");
}

// A kernel launched with programmatic stream serialization allowed (PDL), captured after
// another, runs in the graph (through the stub as the driver's graph: the attribute,
// which the driver takes for launches only, is left out of the kernel node, which then
// waits for the kernel before it whole). The two kernels touch different memory, so the
// result holds however closely they follow.
static void pdl_capture(float *x, float *y, float *z, cudaStream_t s)
{
    dim3 grid((N + 255) / 256), block(256);
    cudaLaunchAttribute pdl;
    pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.stream = s;
    config.attrs = &pdl;
    config.numAttrs = 1;
    cudaGraph_t g;
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    axpb<<<grid, block, 0, s>>>(x, y, 2.0f, 1.0f, N);
    CHECK_CUDA(cudaLaunchKernelEx(&config, axpb, (const float *)x, z, 3.0f, 0.0f, N));
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    for (int i = 0; i < 2; i++) {
        launch_fresh(exec, s, x, 2.0f + i, y, z);
        expect_all(y, 2.0f * (2.0f + i) + 1.0f, "y before a PDL launch in a graph");
        expect_all(z, 3.0f * (2.0f + i), "z by a PDL launch in a graph");
    }
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(g));
    printf("a PDL launch captured: its graph runs\n");
}

// A graph with memory nodes follows the rules CUDA 13 documents for it: it is not cloned
// and not copied into a child graph node (cudaErrorNotSupported), none of its nodes or
// edges is destroyed (cudaErrorInvalidValue), one executable graph of it lives at a time.
// Moved into a child graph node (cudaGraphChildGraphOwnershipMove) it runs there, and its
// handle is the node's: the node gives it back, and it is neither destroyed nor
// instantiated nor given memory nodes on its own; the parent then holds memory nodes too.
static void memory_node_rules(float *x, float *y, cudaStream_t s)
{
    cudaGraph_t g, parent, copy = nullptr;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    CHECK_CUDA(cudaGraphCreate(&parent, 0));
    cudaMemAllocNodeParams ap = {};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = BYTES;
    cudaGraphNode_t alloc, kernels[2], out, release, node, more;
    CHECK_CUDA(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &ap));
    float *tmp = (float *)ap.dptr;
    scale_add(g, alloc, x, tmp, 2.0f, 1.0f, kernels); // tmp = 3x + 1
    CHECK_CUDA(
        cudaGraphAddMemcpyNode1D(&out, g, &kernels[1], 1, y, tmp, BYTES, cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaGraphAddMemFreeNode(&release, g, &out, 1, tmp));
    EXPECT_CUDA_ERROR(cudaGraphClone(&copy, g), cudaErrorNotSupported);
    EXPECT_CUDA_ERROR(cudaGraphDestroyNode(kernels[1]), cudaErrorInvalidValue);
    EXPECT_CUDA_ERROR(cudaGraphDestroyNode(alloc), cudaErrorInvalidValue);
    EXPECT_CUDA_ERROR(cudaGraphRemoveDependencies(g, &kernels[1], &out, nullptr, 1),
                      cudaErrorInvalidValue);
    EXPECT_CUDA_ERROR(cudaGraphAddChildGraphNode(&node, parent, nullptr, 0, g),
                      cudaErrorNotSupported);
    cudaGetLastError();
    size_t count = 0;
    CHECK_CUDA(cudaGraphGetNodes(g, nullptr, &count));
    CHECK(count == 5, "the graph has %zu nodes after the refusals, not 5", count);
    cudaGraphExec_t exec, second = nullptr;
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    EXPECT_CUDA_ERROR(cudaGraphInstantiate(&second, g, 0), cudaErrorNotSupported);
    cudaGetLastError();
    launch_fresh(exec, s, x, 2.0f, y);
    expect_all(y, 7.0f, "y through a graph's memory");
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0)); // its one executable graph is gone
    CHECK_CUDA(cudaGraphExecDestroy(exec));

    // moved into a child graph node: y = 0 first, then the graph
    cudaMemsetParams mp = zeroing(y, N);
    cudaGraphNode_t zero;
    CHECK_CUDA(cudaGraphAddMemsetNode(&zero, parent, nullptr, 0, &mp));
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeGraph;
    p.graph.graph = g;
    p.graph.ownership = cudaGraphChildGraphOwnershipMove;
    CHECK_CUDA(cudaGraphAddNode(&node, parent, &zero, nullptr, 1, &p));
    cudaGraph_t held = nullptr;
    CHECK_CUDA(cudaGraphChildGraphNodeGetGraph(node, &held));
    CHECK(held == g, "the node holds %p, not the graph moved into it %p", (void *)held,
          (void *)g);
    EXPECT_CUDA_ERROR(cudaGraphDestroy(g), cudaErrorInvalidValue);
    EXPECT_CUDA_ERROR(cudaGraphInstantiate(&second, g, 0), cudaErrorInvalidValue);
    cudaGetLastError();
    EXPECT_CUDA_ERROR(cudaGraphAddMemAllocNode(&more, g, nullptr, 0, &ap), cudaErrorNotSupported);
    cudaGetLastError();
    cudaGraph_t other;
    CHECK_CUDA(cudaGraphCreate(&other, 0));
    EXPECT_CUDA_ERROR(cudaGraphAddNode(&more, other, nullptr, nullptr, 0, &p),
                      cudaErrorInvalidValue); // moved once, it is the node's
    cudaGetLastError();
    CHECK_CUDA(cudaGraphDestroy(other));
    EXPECT_CUDA_ERROR(cudaGraphClone(&copy, parent), cudaErrorNotSupported);
    EXPECT_CUDA_ERROR(cudaGraphDestroyNode(zero), cudaErrorInvalidValue);
    cudaGetLastError();
    CHECK_CUDA(cudaGraphInstantiate(&exec, parent, 0));
    EXPECT_CUDA_ERROR(cudaGraphInstantiate(&second, parent, 0), cudaErrorNotSupported);
    cudaGetLastError();
    for (int i = 0; i < 2; i++) {
        launch_fresh(exec, s, x, 4.0f + i, y);
        expect_all(y, 3.0f * (4.0f + i) + 1.0f, "y through a graph moved into a child node");
    }
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(parent)); // and the graph moved into it
    printf("memory nodes: the driver's rules; a graph of them moved into a child node\n");
}

// A graph without memory nodes moved into a child graph node: nodes added to it later run
// with the node (as with a copy's handle); a clone of the parent holds a copy of it; the
// moved graph's handle goes with its node, or with the parent (through the stub only: on a
// GPU the handle would then name freed memory).
static void moved_graph_goes_with_its_node(cudaStream_t s)
{
    unsigned *word;
    CHECK_CUDA(cudaMalloc(&word, sizeof *word));
    cudaGraph_t g, parent, copy, held;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    CHECK_CUDA(cudaGraphCreate(&parent, 0));
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeGraph;
    p.graph.graph = g;
    p.graph.ownership = cudaGraphChildGraphOwnershipMove;
    cudaGraphNode_t node, set, in_copy;
    CHECK_CUDA(cudaGraphAddNode(&node, parent, nullptr, nullptr, 0, &p));
    cudaMemsetParams mp = {};
    mp.dst = word;
    mp.value = 0x5a5a5a5a;
    mp.elementSize = 4;
    mp.width = 1;
    mp.height = 1;
    CHECK_CUDA(cudaGraphAddMemsetNode(&set, g, nullptr, 0, &mp)); // the node's, moved
    cudaGraphNodeParams loop = p; // the parent moved into the graph it holds
    loop.graph.graph = parent;
    EXPECT_CUDA_ERROR(cudaGraphAddNode(&in_copy, g, nullptr, nullptr, 0, &loop),
                      cudaErrorInvalidValue);
    cudaGetLastError();
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, parent, 0));
    CHECK_CUDA(cudaMemset(word, 0, sizeof *word));
    CHECK_CUDA(cudaDeviceSynchronize()); // s does not wait for the legacy stream
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    unsigned got = 0;
    CHECK_CUDA(cudaMemcpy(&got, word, sizeof got, cudaMemcpyDeviceToHost));
    CHECK(got == 0x5a5a5a5au, "a node added to the moved graph did not run: %#x", got);
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    cudaGraph_t other;
    CHECK_CUDA(cudaGraphCreate(&other, 0));
    EXPECT_CUDA_ERROR(cudaGraphAddChildGraphNode(&in_copy, other, nullptr, 0, g),
                      cudaErrorInvalidValue); // not even copied: it is the node's
    cudaGetLastError();
    CHECK_CUDA(cudaGraphDestroy(other));
    CHECK_CUDA(cudaGraphClone(&copy, parent));
    CHECK_CUDA(cudaGraphNodeFindInClone(&in_copy, node, copy));
    CHECK_CUDA(cudaGraphChildGraphNodeGetGraph(in_copy, &held));
    CHECK(held != g, "the clone's child graph node holds the moved graph itself");
    size_t count = 0;
    CHECK_CUDA(cudaGraphGetNodes(held, nullptr, &count));
    CHECK(count == 1, "the clone's child graph has %zu nodes", count);
    CHECK_CUDA(cudaGraphDestroyNode(node)); // no memory nodes: it goes, and g with it
    EXPECT_CUDA_ERROR(cudaGraphGetNodes(g, nullptr, &count), cudaErrorInvalidValue);
    cudaGetLastError();
    // moved again into the clone's parent; it goes with that graph
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    p.graph.graph = g;
    CHECK_CUDA(cudaGraphAddNode(&node, copy, nullptr, nullptr, 0, &p));
    CHECK_CUDA(cudaGraphDestroy(copy));
    EXPECT_CUDA_ERROR(cudaGraphGetNodes(g, nullptr, &count), cudaErrorInvalidValue);
    cudaGetLastError();
    CHECK_CUDA(cudaGraphDestroy(parent));
    CHECK_CUDA(cudaFree(word));
    printf("a moved graph: its handle goes with its node\n");
}

// The DOT picture of a graph with an IF/ELSE node (the stub's own picture, not the driver's):
// the node named with its kind and handle, each body a cluster with its nodes and edges, a
// dashed edge from the node to where each body starts.
static void conditional_picture(float *y)
{
    cudaGraph_t g, bodies[2];
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h;
    CHECK_CUDA(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    cudaMemsetParams mp = zeroing(y, N);
    cudaGraphNode_t set, cond, a, b;
    CHECK_CUDA(cudaGraphAddMemsetNode(&set, g, nullptr, 0, &mp));
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h;
    p.conditional.type = cudaGraphCondTypeIf;
    p.conditional.size = 2;
    CHECK_CUDA(cudaGraphAddNode(&cond, g, &set, nullptr, 1, &p));
    bodies[0] = p.conditional.phGraph_out[0];
    bodies[1] = p.conditional.phGraph_out[1];
    CHECK_CUDA(cudaGraphAddMemsetNode(&a, bodies[0], nullptr, 0, &mp));
    CHECK_CUDA(cudaGraphAddMemsetNode(&a, bodies[1], nullptr, 0, &mp));
    CHECK_CUDA(cudaGraphAddMemsetNode(&b, bodies[1], &a, 1, &mp));
    std::string text = dot_of(g);
    const char *wanted[] = {"n0 -> n1;",           "1: IF (handle 1)",
                            "label=\"then of 1\"",  "label=\"else of 1\"",
                            "n1b0_n0 [label",      "n1b1_n0 -> n1b1_n1;",
                            "n1 -> n1b0_n0 [style=dashed]", "n1 -> n1b1_n0 [style=dashed]"};
    for (const char *w : wanted)
        CHECK(text.find(w) != std::string::npos, "the DOT file lacks '%s':\n%s", w,
              text.c_str());
    CHECK(text.find("n1 -> n1b1_n1 [style=dashed]") == std::string::npos,
          "a body's second node drawn as where it starts:\n%s", text.c_str());
    CHECK_CUDA(cudaGraphDestroy(g));
    printf("a conditional node's picture: its kind, handle and bodies\n");
}

int main(int argc, char **argv)
{
    float *x, *y, *z;
    CHECK_CUDA(cudaMalloc(&x, BYTES));
    CHECK_CUDA(cudaMalloc(&y, BYTES));
    CHECK_CUDA(cudaMalloc(&z, BYTES));
    cudaStream_t s1, s2, s3;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
    if (argc > 1 && strcmp(argv[1], "--pdl") == 0) { // alone, for the server's log
        pdl_capture(x, y, z, s1);
        edges_with_data(x, y, z, s1, false);
        capture_edge_data(x, y, z, s1, false);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--same-as-native") == 0) {
        // the parts where the stub does what NVIDIA's driver does, to be run on it directly
        // (the rest departs where the README says: host memory in captures, edge order)
        event_nodes_and_older_entry_points(y, s1);
        user_objects(y, s1);
        capture_into_graph(s1);
        kernel_node_attributes(s1);
        edits_after_launches(x, y, s1);
        child_graph_nodes(x, y, s1);
        edges_to_earlier_nodes(x, y, s1);
        memory_node_rules(x, y, s1);
        edges_with_data(x, y, z, s1, false);
        pdl_capture(x, y, z, s1);
        capture_edge_data(x, y, z, s1, false);
        printf("graphs: the parts the driver shares passed\n");
        return 0;
    }
    fill(x, 1.0f);
    fill(y, -5.0f);
    fill(z, -7.0f);
    dim3 grid((N + 255) / 256), block(256);

    // one stream: y = 0; y = 2x + 3; z = y; z += x
    CHECK(status_of(s1) == cudaStreamCaptureStatusNone, "s1 captures before it began");
    CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CHECK(status_of(s1) == cudaStreamCaptureStatusActive, "s1 does not capture");
    unsigned long long id = 0;
    cudaStreamCaptureStatus st;
    CHECK_CUDA(cudaStreamGetCaptureInfo(s1, &st, &id));
    CHECK(st == cudaStreamCaptureStatusActive && id != 0, "capture info: %d, id %llu", (int)st, id);
    CHECK_CUDA(cudaStreamUpdateCaptureDependencies(s1, nullptr, 0, cudaStreamAddCaptureDependencies));
    EXPECT_CUDA_ERROR(
        cudaStreamUpdateCaptureDependencies(s2, nullptr, 0, cudaStreamAddCaptureDependencies),
        cudaErrorIllegalState);
    cudaGetLastError(); // that refusal was the last error
    CHECK_CUDA(cudaMemsetAsync(y, 0, BYTES, s1));
    float a = 2.0f;
    axpb<<<grid, block, 0, s1>>>(x, y, a, 3.0f, N);
    CHECK_CUDA(cudaGetLastError());
    a = 100.0f; // the launch took its arguments' values at capture
    CHECK_CUDA(cudaMemcpyAsync(z, y, BYTES, cudaMemcpyDeviceToDevice, s1));
    add<<<grid, block, 0, s1>>>(x, z, N);
    cudaGraph_t graph;
    CHECK_CUDA(cudaStreamEndCapture(s1, &graph));
    CHECK(status_of(s1) == cudaStreamCaptureStatusNone, "s1 still captures");
    CHECK_CUDA(cudaDeviceSynchronize());
    expect_all(y, -5.0f, "y after the capture (nothing ran)");
    expect_all(z, -7.0f, "z after the capture (nothing ran)");

    size_t nodes = 0;
    CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
    CHECK(nodes == 4, "the graph has %zu nodes, expected 4", nodes);
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    CHECK_CUDA(cudaGraphLaunch(exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(y, 5.0f, "y after the first launch");
    expect_all(z, 6.0f, "z after the first launch");
    // memory is read at each launch; on another stream too
    fill(x, 10.0f);
    CHECK_CUDA(cudaGraphLaunch(exec, s2));
    CHECK_CUDA(cudaStreamSynchronize(s2));
    expect_all(y, 23.0f, "y after a launch on s2");
    expect_all(z, 33.0f, "z after a launch on s2");
    // launched again and again, the work runs once per launch
    fill(z, 0.0f);
    for (int i = 0; i < 5; i++)
        CHECK_CUDA(cudaGraphLaunch(exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(z, 33.0f, "z after five launches");
    CHECK_CUDA(cudaGraphUpload(exec, s1));

    // captured again with other arguments, as inference servers re-capture: the executable
    // graph takes them (y = 3x + 1, z = y + x)
    CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CHECK_CUDA(cudaMemsetAsync(y, 0, BYTES, s1));
    axpb<<<grid, block, 0, s1>>>(x, y, 3.0f, 1.0f, N);
    CHECK_CUDA(cudaMemcpyAsync(z, y, BYTES, cudaMemcpyDeviceToDevice, s1));
    add<<<grid, block, 0, s1>>>(x, z, N);
    cudaGraph_t again, other;
    CHECK_CUDA(cudaStreamEndCapture(s1, &again));
    cudaGraphExecUpdateResultInfo info;
    CHECK_CUDA(cudaGraphExecUpdate(exec, again, &info));
    CHECK(info.result == cudaGraphExecUpdateSuccess, "update result %d", (int)info.result);
    CHECK_CUDA(cudaGraphLaunch(exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(y, 31.0f, "y after the update");
    expect_all(z, 41.0f, "z after the update");
    // a graph of another shape is refused; the executable graph keeps what it had
    CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CHECK_CUDA(cudaMemsetAsync(y, 0, BYTES, s1));
    CHECK_CUDA(cudaStreamEndCapture(s1, &other));
    EXPECT_CUDA_ERROR(cudaGraphExecUpdate(exec, other, &info), cudaErrorGraphExecUpdateFailure);
    CHECK(info.result == cudaGraphExecUpdateErrorTopologyChanged, "update result %d",
          (int)info.result);
    cudaGetLastError(); // that refusal was the last error
    fill(z, 0.0f);
    CHECK_CUDA(cudaGraphLaunch(exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(z, 41.0f, "z after a refused update");
    CHECK_CUDA(cudaGraphDestroy(again));
    CHECK_CUDA(cudaGraphDestroy(other));

    // two streams forked and joined by events: z = x (on s2) while y = 4x + 1 (on s1), then
    // z += y (on s1, after s2's work)
    cudaEvent_t fork, join;
    CHECK_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    fill(x, 2.0f);
    CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
    CHECK_CUDA(cudaEventRecord(fork, s1));
    CHECK_CUDA(cudaStreamWaitEvent(s2, fork, 0));
    CHECK(status_of(s2) == cudaStreamCaptureStatusActive, "s2 did not join the capture");
    CHECK_CUDA(cudaMemcpyAsync(z, x, BYTES, cudaMemcpyDeviceToDevice, s2));
    axpb<<<grid, block, 0, s1>>>(x, y, 4.0f, 1.0f, N);
    CHECK_CUDA(cudaEventRecord(join, s2));
    CHECK_CUDA(cudaStreamWaitEvent(s1, join, 0));
    add<<<grid, block, 0, s1>>>(y, z, N);
    cudaGraph_t forked;
    EXPECT_CUDA_ERROR(cudaStreamEndCapture(s2, &forked), cudaErrorStreamCaptureUnmatched);
    // an unmatched end invalidates the capture, as on a GPU
    EXPECT_CUDA_ERROR(cudaStreamEndCapture(s1, &forked), cudaErrorStreamCaptureInvalidated);
    CHECK(status_of(s2) == cudaStreamCaptureStatusNone, "s2 still captures");
    // again, ended where it began
    CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
    CHECK_CUDA(cudaEventRecord(fork, s1));
    CHECK_CUDA(cudaStreamWaitEvent(s2, fork, 0));
    CHECK_CUDA(cudaMemcpyAsync(z, x, BYTES, cudaMemcpyDeviceToDevice, s2));
    axpb<<<grid, block, 0, s1>>>(x, y, 4.0f, 1.0f, N);
    CHECK_CUDA(cudaEventRecord(join, s2));
    CHECK_CUDA(cudaStreamWaitEvent(s1, join, 0));
    add<<<grid, block, 0, s1>>>(y, z, N);
    CHECK_CUDA(cudaStreamEndCapture(s1, &forked));
    CHECK(status_of(s2) == cudaStreamCaptureStatusNone, "s2 still captures after the end");
    // as on a GPU: the copy and the kernel side by side, the add after both; the events that
    // forked and joined the streams are not nodes
    size_t forked_nodes = 0, forked_edges = 4, forked_roots = 4;
    cudaGraphNode_t f_from[4], f_to[4], f_roots[4];
    CHECK_CUDA(cudaGraphGetNodes(forked, nullptr, &forked_nodes));
    CHECK_CUDA(cudaGraphGetEdges(forked, f_from, f_to, nullptr, &forked_edges));
    CHECK_CUDA(cudaGraphGetRootNodes(forked, f_roots, &forked_roots));
    CHECK(forked_nodes == 3 && forked_edges == 2 && forked_roots == 2 && f_to[0] == f_to[1] &&
              f_from[0] != f_from[1],
          "the forked graph: %zu nodes, %zu edges, %zu roots", forked_nodes, forked_edges,
          forked_roots);
    cudaGraphNodeType f_type;
    CHECK_CUDA(cudaGraphNodeGetType(f_to[0], &f_type));
    CHECK(f_type == cudaGraphNodeTypeKernel, "the joining node is of type %d", (int)f_type);
    cudaGraphExec_t forked_exec;
    CHECK_CUDA(cudaGraphInstantiate(&forked_exec, forked, 0));
    CHECK_CUDA(cudaGraphLaunch(forked_exec, s3));
    CHECK_CUDA(cudaStreamSynchronize(s3));
    expect_all(y, 9.0f, "y after the forked graph");
    expect_all(z, 11.0f, "z after the forked graph");

    // a graph launched into a capture is refused, and the capture is invalid, as natively
    CHECK_CUDA(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed));
    EXPECT_CUDA_ERROR(cudaGraphLaunch(forked_exec, s2), cudaErrorStreamCaptureUnsupported);
    cudaGraph_t outer = nullptr;
    EXPECT_CUDA_ERROR(cudaStreamEndCapture(s2, &outer), cudaErrorStreamCaptureInvalidated);
    CHECK(outer == nullptr, "a capture a graph was launched into gave a graph");
    cudaGetLastError();

    // what a capture cannot hold
    std::vector<float> host(N, 1.0f);
    CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    EXPECT_CUDA_ERROR(cudaMemcpyAsync(x, host.data(), BYTES, cudaMemcpyHostToDevice, s1),
                      cudaErrorStreamCaptureUnsupported);
    CHECK(status_of(s1) == cudaStreamCaptureStatusInvalidated, "the capture stays valid");
    cudaGraph_t bad = nullptr;
    EXPECT_CUDA_ERROR(cudaStreamEndCapture(s1, &bad), cudaErrorStreamCaptureInvalidated);
    CHECK(bad == nullptr, "an invalidated capture gave a graph");
    CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    EXPECT_CUDA_ERROR(cudaStreamSynchronize(s1), cudaErrorStreamCaptureUnsupported);
    EXPECT_CUDA_ERROR(cudaStreamEndCapture(s1, &bad), cudaErrorStreamCaptureInvalidated);
    EXPECT_CUDA_ERROR(cudaStreamEndCapture(s1, &bad), cudaErrorIllegalState);
    cudaGraph_t none;
    EXPECT_CUDA_ERROR(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeGlobal),
                      cudaErrorStreamCaptureUnsupported);
    EXPECT_CUDA_ERROR(cudaStreamEndCapture(s3, &none), cudaErrorIllegalState);
    cudaGetLastError(); // the refusals above were the last errors

    // a graph whose memory was freed fails at its launch and writes nothing
    float *gone;
    CHECK_CUDA(cudaMalloc(&gone, BYTES));
    CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CHECK_CUDA(cudaMemsetAsync(gone, 0xff, BYTES, s1));
    cudaGraph_t stale;
    CHECK_CUDA(cudaStreamEndCapture(s1, &stale));
    cudaGraphExec_t stale_exec;
    CHECK_CUDA(cudaGraphInstantiate(&stale_exec, stale, 0));
    CHECK_CUDA(cudaFree(gone));
    cudaError_t launched = cudaGraphLaunch(stale_exec, s1);
    cudaError_t synced = cudaStreamSynchronize(s1);
    CHECK(launched != cudaSuccess || synced != cudaSuccess,
          "a graph wrote memory freed after its capture");
    cudaGetLastError();

    // built node by node: y = 0; y = a*x + 1; z = y; z += x (a child graph)
    fill(x, 3.0f);
    cudaGraph_t built, child;
    CHECK_CUDA(cudaGraphCreate(&built, 0));
    CHECK_CUDA(cudaGraphCreate(&child, 0));
    cudaGraphNode_t n_memset, n_kernel, n_copy, n_record, n_empty, n_child, n_add;
    cudaMemsetParams mp = zeroing(y, N);
    CHECK_CUDA(cudaGraphAddMemsetNode(&n_memset, built, nullptr, 0, &mp));
    float ka = 2.0f, kb = 1.0f;
    int kn = N;
    float *kx = x, *ky = y;
    void *kargs[] = {&kx, &ky, &ka, &kb, &kn};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)axpb;
    kp.gridDim = grid;
    kp.blockDim = block;
    kp.kernelParams = kargs;
    CHECK_CUDA(cudaGraphAddKernelNode(&n_kernel, built, &n_memset, 1, &kp));
    CHECK_CUDA(cudaGraphAddMemcpyNode1D(&n_copy, built, &n_kernel, 1, z, y, BYTES,
                                        cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaGraphAddEventRecordNode(&n_record, built, &n_copy, 1, join));
    CHECK_CUDA(cudaGraphAddEmptyNode(&n_empty, built, &n_record, 1));
    float *ax = x, *az = z;
    int an = N;
    void *add_args[] = {&ax, &az, &an};
    cudaKernelNodeParams addp = {};
    addp.func = (void *)add;
    addp.gridDim = grid;
    addp.blockDim = block;
    addp.kernelParams = add_args;
    CHECK_CUDA(cudaGraphAddKernelNode(&n_add, child, nullptr, 0, &addp));
    CHECK_CUDA(cudaGraphAddChildGraphNode(&n_child, built, &n_empty, 1, child));
    CHECK_CUDA(cudaGraphAddDependencies(built, &n_memset, &n_child, nullptr, 1));
    nodes = 0;
    CHECK_CUDA(cudaGraphGetNodes(built, nullptr, &nodes));
    CHECK(nodes == 6, "the built graph has %zu nodes, expected 6", nodes);
    // its nodes as handles, each of its kind, the ones the additions gave among them
    cudaGraphNode_t listed[8];
    size_t room = 8;
    CHECK_CUDA(cudaGraphGetNodes(built, listed, &room));
    CHECK(room == 6, "cudaGraphGetNodes gave %zu nodes, expected 6", room);
    int kinds = 0, added = 0;
    const cudaGraphNode_t mine[] = {n_memset, n_kernel, n_copy, n_record, n_empty, n_child};
    for (size_t i = 0; i < room; i++) {
        cudaGraphNodeType t;
        CHECK_CUDA(cudaGraphNodeGetType(listed[i], &t));
        kinds |= 1 << (int)t;
        for (cudaGraphNode_t n : mine)
            added += listed[i] == n;
    }
    CHECK(kinds == (1 << cudaGraphNodeTypeMemset | 1 << cudaGraphNodeTypeKernel |
                    1 << cudaGraphNodeTypeMemcpy | 1 << cudaGraphNodeTypeEventRecord |
                    1 << cudaGraphNodeTypeEmpty | 1 << cudaGraphNodeTypeGraph),
          "the built graph's node kinds: %#x", kinds);
    CHECK(added == 6, "%d of the nodes listed are the ones added", added);
    // each node's arguments read back, as they were given; the kernel node's from the
    // driver, as cudart gave them (the function and the library kernel behind it)
    void *get_kernel_params = nullptr;
    cudaDriverEntryPointQueryResult found;
    CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuGraphKernelNodeGetParams", &get_kernel_params,
                                                12000, cudaEnableDefault, &found));
    CUDA_KERNEL_NODE_PARAMS kp_out = {};
    CUresult got = ((CUresult(*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *))get_kernel_params)(
        (CUgraphNode)n_kernel, &kp_out);
    cudaFunction_t axpb_function;
    cudaKernel_t axpb_kernel;
    CHECK_CUDA(cudaGetFuncBySymbol(&axpb_function, (void *)axpb));
    CHECK_CUDA(cudaGetKernel(&axpb_kernel, (void *)axpb));
    CHECK(got == CUDA_SUCCESS && (void *)kp_out.func == (void *)axpb_function &&
              (void *)kp_out.kern == (void *)axpb_kernel && kp_out.gridDimX == grid.x &&
              kp_out.blockDimX == 256 && kp_out.sharedMemBytes == 0 && kp_out.kernelParams,
          "the kernel node reads back as %d: %p/%p <<<%u, %u, %u>>>", (int)got,
          (void *)kp_out.func, (void *)kp_out.kern, kp_out.gridDimX, kp_out.blockDimX,
          kp_out.sharedMemBytes);
    // and through cudart, which maps the driver's function back to the program's kernel (it
    // reads the node again: what the first read gave stays valid, as the driver's does)
    cudaKernelNodeParams kp_rt = {};
    CHECK_CUDA(cudaGraphKernelNodeGetParams(n_kernel, &kp_rt));
    CHECK(kp_rt.func == (void *)axpb && kp_rt.gridDim.x == grid.x && kp_rt.blockDim.x == 256 &&
              kp_rt.kernelParams && *(float *)kp_rt.kernelParams[2] == 2.0f,
          "cudaGraphKernelNodeGetParams reads back %p (the kernel %p) <<<%u, %u>>>", kp_rt.func,
          (void *)axpb, kp_rt.gridDim.x, kp_rt.blockDim.x);
    CHECK(kp_rt.kernelParams == kp_out.kernelParams,
          "reading the node again moved its parameters (%p, then %p)", (void *)kp_out.kernelParams,
          (void *)kp_rt.kernelParams);
    CHECK(*(float **)kp_out.kernelParams[0] == x && *(float **)kp_out.kernelParams[1] == y &&
              *(float *)kp_out.kernelParams[2] == 2.0f && *(float *)kp_out.kernelParams[3] == 1.0f &&
              *(int *)kp_out.kernelParams[4] == N,
          "the kernel node's arguments read back wrong");
    got = ((CUresult(*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *))get_kernel_params)(
        (CUgraphNode)n_memset, &kp_out);
    CHECK(got == CUDA_ERROR_INVALID_VALUE, "a memset node read as a kernel node: %d", (int)got);
    cudaMemsetParams mp_out;
    CHECK_CUDA(cudaGraphMemsetNodeGetParams(n_memset, &mp_out));
    CHECK(mp_out.dst == y && mp_out.elementSize == 4 && mp_out.width == (size_t)N &&
              mp_out.height == 1 && mp_out.value == 0,
          "the memset node reads back as %p, %u bytes x %zu", mp_out.dst, mp_out.elementSize,
          mp_out.width);
    cudaMemcpy3DParms cp_out = {};
    CHECK_CUDA(cudaGraphMemcpyNodeGetParams(n_copy, &cp_out));
    CHECK(cp_out.srcPtr.ptr == y && cp_out.dstPtr.ptr == z && cp_out.extent.width == BYTES,
          "the copy node reads back as %p -> %p, %zu bytes", cp_out.srcPtr.ptr, cp_out.dstPtr.ptr,
          cp_out.extent.width);
    cudaEvent_t ev_out = nullptr;
    CHECK_CUDA(cudaGraphEventRecordNodeGetEvent(n_record, &ev_out));
    CHECK(ev_out == join, "the event record node reads back as %p", (void *)ev_out);
    EXPECT_CUDA_ERROR(cudaGraphEventWaitNodeGetEvent(n_record, &ev_out), cudaErrorInvalidValue);
    cudaGetLastError();
    // its edges: the chain the additions named, and the one added after
    cudaGraphNode_t from[8], to[8];
    cudaGraphEdgeData edge_data[8];
    size_t edges = 0;
    CHECK_CUDA(cudaGraphGetEdges(built, nullptr, nullptr, nullptr, &edges));
    CHECK(edges == 6, "the built graph has %zu edges, expected 6", edges);
    edges = 8;
    memset(edge_data, 0xff, sizeof edge_data);
    CHECK_CUDA(cudaGraphGetEdges(built, from, to, edge_data, &edges));
    CHECK(edges == 6 && from[6] == nullptr && to[7] == nullptr, "%zu edges given", edges);
    const cudaGraphNode_t want_from[] = {n_memset, n_kernel, n_copy, n_record, n_empty, n_memset};
    const cudaGraphNode_t want_to[] = {n_kernel, n_copy, n_record, n_empty, n_child, n_child};
    for (int e = 0; e < 6; e++) {
        int found = 0;
        for (size_t i = 0; i < edges; i++)
            found += from[i] == want_from[e] && to[i] == want_to[e];
        CHECK(found == 1, "edge %d is there %d times", e, found);
        CHECK(edge_data[e].type == cudaGraphDependencyTypeDefault && edge_data[e].from_port == 0,
              "edge %d is not a default edge", e);
    }
    cudaGraphNode_t roots[2];
    size_t nroots = 2;
    CHECK_CUDA(cudaGraphGetRootNodes(built, roots, &nroots));
    CHECK(nroots == 1 && roots[0] == n_memset && roots[1] == nullptr, "%zu roots", nroots);
    cudaGraphNode_t deps[4];
    size_t ndeps = 4;
    CHECK_CUDA(cudaGraphNodeGetDependencies(n_child, deps, nullptr, &ndeps));
    CHECK(ndeps == 2 && ((deps[0] == n_empty && deps[1] == n_memset) ||
                         (deps[0] == n_memset && deps[1] == n_empty)),
          "the child graph node has %zu dependencies", ndeps);
    ndeps = 0;
    CHECK_CUDA(cudaGraphNodeGetDependentNodes(n_memset, nullptr, nullptr, &ndeps));
    CHECK(ndeps == 2, "the memset node has %zu dependents, expected 2", ndeps);
    // an edge removed, then put back; one that is not there cannot be removed
    CHECK_CUDA(cudaGraphRemoveDependencies(built, &n_memset, &n_child, nullptr, 1));
    ndeps = 4;
    CHECK_CUDA(cudaGraphNodeGetDependencies(n_child, deps, nullptr, &ndeps));
    CHECK(ndeps == 1 && deps[0] == n_empty, "after removing an edge: %zu dependencies", ndeps);
    EXPECT_CUDA_ERROR(cudaGraphRemoveDependencies(built, &n_memset, &n_child, nullptr, 1),
                      cudaErrorInvalidValue);
    cudaGetLastError();
    CHECK_CUDA(cudaGraphAddDependencies(built, &n_memset, &n_child, nullptr, 1));
    // a clone has the same nodes, found from the original's
    cudaGraph_t built_clone;
    CHECK_CUDA(cudaGraphClone(&built_clone, built));
    cudaGraphNode_t cloned_copy;
    CHECK_CUDA(cudaGraphNodeFindInClone(&cloned_copy, n_copy, built_clone));
    cudaGraphNodeType cloned_type;
    CHECK_CUDA(cudaGraphNodeGetType(cloned_copy, &cloned_type));
    CHECK(cloned_copy != n_copy && cloned_type == cudaGraphNodeTypeMemcpy,
          "the clone's copy node is %p of type %d", (void *)cloned_copy, (int)cloned_type);
    ndeps = 4;
    CHECK_CUDA(cudaGraphNodeGetDependencies(cloned_copy, deps, nullptr, &ndeps));
    CHECK(ndeps == 1 && deps[0] != n_kernel, "the clone's copy node has %zu dependencies",
          ndeps);
    EXPECT_CUDA_ERROR(cudaGraphNodeFindInClone(&cloned_copy, n_copy, built), cudaErrorInvalidValue);
    cudaGetLastError();
    // a node destroyed in the clone: its edges go with it, the others stay
    CHECK_CUDA(cudaGraphNodeFindInClone(&cloned_copy, n_empty, built_clone));
    CHECK_CUDA(cudaGraphDestroyNode(cloned_copy));
    size_t clone_nodes = 0, clone_edges = 0;
    CHECK_CUDA(cudaGraphGetNodes(built_clone, nullptr, &clone_nodes));
    CHECK_CUDA(cudaGraphGetEdges(built_clone, nullptr, nullptr, nullptr, &clone_edges));
    CHECK(clone_nodes == 5 && clone_edges == 4, "after destroying a node: %zu nodes, %zu edges",
          clone_nodes, clone_edges);
    EXPECT_CUDA_ERROR(cudaGraphNodeGetType(cloned_copy, &cloned_type), cudaErrorInvalidValue);
    cudaGetLastError();
    CHECK_CUDA(cudaGraphDestroy(built_clone));
    // its picture: a DOT file with the child graph as a cluster of its own
    std::string text = dot_of(built);
    CHECK(text.rfind("digraph", 0) == 0 && text.find("subgraph") != std::string::npos &&
              text.find("->") != std::string::npos,
          "the DOT file is not a graph with a child graph:\n%s", text.c_str());
    EXPECT_CUDA_ERROR(cudaGraphDebugDotPrint(built, "/nonexistent-folder/g.dot", 0),
                      cudaErrorOperatingSystem);
    cudaGetLastError();
    cudaGraphExec_t built_exec;
    CHECK_CUDA(cudaGraphInstantiate(&built_exec, built, 0));
    CHECK_CUDA(cudaGraphLaunch(built_exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(y, 7.0f, "y from the built graph");
    expect_all(z, 10.0f, "z from the built graph");
    // the executable graph's kernel node with new arguments; the graph itself unchanged
    ka = 5.0f;
    CHECK_CUDA(cudaGraphExecKernelNodeSetParams(built_exec, n_kernel, &kp));
    CHECK_CUDA(cudaGraphLaunch(built_exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(y, 16.0f, "y after the kernel node's new arguments");
    expect_all(z, 19.0f, "z after the kernel node's new arguments");
    // a node added after instantiation is not the executable graph's
    cudaGraphNode_t late;
    mp.dst = z;
    CHECK_CUDA(cudaGraphAddMemsetNode(&late, built, &n_child, 1, &mp));
    CHECK_CUDA(cudaGraphLaunch(built_exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(z, 19.0f, "z after a node added to the graph later");
    // a clone has the graph's nodes as they are now (its kernel node's argument still 2)
    cudaGraph_t copy;
    cudaGraphExec_t copy_exec;
    CHECK_CUDA(cudaGraphClone(&copy, built));
    CHECK_CUDA(cudaGraphInstantiate(&copy_exec, copy, 0));
    CHECK_CUDA(cudaGraphLaunch(copy_exec, s2));
    CHECK_CUDA(cudaStreamSynchronize(s2));
    expect_all(y, 7.0f, "y from the clone");
    expect_all(z, 0.0f, "z from the clone (its last node clears it)");
    // memory the program does not have: refused when the node is added
    float *freed;
    CHECK_CUDA(cudaMalloc(&freed, BYTES));
    CHECK_CUDA(cudaFree(freed));
    mp.dst = freed;
    cudaGraphNode_t bad_node;
    EXPECT_CUDA_ERROR(cudaGraphAddMemsetNode(&bad_node, built, nullptr, 0, &mp),
                      cudaErrorInvalidValue);
    cudaGetLastError();
    CHECK_CUDA(cudaGraphExecDestroy(copy_exec));
    CHECK_CUDA(cudaGraphDestroy(copy));

    // host nodes run in this process, in their order, at every launch
    static const char tags[] = "abc";
    cudaGraph_t hosts;
    CHECK_CUDA(cudaGraphCreate(&hosts, 0));
    cudaGraphNode_t h_prev = nullptr, h_node;
    for (int i = 0; i < 3; i++) {
        cudaHostNodeParams hp = {note, (void *)&tags[i]};
        CHECK_CUDA(cudaGraphAddHostNode(&h_node, hosts, h_prev ? &h_prev : nullptr, h_prev ? 1 : 0,
                                        &hp));
        h_prev = h_node;
    }
    cudaGraphExec_t hosts_exec;
    CHECK_CUDA(cudaGraphInstantiate(&hosts_exec, hosts, 0));
    trail.clear();
    CHECK_CUDA(cudaGraphLaunch(hosts_exec, s1));
    CHECK_CUDA(cudaGraphLaunch(hosts_exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    CHECK(trail == "abcabc", "host nodes ran as \"%s\", expected \"abcabc\"", trail.c_str());
    // a host function captured between kernels runs after the first, before the second
    trail.clear();
    fill(x, 1.0f);
    CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    axpb<<<grid, block, 0, s1>>>(x, y, 2.0f, 0.0f, N);
    CHECK_CUDA(cudaLaunchHostFunc(s1, note, (void *)&tags[0]));
    add<<<grid, block, 0, s1>>>(x, y, N);
    CHECK_CUDA(cudaLaunchHostFunc(s1, note, (void *)&tags[1]));
    cudaGraph_t with_host;
    CHECK_CUDA(cudaStreamEndCapture(s1, &with_host));
    CHECK(trail.empty(), "a captured host function ran at capture: \"%s\"", trail.c_str());
    cudaGraphExec_t with_host_exec;
    CHECK_CUDA(cudaGraphInstantiate(&with_host_exec, with_host, 0));
    for (int i = 0; i < 3; i++)
        CHECK_CUDA(cudaGraphLaunch(with_host_exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    CHECK(trail == "ababab", "captured host functions ran as \"%s\"", trail.c_str());
    expect_all(y, 3.0f, "y from the graph with host functions");
    CHECK_CUDA(cudaGraphExecDestroy(with_host_exec));
    CHECK_CUDA(cudaGraphDestroy(with_host));
    CHECK_CUDA(cudaGraphExecDestroy(hosts_exec));
    CHECK_CUDA(cudaGraphDestroy(hosts));

    // a memset node's and a host node's arguments changed in the executable graph, then in
    // the graph (for executable graphs made later); a node keeps its kind
    cudaGraph_t sets;
    CHECK_CUDA(cudaGraphCreate(&sets, 0));
    const float one = 1.0f, two = 2.0f, three = 3.0f;
    cudaMemsetParams sp = {};
    sp.dst = z;
    sp.elementSize = 4;
    sp.width = N;
    sp.height = 1;
    memcpy(&sp.value, &one, 4);
    cudaGraphNode_t s_memset, s_host;
    CHECK_CUDA(cudaGraphAddMemsetNode(&s_memset, sets, nullptr, 0, &sp));
    cudaHostNodeParams shp = {note, (void *)&tags[0]};
    CHECK_CUDA(cudaGraphAddHostNode(&s_host, sets, &s_memset, 1, &shp));
    cudaGraphExec_t sets_exec, sets_later;
    CHECK_CUDA(cudaGraphInstantiate(&sets_exec, sets, 0));
    memcpy(&sp.value, &two, 4);
    CHECK_CUDA(cudaGraphExecMemsetNodeSetParams(sets_exec, s_memset, &sp));
    shp.userData = (void *)&tags[2];
    CHECK_CUDA(cudaGraphExecHostNodeSetParams(sets_exec, s_host, &shp));
    trail.clear();
    CHECK_CUDA(cudaGraphLaunch(sets_exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(z, 2.0f, "z after the memset node's new value");
    CHECK(trail == "c", "the host node's new function ran as \"%s\"", trail.c_str());
    memcpy(&sp.value, &three, 4);
    CHECK_CUDA(cudaGraphMemsetNodeSetParams(s_memset, &sp));
    CHECK_CUDA(cudaGraphInstantiate(&sets_later, sets, 0));
    CHECK_CUDA(cudaGraphLaunch(sets_exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(z, 2.0f, "z from the executable graph made before the graph changed");
    CHECK_CUDA(cudaGraphLaunch(sets_later, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(z, 3.0f, "z from the executable graph made after");
    CHECK(trail == "cca", "host nodes ran as \"%s\", expected \"cca\"", trail.c_str());
    // the graph's nodes read back: the memset's value set last, the host node's function
    cudaMemsetParams sp_out;
    CHECK_CUDA(cudaGraphMemsetNodeGetParams(s_memset, &sp_out));
    CHECK(sp_out.dst == z && sp_out.elementSize == 4 && sp_out.width == (size_t)N &&
              sp_out.height == 1 && memcmp(&sp_out.value, &three, 4) == 0,
          "the memset node reads back as %p, %u bytes x %zu, value %#x", sp_out.dst,
          sp_out.elementSize, sp_out.width, sp_out.value);
    cudaHostNodeParams shp_out;
    CHECK_CUDA(cudaGraphHostNodeGetParams(s_host, &shp_out));
    CHECK(shp_out.fn == note && shp_out.userData == (void *)&tags[0],
          "the host node reads back as %p(%p)", (void *)shp_out.fn, shp_out.userData);
    // a node turned off in the executable graph, and on again
    unsigned on = 9;
    CHECK_CUDA(cudaGraphNodeGetEnabled(sets_exec, s_memset, &on));
    CHECK(on == 1, "a node is enabled: %u", on);
    CHECK_CUDA(cudaGraphNodeSetEnabled(sets_exec, s_memset, 0));
    CHECK_CUDA(cudaGraphNodeGetEnabled(sets_exec, s_memset, &on));
    CHECK(on == 0, "a node turned off is enabled: %u", on);
    fill(z, 7.0f);
    CHECK_CUDA(cudaGraphLaunch(sets_exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(z, 7.0f, "z with the memset node turned off");
    CHECK_CUDA(cudaGraphNodeSetEnabled(sets_exec, s_memset, 1));
    CHECK_CUDA(cudaGraphLaunch(sets_exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(z, 2.0f, "z with the memset node on again");
    unsigned long long exec_flags = 99;
    CHECK_CUDA(cudaGraphExecGetFlags(sets_exec, &exec_flags));
    CHECK(exec_flags == 0, "instantiation flags %llu", exec_flags);
    EXPECT_CUDA_ERROR(cudaGraphExecKernelNodeSetParams(sets_exec, s_memset, &kp),
                      cudaErrorInvalidValue);
    cudaGetLastError();
    CHECK_CUDA(cudaGraphExecDestroy(sets_later));
    CHECK_CUDA(cudaGraphExecDestroy(sets_exec));
    CHECK_CUDA(cudaGraphDestroy(sets));

    // memory of the graph: allocated by a node, used by the nodes after it, freed by a node
    cudaGraph_t with_mem;
    CHECK_CUDA(cudaGraphCreate(&with_mem, 0));
    cudaMemAllocNodeParams ap = {};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = BYTES;
    cudaGraphNode_t n_alloc, n_fill, n_out, n_free;
    CHECK_CUDA(cudaGraphAddMemAllocNode(&n_alloc, with_mem, nullptr, 0, &ap));
    float *tmp = (float *)ap.dptr;
    CHECK(tmp != nullptr, "an allocation node gave no address");
    cudaPointerAttributes attr;
    CHECK_CUDA(cudaPointerGetAttributes(&attr, tmp));
    CHECK(attr.type == cudaMemoryTypeDevice, "a graph's memory is not device memory (%d)",
          (int)attr.type);
    float *mx = x, *mt = tmp;
    float ma = 2.0f, mb = 1.0f;
    int mn = N;
    void *margs[] = {&mx, &mt, &ma, &mb, &mn};
    cudaKernelNodeParams mkp = kp;
    mkp.kernelParams = margs;
    CHECK_CUDA(cudaGraphAddKernelNode(&n_fill, with_mem, &n_alloc, 1, &mkp));
    CHECK_CUDA(cudaGraphAddMemcpyNode1D(&n_out, with_mem, &n_fill, 1, y, tmp, BYTES,
                                        cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaGraphAddMemFreeNode(&n_free, with_mem, &n_out, 1, tmp));
    cudaGraphNodeType alloc_type, free_type;
    CHECK_CUDA(cudaGraphNodeGetType(n_alloc, &alloc_type));
    CHECK_CUDA(cudaGraphNodeGetType(n_free, &free_type));
    CHECK(alloc_type == cudaGraphNodeTypeMemAlloc && free_type == cudaGraphNodeTypeMemFree,
          "memory nodes' kinds: %d, %d", (int)alloc_type, (int)free_type);
    cudaMemAllocNodeParams ap_out = {};
    CHECK_CUDA(cudaGraphMemAllocNodeGetParams(n_alloc, &ap_out));
    CHECK(ap_out.dptr == tmp && ap_out.bytesize == BYTES &&
              ap_out.poolProps.location.type == cudaMemLocationTypeDevice,
          "the allocation node reads back as %p, %zu bytes", ap_out.dptr, ap_out.bytesize);
    void *freed_at = nullptr;
    CHECK_CUDA(cudaGraphMemFreeNodeGetParams(n_free, &freed_at));
    CHECK(freed_at == tmp, "the free node reads back as %p", freed_at);
    EXPECT_CUDA_ERROR(cudaGraphMemFreeNodeGetParams(n_alloc, &freed_at), cudaErrorInvalidValue);
    EXPECT_CUDA_ERROR(cudaGraphDestroyNode(n_alloc), cudaErrorInvalidValue);
    cudaGetLastError();
    cudaGraphExec_t with_mem_exec;
    CHECK_CUDA(cudaGraphInstantiate(&with_mem_exec, with_mem, 0));
    fill(x, 4.0f);
    fill(y, 0.0f);
    CHECK_CUDA(cudaGraphLaunch(with_mem_exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(y, 9.0f, "y through the graph's memory");
    fill(x, 5.0f);
    CHECK_CUDA(cudaGraphLaunch(with_mem_exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    expect_all(y, 11.0f, "y through the graph's memory, launched again");
    CHECK_CUDA(cudaGraphExecDestroy(with_mem_exec));
    CHECK_CUDA(cudaGraphDestroy(with_mem));
    // the same by capture: a stream-ordered allocation and free on the capturing stream
    float *scratch = nullptr;
    CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CHECK_CUDA(cudaMallocAsync(&scratch, BYTES, s1));
    axpb<<<grid, block, 0, s1>>>(x, scratch, 3.0f, 0.0f, N);
    CHECK_CUDA(cudaMemcpyAsync(z, scratch, BYTES, cudaMemcpyDeviceToDevice, s1));
    CHECK_CUDA(cudaFreeAsync(scratch, s1));
    cudaGraph_t captured_mem;
    CHECK_CUDA(cudaStreamEndCapture(s1, &captured_mem));
    cudaGraphExec_t captured_mem_exec;
    CHECK_CUDA(cudaGraphInstantiate(&captured_mem_exec, captured_mem, 0));
    fill(z, 0.0f);
    for (int i = 0; i < 2; i++) {
        fill(x, 2.0f + i);
        CHECK_CUDA(cudaGraphLaunch(captured_mem_exec, s1));
        CHECK_CUDA(cudaStreamSynchronize(s1));
        expect_all(z, 3.0f * (2.0f + i), "z through memory allocated in a capture");
    }
    CHECK_CUDA(cudaGraphExecDestroy(captured_mem_exec));
    CHECK_CUDA(cudaGraphDestroy(captured_mem));
    CHECK_CUDA(cudaGraphExecDestroy(built_exec));
    CHECK_CUDA(cudaGraphDestroy(built));
    CHECK_CUDA(cudaGraphDestroy(child));

    CHECK_CUDA(cudaGraphExecDestroy(stale_exec));
    CHECK_CUDA(cudaGraphDestroy(stale));
    CHECK_CUDA(cudaGraphExecDestroy(forked_exec));
    CHECK_CUDA(cudaGraphDestroy(forked));
    CHECK_CUDA(cudaGraphDestroy(graph)); // its executable graph keeps working
    CHECK_CUDA(cudaGraphLaunch(exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    event_nodes_and_older_entry_points(y, s1);
    user_objects(y, s1);
    capture_into_graph(s1);
    kernel_node_attributes(s1);
    edits_after_launches(x, y, s1);
    child_graph_nodes(x, y, s1);
    stale_after_first_launch(s1);
    edges_to_earlier_nodes(x, y, s1);
    memory_node_rules(x, y, s1);
    moved_graph_goes_with_its_node(s1);
    edges_with_data(x, y, z, s1, true);
    pdl_capture(x, y, z, s1);
    capture_edge_data(x, y, z, s1, true);
    conditional_picture(y);
    CHECK_CUDA(cudaEventDestroy(fork));
    CHECK_CUDA(cudaEventDestroy(join));
    CHECK_CUDA(cudaStreamDestroy(s1));
    CHECK_CUDA(cudaStreamDestroy(s2));
    CHECK_CUDA(cudaStreamDestroy(s3));
    CHECK_CUDA(cudaFree(x));
    CHECK_CUDA(cudaFree(y));
    CHECK_CUDA(cudaFree(z));
    printf("graphs: all checks passed\n");
    return 0;
}
