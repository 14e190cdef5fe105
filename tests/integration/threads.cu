// threads: (a) two threads each allocate, copy (sync and async on their own streams) and
// synchronize concurrently, with their data checked; (b) a cudaStreamSynchronize in one
// thread does not hold up another thread's calls: thread A synchronizes a stream held by a
// host function that waits for thread B, and B's cudaMalloc and cudaMemcpy H2D/D2H must go
// through meanwhile (a watchdog fails the test after 20 s instead of hanging); B's cudaFree
// comes after the release, since cudaFree waits for the device to be idle.
#include "cr_test.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <unistd.h>

static void sleep_ms(int ms)
{
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

static void worker(int id, std::atomic<int> *failures)
{
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));
    const size_t n = (1 << 20) + 1000 * id;
    std::vector<uint32_t> in(n), out(n);
    uint32_t *pinned;
    CHECK_CUDA(cudaMallocHost(&pinned, n * sizeof(uint32_t)));
    for (int iter = 0; iter < 8; iter++) {
        for (size_t i = 0; i < n; i++)
            in[i] = (uint32_t)(id * 0x10000000u + iter * 0x100000u + i);
        uint32_t *d1, *d2;
        CHECK_CUDA(cudaMalloc(&d1, n * sizeof(uint32_t)));
        CHECK_CUDA(cudaMalloc(&d2, n * sizeof(uint32_t)));
        CHECK_CUDA(cudaMemcpy(d1, in.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice));
        // a synchronous copy from pageable memory may still be landing when it returns, and
        // with a per-thread default stream nothing orders s after it: wait for it
        CHECK_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
        CHECK_CUDA(cudaMemcpyAsync(d2, d1, n * sizeof(uint32_t), cudaMemcpyDeviceToDevice, s));
        CHECK_CUDA(cudaMemsetAsync(d2, 0xff, 16, s));
        CHECK_CUDA(cudaMemcpyAsync(pinned, d2, n * sizeof(uint32_t), cudaMemcpyDeviceToHost, s));
        CHECK_CUDA(cudaStreamSynchronize(s));
        CHECK_CUDA(cudaMemcpy(out.data(), d1, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) {
            uint32_t want = i < 4 ? 0xffffffffu : in[i];
            if (pinned[i] != want || out[i] != in[i]) {
                fprintf(stderr, "thread %d iteration %d: element %zu is %#x/%#x, expected "
                                "%#x/%#x\n",
                        id, iter, i, pinned[i], out[i], want, in[i]);
                (*failures)++;
                break;
            }
        }
        CHECK_CUDA(cudaFree(d1));
        CHECK_CUDA(cudaFree(d2));
    }
    CHECK_CUDA(cudaFreeHost(pinned));
    CHECK_CUDA(cudaStreamDestroy(s));
}

static std::atomic<int> host_fn_running{0}, release_host_fn{0};

static void CUDART_CB blocker(void *)
{
    host_fn_running = 1;
    for (int i = 0; i < 60000 && !release_host_fn.load(); i++)  // 60 s at most
        sleep_ms(1);
}

int main()
{
    int dummy;
    CHECK_CUDA(cudaDeviceGetAttribute(&dummy, cudaDevAttrWarpSize, 0));  // cudart initialized

    // (a)
    {
        std::atomic<int> failures{0};
        std::thread t1(worker, 1, &failures), t2(worker, 2, &failures);
        t1.join();
        t2.join();
        CHECK(failures == 0, "%d data mismatches in concurrent threads", failures.load());
    }

    // (b)
    {
        cudaStream_t s;
        CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        std::atomic<int> a_synchronized{0}, b_done{0};
        std::thread a([&] {
            CHECK_CUDA(cudaLaunchHostFunc(s, blocker, nullptr));
            CHECK_CUDA(cudaStreamSynchronize(s));
            a_synchronized = 1;
        });
        std::thread b([&] {
            std::thread watchdog([&] {
                for (int i = 0; i < 2000 && !b_done.load(); i++)
                    sleep_ms(10);
                if (!b_done.load()) {
                    fprintf(stderr, "threads: thread B's calls did not complete within 20 s "
                                    "while thread A was in cudaStreamSynchronize\n");
                    fflush(stderr);
                    _exit(1);
                }
            });
            while (!host_fn_running.load())
                sleep_ms(1);
            sleep_ms(100);  // let A enter cudaStreamSynchronize
            CHECK(!a_synchronized.load(), "A's synchronize returned while the stream was held");
            const size_t n = 3 << 20;
            std::vector<unsigned char> in(n), out(n);
            for (size_t i = 0; i < n; i++)
                in[i] = (unsigned char)(i * 31 + 7);
            void *d;
            CHECK_CUDA(cudaMalloc(&d, n));
            CHECK_CUDA(cudaMemcpy(d, in.data(), n, cudaMemcpyHostToDevice));
            CHECK_CUDA(cudaMemcpy(out.data(), d, n, cudaMemcpyDeviceToHost));
            CHECK(memcmp(in.data(), out.data(), n) == 0, "thread B's round trip differs");
            CHECK(!a_synchronized.load(), "A's synchronize returned while the stream was held");
            b_done = 1;
            watchdog.join();
            release_host_fn = 1;
            // cudaFree waits for the device to be idle (as on a GPU), hence after the release
            CHECK_CUDA(cudaFree(d));
        });
        b.join();
        a.join();
        CHECK(a_synchronized.load(), "A did not synchronize");
        CHECK_CUDA(cudaStreamQuery(s));
        CHECK_CUDA(cudaStreamDestroy(s));
    }

    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaGetLastError());
    printf("threads: all checks passed\n");
    return 0;
}
