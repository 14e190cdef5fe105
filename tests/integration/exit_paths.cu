// exit_paths: the program returns from main with work still queued: async launches, async
// copies (H2D, D2D, D2H into pinned memory), memsets and a host function on several streams
// without a final synchronize, and device, pinned and stream-ordered allocations never
// freed. It must exit 0 and the server must stay up (run.py checks both).
#include "cr_test.h"

#include <chrono>
#include <thread>

__global__ void busy_kernel(float *data, int n, int rounds)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        for (int r = 0; r < rounds; r++)
            data[i] = data[i] * 0.999f + 1.0f;
}

static void CUDART_CB short_sleep(void *)
{
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

int main()
{
    const int n = 1 << 20;
    float *d[3], *h;
    CHECK_CUDA(cudaMallocHost(&h, 3 * n * sizeof(float)));
    for (int i = 0; i < 3 * n; i++)
        h[i] = (float)i;
    cudaStream_t s[3];
    for (int k = 0; k < 3; k++) {
        CHECK_CUDA(cudaStreamCreateWithFlags(&s[k], cudaStreamNonBlocking));
        CHECK_CUDA(cudaMalloc(&d[k], n * sizeof(float)));
    }

    // one launch that is waited for, so that the trace is known to have it
    busy_kernel<<<n / 256, 256, 0, s[0]>>>(d[0], n, 1);
    CHECK_CUDA(cudaGetLastError());
    {
        unsigned char p[16] = {};
        int rounds = 1;
        memcpy(p, &d[0], 8);
        memcpy(p + 8, &n, 4);
        memcpy(p + 12, &rounds, 4);
        expect_launch("busy_kernel", dim3(n / 256), dim3(256), 0, p, sizeof p);
    }
    CHECK_CUDA(cudaStreamSynchronize(s[0]));

    // then work left queued at exit
    for (int k = 0; k < 3; k++) {
        CHECK_CUDA(cudaMemcpyAsync(d[k], h + k * n, n * sizeof(float), cudaMemcpyHostToDevice,
                                   s[k]));
        for (int j = 0; j < 4; j++) {
            busy_kernel<<<n / 256, 256, 0, s[k]>>>(d[k], n, 100);
            CHECK_CUDA(cudaGetLastError());
        }
        CHECK_CUDA(cudaMemsetAsync(d[k], 0, 1024, s[k]));
        CHECK_CUDA(cudaMemcpyAsync(d[(k + 1) % 3], d[k], n * sizeof(float),
                                   cudaMemcpyDeviceToDevice, s[k]));
        CHECK_CUDA(cudaMemcpyAsync(h + k * n, d[k], n * sizeof(float), cudaMemcpyDeviceToHost,
                                   s[k]));
    }
    CHECK_CUDA(cudaLaunchHostFunc(s[1], short_sleep, nullptr));
    void *never_freed;
    CHECK_CUDA(cudaMallocAsync(&never_freed, 4 << 20, s[2]));
    CHECK_CUDA(cudaMemsetAsync(never_freed, 1, 4 << 20, s[2]));
    busy_kernel<<<n / 256, 256>>>(d[2], n, 10);  // and on the default stream
    CHECK_CUDA(cudaGetLastError());

    printf("exit_paths: all checks passed (exiting with work queued)\n");
    fflush(stdout);
    return 0;
}
