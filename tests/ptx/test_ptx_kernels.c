/* PTX interpreter: kernels nvcc compiled (-ptx -arch=compute_75, and compute_90 for the warp
 * kernels) run through cr_ptx_launch over malloc'd "device memory", each result checked
 * against a C reference: control flow and divergence, barriers (also reached at different
 * times and from different paths, and with reductions), shared, dynamic shared, local and
 * generic memory, module variables, atomics of every kind contended by many blocks, warp
 * shuffles/votes/match, math approximations within the PTX bounds, half-precision conversions
 * in every rounding mode, integer intrinsics, calls with recursion and through function
 * pointers, warp matrix multiplies (wmma), device printf compared
 * byte for byte with the host's printf, faults. Prints the speed of a 1M-element vector add
 * and a 256x256 tiled matrix multiply (not asserted).
 * Usage: test_ptx_kernels <fixture dir> */
#include <limits.h>
#include <math.h>

#include "ptx_test.h"

static const char *fixtures;

/* ---- basic ---- */

static void test_speed_and_basic(cr_ptx_module_t *m)
{
    /* vector add of 1M elements */
    int n = 1 << 20;
    float *a = dev_alloc((size_t)n * 4), *b = dev_alloc((size_t)n * 4),
          *c = dev_alloc((size_t)n * 4);
    for (int i = 0; i < n; i++) {
        a[i] = (float)i;
        b[i] = (float)(2 * i) + 0.5f;
    }
    params_t p = {0};
    PARAM(&p, a);
    PARAM(&p, b);
    PARAM(&p, c);
    PARAM(&p, n);
    double t0 = now_s();
    CHECK_EQ_INT(launch(m, "vadd", (uint32_t)(n + 255) / 256, 1, 256, 1, 0, &p, NULL), 0);
    double t_vadd = now_s() - t0;
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += c[i] != a[i] + b[i];
    CHECK_EQ_INT(bad, 0);
    dev_free(a);
    dev_free(b);
    dev_free(c);

    /* tiled matrix multiply 256 x 256 with shared memory */
    int N = 256;
    float *A = dev_alloc((size_t)N * N * 4), *B = dev_alloc((size_t)N * N * 4),
          *C = dev_alloc((size_t)N * N * 4);
    for (int i = 0; i < N * N; i++) {
        A[i] = (float)(i % 7 - 3);
        B[i] = (float)(i % 5 - 2);
    }
    p = (params_t){0};
    PARAM(&p, A);
    PARAM(&p, B);
    PARAM(&p, C);
    PARAM(&p, N);
    t0 = now_s();
    CHECK_EQ_INT(launch(m, "matmul", (uint32_t)N / 16, (uint32_t)N / 16, 16, 16, 0, &p, NULL), 0);
    double t_mm = now_s() - t0;
    bad = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < N; k++)
                s += A[i * N + k] * B[k * N + j];
            bad += s != C[i * N + j];
        }
    CHECK_EQ_INT(bad, 0);
    dev_free(A);
    dev_free(B);
    dev_free(C);
    printf("speed: vector add 1M elements %.3f s, tiled matmul 256x256 %.3f s\n", t_vadd, t_mm);
}

static void test_control(cr_ptx_module_t *m)
{
    /* divergence and early exits */
    int n = 1000, *out = dev_alloc(1024 * 4);
    for (int i = 0; i < 1024; i++)
        out[i] = -7;
    params_t p = {0};
    PARAM(&p, out);
    CHECK_EQ_INT(launch(m, "diverge", 8, 1, 128, 1, 0, &p, NULL), 0);
    for (int t = 0; t < 1024 && n; t++) {
        int v = 0, exited = 0;
        if (t % 3 == 0) {
            for (int i = 0; i < t % 7; i++)
                v += i * t;
        } else if (t % 3 == 1) {
            v = -t;
            while (v < 100)
                v += 37 + (t & 5);
        } else {
            v = t % 5 == 0 ? 10 : t % 5 == 1 ? 20 : t * t;
            exited = v & 1;
        }
        if (exited)
            v = -7;
        if (out[t] != v) {
            CHECK_EQ_INT(out[t], v);
            break;
        }
    }
    dev_free(out);

    /* tree reduction with a barrier in a loop, dynamic shared memory */
    int *in = dev_alloc(16 * 256 * 4), *sums = dev_alloc(16 * 4);
    for (int i = 0; i < 16 * 256; i++)
        in[i] = (i * 37) % 1001 - 500;
    p = (params_t){0};
    PARAM(&p, in);
    PARAM(&p, sums);
    CHECK_EQ_INT(launch(m, "reduce", 16, 1, 256, 1, 256 * 4, &p, NULL), 0);
    for (int b = 0; b < 16; b++) {
        int s = 0;
        for (int i = 0; i < 256; i++)
            s += in[b * 256 + i];
        CHECK_EQ_INT(sums[b], s);
    }
    cr_ptx_fault_t f;
    CHECK_EQ_INT(launch(m, "reduce", 1, 1, 256, 1, 256 * 4 - 4, &p, &f), 700); /* too little */
    dev_free(in);
    dev_free(sums);

    /* warps reach a barrier at very different times; __syncthreads_count */
    out = dev_alloc(256 * 4);
    p = (params_t){0};
    PARAM(&p, out);
    PARAM(&p, 50);
    CHECK_EQ_INT(launch(m, "late_warps", 1, 1, 256, 1, 0, &p, NULL), 0);
    int stage[256], count = 0;
    for (int t = 0; t < 256; t++) {
        int w = t / 32, v = t;
        if (w % 2)
            for (int i = 0; i < 50 * (w + 1); i++)
                v = (int)(((unsigned)v * 1103515245u + 12345u) & 0x7fffffff);
        stage[t] = v;
        count += t % 3 == 0;
    }
    for (int t = 0; t < 256; t++) {
        uint32_t want = (uint32_t)stage[(t + 32) % 256] + ((uint32_t)count << 20);
        if ((uint32_t)out[t] != want) {
            CHECK_EQ_U64((uint32_t)out[t], want);
            break;
        }
    }
    dev_free(out);
}

static void test_memory_spaces(cr_ptx_module_t *m)
{
    /* local arrays with dynamic indexing, 3D indices, a struct by value */
    int *out = dev_alloc(2 * 3 * 4 * 2 * 3 * 4);
    params_t p = {0};
    PARAM(&p, out);
    struct {
        int scale;
        double offset;
        char tag;
    } args = {3, 100.75, 9};
    p.size = (p.size + 7) / 8 * 8;
    memcpy(p.buf + p.size, &args, sizeof args);
    p.size += sizeof args;
    cr_ptx_launch_t l = {{2, 3, 1}, {4, 2, 3}, 0, p.buf, p.size};
    cr_ptx_fault_t f;
    CHECK_EQ_INT(cr_ptx_launch(m, "local_mem", &l, &dev_env, &f), 0);
    for (int b = 0; b < 6; b++)
        for (int t = 0; t < 24; t++) {
            int idx = (t * 7 + b) % 32;
            int want = (idx * 3 + t) + 100 + 9 + ((31 - idx) * 3 + t);
            if (out[b * 24 + t] != want) {
                CHECK_EQ_INT(out[b * 24 + t], want);
                b = 6;
                break;
            }
        }
    dev_free(out);

    /* module variables (held by the interpreter: this env has no global_address) */
    float *fo = dev_alloc(65 * 4);
    p = (params_t){0};
    PARAM(&p, fo);
    static const float cst[4] = {1.5f, 2.5f, 3.5f, 4.5f};
    static const int arr[4] = {10, 20, 30, 40};
    for (int run = 0; run < 2; run++) {
        CHECK_EQ_INT(launch(m, "globals", 1, 1, 64, 1, 0, &p, NULL), 0);
        for (int t = 0; t < 64; t++)
            if (fo[t] != cst[t & 3] * arr[t & 3] + 30) {
                CHECK(fo[t] == cst[t & 3] * arr[t & 3] + 30);
                break;
            }
        CHECK(fo[64] == 6 + run); /* the counter lives on between launches */
    }
    dev_free(fo);

    /* generic pointers to shared, local and global memory */
    out = dev_alloc(64 * 4);
    p = (params_t){0};
    PARAM(&p, out);
    CHECK_EQ_INT(launch(m, "generic_ptrs", 1, 1, 64, 1, 0, &p, NULL), 0);
    for (int t = 0; t < 64; t++)
        if (out[t] != 1000 + 1010 + t + 5) {
            CHECK_EQ_INT(out[t], 1000 + 1010 + t + 5);
            break;
        }
    dev_free(out);
}

/* ---- atomics ---- */

static void test_atomics(void)
{
    cr_ptx_module_t *m = load_file(fixtures, "atomics.ptx");
    const unsigned blocks = 64, threads = 256, N = blocks * threads;
    unsigned *g = dev_alloc(16 * 4), *olds = dev_alloc(N * 4);
    int *gs = dev_alloc(4 * 4);
    unsigned long long *g64 = dev_alloc(4 * 8);
    float *gf = dev_alloc(2 * 4);
    double *gd = dev_alloc(2 * 8);
    g[2] = 1000000;
    g[3] = 0xffffffff;
    g[5] = 0xffffffff;
    gs[0] = INT_MAX;
    gs[1] = INT_MIN;
    g64[2] = ~0ull;
    params_t p = {0};
    PARAM(&p, g);
    PARAM(&p, gs);
    PARAM(&p, g64);
    PARAM(&p, gf);
    PARAM(&p, gd);
    PARAM(&p, olds);
    CHECK_EQ_INT(launch(m, "atom_global", blocks, 1, threads, 1, 0, &p, NULL), 0);
    unsigned sum7 = 0, x = 0;
    for (unsigned t = 0; t < N; t++) {
        sum7 += t % 7;
        x ^= t;
    }
    CHECK_EQ_U64(g[0], N);
    CHECK_EQ_U64(g[1], sum7);
    CHECK_EQ_U64(g[2], 1000000 - 3 * N);
    CHECK_EQ_U64(g[3], 5);
    CHECK_EQ_U64(g[4], 3 * (N - 1));
    CHECK_EQ_U64(g[5], 0);
    CHECK_EQ_U64(g[6], 0xffffffff);
    CHECK_EQ_U64(g[7], x);
    CHECK_EQ_U64(g[8], N % 100);
    CHECK_EQ_U64(g[9], (100 - N % 100) % 100);
    CHECK_EQ_U64(g[11], 2 * N);
    /* exchanges: the values seen plus the final one are 0..N, each once */
    unsigned char *seen = calloc(N + 1, 1);
    int dup = 0;
    for (unsigned t = 0; t < N; t++)
        dup += olds[t] > N || seen[olds[t]]++;
    dup += g[10] > N || seen[g[10]]++;
    CHECK_EQ_INT(dup, 0);
    free(seen);
    CHECK_EQ_INT(gs[0], -500);
    CHECK_EQ_INT(gs[1], 499);
    CHECK_EQ_INT(gs[2], -(int)N);
    CHECK_EQ_U64(g64[0], (unsigned long long)N * ((1ull << 32) + 1));
    CHECK_EQ_U64(g64[1], (unsigned long long)(N - 1) << 33);
    CHECK_EQ_U64(g64[2], 7ull << 33);
    CHECK(g64[3] >= 1 && g64[3] <= N);
    CHECK(gf[0] == (float)N);
    CHECK(gf[1] == (float)N * 0.25f);
    CHECK(gd[0] == N * 0.5);
    CHECK(gd[1] == (double)N * (N - 1) / 2);

    unsigned *out = dev_alloc(blocks * 16 * 4);
    p = (params_t){0};
    PARAM(&p, out);
    CHECK_EQ_INT(launch(m, "atom_shared", blocks, 1, threads, 1, 0, &p, NULL), 0);
    unsigned xs = 0;
    for (unsigned t = 0; t < threads; t++)
        xs ^= t * 0x9e3779b9u;
    for (unsigned b = 0; b < blocks; b++) {
        const unsigned *o = out + b * 16;
        CHECK_EQ_U64(o[0], threads * (threads - 1) / 2);
        CHECK_EQ_U64(o[1], 0);
        CHECK_EQ_U64(o[2], 0xffffffff);
        CHECK_EQ_U64(o[3], threads - 1);
        CHECK_EQ_U64(o[4], 17);
        CHECK_EQ_U64(o[5], threads % 10);
        CHECK_EQ_U64(o[6], xs);
        CHECK_EQ_U64(o[7], threads);
        CHECK_EQ_U64(o[8], threads);
        CHECK_EQ_U64(o[9], threads / 2);
        CHECK_EQ_INT((int)o[10], -100);
        CHECK_EQ_INT((int)o[11], -3 * (int)threads);
        CHECK_EQ_U64(o[12], (10 - threads % 10) % 10);
        CHECK(o[13] >= 1 && o[13] <= threads); /* the last exchange: some thread's t + 1 */
    }
    dev_free(out);
    dev_free(g);
    dev_free(olds);
    dev_free(gs);
    dev_free(g64);
    dev_free(gf);
    dev_free(gd);
    cr_ptx_module_free(m);
}

/* ---- warp operations ---- */

static void test_warp(const char *file, int sm90)
{
    cr_ptx_module_t *m = load_file(fixtures, file);
    int *in = dev_alloc(32 * 4), *out = dev_alloc(32 * 16 * 4);
    for (int t = 0; t < 32; t++)
        in[t] = t * t * 3 - 100 + (t % 5) * 1000;
    params_t p = {0};
    PARAM(&p, in);
    PARAM(&p, out);
    CHECK_EQ_INT(launch(m, "shuffles", 1, 1, 32, 1, 0, &p, NULL), 0);
    int sum = 0;
    for (int t = 0; t < 32; t++)
        sum += in[t];
    for (int t = 0; t < 32; t++) {
        const int *o = out + t * 16;
        int want[14] = {
            in[5],
            in[(t & ~7) + ((t + 3) & 7)],
            t >= 3 ? in[t - 3] : in[t],
            t % 16 >= 2 ? in[t - 2] : in[t],
            t + 4 < 32 ? in[t + 4] : in[t],
            t % 8 + 3 < 8 ? in[t + 3] : in[t],
            in[t ^ 9],
            in[t ^ 3],
            sum,
            t < 31 ? in[t + 1] : in[t],
            t < 31 ? t + 1 : t,
            in[31 - t],
            t <= 1,
            t <= 1 ? in[t + 30] : in[t],
        };
        for (int k = 0; k < 14; k++)
            if (o[k] != want[k]) {
                fprintf(stderr, "%s shuffles lane %d, result %d: %d, expected %d\n", file, t, k,
                        o[k], want[k]);
                CHECK(0);
            }
    }
    dev_free(in);
    dev_free(out);

    /* votes, activemask in divergent code, match: two warps */
    int *vin = dev_alloc(64 * 4);
    unsigned *vout = dev_alloc(64 * 12 * 4);
    for (int t = 0; t < 64; t++)
        vin[t] = t < 32 ? t * 7 + 1 : (t % 9) * 3 - 5;
    p = (params_t){0};
    PARAM(&p, vin);
    PARAM(&p, vout);
    CHECK_EQ_INT(launch(m, "votes", 1, 1, 64, 1, 0, &p, NULL), 0);
    for (int w = 0; w < 2; w++) {
        unsigned all = 1, any = 0, ballot = 0, ones = 0, zeros = 0, third = 0;
        int reduce_add = 0, reduce_max = 0;
        for (int l = 0; l < 32; l++) {
            int v = vin[w * 32 + l];
            all &= v > 0;
            any |= v > 100;
            ballot |= (unsigned)(v & 1) << l;
            if (v & 2)
                ones++;
            else
                zeros++;
            if ((w * 32 + l) % 3 == 0)
                third |= 1u << l;
            reduce_add += v;
            reduce_max = l + w * 32;
        }
        for (int l = 0; l < 32; l++) {
            int t = w * 32 + l;
            const unsigned *o = vout + t * 12;
            unsigned match = 0;
            for (int j = 0; j < 32; j++)
                if (vin[w * 32 + j] % 4 == vin[t] % 4)
                    match |= 1u << j;
            unsigned want[12] = {all,
                                 any,
                                 ballot,
                                 ones == 32 || zeros == 32,
                                 0xffffffff,
                                 t % 3 == 0 ? third : 0,
                                 t < 10   ? 7
                                 : t < 20 ? 0x000ffc00
                                          : 9,
                                 match,
                                 0xffffffff,
                                 1,
                                 0,
                                 sm90 ? (unsigned)reduce_add ^ (unsigned)reduce_max : 0};
            for (int k = 0; k < 12; k++)
                if (o[k] != want[k]) {
                    fprintf(stderr, "%s votes thread %d, result %d: 0x%x, expected 0x%x\n", file, t,
                            k, o[k], want[k]);
                    CHECK(0);
                }
        }
    }
    dev_free(vin);
    dev_free(vout);

    /* barriers reached from both sides of a branch, bar.red */
    int *bin = dev_alloc(128 * 4), *bout = dev_alloc(128 * 4);
    int odd = 0, even = 0, c3 = 0;
    for (int t = 0; t < 128; t++) {
        bin[t] = (t * 13) % 50;
        if (bin[t] & 1)
            odd += bin[t];
        else
            even += bin[t];
        c3 += bin[t] % 3 == 0;
    }
    p = (params_t){0};
    PARAM(&p, bin);
    PARAM(&p, bout);
    CHECK_EQ_INT(launch(m, "barriers", 1, 1, 128, 1, 0, &p, NULL), 0);
    for (int t = 0; t < 128; t++)
        if (bout[t] != odd * 1000 + even + (c3 << 24) + (1 << 22)) {
            CHECK_EQ_INT(bout[t], odd * 1000 + even + (c3 << 24) + (1 << 22));
            break;
        }
    dev_free(bin);
    dev_free(bout);
    cr_ptx_module_free(m);
}

/* ---- math ---- */

static int close_rel(double got, double want, double rel, double abs_tol)
{
    if (isnan(want))
        return isnan(got);
    return fabs(got - want) <= abs_tol + rel * fabs(want);
}

static void test_math(void)
{
    cr_ptx_module_t *m = load_file(fixtures, "math.ptx");
    int n = 600;
    float *x = dev_alloc((size_t)n * 4), *out = dev_alloc((size_t)n * 12 * 4);
    for (int i = 0; i < n; i++)
        x[i] = -3.0f + 6.0f * (float)i / (float)n;
    params_t p = {0};
    PARAM(&p, x);
    PARAM(&p, out);
    PARAM(&p, n);
    CHECK_EQ_INT(launch(m, "approx", (uint32_t)(n + 127) / 128, 1, 128, 1, 0, &p, NULL), 0);
    int bad = 0;
    for (int i = 0; i < n && bad < 10; i++) {
        double v = x[i];
        const float *o = out + i * 12;
        double a = fabs(v) + 0.5;
        struct {
            double got, want, rel, abs;
        } c[] = {
            {o[0], sin(v), 0, ldexp(1, -20)},              /* sin.approx: 2^-20.9 abs */
            {o[1], cos(v), 0, ldexp(1, -20)},              /* cos.approx */
            {o[2], exp2(v), ldexp(1, -21), 0},             /* ex2.approx: 2 ulp */
            {o[3], log2(a), ldexp(1, -21), ldexp(1, -22)}, /* lg2.approx */
            {o[4], 1 / sqrt(a), ldexp(1, -22), 0},         /* rsqrt.approx: 2^-22.9 rel */
            {o[5], tanh(v), ldexp(1, -10), 0},             /* tanh.approx: 2^-10.987 rel */
            {o[6], 1 / (v + 20), ldexp(1, -22), 0},        /* rcp.approx */
            {o[8], (double)(x[i] / 3.0f), 0, 0},           /* div.rn: exact */
            {o[9], v / 3, ldexp(1, -21), 0},               /* div.approx (__fdividef) */
            {o[10], exp(v), ldexp(1, -21), 0},             /* expf: 2 ulp */
            {o[11], log(a), ldexp(1, -21), ldexp(1, -23)},
        };
        for (size_t k = 0; k < sizeof c / sizeof c[0]; k++)
            if (!close_rel(c[k].got, c[k].want, c[k].rel, c[k].abs)) {
                fprintf(stderr, "approx x=%g result %zu: %.9g, expected %.9g\n", v, k, c[k].got,
                        c[k].want);
                bad++;
            }
        if (fbits(o[7]) != fbits(sqrtf(fabsf(x[i]))))
            bad++; /* sqrt.rn: exact */
    }
    CHECK_EQ_INT(bad, 0);
    dev_free(x);
    dev_free(out);

    /* double precision library code (sin, exp, log, pow, atan2) within 2 ulp of libm */
    double *dx = dev_alloc((size_t)n * 8), *dout = dev_alloc((size_t)n * 6 * 8);
    for (int i = 0; i < n; i++)
        dx[i] = -20.0 + 40.0 * i / n + 1e-3 * i;
    p = (params_t){0};
    PARAM(&p, dx);
    PARAM(&p, dout);
    PARAM(&p, n);
    CHECK_EQ_INT(launch(m, "dmath", (uint32_t)(n + 127) / 128, 1, 128, 1, 0, &p, NULL), 0);
    bad = 0;
    for (int i = 0; i < n && bad < 10; i++) {
        double v = dx[i], a = fabs(v);
        const double *o = dout + i * 6;
        double want[6] = {sin(v), exp(v), log(a + 0.5), sqrt(a), pow(a + 1, 1.5), atan2(v, 2.0)};
        for (int k = 0; k < 6; k++)
            if (!close_rel(o[k], want[k], 4.5e-16, 1e-300)) {
                fprintf(stderr, "dmath x=%.17g result %d: %.17g, expected %.17g\n", v, k, o[k],
                        want[k]);
                bad++;
            }
    }
    CHECK_EQ_INT(bad, 0);
    dev_free(dx);
    dev_free(dout);
    cr_ptx_module_free(m);
}

/* Reference float -> f16 in a rounding mode (0 rn, 1 rz, 2 rd, 3 ru) by search among all
 * finite halves; independent of the interpreter's bit manipulation. */
static double half_value(unsigned h)
{
    int e = (h >> 10) & 31, f = h & 1023;
    double v = e == 0 ? ldexp(f, -24) : e == 31 ? (f ? NAN : INFINITY) : ldexp(1024 + f, e - 25);
    return (h & 0x8000) ? -v : v;
}

static unsigned ref_half(float f, int mode)
{
    double v = f, a = fabs(v);
    unsigned sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f))
        return 0x7fff;
    unsigned lo = 0, hi = 0x7c00; /* lo <= a < value(hi), among 0..0x7bff and infinity */
    for (unsigned h = 0; h <= 0x7bff; h++)
        if (half_value(h) <= a)
            lo = h;
    hi = lo + 1; /* 0x7c00 when lo is the largest finite */
    double dl = half_value(lo), dh = hi == 0x7c00 ? 65536.0 : half_value(hi);
    unsigned r;
    if (a == dl)
        r = lo;
    else if (mode == 1 || (mode == 2 && !sign) || (mode == 3 && sign))
        r = lo;
    else if (mode == 2 || mode == 3)
        r = hi;
    else
        r = a - dl < dh - a ? lo : a - dl > dh - a ? hi : (lo & 1 ? hi : lo);
    return sign | r;
}

static unsigned ref_bf16(float f)
{
    uint32_t u = fbits(f);
    if (isnan(f))
        return 0x7fff;
    return (u + 0x7fff + ((u >> 16) & 1)) >> 16;
}

static void test_halves(void)
{
    cr_ptx_module_t *m = load_file(fixtures, "math.ptx");
    int n = 1200;
    float *f = dev_alloc((size_t)n * 4);
    uint16_t *out = dev_alloc(131072 * 2 + (size_t)n * 6 * 2);
    for (int i = 0; i < n; i++) {
        switch (i % 6) {
        case 0:
            f[i] = (float)(i - 600) * 0.37f;
            break;
        case 1:
            f[i] = ldexpf(1.0f + (float)i / 1024, -16 - i % 12);
            break; /* subnormal range */
        case 2:
            f[i] = (float)half_value((unsigned)i * 37 % 0x7c00) + (float)half_value(1) / 2;
            break;
        case 3:
            f[i] = 65504.0f + (float)(i % 40) - 10;
            break; /* near the max */
        case 4:
            f[i] = -(float)half_value((unsigned)i * 53 % 0x7c00) * 1.0001f;
            break;
        default:
            f[i] = 1.0f / (float)(i + 1);
            break;
        }
    }
    params_t p = {0};
    PARAM(&p, f);
    PARAM(&p, out);
    PARAM(&p, n);
    CHECK_EQ_INT(launch(m, "halves", 65536 / 256, 1, 256, 1, 0, &p, NULL), 0);
    int bad = 0;
    for (unsigned i = 0; i < 65536; i++) {
        int nan16 = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
        int nanbf = (i & 0x7f80) == 0x7f80 && (i & 0x7f);
        unsigned h = out[i], b = out[65536 + i];
        if (nan16 ? !((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) : h != i)
            bad++;
        if (nanbf ? !((b & 0x7f80) == 0x7f80 && (b & 0x7f)) : b != i)
            bad++;
        if (bad && bad < 3 && (h != i || b != i) && !nan16 && !nanbf)
            fprintf(stderr, "round trip 0x%04x: f16 0x%04x bf16 0x%04x\n", i, h, b);
    }
    CHECK_EQ_INT(bad, 0);
    bad = 0;
    for (int i = 0; i < n && bad < 10; i++) {
        const uint16_t *o = out + 131072 + i * 6;
        unsigned want[6] = {ref_half(f[i], 0), ref_half(f[i], 1), ref_half(f[i], 2),
                            ref_half(f[i], 3), ref_bf16(f[i]),    0};
        double sum = half_value(want[0]) + 1.0;
        want[5] = ref_half((float)sum, 0);
        if ((float)sum != sum)
            want[5] = o[5]; /* needs more than a float: not referenced */
        for (int k = 0; k < 6; k++)
            if (o[k] != want[k]) {
                fprintf(stderr,
                        "half conversion of %.9g (0x%08x) result %d: 0x%04x, expected 0x%04x\n",
                        f[i], fbits(f[i]), k, o[k], want[k]);
                bad++;
            }
    }
    CHECK_EQ_INT(bad, 0);
    dev_free(f);
    dev_free(out);
    cr_ptx_module_free(m);
}

static void test_intrinsics(void)
{
    cr_ptx_module_t *m = load_file(fixtures, "math.ptx");
    int n = 500;
    unsigned *a = dev_alloc((size_t)n * 4), *b = dev_alloc((size_t)n * 4),
             *out = dev_alloc((size_t)n * 12 * 4);
    uint32_t seed = 12345;
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        a[i] = i < 4 ? (unsigned[]){0, 1, 0x80000000u, 0xffffffffu}[i] : seed;
        seed = seed * 1664525u + 1013904223u;
        b[i] = seed >> (i % 29);
    }
    params_t p = {0};
    PARAM(&p, a);
    PARAM(&p, b);
    PARAM(&p, out);
    PARAM(&p, n);
    CHECK_EQ_INT(launch(m, "intrinsics", (uint32_t)(n + 127) / 128, 1, 128, 1, 0, &p, NULL), 0);
    int bad = 0;
    for (int i = 0; i < n && bad < 10; i++) {
        uint32_t x = a[i], y = b[i], rev = 0, perm = 0;
        for (int k = 0; k < 32; k++)
            rev |= ((x >> k) & 1u) << (31 - k);
        uint64_t both = (uint64_t)y << 32 | x;
        for (int k = 0; k < 4; k++) {
            unsigned sel = (y & 0x7777) >> (4 * k) & 7;
            perm |= (uint32_t)((both >> (8 * sel)) & 0xff) << (8 * k);
        }
        unsigned sh = y & 31;
        unsigned __int128 prod = (unsigned __int128)((uint64_t)x << 32 | y) * 0x123456789abcdefull;
        uint32_t want[12] = {
            (uint32_t)__builtin_popcount(x),
            x ? (uint32_t)__builtin_clz(x) : 32,
            rev,
            perm,
            (uint32_t)((both << sh) >> 32),
            (uint32_t)(both >> sh),
            (uint32_t)(((uint64_t)x * y) >> 32),
            (x > y ? x - y : y - x) + 7,
            x ? (uint32_t)__builtin_ctz(x) + 1 : 0,
            (uint32_t)((uint64_t)(prod >> 64) >> 7),
            x ^ y,
            (uint32_t)((int)x / (int)(y | 1)) + x % (y | 1),
        };
        if ((int)x == INT_MIN && (int)(y | 1) == -1)
            want[11] = out[i * 12 + 11];
        for (int k = 0; k < 12; k++)
            if (out[i * 12 + k] != want[k]) {
                fprintf(stderr, "intrinsic %d of (0x%08x, 0x%08x): 0x%08x, expected 0x%08x\n", k, x,
                        y, out[i * 12 + k], want[k]);
                bad++;
            }
    }
    CHECK_EQ_INT(bad, 0);
    dev_free(a);
    dev_free(b);
    dev_free(out);
    cr_ptx_module_free(m);
}

/* ---- printf ---- */

static void test_printf(void)
{
    cr_ptx_module_t *m = load_file(fixtures, "printf.ptx");
    char *s = dev_alloc(16);
    strcpy(s, "remote");
    int i = -42;
    unsigned u = 3000000000u;
    long long ll = -1234567890123ll;
    unsigned long long ull = 0xfedcba9876543210ull;
    double d = 3.14159265358979;
    float fl = 2.5f;
    char c = 'Z';
    void *ptr = (void *)(uintptr_t)0xabc123;
    params_t p = {0};
    PARAM(&p, i);
    PARAM(&p, u);
    PARAM(&p, ll);
    PARAM(&p, ull);
    PARAM(&p, d);
    PARAM(&p, fl);
    PARAM(&p, s);
    PARAM(&p, c);
    PARAM(&p, ptr);
    dev_output_clear();
    CHECK_EQ_INT(launch(m, "formats", 1, 1, 1, 1, 0, &p, NULL), 0);
    char want[2048];
    size_t w = 0;
    w += (size_t)snprintf(want + w, sizeof want - w, "d=%d i=%i u=%u x=%x X=%X o=%o c=%c\n", i, -i,
                          u, u, u, u, c);
    w += (size_t)snprintf(want + w, sizeof want - w,
                          "ld=%ld lld=%lld lu=%lu llu=%llu lx=%lx llx=%llx\n", (long)ll, ll,
                          (unsigned long)ull, ull, (unsigned long)ull, ull);
    w += (size_t)snprintf(want + w, sizeof want - w, "f=%f e=%e g=%g F=%.3f E=%.2E G=%G\n", d, d, d,
                          (double)fl, d, 1e-10);
    w += (size_t)snprintf(want + w, sizeof want - w,
                          "s=%s w=[%8s] l=[%-8s] p=[%.3s] ptr=%p null=%s\n", s, s, s, s, ptr,
                          "(null)");
    w += (size_t)snprintf(want + w, sizeof want - w,
                          "w=[%5d] l=[%-5d] z=[%05d] plus=[%+d] sp=[% d] hash=[%#x] [%#o] pct=%%\n",
                          i, i, i, i, i, u, u);
    w += (size_t)snprintf(want + w, sizeof want - w, "short=%hd char=%hhu mix=%d,%lld,%d,%f,%c\n",
                          (short)i, (unsigned char)u, 1, ll, 2, d, c);
    CHECK_EQ_STR(dev.out, want);

    /* many threads and blocks: every line once */
    dev_output_clear();
    p = (params_t){0};
    PARAM(&p, 9);
    CHECK_EQ_INT(launch(m, "many", 4, 1, 64, 1, 0, &p, NULL), 0);
    int found = 0;
    size_t total = 0;
    for (int b = 0; b < 4; b++)
        for (int t = 0; t < 64; t++) {
            char line[64];
            total += (size_t)snprintf(line, sizeof line, "block %d thread %d tag 9\n", b, t);
            found += dev.out && strstr(dev.out, line) != NULL;
        }
    CHECK_EQ_INT(found, 256);
    CHECK_EQ_U64(dev.out_len, total);
    dev_output_clear();
    dev_free(s);
    cr_ptx_module_free(m);
}

/* ---- faults ---- */

static void test_faults(void)
{
    cr_ptx_module_t *m = load_file(fixtures, "faults.ptx");
    int *buf = dev_alloc(64 * 4);
    params_t p = {0};
    cr_ptx_fault_t f;
    PARAM(&p, buf);
    PARAM(&p, (long long)1 << 30);
    CHECK_EQ_INT(launch(m, "oob", 4, 1, 32, 1, 0, &p, &f), 700);
    CHECK(strstr(f.message, "block (2,0,0), thread (7,0,0)") != NULL);
    CHECK(strstr(f.message, "out-of-bounds global store") != NULL);
    p = (params_t){0};
    PARAM(&p, buf);
    PARAM(&p, (long long)5);
    CHECK_EQ_INT(launch(m, "oob", 4, 1, 32, 1, 0, &p, &f), 0);
    p = (params_t){0};
    PARAM(&p, (char *)buf);
    CHECK_EQ_INT(launch(m, "misaligned", 1, 1, 4, 1, 0, &p, &f), 716);
    CHECK(strstr(f.message, "misaligned store of 4 bytes") != NULL);
    dev_output_clear();
    p = (params_t){0};
    PARAM(&p, 3);
    CHECK_EQ_INT(launch(m, "asserts", 1, 1, 32, 1, 0, &p, &f), 710);
    CHECK(dev.out && strstr(dev.out, "block: [0,0,0], thread: [5,0,0] Assertion `v != 3 || "
                                     "threadIdx.x != 5` failed.") != NULL);
    CHECK(dev.out && strstr(dev.out, "faults.cu:") != NULL);
    dev_output_clear();
    p = (params_t){0};
    PARAM(&p, 2);
    CHECK_EQ_INT(launch(m, "asserts", 1, 1, 32, 1, 0, &p, &f), 0);
    CHECK(dev.out == NULL);
    p = (params_t){0};
    PARAM(&p, 3);
    CHECK_EQ_INT(launch(m, "traps", 1, 1, 32, 1, 0, &p, &f), 715);
    CHECK(strstr(f.message, "thread (3,0,0): trap") != NULL);
    p = (params_t){0};
    PARAM(&p, 100);
    CHECK_EQ_INT(launch(m, "traps", 1, 1, 32, 1, 0, &p, &f), 0);
    p = (params_t){0};
    PARAM(&p, (float *)buf + 1);
    PARAM(&p, (float *)buf);
    CHECK_EQ_INT(launch(m, "oob_read", 1, 1, 1, 1, 0, &p, &f), 0); /* p[-1] is still buf[0] */
    p = (params_t){0};
    PARAM(&p, (float *)buf);
    PARAM(&p, (float *)buf);
    CHECK_EQ_INT(launch(m, "oob_read", 1, 1, 1, 1, 0, &p, &f), 700);
    CHECK(strstr(f.message, "out-of-bounds global load") != NULL);
    p = (params_t){0};
    PARAM(&p, (unsigned *)buf);
    buf[0] = 1234;
    CHECK_EQ_INT(launch(m, "unsupported", 1, 1, 32, 1, 0, &p, &f), 801);
    CHECK(strstr(f.message, "ldmatrix.sync.aligned.m8n8.x1.shared.b16") != NULL);
    CHECK_EQ_INT(buf[0], 1234); /* nothing ran */
    CHECK_EQ_INT(launch(m, "no_such_kernel", 1, 1, 1, 1, 0, &p, &f), 801);
    dev_free(buf);
    cr_ptx_module_free(m);
}

/* ---- calls ---- */

static int fact(int n)
{
    return n <= 1 ? 1 : n * fact(n - 1);
}

static int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static void test_calls(void)
{
    cr_ptx_module_t *m = load_file(fixtures, "calls.ptx");
    int *out = dev_alloc(64 * 6 * 4);
    params_t p = {0};
    PARAM(&p, out);
    CHECK_EQ_INT(launch(m, "calls", 1, 1, 64, 1, 0, &p, NULL), 0);
    for (int t = 0; t < 64; t++) {
        int s = 0;
        for (int i = t % 16; i < 16; i++)
            s += i * t;
        int want[6] = {5 * t + 1,
                       fact(t % 10),
                       t % 4 == 0 ? fib(t % 13) : -1,
                       s,
                       ((t + 1) % 64) * ((t + 1) % 64),
                       55};
        for (int k = 0; k < 6; k++)
            if (out[t * 6 + k] != want[k]) {
                fprintf(stderr, "calls thread %d result %d: %d, expected %d\n", t, k,
                        out[t * 6 + k], want[k]);
                CHECK(0);
            }
    }
    dev_free(out);

    /* through pointers, with different functions in the lanes of one warp */
    out = dev_alloc(64 * 4);
    p = (params_t){0};
    PARAM(&p, out);
    CHECK_EQ_INT(launch(m, "pointers", 1, 1, 64, 1, 0, &p, NULL), 0);
    for (int t = 0; t < 64; t++) {
        int ops[3][2] = {{t + 7, t + 2}, {t - 7, t - 2}, {t * 7, t * 2}};
        int want = ops[t % 3][0] + ops[(t + 1) % 3][1];
        if (out[t] != want) {
            CHECK_EQ_INT(out[t], want);
            break;
        }
    }
    dev_free(out);
    cr_ptx_module_free(m);
}

/* ---- tensor cores (wmma) ---- */

static uint16_t to_half(float f) /* exact for the small integers used here */
{
    if (f == 0)
        return 0;
    int e;
    float mnt = frexpf(fabsf(f), &e); /* f = mnt * 2^e, mnt in [0.5, 1) */
    return (uint16_t)((f < 0 ? 0x8000 : 0) | (unsigned)(e + 14) << 10 |
                      ((unsigned)(mnt * 2048) & 0x3ff));
}

static float from_half(uint16_t h)
{
    int e = (h >> 10) & 31;
    float v = e ? ldexpf((float)(1024 + (h & 0x3ff)), e - 25) : ldexpf((float)(h & 0x3ff), -24);
    return (h & 0x8000) ? -v : v;
}

static void test_tensor(void)
{
    cr_ptx_module_t *m = load_file(fixtures, "tensor.ptx");
    uint16_t *A = dev_alloc(256 * 2), *B = dev_alloc(256 * 2), *H = dev_alloc(256 * 2);
    float *C = dev_alloc(256 * 4), a[256], b[256], c[256];
    for (int i = 0; i < 256; i++) {
        a[i] = (float)((i * 7) % 9 - 4);
        b[i] = (float)((i * 5) % 7 - 3);
        c[i] = (float)(i % 11 - 5);
        A[i] = to_half(a[i]);
        B[i] = to_half(b[i]);
        C[i] = c[i];
    }
    params_t p = {0};
    PARAM(&p, A);
    PARAM(&p, B);
    PARAM(&p, C);
    CHECK_EQ_INT(launch(m, "mma_f32", 1, 1, 32, 1, 0, &p, NULL), 0);
    /* A row-major, B column-major, C column-major: C[i][j] at C[j * 16 + i] */
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c[j * 16 + i];
            for (int k = 0; k < 16; k++)
                s += a[i * 16 + k] * b[j * 16 + k];
            if (C[j * 16 + i] != 2 * s) {
                fprintf(stderr, "mma_f32 [%d][%d]: %g, expected %g\n", i, j, C[j * 16 + i], 2 * s);
                CHECK(0);
                i = 16;
                break;
            }
        }
    cr_ptx_fault_t f;
    CHECK_EQ_INT(launch(m, "mma_f32", 1, 1, 16, 1, 0, &p, &f), 715); /* not a whole warp */
    p = (params_t){0};
    PARAM(&p, A);
    PARAM(&p, B);
    PARAM(&p, H);
    CHECK_EQ_INT(launch(m, "mma_f16", 1, 1, 32, 1, 0, &p, NULL), 0);
    /* A column-major, B row-major: A[i][k] = a[k * 16 + i], B[k][j] = b[k * 16 + j] */
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = 1;
            for (int k = 0; k < 16; k++)
                s += a[k * 16 + i] * b[k * 16 + j];
            if (from_half(H[i * 16 + j]) != s) {
                fprintf(stderr, "mma_f16 [%d][%d]: %g, expected %g\n", i, j,
                        from_half(H[i * 16 + j]), s);
                CHECK(0);
                i = 16;
                break;
            }
        }
    dev_free(A);
    dev_free(B);
    dev_free(H);
    dev_free(C);
    cr_ptx_module_free(m);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <fixture dir>\n", argv[0]);
        return 2;
    }
    fixtures = argv[1];
    cr_ptx_module_t *basic = load_file(fixtures, "basic.ptx");
    test_speed_and_basic(basic);
    test_control(basic);
    test_memory_spaces(basic);
    cr_ptx_module_free(basic);
    test_atomics();
    test_warp("warp.ptx", 0);
    test_warp("warp_sm90.ptx", 1);
    test_math();
    test_halves();
    test_intrinsics();
    test_printf();
    test_faults();
    test_calls();
    test_tensor();
    CHECK_DONE();
}
