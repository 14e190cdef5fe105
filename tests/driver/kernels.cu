// Kernels for the driver-API test, compiled to PTX, cubin and fatbin at build time.
extern "C" __global__ void scale(float *data, float factor, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        data[i] *= factor;
}

struct mixed {
    char c;
    double d;
    int i[3];
};

extern "C" __global__ void odd(char c, mixed m, short s, unsigned long long *out)
{
    out[0] = c + m.c + s + m.i[2];
}

// at most 64 threads per block: a bigger launch is refused by the device
extern "C" __global__ void __launch_bounds__(64) bounded(int *p)
{
    p[threadIdx.x] = threadIdx.x;
}

__device__ int answer = 42;
__constant__ float weights[4] = {0.5f, 1.5f, 2.5f, 3.5f};

extern "C" __global__ void read_globals(float *out)
{
    out[0] = answer + weights[threadIdx.x];
}
