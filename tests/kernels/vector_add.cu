// vector_add: c = a + b over 1 M + 7 floats, one thread per element (with a bounds check:
// the size is not a multiple of the block) and again with a grid-stride loop over a small
// grid. Float addition is exact IEEE round-to-nearest on host and device: results must be
// bitwise equal, and the guard elements past the end must stay untouched.
#include "kt.h"

#include <vector>

__global__ void vadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

__global__ void vadd_stride(const float *a, const float *b, float *c, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        c[i] = a[i] + b[i];
}

static void check(const char *what, const std::vector<float> &got, const std::vector<float> &a,
                  const std::vector<float> &b, int n, int guard)
{
    for (int i = 0; i < n; i++)
        kt_check_f32_exact(what, i, got[i], a[i] + b[i]);
    for (int i = n; i < n + guard; i++) {
        uint32_t bits;
        memcpy(&bits, &got[i], 4);
        if (bits != 0xffffffffu)
            KT_FAIL("%s[%d]: guard element past the end was written: 0x%08x", what, i, bits);
    }
}

int main()
{
    kt_start("vector_add");
    const int n = (1 << 20) + 7, guard = 64;
    std::vector<float> a(n), b(n), c(n + guard);
    KtRng rng(1);
    for (int i = 0; i < n; i++) {
        a[i] = (rng.unit() - 0.5f) * 1000.0f;
        b[i] = (float)i * 0.001f - rng.unit();
    }
    float *da, *db, *dc;
    CHECK_CUDA(cudaMalloc(&da, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&db, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dc, (n + guard) * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    // one thread per element
    CHECK_CUDA(cudaMemset(dc, 0xff, (n + guard) * sizeof(float)));
    const int block = 256;
    vadd<<<(n + block - 1) / block, block>>>(da, db, dc, n);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(c.data(), dc, (n + guard) * sizeof(float), cudaMemcpyDeviceToHost));
    check("vadd c", c, a, b, n, guard);

    // grid-stride loop: 40 blocks of 128 threads cover the array ~205 times over
    CHECK_CUDA(cudaMemset(dc, 0xff, (n + guard) * sizeof(float)));
    vadd_stride<<<40, 128>>>(da, db, dc, n);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(c.data(), dc, (n + guard) * sizeof(float), cudaMemcpyDeviceToHost));
    check("vadd_stride c", c, a, b, n, guard);

    // in place, a partial range at an unaligned offset: c[17 .. 17+1000) = a + b there
    CHECK_CUDA(cudaMemcpy(dc, da, n * sizeof(float), cudaMemcpyDeviceToDevice));
    vadd_stride<<<3, 64>>>(dc + 17, db + 17, dc + 17, 1000);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        float e = (i >= 17 && i < 1017) ? a[i] + b[i] : a[i];
        kt_check_f32_exact("in-place c", i, c[i], e);
    }

    CHECK_CUDA(cudaFree(da));
    CHECK_CUDA(cudaFree(db));
    CHECK_CUDA(cudaFree(dc));
    kt_pass();
    return 0;
}
