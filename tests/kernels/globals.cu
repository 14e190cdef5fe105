// globals: module-scope variables read and written by kernels.
//  - __constant__ arrays: one with an initializer read as is, two set with
//    cudaMemcpyToSymbol (whole and at an offset) and used by kernels (polynomial
//    coefficients, a lookup table indexed by data);
//  - __device__ scalars with initializers (int, float, a struct) read by a kernel before
//    anything touched them, then modified by kernels (atomicAdd from every thread, a plain
//    store) and read back with cudaMemcpyFromSymbol;
//  - __device__ arrays (one zero-initialized, one with an initializer) written and read by
//    kernels, and through cudaGetSymbolAddress + cudaMemcpy.
#include "kt.h"

#include <vector>

__constant__ int c_init[4] = {11, -22, 33, -44};
__constant__ float c_coef[8];
__constant__ int c_table[256];
__device__ int d_counter = 42;
__device__ float d_scale = 1.5f;
struct Conf {
    int a;
    double b;
    short s[2];
};
__device__ Conf d_conf = {7, 2.5, {-3, 9}};
__device__ int d_array[1024];
__device__ long long d_init_array[8] = {10, 20, 30, 40, 50, 60, 70, 1LL << 40};

__global__ void read_initial(long long *out)
{
    out[0] = c_init[0];
    out[1] = c_init[1];
    out[2] = c_init[2];
    out[3] = c_init[3];
    out[4] = d_counter;
    out[5] = (long long)(d_scale * 2);
    out[6] = d_conf.a;
    out[7] = (long long)(d_conf.b * 2);
    out[8] = d_conf.s[0];
    out[9] = d_conf.s[1];
    for (int k = 0; k < 8; k++)
        out[10 + k] = d_init_array[k];
    long long z = 0;
    for (int k = 0; k < 1024; k++)
        z |= d_array[k];
    out[18] = z;
}

__global__ void poly(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float acc = c_coef[7];
        for (int k = 6; k >= 0; k--)
            acc = acc * x[i] + c_coef[k];
        y[i] = acc * d_scale;
    }
}

__global__ void lookup(const unsigned char *idx, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = c_table[idx[i]];
}

__global__ void modify(int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&d_counter, 1);
        if (i < 1024)
            d_array[i] = i * i - 500;
        if (i < 8)
            d_init_array[i] += i;
    }
    if (i == 0) {
        d_scale = -0.75f;
        d_conf.a = -d_conf.a;
        d_conf.s[1] = 1234;
    }
}

__global__ void read_array(int *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 1024)
        out[i] = d_array[1023 - i] + c_init[i & 3];
}

int main()
{
    kt_start("globals");
    long long *dout;
    CHECK_CUDA(cudaMalloc(&dout, 32 * sizeof(long long)));

    // initial values, as the kernels see them
    read_initial<<<1, 1>>>(dout);
    KT_SYNC();
    long long h[19];
    CHECK_CUDA(cudaMemcpy(h, dout, sizeof h, cudaMemcpyDeviceToHost));
    const long long expect0[19] = {11, -22, 33, -44, 42, 3, 7, 5, -3, 9,
                                   10, 20, 30, 40, 50, 60, 70, 1LL << 40, 0};
    const char *names0[19] = {"c_init[0]", "c_init[1]", "c_init[2]", "c_init[3]", "d_counter",
                              "d_scale*2", "d_conf.a", "d_conf.b*2", "d_conf.s[0]", "d_conf.s[1]",
                              "d_init_array[0]", "d_init_array[1]", "d_init_array[2]",
                              "d_init_array[3]", "d_init_array[4]", "d_init_array[5]",
                              "d_init_array[6]", "d_init_array[7]", "OR of d_array (zero)"};
    for (int k = 0; k < 19; k++)
        kt_check_i64(names0[k], 0, h[k], expect0[k]);

    // __constant__ set from the host: coefficients, whole; table in two pieces
    const float coef[8] = {1.0f, -0.5f, 0.25f, 2.0f, -1.0f, 0.125f, 0.0625f, -0.03125f};
    CHECK_CUDA(cudaMemcpyToSymbol(c_coef, coef, sizeof coef));
    std::vector<int> table(256);
    for (int k = 0; k < 256; k++)
        table[k] = k * 1000003 ^ 0x5a5a;
    CHECK_CUDA(cudaMemcpyToSymbol(c_table, table.data(), 100 * sizeof(int)));
    CHECK_CUDA(cudaMemcpyToSymbol(c_table, table.data() + 100, 156 * sizeof(int),
                                  100 * sizeof(int)));
    const int n = 4096;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; i++)
        x[i] = (i - 2048) / 256.0f;  // multiples of 1/256 in [-8, 8)
    float *dx, *dy;
    CHECK_CUDA(cudaMalloc(&dx, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dy, n * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    poly<<<n / 256, 256>>>(dx, dy, n);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        double acc = coef[7], mag = std::fabs(coef[7]);
        for (int k = 6; k >= 0; k--) {
            acc = acc * x[i] + coef[k];
            mag = mag * std::fabs(x[i]) + std::fabs(coef[k]);
        }
        kt_check_close("polynomial with __constant__ coefficients * d_scale", i, y[i], acc * 1.5,
                       2e-6, mag * 1.5);
    }

    std::vector<unsigned char> idx(n);
    KtRng rng(10);
    for (int i = 0; i < n; i++)
        idx[i] = (unsigned char)rng.next();
    unsigned char *didx;
    int *dlook;
    CHECK_CUDA(cudaMalloc(&didx, n));
    CHECK_CUDA(cudaMalloc(&dlook, n * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(didx, idx.data(), n, cudaMemcpyHostToDevice));
    lookup<<<n / 128, 128>>>(didx, dlook, n);
    KT_SYNC();
    std::vector<int> look(n);
    CHECK_CUDA(cudaMemcpy(look.data(), dlook, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        kt_check_i64("c_table[idx[i]]", i, look[i], table[idx[i]]);

    // __device__ variables modified by kernels, read back from the host
    const int threads = 5000;
    modify<<<(threads + 255) / 256, 256>>>(threads);
    KT_SYNC();
    int counter;
    float scale;
    Conf conf;
    long long init_array[8];
    std::vector<int> arr(1024);
    CHECK_CUDA(cudaMemcpyFromSymbol(&counter, d_counter, sizeof counter));
    CHECK_CUDA(cudaMemcpyFromSymbol(&scale, d_scale, sizeof scale));
    CHECK_CUDA(cudaMemcpyFromSymbol(&conf, d_conf, sizeof conf));
    CHECK_CUDA(cudaMemcpyFromSymbol(init_array, d_init_array, sizeof init_array));
    CHECK_CUDA(cudaMemcpyFromSymbol(arr.data(), d_array, 1024 * sizeof(int)));
    kt_check_i64("d_counter after atomicAdd from every thread", 0, counter, 42 + threads);
    kt_check_f32_exact("d_scale after a kernel's store", 0, scale, -0.75f);
    kt_check_i64("d_conf.a", 0, conf.a, -7);
    kt_check_f64_exact("d_conf.b", 0, conf.b, 2.5);
    kt_check_i64("d_conf.s[0]", 0, conf.s[0], -3);
    kt_check_i64("d_conf.s[1]", 0, conf.s[1], 1234);
    const long long init0[8] = {10, 20, 30, 40, 50, 60, 70, 1LL << 40};
    for (int k = 0; k < 8; k++)
        kt_check_i64("d_init_array after += i", k, init_array[k], init0[k] + k);
    for (int k = 0; k < 1024; k++)
        kt_check_i64("d_array written by a kernel", k, arr[k], k * k - 500);

    // the host writes part of d_array (at an offset, and through its address); a kernel reads
    std::vector<int> part(100);
    for (int k = 0; k < 100; k++)
        part[k] = -k * 7;
    CHECK_CUDA(cudaMemcpyToSymbol(d_array, part.data(), 100 * sizeof(int), 200 * sizeof(int)));
    void *addr;
    CHECK_CUDA(cudaGetSymbolAddress(&addr, d_array));
    CHECK_CUDA(cudaMemcpy((int *)addr + 1000, part.data(), 24 * sizeof(int),
                          cudaMemcpyHostToDevice));
    for (int k = 0; k < 100; k++)
        arr[200 + k] = part[k];
    for (int k = 0; k < 24; k++)
        arr[1000 + k] = part[k];
    int *dread;
    CHECK_CUDA(cudaMalloc(&dread, 1024 * sizeof(int)));
    read_array<<<4, 256>>>(dread);
    KT_SYNC();
    std::vector<int> rd(1024);
    CHECK_CUDA(cudaMemcpy(rd.data(), dread, 1024 * sizeof(int), cudaMemcpyDeviceToHost));
    const int cinit[4] = {11, -22, 33, -44};
    for (int i = 0; i < 1024; i++)
        kt_check_i64("d_array[1023 - i] + c_init[i & 3]", i, rd[i], arr[1023 - i] + cinit[i & 3]);

    CHECK_CUDA(cudaFree(dout));
    CHECK_CUDA(cudaFree(dx));
    CHECK_CUDA(cudaFree(dy));
    CHECK_CUDA(cudaFree(didx));
    CHECK_CUDA(cudaFree(dlook));
    CHECK_CUDA(cudaFree(dread));
    kt_pass();
    return 0;
}
