/* cuBLAS through the stub on the emulated device: what computes and where each routine stops.
 *
 * cuBLAS 13 ships PTX only for compute_120, so the emulated device can run its kernels only
 * when it reports compute capability 12.0 (run.py starts cuda-remoted with
 * --emu-compute-capability 12.0). Each routine below runs on a stream of its own (a failed
 * launch is sticky for its stream only) and is compared with a host reference. The table
 * `expected` records, per routine, what happens today: it computes (its result matches the
 * reference), or it stops in an exact way (the cuBLAS status, the error of the stream's
 * synchronization, and a pattern the server's log must match that names the cause: the
 * image or kernel the device cannot run, the PTX instruction the interpreter does not
 * know), or it is not run (no handle). Any difference, progress included, fails the test,
 * which then prints the observed outcome as a table entry to paste.
 *
 *   cublas_emu [--real-device] [ROUTINE...]
 *                (default: all, in table order; cublas_create always first)
 *
 * --real-device: the server runs a real GPU (tests/gpu/run.sh), where every routine must
 * compute whatever the table records for the emulated device.
 *
 * Exit status: 0 when every routine behaved as recorded, 1 otherwise. Lines
 * `CR_EXPECT_LOG <regex>` are for run.py, which checks them against the server's log. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

typedef struct {
    int ran;               /* 0: not run, there is no cuBLAS handle (cublasCreate failed) */
    cublasStatus_t status; /* what the cuBLAS call returned */
    cudaError_t sync;      /* then cudaStreamSynchronize of its stream */
    int computes;          /* the result matched the host reference */
} outcome_t;

typedef struct {
    const char *name;
    outcome_t outcome;
    /* when it stops: a regular expression the server log must match (NULL: none), naming
     * what stopped it */
    const char *server_log;
} expectation_t;

// clang-format off
#define COMPUTES {1, CUBLAS_STATUS_SUCCESS, cudaSuccess, 1}
#define STOPS(status, sync) {1, status, sync, 0}
#define NOT_RUN {0, CUBLAS_STATUS_SUCCESS, cudaSuccess, 0}
// clang-format on

/* What each routine does today on the emulated device at compute capability 12.0, with
 * the stub reporting lazy module loading as NVIDIA's driver does by default (cudart loads a
 * fatbin when its first kernel is used; with eager loading it loaded every fatbin at the
 * first context use, and one of libcublas's holds only sm_75 SASS, which failed
 * cublasCreate): cublas_create, the small SGEMM (cuBLAS's own gemmSN kernel), sgemv, saxpy,
 * sdot and cublas_destroy compute; the larger SGEMMs and DGEMM stop because the kernels
 * cuBLAS picks for them come from libcublasLt as sm_120 cubins without PTX. */
#define NO_PTX(kernel) "no PTX for kernel .*" kernel
static const expectation_t expected[] = {
    {"cublas_create", COMPUTES, NULL},
    {"sgemm_64x64x64", STOPS(CUBLAS_STATUS_EXECUTION_FAILED, cudaSuccess),
     NO_PTX("cutlass_80_simt_sgemm_64x64_8x5_nn_align1")},
    {"sgemm_37x53x29", STOPS(CUBLAS_STATUS_EXECUTION_FAILED, cudaErrorNotSupported),
     NO_PTX("cutlass_80_simt_sgemm_64x64_8x5_nn_align1")},
    {"sgemm_16x16x16", COMPUTES, NULL},
    {"dgemm_48x40x24", STOPS(CUBLAS_STATUS_SUCCESS, cudaErrorNotSupported),
     NO_PTX("cutlass_80_tensorop_d884gemm_32x32_16x5_nn_align1")},
    {"sgemv_100x70", COMPUTES, NULL},
    {"saxpy_1000", COMPUTES, NULL},
    {"sdot_1000", COMPUTES, NULL},
    {"cublas_destroy", COMPUTES, NULL},
};
#define ROUTINES (sizeof expected / sizeof expected[0])

static cublasHandle_t handle;

/* ---- data and references ---- */

/* Deterministic values in [-1, 1) with few significant bits, so sums are nearly exact. */
static void fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((int)((seed >> 16) & 0xff) - 128) / 128.0f;
    }
}

static void fill_double(double *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (double)((int)((seed >> 16) & 0xffff) - 32768) / 32768.0;
    }
}

/* Column-major C = alpha * A * B + beta * C, A m x k, B k x n. */
static void gemm_ref(int m, int n, int k, double alpha, const double *a, const double *b,
                     double beta, double *c)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += a[i + (size_t)p * m] * b[p + (size_t)j * k];
            c[i + (size_t)j * m] = alpha * s + beta * c[i + (size_t)j * m];
        }
}

/* Whether got matches want within tol (relative to the larger of 1 and |want|); prints the
 * first mismatch. */
static int close_enough(const char *what, const double *got, const double *want, size_t n,
                        double tol)
{
    for (size_t i = 0; i < n; i++) {
        double scale = fabs(want[i]) > 1 ? fabs(want[i]) : 1;
        if (!(fabs(got[i] - want[i]) <= tol * scale)) {
            fprintf(stderr, "%s: element %zu is %.9g, expected %.9g\n", what, i, got[i], want[i]);
            return 0;
        }
    }
    return 1;
}

/* ---- device helpers: a failure here is the harness's, not cuBLAS's ---- */

#define CHECK_CUDA(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                   \
                    cudaGetErrorName(e_));                                                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void *to_device(const void *host, size_t bytes)
{
    void *d = NULL;
    CHECK_CUDA(cudaMalloc(&d, bytes));
    CHECK_CUDA(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* Copies back after the routine's stream synchronized; a sticky stream error does not
 * stop a synchronous copy on the legacy stream of another stream's failure. */
static int from_device(void *host, const void *d, size_t bytes)
{
    return cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}

/* ---- the routines: each returns its outcome ---- */

typedef struct {
    cudaStream_t stream;
    outcome_t out;
} run_t;

static void begin(run_t *r)
{
    memset(r, 0, sizeof *r);
    r->out.ran = 1;
    CHECK_CUDA(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
    if (cublasSetStream(handle, r->stream) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasSetStream failed\n");
        exit(1);
    }
}

static outcome_t end(run_t *r)
{
    r->out.sync = cudaStreamSynchronize(r->stream);
    cudaGetLastError(); /* a launch error is reported by the synchronization above */
    cudaStreamDestroy(r->stream);
    return r->out;
}

static outcome_t run_sgemm(int m, int n, int k, const char *what)
{
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c);
    double *ad = malloc(na * sizeof *ad), *bd = malloc(nb * sizeof *bd),
           *want = malloc(nc * sizeof *want), *got = malloc(nc * sizeof *got);
    const float alpha = 1.5f, beta = -0.5f;
    run_t r;
    fill(a, na, 1);
    fill(b, nb, 2);
    fill(c, nc, 3);
    for (size_t i = 0; i < na; i++)
        ad[i] = a[i];
    for (size_t i = 0; i < nb; i++)
        bd[i] = b[i];
    for (size_t i = 0; i < nc; i++)
        want[i] = c[i];
    gemm_ref(m, n, k, alpha, ad, bd, beta, want);
    float *da = to_device(a, na * sizeof *a), *db = to_device(b, nb * sizeof *b),
          *dc = to_device(c, nc * sizeof *c);
    begin(&r);
    r.out.status =
        cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da, m, db, k, &beta, dc, m);
    end(&r);
    if (r.out.status == CUBLAS_STATUS_SUCCESS && r.out.sync == cudaSuccess &&
        from_device(c, dc, nc * sizeof *c)) {
        for (size_t i = 0; i < nc; i++)
            got[i] = c[i];
        r.out.computes = close_enough(what, got, want, nc, 1e-4);
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    free(a), free(b), free(c), free(ad), free(bd), free(want), free(got);
    return r.out;
}

static outcome_t run_dgemm(int m, int n, int k)
{
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    double *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c),
           *want = malloc(nc * sizeof *want);
    const double alpha = -0.75, beta = 2.0;
    run_t r;
    fill_double(a, na, 4);
    fill_double(b, nb, 5);
    fill_double(c, nc, 6);
    memcpy(want, c, nc * sizeof *c);
    gemm_ref(m, n, k, alpha, a, b, beta, want);
    double *da = to_device(a, na * sizeof *a), *db = to_device(b, nb * sizeof *b),
           *dc = to_device(c, nc * sizeof *c);
    begin(&r);
    r.out.status =
        cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da, m, db, k, &beta, dc, m);
    end(&r);
    if (r.out.status == CUBLAS_STATUS_SUCCESS && r.out.sync == cudaSuccess &&
        from_device(c, dc, nc * sizeof *c))
        r.out.computes = close_enough("dgemm", c, want, nc, 1e-12);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    free(a), free(b), free(c), free(want);
    return r.out;
}

/* y = alpha * A * x + beta * y, A m x n column-major. */
static outcome_t run_sgemv(int m, int n)
{
    float *a = malloc((size_t)m * n * sizeof *a), *x = malloc(n * sizeof *x),
          *y = malloc(m * sizeof *y);
    double *want = malloc(m * sizeof *want), *got = malloc(m * sizeof *got);
    const float alpha = 2.0f, beta = 0.25f;
    run_t r;
    fill(a, (size_t)m * n, 7);
    fill(x, n, 8);
    fill(y, m, 9);
    for (int i = 0; i < m; i++) {
        double s = 0;
        for (int j = 0; j < n; j++)
            s += (double)a[i + (size_t)j * m] * x[j];
        want[i] = alpha * s + beta * y[i];
    }
    float *da = to_device(a, (size_t)m * n * sizeof *a), *dx = to_device(x, n * sizeof *x),
          *dy = to_device(y, m * sizeof *y);
    begin(&r);
    r.out.status = cublasSgemv(handle, CUBLAS_OP_N, m, n, &alpha, da, m, dx, 1, &beta, dy, 1);
    end(&r);
    if (r.out.status == CUBLAS_STATUS_SUCCESS && r.out.sync == cudaSuccess &&
        from_device(y, dy, m * sizeof *y)) {
        for (int i = 0; i < m; i++)
            got[i] = y[i];
        r.out.computes = close_enough("sgemv", got, want, (size_t)m, 1e-5);
    }
    cudaFree(da);
    cudaFree(dx);
    cudaFree(dy);
    free(a), free(x), free(y), free(want), free(got);
    return r.out;
}

static outcome_t run_saxpy(int n)
{
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    double *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    const float alpha = -3.0f;
    run_t r;
    fill(x, n, 10);
    fill(y, n, 11);
    for (int i = 0; i < n; i++)
        want[i] = (double)alpha * x[i] + y[i];
    float *dx = to_device(x, n * sizeof *x), *dy = to_device(y, n * sizeof *y);
    begin(&r);
    r.out.status = cublasSaxpy(handle, n, &alpha, dx, 1, dy, 1);
    end(&r);
    if (r.out.status == CUBLAS_STATUS_SUCCESS && r.out.sync == cudaSuccess &&
        from_device(y, dy, n * sizeof *y)) {
        for (int i = 0; i < n; i++)
            got[i] = y[i];
        r.out.computes = close_enough("saxpy", got, want, (size_t)n, 1e-6);
    }
    cudaFree(dx);
    cudaFree(dy);
    free(x), free(y), free(want), free(got);
    return r.out;
}

/* The result goes to host memory (the default pointer mode): cuBLAS synchronizes itself. */
static outcome_t run_sdot(int n)
{
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), result = NAN;
    double want = 0, got;
    run_t r;
    fill(x, n, 12);
    fill(y, n, 13);
    for (int i = 0; i < n; i++)
        want += (double)x[i] * y[i];
    float *dx = to_device(x, n * sizeof *x), *dy = to_device(y, n * sizeof *y);
    begin(&r);
    r.out.status = cublasSdot(handle, n, dx, 1, dy, 1, &result);
    end(&r);
    got = result;
    if (r.out.status == CUBLAS_STATUS_SUCCESS && r.out.sync == cudaSuccess)
        r.out.computes = close_enough("sdot", &got, &want, 1, 1e-5);
    cudaFree(dx);
    cudaFree(dy);
    free(x), free(y);
    return r.out;
}

static outcome_t run_routine(const char *name)
{
    outcome_t none = COMPUTES;
    if (strcmp(name, "cublas_create") == 0) {
        none.status = cublasCreate(&handle);
        none.computes = none.status == CUBLAS_STATUS_SUCCESS;
        none.sync = cudaDeviceSynchronize();
        return none;
    }
    if (strcmp(name, "cublas_destroy") == 0) {
        none.status = cublasDestroy(handle);
        none.computes = none.status == CUBLAS_STATUS_SUCCESS;
        handle = NULL;
        return none;
    }
    if (strcmp(name, "sgemm_64x64x64") == 0)
        return run_sgemm(64, 64, 64, "sgemm 64x64x64");
    if (strcmp(name, "sgemm_37x53x29") == 0)
        return run_sgemm(37, 53, 29, "sgemm 37x53x29");
    if (strcmp(name, "sgemm_16x16x16") == 0)
        return run_sgemm(16, 16, 16, "sgemm 16x16x16");
    if (strcmp(name, "dgemm_48x40x24") == 0)
        return run_dgemm(48, 40, 24);
    if (strcmp(name, "sgemv_100x70") == 0)
        return run_sgemv(100, 70);
    if (strcmp(name, "saxpy_1000") == 0)
        return run_saxpy(1000);
    if (strcmp(name, "sdot_1000") == 0)
        return run_sdot(1000);
    fprintf(stderr, "no routine %s\n", name);
    exit(2);
}

static const char *status_name(cublasStatus_t s)
{
    switch (s) {
#define NAME(x)                                                                                    \
    case x:                                                                                        \
        return #x;
        NAME(CUBLAS_STATUS_SUCCESS)
        NAME(CUBLAS_STATUS_NOT_INITIALIZED)
        NAME(CUBLAS_STATUS_ALLOC_FAILED)
        NAME(CUBLAS_STATUS_INVALID_VALUE)
        NAME(CUBLAS_STATUS_ARCH_MISMATCH)
        NAME(CUBLAS_STATUS_MAPPING_ERROR)
        NAME(CUBLAS_STATUS_EXECUTION_FAILED)
        NAME(CUBLAS_STATUS_INTERNAL_ERROR)
        NAME(CUBLAS_STATUS_NOT_SUPPORTED)
        NAME(CUBLAS_STATUS_LICENSE_ERROR)
#undef NAME
    }
    return "(unknown cublasStatus_t)";
}

/* The outcome as a table entry, ready to paste into `expected`; an observed one that stops
 * needs its server log pattern in place of "...". */
static void print_outcome(FILE *f, const char *name, const outcome_t *o, const char *log)
{
    if (!o->ran)
        fprintf(f, "    {\"%s\", NOT_RUN, NULL},\n", name);
    else if (o->computes && o->status == CUBLAS_STATUS_SUCCESS && o->sync == cudaSuccess)
        fprintf(f, "    {\"%s\", COMPUTES, NULL},\n", name);
    else {
        fprintf(f, "    {\"%s\", STOPS(%s, %s), \"", name, status_name(o->status),
                cudaGetErrorName(o->sync));
        for (const char *c = log ? log : "..."; *c; c++) /* as a C string literal */
            fprintf(f, *c == '\\' || *c == '"' ? "\\%c" : "%c", *c);
        fprintf(f, "\"},%s\n",
                o->status == CUBLAS_STATUS_SUCCESS && o->sync == cudaSuccess
                    ? "  /* ran, but the result is wrong */"
                    : "");
    }
}

static const expectation_t *find(const char *name)
{
    for (size_t i = 0; i < ROUTINES; i++)
        if (strcmp(expected[i].name, name) == 0)
            return &expected[i];
    fprintf(stderr, "no routine %s\n", name);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *order[ROUTINES + 1];
    size_t count = 0;
    int failures = 0, first = 1;
    const int real_device = argc > 1 && strcmp(argv[1], "--real-device") == 0;
    static const expectation_t computes = {NULL, COMPUTES, NULL};
    first += real_device;
    order[count++] = "cublas_create";
    for (int i = first; i < argc && count < ROUTINES + 1; i++)
        if (strcmp(argv[i], "cublas_create") != 0)
            order[count++] = find(argv[i])->name;
    if (argc == first)
        for (size_t i = 1; i < ROUTINES; i++)
            order[count++] = expected[i].name;
    for (size_t i = 0; i < count; i++) {
        expectation_t real = computes;
        const expectation_t *e = find(order[i]);
        if (real_device) {
            real.name = e->name;
            e = &real;
        }
        outcome_t got = NOT_RUN;
        if (strcmp(e->name, "cublas_create") == 0 || handle)
            got = run_routine(e->name);
        int same =
            got.ran == e->outcome.ran && got.computes == e->outcome.computes &&
            (got.computes || (got.status == e->outcome.status && got.sync == e->outcome.sync));
        if (!got.ran)
            printf("%-16s not run: no cuBLAS handle\n", e->name);
        else
            printf("%-16s %s (status %s, stream %s)\n", e->name,
                   got.computes ? "computes" : "stops", status_name(got.status),
                   cudaGetErrorName(got.sync));
        if (same && got.ran && !got.computes && e->server_log)
            printf("CR_EXPECT_LOG %s\n", e->server_log);
        fflush(stdout);
        if (!same) {
            failures++;
            fprintf(stderr, "%s: expected\n", e->name);
            print_outcome(stderr, e->name, &e->outcome, e->server_log);
            fprintf(stderr, "  observed\n");
            print_outcome(stderr, e->name, &got, NULL);
        }
    }
    if (failures)
        fprintf(stderr, "%d routine(s) did not behave as recorded\n", failures);
    return failures ? 1 : 0;
}
