// Helpers for the integration programs: each program checks its own results and exits
// non-zero on the first failed check; launches it wants verified byte for byte are
// announced with expect_launch() and compared by run.py with the server's launch trace.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <cuda_runtime.h>

#define CHECK_CUDA(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,              \
                    cudaGetErrorString(e_), (int)e_);                                              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define EXPECT_CUDA_ERROR(call, expected)                                                          \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != (expected)) {                                                                    \
            fprintf(stderr, "%s:%d: %s returned %s (%d), expected %s (%d)\n", __FILE__, __LINE__,  \
                    #call, cudaGetErrorName(e_), (int)e_, cudaGetErrorName(expected),              \
                    (int)(expected));                                                              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// Driver-API calls, for the programs that include <cuda.h> before this header.
#ifdef __cuda_cuda_h__
#define CHECK_CU(call)                                                                             \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        CHECK(r_ == CUDA_SUCCESS, "%s returned %d", #call, (int)r_);                               \
    } while (0)
#define EXPECT_CU(call, want)                                                                      \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        CHECK(r_ == (want), "%s returned %d, expected %d", #call, (int)r_, (int)(want));           \
    } while (0)
#endif

// Announces a launch that the server's trace must contain (in announcement order).
// `kernel` is a substring of the mangled name; params are the bytes the kernel sees.
static inline void expect_launch(const char *kernel, dim3 grid, dim3 block, unsigned shared,
                                 const void *params, size_t size)
{
    std::string hex;
    char b[3];
    for (size_t i = 0; i < size; i++) {
        snprintf(b, sizeof b, "%02x", ((const unsigned char *)params)[i]);
        hex += b;
    }
    printf("CR_EXPECT_LAUNCH {\"kernel\":\"%s\",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],"
           "\"shared\":%u,\"params\":\"%s\"}\n",
           kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared, hex.c_str());
    fflush(stdout);
}

__global__ void cr_probe_kernel(int *flag)
{
    *flag = 0x600d;
}

// Whether kernels really execute (a GPU, or an emulated device that runs them): results
// of kernels are checked only then.
static inline bool kernels_execute()
{
    int *flag, value = 0;
    CHECK_CUDA(cudaMalloc(&flag, sizeof(int)));
    CHECK_CUDA(cudaMemset(flag, 0, sizeof(int)));
    cr_probe_kernel<<<1, 1>>>(flag);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(&value, flag, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaFree(flag));
    return value == 0x600d;
}
