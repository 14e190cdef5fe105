/* Emulated device: configuration, cuInit, device attributes, the context, and that every
 * declared cr_emu_* function exists with the driver's signature. */
#include "emu_test.h"

/* Taking the address of every function in the list fails to link if one is missing; the
 * declarations in emu.h (__typeof__ of the driver's) make a wrong signature a compile error. */
#define ADDRESS_OF(sym) (void (*)(void)) cr_emu_##sym,
static void (*const all_functions[])(void) = {CR_EMU_FUNCTIONS(ADDRESS_OF)};

static void *other_thread(void *arg)
{
    CUdeviceptr p;
    CUcontext cur = (CUcontext)1;
    int *rc = arg;
    rc[0] = cr_emu_cuMemAlloc_v2(&p, 16); /* no current context on this thread */
    rc[1] = cr_emu_cuCtxGetCurrent(&cur);
    rc[2] = cur == NULL;
    return NULL;
}

int main(void)
{
    int v;
    CUdevice dev;
    CUdeviceptr p;
    uint64_t base, size;

    CHECK_EQ_INT(sizeof all_functions / sizeof all_functions[0], 194);
    for (size_t i = 0; i < sizeof all_functions / sizeof all_functions[0]; i++)
        CHECK(all_functions[i] != NULL);

    /* before cuInit */
    CHECK_CU(cr_emu_cuDeviceGetCount(&v), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_CU(cr_emu_cuDeviceGet(&dev, 0), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_CU(cr_emu_cuMemAlloc_v2(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_OK(cr_emu_cuDriverGetVersion(&v));
    CHECK_EQ_INT(v, 13000);
    CHECK_CU(cr_emu_cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);

    /* configuration: defaults, then checks, then our own */
    cr_emu_device_window(&base, &size);
    CHECK_EQ_U64(base, TEST_VA_BASE);
    /* the memory, then the region virtual-memory reservations come from (4 times as big) */
    CHECK(size >= (10ull << 20) && size <= (80ull << 30) && size % (10ull << 20) == 0);
    cr_emu_config_t bad = {64 << 20, 0x600000001000ull, NULL}; /* not 2 MiB aligned */
    CHECK_EQ_INT(cr_emu_configure(&bad), CR_EINVAL);
    cr_emu_config_t high = {64 << 20, 0x7ffffff00000ull, NULL}; /* ends past user space */
    CHECK_EQ_INT(cr_emu_configure(&high), CR_EINVAL);
    CHECK_EQ_INT(cr_emu_configure(NULL), CR_EINVAL);
    cr_emu_config_t cfg = {100 << 20, TEST_VA_BASE, NULL}; /* rounded up to 2 MiB */
    CHECK_EQ_INT(cr_emu_configure(&cfg), 0);
    cr_emu_device_window(&base, &size);
    CHECK_EQ_U64(base, TEST_VA_BASE);
    CHECK_EQ_U64(size, 5 * (100ull << 20));

    CHECK_CU(cr_emu_cuInit(1), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuInit(0));
    CHECK_OK(cr_emu_cuInit(0)); /* twice is fine */
    CHECK_EQ_INT(cr_emu_configure(&cfg), CR_EBUSY);

    /* device */
    CHECK_OK(cr_emu_cuDeviceGetCount(&v));
    CHECK_EQ_INT(v, 1);
    CHECK_OK(cr_emu_cuDeviceGet(&dev, 0));
    CHECK_EQ_INT(dev, 0);
    CHECK_CU(cr_emu_cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
    CHECK_CU(cr_emu_cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    char name[256];
    CHECK_OK(cr_emu_cuDeviceGetName(name, sizeof name, 0));
    CHECK_EQ_STR(name, "cuda-remote emulated device (emu)");
    CHECK_OK(cr_emu_cuDeviceGetName(name, 5, 0));
    CHECK_EQ_STR(name, "cuda");
    CHECK_CU(cr_emu_cuDeviceGetName(name, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuDeviceGetName(name, sizeof name, 1), CUDA_ERROR_INVALID_DEVICE);
    size_t total;
    CHECK_OK(cr_emu_cuDeviceTotalMem_v2(&total, 0));
    CHECK_EQ_U64(total, 100ull << 20);

    /* every attribute of the enum answers; numbers outside it do not */
    for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
        v = -12345;
        CHECK_OK(cr_emu_cuDeviceGetAttribute(&v, (CUdevice_attribute)a, 0));
        CHECK(v != -12345);
    }
    CHECK_CU(cr_emu_cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuDeviceGetAttribute(&v, (CUdevice_attribute)-1, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1),
             CUDA_ERROR_INVALID_DEVICE);
    static const struct {
        CUdevice_attribute a;
        int v;
    } expect[] = {
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
        {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472},
        {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
        {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
        {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0},
        {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1},
        {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 2},
        {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0},
        {CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0x1e},
        {CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0},
        {CU_DEVICE_ATTRIBUTE_TCC_DRIVER, 0},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT},
        {CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1},
        {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32},
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        CHECK_OK(cr_emu_cuDeviceGetAttribute(&v, expect[i].a, 0));
        CHECK_EQ_INT(v, expect[i].v);
    }
    CHECK_OK(cr_emu_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0));
    CHECK(v > 1000000);
    CHECK_OK(cr_emu_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 0));
    CHECK(v >= 1 << 20);
    int major, minor;
    CHECK_OK(cr_emu_cuDeviceComputeCapability(&major, &minor, 0));
    CHECK_EQ_INT(major * 10 + minor, 90);
    CUdevprop prop;
    CHECK_OK(cr_emu_cuDeviceGetProperties(&prop, 0));
    CHECK_EQ_INT(prop.maxThreadsPerBlock, 1024);
    CHECK_EQ_INT(prop.SIMDWidth, 32);

    CUuuid u1, u2;
    CHECK_OK(cr_emu_cuDeviceGetUuid_v2(&u1, 0));
    CHECK_OK(cr_emu_cuDeviceGetUuid(&u2, 0));
    CHECK_EQ_MEM(u1.bytes, u2.bytes, 16);
    CHECK_EQ_MEM(u1.bytes, "cr-emu", 6);
    char bus[32];
    CHECK_OK(cr_emu_cuDeviceGetPCIBusId(bus, sizeof bus, 0));
    CHECK_EQ_STR(bus, "0000:1e:00.0");
    CHECK_OK(cr_emu_cuDeviceGetByPCIBusId(&dev, "0000:1e:00.0"));
    CHECK_EQ_INT(dev, 0);
    CHECK_CU(cr_emu_cuDeviceGetByPCIBusId(&dev, "0000:1f:00.0"), CUDA_ERROR_INVALID_DEVICE);

    /* context: nothing current yet */
    CUcontext ctx = NULL, cur = (CUcontext)1;
    CHECK_OK(cr_emu_cuCtxGetCurrent(&cur));
    CHECK(cur == NULL);
    CHECK_CU(cr_emu_cuMemAlloc_v2(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cr_emu_cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    unsigned flags;
    int active;
    CHECK_OK(cr_emu_cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK_EQ_INT(active, 0);
    CHECK_CU(cr_emu_cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_OK(cr_emu_cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(ctx != NULL);
    CHECK_CU(cr_emu_cuDevicePrimaryCtxRetain(&ctx, 1), CUDA_ERROR_INVALID_DEVICE);
    CHECK_OK(cr_emu_cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK_EQ_INT(active, 1);
    CHECK_CU(cr_emu_cuCtxSetCurrent((CUcontext)0x1234), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_OK(cr_emu_cuCtxSetCurrent(ctx));
    CHECK_OK(cr_emu_cuCtxGetCurrent(&cur));
    CHECK(cur == ctx);
    CHECK_OK(cr_emu_cuCtxGetDevice(&dev));
    CHECK_EQ_INT(dev, 0);
    CHECK_OK(cr_emu_cuCtxGetDevice_v2(&dev, ctx));
    CHECK_CU(cr_emu_cuCtxGetDevice_v2(&dev, (CUcontext)0x1234), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_OK(cr_emu_cuCtxSynchronize());
    CHECK_OK(cr_emu_cuCtxSynchronize_v2(ctx));
    CHECK_OK(cr_emu_cuCtxSynchronize_v2(NULL));
    int least = 99, greatest = 99;
    CHECK_OK(cr_emu_cuCtxGetStreamPriorityRange(&least, &greatest));
    CHECK_EQ_INT(least, 0);
    CHECK_EQ_INT(greatest, -5);
    size_t limit;
    CHECK_OK(cr_emu_cuCtxGetLimit(&limit, CU_LIMIT_STACK_SIZE));
    CHECK_EQ_U64(limit, 1024);
    CHECK_OK(cr_emu_cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 << 20));
    CHECK_OK(cr_emu_cuCtxGetLimit(&limit, CU_LIMIT_MALLOC_HEAP_SIZE));
    CHECK_EQ_U64(limit, 64 << 20);
    CHECK_CU(cr_emu_cuCtxGetLimit(&limit, (CUlimit)99), CUDA_ERROR_UNSUPPORTED_LIMIT);
    CUfunc_cache cache;
    CHECK_OK(cr_emu_cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_SHARED));
    CHECK_OK(cr_emu_cuCtxGetCacheConfig(&cache));
    CHECK_EQ_INT(cache, CU_FUNC_CACHE_PREFER_SHARED);
    unsigned api;
    CHECK_OK(cr_emu_cuCtxGetApiVersion(ctx, &api));
    CHECK_EQ_INT(api, 13000);
    CHECK_OK(cr_emu_cuDevicePrimaryCtxSetFlags_v2(0, CU_CTX_SCHED_BLOCKING_SYNC));
    CHECK_OK(cr_emu_cuCtxGetFlags(&flags));
    CHECK_EQ_INT(flags, CU_CTX_SCHED_BLOCKING_SYNC);
    CHECK_CU(cr_emu_cuDevicePrimaryCtxSetFlags_v2(0, 3), CUDA_ERROR_INVALID_VALUE);
    unsigned long long id;
    CHECK_OK(cr_emu_cuCtxGetId(ctx, &id));
    CHECK_EQ_INT(id, 1);
    CUmoduleLoadingMode mode;
    CHECK_OK(cr_emu_cuModuleGetLoadingMode(&mode));
    CHECK_EQ_INT(mode, CU_MODULE_EAGER_LOADING);

    /* a thread that has not made the context current cannot use it */
    pthread_t t;
    int trc[3] = {-1, -1, -1};
    pthread_create(&t, NULL, other_thread, trc);
    pthread_join(t, NULL);
    CHECK_EQ_INT(trc[0], CUDA_ERROR_INVALID_CONTEXT);
    CHECK_EQ_INT(trc[1], CUDA_SUCCESS);
    CHECK_EQ_INT(trc[2], 1);

    CHECK_OK(cr_emu_cuDevicePrimaryCtxRelease_v2(0));
    CHECK_OK(cr_emu_cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK_EQ_INT(active, 0);
    CHECK_DONE();
}
