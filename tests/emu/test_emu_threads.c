/* Concurrency: several threads allocate, copy (sync and async), memset, use events and
 * streams, stream-ordered allocations and host functions at the same time; every byte is
 * checked and all memory is back at the end. Meant to run under -DCR_TSAN=ON as well. */
#include "emu_test.h"

#define ARENA (256ull << 20)
#define THREADS 6
#define ROUNDS 150

typedef struct {
    CUcontext ctx;
    int index;
    int failures;
    _Atomic int *host_calls;
} worker_arg_t;

static void count_fn(void *arg)
{
    atomic_fetch_add((_Atomic int *)arg, 1);
}

#define WCHECK(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            a->failures++;                                                                         \
            fprintf(stderr, "thread %d round %d: %s failed\n", a->index, round, #cond);            \
        }                                                                                          \
    } while (0)

static void *worker(void *arg)
{
    worker_arg_t *a = arg;
    unsigned seed = 1234u + (unsigned)a->index;
    CUstream s;
    CUevent ev;
    int round = -1;
    WCHECK(cr_emu_cuCtxSetCurrent(a->ctx) == CUDA_SUCCESS);
    WCHECK(cr_emu_cuStreamCreate(&s, a->index % 2 ? CU_STREAM_NON_BLOCKING : 0) == CUDA_SUCCESS);
    WCHECK(cr_emu_cuEventCreate(&ev, 0) == CUDA_SUCCESS);
    unsigned char *src = malloc(1 << 20), *dst = malloc(1 << 20);
    for (round = 0; round < ROUNDS; round++) {
        seed = seed * 1103515245u + 12345u;
        size_t n = 1 + (seed >> 8) % (1 << 20);
        CUdeviceptr d1 = 0, d2 = 0, d3 = 0;
        fill_random(src, n, seed);
        WCHECK(cr_emu_cuMemAlloc_v2(&d1, n) == CUDA_SUCCESS);
        WCHECK(cr_emu_cuMemAllocAsync(&d2, n, s) == CUDA_SUCCESS);
        if (!d1 || !d2)
            continue;
        WCHECK(cr_emu_cuMemcpyHtoD_v2(d1, src, n) == CUDA_SUCCESS);
        WCHECK(cr_emu_cuMemcpyDtoDAsync_v2(d2, d1, n, s) == CUDA_SUCCESS);
        WCHECK(cr_emu_cuLaunchHostFunc(s, count_fn, a->host_calls) == CUDA_SUCCESS);
        WCHECK(cr_emu_cuEventRecord(ev, s) == CUDA_SUCCESS);
        memset(dst, 0, n);
        WCHECK(cr_emu_cuMemcpyDtoHAsync_v2(dst, d2, n, s) == CUDA_SUCCESS);
        WCHECK(cr_emu_cuMemFreeAsync(d2, s) == CUDA_SUCCESS);
        WCHECK(cr_emu_cuStreamSynchronize(s) == CUDA_SUCCESS);
        WCHECK(cr_emu_cuEventQuery(ev) == CUDA_SUCCESS);
        WCHECK(memcmp(dst, src, n) == 0);
        /* synchronous memset on the legacy stream and read back */
        if (n >= 4) {
            WCHECK(cr_emu_cuMemsetD32_v2(d1, 0x01010101u * (unsigned)a->index, n / 4) ==
                   CUDA_SUCCESS);
            WCHECK(cr_emu_cuMemcpyDtoH_v2(dst, d1, 4) == CUDA_SUCCESS);
            WCHECK(dst[0] == a->index && dst[3] == a->index);
        }
        if (round % 10 == 0) { /* streams come and go */
            CUstream t;
            WCHECK(cr_emu_cuStreamCreate(&t, 0) == CUDA_SUCCESS);
            WCHECK(cr_emu_cuMemsetD8Async(d1, 0x3c, n, t) == CUDA_SUCCESS);
            WCHECK(cr_emu_cuStreamWaitEvent(s, ev, 0) == CUDA_SUCCESS);
            WCHECK(cr_emu_cuStreamDestroy_v2(t) == CUDA_SUCCESS);
            WCHECK(cr_emu_cuMemAlloc_v2(&d3, 4096) == CUDA_SUCCESS);
            WCHECK(cr_emu_cuMemFree_v2(d3) == CUDA_SUCCESS);
            /* a synchronous copy waits for t (blocking), destroyed or not */
            WCHECK(cr_emu_cuMemcpyDtoH_v2(dst, d1 + n - 1, 1) == CUDA_SUCCESS);
            WCHECK(dst[0] == 0x3c);
        }
        WCHECK(cr_emu_cuMemFree_v2(d1) == CUDA_SUCCESS);
    }
    WCHECK(cr_emu_cuEventDestroy_v2(ev) == CUDA_SUCCESS);
    WCHECK(cr_emu_cuStreamDestroy_v2(s) == CUDA_SUCCESS);
    free(src);
    free(dst);
    return NULL;
}

int main(void)
{
    CUcontext ctx = test_setup(ARENA, NULL);
    pthread_t t[THREADS];
    worker_arg_t args[THREADS];
    _Atomic int host_calls = 0;
    size_t free0, free1, total;
    CHECK_OK(cr_emu_cuMemGetInfo_v2(&free0, &total));
    for (int i = 0; i < THREADS; i++) {
        args[i] = (worker_arg_t){ctx, i, 0, &host_calls};
        pthread_create(&t[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_INT(args[i].failures, 0);
    }
    CHECK_OK(cr_emu_cuCtxSynchronize());
    CHECK_EQ_INT(atomic_load(&host_calls), THREADS * ROUNDS);
    CHECK_OK(cr_emu_cuMemGetInfo_v2(&free1, &total));
    CHECK_EQ_U64(free1, free0);
    CHECK_DONE();
}
