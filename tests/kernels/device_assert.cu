// device_assert: assert(x == 0) fails in exactly one thread of one block (built without
// -DNDEBUG): cudaDeviceSynchronize must return cudaErrorAssert, and the error is sticky (the
// next cudaMalloc fails with it too). The program exits 0. The assertion message the device
// may print is not checked.
#include "kt.h"

#include <cassert>

__global__ void check_zero(const int *x, int n, int *seen)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        assert(x[i] == 0);
        atomicAdd(seen, 1);
    }
}

int main()
{
    kt_start("device_assert");
    const int n = 2048;
    int *x, *seen;
    CHECK_CUDA(cudaMalloc(&x, n * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&seen, sizeof(int)));
    CHECK_CUDA(cudaMemset(x, 0, n * sizeof(int)));
    CHECK_CUDA(cudaMemset(seen, 0, sizeof(int)));

    // all zeros: no assertion fails
    check_zero<<<n / 256, 256>>>(x, n, seen);
    KT_SYNC();
    int count = 0;
    CHECK_CUDA(cudaMemcpy(&count, seen, sizeof count, cudaMemcpyDeviceToHost));
    kt_check_i64("threads past the assertion", 0, count, n);

    const int one = 1;
    CHECK_CUDA(cudaMemcpy(x + 1234, &one, sizeof one, cudaMemcpyHostToDevice));
    check_zero<<<n / 256, 256>>>(x, n, seen);
    cudaError_t launch = cudaGetLastError();
    CHECK(launch == cudaSuccess || launch == cudaErrorAssert, "launch returned %s",
          cudaGetErrorName(launch));
    EXPECT_CUDA_ERROR(cudaDeviceSynchronize(), cudaErrorAssert);
    int *other = nullptr;
    EXPECT_CUDA_ERROR(cudaMalloc(&other, 1024), cudaErrorAssert);
    printf("device_assert: all checks passed\n");
    return 0;
}
