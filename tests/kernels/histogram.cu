// histogram: atomics, exact results.
//  1. 256-bin histogram of 4 M bytes (read as 32-bit words): per-block histogram with
//     shared-memory atomicAdd, then one global atomicAdd per non-empty bin; a second,
//     global-atomics-only histogram of the first 256 KiB. Counts must equal the host's.
//  2. Float max through an atomicCAS loop, over mixed-sign values.
//  3. atomicExch chain: the values returned plus the final value are exactly the initial
//     value and every thread's value, each once.
//  4. atomicMin/atomicMax on int (mixed signs), unsigned, long long and unsigned long long.
//  5. atomicInc/atomicDec: wraparound semantics one by one (old >= limit -> 0; old == 0 or
//     old > limit -> limit), and the multiset of values returned under contention.
//  6. atomicAnd/atomicOr/atomicXor on 32- and 64-bit ints; atomicSub; atomicAdd on float and
//     double with integer values (exact in any order); a 64-bit atomicCAS counter.
//  7. Stream compaction with the values atomicAdd returns (every selected element lands in
//     exactly one slot); shared-memory atomics: 64-bit atomicAdd, atomicCAS, atomicExch,
//     atomicMax, float atomicAdd, per block.
#include "kt.h"

#include <algorithm>
#include <climits>
#include <map>
#include <vector>

__global__ void hist_shared(const unsigned *words, int nwords, unsigned *bins)
{
    __shared__ unsigned local[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        local[i] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nwords; i += gridDim.x * blockDim.x) {
        unsigned w = words[i];
        atomicAdd(&local[w & 0xff], 1u);
        atomicAdd(&local[(w >> 8) & 0xff], 1u);
        atomicAdd(&local[(w >> 16) & 0xff], 1u);
        atomicAdd(&local[w >> 24], 1u);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        if (local[i])
            atomicAdd(&bins[i], local[i]);
}

__global__ void hist_global(const unsigned char *bytes, int n, unsigned *bins)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&bins[bytes[i]], 1u);
}

__device__ float atomic_max_float(float *addr, float val)
{
    int *ai = (int *)addr;
    int old = *ai, assumed;
    do {
        assumed = old;
        if (__int_as_float(assumed) >= val)
            break;
        old = atomicCAS(ai, assumed, __float_as_int(val));
    } while (assumed != old);
    return __int_as_float(old);
}

__global__ void fmax_kernel(const float *x, int n, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomic_max_float(out, x[i]);
}

__global__ void exch_kernel(int *loc, int *olds, float *floc, float *folds, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        olds[i] = atomicExch(loc, i);
        folds[i] = atomicExch(floc, i + 0.5f);
    }
}

struct MinMax {
    int imin, imax;
    unsigned umin, umax;
    long long lmin, lmax;
    unsigned long long ulmin, ulmax;
};

__global__ void minmax_kernel(const int *x, const long long *y, int n, MinMax *m)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicMin(&m->imin, x[i]);
        atomicMax(&m->imax, x[i]);
        atomicMin(&m->umin, (unsigned)x[i]);
        atomicMax(&m->umax, (unsigned)x[i]);
        atomicMin(&m->lmin, y[i]);
        atomicMax(&m->lmax, y[i]);
        atomicMin(&m->ulmin, (unsigned long long)y[i]);
        atomicMax(&m->ulmax, (unsigned long long)y[i]);
    }
}

// One thread: atomicInc/atomicDec on each counter c[k] with limit lim[k] (twice each).
__global__ void incdec_serial(unsigned *c, const unsigned *lim, const int *is_inc, unsigned *olds,
                              int n)
{
    for (int k = 0; k < n; k++)
        for (int r = 0; r < 2; r++)
            olds[2 * k + r] = is_inc[k] ? atomicInc(&c[k], lim[k]) : atomicDec(&c[k], lim[k]);
}

__global__ void incdec_contended(unsigned *inc, unsigned *dec, unsigned *inc_olds,
                                 unsigned *dec_olds, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        inc_olds[i] = atomicInc(inc, 9u);
        dec_olds[i] = atomicDec(dec, 9u);
    }
}

struct Bits {
    unsigned a, o, x;
    unsigned long long a64, o64, x64;
    int sub;
    float fsum;
    double dsum;
    unsigned long long add64, cas64;
};

__global__ void bits_kernel(Bits *b, int n)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n)
        return;
    if (t % 3 == 0)
        atomicOr(&b->o, 1u << ((t * 7) % 32));
    if (t < 20)
        atomicAnd(&b->a, ~(1u << t));
    atomicXor(&b->x, (unsigned)t * 2654435761u);
    if (t % 5 == 0)
        atomicOr(&b->o64, 1ull << ((t * 11) % 64));
    if (t < 64 && t % 2 == 1)
        atomicAnd(&b->a64, ~(1ull << t));
    atomicXor(&b->x64, (unsigned long long)t * 0x9E3779B97F4A7C15ull);
    atomicSub(&b->sub, t);
    atomicAdd(&b->fsum, (float)(t % 17));
    atomicAdd(&b->dsum, (double)t * 1024.0);
    atomicAdd(&b->add64, (unsigned long long)t << 33);
    unsigned long long old = b->cas64, assumed;
    do {
        assumed = old;
        old = atomicCAS(&b->cas64, assumed, assumed + 3);
    } while (old != assumed);
}

__global__ void compact(const int *x, int n, int *out, int *count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] % 3 == 0)
        out[atomicAdd(count, 1)] = x[i];
}

struct SharedAtomics {
    unsigned long long sum64;
    int cas_count, exch_last_valid, max;
    float fsum;
};

__global__ void shared_atomics(const int *x, SharedAtomics *out)
{
    __shared__ unsigned long long sum64;
    __shared__ int cas_counter, slot, mx;
    __shared__ float fsum;
    __shared__ int owners[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    if (t == 0) {
        sum64 = 0;
        cas_counter = 0;
        slot = -1;
        mx = INT_MIN;
        fsum = 0;
    }
    owners[t] = -1;
    __syncthreads();
    atomicAdd(&sum64, (unsigned long long)(unsigned)x[i] << 20);
    int old = cas_counter, assumed;  // increment through a CAS loop
    do {
        assumed = old;
        old = atomicCAS(&cas_counter, assumed, assumed + 1);
    } while (old != assumed);
    int prev = atomicExch(&slot, t);  // a chain: each value replaced exactly once
    if (prev >= 0)
        owners[prev] = t;
    atomicMax(&mx, x[i]);
    atomicAdd(&fsum, (float)(x[i] & 1023));
    __syncthreads();
    if (t == 0) {
        // follow the chain from the one thread nobody replaced before... count its length
        int seen = 0, last = slot;
        for (int k = 0; k < (int)blockDim.x; k++)
            seen += owners[k] >= 0;
        out[blockIdx.x] = SharedAtomics{sum64, cas_counter, seen == (int)blockDim.x - 1 && owners[last] == -1,
                                        mx, fsum};
    }
}

int main()
{
    kt_start("histogram");
    KtRng rng(7);

    // 1. histogram
    const int nbytes = 4 << 20;
    std::vector<unsigned char> bytes(nbytes);
    for (int i = 0; i < nbytes; i++) {
        unsigned r = rng.next();
        unsigned char b = (r % 7 == 0) ? 42 : (unsigned char)((r >> 8) ^ ((r >> 20) & 0x0f));
        if (b >= 200 && b <= 210)
            b = (unsigned char)(b * 3);  // leaves bins 200..210 empty
        bytes[i] = b;
    }
    unsigned char *dbytes;
    unsigned *dbins;
    CHECK_CUDA(cudaMalloc(&dbytes, nbytes));
    CHECK_CUDA(cudaMalloc(&dbins, 256 * sizeof(unsigned)));
    CHECK_CUDA(cudaMemcpy(dbytes, bytes.data(), nbytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dbins, 0, 256 * sizeof(unsigned)));
    hist_shared<<<64, 256>>>((const unsigned *)dbytes, nbytes / 4, dbins);
    KT_SYNC();
    std::vector<unsigned> bins(256), ebins(256, 0);
    CHECK_CUDA(cudaMemcpy(bins.data(), dbins, 256 * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (int i = 0; i < nbytes; i++)
        ebins[bytes[i]]++;
    for (int b = 0; b < 256; b++)
        kt_check_u64("histogram bin (shared atomics)", b, bins[b], ebins[b]);

    const int nsmall = 256 << 10;
    CHECK_CUDA(cudaMemset(dbins, 0, 256 * sizeof(unsigned)));
    hist_global<<<nsmall / 256, 256>>>(dbytes, nsmall, dbins);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(bins.data(), dbins, 256 * sizeof(unsigned), cudaMemcpyDeviceToHost));
    std::fill(ebins.begin(), ebins.end(), 0);
    for (int i = 0; i < nsmall; i++)
        ebins[bytes[i]]++;
    for (int b = 0; b < 256; b++)
        kt_check_u64("histogram bin (global atomics)", b, bins[b], ebins[b]);

    // 2. float max by atomicCAS
    const int nf = 5000;
    std::vector<float> xf(nf);
    float emax = -INFINITY;
    for (int i = 0; i < nf; i++) {
        xf[i] = (rng.unit() - 0.9f) * 1e4f;
        emax = std::max(emax, xf[i]);
    }
    float *dxf, *dfmax;
    CHECK_CUDA(cudaMalloc(&dxf, nf * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dfmax, sizeof(float)));
    CHECK_CUDA(cudaMemcpy(dxf, xf.data(), nf * sizeof(float), cudaMemcpyHostToDevice));
    float finit = -INFINITY, fmax_got;
    CHECK_CUDA(cudaMemcpy(dfmax, &finit, sizeof(float), cudaMemcpyHostToDevice));
    fmax_kernel<<<(nf + 127) / 128, 128>>>(dxf, nf, dfmax);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(&fmax_got, dfmax, sizeof(float), cudaMemcpyDeviceToHost));
    kt_check_f32_exact("atomicCAS float max", 0, fmax_got, emax);

    // 3. atomicExch
    const int ne = 3000;
    int *dloc, *dolds;
    float *dfloc, *dfolds;
    CHECK_CUDA(cudaMalloc(&dloc, sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dolds, ne * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dfloc, sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dfolds, ne * sizeof(float)));
    int iinit = -1;
    float fxinit = -1.0f;
    CHECK_CUDA(cudaMemcpy(dloc, &iinit, sizeof(int), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dfloc, &fxinit, sizeof(float), cudaMemcpyHostToDevice));
    exch_kernel<<<(ne + 255) / 256, 256>>>(dloc, dolds, dfloc, dfolds, ne);
    KT_SYNC();
    std::vector<int> olds(ne);
    std::vector<float> folds(ne);
    int last;
    float flast;
    CHECK_CUDA(cudaMemcpy(olds.data(), dolds, ne * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(folds.data(), dfolds, ne * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(&last, dloc, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(&flast, dfloc, sizeof(float), cudaMemcpyDeviceToHost));
    {
        std::vector<int> seen(olds);
        seen.push_back(last);
        std::sort(seen.begin(), seen.end());
        for (int i = 0; i <= ne; i++)
            kt_check_i64("atomicExch: sorted returned values + final", i, seen[i], i - 1);
        std::vector<float> fseen(folds);
        fseen.push_back(flast);
        std::sort(fseen.begin(), fseen.end());
        kt_check_f32_exact("atomicExch(float): sorted returned values + final", 0, fseen[0], -1.0f);
        for (int i = 1; i <= ne; i++)
            kt_check_f32_exact("atomicExch(float): sorted returned values + final", i, fseen[i],
                               i - 1 + 0.5f);
    }

    // 4. min/max
    const int nm = 4000;
    std::vector<int> xi(nm);
    std::vector<long long> yl(nm);
    for (int i = 0; i < nm; i++) {
        xi[i] = (int)rng.next();  // any 32-bit pattern: both signs
        yl[i] = ((long long)(rng.next() >> 1) << 31) * ((i & 1) ? -1 : 1) + rng.next();
    }
    int *dxi;
    long long *dyl;
    MinMax *dmm, mm, mm0;
    mm0.imin = INT_MAX;
    mm0.imax = INT_MIN;
    mm0.umin = UINT_MAX;
    mm0.umax = 0;
    mm0.lmin = LLONG_MAX;
    mm0.lmax = LLONG_MIN;
    mm0.ulmin = ULLONG_MAX;
    mm0.ulmax = 0;
    CHECK_CUDA(cudaMalloc(&dxi, nm * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dyl, nm * sizeof(long long)));
    CHECK_CUDA(cudaMalloc(&dmm, sizeof(MinMax)));
    CHECK_CUDA(cudaMemcpy(dxi, xi.data(), nm * sizeof(int), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dyl, yl.data(), nm * sizeof(long long), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dmm, &mm0, sizeof(MinMax), cudaMemcpyHostToDevice));
    minmax_kernel<<<(nm + 255) / 256, 256>>>(dxi, dyl, nm, dmm);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(&mm, dmm, sizeof(MinMax), cudaMemcpyDeviceToHost));
    MinMax em = mm0;
    for (int i = 0; i < nm; i++) {
        em.imin = std::min(em.imin, xi[i]);
        em.imax = std::max(em.imax, xi[i]);
        em.umin = std::min(em.umin, (unsigned)xi[i]);
        em.umax = std::max(em.umax, (unsigned)xi[i]);
        em.lmin = std::min(em.lmin, yl[i]);
        em.lmax = std::max(em.lmax, yl[i]);
        em.ulmin = std::min(em.ulmin, (unsigned long long)yl[i]);
        em.ulmax = std::max(em.ulmax, (unsigned long long)yl[i]);
    }
    kt_check_i64("atomicMin(int)", 0, mm.imin, em.imin);
    kt_check_i64("atomicMax(int)", 0, mm.imax, em.imax);
    kt_check_u64("atomicMin(unsigned)", 0, mm.umin, em.umin);
    kt_check_u64("atomicMax(unsigned)", 0, mm.umax, em.umax);
    kt_check_i64("atomicMin(long long)", 0, mm.lmin, em.lmin);
    kt_check_i64("atomicMax(long long)", 0, mm.lmax, em.lmax);
    kt_check_u64("atomicMin(unsigned long long)", 0, mm.ulmin, em.ulmin);
    kt_check_u64("atomicMax(unsigned long long)", 0, mm.ulmax, em.ulmax);

    // 5. atomicInc / atomicDec
    {
        const unsigned start[] = {100, 9, 8, 0, 5, 0xffffffffu, 0, 100, 0, 7, 5, 3};
        const unsigned limit[] = {9, 9, 9, 9, 0xffffffffu, 0xffffffffu, 9, 9, 0, 0, 9, 0xffffffffu};
        const int inc[] = {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
        const int nk = (int)(sizeof start / sizeof start[0]);
        unsigned *dc, *dlim, *dold;
        int *dinc;
        CHECK_CUDA(cudaMalloc(&dc, sizeof start));
        CHECK_CUDA(cudaMalloc(&dlim, sizeof limit));
        CHECK_CUDA(cudaMalloc(&dinc, sizeof inc));
        CHECK_CUDA(cudaMalloc(&dold, 2 * sizeof start));
        CHECK_CUDA(cudaMemcpy(dc, start, sizeof start, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(dlim, limit, sizeof limit, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(dinc, inc, sizeof inc, cudaMemcpyHostToDevice));
        incdec_serial<<<1, 1>>>(dc, dlim, dinc, dold, nk);
        KT_SYNC();
        unsigned fin[nk], old[2 * nk];
        CHECK_CUDA(cudaMemcpy(fin, dc, sizeof fin, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(old, dold, sizeof old, cudaMemcpyDeviceToHost));
        for (int k = 0; k < nk; k++) {
            unsigned c = start[k];
            for (int r = 0; r < 2; r++) {
                char what[96];
                snprintf(what, sizeof what, "atomic%s(start %u, limit %u) call %d returned",
                         inc[k] ? "Inc" : "Dec", start[k], limit[k], r + 1);
                kt_check_u64(what, k, old[2 * k + r], c);
                if (inc[k])
                    c = (c >= limit[k]) ? 0 : c + 1;
                else
                    c = (c == 0 || c > limit[k]) ? limit[k] : c - 1;
            }
            char what[96];
            snprintf(what, sizeof what, "atomic%s(start %u, limit %u) final value",
                     inc[k] ? "Inc" : "Dec", start[k], limit[k]);
            kt_check_u64(what, k, fin[k], c);
        }

        const int nc = 1003;
        unsigned *dic, *ddc, *dio, *ddo;
        CHECK_CUDA(cudaMalloc(&dic, sizeof(unsigned)));
        CHECK_CUDA(cudaMalloc(&ddc, sizeof(unsigned)));
        CHECK_CUDA(cudaMalloc(&dio, nc * sizeof(unsigned)));
        CHECK_CUDA(cudaMalloc(&ddo, nc * sizeof(unsigned)));
        unsigned istart = 3, dstart = 5;
        CHECK_CUDA(cudaMemcpy(dic, &istart, sizeof istart, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(ddc, &dstart, sizeof dstart, cudaMemcpyHostToDevice));
        incdec_contended<<<(nc + 127) / 128, 128>>>(dic, ddc, dio, ddo, nc);
        KT_SYNC();
        std::vector<unsigned> io(nc), dold_(nc);
        unsigned ifin, dfin;
        CHECK_CUDA(cudaMemcpy(io.data(), dio, nc * sizeof(unsigned), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(dold_.data(), ddo, nc * sizeof(unsigned), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(&ifin, dic, sizeof ifin, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(&dfin, ddc, sizeof dfin, cudaMemcpyDeviceToHost));
        std::vector<unsigned> ei, ed;
        unsigned ci = istart, cd = dstart;
        for (int i = 0; i < nc; i++) {
            ei.push_back(ci);
            ci = ci >= 9 ? 0 : ci + 1;
            ed.push_back(cd);
            cd = (cd == 0 || cd > 9) ? 9 : cd - 1;
        }
        std::sort(ei.begin(), ei.end());
        std::sort(ed.begin(), ed.end());
        std::sort(io.begin(), io.end());
        std::sort(dold_.begin(), dold_.end());
        for (int i = 0; i < nc; i++) {
            kt_check_u64("atomicInc(limit 9) under contention: sorted returned values", i, io[i], ei[i]);
            kt_check_u64("atomicDec(limit 9) under contention: sorted returned values", i, dold_[i], ed[i]);
        }
        kt_check_u64("atomicInc(limit 9) under contention: final", 0, ifin, ci);
        kt_check_u64("atomicDec(limit 9) under contention: final", 0, dfin, cd);
    }

    // 6. bitwise, sub, float/double add, 64-bit add and CAS
    {
        const int nb = 2500;
        Bits b0 = {}, b, e;
        b0.a = 0xf0f0ffffu;
        b0.o = 0x00000100u;
        b0.x = 0x12345678u;
        b0.a64 = ~0ull;
        b0.o64 = 0;
        b0.x64 = 0xfedcba9876543210ull;
        b0.sub = 1000;
        b0.fsum = 0.5f;
        b0.dsum = -1.0;
        b0.add64 = 7;
        b0.cas64 = 1ull << 40;
        e = b0;
        for (int t = 0; t < nb; t++) {
            if (t % 3 == 0)
                e.o |= 1u << ((t * 7) % 32);
            if (t < 20)
                e.a &= ~(1u << t);
            e.x ^= (unsigned)t * 2654435761u;
            if (t % 5 == 0)
                e.o64 |= 1ull << ((t * 11) % 64);
            if (t < 64 && t % 2 == 1)
                e.a64 &= ~(1ull << t);
            e.x64 ^= (unsigned long long)t * 0x9E3779B97F4A7C15ull;
            e.sub -= t;
            e.fsum += (float)(t % 17);
            e.dsum += (double)t * 1024.0;
            e.add64 += (unsigned long long)t << 33;
            e.cas64 += 3;
        }
        Bits *db;
        CHECK_CUDA(cudaMalloc(&db, sizeof(Bits)));
        CHECK_CUDA(cudaMemcpy(db, &b0, sizeof(Bits), cudaMemcpyHostToDevice));
        bits_kernel<<<(nb + 255) / 256, 256>>>(db, nb);
        KT_SYNC();
        CHECK_CUDA(cudaMemcpy(&b, db, sizeof(Bits), cudaMemcpyDeviceToHost));
        kt_check_u64("atomicAnd(unsigned)", 0, b.a, e.a);
        kt_check_u64("atomicOr(unsigned)", 0, b.o, e.o);
        kt_check_u64("atomicXor(unsigned)", 0, b.x, e.x);
        kt_check_u64("atomicAnd(unsigned long long)", 0, b.a64, e.a64);
        kt_check_u64("atomicOr(unsigned long long)", 0, b.o64, e.o64);
        kt_check_u64("atomicXor(unsigned long long)", 0, b.x64, e.x64);
        kt_check_i64("atomicSub(int)", 0, b.sub, e.sub);
        kt_check_f32_exact("atomicAdd(float)", 0, b.fsum, e.fsum);
        kt_check_f64_exact("atomicAdd(double)", 0, b.dsum, e.dsum);
        kt_check_u64("atomicAdd(unsigned long long)", 0, b.add64, e.add64);
        kt_check_u64("atomicCAS(unsigned long long) loop", 0, b.cas64, e.cas64);
        CHECK_CUDA(cudaFree(db));
    }

    // 7. compaction and shared-memory atomics
    {
        const int n = 100000;
        std::vector<int> x(n);
        for (int i = 0; i < n; i++)
            x[i] = (int)(rng.next() >> 1) - (1 << 30);
        int *dx, *dout, *dcount;
        CHECK_CUDA(cudaMalloc(&dx, n * sizeof(int)));
        CHECK_CUDA(cudaMalloc(&dout, n * sizeof(int)));
        CHECK_CUDA(cudaMalloc(&dcount, sizeof(int)));
        CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(int), cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemset(dcount, 0, sizeof(int)));
        compact<<<(n + 255) / 256, 256>>>(dx, n, dout, dcount);
        KT_SYNC();
        int count;
        CHECK_CUDA(cudaMemcpy(&count, dcount, sizeof count, cudaMemcpyDeviceToHost));
        std::vector<int> sel;
        for (int v : x)
            if (v % 3 == 0)
                sel.push_back(v);
        kt_check_i64("compaction count", 0, count, (long long)sel.size());
        std::vector<int> got(count);
        CHECK_CUDA(cudaMemcpy(got.data(), dout, count * sizeof(int), cudaMemcpyDeviceToHost));
        std::sort(got.begin(), got.end());
        std::sort(sel.begin(), sel.end());
        for (int k = 0; k < count; k++)
            kt_check_i64("compacted elements (sorted)", k, got[k], sel[k]);

        const int blocks = 40;
        SharedAtomics *dsa;
        CHECK_CUDA(cudaMalloc(&dsa, blocks * sizeof(SharedAtomics)));
        shared_atomics<<<blocks, 256>>>(dx, dsa);
        KT_SYNC();
        std::vector<SharedAtomics> sa(blocks);
        CHECK_CUDA(cudaMemcpy(sa.data(), dsa, blocks * sizeof(SharedAtomics), cudaMemcpyDeviceToHost));
        for (int b = 0; b < blocks; b++) {
            unsigned long long sum = 0;
            int mx = INT_MIN;
            float fs = 0;
            for (int t = 0; t < 256; t++) {
                int v = x[b * 256 + t];
                sum += (unsigned long long)(unsigned)v << 20;
                mx = std::max(mx, v);
                fs += (float)(v & 1023);
            }
            kt_check_u64("shared 64-bit atomicAdd", b, sa[b].sum64, sum);
            kt_check_i64("shared atomicCAS increments", b, sa[b].cas_count, 256);
            kt_check_i64("shared atomicExch chain intact", b, sa[b].exch_last_valid, 1);
            kt_check_i64("shared atomicMax", b, sa[b].max, mx);
            kt_check_f32_exact("shared float atomicAdd (integer values)", b, sa[b].fsum, fs);
        }
        CHECK_CUDA(cudaFree(dx));
        CHECK_CUDA(cudaFree(dout));
        CHECK_CUDA(cudaFree(dcount));
        CHECK_CUDA(cudaFree(dsa));
    }

    CHECK_CUDA(cudaFree(dbytes));
    CHECK_CUDA(cudaFree(dbins));
    kt_pass();
    return 0;
}
