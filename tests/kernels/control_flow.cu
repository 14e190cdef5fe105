// control_flow: thread indexing and control flow the other programs do not reach.
//  1. 3D grids and blocks: every thread of a (5,4,3) x (8,4,2) launch writes its packed
//     (blockIdx, threadIdx, gridDim, blockDim) to its own slot: all slots exactly once.
//  2. A 70 000 x 2 grid of 32-thread blocks (gridDim.x beyond 65 535).
//  3. Divergence: data-dependent loop trip counts (Collatz steps), break/continue, a switch,
//     early return, nested ifs, per thread.
//  4. Calls: a __noinline__ recursive function (fib), __noinline__ calls with several
//     arguments, a per-thread local array indexed dynamically (insertion sort of 24 values).
//     (Indirect calls are in indirect_call.cu.)
//  5. Narrow and vector types: signed char / short wraparound and sign extension, 8- and
//     16-bit loads and stores, float4 / int2 / double2 / char4 loads and stores, __ldg.
//  6. The threadfence "last block" pattern: blocks publish partial sums, __threadfence(),
//     atomicInc a ticket; the last block to arrive sums all partials.
//  7. __syncwarp and shuffles inside a branch taken by half a warp.
//  8. Special registers: %laneid, %lanemask_lt/_eq, %warpid < %nwarpid, %smid < %nsmid,
//     clock64() strictly increasing across __nanosleep, %globaltimer nonzero.
#include "kt.h"

#include <algorithm>
#include <vector>

// 1. 3D indexing
__global__ void index3d(unsigned long long *out)
{
    unsigned bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
    unsigned tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    unsigned block = bx + gridDim.x * (by + gridDim.y * bz);
    unsigned thread = tx + blockDim.x * (ty + blockDim.y * tz);
    unsigned idx = block * (blockDim.x * blockDim.y * blockDim.z) + thread;
    unsigned long long packed = bx | by << 4 | bz << 8 | tx << 12 | ty << 16 | tz << 20;
    packed |= (unsigned long long)(gridDim.x | gridDim.y << 4 | gridDim.z << 8) << 32;
    packed |= (unsigned long long)(blockDim.x | blockDim.y << 4 | blockDim.z << 8) << 44;
    out[idx] = packed;
}

// 2. large grid
__global__ void big_grid(unsigned *out)
{
    unsigned i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
    out[i] = i * 2654435761u;
}

// 3. divergence
__global__ void diverge(const int *in, int *steps, int *kind, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;  // early return: the last block is partial
    long long v = in[i];
    int s = 0;
    while (v != 1) {
        if (v & 1)
            v = 3 * v + 1;
        else
            v >>= 1;
        s++;
        if (s > 1000)
            break;
    }
    steps[i] = s;
    int k = 0;
    for (int j = 0; j < (i % 13); j++) {
        if (j == 5)
            continue;
        if ((i ^ j) % 7 == 0)
            break;
        k += j;
    }
    switch (i % 6) {
    case 0: k = k * 3; break;
    case 1: k = -k; break;
    case 2: k += 100; // fall through
    case 3: k ^= 0x55; break;
    case 4: k = k << 2; break;
    default: if (k > 10) { if (k & 1) k = 1; else k = 2; } else k = 3; break;
    }
    kind[i] = k;
}

static int host_kind(int i)
{
    int k = 0;
    for (int j = 0; j < (i % 13); j++) {
        if (j == 5)
            continue;
        if ((i ^ j) % 7 == 0)
            break;
        k += j;
    }
    switch (i % 6) {
    case 0: k = k * 3; break;
    case 1: k = -k; break;
    case 2: k += 100; // fall through
    case 3: k ^= 0x55; break;
    case 4: k = k << 2; break;
    default: if (k > 10) { if (k & 1) k = 1; else k = 2; } else k = 3; break;
    }
    return k;
}

// 4. calls
__device__ __noinline__ int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__device__ __noinline__ int apply(int which, int a, int b)
{
    switch (which) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    default: return a ^ b;
    }
}

__global__ void calls(const int *in, int *fibs, int *applied, int *sorted, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    fibs[i] = fib(i % 12);
    applied[i] = apply(in[i] & 3, in[i], i);
    int local[24];
    for (int k = 0; k < 24; k++)
        local[k] = in[(i * 7 + k * 13) % n];
    for (int k = 1; k < 24; k++) {  // insertion sort with dynamic indices
        int x = local[k], j = k - 1;
        while (j >= 0 && local[j] > x) {
            local[j + 1] = local[j];
            j--;
        }
        local[j + 1] = x;
    }
    for (int k = 0; k < 24; k++)
        sorted[i * 24 + k] = local[k];
}

// 5. narrow and vector types
struct Narrow {
    signed char c;
    unsigned char uc;
    short s;
    unsigned short us;
};

__global__ void narrow(const signed char *c, const short *s, Narrow *out, int *widened, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    signed char a = c[i];
    short b = s[i];
    Narrow r;
    r.c = (signed char)(a * 3 + 100);
    r.uc = (unsigned char)(a + 200);
    r.s = (short)(b * 7 - 30000);
    r.us = (unsigned short)(b * 3);
    out[i] = r;
    widened[i] = a * b + (a >> 2) + (b >> 3);  // sign extension of loaded values
}

__global__ void vectors(const float4 *f4, const int2 *i2, const double2 *d2, const char4 *c4,
                        float4 *of4, int2 *oi2, double2 *od2, char4 *oc4, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float4 a = f4[i];
    float4 g = __ldg(&f4[n - 1 - i]);
    of4[i] = make_float4(a.w + g.x, a.z - g.y, a.y * 2.0f, a.x);
    int2 b = __ldg(&i2[i]);
    oi2[i] = make_int2(b.y, (int)((unsigned)b.x + (unsigned)b.y));
    double2 d = d2[i];
    od2[i] = make_double2(d.y, d.x - d.y);
    char4 c = c4[i];
    oc4[i] = make_char4(c.w, c.z, (signed char)(c.y + 1), (signed char)(c.x - 1));
}

// 6. last block
__device__ unsigned tickets = 0;

__global__ void last_block_sum(const int *in, int n, int *partials, int *result)
{
    __shared__ int sdata[256];
    __shared__ bool am_last;
    int t = threadIdx.x;
    int sum = 0;
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x)
        sum += in[i];
    sdata[t] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            sdata[t] += sdata[t + s];
        __syncthreads();
    }
    if (t == 0) {
        partials[blockIdx.x] = sdata[0];
        __threadfence();
        unsigned ticket = atomicInc(&tickets, gridDim.x);
        am_last = (ticket == gridDim.x - 1);
    }
    __syncthreads();
    if (am_last) {
        int total = 0;
        for (int b = t; b < (int)gridDim.x; b += blockDim.x)
            total += ((volatile int *)partials)[b];
        sdata[t] = total;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (t < s)
                sdata[t] += sdata[t + s];
            __syncthreads();
        }
        if (t == 0) {
            *result = sdata[0];
            tickets = 0;
        }
    }
}

// 7. half-warp branch
__global__ void half_warp(const int *in, int *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = in[i];
    if (lane < 16) {
        const unsigned lo = 0x0000ffffu;
        int s = v;
        for (int off = 1; off < 16; off <<= 1) {
            int y = __shfl_up_sync(lo, s, off, 16);
            if (lane >= off)
                s += y;
        }
        __syncwarp(lo);
        out[i] = s;  // inclusive scan of the low half
    } else {
        const unsigned hi = 0xffff0000u;
        out[i] = __shfl_sync(hi, v, 31) - v;  // lane 31's value minus mine
        __syncwarp(hi);
    }
}

// 8. special registers
struct Specials {
    unsigned lane, lt, eq, warpid, nwarpid, smid, nsmid, clock_ok;
    unsigned long long gtimer;
};

__global__ void specials(Specials *out)
{
    Specials r;
    long long t0 = clock64();
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(r.lane));
    asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(r.lt));
    asm volatile("mov.u32 %0, %%lanemask_eq;" : "=r"(r.eq));
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(r.warpid));
    asm volatile("mov.u32 %0, %%nwarpid;" : "=r"(r.nwarpid));
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r.smid));
    asm volatile("mov.u32 %0, %%nsmid;" : "=r"(r.nsmid));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(r.gtimer));
    __nanosleep(100);
    long long t1 = clock64();
    r.clock_ok = t1 > t0;
    out[blockIdx.x * blockDim.x + threadIdx.x] = r;
}

int main()
{
    kt_start("control_flow");
    KtRng rng(13);

    // 1
    {
        dim3 grid(5, 4, 3), block(8, 4, 2);
        const int total = 5 * 4 * 3 * 8 * 4 * 2;
        unsigned long long *d;
        CHECK_CUDA(cudaMalloc(&d, total * sizeof(unsigned long long)));
        CHECK_CUDA(cudaMemset(d, 0xff, total * sizeof(unsigned long long)));
        index3d<<<grid, block>>>(d);
        KT_SYNC();
        std::vector<unsigned long long> h(total);
        CHECK_CUDA(cudaMemcpy(h.data(), d, total * sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost));
        int idx = 0;
        for (unsigned bz = 0; bz < 3; bz++)
            for (unsigned by = 0; by < 4; by++)
                for (unsigned bx = 0; bx < 5; bx++)
                    for (unsigned tz = 0; tz < 2; tz++)
                        for (unsigned ty = 0; ty < 4; ty++)
                            for (unsigned tx = 0; tx < 8; tx++, idx++) {
                                unsigned long long e = bx | by << 4 | bz << 8 | tx << 12 |
                                                       ty << 16 | tz << 20;
                                e |= (unsigned long long)(5 | 4 << 4 | 3 << 8) << 32;
                                e |= (unsigned long long)(8 | 4 << 4 | 2 << 8) << 44;
                                kt_check_u64("3D launch: packed indices", idx, h[idx], e);
                            }
        CHECK_CUDA(cudaFree(d));
    }

    // 2
    {
        dim3 grid(70000, 2);
        const size_t total = 70000ull * 2 * 32;
        unsigned *d;
        CHECK_CUDA(cudaMalloc(&d, total * sizeof(unsigned)));
        big_grid<<<grid, 32>>>(d);
        KT_SYNC();
        std::vector<unsigned> h(total);
        CHECK_CUDA(cudaMemcpy(h.data(), d, total * sizeof(unsigned), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < total; i++)
            kt_check_u64("70000x2 grid", i, h[i], (unsigned)i * 2654435761u);
        CHECK_CUDA(cudaFree(d));
    }

    // 3 and 4
    const int n = 3000;
    std::vector<int> in(n);
    for (int i = 0; i < n; i++)
        in[i] = rng.range(1, 100000);
    int *din;
    CHECK_CUDA(cudaMalloc(&din, n * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    {
        int *dsteps, *dkind;
        CHECK_CUDA(cudaMalloc(&dsteps, n * sizeof(int)));
        CHECK_CUDA(cudaMalloc(&dkind, n * sizeof(int)));
        diverge<<<(n + 127) / 128, 128>>>(din, dsteps, dkind, n);
        KT_SYNC();
        std::vector<int> steps(n), kind(n);
        CHECK_CUDA(cudaMemcpy(steps.data(), dsteps, n * sizeof(int), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(kind.data(), dkind, n * sizeof(int), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++) {
            long long v = in[i];
            int s = 0;
            while (v != 1) {
                v = (v & 1) ? 3 * v + 1 : v >> 1;
                if (++s > 1000)
                    break;
            }
            kt_check_i64("Collatz steps (data-dependent loop)", i, steps[i], s);
            kt_check_i64("break/continue/switch", i, kind[i], host_kind(i));
        }
        CHECK_CUDA(cudaFree(dsteps));
        CHECK_CUDA(cudaFree(dkind));
    }
    {
        int *dfib, *dapp, *dsorted;
        CHECK_CUDA(cudaMalloc(&dfib, n * sizeof(int)));
        CHECK_CUDA(cudaMalloc(&dapp, n * sizeof(int)));
        CHECK_CUDA(cudaMalloc(&dsorted, n * 24 * sizeof(int)));
        calls<<<(n + 63) / 64, 64>>>(din, dfib, dapp, dsorted, n);
        KT_SYNC();
        std::vector<int> fibs(n), app(n), sorted(n * 24);
        CHECK_CUDA(cudaMemcpy(fibs.data(), dfib, n * sizeof(int), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(app.data(), dapp, n * sizeof(int), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(sorted.data(), dsorted, n * 24 * sizeof(int),
                              cudaMemcpyDeviceToHost));
        int f[18] = {0, 1};
        for (int k = 2; k < 18; k++)
            f[k] = f[k - 1] + f[k - 2];
        for (int i = 0; i < n; i++) {
            kt_check_i64("recursive fib(i % 12)", i, fibs[i], f[i % 12]);
            int a = in[i], e;
            switch (a & 3) {
            case 0: e = a + i; break;
            case 1: e = a - i; break;
            case 2: e = a * i; break;
            default: e = a ^ i; break;
            }
            kt_check_i64("__noinline__ apply(a & 3, a, i)", i, app[i], e);
            int local[24];
            for (int k = 0; k < 24; k++)
                local[k] = in[(i * 7 + k * 13) % n];
            std::sort(local, local + 24);
            for (int k = 0; k < 24; k++)
                kt_check_i64("insertion sort in a local array", i * 24 + k, sorted[i * 24 + k],
                              local[k]);
        }
        CHECK_CUDA(cudaFree(dfib));
        CHECK_CUDA(cudaFree(dapp));
        CHECK_CUDA(cudaFree(dsorted));
    }

    // 5
    {
        const int m = 1000;
        std::vector<signed char> c(m);
        std::vector<short> s(m);
        for (int i = 0; i < m; i++) {
            c[i] = (signed char)rng.range(-128, 127);
            s[i] = (short)rng.range(-32768, 32767);
        }
        signed char *dc;
        short *ds;
        Narrow *dout;
        int *dw;
        CHECK_CUDA(cudaMalloc(&dc, m));
        CHECK_CUDA(cudaMalloc(&ds, m * sizeof(short)));
        CHECK_CUDA(cudaMalloc(&dout, m * sizeof(Narrow)));
        CHECK_CUDA(cudaMalloc(&dw, m * sizeof(int)));
        CHECK_CUDA(cudaMemcpy(dc, c.data(), m, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(ds, s.data(), m * sizeof(short), cudaMemcpyHostToDevice));
        narrow<<<(m + 127) / 128, 128>>>(dc, ds, dout, dw, m);
        KT_SYNC();
        std::vector<Narrow> out(m);
        std::vector<int> w(m);
        CHECK_CUDA(cudaMemcpy(out.data(), dout, m * sizeof(Narrow), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(w.data(), dw, m * sizeof(int), cudaMemcpyDeviceToHost));
        for (int i = 0; i < m; i++) {
            signed char a = c[i];
            short b = s[i];
            kt_check_i64("(signed char)(a * 3 + 100)", i, out[i].c, (signed char)(a * 3 + 100));
            kt_check_i64("(unsigned char)(a + 200)", i, out[i].uc, (unsigned char)(a + 200));
            kt_check_i64("(short)(b * 7 - 30000)", i, out[i].s, (short)(b * 7 - 30000));
            kt_check_i64("(unsigned short)(b * 3)", i, out[i].us, (unsigned short)(b * 3));
            kt_check_i64("a * b + (a >> 2) + (b >> 3)", i, w[i], a * b + (a >> 2) + (b >> 3));
        }
        CHECK_CUDA(cudaFree(dc));
        CHECK_CUDA(cudaFree(ds));
        CHECK_CUDA(cudaFree(dout));
        CHECK_CUDA(cudaFree(dw));

        std::vector<float4> f4(m);
        std::vector<int2> i2(m);
        std::vector<double2> d2(m);
        std::vector<char4> c4(m);
        for (int i = 0; i < m; i++) {
            f4[i] = make_float4(rng.range(-1000, 1000) * 0.5f, rng.range(-1000, 1000) * 0.25f,
                                rng.range(-1000, 1000) * 1.0f, rng.range(-1000, 1000) * 0.125f);
            i2[i] = make_int2((int)rng.next(), rng.range(-5000, 5000));
            d2[i] = make_double2(rng.range(-100000, 100000) / 3.0, rng.range(-9, 9) * 1e300);
            c4[i] = make_char4((signed char)rng.range(-127, 127), (signed char)rng.range(-127, 127),
                               (signed char)rng.range(-128, 126), (signed char)rng.range(-127, 127));
        }
        float4 *df4, *of4;
        int2 *di2, *oi2;
        double2 *dd2, *od2;
        char4 *dc4, *oc4;
        CHECK_CUDA(cudaMalloc(&df4, m * sizeof(float4)));
        CHECK_CUDA(cudaMalloc(&of4, m * sizeof(float4)));
        CHECK_CUDA(cudaMalloc(&di2, m * sizeof(int2)));
        CHECK_CUDA(cudaMalloc(&oi2, m * sizeof(int2)));
        CHECK_CUDA(cudaMalloc(&dd2, m * sizeof(double2)));
        CHECK_CUDA(cudaMalloc(&od2, m * sizeof(double2)));
        CHECK_CUDA(cudaMalloc(&dc4, m * sizeof(char4)));
        CHECK_CUDA(cudaMalloc(&oc4, m * sizeof(char4)));
        CHECK_CUDA(cudaMemcpy(df4, f4.data(), m * sizeof(float4), cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(di2, i2.data(), m * sizeof(int2), cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(dd2, d2.data(), m * sizeof(double2), cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(dc4, c4.data(), m * sizeof(char4), cudaMemcpyHostToDevice));
        vectors<<<(m + 127) / 128, 128>>>(df4, di2, dd2, dc4, of4, oi2, od2, oc4, m);
        KT_SYNC();
        std::vector<float4> rf4(m);
        std::vector<int2> ri2(m);
        std::vector<double2> rd2(m);
        std::vector<char4> rc4(m);
        CHECK_CUDA(cudaMemcpy(rf4.data(), of4, m * sizeof(float4), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(ri2.data(), oi2, m * sizeof(int2), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(rd2.data(), od2, m * sizeof(double2), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(rc4.data(), oc4, m * sizeof(char4), cudaMemcpyDeviceToHost));
        for (int i = 0; i < m; i++) {
            float4 a = f4[i], g = f4[m - 1 - i];
            kt_check_f32_exact("float4 .x", i, rf4[i].x, a.w + g.x);
            kt_check_f32_exact("float4 .y", i, rf4[i].y, a.z - g.y);
            kt_check_f32_exact("float4 .z", i, rf4[i].z, a.y * 2.0f);
            kt_check_f32_exact("float4 .w", i, rf4[i].w, a.x);
            kt_check_i64("int2 .x", i, ri2[i].x, i2[i].y);
            kt_check_i64("int2 .y", i, ri2[i].y, (int)((unsigned)i2[i].x + (unsigned)i2[i].y));
            kt_check_f64_exact("double2 .x", i, rd2[i].x, d2[i].y);
            kt_check_f64_exact("double2 .y", i, rd2[i].y, d2[i].x - d2[i].y);
            kt_check_i64("char4 .x", i, rc4[i].x, c4[i].w);
            kt_check_i64("char4 .y", i, rc4[i].y, c4[i].z);
            kt_check_i64("char4 .z", i, rc4[i].z, (signed char)(c4[i].y + 1));
            kt_check_i64("char4 .w", i, rc4[i].w, (signed char)(c4[i].x - 1));
        }
        CHECK_CUDA(cudaFree(df4));
        CHECK_CUDA(cudaFree(of4));
        CHECK_CUDA(cudaFree(di2));
        CHECK_CUDA(cudaFree(oi2));
        CHECK_CUDA(cudaFree(dd2));
        CHECK_CUDA(cudaFree(od2));
        CHECK_CUDA(cudaFree(dc4));
        CHECK_CUDA(cudaFree(oc4));
    }

    // 6: twice, so the ticket is seen reset by the last block
    {
        const int m = 200000, blocks = 48;
        std::vector<int> v(m);
        long long e = 0;
        for (int i = 0; i < m; i++) {
            v[i] = rng.range(-5000, 5000);
            e += v[i];
        }
        int *dv, *dpart, *dres;
        CHECK_CUDA(cudaMalloc(&dv, m * sizeof(int)));
        CHECK_CUDA(cudaMalloc(&dpart, blocks * sizeof(int)));
        CHECK_CUDA(cudaMalloc(&dres, sizeof(int)));
        CHECK_CUDA(cudaMemcpy(dv, v.data(), m * sizeof(int), cudaMemcpyHostToDevice));
        for (int round = 0; round < 2; round++) {
            CHECK_CUDA(cudaMemset(dres, 0x7f, sizeof(int)));
            last_block_sum<<<blocks, 256>>>(dv, m, dpart, dres);
            KT_SYNC();
            int r;
            CHECK_CUDA(cudaMemcpy(&r, dres, sizeof r, cudaMemcpyDeviceToHost));
            kt_check_i64("last-block sum (threadfence + atomicInc ticket)", round, r, e);
        }
        unsigned t;
        CHECK_CUDA(cudaMemcpyFromSymbol(&t, tickets, sizeof t));
        kt_check_u64("ticket after the last block reset it", 0, t, 0);
        CHECK_CUDA(cudaFree(dv));
        CHECK_CUDA(cudaFree(dpart));
        CHECK_CUDA(cudaFree(dres));
    }

    // 7
    {
        const int m = 256;
        std::vector<int> v(m), r(m);
        for (int i = 0; i < m; i++)
            v[i] = rng.range(-1000, 1000);
        int *dv, *dr;
        CHECK_CUDA(cudaMalloc(&dv, m * sizeof(int)));
        CHECK_CUDA(cudaMalloc(&dr, m * sizeof(int)));
        CHECK_CUDA(cudaMemcpy(dv, v.data(), m * sizeof(int), cudaMemcpyHostToDevice));
        half_warp<<<m / 64, 64>>>(dv, dr);
        KT_SYNC();
        CHECK_CUDA(cudaMemcpy(r.data(), dr, m * sizeof(int), cudaMemcpyDeviceToHost));
        for (int i = 0; i < m; i++) {
            int lane = i & 31, base = i & ~31, e;
            if (lane < 16) {
                e = 0;
                for (int k = 0; k <= lane; k++)
                    e += v[base + k];
            } else {
                e = v[base + 31] - v[i];
            }
            kt_check_i64(lane < 16 ? "half-warp __shfl_up_sync scan" : "half-warp __shfl_sync",
                         i, r[i], e);
        }
        CHECK_CUDA(cudaFree(dv));
        CHECK_CUDA(cudaFree(dr));
    }

    // 8
    {
        const int blocks = 3, threads = 96;
        Specials *d;
        CHECK_CUDA(cudaMalloc(&d, blocks * threads * sizeof(Specials)));
        specials<<<blocks, threads>>>(d);
        KT_SYNC();
        std::vector<Specials> h(blocks * threads);
        CHECK_CUDA(cudaMemcpy(h.data(), d, h.size() * sizeof(Specials), cudaMemcpyDeviceToHost));
        for (int i = 0; i < blocks * threads; i++) {
            unsigned lane = (i % threads) % 32;
            kt_check_u64("%laneid", i, h[i].lane, lane);
            kt_check_u64("%lanemask_lt", i, h[i].lt, (1u << lane) - 1);
            kt_check_u64("%lanemask_eq", i, h[i].eq, 1u << lane);
            kt_check_i64("%warpid < %nwarpid", i, h[i].warpid < h[i].nwarpid, 1);
            kt_check_i64("%smid < %nsmid", i, h[i].smid < h[i].nsmid, 1);
            kt_check_i64("clock64() increases across __nanosleep", i, h[i].clock_ok, 1);
            kt_check_i64("%globaltimer != 0", i, h[i].gtimer != 0, 1);
        }
        CHECK_CUDA(cudaFree(d));
    }

    CHECK_CUDA(cudaFree(din));
    kt_pass();
    return 0;
}
