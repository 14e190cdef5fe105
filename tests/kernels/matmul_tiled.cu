// matmul_tiled: C = A*B with 16x16 shared-memory tiles and __syncthreads.
//  1. 256x256x256 with entries that are multiples of 1/8 in [-1, 1]: every product and
//     partial sum is exactly representable, so C must equal the host result exactly,
//     whatever the order of summation or FMA contraction.
//  2. A 200x300 times 300x150 (no dimension a multiple of 16: bounds checks on loads and
//     stores) with arbitrary floats, within 1e-4 relative to sum |a_ik * b_kj|; the guard
//     elements around C stay untouched.
#include "kt.h"

#include <vector>

#define TILE 16

// A is m x k, B is k x n, C is m x n, all row-major.
__global__ void matmul(const float *A, const float *B, float *C, int m, int k, int n)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (k + TILE - 1) / TILE; t++) {
        int ac = t * TILE + threadIdx.x, br = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < m && ac < k) ? A[row * k + ac] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (br < k && col < n) ? B[br * n + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < TILE; j++)
            acc += As[threadIdx.y][j] * Bs[j][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n)
        C[row * n + col] = acc;
}

static void run(const char *what, int m, int k, int n, bool exact, uint64_t seed)
{
    std::vector<float> A((size_t)m * k), B((size_t)k * n);
    KtRng rng(seed);
    for (auto &v : A)
        v = exact ? rng.range(-8, 8) / 8.0f : (rng.unit() - 0.5f) * 4.0f;
    for (auto &v : B)
        v = exact ? rng.range(-8, 8) / 8.0f : (rng.unit() - 0.3f) * 2.0f;
    const int guard = 32;
    float *dA, *dB, *dC;
    CHECK_CUDA(cudaMalloc(&dA, A.size() * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dB, B.size() * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dC, ((size_t)m * n + 2 * guard) * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(dA, A.data(), A.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dB, B.data(), B.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dC, 0xff, ((size_t)m * n + 2 * guard) * sizeof(float)));

    dim3 block(TILE, TILE), grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    matmul<<<grid, block>>>(dA, dB, dC + guard, m, k, n);
    KT_SYNC();
    std::vector<float> C((size_t)m * n + 2 * guard);
    CHECK_CUDA(cudaMemcpy(C.data(), dC, C.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < guard; i++) {
        uint32_t lo, hi;
        memcpy(&lo, &C[i], 4);
        memcpy(&hi, &C[guard + (size_t)m * n + i], 4);
        if (lo != 0xffffffffu || hi != 0xffffffffu)
            KT_FAIL("%s: guard element %d around C was written (0x%08x, 0x%08x)", what, i, lo,
                    hi);
    }
    for (int r = 0; r < m; r++) {
        for (int c = 0; c < n; c++) {
            double sum = 0, mag = 0;
            for (int j = 0; j < k; j++) {
                double p = (double)A[(size_t)r * k + j] * B[(size_t)j * n + c];
                sum += p;
                mag += std::fabs(p);
            }
            float got = C[guard + (size_t)r * n + c];
            size_t idx = (size_t)r * n + c;
            if (exact)
                kt_check_f32_exact(what, idx, got, (float)sum);
            else
                kt_check_close(what, idx, got, sum, 1e-4, mag);
        }
    }
    CHECK_CUDA(cudaFree(dA));
    CHECK_CUDA(cudaFree(dB));
    CHECK_CUDA(cudaFree(dC));
}

int main()
{
    kt_start("matmul_tiled");
    run("C(256x256x256, exact)", 256, 256, 256, true, 3);
    run("C(200x300x150)", 200, 300, 150, false, 4);
    run("C(1x17x33)", 1, 17, 33, false, 5);
    kt_pass();
    return 0;
}
