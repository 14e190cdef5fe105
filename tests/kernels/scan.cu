// scan: exclusive prefix sums of ints, exact.
//  1. Blelloch (work-efficient up-sweep/down-sweep in shared memory, 1024 elements per block
//     of 512 threads), block sums scanned by the same kernel recursively, then added back:
//     100 000 ints with both signs.
//  2. Hillis-Steele (double-buffered shared memory, one element per thread, 256 per block),
//     same recursion, over 100 000 ints.
//  3. A warp-level inclusive scan with __shfl_up_sync, per 32 elements.
// Also the block sums of the first pass are checked.
#include "kt.h"

#include <vector>

#define BL_THREADS 512
#define BL_ELEMS (2 * BL_THREADS)

__global__ void blelloch_block(const int *in, int *out, int *block_sums, int n)
{
    __shared__ int temp[BL_ELEMS];
    int t = threadIdx.x;
    int base = blockIdx.x * BL_ELEMS;
    temp[2 * t] = base + 2 * t < n ? in[base + 2 * t] : 0;
    temp[2 * t + 1] = base + 2 * t + 1 < n ? in[base + 2 * t + 1] : 0;
    int offset = 1;
    for (int d = BL_ELEMS >> 1; d > 0; d >>= 1) {  // up-sweep
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            temp[bi] += temp[ai];
        }
        offset *= 2;
    }
    if (t == 0) {
        if (block_sums)
            block_sums[blockIdx.x] = temp[BL_ELEMS - 1];
        temp[BL_ELEMS - 1] = 0;
    }
    for (int d = 1; d < BL_ELEMS; d *= 2) {  // down-sweep
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            int x = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += x;
        }
    }
    __syncthreads();
    if (base + 2 * t < n)
        out[base + 2 * t] = temp[2 * t];
    if (base + 2 * t + 1 < n)
        out[base + 2 * t + 1] = temp[2 * t + 1];
}

__global__ void add_offsets(int *out, const int *offsets, int n, int per_block)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] += offsets[i / per_block];
}

#define HS_THREADS 256

__global__ void hillis_steele_block(const int *in, int *out, int *block_sums, int n)
{
    __shared__ int buf[2][HS_THREADS];
    int t = threadIdx.x, i = blockIdx.x * HS_THREADS + t;
    int v = i < n ? in[i] : 0;
    int cur = 0;
    buf[cur][t] = t > 0 ? (i - 1 < n ? in[i - 1] : 0) : 0;  // shifted: exclusive
    __syncthreads();
    for (int off = 1; off < HS_THREADS; off <<= 1) {
        int x = buf[cur][t];
        if (t >= off)
            x += buf[cur][t - off];
        buf[cur ^ 1][t] = x;
        cur ^= 1;
        __syncthreads();
    }
    if (i < n)
        out[i] = buf[cur][t];
    if (t == HS_THREADS - 1 && block_sums)
        block_sums[blockIdx.x] = buf[cur][t] + v;
}

__global__ void warp_inclusive_scan(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = i < n ? in[i] : 0;
    for (int off = 1; off < 32; off <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off)
            v += y;
    }
    if (i < n)
        out[i] = v;
}

typedef void (*block_scan_fn)(const int *, int *, int *, int);

// Exclusive scan of d_in[0..n) into d_out, recursively over block sums.
static void scan(block_scan_fn kernel, int threads, int per_block, const int *d_in, int *d_out,
                 int n, std::vector<int> *first_sums)
{
    int blocks = (n + per_block - 1) / per_block;
    int *sums = nullptr, *sums_scanned = nullptr;
    if (blocks > 1) {
        CHECK_CUDA(cudaMalloc(&sums, blocks * sizeof(int)));
        CHECK_CUDA(cudaMalloc(&sums_scanned, blocks * sizeof(int)));
    }
    kernel<<<blocks, threads>>>(d_in, d_out, sums, n);
    KT_SYNC();
    if (blocks > 1) {
        if (first_sums) {
            first_sums->resize(blocks);
            CHECK_CUDA(cudaMemcpy(first_sums->data(), sums, blocks * sizeof(int),
                                  cudaMemcpyDeviceToHost));
        }
        scan(kernel, threads, per_block, sums, sums_scanned, blocks, nullptr);
        add_offsets<<<(n + 255) / 256, 256>>>(d_out, sums_scanned, n, per_block);
        KT_SYNC();
        CHECK_CUDA(cudaFree(sums));
        CHECK_CUDA(cudaFree(sums_scanned));
    }
}

static void check_scan(const char *what, const std::vector<int> &got, const std::vector<int> &x,
                       int per_block, const std::vector<int> &sums)
{
    long long acc = 0;
    for (size_t i = 0; i < x.size(); i++) {
        kt_check_i64(what, i, got[i], acc);
        acc += x[i];
    }
    for (size_t b = 0; b < sums.size(); b++) {
        long long s = 0;
        for (size_t i = b * per_block; i < x.size() && i < (b + 1) * per_block; i++)
            s += x[i];
        char w[128];
        snprintf(w, sizeof w, "%s: block sum", what);
        kt_check_i64(w, b, sums[b], s);
    }
}

int main()
{
    kt_start("scan");
    const int n = 100000;
    std::vector<int> x(n), got(n);
    KtRng rng(8);
    for (int i = 0; i < n; i++)
        x[i] = rng.range(-50, 200);
    int *din, *dout;
    CHECK_CUDA(cudaMalloc(&din, n * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dout, n * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(din, x.data(), n * sizeof(int), cudaMemcpyHostToDevice));

    std::vector<int> sums;
    CHECK_CUDA(cudaMemset(dout, 0xff, n * sizeof(int)));
    scan(blelloch_block, BL_THREADS, BL_ELEMS, din, dout, n, &sums);
    CHECK_CUDA(cudaMemcpy(got.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    if (sums.size() != (size_t)((n + BL_ELEMS - 1) / BL_ELEMS))
        KT_FAIL("Blelloch: %zu block sums", sums.size());
    check_scan("Blelloch exclusive scan", got, x, BL_ELEMS, sums);

    CHECK_CUDA(cudaMemset(dout, 0xff, n * sizeof(int)));
    scan(hillis_steele_block, HS_THREADS, HS_THREADS, din, dout, n, &sums);
    CHECK_CUDA(cudaMemcpy(got.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    if (sums.size() != (size_t)((n + HS_THREADS - 1) / HS_THREADS))
        KT_FAIL("Hillis-Steele: %zu block sums", sums.size());
    check_scan("Hillis-Steele exclusive scan", got, x, HS_THREADS, sums);

    const int nw = 10000;  // not a multiple of 32: the last warp is partly out of range
    warp_inclusive_scan<<<(nw + 127) / 128, 128>>>(din, dout, nw);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(got.data(), dout, nw * sizeof(int), cudaMemcpyDeviceToHost));
    long long acc = 0;
    for (int i = 0; i < nw; i++) {
        if (i % 32 == 0)
            acc = 0;
        acc += x[i];
        kt_check_i64("warp inclusive scan (__shfl_up_sync)", i, got[i], acc);
    }

    CHECK_CUDA(cudaFree(din));
    CHECK_CUDA(cudaFree(dout));
    kt_pass();
    return 0;
}
