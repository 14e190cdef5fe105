// device_props: the device as cudart sees it through the stub: one device, properties that
// make sense and agree with cudaDeviceGetAttribute and cudaMemGetInfo, driver and runtime
// versions, cudaSetDevice/cudaGetDevice, cudaErrorInvalidDevice for a bad ordinal, and
// cudaProfilerStart/Stop (cudart looks them up through cudaProfilerTypedefs.h's versions).
#include "cr_test.h"

#include <cuda_profiler_api.h>

int main()
{
    // programs bracket their timed region with these: they must succeed, as natively
    CHECK_CUDA(cudaProfilerStart());
    CHECK_CUDA(cudaProfilerStop());

    int count = -1;
    CHECK_CUDA(cudaGetDeviceCount(&count));
    CHECK(count == 1, "cudaGetDeviceCount = %d, expected 1", count);

    cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    CHECK_CUDA(cudaGetDeviceProperties(&p, 0));
    CHECK(strnlen(p.name, sizeof p.name) > 0 && strnlen(p.name, sizeof p.name) < sizeof p.name,
          "device name empty or not terminated");
    CHECK(p.major >= 7, "compute capability %d.%d", p.major, p.minor);
    CHECK(p.minor >= 0 && p.minor < 10, "minor %d", p.minor);
    CHECK(p.totalGlobalMem > 0, "totalGlobalMem 0");
    CHECK(p.warpSize == 32, "warpSize %d", p.warpSize);
    CHECK(p.maxThreadsPerBlock == 1024, "maxThreadsPerBlock %d", p.maxThreadsPerBlock);
    CHECK(p.multiProcessorCount > 0, "multiProcessorCount %d", p.multiProcessorCount);
    CHECK(p.maxThreadsDim[0] == 1024 && p.maxThreadsDim[1] == 1024 && p.maxThreadsDim[2] == 64,
          "maxThreadsDim %d %d %d", p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2]);
    CHECK(p.maxGridSize[0] == 0x7fffffff && p.maxGridSize[1] == 65535 &&
              p.maxGridSize[2] == 65535,
          "maxGridSize %d %d %d", p.maxGridSize[0], p.maxGridSize[1], p.maxGridSize[2]);
    CHECK(p.sharedMemPerBlock >= 48 * 1024, "sharedMemPerBlock %zu", p.sharedMemPerBlock);
    CHECK(p.totalConstMem == 64 * 1024, "totalConstMem %zu", p.totalConstMem);
    CHECK(p.regsPerBlock > 0, "regsPerBlock %d", p.regsPerBlock);
    printf("device 0: %s, cc %d.%d, %zu bytes, %d SMs\n", p.name, p.major, p.minor,
           p.totalGlobalMem, p.multiProcessorCount);

    struct {
        cudaDeviceAttr attr;
        int expected;
        const char *name;
    } attrs[] = {
        {cudaDevAttrComputeCapabilityMajor, p.major, "ComputeCapabilityMajor"},
        {cudaDevAttrComputeCapabilityMinor, p.minor, "ComputeCapabilityMinor"},
        {cudaDevAttrWarpSize, p.warpSize, "WarpSize"},
        {cudaDevAttrMaxThreadsPerBlock, p.maxThreadsPerBlock, "MaxThreadsPerBlock"},
        {cudaDevAttrMultiProcessorCount, p.multiProcessorCount, "MultiProcessorCount"},
        {cudaDevAttrMaxBlockDimX, p.maxThreadsDim[0], "MaxBlockDimX"},
        {cudaDevAttrMaxBlockDimY, p.maxThreadsDim[1], "MaxBlockDimY"},
        {cudaDevAttrMaxBlockDimZ, p.maxThreadsDim[2], "MaxBlockDimZ"},
        {cudaDevAttrMaxGridDimX, p.maxGridSize[0], "MaxGridDimX"},
        {cudaDevAttrMaxGridDimY, p.maxGridSize[1], "MaxGridDimY"},
        {cudaDevAttrMaxGridDimZ, p.maxGridSize[2], "MaxGridDimZ"},
        {cudaDevAttrMaxSharedMemoryPerBlock, (int)p.sharedMemPerBlock, "MaxSharedMemoryPerBlock"},
        {cudaDevAttrTotalConstantMemory, (int)p.totalConstMem, "TotalConstantMemory"},
        {cudaDevAttrMaxRegistersPerBlock, p.regsPerBlock, "MaxRegistersPerBlock"},
        {cudaDevAttrL2CacheSize, p.l2CacheSize, "L2CacheSize"},
        {cudaDevAttrMaxThreadsPerMultiProcessor, p.maxThreadsPerMultiProcessor,
         "MaxThreadsPerMultiProcessor"},
        {cudaDevAttrGlobalMemoryBusWidth, p.memoryBusWidth, "GlobalMemoryBusWidth"},
        {cudaDevAttrPciBusId, p.pciBusID, "PciBusId"},
        {cudaDevAttrPciDeviceId, p.pciDeviceID, "PciDeviceId"},
        {cudaDevAttrConcurrentKernels, p.concurrentKernels, "ConcurrentKernels"},
        {cudaDevAttrUnifiedAddressing, p.unifiedAddressing, "UnifiedAddressing"},
    };
    for (auto &a : attrs) {
        int v = -12345;
        CHECK_CUDA(cudaDeviceGetAttribute(&v, a.attr, 0));
        CHECK(v == a.expected, "cudaDevAttr%s = %d, props say %d", a.name, v, a.expected);
    }
    CHECK(p.unifiedAddressing == 1, "unifiedAddressing %d", p.unifiedAddressing);

    size_t free_b = 0, total_b = 0;
    CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
    CHECK(free_b <= total_b, "free %zu > total %zu", free_b, total_b);
    CHECK(free_b > 0, "no free memory");
    CHECK(total_b == p.totalGlobalMem, "cudaMemGetInfo total %zu, totalGlobalMem %zu", total_b,
          p.totalGlobalMem);

    int driver = 0, runtime = 0;
    CHECK_CUDA(cudaDriverGetVersion(&driver));
    CHECK(driver >= 13000, "driver version %d", driver);
    CHECK_CUDA(cudaRuntimeGetVersion(&runtime));
    CHECK(runtime == CUDART_VERSION, "runtime version %d, built with %d", runtime,
          CUDART_VERSION);
    CHECK(driver >= runtime, "driver %d older than runtime %d", driver, runtime);
    printf("driver %d, runtime %d\n", driver, runtime);

    int dev = -1;
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaGetDevice(&dev));
    CHECK(dev == 0, "cudaGetDevice = %d", dev);

    cudaDeviceProp q;
    EXPECT_CUDA_ERROR(cudaGetDeviceProperties(&q, 1), cudaErrorInvalidDevice);
    EXPECT_CUDA_ERROR(cudaSetDevice(1), cudaErrorInvalidDevice);
    EXPECT_CUDA_ERROR(cudaSetDevice(-1), cudaErrorInvalidDevice);
    int v;
    EXPECT_CUDA_ERROR(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 1), cudaErrorInvalidDevice);
    CHECK_CUDA(cudaGetDevice(&dev));
    CHECK(dev == 0, "cudaGetDevice after failed cudaSetDevice = %d", dev);
    // The failed calls above recorded the last error (not sticky): read once, then clear.
    EXPECT_CUDA_ERROR(cudaGetLastError(), cudaErrorInvalidDevice);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());

    printf("device_props: all checks passed\n");
    return 0;
}
