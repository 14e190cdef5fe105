// streams_kernels: kernels on several streams, ordered by streams and events.
//  1. Three non-blocking streams, each: async copy in (pinned memory), three dependent
//     kernels, async copy out; results per stream.
//  2. A slow producer kernel on stream A, an event, cudaStreamWaitEvent on stream B, a
//     consumer kernel on B: the consumer sees every value the producer wrote.
//  3. 300 back-to-back launches of an increment kernel on one stream, then a legacy
//     default-stream kernel that doubles: launches run in order (2 * 300 per element).
//  4. cudaLaunchKernel with an argument array and cudaLaunchKernelEx with a config.
#include "kt.h"

#include <vector>

__global__ void scale_add(float *x, float a, float b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * a + b;
}

__global__ void slow_producer(int *buf, int n, int rounds)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned v = (unsigned)i;
    for (int r = 0; r < rounds; r++)
        v = v * 1103515245u + 12345u;
    buf[i] = (int)v;
}

__global__ void consumer(const int *buf, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = buf[i] ^ buf[n - 1 - i];
}

__global__ void increment(int *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1;
}

__global__ void twice(int *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= 2;
}

__global__ void affine(int *out, int a, long long b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = (int)(a * i + b);
}

int main()
{
    kt_start("streams_kernels");

    // 1
    {
        const int S = 3, n = 50000;
        cudaStream_t st[S];
        float *h[S], *d[S];
        for (int s = 0; s < S; s++) {
            CHECK_CUDA(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
            CHECK_CUDA(cudaMallocHost(&h[s], n * sizeof(float)));
            CHECK_CUDA(cudaMalloc(&d[s], n * sizeof(float)));
            for (int i = 0; i < n; i++)
                h[s][i] = (float)(i % 1000) + s;
        }
        for (int s = 0; s < S; s++) {
            CHECK_CUDA(cudaMemcpyAsync(d[s], h[s], n * sizeof(float), cudaMemcpyHostToDevice, st[s]));
            scale_add<<<(n + 255) / 256, 256, 0, st[s]>>>(d[s], 2.0f, 1.0f, n);
            scale_add<<<(n + 255) / 256, 256, 0, st[s]>>>(d[s], 0.5f, (float)s, n);
            scale_add<<<(n + 255) / 256, 256, 0, st[s]>>>(d[s], 4.0f, -3.0f, n);
            CHECK_CUDA(cudaGetLastError());
            CHECK_CUDA(cudaMemcpyAsync(h[s], d[s], n * sizeof(float), cudaMemcpyDeviceToHost, st[s]));
        }
        for (int s = 0; s < S; s++) {
            CHECK_CUDA(cudaStreamSynchronize(st[s]));
            char what[64];
            snprintf(what, sizeof what, "stream %d: ((x*2+1)*0.5+s)*4-3", s);
            for (int i = 0; i < n; i++) {
                float x = (float)(i % 1000) + s;
                kt_check_f32_exact(what, i, h[s][i], ((x * 2.0f + 1.0f) * 0.5f + s) * 4.0f - 3.0f);
            }
            CHECK_CUDA(cudaFreeHost(h[s]));
            CHECK_CUDA(cudaFree(d[s]));
            CHECK_CUDA(cudaStreamDestroy(st[s]));
        }
    }

    // 2
    {
        const int n = 8192, rounds = 200;
        cudaStream_t a, b;
        cudaEvent_t ev;
        CHECK_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
        CHECK_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
        CHECK_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        int *buf, *out;
        CHECK_CUDA(cudaMalloc(&buf, n * sizeof(int)));
        CHECK_CUDA(cudaMalloc(&out, n * sizeof(int)));
        CHECK_CUDA(cudaMemsetAsync(buf, 0, n * sizeof(int), a));
        slow_producer<<<n / 128, 128, 0, a>>>(buf, n, rounds);
        CHECK_CUDA(cudaEventRecord(ev, a));
        CHECK_CUDA(cudaStreamWaitEvent(b, ev, 0));
        consumer<<<n / 128, 128, 0, b>>>(buf, out, n);
        CHECK_CUDA(cudaGetLastError());
        std::vector<int> h(n);
        CHECK_CUDA(cudaMemcpyAsync(h.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost, b));
        CHECK_CUDA(cudaStreamSynchronize(b));
        std::vector<int> p(n);
        for (int i = 0; i < n; i++) {
            unsigned v = (unsigned)i;
            for (int r = 0; r < rounds; r++)
                v = v * 1103515245u + 12345u;
            p[i] = (int)v;
        }
        for (int i = 0; i < n; i++)
            kt_check_i64("consumer after cudaStreamWaitEvent", i, h[i], p[i] ^ p[n - 1 - i]);
        CHECK_CUDA(cudaFree(buf));
        CHECK_CUDA(cudaFree(out));
        CHECK_CUDA(cudaEventDestroy(ev));
        CHECK_CUDA(cudaStreamDestroy(a));
        CHECK_CUDA(cudaStreamDestroy(b));
    }

    // 3
    {
        const int n = 1000, launches = 300;
        cudaStream_t s;
        CHECK_CUDA(cudaStreamCreate(&s));  // blocking: the legacy stream waits for it
        int *x;
        CHECK_CUDA(cudaMalloc(&x, n * sizeof(int)));
        CHECK_CUDA(cudaMemset(x, 0, n * sizeof(int)));
        for (int k = 0; k < launches; k++)
            increment<<<(n + 127) / 128, 128, 0, s>>>(x, n);
        twice<<<(n + 127) / 128, 128>>>(x, n);
        CHECK_CUDA(cudaGetLastError());
        std::vector<int> h(n);
        CHECK_CUDA(cudaMemcpy(h.data(), x, n * sizeof(int), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++)
            kt_check_i64("300 increments then a default-stream doubling", i, h[i], 2 * launches);
        CHECK_CUDA(cudaFree(x));
        CHECK_CUDA(cudaStreamDestroy(s));
    }

    // 4
    {
        const int n = 777;
        int *out;
        CHECK_CUDA(cudaMalloc(&out, n * sizeof(int)));
        int a = -3;
        long long b = 5000000000LL;
        int nn = n;
        void *args[] = {&out, &a, &b, &nn};
        CHECK_CUDA(cudaLaunchKernel((const void *)affine, dim3((n + 63) / 64), dim3(64), args, 0, 0));
        std::vector<int> h(n);
        CHECK_CUDA(cudaMemcpy(h.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++)
            kt_check_i64("cudaLaunchKernel(affine)", i, h[i], (int)(a * i + b));

        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3((n + 31) / 32);
        cfg.blockDim = dim3(32);
        cfg.dynamicSmemBytes = 0;
        cfg.stream = 0;
        CHECK_CUDA(cudaLaunchKernelEx(&cfg, affine, out, 7, -1000000000000LL, n));
        CHECK_CUDA(cudaMemcpy(h.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++)
            kt_check_i64("cudaLaunchKernelEx(affine)", i, h[i], (int)(7LL * i - 1000000000000LL));
        CHECK_CUDA(cudaFree(out));
    }

    kt_pass();
    return 0;
}
