// Stream memory operations through the stub: cuStreamWaitValue32/64 hold a stream until
// another stream's cuStreamWriteValue32/64 (or a kernel) writes what they wait for, under
// each condition (GEQ, EQ, AND, NOR); cuStreamBatchMemOp runs writes, a barrier and a wait
// in order; captured, they become nodes of batch memory operations, which a graph also
// takes by hand (cuGraphAddBatchMemOpNode) and which read back and take new operations,
// in the graph and in an executable graph. Every result is checked, and that a wait really
// held its stream. Also runs
// natively on a GPU (tests/gpu/run.sh, with the argument "native"), with the same results;
// without it, what the server refuses beyond the driver too: a wait no value can meet.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cr_test.h"

typedef CUresult (*wait32_t)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
typedef CUresult (*wait64_t)(CUstream, CUdeviceptr, cuuint64_t, unsigned);
typedef CUresult (*batch_t)(CUstream, unsigned, CUstreamBatchMemOpParams *, unsigned);
typedef CUresult (*add_node_t)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                               const CUDA_BATCH_MEM_OP_NODE_PARAMS *);
typedef CUresult (*node_params_t)(CUgraphNode, CUDA_BATCH_MEM_OP_NODE_PARAMS *);
typedef CUresult (*exec_params_t)(CUgraphExec, CUgraphNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS *);

static wait32_t wait32, write32;
static wait64_t wait64, write64;
static batch_t batch;
static add_node_t add_node;
static CUresult (*node_type)(CUgraphNode, CUgraphNodeType *); // cudart has no name for it
static node_params_t get_params, set_params;
static exec_params_t exec_set_params;

static void *driver(const char *name)
{
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    CHECK_CUDA(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found));
    CHECK(fn && found == cudaDriverEntryPointSuccess, "no %s", name);
    return fn;
}

__global__ void copy_word(const unsigned *from, unsigned *to)
{
    *to = *from;
}

__global__ void set_word(unsigned *to, unsigned v)
{
    *to = v;
}

static unsigned *host_word; // page-locked: a copy to pageable memory may wait for the device

static unsigned read_word(const unsigned *dev, cudaStream_t s)
{
    *host_word = 0;
    CHECK_CUDA(cudaMemcpyAsync(host_word, dev, sizeof *host_word, cudaMemcpyDeviceToHost, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    return *host_word;
}

// The stream still waits: its copy has not run after a pause.
static void still_waiting(cudaStream_t waiting, const unsigned *out, cudaStream_t reader,
                          const char *what)
{
    usleep(50 * 1000);
    CHECK(cudaStreamQuery(waiting) == cudaErrorNotReady, "%s: the stream did not wait", what);
    CHECK(read_word(out, reader) == 0, "%s: the work after the wait ran", what);
}

// A producer and a consumer: the consumer's stream waits for a flag (32-bit, each
// condition) before it copies the data a kernel of the producer's stream wrote.
static void producer_consumer(unsigned *words, cudaStream_t a, cudaStream_t b, cudaStream_t r)
{
    unsigned *flag = words, *data = words + 1, *out = words + 2;
    struct {
        unsigned start, want, cond, written;
        const char *name;
    } cases[] = {
        {0, 1, CU_STREAM_WAIT_VALUE_GEQ, 3, "GEQ"},
        {5, 9, CU_STREAM_WAIT_VALUE_EQ, 9, "EQ"},
        {0x1, 0x4, CU_STREAM_WAIT_VALUE_AND, 0x6, "AND"},
        // NOR: until ~(*addr | value) != 0; 0xffff with 0xffff0000 has every bit set
        {0xffff, 0xffff0000u, CU_STREAM_WAIT_VALUE_NOR, 0x1, "NOR"},
    };
    for (const auto &c : cases) {
        CHECK_CUDA(cudaMemsetAsync(words, 0, 4 * sizeof(unsigned), r));
        set_word<<<1, 1, 0, r>>>(flag, c.start);
        CHECK_CUDA(cudaStreamSynchronize(r));
        CHECK(wait32((CUstream)a, (CUdeviceptr)flag, c.want, c.cond) == CUDA_SUCCESS,
              "%s: cuStreamWaitValue32", c.name);
        copy_word<<<1, 1, 0, a>>>(data, out);
        still_waiting(a, out, r, c.name);
        set_word<<<1, 1, 0, b>>>(data, 42);
        CHECK(write32((CUstream)b, (CUdeviceptr)flag, c.written, 0) == CUDA_SUCCESS,
              "%s: cuStreamWriteValue32", c.name);
        CHECK_CUDA(cudaStreamSynchronize(a));
        CHECK(read_word(out, r) == 42, "%s: the consumer copied %u", c.name, read_word(out, r));
    }
    printf("memops: 32-bit waits (GEQ, EQ, AND, NOR) held their stream until the write\n");
}

// 64 bits: a wait for a value above 2^32 is met by a 64-bit write, not by its low half.
static void wide(unsigned *words, cudaStream_t a, cudaStream_t b, cudaStream_t r)
{
    unsigned long long *flag = (unsigned long long *)(words + 4); // 8-byte aligned
    unsigned *out = words + 2;
    const unsigned long long want = 0x100000002ull;
    CHECK_CUDA(cudaMemsetAsync(words, 0, 8 * sizeof(unsigned), r));
    CHECK_CUDA(cudaStreamSynchronize(r));
    CHECK(wait64((CUstream)a, (CUdeviceptr)flag, want, CU_STREAM_WAIT_VALUE_EQ) == CUDA_SUCCESS,
          "cuStreamWaitValue64");
    set_word<<<1, 1, 0, a>>>(out, 7);
    CHECK(write32((CUstream)b, (CUdeviceptr)flag, 2, 0) == CUDA_SUCCESS, "the low half");
    CHECK_CUDA(cudaStreamSynchronize(b));
    still_waiting(a, out, r, "64-bit EQ after its low half");
    CHECK(write64((CUstream)b, (CUdeviceptr)flag, want, 0) == CUDA_SUCCESS, "cuStreamWriteValue64");
    CHECK_CUDA(cudaStreamSynchronize(a));
    CHECK(read_word(out, r) == 7, "the work after a 64-bit wait wrote %u", read_word(out, r));
    printf("memops: a 64-bit wait held its stream until the whole value was written\n");
}

// A batch: two writes, a barrier and a wait on the first write, in order on one stream.
static void batched(unsigned *words, cudaStream_t a, cudaStream_t r)
{
    CHECK_CUDA(cudaMemsetAsync(words, 0, 8 * sizeof(unsigned), r));
    CHECK_CUDA(cudaStreamSynchronize(r));
    CUstreamBatchMemOpParams ops[4] = {};
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = (CUdeviceptr)words;
    ops[0].writeValue.value = 11;
    ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[1].writeValue.address = (CUdeviceptr)(words + 4);
    ops[1].writeValue.value64 = 0x500000006ull;
    ops[2].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
    ops[2].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_GPU;
    ops[3].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[3].waitValue.address = (CUdeviceptr)words;
    ops[3].waitValue.value = 11;
    ops[3].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    CHECK(batch((CUstream)a, 4, ops, 0) == CUDA_SUCCESS, "cuStreamBatchMemOp");
    copy_word<<<1, 1, 0, a>>>(words, words + 2);
    CHECK_CUDA(cudaStreamSynchronize(a));
    unsigned host[8];
    CHECK_CUDA(cudaMemcpy(host, words, sizeof host, cudaMemcpyDeviceToHost));
    CHECK(host[0] == 11 && host[2] == 11 && host[4] == 6 && host[5] == 5,
          "after the batch: %u %u %u %u", host[0], host[2], host[4], host[5]);
    printf("memops: a batch wrote, fenced and waited in order\n");
}

static CUstreamBatchMemOpParams write_op(unsigned *to, unsigned v)
{
    CUstreamBatchMemOpParams op = {};
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = (CUdeviceptr)to;
    op.writeValue.value = v;
    return op;
}

// A capture of writes, a wait and a kernel: nodes of batch memory operations, run in order
// at each launch. Through the stub each call is a node of its own; natively the driver may
// join them (the count is printed).
static void captured(unsigned *words, cudaStream_t a, cudaStream_t r, int native)
{
    unsigned *flag = words, *data = words + 1, *out = words + 2;
    CHECK_CUDA(cudaMemsetAsync(words, 0, 8 * sizeof(unsigned), r));
    CHECK_CUDA(cudaStreamSynchronize(r));
    cudaGraph_t g;
    CHECK_CUDA(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    CHECK(write32((CUstream)a, (CUdeviceptr)data, 21, 0) == CUDA_SUCCESS, "a captured write");
    CHECK(write32((CUstream)a, (CUdeviceptr)flag, 1, 0) == CUDA_SUCCESS, "a captured write");
    CHECK(wait32((CUstream)a, (CUdeviceptr)flag, 1, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS,
          "a captured wait");
    copy_word<<<1, 1, 0, a>>>(data, out);
    CHECK_CUDA(cudaStreamEndCapture(a, &g));
    cudaGraphNode_t nodes[8];
    size_t count = 8;
    CHECK_CUDA(cudaGraphGetNodes(g, nodes, &count));
    int batches = 0;
    for (size_t i = 0; i < count; i++) {
        CUgraphNodeType type;
        CHECK(node_type((CUgraphNode)nodes[i], &type) == CUDA_SUCCESS, "cuGraphNodeGetType");
        batches += type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    }
    printf("memops: the capture made %zu nodes, %d of memory operations\n", count, batches);
    CHECK(native ? batches >= 1 && count == (size_t)batches + 1 : count == 4 && batches == 3,
          "the capture made %zu nodes, %d of memory operations", count, batches);
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    for (int i = 0; i < 2; i++) {
        CHECK_CUDA(cudaMemsetAsync(words, 0, 8 * sizeof(unsigned), a));
        CHECK_CUDA(cudaGraphLaunch(exec, a));
        CHECK_CUDA(cudaStreamSynchronize(a));
        CHECK(read_word(out, r) == 21 && read_word(flag, r) == 1,
              "launch %d of the captured graph: out %u, flag %u", i, read_word(out, r),
              read_word(flag, r));
    }
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(g));
    printf("memops: captured as nodes of memory operations, run in order at each launch\n");
}

// A node of memory operations added by hand after a kernel: read back, given other
// operations in the graph and in an executable graph.
static void explicit_nodes(unsigned *words, cudaStream_t a, cudaStream_t r)
{
    unsigned *flag = words, *data = words + 1;
    CHECK_CUDA(cudaMemsetAsync(words, 0, 8 * sizeof(unsigned), r));
    CHECK_CUDA(cudaStreamSynchronize(r));
    cudaGraph_t g;
    CHECK_CUDA(cudaGraphCreate(&g, 0));
    cudaKernelNodeParams kp = {};
    unsigned nine = 9;
    void *args[] = {&data, &nine};
    kp.func = (void *)set_word;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(1);
    kp.kernelParams = args;
    cudaGraphNode_t kernel, node;
    CHECK_CUDA(cudaGraphAddKernelNode(&kernel, g, nullptr, 0, &kp));
    CUstreamBatchMemOpParams ops[2] = {write_op(flag, 5), write_op(data + 1, 8)};
    CUDA_BATCH_MEM_OP_NODE_PARAMS p = {};
    p.count = 2;
    p.paramArray = ops;
    CHECK(add_node((CUgraphNode *)&node, (CUgraph)g, (CUgraphNode *)&kernel, 1, &p) ==
              CUDA_SUCCESS,
          "cuGraphAddBatchMemOpNode");
    CUgraphNodeType type;
    CHECK(node_type((CUgraphNode)node, &type) == CUDA_SUCCESS &&
              type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP,
          "node type %d", (int)type);
    CUDA_BATCH_MEM_OP_NODE_PARAMS got = {};
    CHECK(get_params((CUgraphNode)node, &got) == CUDA_SUCCESS && got.count == 2 &&
              got.paramArray[0].writeValue.operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 &&
              got.paramArray[0].writeValue.address == (CUdeviceptr)flag &&
              got.paramArray[0].writeValue.value == 5 && got.paramArray[1].writeValue.value == 8,
          "the node reads back %u operations", got.count);
    ops[0] = write_op(flag, 6);
    CHECK(set_params((CUgraphNode)node, &p) == CUDA_SUCCESS, "cuGraphBatchMemOpNodeSetParams");
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    CHECK_CUDA(cudaGraphLaunch(exec, a));
    CHECK_CUDA(cudaStreamSynchronize(a));
    CHECK(read_word(flag, r) == 6 && read_word(data, r) == 9 && read_word(data + 1, r) == 8,
          "after the graph: flag %u, data %u", read_word(flag, r), read_word(data, r));
    ops[0] = write_op(flag, 7);
    CHECK(exec_set_params((CUgraphExec)exec, (CUgraphNode)node, &p) == CUDA_SUCCESS,
          "cuGraphExecBatchMemOpNodeSetParams");
    CHECK_CUDA(cudaGraphLaunch(exec, a));
    CHECK_CUDA(cudaStreamSynchronize(a));
    CHECK(read_word(flag, r) == 7, "after the executable graph's edit: flag %u",
          read_word(flag, r));
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(g));
    printf("memops: a node of memory operations added, read back and given others\n");
}

// What the driver refuses at once: an address not aligned to its value, a batch of 256.
static void refusals(unsigned *words, cudaStream_t a, int native)
{
    CHECK(write32((CUstream)a, (CUdeviceptr)words + 2, 1, 0) == CUDA_ERROR_INVALID_VALUE,
          "an unaligned write was taken");
    CHECK(wait64((CUstream)a, (CUdeviceptr)(words + 1), 1, 0) == CUDA_ERROR_INVALID_VALUE,
          "an unaligned 64-bit wait was taken");
    static CUstreamBatchMemOpParams many[256];
    for (auto &op : many) {
        op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
        op.writeValue.address = (CUdeviceptr)words;
    }
    CHECK(batch((CUstream)a, 256, many, 0) == CUDA_ERROR_INVALID_VALUE,
          "a batch of 256 operations was taken");
    if (!native) { // natively these block their stream for ever
        CHECK(wait32((CUstream)a, (CUdeviceptr)words, 0, CU_STREAM_WAIT_VALUE_AND) ==
                  CUDA_ERROR_INVALID_VALUE,
              "a wait for AND 0 was taken");
        CHECK(wait64((CUstream)a, (CUdeviceptr)(words + 4), ~0ull, CU_STREAM_WAIT_VALUE_NOR) ==
                  CUDA_ERROR_INVALID_VALUE,
              "a wait for NOR with every bit was taken");
        CHECK(write32((CUstream)a, (CUdeviceptr)0x1000, 1, 0) == CUDA_ERROR_INVALID_VALUE,
              "a write outside every allocation was taken");
    }
    CHECK_CUDA(cudaStreamSynchronize(a));
    printf("memops: refusals passed\n");
}

int main(int argc, char **argv)
{
    int native = argc > 1 && strcmp(argv[1], "native") == 0;
    setvbuf(stdout, nullptr, _IOLBF, 0); // each step shows, should one hang
    CHECK_CUDA(cudaMallocHost(&host_word, sizeof *host_word));
    wait32 = (wait32_t)driver("cuStreamWaitValue32");
    write32 = (wait32_t)driver("cuStreamWriteValue32");
    wait64 = (wait64_t)driver("cuStreamWaitValue64");
    write64 = (wait64_t)driver("cuStreamWriteValue64");
    batch = (batch_t)driver("cuStreamBatchMemOp");
    add_node = (add_node_t)driver("cuGraphAddBatchMemOpNode");
    node_type = (CUresult(*)(CUgraphNode, CUgraphNodeType *))driver("cuGraphNodeGetType");
    get_params = (node_params_t)driver("cuGraphBatchMemOpNodeGetParams");
    set_params = (node_params_t)driver("cuGraphBatchMemOpNodeSetParams");
    exec_set_params = (exec_params_t)driver("cuGraphExecBatchMemOpNodeSetParams");
    unsigned *words;
    CHECK_CUDA(cudaMalloc(&words, 64));
    cudaStream_t a, b, r;
    CHECK_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&r, cudaStreamNonBlocking));
    producer_consumer(words, a, b, r);
    wide(words, a, b, r);
    batched(words, a, r);
    captured(words, a, r, native);
    explicit_nodes(words, a, r);
    refusals(words, a, native);
    CHECK_CUDA(cudaFree(words));
    CHECK_CUDA(cudaFreeHost(host_word));
    printf("memops: all passed\n");
    return 0;
}
