/* The remoting layer's own figures, through the stub (linked as libcuda.so.1), against the
 * server CUDA_REMOTE_ADDR names.
 *
 *   remote_bench [--quick] [--sizes SIZE,...] [--copies-only]
 *
 * --sizes: the copy sizes to measure (bytes, or with a K, M or G suffix: "1M,64M"); by
 * default 4 KiB to 256 MiB in steps of 4. --copies-only: no sync calls or launches (for a
 * profile of the copies).
 *
 * Prints one JSON object per line, like raw_limits:
 *   sync_call_us          cuStreamQuery on an idle stream (a call that must reach the server)
 *   launch_rate_per_s     launches of an empty kernel, then one synchronize
 *   round_us              a round of 100 empty kernels and a synchronize: launched one by one
 *                         ("launches_100"), or as one CUDA graph captured from them
 *                         ("graph_100"); median of the rounds
 *   h2d_gbps / d2h_gbps   copies of SIZE bytes: sync from/to pageable memory ("pageable"),
 *                         async from/to page-locked memory then one synchronize ("pinned")
 *   bytes_copied          all the bytes the copies moved, untimed ones included (for a
 *                         figure of CPU time per byte, from the CPU time of the processes)
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

/* Rounds of 100 empty kernels, one by one and as a captured graph, each then waited for. */
static void graph_rounds(CUfunction f, CUstream s, int rounds)
{
    enum { KERNELS = 100 };
    CUgraph g;
    CUgraphExec exec;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int i = 0; i < KERNELS; i++)
        CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiate(&exec, g, 0));
    double *t = malloc(sizeof *t * (size_t)rounds);
    if (!t)
        exit(1);
    for (int graph = 0; graph < 2; graph++) {
        for (int r = 0; r < rounds; r++) {
            double t0 = now();
            if (graph)
                CK(cuGraphLaunch(exec, s));
            else
                for (int i = 0; i < KERNELS; i++)
                    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
            CK(cuStreamSynchronize(s));
            t[r] = now() - t0;
        }
        qsort(t, (size_t)rounds, sizeof *t, cmp_double);
        emit("round_us", t[rounds / 2] * 1e6, "us", graph ? "graph_100" : "launches_100", 0);
    }
    free(t);
    CK(cuGraphExecDestroy(exec));
    CK(cuGraphDestroy(g));
}

static double bytes_copied;

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
    bytes_copied += 4.0 * size * (reps + 1); /* four modes, each with one untimed copy */
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

/* "1M,64M" into sizes[]; returns how many, or -1. */
static int parse_sizes(const char *text, size_t *sizes, int max)
{
    int n = 0;
    while (*text) {
        char *end;
        unsigned long long v = strtoull(text, &end, 10);
        int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
        if (shift)
            end++;
        if (end == text || (*end && *end != ',') || v == 0 || n == max)
            return -1;
        sizes[n++] = (size_t)v << shift;
        text = *end ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv)
{
    int quick = 0, nsizes = 0, copies_only = 0;
    size_t sizes[32];
    for (size_t size = 4 << 10; size <= ((size_t)256 << 20); size *= 4)
        sizes[nsizes++] = size;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--copies-only") == 0) {
            copies_only = 1;
        } else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            nsizes = parse_sizes(argv[++i], sizes, 32);
            if (nsizes < 0) {
                fprintf(stderr, "remote_bench: --sizes: sizes like 1M,64M\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: remote_bench [--quick] [--sizes SIZE,...] [--copies-only]\n");
            return 2;
        }
    }
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

    if (!copies_only) {
        sync_calls(s, quick ? 2000 : 10000);
        launches(f, s, quick ? 20000 : 200000);
        graph_rounds(f, s, quick ? 200 : 2000);
    }
    for (int i = 0; i < nsizes; i++)
        copies(s, sizes[i], quick);
    emit("bytes_copied", bytes_copied, "B", NULL, 0);

    CK(cuStreamDestroy(s));
    CK(cuModuleUnload(mod));
    CK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
