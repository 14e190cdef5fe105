/* cuDNN, cuFFT, cuSOLVER and cuRAND through the stub on a real GPU, each result compared with
 * a host reference.
 *
 * Their kernels come as cubins for real architectures (cuRAND's PTX only for compute_121),
 * so the emulated device runs little of them (rand_fft_emu records what); this program is
 * for a GPU behind the server: tests/gpu/run.sh runs it through the stub. It is what a C
 * user of the libraries does: handles, descriptors, workspaces, streams, then the results.
 *   - cuDNN: a 2-D convolution (NCHW, float, padding 1, stride 1) forward, backward data
 *     and backward filter, with algorithms cuDNN ranks for the shapes;
 *   - cuFFT: a 256-point complex forward transform and its inverse, a 64x64 real-to-complex
 *     2-D transform, against a direct DFT in double;
 *   - cuSOLVER: Cholesky (potrf/potrs) of a symmetric positive definite 64x64 system and
 *     LU with pivoting (getrf/getrs) of a general 50x50 one, by their residuals;
 *   - cuRAND: Philox uniform and normal numbers against cuRAND's host generator.
 *
 *   gpu_libraries [PART...]    (parts: cudnn cufft cusolver curand; default: all;
 *                               cudnn_forward: the forward convolution alone)
 *
 * On the emulated device at compute capability 12.1, cuSOLVER's solves, cuRAND and cuDNN's
 * forward convolution compute (their kernels have PTX it can run): CI runs those parts
 * there (libraries.gpu_libraries_emu); cuDNN's backward kernels and cuFFT's are cubins
 * only.
 *
 * Exit status 0 when every result matches, 1 otherwise (each mismatch named on stderr). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cudnn.h>
#include <cufft.h>
#include <curand.h>
#include <cusolverDn.h>

static int failures;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "gpu_libraries: ");                                                    \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* A call whose failure ends the part: says which call and what it returned. */
#define CALL(call, ok)                                                                             \
    do {                                                                                           \
        int rc_ = (int)(call);                                                                     \
        if (rc_ != (ok)) {                                                                         \
            EXPECT(0, "%s:%d: %s returned %d", __FILE__, __LINE__, #call, rc_);                    \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)
#define CUDA(call) CALL(call, cudaSuccess)

/* Deterministic values in [-1, 1). */
static void fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((int)((seed >> 16) & 0x7fff) - 16384) / 16384.0f;
    }
}

/* Largest |got - want| over n values, and where. */
static double max_error(const float *got, const double *want, size_t n, size_t *at)
{
    double worst = 0;
    *at = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= worst)) { /* NaN counts as the worst */
            worst = isnan(e) ? INFINITY : e;
            *at = i;
        }
    }
    return worst;
}

static void compare(const char *what, const float *got, const double *want, size_t n, double tol)
{
    size_t at;
    double e = max_error(got, want, n, &at);
    EXPECT(e <= tol, "%s: element %zu is %.9g, expected %.9g (error %.3g > %.3g)", what, at,
           got[at], want[at], e, tol);
    if (e <= tol)
        printf("%s: %zu values match the host reference (largest error %.3g)\n", what, n, e);
}

static void *to_device(const void *host, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess)
        return NULL;
    if (host && cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

/* ---- cuDNN ---- */

enum { N = 2, C = 3, H = 9, W = 9, K = 4, R = 3, S = 3, PAD = 1 };
#define X_AT(n, c, h, w) ((((size_t)(n)*C + (c)) * H + (h)) * W + (w))
#define Y_AT(n, k, h, w) ((((size_t)(n)*K + (k)) * H + (h)) * W + (w))
#define W_AT(k, c, r, s) ((((size_t)(k)*C + (c)) * R + (r)) * S + (s))

/* The three convolutions by their definitions (cross-correlation, output H x W). */
static void conv_ref(const float *x, const float *w, const float *dy, double *y, double *dx,
                     double *dw)
{
    memset(y, 0, sizeof(double) * N * K * H * W);
    memset(dx, 0, sizeof(double) * N * C * H * W);
    memset(dw, 0, sizeof(double) * K * C * R * S);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int oh = 0; oh < H; oh++)
                for (int ow = 0; ow < W; ow++)
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < R; r++)
                            for (int s = 0; s < S; s++) {
                                int ih = oh - PAD + r, iw = ow - PAD + s;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                y[Y_AT(n, k, oh, ow)] +=
                                    (double)x[X_AT(n, c, ih, iw)] * w[W_AT(k, c, r, s)];
                                dx[X_AT(n, c, ih, iw)] +=
                                    (double)dy[Y_AT(n, k, oh, ow)] * w[W_AT(k, c, r, s)];
                                dw[W_AT(k, c, r, s)] +=
                                    (double)dy[Y_AT(n, k, oh, ow)] * x[X_AT(n, c, ih, iw)];
                            }
}

static void convolutions(int backward)
{
    enum { XN = N * C * H * W, YN = N * K * H * W, WN = K * C * R * S };
    static float x[XN], w[WN], dy[YN], y[YN], dx[XN], dw[WN];
    static double y_ref[YN], dx_ref[XN], dw_ref[WN];
    cudnnHandle_t h = NULL;
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    cudnnFilterDescriptor_t wd = NULL;
    cudnnConvolutionDescriptor_t cd = NULL;
    float *d_x = NULL, *d_w = NULL, *d_dy = NULL, *d_y = NULL, *d_dx = NULL, *d_dw = NULL;
    void *work = NULL;
    const float one = 1, zero = 0;
    int on, oc, oh, ow, got;
    fill(x, XN, 11);
    fill(w, WN, 12);
    fill(dy, YN, 13);
    conv_ref(x, w, dy, y_ref, dx_ref, dw_ref);

    CALL(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
    CALL(cudnnCreateTensorDescriptor(&xd), CUDNN_STATUS_SUCCESS);
    CALL(cudnnCreateTensorDescriptor(&yd), CUDNN_STATUS_SUCCESS);
    CALL(cudnnCreateFilterDescriptor(&wd), CUDNN_STATUS_SUCCESS);
    CALL(cudnnCreateConvolutionDescriptor(&cd), CUDNN_STATUS_SUCCESS);
    CALL(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W),
         CUDNN_STATUS_SUCCESS);
    CALL(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R, S),
         CUDNN_STATUS_SUCCESS);
    CALL(cudnnSetConvolution2dDescriptor(cd, PAD, PAD, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                         CUDNN_DATA_FLOAT),
         CUDNN_STATUS_SUCCESS);
    /* no tensor-core math: the reference is float products summed exactly enough */
    CALL(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH), CUDNN_STATUS_SUCCESS);
    CALL(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &on, &oc, &oh, &ow),
         CUDNN_STATUS_SUCCESS);
    EXPECT(on == N && oc == K && oh == H && ow == W, "cuDNN output dims %dx%dx%dx%d", on, oc, oh,
           ow);
    CALL(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, H, W),
         CUDNN_STATUS_SUCCESS);
    if (!(d_x = to_device(x, sizeof x)) || !(d_w = to_device(w, sizeof w)) ||
        !(d_dy = to_device(dy, sizeof dy)) || !(d_y = to_device(NULL, sizeof y)) ||
        !(d_dx = to_device(NULL, sizeof dx)) || !(d_dw = to_device(NULL, sizeof dw)) ||
        !(work = to_device(NULL, 64 << 20))) {
        EXPECT(0, "cuDNN: device memory could not be had");
        goto done;
    }

    cudnnConvolutionFwdAlgoPerf_t fwd[8];
    CALL(cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 8, &got, fwd),
         CUDNN_STATUS_SUCCESS);
    EXPECT(got > 0 && fwd[0].status == CUDNN_STATUS_SUCCESS, "cuDNN ranks no forward algorithm");
    EXPECT(fwd[0].memory <= (64 << 20), "forward workspace %zu", fwd[0].memory);
    CALL(cudnnConvolutionForward(h, &one, xd, d_x, wd, d_w, cd, fwd[0].algo, work, 64 << 20, &zero,
                                 yd, d_y),
         CUDNN_STATUS_SUCCESS);
    CUDA(cudaMemcpy(y, d_y, sizeof y, cudaMemcpyDeviceToHost));
    compare("cudnn conv forward", y, y_ref, YN, 1e-4);

    if (!backward)
        goto done;
    cudnnConvolutionBwdDataAlgoPerf_t bwd_data[8];
    CALL(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, wd, yd, cd, xd, 8, &got, bwd_data),
         CUDNN_STATUS_SUCCESS);
    EXPECT(got > 0 && bwd_data[0].status == CUDNN_STATUS_SUCCESS,
           "cuDNN ranks no backward-data algorithm");
    CALL(cudnnConvolutionBackwardData(h, &one, wd, d_w, yd, d_dy, cd, bwd_data[0].algo, work,
                                      64 << 20, &zero, xd, d_dx),
         CUDNN_STATUS_SUCCESS);
    CUDA(cudaMemcpy(dx, d_dx, sizeof dx, cudaMemcpyDeviceToHost));
    compare("cudnn conv backward data", dx, dx_ref, XN, 1e-4);

    cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[8];
    CALL(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, xd, yd, cd, wd, 8, &got, bwd_filter),
         CUDNN_STATUS_SUCCESS);
    EXPECT(got > 0 && bwd_filter[0].status == CUDNN_STATUS_SUCCESS,
           "cuDNN ranks no backward-filter algorithm");
    CALL(cudnnConvolutionBackwardFilter(h, &one, xd, d_x, yd, d_dy, cd, bwd_filter[0].algo, work,
                                        64 << 20, &zero, wd, d_dw),
         CUDNN_STATUS_SUCCESS);
    CUDA(cudaMemcpy(dw, d_dw, sizeof dw, cudaMemcpyDeviceToHost));
    compare("cudnn conv backward filter", dw, dw_ref, WN, 1e-3);
done:
    cudaFree(d_x), cudaFree(d_w), cudaFree(d_dy), cudaFree(d_y), cudaFree(d_dx), cudaFree(d_dw);
    cudaFree(work);
    if (cd)
        cudnnDestroyConvolutionDescriptor(cd);
    if (wd)
        cudnnDestroyFilterDescriptor(wd);
    if (yd)
        cudnnDestroyTensorDescriptor(yd);
    if (xd)
        cudnnDestroyTensorDescriptor(xd);
    if (h)
        cudnnDestroy(h);
}

static void part_cudnn(void)
{
    convolutions(1);
}

static void part_cudnn_forward(void)
{
    convolutions(0);
}

/* ---- cuFFT ---- */

/* out[k] = sum_j in[j] e^(sign 2 pi i jk / n), interleaved re/im, with a stride for 2-D. */
static void dft(const double *in, double *out, int n, int stride, int sign)
{
    for (int k = 0; k < n; k++) {
        double re = 0, im = 0;
        for (int j = 0; j < n; j++) {
            double a = sign * 2 * M_PI * (double)((long)j * k % n) / n;
            double xr = in[2 * (size_t)j * stride], xi = in[2 * (size_t)j * stride + 1];
            re += xr * cos(a) - xi * sin(a);
            im += xr * sin(a) + xi * cos(a);
        }
        out[2 * (size_t)k * stride] = re;
        out[2 * (size_t)k * stride + 1] = im;
    }
}

static void part_cufft(void)
{
    enum { L = 256, M = 64 };
    static float in[2 * L], out[2 * L], back[2 * L], real[M * M], half[2 * M * (M / 2 + 1)];
    static double ind[2 * L], want[2 * L], want_back[2 * L], grid[2 * M * M], rows[2 * M * M],
        want2d[2 * M * (M / 2 + 1)];
    cufftHandle p1 = 0, p2 = 0;
    int have1 = 0, have2 = 0;
    void *d = NULL, *d_real = NULL, *d_half = NULL;
    fill(in, 2 * L, 21);
    for (int i = 0; i < 2 * L; i++)
        ind[i] = in[i];
    dft(ind, want, L, 1, -1);
    for (int i = 0; i < 2 * L; i++)
        want_back[i] = ind[i] * L; /* cuFFT's inverse is unnormalized */

    CALL(cufftPlan1d(&p1, L, CUFFT_C2C, 1), CUFFT_SUCCESS);
    have1 = 1;
    if (!(d = to_device(in, sizeof in))) {
        EXPECT(0, "cuFFT: device memory could not be had");
        goto done;
    }
    CALL(cufftExecC2C(p1, d, d, CUFFT_FORWARD), CUFFT_SUCCESS);
    CUDA(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost));
    compare("cufft c2c forward 256", out, want, 2 * L, 1e-3);
    CALL(cufftExecC2C(p1, d, d, CUFFT_INVERSE), CUFFT_SUCCESS);
    CUDA(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
    compare("cufft c2c inverse 256", back, want_back, 2 * L, 1e-2);

    /* 2-D real-to-complex: the rows' DFTs, then the columns', of the first M/2+1 columns */
    fill(real, M * M, 22);
    for (int i = 0; i < M * M; i++)
        grid[2 * i] = real[i], grid[2 * i + 1] = 0;
    for (int r = 0; r < M; r++)
        dft(grid + 2 * r * M, rows + 2 * r * M, M, 1, -1);
    for (int c = 0; c < M; c++)
        dft(rows + 2 * c, grid + 2 * c, M, M, -1);
    for (int r = 0; r < M; r++)
        for (int c = 0; c <= M / 2; c++) {
            want2d[2 * (r * (M / 2 + 1) + c)] = grid[2 * (r * M + c)];
            want2d[2 * (r * (M / 2 + 1) + c) + 1] = grid[2 * (r * M + c) + 1];
        }
    CALL(cufftPlan2d(&p2, M, M, CUFFT_R2C), CUFFT_SUCCESS);
    have2 = 1;
    if (!(d_real = to_device(real, sizeof real)) || !(d_half = to_device(NULL, sizeof half))) {
        EXPECT(0, "cuFFT: device memory could not be had");
        goto done;
    }
    CALL(cufftExecR2C(p2, d_real, d_half), CUFFT_SUCCESS);
    CUDA(cudaMemcpy(half, d_half, sizeof half, cudaMemcpyDeviceToHost));
    compare("cufft r2c 64x64", half, want2d, 2 * M * (M / 2 + 1), 1e-3);
done:
    cudaFree(d), cudaFree(d_real), cudaFree(d_half);
    if (have1)
        cufftDestroy(p1);
    if (have2)
        cufftDestroy(p2);
}

/* ---- cuSOLVER ---- */

/* |A x - b| / (|A| |x| + |b|) in the infinity norm, A column-major n x n. */
static double residual(const float *a, const float *x, const float *b, int n)
{
    double worst = 0, norm_a = 0, norm_x = 0, norm_b = 0;
    for (int i = 0; i < n; i++) {
        double s = 0, row = 0;
        for (int j = 0; j < n; j++) {
            s += (double)a[i + (size_t)j * n] * x[j];
            row += fabs(a[i + (size_t)j * n]);
        }
        worst = fmax(worst, fabs(s - b[i]));
        norm_a = fmax(norm_a, row);
        norm_x = fmax(norm_x, fabs(x[i]));
        norm_b = fmax(norm_b, fabs(b[i]));
    }
    return worst / (norm_a * norm_x + norm_b);
}

static void solve(cusolverDnHandle_t h, int n, int cholesky)
{
    const char *what = cholesky ? "cusolver potrf/potrs" : "cusolver getrf/getrs";
    size_t nn = (size_t)n * n;
    float *a = malloc(nn * sizeof *a), *b = malloc(n * sizeof *b), *x = malloc(n * sizeof *x);
    float *d_a = NULL, *d_b = NULL, *d_work = NULL;
    int *d_info = NULL, *d_pivots = NULL, info = -1, lwork = 0;
    fill(a, nn, cholesky ? 31 : 32);
    fill(b, n, 33);
    if (cholesky) { /* A A^T + n I: symmetric positive definite */
        float *s = malloc(nn * sizeof *s);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double v = i == j ? n : 0;
                for (int p = 0; p < n; p++)
                    v += (double)a[i + (size_t)p * n] * a[j + (size_t)p * n];
                s[i + (size_t)j * n] = (float)v;
            }
        memcpy(a, s, nn * sizeof *a);
        free(s);
    }
    if (!(d_a = to_device(a, nn * sizeof *a)) || !(d_b = to_device(b, n * sizeof *b)) ||
        !(d_info = to_device(NULL, sizeof(int))) ||
        !(d_pivots = to_device(NULL, n * sizeof(int)))) {
        EXPECT(0, "%s: device memory could not be had", what);
        goto done;
    }
    if (cholesky) {
        CALL(cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, d_a, n, &lwork),
             CUSOLVER_STATUS_SUCCESS);
    } else {
        CALL(cusolverDnSgetrf_bufferSize(h, n, n, d_a, n, &lwork), CUSOLVER_STATUS_SUCCESS);
    }
    if (!(d_work = to_device(NULL, (size_t)(lwork > 0 ? lwork : 1) * sizeof(float)))) {
        EXPECT(0, "%s: no workspace", what);
        goto done;
    }
    if (cholesky) {
        CALL(cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, n, d_a, n, d_work, lwork, d_info),
             CUSOLVER_STATUS_SUCCESS);
    } else {
        CALL(cusolverDnSgetrf(h, n, n, d_a, n, d_work, d_pivots, d_info), CUSOLVER_STATUS_SUCCESS);
    }
    CUDA(cudaMemcpy(&info, d_info, sizeof info, cudaMemcpyDeviceToHost));
    EXPECT(info == 0, "%s: the factorization's info is %d", what, info);
    if (cholesky) {
        CALL(cusolverDnSpotrs(h, CUBLAS_FILL_MODE_LOWER, n, 1, d_a, n, d_b, n, d_info),
             CUSOLVER_STATUS_SUCCESS);
    } else {
        CALL(cusolverDnSgetrs(h, CUBLAS_OP_N, n, 1, d_a, n, d_pivots, d_b, n, d_info),
             CUSOLVER_STATUS_SUCCESS);
    }
    CUDA(cudaMemcpy(x, d_b, n * sizeof *x, cudaMemcpyDeviceToHost));
    double r = residual(a, x, b, n);
    EXPECT(r < 1e-5, "%s: relative residual %.3g", what, r);
    if (r < 1e-5)
        printf("%s: %dx%d system solved (relative residual %.3g)\n", what, n, n, r);
done:
    cudaFree(d_a), cudaFree(d_b), cudaFree(d_work), cudaFree(d_info), cudaFree(d_pivots);
    free(a), free(b), free(x);
}

static void part_cusolver(void)
{
    cusolverDnHandle_t h = NULL;
    CALL(cusolverDnCreate(&h), CUSOLVER_STATUS_SUCCESS);
    solve(h, 64, 1);
    solve(h, 50, 0);
done:
    if (h)
        cusolverDnDestroy(h);
}

/* ---- cuRAND ---- */

static void part_curand(void)
{
    enum { COUNT = 1 << 16 };
    static float dev[COUNT], host[COUNT];
    static double want[COUNT];
    curandGenerator_t g = NULL, hg = NULL;
    float *d = NULL;
    CALL(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10), CURAND_STATUS_SUCCESS);
    CALL(curandCreateGeneratorHost(&hg, CURAND_RNG_PSEUDO_PHILOX4_32_10), CURAND_STATUS_SUCCESS);
    CALL(curandSetPseudoRandomGeneratorSeed(g, 2024), CURAND_STATUS_SUCCESS);
    CALL(curandSetPseudoRandomGeneratorSeed(hg, 2024), CURAND_STATUS_SUCCESS);
    if (!(d = to_device(NULL, sizeof dev))) {
        EXPECT(0, "cuRAND: device memory could not be had");
        goto done;
    }
    for (int normal = 0; normal < 2; normal++) {
        CALL(normal ? curandGenerateNormal(g, d, COUNT, 1.0f, 2.0f)
                    : curandGenerateUniform(g, d, COUNT),
             CURAND_STATUS_SUCCESS);
        CALL(normal ? curandGenerateNormal(hg, host, COUNT, 1.0f, 2.0f)
                    : curandGenerateUniform(hg, host, COUNT),
             CURAND_STATUS_SUCCESS);
        CUDA(cudaMemcpy(dev, d, sizeof dev, cudaMemcpyDeviceToHost));
        for (int i = 0; i < COUNT; i++)
            want[i] = host[i];
        /* uniform bit for bit; normal within a few ulps (the device may use faster math) */
        compare(normal ? "curand philox normal" : "curand philox uniform", dev, want, COUNT,
                normal ? 1e-4 : 0);
    }
done:
    cudaFree(d);
    if (g)
        curandDestroyGenerator(g);
    if (hg)
        curandDestroyGenerator(hg);
}

static const struct {
    const char *name;
    void (*run)(void);
    int by_name; /* run only when named (a part of another) */
} parts[] = {
    {"cudnn", part_cudnn},   {"cudnn_forward", part_cudnn_forward, 1},
    {"cufft", part_cufft},   {"cusolver", part_cusolver},
    {"curand", part_curand},
};
#define PARTS (sizeof parts / sizeof parts[0])

int main(int argc, char **argv)
{
    for (size_t i = 0; i < PARTS; i++) {
        int wanted = argc == 1 && !parts[i].by_name;
        for (int a = 1; a < argc; a++)
            wanted |= strcmp(argv[a], parts[i].name) == 0;
        if (wanted)
            parts[i].run();
    }
    for (int a = 1; a < argc; a++) {
        size_t i = 0;
        while (i < PARTS && strcmp(argv[a], parts[i].name) != 0)
            i++;
        EXPECT(i < PARTS, "no part %s (parts: cudnn cudnn_forward cufft cusolver curand)", argv[a]);
    }
    if (failures)
        fprintf(stderr, "gpu_libraries: %d result(s) wrong or missing\n", failures);
    return failures ? 1 : 0;
}
