// unreachable (scenario unreachable: no server at CUDA_REMOTE_ADDR): cudart sees no device:
// cudaGetDeviceCount returns cudaErrorNoDevice with a count of 0 or left unchanged (cudart
// 13 leaves it), and later calls (cudaMalloc, cudaMemGetInfo, cudaSetDevice,
// cudaDeviceSynchronize) fail the same way instead of crashing or hanging; the program exits
// 0 when so. run.py checks that the stub named the address once.
#include "cr_test.h"

int main()
{
    int count = -1;
    cudaError_t e = cudaGetDeviceCount(&count);
    printf("cudaGetDeviceCount: %s, count %d\n", cudaGetErrorName(e), count);
    CHECK(e == cudaErrorNoDevice, "cudaGetDeviceCount returned %s (%d), expected "
          "cudaErrorNoDevice", cudaGetErrorName(e), (int)e);
    CHECK(count == 0 || count == -1, "device count %d (expected 0, or left unchanged)", count);

    void *p = (void *)0x1234;
    e = cudaMalloc(&p, 1024);
    printf("cudaMalloc: %s\n", cudaGetErrorName(e));
    CHECK(e == cudaErrorNoDevice, "cudaMalloc returned %s (%d), expected cudaErrorNoDevice",
          cudaGetErrorName(e), (int)e);

    size_t free_b = 1, total_b = 1;
    e = cudaMemGetInfo(&free_b, &total_b);
    CHECK(e == cudaErrorNoDevice, "cudaMemGetInfo returned %s (%d)", cudaGetErrorName(e), (int)e);
    e = cudaSetDevice(0);
    CHECK(e == cudaErrorNoDevice || e == cudaErrorInvalidDevice, "cudaSetDevice(0) returned %s",
          cudaGetErrorName(e));
    e = cudaDeviceSynchronize();
    CHECK(e == cudaErrorNoDevice, "cudaDeviceSynchronize returned %s (%d)", cudaGetErrorName(e),
          (int)e);
    int driver = -1;
    CHECK_CUDA(cudaDriverGetVersion(&driver));  // answered without a device
    printf("driver version %d\n", driver);

    printf("unreachable: all checks passed\n");
    return 0;
}
