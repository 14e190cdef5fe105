// misaligned: a kernel loads a 4-byte int from an address that is 1 modulo 4 inside a live
// allocation. cudaDeviceSynchronize must return cudaErrorMisalignedAddress, which is sticky
// (the next cudaMalloc fails with it too). The program exits 0; run.py then runs vector_add
// against the same server.
#include "kt.h"

__global__ void load_at(const char *p, size_t offset, int *out)
{
    *out = *(const volatile int *)(p + offset);
}

int main()
{
    kt_start("misaligned");
    char *buf;
    int *out, h = 0;
    CHECK_CUDA(cudaMalloc(&buf, 4096));
    CHECK_CUDA(cudaMalloc(&out, sizeof(int)));
    CHECK_CUDA(cudaMemset(buf, 0x11, 4096));
    load_at<<<1, 1>>>(buf, 8, out);  // aligned: fine
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(&h, out, sizeof h, cudaMemcpyDeviceToHost));
    kt_check_i64("aligned load", 0, h, 0x11111111);

    load_at<<<1, 1>>>(buf, 9, out);
    cudaError_t launch = cudaGetLastError();
    CHECK(launch == cudaSuccess || launch == cudaErrorMisalignedAddress, "launch returned %s",
          cudaGetErrorName(launch));
    EXPECT_CUDA_ERROR(cudaDeviceSynchronize(), cudaErrorMisalignedAddress);
    void *other = nullptr;
    EXPECT_CUDA_ERROR(cudaMalloc(&other, 1024), cudaErrorMisalignedAddress);
    printf("misaligned: all checks passed\n");
    return 0;
}
