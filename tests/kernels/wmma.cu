// wmma: warp matrix multiply-accumulate (tensor cores, sm_70 and later) through the nvcuda::wmma
// API: C = A * B + C for 16x16x16 tiles of half inputs with float accumulators, row- and
// column-major fragments, a 64x48x32 product tiled over a grid of warps. Inputs are small
// integers, so every product and sum is exact: results compare exactly.
#include "kt.h"

#include <cuda_fp16.h>
#include <mma.h>

#include <vector>

using namespace nvcuda;

// One warp per 16x16 tile of C; A is m x k row-major, B is k x n column-major, C m x n row-major.
__global__ void wmma_gemm(const __half *A, const __half *B, float *C, int m, int n, int k)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int tiles_n = n / 16;
    int tm = warp / tiles_n, tn = warp % tiles_n;
    if (tm * 16 >= m)
        return;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, C + tm * 16 * n + tn * 16, n, wmma::mem_row_major);
    for (int kk = 0; kk < k; kk += 16) {
        wmma::load_matrix_sync(a, A + tm * 16 * k + kk, k);
        wmma::load_matrix_sync(b, B + tn * 16 * k + kk, k);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(C + tm * 16 * n + tn * 16, acc, n, wmma::mem_row_major);
}

int main()
{
    kt_start("wmma");
    const int m = 64, n = 48, k = 32;
    std::vector<__half> A(m * k), B(k * n);
    std::vector<float> C(m * n), a(m * k), b(k * n);
    KtRng rng(15);
    for (int i = 0; i < m * k; i++) {
        a[i] = (float)rng.range(-8, 8);
        A[i] = __float2half(a[i]);
    }
    for (int i = 0; i < k * n; i++) {  // b is column-major: b[col * k + row]
        b[i] = (float)rng.range(-8, 8);
        B[i] = __float2half(b[i]);
    }
    for (int i = 0; i < m * n; i++)
        C[i] = (float)rng.range(-100, 100);
    __half *dA, *dB;
    float *dC;
    CHECK_CUDA(cudaMalloc(&dA, m * k * sizeof(__half)));
    CHECK_CUDA(cudaMalloc(&dB, k * n * sizeof(__half)));
    CHECK_CUDA(cudaMalloc(&dC, m * n * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(dA, A.data(), m * k * sizeof(__half), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dB, B.data(), k * n * sizeof(__half), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dC, C.data(), m * n * sizeof(float), cudaMemcpyHostToDevice));
    const int warps = (m / 16) * (n / 16);
    wmma_gemm<<<(warps * 32 + 63) / 64, 64>>>(dA, dB, dC, m, n, k);
    KT_SYNC();
    std::vector<float> got(m * n);
    CHECK_CUDA(cudaMemcpy(got.data(), dC, m * n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int r = 0; r < m; r++)
        for (int c = 0; c < n; c++) {
            float e = C[r * n + c];
            for (int j = 0; j < k; j++)
                e += a[r * k + j] * b[c * k + j];
            kt_check_f32_exact("wmma C = A*B + C", r * n + c, got[r * n + c], e);
        }
    CHECK_CUDA(cudaFree(dA));
    CHECK_CUDA(cudaFree(dB));
    CHECK_CUDA(cudaFree(dC));
    kt_pass();
    return 0;
}
