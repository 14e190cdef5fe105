// A tenant's view of device memory, through cudart: the device reports the tenant's quota
// as its total memory, cudaMemGetInfo the part of it still free; allocations succeed up to
// exactly that and fail one byte beyond, on every allocation path.
//
//   tenant_quota check QUOTA_BYTES    the checks above (exit 0 when all hold)
//   tenant_quota hold BYTES           allocates BYTES, prints HOLDING, sleeps until killed
//   tenant_quota init                 cudaFree(0) only: prints the error if it fails
#include <unistd.h>

#include <vector>

#include "cr_test.h"

static size_t free_now()
{
    size_t free_bytes, total;
    CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
    return free_bytes;
}

static int check(size_t quota)
{
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    CHECK(prop.totalGlobalMem == quota, "total memory %zu, quota %zu", prop.totalGlobalMem,
          quota);
    size_t free_bytes, total;
    CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
    CHECK(total == quota, "cudaMemGetInfo total %zu, quota %zu", total, quota);
    CHECK(free_bytes <= quota && free_bytes > quota / 2, "free %zu of %zu", free_bytes, quota);

    // exactly what is free, in two allocations: both succeed, one byte more fails
    void *a, *b, *c;
    CHECK_CUDA(cudaMalloc(&a, free_bytes - 4096));
    CHECK(free_now() == 4096, "after %zu bytes, %zu free", free_bytes - 4096, free_now());
    CHECK_CUDA(cudaMalloc(&b, 4096));
    CHECK(free_now() == 0, "at the quota, %zu free", free_now());
    EXPECT_CUDA_ERROR(cudaMalloc(&c, 1), cudaErrorMemoryAllocation);
    cudaGetLastError();
    size_t pitch;
    EXPECT_CUDA_ERROR(cudaMallocPitch(&c, &pitch, 16, 16), cudaErrorMemoryAllocation);
    cudaGetLastError();
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));
    EXPECT_CUDA_ERROR(cudaMallocAsync(&c, 1, s), cudaErrorMemoryAllocation);
    cudaGetLastError();

    // freeing makes room again, on every path
    CHECK_CUDA(cudaFree(b));
    CHECK(free_now() == 4096, "after a free, %zu free", free_now());
    CHECK_CUDA(cudaMallocAsync(&c, 4096, s));
    CHECK(free_now() == 0, "a stream-ordered allocation is charged (%zu free)", free_now());
    CHECK_CUDA(cudaFreeAsync(c, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(free_now() == 4096, "and its free gives it back (%zu free)", free_now());
    CHECK_CUDA(cudaFree(a));
    CHECK(free_now() == free_bytes, "everything back: %zu free, %zu at the start", free_now(),
          free_bytes);
    CHECK_CUDA(cudaMallocPitch(&c, &pitch, 1000, 100));
    CHECK(free_now() == free_bytes - pitch * 100, "a pitched allocation is charged its pitch");
    CHECK_CUDA(cudaFree(c));
    CHECK_CUDA(cudaStreamDestroy(s));
    printf("quota of %zu bytes holds exactly\n", quota);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "check"))
        return check(strtoull(argv[2], nullptr, 10));
    if (argc == 3 && !strcmp(argv[1], "hold")) {
        void *p;
        size_t bytes = strtoull(argv[2], nullptr, 10);
        CHECK_CUDA(cudaMalloc(&p, bytes));
        CHECK_CUDA(cudaMemset(p, 1, bytes));
        CHECK_CUDA(cudaDeviceSynchronize());
        printf("HOLDING %zu\n", bytes);
        fflush(stdout);
        for (;;)
            pause();
    }
    if (argc == 2 && !strcmp(argv[1], "init")) {
        cudaError_t e = cudaFree(0);
        printf("INIT %s\n", cudaGetErrorName(e));
        return e == cudaSuccess ? 0 : 3;
    }
    fprintf(stderr, "usage: tenant_quota check QUOTA | hold BYTES | init\n");
    return 2;
}
