// reset: cudaDeviceReset in the middle of a program: before it an allocation, a launch and a
// modified __device__ variable; after it a pointer from before is no longer valid for
// cudaFree, the variable has its initial value again (module loaded anew), and new
// allocations, copies and the same kernel (announced both times) work. A kernel's attribute
// set before is set again after (to the same value, which the stub may answer itself only
// while no reset came between) and lets the kernel launch.
#include "cr_test.h"

#include <vector>

__device__ int generation = 5;

__global__ void scale_kernel(int *data, int n, int factor)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        data[i] = data[i] * factor + generation;
}

// reverses a block's values through dynamic shared memory, of which it is given 64 KiB:
// more than a kernel may have without its attribute set
__global__ void reverse_kernel(int *out)
{
    extern __shared__ int buf[];
    buf[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

static const int big_shared = 64 << 10;

static int max_dynamic_shared(void)
{
    cudaFuncAttributes a;
    CHECK_CUDA(cudaFuncGetAttributes(&a, reverse_kernel));
    return a.maxDynamicSharedSizeBytes;
}

static void reverse_once(bool run, const char *when)
{
    CHECK_CUDA(cudaFuncSetAttribute(reverse_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    big_shared));
    CHECK(max_dynamic_shared() == big_shared, "%s: max dynamic shared memory %d, set %d", when,
          max_dynamic_shared(), big_shared);
    int *d, back[64];
    CHECK_CUDA(cudaMalloc(&d, sizeof back));
    reverse_kernel<<<1, 64, big_shared>>>(d);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
    for (int i = 0; run && i < 64; i++)
        CHECK(back[i] == 63 - i, "%s: reversed element %d is %d", when, i, back[i]);
    CHECK_CUDA(cudaFree(d));
}

static void run_once(bool run, int n, int factor, int gen, const char *when)
{
    std::vector<int> h(n), back(n);
    for (int i = 0; i < n; i++)
        h[i] = i - 500;
    int *d;
    CHECK_CUDA(cudaMalloc(&d, n * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(d, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    unsigned blocks = (n + 255) / 256;
    scale_kernel<<<blocks, 256>>>(d, n, factor);
    CHECK_CUDA(cudaGetLastError());
    unsigned char p[16] = {};
    memcpy(p, &d, 8);
    memcpy(p + 8, &n, 4);
    memcpy(p + 12, &factor, 4);
    expect_launch("scale_kernel", dim3(blocks), dim3(256), 0, p, sizeof p);
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(back.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        int want = run ? h[i] * factor + gen : h[i];
        CHECK(back[i] == want, "%s: element %d is %d, expected %d", when, i, back[i], want);
    }
    CHECK_CUDA(cudaFree(d));
}

int main()
{
    bool run = kernels_execute();

    run_once(run, 3000, 3, 5, "before the reset");
    reverse_once(run, "before the reset");
    int *old;
    CHECK_CUDA(cudaMalloc(&old, 1 << 20));
    CHECK_CUDA(cudaMemset(old, 0x11, 1 << 20));
    int g = 99;
    CHECK_CUDA(cudaMemcpyToSymbol(generation, &g, sizeof g));
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));
    CHECK_CUDA(cudaMemsetAsync(old, 0x22, 1 << 20, s));  // work queued at the reset

    CHECK_CUDA(cudaDeviceReset());

    // the allocation from before is gone (checked before anything new is allocated)
    cudaError_t e = cudaFree(old);
    CHECK(e != cudaSuccess, "cudaFree of a pointer from before cudaDeviceReset succeeded");
    printf("cudaFree of a pointer from before the reset: %s\n", cudaGetErrorName(e));
    (void)cudaGetLastError();

    g = -1;
    CHECK_CUDA(cudaMemcpyFromSymbol(&g, generation, sizeof g));
    CHECK(g == 5, "__device__ variable after the reset is %d, initializer says 5", g);

    size_t free_b, total_b;
    CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
    CHECK(free_b <= total_b && free_b > 0, "cudaMemGetInfo after the reset: %zu of %zu", free_b,
          total_b);

    run_once(run, 5000, -2, 5, "after the reset");
    reverse_once(run, "after the reset");
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaGetLastError());
    printf("reset: all checks passed\n");
    return 0;
}
