// The compute capability the emulated device reports (cuda-remoted --emu-compute-capability,
// or CUDA_REMOTE_EMU_COMPUTE_CAPABILITY for the emulated driver library), as a program sees
// it through the stub: the properties, an attribute that follows from it, and whether the
// program's own kernel can run, which depends on the PTX it was built with.
//
//   cc_probe X.Y CLUSTER runs|no-image
//
// X.Y is the capability the device must report and CLUSTER its cudaDevAttrClusterLaunch
// (1 from 9.0 on). `runs`: the kernel computes its result. `no-image`: the device has no
// code for this build, so the launch fails with cudaErrorNoKernelImageForDevice (cudart
// reports that from its first call that loads the program's code, which depends on the
// loading mode the stub reports, so earlier calls may fail with it too, never otherwise).
// Exits 0 when all holds, 1 at the first difference.
#include <cstdlib>

#include "../integration/cr_test.h"

__global__ void add_index(int *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 3 * i + 1;
}

int main(int argc, char **argv)
{
    int major = 0, minor = 0, cluster = -1;
    CHECK(argc == 4 && sscanf(argv[1], "%d.%d", &major, &minor) == 2 &&
              sscanf(argv[2], "%d", &cluster) == 1,
          "usage: cc_probe X.Y CLUSTER runs|no-image");
    const bool runs = strcmp(argv[3], "runs") == 0;
    CHECK(runs || strcmp(argv[3], "no-image") == 0, "expected runs or no-image, got %s",
          argv[3]);

    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, 0);
    if (e == cudaSuccess) {
        CHECK(prop.major == major && prop.minor == minor, "the device reports %d.%d, not %d.%d",
              prop.major, prop.minor, major, minor);
        int got = -1;
        CHECK_CUDA(cudaDeviceGetAttribute(&got, cudaDevAttrClusterLaunch, 0));
        CHECK(got == cluster, "cudaDevAttrClusterLaunch is %d, expected %d", got, cluster);
        printf("device reports %d.%d, cluster launch %d\n", prop.major, prop.minor, got);
    } else {
        CHECK(!runs && e == cudaErrorNoKernelImageForDevice,
              "cudaGetDeviceProperties failed: %s", cudaGetErrorName(e));
        printf("cudaGetDeviceProperties: %s (cudart loads the code at its first call)\n",
               cudaGetErrorName(e));
        return 0;
    }

    const int n = 1000;
    int host[n], *dev = nullptr;
    for (int i = 0; i < n; i++) host[i] = -i;
    CHECK_CUDA(cudaMalloc(&dev, sizeof host));
    CHECK_CUDA(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
    add_index<<<(n + 127) / 128, 128>>>(dev, n);
    cudaError_t launched = cudaGetLastError();
    cudaError_t synced = cudaDeviceSynchronize();
    if (!runs) {
        CHECK(launched == cudaErrorNoKernelImageForDevice ||
                  synced == cudaErrorNoKernelImageForDevice,
              "the launch gave %s and the synchronization %s, expected "
              "cudaErrorNoKernelImageForDevice",
              cudaGetErrorName(launched), cudaGetErrorName(synced));
        printf("the kernel has no code for this device: %s\n",
               cudaGetErrorName(launched != cudaSuccess ? launched : synced));
        return 0;
    }
    CHECK(launched == cudaSuccess && synced == cudaSuccess, "the launch gave %s, then %s",
          cudaGetErrorName(launched), cudaGetErrorName(synced));
    CHECK_CUDA(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        CHECK(host[i] == 2 * i + 1, "element %d is %d, expected %d", i, host[i], 2 * i + 1);
    CHECK_CUDA(cudaFree(dev));
    printf("the kernel ran and computed its result\n");
    return 0;
}
