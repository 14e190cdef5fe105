// Kernel execution speed: a vector add of 1 M floats and a 256x256 tiled matrix multiply,
// timed through the runtime (launch + synchronize, the copies outside the timing), beside the
// same computation as a plain host loop in this process. On the emulated device the kernels
// run on the PTX interpreter, so the ratio says how much slower interpreting is than native
// host code. Prints one JSON line per figure for bench/run.py; checks every result.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#define CHECK_CUDA(call)                                                                     \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,             \
                    cudaGetErrorString(e_));                                                 \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

enum { TILE = 16, DIM = 256, VEC = 1 << 20 };

__global__ void vector_add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

__global__ void matmul_tiled(const float *a, const float *b, float *c, int n)
{
    __shared__ float ta[TILE][TILE], tb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0;
    for (int t = 0; t < n / TILE; t++) {
        ta[threadIdx.y][threadIdx.x] = a[row * n + t * TILE + threadIdx.x];
        tb[threadIdx.y][threadIdx.x] = b[(t * TILE + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        __syncthreads();
    }
    c[row * n + col] = sum;
}

static double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static void emit(const char *metric, const char *mode, double value)
{
    printf("{\"metric\":\"%s\",\"mode\":\"%s\",\"value\":%.6g}\n", metric, mode, value);
}

// Median of `runs` timings of fn().
template <typename F>
static double median_time(int runs, F fn)
{
    std::vector<double> t;
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        fn();
        t.push_back(now_s() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static void bench_vector_add(int runs)
{
    std::vector<float> a(VEC), b(VEC), c(VEC), ref(VEC);
    for (int i = 0; i < VEC; i++) {
        a[i] = i * 0.25f;
        b[i] = 1000.0f - i;
    }
    float *da, *db, *dc;
    CHECK_CUDA(cudaMalloc(&da, VEC * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&db, VEC * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dc, VEC * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(da, a.data(), VEC * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(db, b.data(), VEC * sizeof(float), cudaMemcpyHostToDevice));
    auto launch = [&] {
        vector_add<<<VEC / 256, 256>>>(da, db, dc, VEC);
        CHECK_CUDA(cudaDeviceSynchronize());
    };
    double first = median_time(1, launch); // includes preparing the kernel's code
    double kernel = median_time(runs, launch);
    CHECK_CUDA(cudaMemcpy(c.data(), dc, VEC * sizeof(float), cudaMemcpyDeviceToHost));
    double host = median_time(runs, [&] {
        for (int i = 0; i < VEC; i++)
            ref[i] = a[i] + b[i];
        __asm__ volatile("" : : "r"(ref.data()) : "memory"); // keep the loop
    });
    for (int i = 0; i < VEC; i++)
        if (c[i] != ref[i]) {
            fprintf(stderr, "vector_add: c[%d] = %g, expected %g\n", i, c[i], ref[i]);
            exit(1);
        }
    emit("first_launch_s", "vector_add_1m", first);
    emit("kernel_s", "vector_add_1m", kernel);
    emit("host_s", "vector_add_1m", host);
    CHECK_CUDA(cudaFree(da));
    CHECK_CUDA(cudaFree(db));
    CHECK_CUDA(cudaFree(dc));
}

static void bench_matmul(int runs)
{
    const int n = DIM;
    std::vector<float> a(n * n), b(n * n), c(n * n), ref(n * n);
    for (int i = 0; i < n * n; i++) {
        a[i] = (float)((i * 7) % 13) - 6;
        b[i] = (float)((i * 5) % 11) - 5;
    }
    float *da, *db, *dc;
    size_t bytes = (size_t)n * n * sizeof(float);
    CHECK_CUDA(cudaMalloc(&da, bytes));
    CHECK_CUDA(cudaMalloc(&db, bytes));
    CHECK_CUDA(cudaMalloc(&dc, bytes));
    CHECK_CUDA(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
    auto launch = [&] {
        matmul_tiled<<<dim3(n / TILE, n / TILE), dim3(TILE, TILE)>>>(da, db, dc, n);
        CHECK_CUDA(cudaDeviceSynchronize());
    };
    double first = median_time(1, launch);
    double kernel = median_time(runs, launch);
    CHECK_CUDA(cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost));
    double host = median_time(runs, [&] {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                float sum = 0;
                for (int k = 0; k < n; k++)
                    sum += a[i * n + k] * b[k * n + j];
                ref[i * n + j] = sum;
            }
        __asm__ volatile("" : : "r"(ref.data()) : "memory");
    });
    // small integers: every partial sum is exact, so the order of the additions is moot
    for (int i = 0; i < n * n; i++)
        if (c[i] != ref[i]) {
            fprintf(stderr, "matmul: c[%d] = %g, expected %g\n", i, c[i], ref[i]);
            exit(1);
        }
    emit("first_launch_s", "matmul_256", first);
    emit("kernel_s", "matmul_256", kernel);
    emit("host_s", "matmul_256", host);
    CHECK_CUDA(cudaFree(da));
    CHECK_CUDA(cudaFree(db));
    CHECK_CUDA(cudaFree(dc));
}

int main(int argc, char **argv)
{
    int runs = argc > 1 && std::string(argv[1]) == "--quick" ? 1 : 5;
    bench_vector_add(runs);
    bench_matmul(runs);
    return 0;
}
