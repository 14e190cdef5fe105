// reduction: warp-level primitives, exact integer results.
//  1. Sum of 1 M ints in [-1000, 1000]: grid-stride partial sums, __shfl_down_sync tree per
//     warp, per-warp sums through shared memory, a second warp stage, one atomicAdd per
//     block. Block partials and the total must equal the host's.
//  2. Max of the same ints: per-thread max, __shfl_xor_sync butterfly (every lane must end
//     with its warp's max), atomicMax per warp into the total.
//  3. Votes on 128 warps with all-true, all-false, mixed and single-true predicates:
//     __ballot_sync, __all_sync, __any_sync, __popc of the ballot, and a ballot over the odd
//     lanes only inside a divergent branch.
//  4. Shuffle semantics lane by lane: __shfl_sync (index, broadcast, width 8, double),
//     __shfl_up_sync / __shfl_down_sync (edges keep their own value, width 8), xor.
//  5. Block-wide votes (__syncthreads_count/_and/_or), __match_any_sync/__match_all_sync,
//     warp reductions __reduce_add/min/max/and/or/xor_sync (sm_80 and later; built for sm_75
//     the same values come from shuffles), and cooperative_groups: tiled_partition<16>
//     shfl_down reduction and cg::reduce over a tile of 8.
#include "kt.h"

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

#include <algorithm>
#include <climits>
#include <vector>

#define FULL 0xffffffffu

__device__ int warp_sum(int v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(FULL, v, off);
    return v;
}

__global__ void sum_kernel(const int *x, int n, int *partials, int *total)
{
    __shared__ int warp_sums[32];
    int sum = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        sum += x[i];
    sum = warp_sum(sum);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        warp_sums[warp] = sum;
    __syncthreads();
    if (warp == 0) {
        sum = lane < (int)((blockDim.x + 31) / 32) ? warp_sums[lane] : 0;
        sum = warp_sum(sum);
        if (lane == 0) {
            partials[blockIdx.x] = sum;
            atomicAdd(total, sum);
        }
    }
}

__global__ void max_kernel(const int *x, int n, int *lane_max, int *total)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int m = INT_MIN;
    for (int i = t; i < n; i += gridDim.x * blockDim.x)
        m = max(m, x[i]);
    for (int mask = 16; mask > 0; mask >>= 1)
        m = max(m, __shfl_xor_sync(FULL, m, mask));
    lane_max[t] = m;
    if ((threadIdx.x & 31) == 0)
        atomicMax(total, m);
}

__global__ void vote_kernel(const int *x, unsigned *ballot, int *all, int *any, int *popc,
                            unsigned *odd_ballot)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int w = i >> 5, lane = threadIdx.x & 31;
    bool p = x[i] > 0;
    unsigned b = __ballot_sync(FULL, p);
    int a = __all_sync(FULL, p);
    int y = __any_sync(FULL, p);
    if (lane == 0) {
        ballot[w] = b;
        all[w] = a;
        any[w] = y;
        popc[w] = __popc(b);
    }
    if (lane & 1) {
        unsigned ob = __ballot_sync(0xaaaaaaaau, p);
        if (lane == 1)
            odd_ballot[w] = ob;
    }
}

struct ShflOut {
    int idx, bcast, down5, up3, xor6, idx_w8, down2_w8, up1_w8, xor3_w8;
    double dbl;
};

__global__ void shfl_kernel(const int *x, ShflOut *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = x[i];
    ShflOut o;
    o.idx = __shfl_sync(FULL, v, (lane * 7 + 3) & 31);
    o.bcast = __shfl_sync(FULL, v, 7);
    o.down5 = __shfl_down_sync(FULL, v, 5);
    o.up3 = __shfl_up_sync(FULL, v, 3);
    o.xor6 = __shfl_xor_sync(FULL, v, 6);
    o.idx_w8 = __shfl_sync(FULL, v, 13, 8);  // 13 % 8 = 5 within each group of 8
    o.down2_w8 = __shfl_down_sync(FULL, v, 2, 8);
    o.up1_w8 = __shfl_up_sync(FULL, v, 1, 8);
    o.xor3_w8 = __shfl_xor_sync(FULL, v, 3, 8);
    o.dbl = __shfl_sync(FULL, v * 0.25 + 1e12, 31 - lane);
    out[i] = o;
}

struct BlockVotes {
    int count, all, any;
};

__global__ void block_vote_kernel(const int *x, BlockVotes *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int p = x[i] > 0;
    int c = __syncthreads_count(p);
    int a = __syncthreads_and(p);
    int o = __syncthreads_or(p);
    if (threadIdx.x == 0)
        out[blockIdx.x] = BlockVotes{c, a, o};
}

struct WarpOps {
    unsigned match_any, match_all_mask;
    int match_all_pred;
    int radd, rmin, rmax;
    unsigned rand_, ror, rxor, rumin;
    int tile16_sum, tile8_max;
};

__global__ void warp_ops_kernel(const int *x, WarpOps *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i];
    WarpOps o;
    o.match_any = __match_any_sync(FULL, v & 7);
    int pred;
    o.match_all_mask = __match_all_sync(FULL, (i >> 5) % 3 == 0 ? 42 : v, &pred);
    o.match_all_pred = pred;
    unsigned u = (unsigned)v;
#if __CUDA_ARCH__ >= 800
    o.radd = __reduce_add_sync(FULL, v);
    o.rmin = __reduce_min_sync(FULL, v);
    o.rmax = __reduce_max_sync(FULL, v);
    o.rand_ = __reduce_and_sync(FULL, u);
    o.ror = __reduce_or_sync(FULL, u);
    o.rxor = __reduce_xor_sync(FULL, u);
    o.rumin = __reduce_min_sync(FULL, u);
#else
    int add = v, mn = v, mx = v;
    unsigned an = u, orr = u, xr = u, umn = u;
    for (int m = 16; m > 0; m >>= 1) {
        add += __shfl_xor_sync(FULL, add, m);
        mn = min(mn, __shfl_xor_sync(FULL, mn, m));
        mx = max(mx, __shfl_xor_sync(FULL, mx, m));
        an &= __shfl_xor_sync(FULL, an, m);
        orr |= __shfl_xor_sync(FULL, orr, m);
        xr ^= __shfl_xor_sync(FULL, xr, m);
        umn = min(umn, __shfl_xor_sync(FULL, umn, m));
    }
    o.radd = add;
    o.rmin = mn;
    o.rmax = mx;
    o.rand_ = an;
    o.ror = orr;
    o.rxor = xr;
    o.rumin = umn;
#endif
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> t16 = cg::tiled_partition<16>(block);
    int s = v;
    for (int off = t16.size() / 2; off > 0; off >>= 1)
        s += t16.shfl_down(s, off);
    o.tile16_sum = t16.shfl(s, 0);
    cg::thread_block_tile<8> t8 = cg::tiled_partition<8>(block);
    o.tile8_max = cg::reduce(t8, v, cg::greater<int>());
    out[i] = o;
}

int main()
{
    kt_start("reduction");
    const int n = 1 << 20;
    std::vector<int> x(n);
    KtRng rng(6);
    for (int i = 0; i < n; i++)
        x[i] = rng.range(-1000, 1000);
    x[777777] = 999999;  // a unique maximum
    int *dx, *dpart, *dtotal, *dlane;
    CHECK_CUDA(cudaMalloc(&dx, n * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(int), cudaMemcpyHostToDevice));

    // 1. sum
    const int G = 128, B = 256, T = G * B;
    CHECK_CUDA(cudaMalloc(&dpart, G * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dtotal, sizeof(int)));
    CHECK_CUDA(cudaMemset(dtotal, 0, sizeof(int)));
    sum_kernel<<<G, B>>>(dx, n, dpart, dtotal);
    KT_SYNC();
    std::vector<int> part(G);
    int total = 0;
    CHECK_CUDA(cudaMemcpy(part.data(), dpart, G * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(&total, dtotal, sizeof(int), cudaMemcpyDeviceToHost));
    std::vector<long long> epart(G, 0);
    long long etotal = 0;
    for (int i = 0; i < n; i++) {
        epart[(i % T) / B] += x[i];
        etotal += x[i];
    }
    for (int b = 0; b < G; b++)
        kt_check_i64("sum block partial", b, part[b], epart[b]);
    kt_check_i64("sum total", 0, total, etotal);

    // 2. max
    CHECK_CUDA(cudaMalloc(&dlane, T * sizeof(int)));
    int init = INT_MIN;
    CHECK_CUDA(cudaMemcpy(dtotal, &init, sizeof(int), cudaMemcpyHostToDevice));
    max_kernel<<<G, B>>>(dx, n, dlane, dtotal);
    KT_SYNC();
    std::vector<int> lane_max(T);
    CHECK_CUDA(cudaMemcpy(lane_max.data(), dlane, T * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(&total, dtotal, sizeof(int), cudaMemcpyDeviceToHost));
    std::vector<int> tmax(T, INT_MIN);
    for (int i = 0; i < n; i++)
        tmax[i % T] = std::max(tmax[i % T], x[i]);
    for (int t = 0; t < T; t++) {
        int wmax = *std::max_element(tmax.begin() + (t & ~31), tmax.begin() + (t & ~31) + 32);
        kt_check_i64("max after xor butterfly (per lane)", t, lane_max[t], wmax);
    }
    kt_check_i64("max total", 0, total, 999999);

    // 3. votes: 128 warps
    const int W = 128, nv = W * 32;
    std::vector<int> v(nv);
    for (int w = 0; w < W; w++)
        for (int l = 0; l < 32; l++) {
            int &e = v[w * 32 + l];
            switch (w % 4) {
            case 0: e = rng.range(1, 100); break;                  // all true
            case 1: e = rng.range(-100, 0); break;                 // all false
            case 2: e = rng.range(-100, 100); break;               // mixed
            default: e = (l == (w * 5) % 32) ? 1 : -(int)l; break; // exactly one true
            }
        }
    int *dv, *dall, *dany, *dpopc;
    unsigned *dballot, *dodd;
    CHECK_CUDA(cudaMalloc(&dv, nv * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dballot, W * sizeof(unsigned)));
    CHECK_CUDA(cudaMalloc(&dodd, W * sizeof(unsigned)));
    CHECK_CUDA(cudaMalloc(&dall, W * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dany, W * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dpopc, W * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(dv, v.data(), nv * sizeof(int), cudaMemcpyHostToDevice));
    vote_kernel<<<nv / 128, 128>>>(dv, dballot, dall, dany, dpopc, dodd);
    KT_SYNC();
    std::vector<unsigned> ballot(W), odd(W);
    std::vector<int> all(W), any(W), popc(W);
    CHECK_CUDA(cudaMemcpy(ballot.data(), dballot, W * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(odd.data(), dodd, W * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(all.data(), dall, W * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(any.data(), dany, W * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(popc.data(), dpopc, W * sizeof(int), cudaMemcpyDeviceToHost));
    for (int w = 0; w < W; w++) {
        unsigned eb = 0;
        for (int l = 0; l < 32; l++)
            if (v[w * 32 + l] > 0)
                eb |= 1u << l;
        kt_check_u64("__ballot_sync", w, ballot[w], eb);
        kt_check_i64("__all_sync != 0", w, all[w] != 0, eb == FULL);
        kt_check_i64("__any_sync != 0", w, any[w] != 0, eb != 0);
        kt_check_i64("__popc(ballot)", w, popc[w], __builtin_popcount(eb));
        kt_check_u64("__ballot_sync(odd lanes, divergent)", w, odd[w], eb & 0xaaaaaaaau);
    }

    // 4. shuffles, lane by lane
    ShflOut *dshfl;
    CHECK_CUDA(cudaMalloc(&dshfl, nv * sizeof(ShflOut)));
    shfl_kernel<<<nv / 64, 64>>>(dv, dshfl);
    KT_SYNC();
    std::vector<ShflOut> so(nv);
    CHECK_CUDA(cudaMemcpy(so.data(), dshfl, nv * sizeof(ShflOut), cudaMemcpyDeviceToHost));
    for (int i = 0; i < nv; i++) {
        int base = i & ~31, lane = i & 31, g8 = lane & ~7, l8 = lane & 7;
        auto at = [&](int l) { return v[base + l]; };
        kt_check_i64("__shfl_sync(v, (lane*7+3)&31)", i, so[i].idx, at((lane * 7 + 3) & 31));
        kt_check_i64("__shfl_sync(v, 7)", i, so[i].bcast, at(7));
        kt_check_i64("__shfl_down_sync(v, 5)", i, so[i].down5, lane + 5 < 32 ? at(lane + 5) : at(lane));
        kt_check_i64("__shfl_up_sync(v, 3)", i, so[i].up3, lane >= 3 ? at(lane - 3) : at(lane));
        kt_check_i64("__shfl_xor_sync(v, 6)", i, so[i].xor6, at(lane ^ 6));
        kt_check_i64("__shfl_sync(v, 13, 8)", i, so[i].idx_w8, at(g8 + 5));
        kt_check_i64("__shfl_down_sync(v, 2, 8)", i, so[i].down2_w8, l8 + 2 < 8 ? at(lane + 2) : at(lane));
        kt_check_i64("__shfl_up_sync(v, 1, 8)", i, so[i].up1_w8, l8 >= 1 ? at(lane - 1) : at(lane));
        kt_check_i64("__shfl_xor_sync(v, 3, 8)", i, so[i].xor3_w8, at(lane ^ 3));
        kt_check_f64_exact("__shfl_sync(double, 31-lane)", i, so[i].dbl,
                           at(31 - lane) * 0.25 + 1e12);
    }

    // 5. block votes, match, warp reductions, cooperative groups
    {
        BlockVotes *dbv;
        const int nb = nv / 256;
        CHECK_CUDA(cudaMalloc(&dbv, nb * sizeof(BlockVotes)));
        // blocks of 256 = 8 warps of the vote data: mixes of all-true, all-false, mixed warps
        std::vector<int> bv_in(v);
        for (int i = 0; i < 256; i++)
            bv_in[i] = 5;  // block 0: all true
        for (int i = 256; i < 512; i++)
            bv_in[i] = -5;  // block 1: all false
        bv_in[700] = 9;     // block 2 gets at least this one
        int *dbvin;
        CHECK_CUDA(cudaMalloc(&dbvin, nv * sizeof(int)));
        CHECK_CUDA(cudaMemcpy(dbvin, bv_in.data(), nv * sizeof(int), cudaMemcpyHostToDevice));
        block_vote_kernel<<<nb, 256>>>(dbvin, dbv);
        KT_SYNC();
        std::vector<BlockVotes> bv(nb);
        CHECK_CUDA(cudaMemcpy(bv.data(), dbv, nb * sizeof(BlockVotes), cudaMemcpyDeviceToHost));
        for (int b = 0; b < nb; b++) {
            int c = 0;
            for (int t = 0; t < 256; t++)
                c += bv_in[b * 256 + t] > 0;
            kt_check_i64("__syncthreads_count", b, bv[b].count, c);
            kt_check_i64("__syncthreads_and != 0", b, bv[b].all != 0, c == 256);
            kt_check_i64("__syncthreads_or != 0", b, bv[b].any != 0, c > 0);
        }
        CHECK_CUDA(cudaFree(dbv));
        CHECK_CUDA(cudaFree(dbvin));

        WarpOps *dwo;
        CHECK_CUDA(cudaMalloc(&dwo, nv * sizeof(WarpOps)));
        warp_ops_kernel<<<nv / 128, 128>>>(dv, dwo);
        KT_SYNC();
        std::vector<WarpOps> wo(nv);
        CHECK_CUDA(cudaMemcpy(wo.data(), dwo, nv * sizeof(WarpOps), cudaMemcpyDeviceToHost));
        for (int i = 0; i < nv; i++) {
            int base = i & ~31;
            unsigned any = 0;
            for (int l = 0; l < 32; l++)
                if ((v[base + l] & 7) == (v[i] & 7))
                    any |= 1u << l;
            kt_check_u64("__match_any_sync(v & 7)", i, wo[i].match_any, any);
            bool same = true;
            if ((i >> 5) % 3 != 0)
                for (int l = 0; l < 32; l++)
                    same = same && v[base + l] == v[base];
            kt_check_u64("__match_all_sync mask", i, wo[i].match_all_mask, same ? FULL : 0);
            kt_check_i64("__match_all_sync pred != 0", i, wo[i].match_all_pred != 0, same);
            long long add = 0;
            int mn = INT_MAX, mx = INT_MIN;
            unsigned an = FULL, orr = 0, xr = 0, umn = UINT_MAX;
            for (int l = 0; l < 32; l++) {
                int y = v[base + l];
                add += y;
                mn = std::min(mn, y);
                mx = std::max(mx, y);
                an &= (unsigned)y;
                orr |= (unsigned)y;
                xr ^= (unsigned)y;
                umn = std::min(umn, (unsigned)y);
            }
            kt_check_i64("__reduce_add_sync", i, wo[i].radd, (int)add);
            kt_check_i64("__reduce_min_sync(int)", i, wo[i].rmin, mn);
            kt_check_i64("__reduce_max_sync(int)", i, wo[i].rmax, mx);
            kt_check_u64("__reduce_and_sync", i, wo[i].rand_, an);
            kt_check_u64("__reduce_or_sync", i, wo[i].ror, orr);
            kt_check_u64("__reduce_xor_sync", i, wo[i].rxor, xr);
            kt_check_u64("__reduce_min_sync(unsigned)", i, wo[i].rumin, umn);
            int g16 = i & ~15, s16 = 0;
            for (int l = 0; l < 16; l++)
                s16 += v[g16 + l];
            kt_check_i64("tiled_partition<16> shfl_down sum", i, wo[i].tile16_sum, s16);
            int g8 = i & ~7, m8 = INT_MIN;
            for (int l = 0; l < 8; l++)
                m8 = std::max(m8, v[g8 + l]);
            kt_check_i64("cg::reduce(tile<8>, greater)", i, wo[i].tile8_max, m8);
        }
        CHECK_CUDA(cudaFree(dwo));
    }

    CHECK_CUDA(cudaFree(dx));
    CHECK_CUDA(cudaFree(dpart));
    CHECK_CUDA(cudaFree(dtotal));
    CHECK_CUDA(cudaFree(dlane));
    CHECK_CUDA(cudaFree(dv));
    CHECK_CUDA(cudaFree(dballot));
    CHECK_CUDA(cudaFree(dodd));
    CHECK_CUDA(cudaFree(dall));
    CHECK_CUDA(cudaFree(dany));
    CHECK_CUDA(cudaFree(dpopc));
    CHECK_CUDA(cudaFree(dshfl));
    kt_pass();
    return 0;
}
