// memhold (scenario sigkill): with `free`, prints the device's free memory as
// `FREE <bytes>`; with `hold`, allocates 256 MiB in several allocations (plus a stream, an
// event, a stream-ordered allocation and pinned host memory), touches all of it with
// cudaMemset, prints `HOLDING <bytes>` and sleeps until it is killed. run.py checks that
// the server gets all of it back after the SIGKILL.
#include "cr_test.h"

#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "free") == 0) {
        size_t free_b = 0, total_b = 0;
        CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
        CHECK(free_b > 0 && free_b <= total_b, "cudaMemGetInfo: %zu free of %zu", free_b,
              total_b);
        printf("FREE %zu\n", free_b);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "hold") == 0) {
        const size_t chunk = 32u << 20;
        const int chunks = 8;
        size_t free_before, free_after, total_b;
        CHECK_CUDA(cudaMemGetInfo(&free_before, &total_b));
        for (int i = 0; i < chunks; i++) {
            void *p;
            CHECK_CUDA(cudaMalloc(&p, chunk));
            CHECK_CUDA(cudaMemset(p, i + 1, chunk));
        }
        cudaStream_t s;
        CHECK_CUDA(cudaStreamCreate(&s));
        cudaEvent_t e;
        CHECK_CUDA(cudaEventCreate(&e));
        void *async_p, *pinned;
        CHECK_CUDA(cudaMallocAsync(&async_p, 1 << 20, s));
        CHECK_CUDA(cudaMemsetAsync(async_p, 0x5a, 1 << 20, s));
        CHECK_CUDA(cudaEventRecord(e, s));
        CHECK_CUDA(cudaMallocHost(&pinned, 1 << 20));
        CHECK_CUDA(cudaDeviceSynchronize());
        CHECK_CUDA(cudaMemGetInfo(&free_after, &total_b));
        CHECK(free_before - free_after >= chunks * chunk, "free memory went from %zu to %zu "
              "only while holding %zu bytes", free_before, free_after, chunks * chunk);
        printf("HOLDING %zu\n", chunks * chunk);
        fflush(stdout);
        for (;;)
            pause();
    }
    fprintf(stderr, "usage: %s free|hold\n", argv[0]);
    return 2;
}
