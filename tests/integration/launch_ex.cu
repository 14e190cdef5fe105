// launch_ex: the launch entry points of cudart with grids, blocks and dynamic shared memory
// checked in the trace: cudaLaunchKernelEx (C and C++ forms) with a stream and the priority
// and cluster-dimension attributes, cudaLaunchKernel (void **args), <<<>>> with dynamic
// shared memory, and more than 48 KiB of dynamic shared memory (refused until
// cudaFuncAttributeMaxDynamicSharedMemorySize allows it), and cudaGetFuncBySymbol afterwards.
// Results are checked when kernels run.
#include "cr_test.h"

#include <vector>

__global__ void ex_kernel(float *out, int n, float scale)
{
    extern __shared__ float smem[];
    unsigned tpb = blockDim.x * blockDim.y * blockDim.z;
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    smem[t] = t * scale;
    __syncthreads();
    unsigned i = b * tpb + t;
    if (i < (unsigned)n)
        out[i] = smem[tpb - 1 - t] + b;
}

static unsigned char expected_params[16];

static void announce(float *out, int n, float scale, dim3 grid, dim3 block, unsigned shared)
{
    memset(expected_params, 0, sizeof expected_params);
    memcpy(expected_params + 0, &out, 8);
    memcpy(expected_params + 8, &n, 4);
    memcpy(expected_params + 12, &scale, 4);
    expect_launch("ex_kernel", grid, block, shared, expected_params, 16);
}

static void check_results(bool run, float *d_out, int n, float scale, dim3 grid, dim3 block)
{
    CHECK_CUDA(cudaDeviceSynchronize());
    if (!run)
        return;
    std::vector<float> o(n);
    CHECK_CUDA(cudaMemcpy(o.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
    unsigned tpb = block.x * block.y * block.z, blocks = grid.x * grid.y * grid.z;
    for (unsigned b = 0; b < blocks; b++)
        for (unsigned t = 0; t < tpb; t++) {
            unsigned i = b * tpb + t;
            if (i >= (unsigned)n)
                continue;
            float want = (tpb - 1 - t) * scale + b;
            CHECK(o[i] == want, "out[%u] = %f, expected %f", i, o[i], want);
        }
}

int main()
{
    setenv("CUDA_REMOTE_LOG", "debug", 1); // the stub's report of waited calls (run.py)
    bool run = kernels_execute();
    const int n = 4096;
    float *d_out;
    CHECK_CUDA(cudaMalloc(&d_out, n * sizeof(float)));
    int least, greatest;
    CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));

    // cudaLaunchKernelEx, C form, with attributes
    {
        dim3 grid(3, 2, 2), block(8, 4, 2);
        unsigned shared = 64 * sizeof(float) + 100;
        cudaLaunchAttribute attrs[2];
        attrs[0].id = cudaLaunchAttributePriority;
        attrs[0].val.priority = greatest;
        attrs[1].id = cudaLaunchAttributeClusterDimension;
        attrs[1].val.clusterDim.x = 1;
        attrs[1].val.clusterDim.y = 1;
        attrs[1].val.clusterDim.z = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = grid;
        cfg.blockDim = block;
        cfg.dynamicSmemBytes = shared;
        cfg.stream = s;
        cfg.attrs = attrs;
        cfg.numAttrs = 2;
        float *out = d_out;
        int nn = n;
        float scale = 0.5f;
        void *args[] = {&out, &nn, &scale};
        // on the launch's stream: a memset on the default stream is not ordered before it
        // when the default stream is the per-thread one (the ptds build)
        CHECK_CUDA(cudaMemsetAsync(d_out, 0, n * sizeof(float), s));
        CHECK_CUDA(cudaLaunchKernelExC(&cfg, (const void *)ex_kernel, args));
        announce(out, nn, scale, grid, block, shared);
        check_results(run, d_out, n, scale, grid, block);

        // the C++ template form, no attributes, on the NULL stream
        cfg.attrs = nullptr;
        cfg.numAttrs = 0;
        cfg.stream = 0;
        cfg.gridDim = dim3(16);
        cfg.blockDim = dim3(256);
        cfg.dynamicSmemBytes = 256 * sizeof(float);
        CHECK_CUDA(cudaLaunchKernelEx(&cfg, ex_kernel, d_out, n, 2.0f));
        announce(d_out, n, 2.0f, dim3(16), dim3(256), 256 * sizeof(float));
        check_results(run, d_out, n, 2.0f, dim3(16), dim3(256));
    }

    // cluster occupancy (cuBLAS asks at cublasCreate): answered by the device
    {
        cudaDeviceProp prop;
        CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
        cudaLaunchAttribute cluster;
        cluster.id = cudaLaunchAttributeClusterDimension;
        cluster.val.clusterDim.x = 2;
        cluster.val.clusterDim.y = 1;
        cluster.val.clusterDim.z = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(8);
        cfg.blockDim = dim3(128);
        cfg.attrs = &cluster;
        cfg.numAttrs = 1;
        int clusters = 0, size = 0;
        CHECK_CUDA(cudaOccupancyMaxActiveClusters(&clusters, ex_kernel, &cfg));
        int most = prop.multiProcessorCount * prop.maxBlocksPerMultiProcessor / 2;
        CHECK(clusters >= 1 && clusters <= most, "%d clusters of 2 blocks at once (at most %d)",
              clusters, most);
        CHECK_CUDA(cudaOccupancyMaxPotentialClusterSize(&size, ex_kernel, &cfg));
        CHECK(size >= 2 && size <= 16, "largest cluster %d", size);
        // the answers follow the kernel's attributes (the stub keeps answers until one may
        // have changed): non-portable cluster sizes allowed, then not, set twice each
        int again = 0, wider = 0;
        for (int round = 0; round < 2; round++) {
            CHECK_CUDA(cudaFuncSetAttribute(ex_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                            1));
            CHECK_CUDA(cudaOccupancyMaxPotentialClusterSize(&wider, ex_kernel, &cfg));
            CHECK(wider > size, "non-portable clusters allowed: largest %d, portable %d", wider,
                  size);
            CHECK_CUDA(cudaFuncSetAttribute(ex_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                            0));
            CHECK_CUDA(cudaOccupancyMaxPotentialClusterSize(&again, ex_kernel, &cfg));
            CHECK(again == size, "non-portable clusters allowed, then not: largest %d, was %d",
                  again, size);
        }
        CHECK_CUDA(cudaOccupancyMaxActiveClusters(&again, ex_kernel, &cfg));
        CHECK(again == clusters, "%d clusters at once asked again, %d before", again, clusters);
        // what libraries ask around every launch (cuBLASLt: the function, attributes, both
        // occupancies, an attribute set to the value it has) is answered by the stub after
        // the first time: 50 rounds wait for the server a few times at most
        int blocks = 0, shared = 0;
        CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, ex_kernel, 128, 0));
        CHECK_CUDA(cudaFuncSetAttribute(ex_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        8192));
        for (int i = 0; i < 50; i++) {
            int c = 0, b = 0;
            cudaFuncAttributes fa;
            cluster.val.clusterDim.x = 2;
            CHECK_CUDA(cudaFuncSetAttribute(ex_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            8192));
            CHECK_CUDA(cudaOccupancyMaxActiveClusters(&c, ex_kernel, &cfg));
            CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, ex_kernel, 128, 0));
            CHECK_CUDA(cudaFuncGetAttributes(&fa, ex_kernel));
            CHECK(c == clusters && b == blocks, "round %d: %d clusters, %d blocks (%d, %d)", i, c,
                  b, clusters, blocks);
            shared = fa.maxDynamicSharedSizeBytes;
        }
        CHECK(shared == 8192, "max dynamic shared memory %d after setting 8192", shared);
        printf("CR_EXPECT_WAITS cuOccupancyMaxActiveClusters 5\n");
        printf("CR_EXPECT_WAITS cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags 5\n");
        printf("CR_EXPECT_WAITS cuKernelSetAttribute 10\n");
        printf("CR_EXPECT_WAITS cuFuncSetAttribute 10\n");
        printf("CR_EXPECT_WAITS cuKernelGetAttribute 60\n"); // ~16 attributes a read
        printf("CR_EXPECT_WAITS cuFuncGetAttribute 60\n");
        printf("CR_EXPECT_WAITS cuKernelGetFunction 10\n");
        cluster.val.clusterDim.x = 64; // beyond any device's cluster size
        EXPECT_CUDA_ERROR(cudaOccupancyMaxActiveClusters(&clusters, ex_kernel, &cfg),
                          cudaErrorInvalidClusterSize);
        EXPECT_CUDA_ERROR(cudaGetLastError(), cudaErrorInvalidClusterSize); // and clears it
        printf("cluster occupancy: %d clusters of 2 at once, clusters up to %d blocks (%d "
               "non-portable)\n",
               clusters, size, wider);
    }

    // cudaLaunchKernel with void **args
    {
        dim3 grid(5, 3), block(32, 8);
        float *out = d_out;
        int nn = 3000;
        float scale = -1.25f;
        void *args[] = {&out, &nn, &scale};
        CHECK_CUDA(cudaLaunchKernel((const void *)ex_kernel, grid, block, args,
                                   256 * sizeof(float) + 4, s));
        announce(out, nn, scale, grid, block, 256 * sizeof(float) + 4);
        check_results(run, d_out, nn, scale, grid, block);
    }

    // <<<>>> with dynamic shared memory, on a stream
    {
        dim3 grid(7), block(128);
        ex_kernel<<<grid, block, 128 * sizeof(float), s>>>(d_out, 896, 3.0f);
        CHECK_CUDA(cudaGetLastError());
        announce(d_out, 896, 3.0f, grid, block, 128 * sizeof(float));
        check_results(run, d_out, 896, 3.0f, grid, block);
    }

    // more than 48 KiB of dynamic shared memory needs the function attribute
    {
        const unsigned big = 100 * 1024;
        ex_kernel<<<2, 64, big>>>(d_out, 128, 1.0f);
        EXPECT_CUDA_ERROR(cudaGetLastError(), cudaErrorInvalidValue);
        CHECK_CUDA(cudaFuncSetAttribute(ex_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        big));
        cudaFuncAttributes fa;
        CHECK_CUDA(cudaFuncGetAttributes(&fa, ex_kernel));
        CHECK(fa.maxDynamicSharedSizeBytes == (int)big, "maxDynamicSharedSizeBytes = %d",
              fa.maxDynamicSharedSizeBytes);
        ex_kernel<<<2, 64, big>>>(d_out, 128, 1.0f);
        CHECK_CUDA(cudaGetLastError());
        announce(d_out, 128, 1.0f, dim3(2), dim3(64), big);
        check_results(run, d_out, 128, 1.0f, dim3(2), dim3(64));
    }

    // the driver function behind the kernel, after launches and attribute calls
    cudaFunction_t f = nullptr;
    CHECK_CUDA(cudaGetFuncBySymbol(&f, (const void *)ex_kernel));
    CHECK(f != nullptr, "cudaGetFuncBySymbol gave NULL");

    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaFree(d_out));
    CHECK_CUDA(cudaGetLastError());
    printf("launch_ex: all checks passed\n");
    return 0;
}
