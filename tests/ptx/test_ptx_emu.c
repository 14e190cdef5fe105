/* The emulated device runs kernels: nvcc-built fatbins (default flags: sm_75 cubin + compute_75
 * PTX; -arch=sm_90: sm_90 cubin + compute_90 PTX) loaded with cuLibraryLoadData, launched with
 * cuLaunchKernel, results read back with cuMemcpyDtoH. Also: module globals updated by kernels,
 * device printf into a stream's output sink, a fault sticky for its stream (synchronize, query,
 * events recorded after it, the context) and not for others, a cubin without PTX refused,
 * execution switched off, and a hook returning a CUresult.
 * Usage: test_ptx_emu <fixture dir> */
#include <unistd.h>

#include "emu/emu_test.h"

#define ARENA (256ull << 20)

static const char *fixture_dir;

static void *read_fixture(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fixture_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = calloc(1, (size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        exit(1);
    fclose(f);
    return buf;
}

static struct {
    pthread_mutex_t lock;
    char text[4096];
    size_t len;
    int released; /* sink_release calls */
} sink = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void sink_fn(void *user, const char *text, size_t len)
{
    (void)user;
    pthread_mutex_lock(&sink.lock);
    if (sink.len + len < sizeof sink.text) {
        memcpy(sink.text + sink.len, text, len);
        sink.len += len;
        sink.text[sink.len] = 0;
    }
    pthread_mutex_unlock(&sink.lock);
}

static void sink_release(void *user)
{
    if (user == &sink)
        __atomic_add_fetch(&sink.released, 1, __ATOMIC_ACQ_REL);
}

/* vec_add of n elements on stream s through library lib; checks the result. */
static void run_vec_add(CUlibrary lib, CUstream s, int n)
{
    CUkernel k;
    CHECK_OK(cr_emu_cuLibraryGetKernel(&k, lib, "vec_add"));
    size_t bytes = (size_t)n * sizeof(float);
    float *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
    for (int i = 0; i < n; i++) {
        ha[i] = (float)i * 0.5f;
        hb[i] = (float)(n - i);
    }
    CUdeviceptr a, b, c;
    CHECK_OK(cr_emu_cuMemAlloc_v2(&a, bytes));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&b, bytes));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&c, bytes));
    CHECK_OK(cr_emu_cuMemcpyHtoD_v2(a, ha, bytes));
    CHECK_OK(cr_emu_cuMemcpyHtoD_v2(b, hb, bytes));
    CHECK_OK(cr_emu_cuMemsetD8_v2(c, 0, bytes));
    void *args[] = {&a, &b, &c, &n};
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)k, (unsigned)(n + 255) / 256, 1, 1, 256, 1, 1, 0, s,
                                   args, NULL));
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(hc, c, bytes));
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += hc[i] != ha[i] + hb[i];
    CHECK_EQ_INT(bad, 0);
    CHECK_OK(cr_emu_cuMemFree_v2(a));
    CHECK_OK(cr_emu_cuMemFree_v2(b));
    CHECK_OK(cr_emu_cuMemFree_v2(c));
    free(ha);
    free(hb);
    free(hc);
}

static void test_images(const char *fatbin_name)
{
    void *fatbin = read_fixture(fatbin_name);
    CUlibrary lib;
    CUstream s;
    CHECK_OK(cr_emu_cuLibraryLoadData(&lib, fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CHECK_OK(cr_emu_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    run_vec_add(lib, s, 100000);
    run_vec_add(lib, NULL, 1000); /* the legacy stream */

    /* a kernel updating a module global through atomics */
    CUkernel count;
    CHECK_OK(cr_emu_cuLibraryGetKernel(&count, lib, "count"));
    CUdeviceptr p, g;
    size_t gsize;
    CHECK_OK(cr_emu_cuMemAlloc_v2(&p, 4));
    CHECK_OK(cr_emu_cuMemsetD32_v2(p, 0, 1));
    void *args[] = {&p};
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)count, 3, 1, 1, 64, 1, 1, 0, s, args, NULL));
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_OK(cr_emu_cuLibraryGetGlobal(&g, &gsize, lib, "dev_total"));
    int total = 0, pv = 0;
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(&total, g, 4));
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(&pv, p, 4));
    CHECK_EQ_INT(total, 100 + 192);
    CHECK_EQ_INT(pv, 2 * 192);
    CHECK_OK(cr_emu_cuMemFree_v2(p));

    /* device printf goes to the stream's sink, in order with the stream */
    CUkernel hello;
    CHECK_OK(cr_emu_cuLibraryGetKernel(&hello, lib, "hello"));
    CHECK_EQ_INT(cr_emu_stream_set_output(s, sink_fn, sink_release, &sink), 0);
    sink.len = 0;
    sink.text[0] = 0;
    sink.released = 0;
    int v = 7;
    void *hargs[] = {&v};
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)hello, 1, 1, 1, 2, 1, 1, 0, s, hargs, NULL));
    v = 8;
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)hello, 1, 1, 1, 1, 1, 1, 0, s, hargs, NULL));
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_EQ_STR(sink.text, "hello 7 from 0\nhello 7 from 1\nhello 8 from 0\n");
    CHECK_EQ_INT(
        cr_emu_stream_set_output((void *)(uintptr_t)0x999999, sink_fn, sink_release, &sink),
        CR_EINVAL);
    CHECK_EQ_INT(sink.released, 0);
    /* replacing the sink releases the old one; the stream's end releases the last */
    CHECK_EQ_INT(cr_emu_stream_set_output(s, NULL, NULL, NULL), 0);
    CHECK_EQ_INT(sink.released, 1);
    CHECK_EQ_INT(cr_emu_stream_set_output(s, sink_fn, sink_release, &sink), 0);
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s));
    for (int i = 0; i < 1000 && __atomic_load_n(&sink.released, __ATOMIC_ACQUIRE) < 2; i++)
        usleep(1000);
    CHECK_EQ_INT(__atomic_load_n(&sink.released, __ATOMIC_ACQUIRE), 2);
    CHECK_OK(cr_emu_cuLibraryUnload(lib));
    free(fatbin);
}

/* A fault is sticky for its stream: synchronize, query, later events, the context. */
static void test_faults(void)
{
    void *fatbin = read_fixture("emu_default.fatbin");
    CUlibrary lib;
    CUkernel poke;
    CUstream good, bad;
    CUevent before, after;
    CHECK_OK(cr_emu_cuLibraryLoadData(&lib, fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&poke, lib, "poke"));
    CHECK_OK(cr_emu_cuStreamCreate(&good, CU_STREAM_NON_BLOCKING));
    CHECK_OK(cr_emu_cuStreamCreate(&bad, CU_STREAM_NON_BLOCKING));
    CHECK_OK(cr_emu_cuEventCreate(&before, 0));
    CHECK_OK(cr_emu_cuEventCreate(&after, 0));
    CUdeviceptr p;
    CHECK_OK(cr_emu_cuMemAlloc_v2(&p, 64));
    long long idx = 1 << 28, ok_idx = 3;
    void *bad_args[] = {&p, &idx}, *ok_args[] = {&p, &ok_idx};
    CHECK_OK(cr_emu_cuEventRecord(before, bad));
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)poke, 1, 1, 1, 1, 1, 1, 0, bad, bad_args, NULL));
    CHECK_OK(cr_emu_cuEventRecord(after, bad));
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)poke, 1, 1, 1, 1, 1, 1, 0, good, ok_args, NULL));
    CHECK_CU(cr_emu_cuStreamSynchronize(bad), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_CU(cr_emu_cuStreamSynchronize(bad), CUDA_ERROR_ILLEGAL_ADDRESS); /* sticky */
    CHECK_CU(cr_emu_cuStreamQuery(bad), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_CU(cr_emu_cuEventSynchronize(after), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_CU(cr_emu_cuEventQuery(after), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_OK(cr_emu_cuEventSynchronize(before)); /* recorded before the fault */
    CHECK_OK(cr_emu_cuStreamSynchronize(good));  /* other streams are not affected */
    int got = 0;
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(&got, p + 12, 4));
    CHECK_EQ_INT(got, 42);
    CHECK_CU(cr_emu_cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_CU(cr_emu_cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    /* later work on the faulted stream still runs; the stream keeps reporting the fault */
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)poke, 1, 1, 1, 1, 1, 1, 0, bad, ok_args, NULL));
    CHECK_CU(cr_emu_cuStreamSynchronize(bad), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_OK(cr_emu_cuEventRecord(after, good)); /* re-recorded on a good stream */
    CHECK_OK(cr_emu_cuEventSynchronize(after));
    /* destroying the stream ends its fault (once its worker is gone) */
    CHECK_OK(cr_emu_cuStreamDestroy_v2(bad));
    CUresult rc = CUDA_ERROR_ILLEGAL_ADDRESS;
    for (int i = 0; i < 200 && rc != CUDA_SUCCESS; i++) {
        rc = cr_emu_cuCtxSynchronize();
        if (rc != CUDA_SUCCESS)
            sleep_ms(10);
    }
    CHECK_OK(rc);
    CHECK_OK(cr_emu_cuStreamDestroy_v2(good));
    CHECK_OK(cr_emu_cuEventDestroy_v2(before));
    CHECK_OK(cr_emu_cuEventDestroy_v2(after));

    /* execution switched off: launches are only recorded */
    cr_emu_set_execution(0);
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)poke, 1, 1, 1, 1, 1, 1, 0, NULL, bad_args, NULL));
    CHECK_OK(cr_emu_cuCtxSynchronize());
    cr_emu_set_execution(1);
    CHECK_OK(cr_emu_cuMemFree_v2(p));
    CHECK_OK(cr_emu_cuLibraryUnload(lib));
    free(fatbin);

    /* a cubin has no PTX: its kernels cannot run here */
    fatbin = read_fixture("emu_cubin_only.fatbin");
    CHECK_OK(cr_emu_cuLibraryLoadData(&lib, fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel vec;
    CHECK_OK(cr_emu_cuLibraryGetKernel(&vec, lib, "vec_add"));
    CUdeviceptr z = 0;
    int n = 0;
    void *vargs[] = {&z, &z, &z, &n};
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)vec, 1, 1, 1, 1, 1, 1, 0, NULL, vargs, NULL),
             CUDA_ERROR_NOT_SUPPORTED);
    CHECK_OK(cr_emu_cuLibraryUnload(lib));
    free(fatbin);
}

static int hook_result;
static int hook(const cr_emu_launch_t *l, void *user)
{
    (void)l;
    (void)user;
    return hook_result;
}

static void test_hook(void)
{
    void *fatbin = read_fixture("emu_sm90.fatbin");
    CUlibrary lib;
    CUkernel hello;
    CUstream s;
    CHECK_OK(cr_emu_cuLibraryLoadData(&lib, fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&hello, lib, "hello"));
    CHECK_OK(cr_emu_cuStreamCreate(&s, 0));
    int v = 1;
    void *args[] = {&v};
    cr_emu_set_launch_hook(hook, NULL);
    hook_result = CR_EUNSUPPORTED; /* an old-style CR_E* code: once, as LAUNCH_FAILED */
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)hello, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CHECK_CU(cr_emu_cuStreamSynchronize(s), CUDA_ERROR_LAUNCH_FAILED);
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    hook_result = CUDA_ERROR_MISALIGNED_ADDRESS; /* a CUresult: sticky */
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)hello, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CHECK_CU(cr_emu_cuStreamSynchronize(s), CUDA_ERROR_MISALIGNED_ADDRESS);
    CHECK_CU(cr_emu_cuStreamSynchronize(s), CUDA_ERROR_MISALIGNED_ADDRESS);
    cr_emu_set_launch_hook(NULL, NULL);
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s));
    CHECK_OK(cr_emu_cuLibraryUnload(lib));
    free(fatbin);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <fixture dir>\n", argv[0]);
        return 2;
    }
    fixture_dir = argv[1];
    test_setup(ARENA, NULL);
    test_images("emu_default.fatbin");
    test_images("emu_sm90.fatbin");
    test_faults();
    test_hook();
    CHECK_DONE();
}
