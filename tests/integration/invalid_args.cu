// invalid_args: invalid arguments get CUDA's error codes from the call that made them (not a
// crash, and not from some later call), the error is recorded as the last error once, and it
// is not sticky: the next synchronization succeeds and normal work goes on. Covers NULL
// out-pointers, copies, memsets and frees on addresses that were never allocated, launches
// with a zero or oversized grid/block (cudaErrorInvalidConfiguration), cudaFree(NULL) and
// zero-byte copies (success), bad device ordinals, a bad copy direction and a NULL event,
// and a launch whose parameter buffer is larger than any request may carry (refused by the
// stub before it is sent, with CUDA_ERROR_INVALID_VALUE; the connection lives on).
#include "cr_test.h"

#include <cuda.h>

#include <cstdint>
#include <vector>

__global__ void tiny_kernel(int *p, int v)
{
    p[threadIdx.x] = v;
}

// `call` must return `expected`; then the last error is that error exactly once, and a
// synchronization that follows is clean.
#define EXPECT_ERR(call, expected)                                                          \
    do {                                                                                     \
        EXPECT_CUDA_ERROR(call, expected);                                                   \
        EXPECT_CUDA_ERROR(cudaGetLastError(), expected);                                     \
        EXPECT_CUDA_ERROR(cudaGetLastError(), cudaSuccess);                                  \
        EXPECT_CUDA_ERROR(cudaDeviceSynchronize(), cudaSuccess);                             \
    } while (0)

// A <<<>>> launch that must be refused with `expected`.
#define EXPECT_LAUNCH_ERR(grid, block, expected)                                            \
    do {                                                                                     \
        tiny_kernel<<<grid, block>>>(good, 1);                                               \
        EXPECT_CUDA_ERROR(cudaGetLastError(), expected);                                     \
        EXPECT_CUDA_ERROR(cudaGetLastError(), cudaSuccess);                                  \
        EXPECT_CUDA_ERROR(cudaDeviceSynchronize(), cudaSuccess);                             \
    } while (0)

int main()
{
    int *good;
    CHECK_CUDA(cudaMalloc(&good, 4096));
    CHECK_CUDA(cudaMemset(good, 0, 4096));
    // an address inside the device's range that no allocation covers
    void *bogus = (char *)good + (512u << 20);
    static char host[4096];

    EXPECT_ERR(cudaEventCreate(nullptr), cudaErrorInvalidValue);
    EXPECT_ERR(cudaStreamCreate(nullptr), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMalloc(nullptr, 8), cudaErrorInvalidValue);
    void *huge = nullptr;
    EXPECT_ERR(cudaMalloc(&huge, (size_t)1 << 40), cudaErrorMemoryAllocation);

    EXPECT_ERR(cudaMemcpy(bogus, host, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(host, bogus, 64, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(bogus, good, 64, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemset(bogus, 0, 64), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFree(bogus), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFree((char *)good + 16), cudaErrorInvalidValue);

    // cudart 13 hands cuLaunchKernel's result through unchanged, and the driver answers an
    // impossible configuration with CUDA_ERROR_INVALID_VALUE (as probed on a 590 driver by
    // the LUPINE project); older runtimes checked themselves and said
    // cudaErrorInvalidConfiguration. To be confirmed on a GPU by tests/gpu/run.sh.
    EXPECT_LAUNCH_ERR(dim3(1), dim3(0, 1, 1), cudaErrorInvalidValue);
    EXPECT_LAUNCH_ERR(dim3(1), dim3(2048), cudaErrorInvalidValue);
    EXPECT_LAUNCH_ERR(dim3(1), dim3(32, 32, 2), cudaErrorInvalidValue);
    EXPECT_LAUNCH_ERR(dim3(0), dim3(32), cudaErrorInvalidValue);
    EXPECT_LAUNCH_ERR(dim3(1, 70000), dim3(32), cudaErrorInvalidValue);

    EXPECT_ERR(cudaFree(nullptr), cudaSuccess);
    EXPECT_ERR(cudaMemcpy(good, host, 0, cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_ERR(cudaMemcpy(host, good, 0, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_ERR(cudaSetDevice(5), cudaErrorInvalidDevice);
    int dev = -1;
    CHECK_CUDA(cudaGetDevice(&dev));
    CHECK(dev == 0, "current device %d after cudaSetDevice(5)", dev);
    EXPECT_ERR(cudaMemcpy(good, host, 8, (cudaMemcpyKind)7), cudaErrorInvalidMemcpyDirection);
    EXPECT_ERR(cudaEventRecord(nullptr, 0), cudaErrorInvalidResourceHandle);

    // cuLaunchKernel's `extra` buffer may be any size the caller says; past what a launch
    // request may carry (CR_MAX_LAUNCH_PARAM_BYTES, 1 MiB) the server would drop the
    // connection, so the stub refuses it first
    {
        typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, unsigned, unsigned, CUstream, void **, void **);
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000,
                                                    cudaEnableDefault, &found));
        CHECK(fn && found == cudaDriverEntryPointSuccess, "no cuLaunchKernel");
        cudaFunction_t f;
        CHECK_CUDA(cudaGetFuncBySymbol(&f, (const void *)tiny_kernel));
        std::vector<unsigned char> big((size_t)2 << 20);
        size_t size = big.size();
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, big.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                         &size, CU_LAUNCH_PARAM_END};
        CUresult r = ((launch_fn)fn)((CUfunction)f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra);
        CHECK(r == CUDA_ERROR_INVALID_VALUE, "a 2 MiB parameter buffer: %d", (int)r);
        CHECK_CUDA(cudaDeviceSynchronize());
    }

    // normal work still succeeds
    const int n = 1000;
    std::vector<int> in(n), out(n);
    for (int i = 0; i < n; i++)
        in[i] = i * 3 + 1;
    int *d;
    CHECK_CUDA(cudaMalloc(&d, n * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(d, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(out.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(in == out, "round trip after the errors differs");
    int v = 7;
    tiny_kernel<<<1, 64>>>(good, v);
    CHECK_CUDA(cudaGetLastError());
    unsigned char p[12] = {};
    memcpy(p, &good, 8);
    memcpy(p + 8, &v, 4);
    expect_launch("tiny_kernel", dim3(1), dim3(64), 0, p, sizeof p);
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaFree(d));
    CHECK_CUDA(cudaFree(good));
    CHECK_CUDA(cudaGetLastError());
    printf("invalid_args: all checks passed\n");
    return 0;
}
