/* Emulated streams and events: in-order execution, host functions, events and elapsed time,
 * cross-stream waits, the legacy default stream, asynchronous copies (staging of pageable
 * sources), stream destruction with pending work, stream-ordered allocation with pools, and
 * graphs. */
#include "emu_test.h"

#define ARENA (256ull << 20)
#define MiB (1ull << 20)

static void test_order_and_queries(void)
{
    CUstream s;
    order_log_t log = {.lock = PTHREAD_MUTEX_INITIALIZER};
    order_item_t items[6];
    gate_t gate;
    gate_init(&gate);
    CHECK_OK(cr_emu_cuStreamCreate(&s, 0));
    CHECK_OK(cr_emu_cuStreamQuery(s)); /* nothing queued */
    CHECK_OK(cr_emu_cuLaunchHostFunc(s, gate_wait_fn, &gate));
    for (int i = 0; i < 6; i++) {
        items[i] = (order_item_t){&log, i + 1};
        CHECK_OK(cr_emu_cuLaunchHostFunc(s, order_fn, &items[i]));
    }
    sleep_ms(30);
    CHECK_CU(cr_emu_cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CHECK_EQ_INT(order_count(&log), 0); /* later work waits for the blocked host function */
    gate_open(&gate);
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_OK(cr_emu_cuStreamQuery(s));
    CHECK_EQ_INT(log.count, 6);
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(log.items[i], i + 1);
    CHECK_CU(cr_emu_cuLaunchHostFunc(s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s));
}

/* A copy earlier in the stream has landed when a later host function runs. */
typedef struct {
    const unsigned char *device; /* device address == host address in the emu */
    const unsigned char *expected;
    size_t n;
    int ok;
} observe_t;

static void observe_fn(void *arg)
{
    observe_t *o = arg;
    o->ok = memcmp(o->device, o->expected, o->n) == 0;
}

typedef struct {
    CUstream stream;
    CUresult status;
    int calls;
} callback_seen_t;

static void callback_fn(CUstream s, CUresult status, void *user)
{
    callback_seen_t *seen = user;
    seen->stream = s;
    seen->status = status;
    seen->calls++;
}

static void test_copies_in_order(void)
{
    enum { N = 1 << 20 };
    CUstream s;
    CUdeviceptr d;
    unsigned char *pinned, *data = malloc(N);
    fill_random(data, N, 11);
    CHECK_OK(cr_emu_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&d, N));
    CHECK_OK(cr_emu_cuMemAllocHost_v2((void **)&pinned, N));
    memcpy(pinned, data, N);
    observe_t o = {(const unsigned char *)(uintptr_t)d, data, N, 0};
    CHECK_OK(cr_emu_cuMemcpyHtoDAsync_v2(d, pinned, N, s));
    CHECK_OK(cr_emu_cuLaunchHostFunc(s, observe_fn, &o));
    callback_seen_t seen = {0};
    CHECK_OK(cr_emu_cuStreamAddCallback(s, callback_fn, &seen, 0));
    CHECK_CU(cr_emu_cuStreamAddCallback(s, callback_fn, &seen, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_EQ_INT(o.ok, 1);
    CHECK_EQ_INT(seen.calls, 1);
    CHECK(seen.stream == s);
    CHECK_EQ_INT(seen.status, CUDA_SUCCESS);

    /* pageable source, busy stream: consumed (staged) before the call returns */
    gate_t gate;
    gate_init(&gate);
    unsigned char *pageable = malloc(N), *out = malloc(N);
    memcpy(pageable, data, N);
    CHECK_OK(cr_emu_cuMemsetD8Async(d, 0, N, s));
    CHECK_OK(cr_emu_cuLaunchHostFunc(s, gate_wait_fn, &gate));
    CHECK_OK(cr_emu_cuMemcpyHtoDAsync_v2(d, pageable, N, s));
    memset(pageable, 0xee, N); /* too late to matter */
    /* pinned source, busy stream: read when the stream gets there */
    memset(pinned, 0x11, 4096);
    CHECK_OK(cr_emu_cuMemcpyHtoDAsync_v2(d + N - 4096, pinned, 4096, s));
    memset(pinned, 0x22, 4096); /* the copy sees this */
    /* device-to-host: written when the stream gets there */
    memset(out, 0, N);
    CHECK_OK(cr_emu_cuMemcpyDtoHAsync_v2(out, d, N, s));
    sleep_ms(20);
    CHECK_EQ_INT(out[0], 0);
    CHECK_EQ_INT(out[N / 2], 0);
    gate_open(&gate);
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_EQ_MEM(out, data, N - 4096);
    CHECK_EQ_INT(out[N - 4096], 0x22);
    CHECK_EQ_INT(out[N - 1], 0x22);

    /* pageable source, idle stream: copied at once */
    memcpy(pageable, data, N);
    CHECK_OK(cr_emu_cuMemcpyHtoDAsync_v2(d, pageable, N, s));
    memset(pageable, 0xee, N);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(out, d, N)); /* non-blocking s: no implicit wait */
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(out, d, N));
    CHECK_EQ_MEM(out, data, N);

    /* async 2D/3D/memsets and unified async copies */
    CUDA_MEMCPY2D m = {0};
    m.srcMemoryType = CU_MEMORYTYPE_HOST;
    m.srcHost = data;
    m.srcPitch = 100;
    m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.dstDevice = d;
    m.dstPitch = 64;
    m.WidthInBytes = 64;
    m.Height = 10;
    CHECK_OK(cr_emu_cuMemcpy2DAsync_v2(&m, s));
    CHECK_OK(cr_emu_cuMemsetD2D32Async(d + 1024, 16, 7, 2, 3, s));
    CHECK_OK(cr_emu_cuMemcpyAsync((CUdeviceptr)(uintptr_t)out, d, 2048, s));
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    for (int y = 0; y < 10; y++)
        CHECK_EQ_MEM(out + y * 64, data + y * 100, 64);
    CHECK_EQ_INT(out[1024 + 16], 7);
    CHECK_EQ_INT(out[1024 + 16 + 8], data[1024 + 16 + 8]);
    CUDA_MEMCPY3D m3 = {0};
    m3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    m3.srcDevice = d;
    m3.srcPitch = 64;
    m3.srcHeight = 4;
    m3.dstMemoryType = CU_MEMORYTYPE_HOST;
    m3.dstHost = out;
    m3.dstPitch = 32;
    m3.dstHeight = 2;
    m3.WidthInBytes = 32;
    m3.Height = 2;
    m3.Depth = 2;
    memset(out, 0, 128);
    CHECK_OK(cr_emu_cuMemcpy3DAsync_v2(&m3, s));
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_EQ_MEM(out + 64, data + 4 * 100, 32); /* slice 1, row 0 = device row 4 */
    CHECK_CU(cr_emu_cuMemcpyHtoDAsync_v2(d, data, N + 1, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemcpyHtoDAsync_v2(d, data, 16, (CUstream)0x77), CUDA_ERROR_INVALID_HANDLE);

    CHECK_OK(cr_emu_cuMemFreeHost(pinned));
    CHECK_OK(cr_emu_cuMemFree_v2(d));
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s));
    free(data);
    free(pageable);
    free(out);
}

static void sleep_fn(void *arg)
{
    sleep_ms(*(int *)arg);
}

static void test_events(void)
{
    CUstream a, b;
    CUevent e1, e2, never, untimed;
    float ms = -1;
    int delay = 30;
    CHECK_OK(cr_emu_cuStreamCreate(&a, 0));
    CHECK_OK(cr_emu_cuStreamCreate(&b, 0));
    CHECK_OK(cr_emu_cuEventCreate(&e1, CU_EVENT_DEFAULT));
    CHECK_OK(cr_emu_cuEventCreate(&e2, CU_EVENT_BLOCKING_SYNC));
    CHECK_OK(cr_emu_cuEventCreate(&never, 0));
    CHECK_OK(cr_emu_cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
    CHECK_CU(cr_emu_cuEventCreate(&e1, 0x80), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);

    /* an event never recorded counts as complete */
    CHECK_OK(cr_emu_cuEventQuery(never));
    CHECK_OK(cr_emu_cuEventSynchronize(never));
    CHECK_CU(cr_emu_cuEventElapsedTime_v2(&ms, never, never), CUDA_ERROR_INVALID_HANDLE);
    CHECK_OK(cr_emu_cuStreamWaitEvent(a, never, 0)); /* no wait */

    /* elapsed time: two records around a 30 ms host function */
    CHECK_OK(cr_emu_cuEventRecord(e1, a));
    CHECK_OK(cr_emu_cuLaunchHostFunc(a, sleep_fn, &delay));
    CHECK_OK(cr_emu_cuEventRecord(e2, a));
    CHECK_OK(cr_emu_cuEventRecord(untimed, a));
    CHECK_CU(cr_emu_cuEventQuery(e2), CUDA_ERROR_NOT_READY);
    CHECK_CU(cr_emu_cuEventElapsedTime_v2(&ms, e1, e2), CUDA_ERROR_NOT_READY);
    CHECK_OK(cr_emu_cuEventSynchronize(e2));
    CHECK_OK(cr_emu_cuEventQuery(e2));
    CHECK_OK(cr_emu_cuEventElapsedTime_v2(&ms, e1, e2));
    CHECK(ms >= 29.0f && ms < 5000.0f);
    float back = 1;
    CHECK_OK(cr_emu_cuEventElapsedTime(&back, e2, e1));
    CHECK(back <= 0.0f && back > -5000.0f);
    CHECK_CU(cr_emu_cuEventElapsedTime_v2(&ms, e1, untimed), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuEventElapsedTime_v2(NULL, e1, e2), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuStreamSynchronize(a));
    CHECK_OK(cr_emu_cuEventQuery(untimed));

    /* a long host function on A, an event after it, B waits for the event */
    gate_t gate;
    gate_init(&gate);
    order_log_t log = {.lock = PTHREAD_MUTEX_INITIALIZER};
    order_item_t first = {&log, 1}, second = {&log, 2}, on_b = {&log, 3};
    CHECK_OK(cr_emu_cuLaunchHostFunc(a, gate_wait_fn, &gate));
    CHECK_OK(cr_emu_cuLaunchHostFunc(a, order_fn, &first));
    CHECK_OK(cr_emu_cuEventRecordWithFlags(e1, a, 0));
    CHECK_OK(cr_emu_cuStreamWaitEvent(b, e1, 0));
    CHECK_OK(cr_emu_cuLaunchHostFunc(b, order_fn, &on_b));
    CHECK_OK(cr_emu_cuEventRecord(e1, b)); /* re-recording does not change B's wait */
    CHECK_OK(cr_emu_cuLaunchHostFunc(a, order_fn, &second));
    sleep_ms(30);
    CHECK_EQ_INT(order_count(&log), 0);
    CHECK_CU(cr_emu_cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    CHECK_CU(cr_emu_cuStreamQuery(b), CUDA_ERROR_NOT_READY);
    CHECK_CU(cr_emu_cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    gate_open(&gate);
    CHECK_OK(cr_emu_cuStreamSynchronize(b));
    CHECK_OK(cr_emu_cuStreamSynchronize(a));
    CHECK_EQ_INT(log.count, 3);
    CHECK_EQ_INT(log.items[0], 1); /* B's host function ran after A reached the event */
    CHECK(log.items[1] == 3 || log.items[2] == 3);
    CHECK_OK(cr_emu_cuEventQuery(e1));

    /* handles */
    CHECK_CU(cr_emu_cuStreamWaitEvent(b, e1, 5), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuEventDestroy_v2(e1));
    CHECK_CU(cr_emu_cuEventDestroy_v2(e1), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuEventQuery(e1), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuEventRecord(e1, a), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuStreamWaitEvent(b, e1, 0), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuEventQuery((CUevent)0xdeadbeef), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuEventRecord(e2, (CUstream)0xdeadbeef), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuEventQuery((CUevent)a), CUDA_ERROR_INVALID_HANDLE); /* a stream */
    CHECK_OK(cr_emu_cuEventDestroy_v2(e2));
    CHECK_OK(cr_emu_cuEventDestroy_v2(never));
    CHECK_OK(cr_emu_cuEventDestroy_v2(untimed));
    CHECK_OK(cr_emu_cuStreamDestroy_v2(a));
    CHECK_OK(cr_emu_cuStreamDestroy_v2(b));
}

static void test_stream_properties(void)
{
    CUstream s1, s2, s3;
    int prio;
    unsigned flags;
    unsigned long long id1, id2, id0;
    CUcontext ctx, cur;
    CUdevice dev;
    CHECK_OK(cr_emu_cuStreamCreateWithPriority(&s1, CU_STREAM_NON_BLOCKING, -10));
    CHECK_OK(cr_emu_cuStreamCreateWithPriority(&s2, 0, 3));
    CHECK_OK(cr_emu_cuStreamCreateWithPriority(&s3, 0, -2));
    CHECK_CU(cr_emu_cuStreamCreate(&s3, 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuStreamGetPriority(s1, &prio));
    CHECK_EQ_INT(prio, -5);
    CHECK_OK(cr_emu_cuStreamGetPriority(s2, &prio));
    CHECK_EQ_INT(prio, 0);
    CHECK_OK(cr_emu_cuStreamGetPriority(s3, &prio));
    CHECK_EQ_INT(prio, -2);
    CHECK_OK(cr_emu_cuStreamGetFlags(s1, &flags));
    CHECK_EQ_INT(flags, CU_STREAM_NON_BLOCKING);
    CHECK_OK(cr_emu_cuStreamGetFlags(s2, &flags));
    CHECK_EQ_INT(flags, 0);
    CHECK_OK(cr_emu_cuStreamGetId(s1, &id1));
    CHECK_OK(cr_emu_cuStreamGetId(s2, &id2));
    CHECK_OK(cr_emu_cuStreamGetId(NULL, &id0));
    CHECK(id1 != id2 && id1 != 0 && id2 != 0);
    CHECK_EQ_INT(id0, 0);
    CHECK_OK(cr_emu_cuStreamGetId(CU_STREAM_LEGACY, &id0));
    CHECK_EQ_INT(id0, 0);
    CHECK_OK(cr_emu_cuStreamGetId(CU_STREAM_PER_THREAD, &id0));
    CHECK_EQ_INT(id0, 0);
    CHECK_OK(cr_emu_cuStreamGetPriority(NULL, &prio));
    CHECK_EQ_INT(prio, 0);
    CHECK_OK(cr_emu_cuCtxGetCurrent(&cur));
    CHECK_OK(cr_emu_cuStreamGetCtx(s1, &ctx));
    CHECK(ctx == cur);
    CHECK_OK(cr_emu_cuStreamGetDevice(s1, &dev));
    CHECK_EQ_INT(dev, 0);
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s1));
    CHECK_CU(cr_emu_cuStreamDestroy_v2(s1), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuStreamQuery(s1), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuStreamSynchronize(s1), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuStreamGetPriority(s1, &prio), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuStreamDestroy_v2(NULL), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuStreamQuery((CUstream)0x12345678), CUDA_ERROR_INVALID_HANDLE);
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s2));
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s3));
}

static void test_destroy_with_pending_work(void)
{
    CUstream s;
    gate_t gate;
    gate_init(&gate);
    order_log_t log = {.lock = PTHREAD_MUTEX_INITIALIZER};
    order_item_t item = {&log, 42};
    CHECK_OK(cr_emu_cuStreamCreate(&s, 0));
    CHECK_OK(cr_emu_cuLaunchHostFunc(s, gate_wait_fn, &gate));
    CHECK_OK(cr_emu_cuLaunchHostFunc(s, order_fn, &item));
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s)); /* returns at once */
    CHECK_CU(cr_emu_cuLaunchHostFunc(s, order_fn, &item), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ_INT(order_count(&log), 0);
    gate_open(&gate);
    CHECK_OK(cr_emu_cuCtxSynchronize()); /* still waits for the destroyed stream's work */
    CHECK_EQ_INT(log.count, 1);
    CHECK_EQ_INT(log.items[0], 42);
}

static void test_legacy_stream(void)
{
    CUstream blocking, nonblocking;
    gate_t gate;
    order_log_t log = {.lock = PTHREAD_MUTEX_INITIALIZER};
    order_item_t i1 = {&log, 1}, i2 = {&log, 2}, i3 = {&log, 3};
    CHECK_OK(cr_emu_cuStreamCreate(&blocking, 0));
    CHECK_OK(cr_emu_cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));

    /* 1. work on the legacy stream waits for prior work on blocking streams ... */
    gate_init(&gate);
    CHECK_OK(cr_emu_cuLaunchHostFunc(blocking, gate_wait_fn, &gate));
    CHECK_OK(cr_emu_cuLaunchHostFunc(blocking, order_fn, &i1));
    CHECK_OK(cr_emu_cuLaunchHostFunc(NULL, order_fn, &i2));
    /* ... but not for non-blocking streams, which do not wait for it either */
    CHECK_OK(cr_emu_cuLaunchHostFunc(nonblocking, order_fn, &i3));
    CHECK_OK(cr_emu_cuStreamSynchronize(nonblocking));
    CHECK_EQ_INT(order_count(&log), 1);
    CHECK_EQ_INT(log.items[0], 3);
    CHECK_CU(cr_emu_cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
    gate_open(&gate);
    CHECK_OK(cr_emu_cuStreamSynchronize(CU_STREAM_LEGACY));
    CHECK_EQ_INT(log.count, 3);
    CHECK_EQ_INT(log.items[1], 1);
    CHECK_EQ_INT(log.items[2], 2);

    /* 2. later work on blocking streams waits for the legacy stream */
    log.count = 0;
    gate_init(&gate);
    CHECK_OK(cr_emu_cuLaunchHostFunc(CU_STREAM_PER_THREAD, gate_wait_fn, &gate));
    CHECK_OK(cr_emu_cuLaunchHostFunc(NULL, order_fn, &i1));
    CHECK_OK(cr_emu_cuLaunchHostFunc(blocking, order_fn, &i2));
    CHECK_OK(cr_emu_cuLaunchHostFunc(nonblocking, order_fn, &i3));
    CHECK_OK(cr_emu_cuStreamSynchronize(nonblocking));
    sleep_ms(20);
    CHECK_EQ_INT(order_count(&log), 1);
    CHECK_CU(cr_emu_cuStreamQuery(blocking), CUDA_ERROR_NOT_READY);
    gate_open(&gate);
    CHECK_OK(cr_emu_cuStreamSynchronize(blocking));
    CHECK_EQ_INT(log.count, 3);
    CHECK_EQ_INT(log.items[0], 3);
    CHECK_EQ_INT(log.items[1], 1);
    CHECK_EQ_INT(log.items[2], 2);

    /* 3. a synchronous copy waits for prior work on blocking streams */
    CUdeviceptr d;
    unsigned char out[256];
    CHECK_OK(cr_emu_cuMemAlloc_v2(&d, 256));
    CHECK_OK(cr_emu_cuMemsetD8_v2(d, 0, 256));
    gate_init(&gate);
    CHECK_OK(cr_emu_cuLaunchHostFunc(blocking, gate_wait_fn, &gate));
    CHECK_OK(cr_emu_cuMemsetD8Async(d, 0xaa, 256, blocking));
    int delay = 30;
    CHECK_OK(cr_emu_cuLaunchHostFunc(nonblocking, sleep_fn, &delay));
    CHECK_OK(cr_emu_cuLaunchHostFunc(nonblocking, gate_open_fn, &gate));
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(out, d, 256)); /* returns after the gate opens */
    CHECK_EQ_INT(out[0], 0xaa);
    CHECK_EQ_INT(out[255], 0xaa);
    /* and a synchronous copy does not wait for non-blocking streams */
    gate_init(&gate);
    CHECK_OK(cr_emu_cuLaunchHostFunc(nonblocking, gate_wait_fn, &gate));
    CHECK_OK(cr_emu_cuMemsetD8Async(d, 0xbb, 256, nonblocking));
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(out, d, 256));
    CHECK_EQ_INT(out[0], 0xaa);
    gate_open(&gate);
    CHECK_OK(cr_emu_cuCtxSynchronize());
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(out, d, 256));
    CHECK_EQ_INT(out[0], 0xbb);
    CHECK_OK(cr_emu_cuMemFree_v2(d));
    CHECK_OK(cr_emu_cuStreamDestroy_v2(blocking));
    CHECK_OK(cr_emu_cuStreamDestroy_v2(nonblocking));
}

static void test_ctx_synchronize(void)
{
    CUstream s[4];
    int delay = 20;
    order_log_t log = {.lock = PTHREAD_MUTEX_INITIALIZER};
    order_item_t items[4];
    for (int i = 0; i < 4; i++) {
        items[i] = (order_item_t){&log, i};
        CHECK_OK(cr_emu_cuStreamCreate(&s[i], i % 2 ? CU_STREAM_NON_BLOCKING : 0));
        CHECK_OK(cr_emu_cuLaunchHostFunc(s[i], sleep_fn, &delay));
        CHECK_OK(cr_emu_cuLaunchHostFunc(s[i], order_fn, &items[i]));
    }
    CHECK_OK(cr_emu_cuCtxSynchronize());
    CHECK_EQ_INT(log.count, 4);
    for (int i = 0; i < 4; i++) {
        CHECK_OK(cr_emu_cuStreamQuery(s[i]));
        CHECK_OK(cr_emu_cuStreamDestroy_v2(s[i]));
    }
}

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute attr)
{
    cuuint64_t v = 12345;
    CHECK_OK(cr_emu_cuMemPoolGetAttribute(pool, attr, &v));
    return v;
}

static void test_stream_ordered_allocation(void)
{
    CUstream s;
    CUmemoryPool def, cur, pool;
    CUdeviceptr p, q, r;
    size_t free0, free1, total;
    gate_t gate;
    unsigned char out[4096];
    CHECK_OK(cr_emu_cuStreamCreate(&s, 0));
    CHECK_OK(cr_emu_cuDeviceGetDefaultMemPool(&def, 0));
    CHECK_OK(cr_emu_cuDeviceGetMemPool(&cur, 0));
    CHECK(def == cur && def != NULL);
    CHECK_CU(cr_emu_cuDeviceGetDefaultMemPool(&def, 1), CUDA_ERROR_INVALID_DEVICE);
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);
    CHECK_OK(cr_emu_cuMemGetInfo_v2(&free0, &total));

    /* allocate, use and free in stream order */
    CHECK_OK(cr_emu_cuMemAllocAsync(&p, 3000, s));
    CHECK_EQ_U64(p % 512, 0);
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 3072);
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 3072);
    CHECK_OK(cr_emu_cuMemGetInfo_v2(&free1, &total));
    CHECK_EQ_U64(free0 - free1, 3072);
    gate_init(&gate);
    CHECK_OK(cr_emu_cuMemsetD8Async(p, 0x5c, 3000, s));
    CHECK_OK(cr_emu_cuLaunchHostFunc(s, gate_wait_fn, &gate));
    CHECK_OK(cr_emu_cuMemcpyDtoHAsync_v2(out, p, 3000, s));
    CHECK_OK(cr_emu_cuMemFreeAsync(p, s));
    /* the pointer is no longer usable for new work, nor freeable again */
    CHECK_CU(cr_emu_cuMemsetD8Async(p, 0, 16, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
    /* but the memory is held until the stream reaches the free */
    sleep_ms(10);
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 3072);
    gate_open(&gate);
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_EQ_INT(out[0], 0x5c);
    CHECK_EQ_INT(out[2999], 0x5c);
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0); /* threshold 0 */
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 3072);
    CHECK_OK(cr_emu_cuMemGetInfo_v2(&free1, &total));
    CHECK_EQ_U64(free1, free0);

    /* with a release threshold the pool keeps freed blocks and reuses them */
    cuuint64_t keep = UINT64_MAX, zero = 0;
    CHECK_OK(cr_emu_cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    CHECK_OK(cr_emu_cuMemAllocAsync(&p, 4 * MiB, s));
    CHECK_EQ_U64(p % (2 * MiB), 0);
    CHECK_OK(cr_emu_cuMemFreeAsync(p, s));
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    CHECK_OK(cr_emu_cuMemAllocAsync(&q, 4 * MiB, NULL));
    CHECK_EQ_U64(q, p);
    CHECK_OK(cr_emu_cuMemFree_v2(q)); /* a plain free works on pool memory too */
    CHECK_OK(cr_emu_cuMemPoolTrimTo(def, 0));
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    CHECK_OK(cr_emu_cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 0);
    CHECK_CU(cr_emu_cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &keep),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));

    /* an explicit pool, made the device's current pool */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CHECK_OK(cr_emu_cuMemPoolCreate(&pool, &props));
    CHECK_OK(cr_emu_cuMemAllocFromPoolAsync(&r, 1000, pool, s));
    CUmemoryPool owner = NULL;
    CHECK_OK(cr_emu_cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, r));
    CHECK(owner == pool);
    CHECK_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1024);
    CHECK_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    CHECK_OK(cr_emu_cuDeviceSetMemPool(0, pool));
    CHECK_OK(cr_emu_cuDeviceGetMemPool(&cur, 0));
    CHECK(cur == pool);
    CHECK_OK(cr_emu_cuMemAllocAsync(&q, 100, s));
    CHECK_EQ_U64(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1536);
    CHECK_OK(cr_emu_cuMemFreeAsync(q, s));
    /* destroying the current pool falls back to the default; live allocations stay valid */
    CHECK_OK(cr_emu_cuMemPoolDestroy(pool));
    CHECK_OK(cr_emu_cuDeviceGetMemPool(&cur, 0));
    CHECK(cur == def);
    CHECK_CU(cr_emu_cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuMemAllocFromPoolAsync(&q, 100, pool, s), CUDA_ERROR_INVALID_HANDLE);
    CHECK_OK(cr_emu_cuMemsetD8Async(r, 1, 1000, s));
    CHECK_OK(cr_emu_cuMemFreeAsync(r, s));
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_CU(cr_emu_cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuDeviceSetMemPool(0, (CUmemoryPool)s), CUDA_ERROR_INVALID_HANDLE);
    props.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CHECK_CU(cr_emu_cuMemPoolCreate(&pool, &props), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cr_emu_cuMemAllocAsync(&p, 0, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemAllocAsync(&p, 16, (CUstream)0x55), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuMemAllocAsync(&p, ARENA + 1, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_OK(cr_emu_cuMemGetInfo_v2(&free1, &total));
    CHECK_EQ_U64(free1, free0);
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s));
}

/* cuMemFree and cuMemFreeHost never wait: the pointer is dead at once, the memory is reused
 * only after the work queued before the free has run. */
static void test_deferred_frees(void)
{
    enum { N = 1 << 20 };
    CUstream s;
    CUdeviceptr d, d2;
    unsigned char *h, *h2;
    size_t f0, f1, total;
    unsigned flags;
    gate_t gate;
    gate_init(&gate);
    CHECK_OK(cr_emu_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&d, N));
    CHECK_OK(cr_emu_cuMemAllocHost_v2((void **)&h, N));
    CHECK_OK(cr_emu_cuMemAllocHost_v2((void **)&h2, N));
    CHECK_OK(cr_emu_cuMemGetInfo_v2(&f0, &total));
    CHECK_OK(cr_emu_cuMemsetD8Async(d, 0x42, N, s));
    CHECK_OK(cr_emu_cuLaunchHostFunc(s, gate_wait_fn, &gate));
    CHECK_OK(cr_emu_cuMemcpyDtoHAsync_v2(h, d, N, s));
    CHECK_OK(cr_emu_cuMemcpyDtoHAsync_v2(h2, d, N, s));
    CHECK_OK(cr_emu_cuMemFree_v2(d)); /* returns although s is blocked */
    CHECK_OK(cr_emu_cuMemFreeHost(h2));
    CHECK_CU(cr_emu_cuMemsetD8_v2(d, 0, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemFree_v2(d), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemHostGetFlags(&flags, h2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemFreeHost(h2), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuMemGetInfo_v2(&f1, &total));
    CHECK_EQ_U64(f1, f0); /* still held by the queued copies */
    CHECK_OK(cr_emu_cuMemAlloc_v2(&d2, N));
    CHECK(d2 != d); /* not reused while in use */
    gate_open(&gate);
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_EQ_INT(h[0], 0x42);
    CHECK_EQ_INT(h[N - 1], 0x42);
    CHECK_OK(cr_emu_cuCtxSynchronize()); /* also waits for the deferred releases */
    CHECK_OK(cr_emu_cuMemGetInfo_v2(&f1, &total));
    CHECK_EQ_U64(f1, f0 + N - N); /* d back, d2 taken */
    CHECK_OK(cr_emu_cuMemFree_v2(d2));
    CHECK_OK(cr_emu_cuMemGetInfo_v2(&f1, &total));
    CHECK_EQ_U64(f1, f0 + N); /* idle: at once */
    CHECK_OK(cr_emu_cuMemFreeHost(h));
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s));
}

/* Graphs as the server builds them: memset, copy, empty and event nodes chained, run in
 * order at each launch on the launch stream; an executable graph is a copy of its graph. */
static void test_graphs(void)
{
    const size_t n = 4096;
    CUdeviceptr a, b;
    CUstream s;
    CUevent ev;
    CUcontext ctx;
    CHECK_OK(cr_emu_cuCtxGetCurrent(&ctx));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&a, n));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&b, n));
    CHECK_OK(cr_emu_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_OK(cr_emu_cuEventCreate(&ev, 0));
    CUgraph g, other;
    CUgraphNode set, copy, empty, record, stray;
    CHECK_OK(cr_emu_cuGraphCreate(&g, 0));
    CHECK_OK(cr_emu_cuGraphCreate(&other, 0));
    CHECK_CU(cr_emu_cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMSET_NODE_PARAMS m = {
        .dst = a, .value = 0x5a, .elementSize = 1, .width = n, .height = 1};
    CHECK_OK(cr_emu_cuGraphAddMemsetNode(&set, g, NULL, 0, &m, ctx));
    m.elementSize = 3;
    CHECK_CU(cr_emu_cuGraphAddMemsetNode(&stray, g, NULL, 0, &m, ctx), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY3D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                       .srcDevice = a,
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                       .dstDevice = b,
                       .WidthInBytes = n,
                       .Height = 1,
                       .Depth = 1};
    CHECK_OK(cr_emu_cuGraphAddMemcpyNode(&copy, g, &set, 1, &c, ctx));
    CHECK_OK(cr_emu_cuGraphAddEmptyNode(&empty, g, &copy, 1));
    CHECK_OK(cr_emu_cuGraphAddEventRecordNode(&record, g, &empty, 1, ev));
    /* a dependency must be a node of the same graph */
    CHECK_CU(cr_emu_cuGraphAddEmptyNode(&stray, other, &record, 1), CUDA_ERROR_INVALID_VALUE);
    /* edges added after their nodes: in the order of addition, with the driver's data */
    CUgraphEdgeData edge = {0};
    CHECK_OK(cr_emu_cuGraphAddDependencies_v2(g, &set, &empty, &edge, 1));
    CHECK_OK(cr_emu_cuGraphAddDependencies_v2(g, &set, &record, NULL, 1));
    CHECK_CU(cr_emu_cuGraphAddDependencies_v2(g, &record, &set, NULL, 1), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cr_emu_cuGraphAddDependencies_v2(g, &set, &set, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    edge.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC; /* a port out of a memset */
    CHECK_CU(cr_emu_cuGraphAddDependencies_v2(g, &set, &copy, &edge, 1), CUDA_ERROR_INVALID_VALUE);
    edge = (CUgraphEdgeData){.to_port = 1};
    CHECK_CU(cr_emu_cuGraphAddDependencies_v2(g, &set, &copy, &edge, 1), CUDA_ERROR_INVALID_VALUE);
    edge = (CUgraphEdgeData){.reserved = {1}};
    CHECK_CU(cr_emu_cuGraphAddDependencies_v2(g, &set, &copy, &edge, 1), CUDA_ERROR_INVALID_VALUE);
    CUgraphNode theirs;
    CHECK_OK(cr_emu_cuGraphAddEmptyNode(&theirs, other, NULL, 0));
    CHECK_CU(cr_emu_cuGraphAddDependencies_v2(g, &theirs, &copy, NULL, 1),
             CUDA_ERROR_INVALID_VALUE);
    CUgraphExec e;
    CHECK_OK(cr_emu_cuGraphInstantiateWithFlags(&e, g, 0));
    /* nodes added later are not the executable graph's */
    m = (CUDA_MEMSET_NODE_PARAMS){
        .dst = b, .value = 0x11, .elementSize = 1, .width = n, .height = 1};
    CHECK_OK(cr_emu_cuGraphAddMemsetNode(&stray, g, &record, 1, &m, ctx));
    CHECK_OK(cr_emu_cuGraphDestroy(g));
    unsigned char out[4096];
    for (int round = 0; round < 2; round++) {
        CHECK_OK(cr_emu_cuMemsetD8_v2(a, 0, n));
        CHECK_OK(cr_emu_cuMemsetD8_v2(b, 0, n));
        CHECK_OK(cr_emu_cuGraphUpload(e, s));
        CHECK_OK(cr_emu_cuGraphLaunch(e, s));
        CHECK_OK(cr_emu_cuEventSynchronize(ev)); /* recorded after the copy */
        CHECK_OK(cr_emu_cuMemcpyDtoH_v2(out, b, n));
        CHECK_EQ_INT(out[0], 0x5a);
        CHECK_EQ_INT(out[n - 1], 0x5a);
    }
    CHECK_CU(cr_emu_cuGraphLaunch(NULL, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuGraphExecDestroy(e));
    CHECK_OK(cr_emu_cuGraphDestroy(other));
    CHECK_OK(cr_emu_cuEventDestroy_v2(ev));
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s));
    CHECK_OK(cr_emu_cuMemFree_v2(a));
    CHECK_OK(cr_emu_cuMemFree_v2(b));
}

int main(void)
{
    test_setup(ARENA, NULL);
    test_order_and_queries();
    test_copies_in_order();
    test_events();
    test_stream_properties();
    test_destroy_with_pending_work();
    test_legacy_stream();
    test_ctx_synchronize();
    test_stream_ordered_allocation();
    test_deferred_frees();
    test_graphs();
    CHECK_DONE();
}
