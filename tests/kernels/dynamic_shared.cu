// dynamic_shared: kernels using extern __shared__ arrays sized at launch.
//  - block-wise reverse through dynamic shared memory of 4 B, 1 KiB, 16 KiB, 48 KiB, and,
//    after cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize), 64 KiB, 100 KiB
//    and the device's opt-in maximum;
//  - a launch above 48 KiB without the attribute is refused (cudaErrorInvalidValue, not
//    sticky);
//  - static __shared__ plus dynamic in one kernel (the two must not overlap), at the opt-in
//    maximum less the static size;
//  - extern __shared__ double (8-byte aligned), neighbour sums across the block.
#include "kt.h"

#include <vector>

__global__ void block_reverse(const int *in, int *out, int per_block)
{
    extern __shared__ int s[];
    int base = blockIdx.x * per_block;
    for (int i = threadIdx.x; i < per_block; i += blockDim.x)
        s[i] = in[base + i];
    __syncthreads();
    for (int i = threadIdx.x; i < per_block; i += blockDim.x)
        out[base + i] = s[per_block - 1 - i];
}

#define STATIC_INTS 256

__global__ void static_and_dynamic(const int *in, int *out, int per_block)
{
    __shared__ int stat[STATIC_INTS];
    extern __shared__ int dyn[];
    int base = blockIdx.x * per_block;
    for (int i = threadIdx.x; i < STATIC_INTS; i += blockDim.x)
        stat[i] = blockIdx.x * 100000 + i;
    for (int i = threadIdx.x; i < per_block; i += blockDim.x)
        dyn[i] = in[base + i];
    __syncthreads();
    for (int i = threadIdx.x; i < per_block; i += blockDim.x)
        out[base + i] = dyn[per_block - 1 - i] + stat[i % STATIC_INTS];
}

__global__ void neighbour_sum(const double *in, double *out, int per_block)
{
    extern __shared__ double sd[];
    int base = blockIdx.x * per_block;
    for (int i = threadIdx.x; i < per_block; i += blockDim.x)
        sd[i] = in[base + i];
    __syncthreads();
    for (int i = threadIdx.x; i < per_block; i += blockDim.x)
        out[base + i] = sd[i] + sd[(i + 1) % per_block];
}

static void reverse_run(const char *kernel_name, bool with_static, size_t bytes, const int *din,
                        int *dout, const std::vector<int> &in, int blocks)
{
    int per_block = (int)(bytes / sizeof(int));
    size_t total = (size_t)per_block * blocks;
    CHECK_CUDA(cudaMemset(dout, 0xff, total * sizeof(int)));
    if (with_static)
        static_and_dynamic<<<blocks, 192, bytes>>>(din, dout, per_block);
    else
        block_reverse<<<blocks, 128, bytes>>>(din, dout, per_block);
    KT_SYNC();
    std::vector<int> got(total);
    CHECK_CUDA(cudaMemcpy(got.data(), dout, total * sizeof(int), cudaMemcpyDeviceToHost));
    char what[128];
    snprintf(what, sizeof what, "%s with %zu bytes of dynamic shared memory", kernel_name, bytes);
    for (int b = 0; b < blocks; b++)
        for (int i = 0; i < per_block; i++) {
            size_t k = (size_t)b * per_block + i;
            int e = in[(size_t)b * per_block + per_block - 1 - i];
            if (with_static)
                e += b * 100000 + i % STATIC_INTS;
            kt_check_i64(what, k, got[k], e);
        }
}

int main()
{
    kt_start("dynamic_shared");
    int dev, optin = 0;
    CHECK_CUDA(cudaGetDevice(&dev));
    CHECK_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    CHECK(optin >= 64 * 1024, "opt-in shared memory per block is %d bytes", optin);

    const int blocks = 6;
    const size_t max_ints = (size_t)optin / sizeof(int) * blocks;
    std::vector<int> in(max_ints);
    KtRng rng(11);
    for (auto &v : in)
        v = (int)rng.next();
    int *din, *dout;
    CHECK_CUDA(cudaMalloc(&din, max_ints * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dout, max_ints * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(din, in.data(), max_ints * sizeof(int), cudaMemcpyHostToDevice));

    for (size_t bytes : {(size_t)4, (size_t)1024, (size_t)16384, (size_t)48 * 1024})
        reverse_run("block_reverse", false, bytes, din, dout, in, blocks);

    // beyond 48 KiB without opting in: refused at launch, and the error is not sticky
    block_reverse<<<blocks, 128, 64 * 1024>>>(din, dout, 64 * 1024 / 4);
    EXPECT_CUDA_ERROR(cudaGetLastError(), cudaErrorInvalidValue);
    CHECK_CUDA(cudaDeviceSynchronize());

    CHECK_CUDA(cudaFuncSetAttribute(block_reverse, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    optin));
    for (size_t bytes : {(size_t)64 * 1024, (size_t)100 * 1024, (size_t)optin})
        reverse_run("block_reverse", false, bytes, din, dout, in, blocks);

    cudaFuncAttributes fa;
    CHECK_CUDA(cudaFuncGetAttributes(&fa, static_and_dynamic));
    CHECK(fa.sharedSizeBytes == STATIC_INTS * sizeof(int), "static shared size %zu",
          fa.sharedSizeBytes);
    size_t dyn_max = (size_t)optin - fa.sharedSizeBytes;
    CHECK_CUDA(cudaFuncSetAttribute(static_and_dynamic,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn_max));
    reverse_run("static_and_dynamic", true, 2048, din, dout, in, blocks);
    reverse_run("static_and_dynamic", true, dyn_max, din, dout, in, blocks);

    // doubles
    const int per_block = 3000, nd = per_block * blocks;  // 24000 bytes per block
    std::vector<double> d(nd), dgot(nd);
    for (int i = 0; i < nd; i++)
        d[i] = (double)rng.range(-1000000, 1000000) / 64.0;
    double *dd, *ddo;
    CHECK_CUDA(cudaMalloc(&dd, nd * sizeof(double)));
    CHECK_CUDA(cudaMalloc(&ddo, nd * sizeof(double)));
    CHECK_CUDA(cudaMemcpy(dd, d.data(), nd * sizeof(double), cudaMemcpyHostToDevice));
    neighbour_sum<<<blocks, 256, per_block * sizeof(double)>>>(dd, ddo, per_block);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(dgot.data(), ddo, nd * sizeof(double), cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++)
        for (int i = 0; i < per_block; i++)
            kt_check_f64_exact("neighbour_sum (extern __shared__ double)", b * per_block + i,
                               dgot[b * per_block + i],
                               d[b * per_block + i] + d[b * per_block + (i + 1) % per_block]);

    CHECK_CUDA(cudaFree(din));
    CHECK_CUDA(cudaFree(dout));
    CHECK_CUDA(cudaFree(dd));
    CHECK_CUDA(cudaFree(ddo));
    kt_pass();
    return 0;
}
