// printf: device printf from a few threads of several blocks, with %d %u %x %f %s %c %lld %p,
// widths, precision and flags; a %s argument that points into device memory; output of a
// kernel is visible after cudaDeviceSynchronize, before the host's next line. Every device
// line is unique; run.py checks each with a regex (order-independent, see printf_expect.cmake).
// Phase 1: 3 blocks x 64 threads, threads 3 and 35 of each block print one line each.
// Phase 2: one thread prints three lines (in program order), after the first host marker.
#include "kt.h"

__global__ void say(const char *word)
{
    unsigned b = blockIdx.x, t = threadIdx.x;
    if (t % 32 != 3)
        return;
    printf("dev b=%d t=%u u=%u x=%x X=%08X f=%f g=%.2f s=%s w=%s c=%c ll=%lld "
           "w5=[%5d] l5=[%-5d] z5=[%05d] plus=%+d p=%p end\n",
           (int)b, t, 4000000000u + t, 0xbeef0000u + t, t * 0x10001u, b + 0.25f,
           -1.0 / (b + 2), (b & 1) ? "odd" : "even", word, 'A' + (int)b,
           -1234567890123LL * (long long)(b + 1), (int)t, (int)t, (int)t, (int)b,
           (void *)(uintptr_t)(0xabc000u + t));
}

__global__ void phase2(int k)
{
    printf("dev2 first k=%d\n", k);
    printf("dev2 second %s|%-6s|%6s|\n", "abc", "left", "right");
    printf("dev2 third %lu %hd %5.1f%%\n", 18446744073709551615ul, (short)-7, 99.44);
}

int main()
{
    kt_start("printf");
    printf("host before kernels\n");
    fflush(stdout);
    const char word[] = "remote";
    char *dword;
    CHECK_CUDA(cudaMalloc(&dword, sizeof word));
    CHECK_CUDA(cudaMemcpy(dword, word, sizeof word, cudaMemcpyHostToDevice));
    say<<<3, 64>>>(dword);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    printf("host after sync\n");
    fflush(stdout);
    phase2<<<1, 1>>>(7);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    printf("host after sync 2\n");
    fflush(stdout);
    CHECK_CUDA(cudaFree(dword));
    kt_pass();
    return 0;
}
