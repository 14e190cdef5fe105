// Warp-wide operations: shuffles with widths and clamps, votes, activemask in divergent code,
// match, warp barriers, block barriers with reductions. Built for compute_75 and compute_90.
extern "C" __global__ void shuffles(const int *in, int *out)
{
    int t = threadIdx.x, v = in[t];
    int *o = out + t * 16;
    o[0] = __shfl_sync(0xffffffff, v, 5);
    o[1] = __shfl_sync(0xffffffff, v, t + 3, 8);
    o[2] = __shfl_up_sync(0xffffffff, v, 3);
    o[3] = __shfl_up_sync(0xffffffff, v, 2, 16);
    o[4] = __shfl_down_sync(0xffffffff, v, 4);
    o[5] = __shfl_down_sync(0xffffffff, v, 3, 8);
    o[6] = __shfl_xor_sync(0xffffffff, v, 9);
    o[7] = __shfl_xor_sync(0xffffffff, v, 3, 4);
    int s = v; // butterfly reduction
    for (int d = 16; d > 0; d /= 2)
        s += __shfl_xor_sync(0xffffffff, s, d);
    o[8] = s;
    long long w = ((long long)v << 32) | (unsigned)t;
    long long r = __shfl_down_sync(0xffffffff, w, 1);
    o[9] = (int)(r >> 32);
    o[10] = (int)r;
    float f = __shfl_sync(0xffffffff, (float)v * 0.5f, 31 - t);
    o[11] = (int)(f * 2);
    int p, got;
    asm("{ .reg .pred q; shfl.sync.down.b32 %0|q, %2, 30, 31, -1; selp.u32 %1, 1, 0, q; }"
        : "=r"(got), "=r"(p) : "r"(v));
    o[12] = p;
    o[13] = got;
}

extern "C" __global__ void votes(const int *in, unsigned *out)
{
    int t = threadIdx.x, v = in[blockIdx.x * blockDim.x + t];
    unsigned *o = out + (blockIdx.x * blockDim.x + t) * 12;
    o[0] = __all_sync(0xffffffff, v > 0);
    o[1] = __any_sync(0xffffffff, v > 100);
    o[2] = __ballot_sync(0xffffffff, v & 1);
    unsigned uni;
    asm("{ .reg .pred a, b; setp.ne.u32 a, %1, 0; vote.sync.uni.pred b, a, -1; selp.u32 %0, 1, 0, b; }"
        : "=r"(uni) : "r"(v & 2));
    o[3] = uni;
    o[4] = __activemask();
    if (t % 3 == 0)
        o[5] = __activemask();
    else
        o[5] = 0;
    if (t < 20) {
        if (t >= 10)
            o[6] = __ballot_sync(__activemask(), 1);
        else
            o[6] = 7;
    } else {
        o[6] = 9;
    }
    o[7] = __match_any_sync(0xffffffff, v % 4);
    int pred;
    o[8] = __match_all_sync(0xffffffff, v > -1000000 ? 42 : t, &pred);
    o[9] = pred;
    o[10] = __match_all_sync(0xffffffff, t / 16, &pred) | (pred << 31);
    __syncwarp();
#if __CUDA_ARCH__ >= 800
    o[11] = __reduce_add_sync(0xffffffff, (unsigned)v) ^ __reduce_max_sync(0xffffffff, (unsigned)t);
#else
    o[11] = 0;
#endif
}

// Block barriers with reductions and lanes reaching them from different paths.
extern "C" __global__ void barriers(const int *in, int *out)
{
    __shared__ int acc[4];
    int t = threadIdx.x, v = in[t];
    if (t < 4)
        acc[t] = 0;
    __syncthreads();
    if (v & 1) { // lanes diverge before the barrier
        atomicAdd(&acc[0], v);
        __syncthreads();
    } else {
        atomicAdd(&acc[1], v);
        __syncthreads();
    }
    int c = __syncthreads_count(v % 3 == 0);
    int a = __syncthreads_and(v >= 0);
    int o = __syncthreads_or(v == 77);
    out[t] = acc[0] * 1000 + acc[1] + (c << 24) + (a << 22) + (o << 21);
}
