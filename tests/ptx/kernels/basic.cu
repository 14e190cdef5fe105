// Kernels of test_ptx_kernels (compiled to PTX with nvcc -ptx -arch=compute_75): memory,
// control flow, barriers, shared/local/dynamic memory, module variables, speed.
extern "C" __global__ void vadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

#define TILE 16
extern "C" __global__ void matmul(const float *A, const float *B, float *C, int n)
{
    __shared__ float As[TILE][TILE], Bs[TILE][TILE];
    int r = blockIdx.y * TILE + threadIdx.y, c = blockIdx.x * TILE + threadIdx.x;
    float acc = 0;
    for (int k = 0; k < n; k += TILE) {
        As[threadIdx.y][threadIdx.x] = A[r * n + k + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(k + threadIdx.y) * n + c];
        __syncthreads();
        for (int j = 0; j < TILE; j++)
            acc += As[threadIdx.y][j] * Bs[j][threadIdx.x];
        __syncthreads();
    }
    C[r * n + c] = acc;
}

// Nested divergence: each thread follows its own path through ifs and loops.
extern "C" __global__ void diverge(int *out)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x, v = 0;
    if (t % 3 == 0) {
        for (int i = 0; i < t % 7; i++)
            v += i * t;
    } else if (t % 3 == 1) {
        v = -t;
        while (v < 100)
            v += 37 + (t & 5);
    } else {
        switch (t % 5) {
        case 0: v = 10; break;
        case 1: v = 20; break;
        default: v = t * t;
        }
        if (v & 1)
            return; // early exit of some lanes
    }
    out[t] = v;
}

// Tree reduction in shared memory: a barrier in every step of a loop.
extern "C" __global__ void reduce(const int *in, int *out)
{
    extern __shared__ int buf[];
    int t = threadIdx.x;
    buf[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = buf[0];
}

// Warps reach the barrier at very different times (some after a long loop, some at once).
extern "C" __global__ void late_warps(int *out, int rounds)
{
    __shared__ int stage[256];
    int t = threadIdx.x, w = t / 32;
    unsigned v = t;
    if (w % 2)
        for (int i = 0; i < rounds * (w + 1); i++)
            v = (v * 1103515245u + 12345u) & 0x7fffffff;
    stage[t] = v;
    __syncthreads();
    out[t] = (int)((unsigned)stage[(t + 32) % blockDim.x] +
                   ((unsigned)__syncthreads_count(t % 3 == 0) << 20));
}

// Local memory with dynamic indexing, 3D indices, a struct by value.
struct Args {
    int scale;
    double offset;
    char tag;
};
extern "C" __global__ void local_mem(int *out, Args a)
{
    int local[32];
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    for (int i = 0; i < 32; i++)
        local[i] = i * a.scale + t;
    int idx = (t * 7 + b) % 32;
    out[b * blockDim.x * blockDim.y * blockDim.z + t] =
        local[idx] + (int)a.offset + a.tag + local[31 - idx];
}

// Module variables: initialised __device__ and __constant__ data; a counter kept between
// launches; a pointer initialised with the address of another variable.
__device__ int dev_counter = 5;
__constant__ float cst[4] = {1.5f, 2.5f, 3.5f, 4.5f};
__device__ int dev_array[4] = {10, 20, 30, 40};
__device__ int *dev_ptr = &dev_array[2];
extern "C" __global__ void globals(float *out)
{
    int t = threadIdx.x;
    out[t] = cst[t & 3] * dev_array[t & 3] + *dev_ptr;
    if (t == 0) {
        dev_counter += 1;
        out[64] = dev_counter;
    }
}

// Generic pointers to shared and local memory through a function that does not know which.
__device__ __noinline__ void bump(int *p, int v)
{
    *p += v;
}
extern "C" __global__ void generic_ptrs(int *out)
{
    __shared__ int sh[64];
    int loc = threadIdx.x;
    sh[threadIdx.x] = 100;
    __syncthreads();
    bump(&sh[(threadIdx.x + 1) % 64], 1);
    bump(&loc, 5);
    bump(&out[threadIdx.x], 1000);
    __syncthreads();
    out[threadIdx.x] += sh[threadIdx.x] * 10 + loc;
}
