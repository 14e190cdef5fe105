/* The remoting layer's own figures, through the stub (linked as libcuda.so.1), against the
 * server CUDA_REMOTE_ADDR names.
 *
 *   remote_bench [--quick]
 *
 * Prints one JSON object per line, like raw_limits:
 *   sync_call_us          cuStreamQuery on an idle stream (a call that must reach the server)
 *   launch_rate_per_s     launches of an empty kernel, then one synchronize
 *   h2d_gbps / d2h_gbps   copies of SIZE bytes: sync from/to pageable memory ("pageable"),
 *                         async from/to page-locked memory then one synchronize ("pinned")
 * with "size" and "mode" fields where they apply. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, (int)r_);         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char empty_ptx[] = ".version 8.0\n"
                                ".target sm_75\n"
                                ".address_size 64\n"
                                ".visible .entry empty()\n"
                                "{\n"
                                "    ret;\n"
                                "}\n";

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void emit(const char *metric, double value, const char *unit, const char *mode, size_t size)
{
    printf("{\"metric\":\"%s\",\"value\":%.6g,\"unit\":\"%s\"", metric, value, unit);
    if (mode)
        printf(",\"mode\":\"%s\"", mode);
    if (size)
        printf(",\"size\":%zu", size);
    printf("}\n");
    fflush(stdout);
}

static void sync_calls(CUstream s, int n)
{
    double *t = malloc(n * sizeof *t);
    for (int i = 0; i < 200; i++) /* warm up */
        CK(cuStreamQuery(s));
    for (int i = 0; i < n; i++) {
        double t0 = now();
        CK(cuStreamQuery(s));
        t[i] = now() - t0;
    }
    qsort(t, n, sizeof *t, cmp_double);
    emit("sync_call_us", t[n / 2] * 1e6, "us", "p50", 0);
    emit("sync_call_us", t[n * 99 / 100] * 1e6, "us", "p99", 0);
    free(t);
}

static void launches(CUfunction f, CUstream s, int n)
{
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    CK(cuStreamSynchronize(s));
    double t0 = now();
    for (int i = 0; i < n; i++)
        CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    double submitted = now();
    CK(cuStreamSynchronize(s));
    double done = now();
    emit("launch_rate_per_s", n / (done - t0), "1/s", "with_sync", 0);
    emit("launch_rate_per_s", n / (submitted - t0), "1/s", "submit", 0);
}

static void copies(CUstream s, size_t size, int quick)
{
    CUdeviceptr d;
    void *pageable = malloc(size), *pinned;
    CK(cuMemAlloc(&d, size));
    CK(cuMemAllocHost(&pinned, size));
    memset(pageable, 1, size);
    memset(pinned, 2, size);
    /* steady state: the device memory is touched once before anything is timed (the
     * emulated device, like any fresh memory, pays a page fault per page on first use) */
    CK(cuMemsetD8(d, 0, size));
    CK(cuCtxSynchronize());
    /* enough repetitions for ~0.2 s of copying at a few GB/s, at least one */
    int reps = (int)((quick ? 100e6 : 400e6) / size);
    if (reps < 1)
        reps = 1;
    if (reps > 2000)
        reps = 2000;
    /* each mode is timed after one untimed copy of its own: buffers the layers keep for
     * reuse exist by then, as they do in a program's steady state */
    CK(cuMemcpyHtoD(d, pageable, size));
    double t0 = now();
    for (int i = 0; i < reps; i++)
        CK(cuMemcpyHtoD(d, pageable, size));
    emit("h2d_gbps", (double)size * reps / (now() - t0) / 1e9, "GB/s", "pageable", size);
    CK(cuMemcpyDtoH(pageable, d, size));
    t0 = now();
    for (int i = 0; i < reps; i++)
        CK(cuMemcpyDtoH(pageable, d, size));
    emit("d2h_gbps", (double)size * reps / (now() - t0) / 1e9, "GB/s", "pageable", size);
    CK(cuMemcpyHtoDAsync(d, pinned, size, s));
    CK(cuStreamSynchronize(s));
    t0 = now();
    for (int i = 0; i < reps; i++)
        CK(cuMemcpyHtoDAsync(d, pinned, size, s));
    CK(cuStreamSynchronize(s));
    emit("h2d_gbps", (double)size * reps / (now() - t0) / 1e9, "GB/s", "pinned", size);
    CK(cuMemcpyDtoHAsync(pinned, d, size, s));
    CK(cuStreamSynchronize(s));
    t0 = now();
    for (int i = 0; i < reps; i++)
        CK(cuMemcpyDtoHAsync(pinned, d, size, s));
    CK(cuStreamSynchronize(s));
    emit("d2h_gbps", (double)size * reps / (now() - t0) / 1e9, "GB/s", "pinned", size);
    CK(cuMemFreeHost(pinned));
    CK(cuMemFree(d));
    free(pageable);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    CUstream s;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadData(&mod, empty_ptx));
    CK(cuModuleGetFunction(&f, mod, "empty"));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    sync_calls(s, quick ? 2000 : 10000);
    launches(f, s, quick ? 20000 : 200000);
    for (size_t size = 4 << 10; size <= ((size_t)256 << 20); size *= 4)
        copies(s, size, quick);

    CK(cuStreamDestroy(s));
    CK(cuModuleUnload(mod));
    CK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
