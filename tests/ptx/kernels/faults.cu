// Kernels that fault as a device would: out of bounds, misaligned, assertion, trap.
#include <cassert>

extern "C" __global__ void oob(int *p, long long idx)
{
    if (threadIdx.x == 7 && blockIdx.x == 2)
        p[idx] = 1;
    else
        p[threadIdx.x] = 2;
}

extern "C" __global__ void misaligned(char *p)
{
    *(int *)(p + 1 + threadIdx.x * 4) = 1;
}

extern "C" __global__ void asserts(int v)
{
    assert(v != 3 || threadIdx.x != 5);
}

extern "C" __global__ void traps(int v)
{
    if (v == threadIdx.x)
        __trap();
}

extern "C" __global__ void oob_read(const float *p, float *out)
{
    out[0] = p[-1];
}

// A warp matrix load (ldmatrix) the interpreter does not implement.
extern "C" __global__ void unsupported(unsigned *p)
{
    __shared__ unsigned short tile[64];
    unsigned r, addr = (unsigned)__cvta_generic_to_shared(&tile[threadIdx.x % 8 * 8]);
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r) : "r"(addr));
    p[0] = r;
}
