// Kernels of the emulated-device end-to-end test (test_ptx_emu), built as fatbins.
#include <cstdio>

__device__ int dev_total = 100;

extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

extern "C" __global__ void count(int *p)
{
    atomicAdd(&dev_total, 1);
    atomicAdd(p, 2);
}

extern "C" __global__ void poke(int *p, long long idx)
{
    p[idx] = 42;
}

extern "C" __global__ void hello(int v)
{
    printf("hello %d from %d\n", v, threadIdx.x);
}
