// templates: templated kernels instantiated for several types.
//  - axpy<T> for int (exact, with wraparound-free values), float and double (within 1e-6 /
//    1e-14 of |a*x| + |y|);
//  - transform<T, F> with functors: Square, an AffineClamp<T> functor with state passed by
//    value, and a lambda-free composed functor Compose<F, G>;
//  - a kernel templated on a non-type parameter (unrolled dot product of N-element rows);
//  - a templated struct type Pair<T> read and written by value.
// int and the exactly representable float/double cases are compared bit for bit.
#include "kt.h"

#include <vector>

template <typename T>
__global__ void axpy(T a, const T *x, T *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

template <typename T, typename F>
__global__ void transform(const T *in, T *out, int n, F f)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        out[i] = f(in[i]);
}

struct Square {
    template <typename T>
    __host__ __device__ T operator()(T v) const { return v * v; }
};

template <typename T>
struct AffineClamp {
    T scale, shift, lo, hi;
    __host__ __device__ T operator()(T v) const
    {
        T r = v * scale + shift;
        return r < lo ? lo : (r > hi ? hi : r);
    }
};

template <typename F, typename G>
struct Compose {
    F f;
    G g;
    template <typename T>
    __host__ __device__ T operator()(T v) const { return f(g(v)); }
};

template <int N, typename T>
__global__ void dot_rows(const T *m, const T *v, T *out, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    T acc = 0;
#pragma unroll
    for (int j = 0; j < N; j++)
        acc += m[r * N + j] * v[j];
    out[r] = acc;
}

template <typename T>
struct Pair {
    T first;
    T second;
};

template <typename T>
__global__ void swap_sum(const Pair<T> *in, Pair<T> *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        Pair<T> p = in[i];
        out[i] = Pair<T>{p.second, (T)(p.first + p.second)};
    }
}

template <typename T>
static T *to_device(const std::vector<T> &h)
{
    T *d;
    CHECK_CUDA(cudaMalloc(&d, h.size() * sizeof(T)));
    CHECK_CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

template <typename T>
static std::vector<T> to_host(const T *d, size_t n)
{
    std::vector<T> h(n);
    CHECK_CUDA(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

static void same(const char *what, size_t i, int got, int e) { kt_check_i64(what, i, got, e); }
static void same(const char *what, size_t i, float got, float e) { kt_check_f32_exact(what, i, got, e); }
static void same(const char *what, size_t i, double got, double e) { kt_check_f64_exact(what, i, got, e); }

// exact: inputs are small integers (or halves), so every result is exactly representable.
template <typename T>
static void test_type(const char *tname, KtRng &rng)
{
    const int n = 50000;
    std::vector<T> x(n), y(n), r;
    for (int i = 0; i < n; i++) {
        x[i] = (T)rng.range(-1000, 1000);
        y[i] = (T)rng.range(-100000, 100000);
        if ((T)0.5 != 0) {  // floating types: add a fraction
            x[i] = x[i] + (T)0.5;
            y[i] = y[i] - (T)0.25;
        }
    }
    T *dx = to_device(x), *dy = to_device(y), *dout;
    CHECK_CUDA(cudaMalloc(&dout, n * sizeof(T)));
    char what[128];

    const T a = (T)3;
    axpy<T><<<(n + 255) / 256, 256>>>(a, dx, dy, n);
    KT_SYNC();
    r = to_host(dy, n);
    snprintf(what, sizeof what, "axpy<%s>", tname);
    for (int i = 0; i < n; i++)
        same(what, i, r[i], (T)(a * x[i] + y[i]));

    transform<<<32, 128>>>(dx, dout, n, Square());
    KT_SYNC();
    r = to_host(dout, n);
    snprintf(what, sizeof what, "transform<%s, Square>", tname);
    for (int i = 0; i < n; i++)
        same(what, i, r[i], (T)(x[i] * x[i]));

    AffineClamp<T> ac{(T)2, (T)-7, (T)-1500, (T)900};
    transform<<<20, 96>>>(dx, dout, n, ac);
    KT_SYNC();
    r = to_host(dout, n);
    snprintf(what, sizeof what, "transform<%s, AffineClamp>", tname);
    for (int i = 0; i < n; i++)
        same(what, i, r[i], ac(x[i]));

    Compose<AffineClamp<T>, Square> cs{ac, Square()};
    transform<<<7, 256>>>(dx, dout, n, cs);
    KT_SYNC();
    r = to_host(dout, n);
    snprintf(what, sizeof what, "transform<%s, Compose<AffineClamp, Square>>", tname);
    for (int i = 0; i < n; i++)
        same(what, i, r[i], cs(x[i]));

    // dot_rows<12>: 1000 rows of x against w = (-5, -4, ..., 6)
    const int rows = 1000;
    std::vector<T> w(12);
    for (int j = 0; j < 12; j++)
        w[j] = (T)(j - 5);
    T *dw = to_device(w);
    dot_rows<12, T><<<(rows + 63) / 64, 64>>>(dx, dw, dout, rows);
    KT_SYNC();
    r = to_host(dout, rows);
    snprintf(what, sizeof what, "dot_rows<12, %s>", tname);
    for (int i = 0; i < rows; i++) {
        T acc = 0;
        for (int j = 0; j < 12; j++)
            acc += x[i * 12 + j] * w[j];
        same(what, i, r[i], acc);
    }

    // Pair<T>
    const int np = 3000;
    std::vector<Pair<T>> p(np);
    for (int i = 0; i < np; i++)
        p[i] = Pair<T>{x[i], y[i]};
    Pair<T> *dp = to_device(p), *dq;
    CHECK_CUDA(cudaMalloc(&dq, np * sizeof(Pair<T>)));
    swap_sum<T><<<(np + 127) / 128, 128>>>(dp, dq, np);
    KT_SYNC();
    std::vector<Pair<T>> q = to_host(dq, np);
    snprintf(what, sizeof what, "swap_sum<%s>", tname);
    for (int i = 0; i < np; i++) {
        same(what, 2 * i, q[i].first, y[i]);
        same(what, 2 * i + 1, q[i].second, (T)(x[i] + y[i]));
    }

    CHECK_CUDA(cudaFree(dx));
    CHECK_CUDA(cudaFree(dy));
    CHECK_CUDA(cudaFree(dout));
    CHECK_CUDA(cudaFree(dp));
    CHECK_CUDA(cudaFree(dq));
    CHECK_CUDA(cudaFree(dw));
}

// Arbitrary values: axpy within a tolerance (the device may fuse a*x + y).
template <typename T>
static void test_inexact(const char *tname, double rel, KtRng &rng)
{
    const int n = 20000;
    std::vector<T> x(n), y(n);
    for (int i = 0; i < n; i++) {
        x[i] = (T)((rng.unit() - 0.5) * 3.3);
        y[i] = (T)((rng.unit() - 0.5) * 17.1);
    }
    T *dx = to_device(x), *dy = to_device(y);
    const T a = (T)1.2345678901234;
    axpy<T><<<(n + 255) / 256, 256>>>(a, dx, dy, n);
    KT_SYNC();
    std::vector<T> r = to_host(dy, n);
    char what[64];
    snprintf(what, sizeof what, "axpy<%s> (arbitrary values)", tname);
    for (int i = 0; i < n; i++)
        kt_check_close(what, i, r[i], (double)a * x[i] + y[i], rel,
                       std::fabs((double)a * x[i]) + std::fabs((double)y[i]));
    CHECK_CUDA(cudaFree(dx));
    CHECK_CUDA(cudaFree(dy));
}

int main()
{
    kt_start("templates");
    KtRng rng(9);
    test_type<int>("int", rng);
    test_type<float>("float", rng);
    test_type<double>("double", rng);
    test_inexact<float>("float", 3e-7, rng);
    test_inexact<double>("double", 1e-15, rng);
    kt_pass();
    return 0;
}
