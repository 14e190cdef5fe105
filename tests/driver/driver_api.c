/* The driver API straight through the stub, without cudart: exercises the generic
 * marshaller (values, handles, out scalars of every width, floats, strings, arrays), the
 * hand-written paths (copies, memsets, modules from PTX, cubin and fatbin files, libraries,
 * launches, host functions, occupancy with a callback, tensor maps), deferred errors of
 * asynchronous calls, and unsupported functions.
 *
 *   driver_api KERNELS.ptx KERNELS.cubin KERNELS.fatbin */
#include <cuda.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *n_ = "?";                                                                  \
            cuGetErrorName(r_, &n_);                                                               \
            fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call, n_,          \
                    (int)r_);                                                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define EXPECT(call, expected)                                                                     \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != (expected)) {                                                                    \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #call,     \
                    (int)r_, (int)(expected));                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void expect_launch(const char *kernel, unsigned grid, unsigned block, unsigned shared,
                          const void *params, size_t size)
{
    printf("CR_EXPECT_LAUNCH {\"kernel\":\"%s\",\"grid\":[%u,1,1],\"block\":[%u,1,1],"
           "\"shared\":%u,\"params\":\"",
           kernel, grid, block, shared);
    for (size_t i = 0; i < size; i++)
        printf("%02x", ((const unsigned char *)params)[i]);
    printf("\"}\n");
    fflush(stdout);
}

static void *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = calloc(1, (size_t)n + 1);
    CHECK(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

/* The emulated device interprets PTX: a kernel loaded from a cubin alone (SASS) cannot run
 * there, and its launch fails with CUDA_ERROR_NOT_SUPPORTED. */
static int emulated;

static void test_device(CUdevice dev)
{
    char name[256];
    size_t total;
    int major, minor, count, lo = 1, hi = 1;
    CUuuid uuid;
    CK(cuDeviceGetCount(&count));
    CHECK(count == 1);
    CK(cuDeviceGetName(name, sizeof name, dev));
    CHECK(strlen(name) > 0);
    emulated = strstr(name, "emulated") != NULL;
    CK(cuDeviceTotalMem(&total, dev));
    CHECK(total > (64u << 20));
    CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    CHECK(major >= 7);
    CK(cuDeviceGetUuid(&uuid, dev));
    EXPECT(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_MAX, dev), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGet(&dev, 3), CUDA_ERROR_INVALID_DEVICE);
    CK(cuCtxGetStreamPriorityRange(&lo, &hi)); /* two signed outputs */
    CHECK(lo == 0 && hi < 0);
    printf("device: %s, cc %d.%d, %zu MiB, priorities %d..%d\n", name, major, minor, total >> 20,
           lo, hi);
}

static void test_contexts(CUdevice dev, CUcontext primary)
{
    CUcontext cur, created, popped;
    CUdevice d;
    unsigned version;
    CK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary);
    CK(cuCtxCreate(&created, NULL, 0, dev));
    CK(cuCtxGetCurrent(&cur));
    CHECK(cur == created);
    CK(cuCtxGetDevice(&d));
    CHECK(d == dev);
    CK(cuCtxPopCurrent(&popped));
    CHECK(popped == created);
    CK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary);
    CK(cuCtxGetApiVersion(created, &version));
    CK(cuCtxDestroy(created));
    EXPECT(cuCtxPushCurrent(created), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxPushCurrent((CUcontext)(uintptr_t)0x1234), CUDA_ERROR_INVALID_CONTEXT);
}

static void test_memory(void)
{
    size_t free0, total, free1;
    CUdeviceptr a, b;
    enum { N = 1 << 20 };
    unsigned char *host = malloc(N), *back = malloc(N);
    CK(cuMemGetInfo(&free0, &total));
    CK(cuMemAlloc(&a, N));
    CK(cuMemAlloc(&b, N));
    CK(cuMemGetInfo(&free1, &total));
    CHECK(free0 - free1 >= 2 * N);
    for (int i = 0; i < N; i++)
        host[i] = (unsigned char)(i * 7 + 3);
    CK(cuMemcpyHtoD(a, host, N));
    CK(cuMemcpyDtoD(b, a, N));
    memset(back, 0, N);
    CK(cuMemcpyDtoH(back, b, N));
    CHECK(memcmp(host, back, N) == 0);

    CK(cuMemsetD8(b + 1, 0xab, 5));
    CK(cuMemsetD16(b + 8, 0xbeef, 3));
    CK(cuMemsetD32(b + 16, 0xdeadbeef, 2));
    CK(cuMemcpyDtoH(back, b, 32));
    CHECK(back[0] == host[0] && back[1] == 0xab && back[5] == 0xab && back[6] == host[6]);
    CHECK(((unsigned short *)back)[4] == 0xbeef && ((unsigned short *)back)[6] == 0xbeef);
    CHECK(((unsigned *)back)[4] == 0xdeadbeef && ((unsigned *)back)[5] == 0xdeadbeef);

    CUdeviceptr p;
    size_t pitch;
    CK(cuMemAllocPitch(&p, &pitch, 100, 10, 4));
    CHECK(pitch >= 100);
    CK(cuMemsetD2D32(p, pitch, 0x01020304, 25, 10));
    CK(cuMemcpyDtoH(back, p + pitch * 9, 100));
    CHECK(((unsigned *)back)[24] == 0x01020304);

    /* unified copies infer the direction */
    CK(cuMemcpy((CUdeviceptr)(uintptr_t)back, a, 64));
    CHECK(memcmp(back, host, 64) == 0);

    CUdeviceptr base;
    size_t size;
    CK(cuMemGetAddressRange(&base, &size, a + 100));
    CHECK(base == a && size == N);
    unsigned type = 0;
    CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 5));
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    EXPECT(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 (CUdeviceptr)(uintptr_t)host),
           CUDA_ERROR_INVALID_VALUE);

    /* 3D copies whose rows overflow a size are refused on the spot, the session intact */
    CUDA_MEMCPY3D huge = {0};
    huge.srcMemoryType = CU_MEMORYTYPE_HOST;
    huge.srcHost = host;
    huge.srcPitch = 16;
    huge.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    huge.dstDevice = a;
    huge.dstPitch = 16;
    huge.WidthInBytes = 16;
    huge.Height = (size_t)1 << 32;
    huge.Depth = (size_t)1 << 32; /* rows: 2^64 */
    EXPECT(cuMemcpy3D(&huge), CUDA_ERROR_INVALID_VALUE);
    huge.Height = huge.Depth = (size_t)1 << 30; /* bytes: 2^64 */
    EXPECT(cuMemcpy3D(&huge), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemcpyDtoH(back, a, 64));
    CHECK(memcmp(back, host, 64) == 0);

    /* memory that is not managed (the stub hands out none): refused as the driver does */
    CUmemLocation here = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    EXPECT(cuMemPrefetchAsync(a, N, here, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemPrefetchAsync((CUdeviceptr)(uintptr_t)host, N, here, 0, NULL),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAdvise(a, N, CU_MEM_ADVISE_SET_READ_MOSTLY, here), CUDA_ERROR_INVALID_VALUE);
    int mostly = -1;
    EXPECT(cuMemRangeGetAttribute(&mostly, sizeof mostly, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, a, N),
           CUDA_ERROR_INVALID_VALUE);

    EXPECT(cuMemFree(a + 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFree(a));
    EXPECT(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFree(b));
    CK(cuMemFree(p));
    free(host);
    free(back);
}

/* cuda.h maps the name to _v3; cudart 13 and cuBLAS still ask for the _v2 symbol */
CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream, CUstreamCaptureStatus *, cuuint64_t *,
                                           CUgraph *, const CUgraphNode **, size_t *);

static void test_streams_events(void)
{
    CUstream s, hp;
    CUevent e0, e1;
    int prio;
    unsigned flags;
    float ms = -1;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreateWithPriority(&hp, 0, -3));
    CK(cuStreamGetPriority(hp, &prio));
    CHECK(prio == -3);
    CK(cuStreamGetFlags(s, &flags));
    CHECK(flags == CU_STREAM_NON_BLOCKING);
    /* nothing captures: libraries ask before their launches (the v2 form too) */
    CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    cuuint64_t capture_id = 7;
    size_t deps = 9;
    CK(cuStreamGetCaptureInfo_v2(s, &capturing, &capture_id, NULL, NULL, &deps));
    CHECK(capturing == CU_STREAM_CAPTURE_STATUS_NONE && deps == 0);
    unsigned long long stream_id = 0, other_id = 0;
    CK(cuStreamGetId(s, &stream_id));
    CK(cuStreamGetId(hp, &other_id));
    CHECK(stream_id != other_id);
    CK(cuEventCreate(&e0, 0));
    CK(cuEventCreate(&e1, 0));
    CK(cuEventRecord(e0, s));
    CK(cuEventRecord(e1, s));
    CK(cuEventSynchronize(e1));
    CK(cuEventElapsedTime(&ms, e0, e1)); /* a float output */
    CHECK(ms >= 0 && ms < 10000);
    CK(cuStreamWaitEvent(hp, e1, 0));
    CK(cuStreamQuery(s));
    CK(cuStreamSynchronize(hp));
    CK(cuEventQuery(e1));
    CK(cuEventDestroy(e0));
    CK(cuEventDestroy(e1));
    CK(cuStreamDestroy(s));
    CK(cuStreamDestroy(hp));
    EXPECT(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
}

static size_t smem_per_block(int block)
{
    return (size_t)block * 4;
}

/* scale(data, 2.5, 256) on 256 floats; sass_only: f comes from a cubin, without PTX. */
static void launch_scale(CUfunction f, const char *how, int sass_only)
{
    enum { N = 256 };
    float host[N], back[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i - 100.0f;
    CUdeviceptr buf;
    CK(cuMemAlloc(&buf, sizeof host));
    CK(cuMemcpyHtoD(buf, host, sizeof host));
    float factor = 2.5f;
    int n = N;
    void *args[] = {&buf, &factor, &n};
    if (sass_only && emulated) {
        /* refused at the launch, or (asynchronously, through the stub) by the next sync */
        CUresult r = cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, NULL, args, NULL);
        if (r == CUDA_SUCCESS)
            r = cuCtxSynchronize();
        EXPECT(r, CUDA_ERROR_NOT_SUPPORTED);
        CK(cuCtxSynchronize()); /* not a context error: the context goes on */
        CK(cuMemFree(buf));
        printf("scale from a %s refused: the emulated device runs PTX only\n", how);
        return;
    }
    CK(cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    unsigned char expected[16];
    memcpy(expected, &buf, 8);
    memcpy(expected + 8, &factor, 4);
    memcpy(expected + 12, &n, 4);
    expect_launch("scale", 2, 128, 0, expected, sizeof expected);
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(back, buf, sizeof back));
    for (int i = 0; i < N; i++)
        CHECK(back[i] == host[i] * 2.5f);
    CK(cuMemFree(buf));
    printf("launched scale from a %s\n", how);
}

static void test_code(const char *ptx_path, const char *cubin_path, const char *fatbin_path)
{
    size_t size;
    char *ptx = read_file(ptx_path, &size);
    CUmodule mod;
    CUfunction f, g;
    /* a PTX module: the only source of the parameter layout is the PTX itself */
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&f, mod, "scale"));
    int threads = 0;
    CK(cuFuncGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    CHECK(threads > 0 && threads <= 1024);
    /* attributes that do not exist are the driver's to refuse, read or set, asked again or
     * set to the same value again (the stub keeps what it was told: not these) */
    for (int i = 0; i < 2; i++) {
        EXPECT(cuFuncGetAttribute(&threads, (CUfunction_attribute)9999, f),
               CUDA_ERROR_INVALID_VALUE);
        EXPECT(cuFuncSetAttribute(f, (CUfunction_attribute)9999, 1), CUDA_ERROR_INVALID_VALUE);
        EXPECT(cuFuncSetAttribute(f, (CUfunction_attribute)-1, 1), CUDA_ERROR_INVALID_VALUE);
    }
    const char *fname = NULL;
    CK(cuFuncGetName(&fname, f));
    CHECK(strcmp(fname, "scale") == 0);
    launch_scale(f, "PTX module", 0);

    CUdeviceptr answer, weights;
    size_t bytes;
    CK(cuModuleGetGlobal(&answer, &bytes, mod, "answer"));
    CHECK(bytes == 4);
    int value = 0;
    CK(cuMemcpyDtoH(&value, answer, 4));
    CHECK(value == 42);
    float w[4];
    CK(cuModuleGetGlobal(&weights, &bytes, mod, "weights"));
    CHECK(bytes == 16);
    CK(cuMemcpyDtoH(w, weights, 16));
    CHECK(w[0] == 0.5f && w[3] == 3.5f);
    EXPECT(cuModuleGetFunction(&g, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);

    /* odd layout: (char, struct {char; double; int[3]}, short, pointer) */
    CK(cuModuleGetFunction(&g, mod, "odd"));
    struct {
        char c;
        double d;
        int i[3];
    } m;
    memset(&m, 0, sizeof m); /* the padding travels too: make it known */
    m.c = 7;
    m.d = 1.25;
    m.i[0] = 1, m.i[1] = 2, m.i[2] = 3;
    char c = 5;
    short s = -2;
    CUdeviceptr out;
    CK(cuMemAlloc(&out, 8));
    void *args[] = {&c, &m, &s, &out};
    CK(cuLaunchKernel(g, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    unsigned char expected[56] = {0}; /* c@0, m@8 (32 bytes), s@40, out@48 */
    expected[0] = 5;
    expected[8] = 7; /* the struct: c@0, d@8, i@16, 4 bytes of tail padding */
    memcpy(expected + 16, &m.d, 8);
    memcpy(expected + 24, m.i, 12);
    memcpy(expected + 40, &s, 2);
    memcpy(expected + 48, &out, 8);
    expect_launch("odd", 1, 1, 0, expected, sizeof expected);
    unsigned long long sum = 0;
    CK(cuMemcpyDtoH(&sum, out, sizeof sum));
    CHECK(sum == 5 + 7 - 2 + 3); /* c + m.c + s + m.i[2]: every parameter arrived */
    CK(cuMemFree(out));
    CK(cuModuleUnload(mod));
    EXPECT(cuModuleGetFunction(&g, mod, "scale"), CUDA_ERROR_INVALID_HANDLE);
    free(ptx);

    /* a cubin file and a fatbin file */
    CK(cuModuleLoad(&mod, cubin_path));
    CK(cuModuleGetFunction(&f, mod, "scale"));
    launch_scale(f, "cubin file", 1);
    CK(cuModuleUnload(mod));
    CUlibrary lib;
    CUkernel k;
    CK(cuLibraryLoadFromFile(&lib, fatbin_path, NULL, NULL, 0, NULL, NULL, 0));
    CK(cuLibraryGetKernel(&k, lib, "scale"));
    CK(cuKernelGetFunction(&f, k));
    launch_scale(f, "fatbin library (through its CUfunction)", 0);
    launch_scale((CUfunction)k, "fatbin library (a CUkernel cast to CUfunction)", 0);
    CUlibrary owner = NULL;
    CK(cuKernelGetLibrary(&owner, k)); /* cuBLASLt and PyTorch ask */
    CHECK(owner == lib);
    int regs = -1;
    CK(cuKernelGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 0));
    CHECK(regs >= 0);

    int blocks = 0, min_grid = 0, best = 0;
    CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (CUfunction)k, 128, 0));
    CHECK(blocks > 0);
    CK(cuOccupancyMaxPotentialBlockSize(&min_grid, &best, f, smem_per_block, 0, 0));
    CHECK(best >= 32 && best <= 1024 && min_grid > 0);
    CK(cuLibraryUnload(lib));
}

static int order[8], order_count;
static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;

static void host_fn(void *arg)
{
    pthread_mutex_lock(&order_lock);
    order[order_count++] = (int)(intptr_t)arg;
    pthread_mutex_unlock(&order_lock);
}

static void test_host_functions(void)
{
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    int *pinned;
    CUdeviceptr d;
    CK(cuMemAllocHost((void **)&pinned, 4096));
    CK(cuMemAlloc(&d, 4096));
    CK(cuMemsetD32Async(d, 77, 1024, s));
    for (int i = 0; i < 4; i++)
        CK(cuLaunchHostFunc(s, host_fn, (void *)(intptr_t)(i + 1)));
    CK(cuMemcpyDtoHAsync(pinned, d, 4096, s));
    CK(cuStreamSynchronize(s));
    CHECK(order_count == 4 && order[0] == 1 && order[3] == 4);
    CHECK(pinned[0] == 77 && pinned[1023] == 77);
    CK(cuMemFreeHost(pinned));
    CK(cuMemFree(d));
    CK(cuStreamDestroy(s));
}

/* Tensor maps (TMA descriptors, compute capability 9.0 and up) are encoded by the server's
 * driver, which holds the whole tensor to the caller's own memory. Only what NVIDIA's driver
 * answers through the stub is asserted: the descriptor's bytes are its own business. */
static void test_tensor_maps(CUdevice dev)
{
    int major;
    CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    if (major < 9) {
        printf("tensor maps: skipped (compute capability %d)\n", major);
        return;
    }
    enum { ROW = 256, ROWS = 64, BYTES = ROW * ROWS }; /* 64 x 64 floats, no padding */
    CUdeviceptr p;
    CK(cuMemAlloc(&p, BYTES));
    CUtensorMap map;
    cuuint64_t dims[2] = {ROW / 4, ROWS}, strides[1] = {ROW};
    cuuint32_t box[2] = {32, 32}, elems[2] = {1, 1};
    memset(&map, 0, sizeof map);
    CK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)p, dims, strides,
                              box, elems, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    static const uint8_t zero[sizeof(CUtensorMap)];
    CHECK(memcmp(&map, zero, sizeof map) != 0);

    /* one row more than the allocation holds: the tensor would reach past its end */
    cuuint64_t too_many[2] = {ROW / 4, ROWS + 1};
    EXPECT(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)p, too_many,
                                  strides, box, elems, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           CUDA_ERROR_INVALID_VALUE);
    /* inside the allocation, but not 16-byte aligned */
    cuuint64_t half[2] = {ROW / 4, ROWS / 2};
    EXPECT(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)(p + 8), half,
                                  strides, box, elems, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           CUDA_ERROR_INVALID_VALUE);
    /* what cuda.h documents the driver to refuse: strides not a multiple of 16 bytes, a box
     * side over 256, an element stride over 8, a box row wider than its swizzle span */
    cuuint64_t odd_stride[1] = {ROW - 8};
    cuuint32_t big_box[2] = {32, 257}, big_step[2] = {1, 9};
    EXPECT(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)p, half,
                                  odd_stride, box, elems, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)p, dims,
                                  strides, big_box, elems, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)p, dims,
                                  strides, box, big_step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)p, dims,
                                  strides, box, elems, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           CUDA_ERROR_INVALID_VALUE); /* 32 floats: 128 bytes in a 64-byte span */
    /* ranks outside 1..5 */
    cuuint64_t dims6[6] = {64, 2, 2, 2, 2, 2}, strides6[5] = {256, 512, 1024, 2048, 4096};
    cuuint32_t box6[6] = {32, 1, 1, 1, 1, 1}, elems6[6] = {1, 1, 1, 1, 1, 1};
    EXPECT(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 0, (void *)p, dims6,
                                  strides6, box6, elems6, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 6, (void *)p, dims6,
                                  strides6, box6, elems6, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           CUDA_ERROR_INVALID_VALUE);

    /* im2col over an NHWC half tensor of 2 x 8 x 8 x 64 (dims innermost first) */
    cuuint64_t nhwc[4] = {64, 8, 8, 2}, nhwc_strides[3] = {128, 1024, 8192};
    cuuint32_t elems4[4] = {1, 1, 1, 1};
    int lower[2] = {0, 0}, upper[2] = {0, 0};
    memset(&map, 0, sizeof map);
    CK(cuTensorMapEncodeIm2col(
        &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, (void *)p, nhwc, nhwc_strides, lower, upper, 64,
        64, elems4, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    CHECK(memcmp(&map, zero, sizeof map) != 0);
    /* im2col needs at least one spatial dimension besides channels and batch */
    EXPECT(cuTensorMapEncodeIm2col(
               &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)p, nhwc, nhwc_strides, lower,
               upper, 64, 64, elems4, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFree(p));
}

static void test_deferred_errors(const char *ptx_path)
{
    /* a made-up handle is refused on the spot, even by an asynchronous call */
    EXPECT(cuStreamWaitEvent(NULL, (CUevent)(uintptr_t)0xdead0, 0), CUDA_ERROR_INVALID_HANDLE);
    /* what only the device can refuse (a block over the kernel's __launch_bounds__) comes
     * back from the next call that waits, once */
    size_t size;
    char *ptx = read_file(ptx_path, &size);
    CUmodule mod;
    CUfunction f;
    CUdeviceptr p;
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&f, mod, "bounded"));
    CK(cuMemAlloc(&p, 1024));
    void *args[] = {&p};
    CK(cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    EXPECT(cuCtxSynchronize(), CUDA_ERROR_INVALID_VALUE); /* what an H100 answers */
    CK(cuCtxSynchronize());                               /* reported once, not sticky */
    CK(cuMemFree(p));
    CK(cuModuleUnload(mod));
    free(ptx);
    /* an unsupported function says so */
    CUarray array;
    CUDA_ARRAY_DESCRIPTOR desc = {64, 1, CU_AD_FORMAT_FLOAT, 1};
    EXPECT(cuArrayCreate(&array, &desc), CUDA_ERROR_NOT_SUPPORTED);
    /* cuGetProcAddress hands out what cudart will call */
    CUresult (*sync)(CUcontext) = NULL;
    CUdriverProcAddressQueryResult st;
    CK(cuGetProcAddress("cuCtxSynchronize", (void **)&sync, 13000, 0, &st));
    CK(sync(NULL));
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s KERNELS.ptx KERNELS.cubin KERNELS.fatbin\n", argv[0]);
        return 2;
    }
    CUdevice dev;
    CUcontext primary;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&primary, dev));
    EXPECT(cuMemAlloc(&(CUdeviceptr){0}, 8), CUDA_ERROR_INVALID_CONTEXT); /* none current */
    CK(cuCtxSetCurrent(primary));
    test_device(dev);
    test_contexts(dev, primary);
    test_memory();
    test_streams_events();
    test_code(argv[1], argv[2], argv[3]);
    test_host_functions();
    test_tensor_maps(dev);
    test_deferred_errors(argv[1]);
    CK(cuDevicePrimaryCtxRelease(dev));
    printf("driver_api: all checks passed\n");
    return 0;
}
