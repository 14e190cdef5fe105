// streams: priority range and priorities (clamped outside the range), stream attributes
// (priority, synchronization policy, an L2 window set and cleared), stream flags, async
// copies on several streams with pinned memory, cudaStreamQuery (idle: success, blocked:
// not ready), cudaStreamWaitEvent ordering across streams, launches on each stream (checked
// against the trace), the legacy default stream's implicit ordering with blocking streams,
// and a non-blocking stream that does not wait for a blocked legacy stream.
#include "cr_test.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

__global__ void stream_kernel(int *out, int value)
{
    out[threadIdx.x] = value + (int)threadIdx.x;
}

struct KernelParams {  // the kernel's parameter buffer: int* at 0, int at 8, 12 bytes
    int *out;
    int value;
};

static void launch_on(cudaStream_t s, int *out, int value, unsigned threads)
{
    stream_kernel<<<1, threads, 0, s>>>(out, value);
    CHECK_CUDA(cudaGetLastError());
    unsigned char buf[12] = {};
    memcpy(buf + 0, &out, sizeof out);
    memcpy(buf + 8, &value, sizeof value);
    expect_launch("stream_kernel", dim3(1), dim3(threads), 0, buf, sizeof buf);
}

static void sleep_ms(int ms)
{
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

static void CUDART_CB sleep_host_fn(void *ms)
{
    sleep_ms(*(int *)ms);
}

static void CUDART_CB wait_flag_fn(void *flag)
{
    auto *f = (std::atomic<int> *)flag;
    for (int i = 0; i < 30000 && !f->load(); i++)  // 30 s at most
        sleep_ms(1);
}

static void fill_ints(int *p, size_t n, int base)
{
    for (size_t i = 0; i < n; i++)
        p[i] = base + (int)(i * 7);
}

static void check_ints(const int *p, size_t n, int base, const char *what)
{
    for (size_t i = 0; i < n; i++)
        CHECK(p[i] == base + (int)(i * 7), "%s: element %zu is %d, expected %d", what, i, p[i],
              base + (int)(i * 7));
}

int main()
{
    bool run = kernels_execute();

    int least = 99, greatest = 99;
    CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CHECK(least == 0, "least priority %d", least);
    CHECK(greatest < 0, "greatest priority %d", greatest);

    cudaStream_t lo, hi, clamped, nb, plain;
    CHECK_CUDA(cudaStreamCreateWithPriority(&lo, cudaStreamDefault, least));
    CHECK_CUDA(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest));
    CHECK_CUDA(cudaStreamCreateWithPriority(&clamped, cudaStreamDefault, greatest - 5));
    CHECK_CUDA(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreate(&plain));
    int prio = 99;
    CHECK_CUDA(cudaStreamGetPriority(lo, &prio));
    CHECK(prio == least, "low-priority stream has priority %d, expected %d", prio, least);
    CHECK_CUDA(cudaStreamGetPriority(hi, &prio));
    CHECK(prio == greatest, "high-priority stream has priority %d, expected %d", prio, greatest);
    CHECK_CUDA(cudaStreamGetPriority(clamped, &prio));
    CHECK(prio == greatest, "priority %d not clamped: %d", greatest - 5, prio);
    CHECK_CUDA(cudaStreamGetPriority(plain, &prio));
    CHECK(prio == 0, "default priority %d", prio);
    // attributes: a priority, a synchronization policy and an L2 window set and read back
    cudaStreamAttrValue attr = {};
    attr.priority = least;
    CHECK_CUDA(cudaStreamSetAttribute(hi, cudaStreamAttributePriority, &attr));
    attr.priority = 99;
    CHECK_CUDA(cudaStreamGetAttribute(hi, cudaStreamAttributePriority, &attr));
    CHECK(attr.priority == least, "priority attribute %d, expected %d", attr.priority, least);
    CHECK_CUDA(cudaStreamGetPriority(hi, &prio));
    CHECK(prio == least, "priority %d after the attribute, expected %d", prio, least);
    attr = {};
    attr.syncPolicy = cudaSyncPolicySpin;
    CHECK_CUDA(cudaStreamSetAttribute(plain, cudaStreamAttributeSynchronizationPolicy, &attr));
    attr.syncPolicy = cudaSyncPolicyAuto;
    CHECK_CUDA(cudaStreamGetAttribute(plain, cudaStreamAttributeSynchronizationPolicy, &attr));
    CHECK(attr.syncPolicy == cudaSyncPolicySpin, "synchronization policy %d", (int)attr.syncPolicy);
    void *window_buf;
    CHECK_CUDA(cudaMalloc(&window_buf, 1 << 16));
    attr = {};
    attr.accessPolicyWindow.base_ptr = window_buf;
    attr.accessPolicyWindow.num_bytes = 1 << 16;
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyNormal;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    CHECK_CUDA(cudaStreamSetAttribute(plain, cudaStreamAttributeAccessPolicyWindow, &attr));
    attr = {};
    attr.accessPolicyWindow.num_bytes = 0; // an empty window clears it
    CHECK_CUDA(cudaStreamSetAttribute(plain, cudaStreamAttributeAccessPolicyWindow, &attr));
    CHECK_CUDA(cudaFree(window_buf));
    unsigned flags = 99;
    CHECK_CUDA(cudaStreamGetFlags(nb, &flags));
    CHECK(flags == cudaStreamNonBlocking, "non-blocking stream flags %#x", flags);
    CHECK_CUDA(cudaStreamGetFlags(hi, &flags));
    CHECK(flags == cudaStreamNonBlocking, "high-priority stream flags %#x", flags);
    CHECK_CUDA(cudaStreamGetFlags(plain, &flags));
    CHECK(flags == cudaStreamDefault, "default stream flags %#x", flags);

    // async copies on several streams, each with its own pinned buffers
    cudaStream_t streams[] = {lo, hi, clamped, nb, plain};
    const int ns = 5;
    const size_t n = 256 * 1024 + 5;  // ints
    int *h_in[ns], *h_out[ns], *d_buf[ns];
    for (int i = 0; i < ns; i++) {
        CHECK_CUDA(cudaMallocHost(&h_in[i], n * sizeof(int)));
        CHECK_CUDA(cudaMallocHost(&h_out[i], n * sizeof(int)));
        CHECK_CUDA(cudaMalloc(&d_buf[i], n * sizeof(int)));
        fill_ints(h_in[i], n, 1000 * i);
        memset(h_out[i], 0, n * sizeof(int));
    }
    for (int i = 0; i < ns; i++)
        CHECK_CUDA(cudaMemcpyAsync(d_buf[i], h_in[i], n * sizeof(int), cudaMemcpyHostToDevice,
                                   streams[i]));
    for (int i = 0; i < ns; i++)
        CHECK_CUDA(cudaMemcpyAsync(h_out[i], d_buf[i], n * sizeof(int), cudaMemcpyDeviceToHost,
                                   streams[i]));
    for (int i = 0; i < ns; i++) {
        CHECK_CUDA(cudaStreamSynchronize(streams[i]));
        check_ints(h_out[i], n, 1000 * i, "async round trip");
        CHECK_CUDA(cudaStreamQuery(streams[i]));  // idle now
    }

    // cudaStreamQuery: not ready while a host function holds the stream
    {
        std::atomic<int> flag{0};
        CHECK_CUDA(cudaLaunchHostFunc(plain, wait_flag_fn, &flag));
        EXPECT_CUDA_ERROR(cudaStreamQuery(plain), cudaErrorNotReady);
        flag = 1;
        CHECK_CUDA(cudaStreamSynchronize(plain));
        CHECK_CUDA(cudaStreamQuery(plain));
    }

    // cudaStreamWaitEvent: stream b copies what stream a wrote, only after a's event
    {
        int delay = 200;
        cudaEvent_t e;
        CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        fill_ints(h_in[0], n, 777);
        CHECK_CUDA(cudaMemset(d_buf[1], 0, n * sizeof(int)));
        // nb is non-blocking: nothing orders the memset before its copy but this
        CHECK_CUDA(cudaDeviceSynchronize());
        CHECK_CUDA(cudaLaunchHostFunc(lo, sleep_host_fn, &delay));
        CHECK_CUDA(cudaMemcpyAsync(d_buf[0], h_in[0], n * sizeof(int), cudaMemcpyHostToDevice,
                                   lo));
        CHECK_CUDA(cudaEventRecord(e, lo));
        CHECK_CUDA(cudaStreamWaitEvent(nb, e, 0));
        CHECK_CUDA(cudaMemcpyAsync(d_buf[1], d_buf[0], n * sizeof(int),
                                   cudaMemcpyDeviceToDevice, nb));
        CHECK_CUDA(cudaMemcpyAsync(h_out[1], d_buf[1], n * sizeof(int), cudaMemcpyDeviceToHost,
                                   nb));
        CHECK_CUDA(cudaStreamSynchronize(nb));
        check_ints(h_out[1], n, 777, "copy ordered by cudaStreamWaitEvent");
        CHECK_CUDA(cudaStreamQuery(lo));  // nb waited for lo's event: lo is done too
        CHECK_CUDA(cudaEventDestroy(e));
    }

    // a launch on every stream (and on the default one); each stream is synchronized before
    // the next launch so that the trace has them in announcement order
    int *d_out;
    CHECK_CUDA(cudaMalloc(&d_out, (ns + 1) * 64 * sizeof(int)));
    CHECK_CUDA(cudaMemset(d_out, 0, (ns + 1) * 64 * sizeof(int)));
    CHECK_CUDA(cudaDeviceSynchronize()); // before launches on non-blocking streams
    for (int i = 0; i < ns; i++) {
        launch_on(streams[i], d_out + 64 * i, 100 * (i + 1), 32 + i);
        CHECK_CUDA(cudaStreamSynchronize(streams[i]));
    }
    launch_on(0, d_out + 64 * ns, 100 * (ns + 1), 64);
    CHECK_CUDA(cudaDeviceSynchronize());
    if (run) {
        std::vector<int> out((ns + 1) * 64);
        CHECK_CUDA(cudaMemcpy(out.data(), d_out, out.size() * sizeof(int),
                              cudaMemcpyDeviceToHost));
        for (int i = 0; i <= ns; i++) {
            unsigned threads = i < ns ? 32 + i : 64;
            for (unsigned t = 0; t < 64; t++) {
                int want = t < threads ? 100 * (i + 1) + (int)t : 0;
                CHECK(out[64 * i + t] == want, "stream %d thread %u wrote %d, expected %d", i, t,
                      out[64 * i + t], want);
            }
        }
    }

    // the legacy default stream waits for blocking streams, and blocking streams for it
    {
        int delay = 200;
        fill_ints(h_in[2], n, 4242);
        CHECK_CUDA(cudaMemset(d_buf[2], 0, n * sizeof(int)));
        memset(h_out[2], 0, n * sizeof(int));
        CHECK_CUDA(cudaLaunchHostFunc(plain, sleep_host_fn, &delay));
        CHECK_CUDA(cudaMemcpyAsync(d_buf[2], h_in[2], n * sizeof(int), cudaMemcpyHostToDevice,
                                   plain));
        CHECK_CUDA(cudaMemcpyAsync(h_out[2], d_buf[2], n * sizeof(int), cudaMemcpyDeviceToHost,
                                   cudaStreamLegacy));
        CHECK_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
        check_ints(h_out[2], n, 4242, "legacy stream after a blocking stream");

        fill_ints(h_in[3], n, 5151);
        memset(h_out[3], 0, n * sizeof(int));
        CHECK_CUDA(cudaLaunchHostFunc(cudaStreamLegacy, sleep_host_fn, &delay));
        CHECK_CUDA(cudaMemcpyAsync(d_buf[3], h_in[3], n * sizeof(int), cudaMemcpyHostToDevice,
                                   cudaStreamLegacy));
        CHECK_CUDA(cudaMemcpyAsync(h_out[3], d_buf[3], n * sizeof(int), cudaMemcpyDeviceToHost,
                                   lo));
        CHECK_CUDA(cudaStreamSynchronize(lo));
        check_ints(h_out[3], n, 5151, "blocking stream after the legacy stream");
    }

    // a non-blocking stream does not wait for the (blocked) legacy stream
    {
        std::atomic<int> flag{0};
        CHECK_CUDA(cudaLaunchHostFunc(cudaStreamLegacy, wait_flag_fn, &flag));
        fill_ints(h_in[4], n, 9090);
        memset(h_out[4], 0, n * sizeof(int));
        CHECK_CUDA(cudaMemcpyAsync(d_buf[4], h_in[4], n * sizeof(int), cudaMemcpyHostToDevice,
                                   nb));
        CHECK_CUDA(cudaMemcpyAsync(h_out[4], d_buf[4], n * sizeof(int), cudaMemcpyDeviceToHost,
                                   nb));
        cudaError_t q = cudaErrorNotReady;
        for (int i = 0; i < 1000 && q == cudaErrorNotReady; i++) {
            q = cudaStreamQuery(nb);
            if (q == cudaErrorNotReady)
                sleep_ms(10);
        }
        EXPECT_CUDA_ERROR(cudaStreamQuery(cudaStreamLegacy), cudaErrorNotReady);
        flag = 1;
        CHECK(q == cudaSuccess, "the non-blocking stream waited for the legacy stream (%s)",
              cudaGetErrorName(q));
        check_ints(h_out[4], n, 9090, "non-blocking stream while the legacy stream is blocked");
        CHECK_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
    }

    for (int i = 0; i < ns; i++) {
        CHECK_CUDA(cudaStreamDestroy(streams[i]));
        CHECK_CUDA(cudaFreeHost(h_in[i]));
        CHECK_CUDA(cudaFreeHost(h_out[i]));
        CHECK_CUDA(cudaFree(d_buf[i]));
    }
    CHECK_CUDA(cudaFree(d_out));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaGetLastError());
    printf("streams: all checks passed\n");
    return 0;
}
