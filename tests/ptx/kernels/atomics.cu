// Atomics of every kind on global and shared memory, contended by many threads and blocks.
#define N_U32 12
extern "C" __global__ void atom_global(unsigned *g, int *gs, unsigned long long *g64, float *gf,
                                       double *gd, unsigned *olds)
{
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&g[0], 1u);
    atomicAdd(&g[1], t % 7);
    atomicSub(&g[2], 3u);
    atomicMin(&g[3], t + 5);
    atomicMax(&g[4], t * 3);
    atomicAnd(&g[5], ~(1u << (t % 32)));
    atomicOr(&g[6], 1u << (t % 32));
    atomicXor(&g[7], t);
    atomicInc(&g[8], 99u);
    atomicDec(&g[9], 99u);
    olds[t] = atomicExch(&g[10], t + 1);
    unsigned old = g[11], assumed;
    do {
        assumed = old;
        old = atomicCAS(&g[11], assumed, assumed + 2);
    } while (old != assumed);
    atomicMin(&gs[0], (int)(t % 1000) - 500);
    atomicMax(&gs[1], (int)(t % 1000) - 500);
    atomicAdd(&gs[2], -1);
    atomicAdd(&g64[0], (1ull << 32) + 1);
    atomicMax(&g64[1], (unsigned long long)t << 33);
    atomicMin(&g64[2], ((unsigned long long)t + 7) << 33);
    atomicCAS(&g64[3], 0ull, (unsigned long long)t + 1);
    atomicAdd(&gf[0], 1.0f);
    atomicAdd(&gf[1], 0.25f);
    atomicAdd(&gd[0], 0.5);
    atomicAdd(&gd[1], (double)t);
}

extern "C" __global__ void atom_shared(unsigned *out)
{
    __shared__ unsigned s[8];
    __shared__ int si[3];
    __shared__ unsigned se;
    __shared__ unsigned long long s64;
    __shared__ float sf;
    unsigned t = threadIdx.x;
    if (t == 0) {
        s[0] = 0; s[1] = 0xffffffff; s[2] = 0; s[3] = 0; s[4] = 1000000; s[5] = 0; s[6] = 0;
        s[7] = 0;
        s64 = 0;
        sf = 0;
        si[0] = 0x7fffffff;
        si[1] = 0;
        si[2] = 0;
        se = 0;
    }
    __syncthreads();
    atomicAdd(&s[0], t);
    atomicAnd(&s[1], ~(1u << (t % 32)));
    atomicOr(&s[2], 1u << (t % 32));
    atomicMax(&s[3], t);
    atomicMin(&s[4], t + 17);
    atomicInc(&s[5], 9u);
    atomicXor(&s[6], t * 0x9e3779b9u);
    unsigned old = s[7], assumed;
    do {
        assumed = old;
        old = atomicCAS(&s[7], assumed, assumed + 1);
    } while (old != assumed);
    atomicAdd(&s64, 1ull << 40);
    atomicAdd(&sf, 0.5f);
    atomicMin(&si[0], (int)t - 100);
    atomicSub(&si[1], 3);
    atomicDec((unsigned *)&si[2], 9u);
    unsigned seen = atomicExch(&se, t + 1);
    atomicAdd(&s[0], 0u * seen);
    __syncthreads();
    if (t < 8)
        out[blockIdx.x * 16 + t] = s[t];
    if (t == 0) {
        out[blockIdx.x * 16 + 8] = (unsigned)(s64 >> 40);
        out[blockIdx.x * 16 + 9] = (unsigned)sf;
        out[blockIdx.x * 16 + 10] = (unsigned)si[0];
        out[blockIdx.x * 16 + 11] = (unsigned)si[1];
        out[blockIdx.x * 16 + 12] = (unsigned)si[2];
        out[blockIdx.x * 16 + 13] = se;
    }
}
