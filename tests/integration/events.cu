// events: create/record/synchronize/query, elapsed times (>= 0, finite; a 200 ms host
// function between two events shows up), cudaErrorNotReady while recorded work is pending,
// cudaErrorInvalidResourceHandle for unrecorded events and cudaEventDisableTiming,
// cudaEventRecordWithFlags, events on the NULL stream and on created streams.
#include "cr_test.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

static void CUDART_CB sleep_200ms(void *)
{
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

static void CUDART_CB wait_flag_fn(void *flag)
{
    auto *f = (std::atomic<int> *)flag;
    for (int i = 0; i < 30000 && !f->load(); i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

static float elapsed(cudaEvent_t a, cudaEvent_t b)
{
    float ms = -1;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    CHECK(std::isfinite(ms) && ms >= 0, "elapsed time %f", ms);
    return ms;
}

int main()
{
    cudaEvent_t start, stop, mid;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    CHECK_CUDA(cudaEventCreateWithFlags(&mid, cudaEventBlockingSync));

    // never recorded: complete, but it has no time
    CHECK_CUDA(cudaEventQuery(start));
    CHECK_CUDA(cudaEventSynchronize(start));
    float ms = -1;
    EXPECT_CUDA_ERROR(cudaEventElapsedTime(&ms, start, stop), cudaErrorInvalidResourceHandle);

    // around a 16 MiB round trip on the NULL stream
    const size_t n = 16u << 20;
    std::vector<unsigned char> h(n, 0x3c), back(n);
    unsigned char *d;
    CHECK_CUDA(cudaMalloc(&d, n));
    CHECK_CUDA(cudaEventRecord(start, 0));
    CHECK_CUDA(cudaMemcpy(d, h.data(), n, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaEventRecord(mid, 0));
    CHECK_CUDA(cudaMemcpy(back.data(), d, n, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaEventRecord(stop, 0));
    CHECK_CUDA(cudaEventSynchronize(stop));
    CHECK_CUDA(cudaEventQuery(start));
    CHECK_CUDA(cudaEventQuery(mid));
    CHECK_CUDA(cudaEventQuery(stop));
    CHECK(memcmp(h.data(), back.data(), n) == 0, "16 MiB round trip differs");
    float total = elapsed(start, stop), first = elapsed(start, mid), second = elapsed(mid, stop);
    CHECK(first <= total + 0.01f && second <= total + 0.01f,
          "partial intervals %f and %f exceed the total %f", first, second, total);
    float empty = elapsed(stop, stop);
    CHECK(empty == 0.0f, "elapsed time of an event to itself: %f", empty);
    printf("16 MiB H2D %.3f ms, D2H %.3f ms\n", first, second);

    // a 200 ms host function between two events on a created stream
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));
    CHECK_CUDA(cudaEventRecord(start, s));
    CHECK_CUDA(cudaLaunchHostFunc(s, sleep_200ms, nullptr));
    CHECK_CUDA(cudaEventRecordWithFlags(stop, s, cudaEventRecordDefault));
    CHECK_CUDA(cudaEventSynchronize(stop));
    ms = elapsed(start, stop);
    CHECK(ms >= 150.0f && ms < 10000.0f, "200 ms host function measured as %f ms", ms);
    printf("200 ms host function: %.1f ms\n", ms);

    // pending work: the event is not ready, nor its elapsed time
    {
        std::atomic<int> flag{0};
        CHECK_CUDA(cudaEventRecord(start, s));
        CHECK_CUDA(cudaLaunchHostFunc(s, wait_flag_fn, &flag));
        CHECK_CUDA(cudaEventRecord(stop, s));
        EXPECT_CUDA_ERROR(cudaEventQuery(stop), cudaErrorNotReady);
        EXPECT_CUDA_ERROR(cudaEventElapsedTime(&ms, start, stop), cudaErrorNotReady);
        flag = 1;
        CHECK_CUDA(cudaEventSynchronize(stop));
        CHECK_CUDA(cudaEventQuery(stop));
        elapsed(start, stop);
    }

    // events of two streams (the NULL stream and a created one)
    {
        cudaStream_t t;
        CHECK_CUDA(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
        CHECK_CUDA(cudaEventRecord(start, 0));
        CHECK_CUDA(cudaStreamSynchronize(0));
        CHECK_CUDA(cudaMemcpyAsync(d, h.data(), 1 << 20, cudaMemcpyHostToDevice, t));
        CHECK_CUDA(cudaEventRecord(stop, t));
        CHECK_CUDA(cudaEventSynchronize(stop));
        elapsed(start, stop);
        CHECK_CUDA(cudaStreamDestroy(t));
    }

    // re-recording moves the event
    CHECK_CUDA(cudaEventRecord(start, s));
    CHECK_CUDA(cudaEventRecord(stop, s));
    CHECK_CUDA(cudaEventSynchronize(stop));
    ms = elapsed(start, stop);
    CHECK(ms < 150.0f, "re-recorded events still measure %f ms", ms);

    // timing disabled
    cudaEvent_t nt1, nt2;
    CHECK_CUDA(cudaEventCreateWithFlags(&nt1, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&nt2, cudaEventDisableTiming | cudaEventBlockingSync));
    CHECK_CUDA(cudaEventRecord(nt1, s));
    CHECK_CUDA(cudaEventRecord(nt2, s));
    CHECK_CUDA(cudaEventSynchronize(nt2));
    CHECK_CUDA(cudaEventQuery(nt1));
    EXPECT_CUDA_ERROR(cudaEventElapsedTime(&ms, nt1, nt2), cudaErrorInvalidResourceHandle);
    EXPECT_CUDA_ERROR(cudaEventElapsedTime(&ms, start, nt2), cudaErrorInvalidResourceHandle);
    EXPECT_CUDA_ERROR(cudaGetLastError(), cudaErrorInvalidResourceHandle);  // then cleared

    CHECK_CUDA(cudaEventDestroy(nt1));
    CHECK_CUDA(cudaEventDestroy(nt2));
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
    CHECK_CUDA(cudaEventDestroy(mid));
    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaFree(d));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaGetLastError());
    printf("events: all checks passed\n");
    return 0;
}
