// out_of_bounds: a kernel stores far outside any allocation (1 TiB past a 4 KiB buffer).
// cudaDeviceSynchronize must return cudaErrorIllegalAddress; the error is sticky: the next
// cudaMalloc and cudaMemcpy fail with it too (as on a GPU, until the process ends). The
// program then exits 0; run.py runs vector_add against the same server afterwards.
#include "kt.h"

__global__ void fill(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = i;
}

__global__ void stray_store(int *p, size_t offset, int which)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == which)
        *(volatile int *)((char *)p + offset) = 0xbad;
}

int main()
{
    kt_start("out_of_bounds");
    int *buf;
    CHECK_CUDA(cudaMalloc(&buf, 4096));
    fill<<<4, 256>>>(buf, 1024);
    KT_SYNC();
    int h[1024];
    CHECK_CUDA(cudaMemcpy(h, buf, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 1024; i++)
        kt_check_i64("fill before the fault", i, h[i], i);

    stray_store<<<8, 128>>>(buf, (size_t)1 << 40, 517);
    cudaError_t launch = cudaGetLastError();
    CHECK(launch == cudaSuccess || launch == cudaErrorIllegalAddress,
          "launch returned %s", cudaGetErrorName(launch));
    EXPECT_CUDA_ERROR(cudaDeviceSynchronize(), cudaErrorIllegalAddress);

    // sticky: later calls keep failing
    int *other = nullptr;
    EXPECT_CUDA_ERROR(cudaMalloc(&other, 1024), cudaErrorIllegalAddress);
    EXPECT_CUDA_ERROR(cudaMemcpy(h, buf, sizeof h, cudaMemcpyDeviceToHost),
                      cudaErrorIllegalAddress);
    EXPECT_CUDA_ERROR(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    printf("out_of_bounds: all checks passed\n");
    return 0;
}
