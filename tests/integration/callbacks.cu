// callbacks: cudaLaunchHostFunc runs host functions in stream order (a vector records the
// order), interleaved with async copies whose results the functions read from pinned memory
// (a D2H copy followed by a host function: the function sees the copied data);
// cudaStreamAddCallback passes cudaSuccess, the stream and the right userData; host
// functions on two streams and on the NULL stream; an event recorded after a host function
// completes only after the function ran.
#include "cr_test.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

static std::mutex order_lock;
static std::vector<int> order;

struct Tag {
    int id;
};

static void CUDART_CB record_order(void *arg)
{
    std::lock_guard<std::mutex> g(order_lock);
    order.push_back(((Tag *)arg)->id);
}

struct CopyCheck {
    const int *pinned;  // where the D2H copy before this function landed
    int n;
    int base;
    std::atomic<int> *ok;
    std::atomic<int> *ran;
};

static void CUDART_CB check_copy(void *arg)
{
    CopyCheck *c = (CopyCheck *)arg;
    int good = 1;
    for (int i = 0; i < c->n; i++)
        if (c->pinned[i] != c->base + i) {
            fprintf(stderr, "host function saw element %d = %d, expected %d\n", i, c->pinned[i],
                    c->base + i);
            good = 0;
            break;
        }
    if (good)
        (*c->ok)++;
    (*c->ran)++;
}

struct CallbackData {
    cudaStream_t expected_stream;
    int magic;
    std::atomic<int> calls{0};
    std::atomic<int> bad{0};
};

static void CUDART_CB stream_callback(cudaStream_t stream, cudaError_t status, void *user)
{
    CallbackData *d = (CallbackData *)user;
    if (status != cudaSuccess || d->magic != 0x600d || stream != d->expected_stream) {
        fprintf(stderr, "callback: status %d, magic %#x, stream %p (expected %p)\n", (int)status,
                d->magic, (void *)stream, (void *)d->expected_stream);
        d->bad++;
    }
    d->calls++;
}

static void CUDART_CB slow_set(void *flag)
{
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ((std::atomic<int> *)flag)->store(1);
}

int main()
{
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));

    // ordering on one stream, interleaved with copies the functions check
    {
        const int rounds = 6, n = 100000;
        int *d, *h_in, *h_out;
        CHECK_CUDA(cudaMalloc(&d, n * sizeof(int)));
        CHECK_CUDA(cudaMallocHost(&h_in, rounds * n * sizeof(int)));
        CHECK_CUDA(cudaMallocHost(&h_out, rounds * n * sizeof(int)));
        std::atomic<int> ok{0}, ran{0};
        Tag tags[3 * rounds];
        CopyCheck checks[rounds];
        for (int r = 0; r < rounds; r++) {
            for (int i = 0; i < n; i++)
                h_in[r * n + i] = r * 1000000 + i;
            tags[3 * r] = {3 * r};
            tags[3 * r + 1] = {3 * r + 1};
            tags[3 * r + 2] = {3 * r + 2};
            checks[r] = {h_out + r * n, n, r * 1000000, &ok, &ran};
            CHECK_CUDA(cudaLaunchHostFunc(s, record_order, &tags[3 * r]));
            CHECK_CUDA(cudaMemcpyAsync(d, h_in + r * n, n * sizeof(int), cudaMemcpyHostToDevice,
                                       s));
            CHECK_CUDA(cudaLaunchHostFunc(s, record_order, &tags[3 * r + 1]));
            CHECK_CUDA(cudaMemcpyAsync(h_out + r * n, d, n * sizeof(int), cudaMemcpyDeviceToHost,
                                       s));
            CHECK_CUDA(cudaLaunchHostFunc(s, check_copy, &checks[r]));
            CHECK_CUDA(cudaLaunchHostFunc(s, record_order, &tags[3 * r + 2]));
        }
        CHECK_CUDA(cudaStreamSynchronize(s));
        CHECK(ran == rounds, "%d of %d checking host functions ran", ran.load(), rounds);
        CHECK(ok == rounds, "%d of %d host functions saw the copied data", ok.load(), rounds);
        CHECK((int)order.size() == 3 * rounds, "%zu host functions recorded, expected %d",
              order.size(), 3 * rounds);
        for (int i = 0; i < 3 * rounds; i++)
            CHECK(order[i] == i, "host function %d ran in position %d (got %d)", i, i, order[i]);
        CHECK_CUDA(cudaFree(d));
        CHECK_CUDA(cudaFreeHost(h_in));
        CHECK_CUDA(cudaFreeHost(h_out));
    }

    // cudaStreamAddCallback: status, stream and userData
    {
        CallbackData cd;
        cd.expected_stream = s;
        cd.magic = 0x600d;
        for (int i = 0; i < 5; i++)
            CHECK_CUDA(cudaStreamAddCallback(s, stream_callback, &cd, 0));
        CHECK_CUDA(cudaStreamSynchronize(s));
        CHECK(cd.calls == 5 && cd.bad == 0, "callbacks: %d calls, %d bad", cd.calls.load(),
              cd.bad.load());
    }

    // host functions on two streams (each in its own order) and on the NULL stream
    {
        cudaStream_t t;
        CHECK_CUDA(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
        order.clear();
        Tag a[10], b[10];
        for (int i = 0; i < 10; i++) {
            a[i] = {i};
            b[i] = {100 + i};
            CHECK_CUDA(cudaLaunchHostFunc(s, record_order, &a[i]));
            CHECK_CUDA(cudaLaunchHostFunc(t, record_order, &b[i]));
        }
        CHECK_CUDA(cudaStreamSynchronize(s));
        CHECK_CUDA(cudaStreamSynchronize(t));
        CHECK(order.size() == 20, "%zu host functions ran on two streams", order.size());
        int next_a = 0, next_b = 100;
        for (int v : order) {
            if (v < 100) {
                CHECK(v == next_a, "stream s ran %d, expected %d", v, next_a);
                next_a++;
            } else {
                CHECK(v == next_b, "stream t ran %d, expected %d", v, next_b);
                next_b++;
            }
        }
        Tag z = {7};
        order.clear();
        CHECK_CUDA(cudaLaunchHostFunc(0, record_order, &z));
        CHECK_CUDA(cudaStreamSynchronize(0));
        CHECK(order.size() == 1 && order[0] == 7, "host function on the NULL stream");

        CallbackData cd;
        cd.expected_stream = t;
        cd.magic = 0x600d;
        CHECK_CUDA(cudaStreamAddCallback(t, stream_callback, &cd, 0));
        CHECK_CUDA(cudaStreamSynchronize(t));
        CHECK(cd.calls == 1 && cd.bad == 0, "callback on the second stream");
        CHECK_CUDA(cudaStreamDestroy(t));
    }

    // an event after a host function completes after it
    {
        std::atomic<int> flag{0};
        cudaEvent_t e;
        CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        CHECK_CUDA(cudaLaunchHostFunc(s, slow_set, &flag));
        CHECK_CUDA(cudaEventRecord(e, s));
        CHECK_CUDA(cudaEventSynchronize(e));
        CHECK(flag == 1, "event completed before the host function before it ran");
        CHECK_CUDA(cudaEventDestroy(e));
    }

    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaGetLastError());
    printf("callbacks: all checks passed\n");
    return 0;
}
