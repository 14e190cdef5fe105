// misc_ops: integer intrinsics, float and double math, conversions with rounding modes.
//  1. Integers, exact, on 4096 operand pairs including edge values: __umulhi, __mulhi,
//     __umul64hi, __mul64hi, __mul24, __umul24, __popc(ll), __clz(ll), __ffs(ll), __brev(ll),
//     __byte_perm, __funnelshift_l/r/lc/rc, __sad, __usad, __hadd, __rhadd, __uhadd, __urhadd,
//     / and % (32/64-bit, signed/unsigned), shifts, rotates, abs, min/max of int, unsigned,
//     mixed int/unsigned (CUDA's overloads compare as unsigned), long long; __dp4a, __dp2a,
//     SIMD __vadd4 __vsub2 __vabsdiffu4 __vmaxs4 __vcmpgtu4 __vavgu4 __vhaddu2; bfe.u32/.s32/
//     .s64 and bfi.b32 in inline PTX with positions and lengths up to 255 (PTX ISA semantics).
//  2. float: x / y, sqrtf and fmaf correctly rounded (exact); __fdividef 2 ulp;
//     rsqrtf, expf, exp2f, sinf, cosf, tanhf within 2 ulp, logf, log2f within 1 ulp (the CUDA
//     documented bounds) against long double references; fminf/fmaxf with NaN.
//  3. double: / sqrt fma exact; exp and log within 1 ulp, sin and cos within 2 ulp.
//  4. Conversions: __float2int_rn/rz/ru/rd, __float2uint_*, __float2ll_*, __double2int_*,
//     __int2float_*, __uint2float_rn, __ll2float_rn, __double2float_rn/rz/ru/rd (in range:
//     out-of-range inputs are undefined for these intrinsics); cvt.rzi.s32.f32,
//     cvt.rni.u32.f32 and cvt.rzi.s64.f64 in inline PTX, which clamp out-of-range values;
//     __float2half(_rn/_rz/_rd/_ru), __half2float, __float2bfloat16(_rn/_rz/_rd/_ru),
//     __bfloat162float, round trips, against the headers' host implementations and a table of
//     known encodings.
//  6. (last) __dp4a, __dp2a, the SIMD intrinsics and bfe/bfi: listed under 1.
//  5. half arithmetic: __hadd, __hsub, __hmul, __hfma, __hdiv, __hadd2, __hmul2, __hfma2, __hlt,
//     __hmax on operands of magnitude 2^-6..2^6, exact against one rounding of the exact result.
#include "kt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <climits>
#include <vector>

// ---------------------------------------------------------------- integers
enum {
    I_UMULHI, I_MULHI, I_UMUL64HI, I_MUL64HI, I_MUL24, I_UMUL24, I_POPC, I_POPCLL, I_CLZ, I_CLZLL,
    I_FFS, I_FFSLL, I_BREV, I_BREVLL, I_BYTE_PERM, I_FSHL, I_FSHR, I_FSHLC, I_FSHRC, I_SAD, I_USAD,
    I_HADD, I_RHADD, I_UHADD, I_URHADD, I_DIV, I_MOD, I_UDIV, I_UMOD, I_DIV64, I_MOD64, I_UDIV64,
    I_UMOD64, I_SHL, I_SAR, I_SHR, I_SHL64, I_SAR64, I_SHR64, I_ROTL, I_ABS, I_LLABS, I_MIN,
    I_MAX, I_UMIN, I_UMAX, I_MIN_IU, I_MAX_IU, I_LLMIN, I_LLMAX, I_ULLMIN, I_ULLMAX, I_DP4A_S,
    I_DP4A_U, I_DP2A_LO_S, I_DP2A_HI_U, I_VADD4, I_VSUB2, I_VABSDIFFU4, I_VMAXS4, I_VCMPGTU4,
    I_VAVGU4, I_VHADDU2, I_BFE_U32, I_BFE_S32, I_BFE_S64, I_BFI_B32, NI
};
static const char *int_names[NI] = {
    "__umulhi", "__mulhi", "__umul64hi", "__mul64hi", "__mul24", "__umul24", "__popc",
    "__popcll", "__clz", "__clzll", "__ffs", "__ffsll", "__brev", "__brevll", "__byte_perm",
    "__funnelshift_l", "__funnelshift_r", "__funnelshift_lc", "__funnelshift_rc", "__sad",
    "__usad", "__hadd", "__rhadd", "__uhadd", "__urhadd", "int /", "int %", "unsigned /",
    "unsigned %", "long long /", "long long %", "unsigned long long /", "unsigned long long %",
    "a << s", "(int)a >> s", "(unsigned)a >> s", "a64 << s", "(long long)a64 >> s",
    "(unsigned long long)a64 >> s", "rotate left", "abs", "llabs", "min(int, int)",
    "max(int, int)", "min(unsigned, unsigned)", "max(unsigned, unsigned)", "min(int, unsigned)",
    "max(int, unsigned)", "min(long long, long long)", "max(long long, long long)",
    "min(unsigned long long, unsigned long long)", "max(unsigned long long, unsigned long long)",
    "__dp4a(int)", "__dp4a(unsigned)", "__dp2a_lo(int)", "__dp2a_hi(unsigned)", "__vadd4",
    "__vsub2", "__vabsdiffu4", "__vmaxs4", "__vcmpgtu4", "__vavgu4", "__vhaddu2",
    "bfe.u32 (inline PTX)", "bfe.s32 (inline PTX)", "bfe.s64 (inline PTX)",
    "bfi.b32 (inline PTX)"};

// bit-field position and length for bfe/bfi: 0..255 each, or 0..31 when s is odd
__host__ __device__ static inline void bf_pos_len(unsigned s, unsigned *pos, unsigned *len)
{
    *pos = (s >> 8) & 0xff;
    *len = (s >> 16) & 0xff;
    if (s & 1) {
        *pos &= 31;
        *len &= 31;
    }
}

struct IntIn {
    unsigned a, b, s;
    unsigned long long a64, b64;
};

__global__ void int_ops(const IntIn *in, unsigned long long *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    IntIn v = in[i];
    unsigned a = v.a, b = v.b, s = v.s;
    int ia = (int)a, ib = (int)b;
    unsigned long long a64 = v.a64, b64 = v.b64;
    long long la = (long long)a64, lb = (long long)b64;
    unsigned long long *o = out + (size_t)i * NI;
    o[I_UMULHI] = __umulhi(a, b);
    o[I_MULHI] = (unsigned)__mulhi(ia, ib);
    o[I_UMUL64HI] = __umul64hi(a64, b64);
    o[I_MUL64HI] = (unsigned long long)__mul64hi(la, lb);
    o[I_MUL24] = (unsigned)__mul24(ia, ib);
    o[I_UMUL24] = __umul24(a, b);
    o[I_POPC] = __popc(a);
    o[I_POPCLL] = __popcll(a64);
    o[I_CLZ] = __clz(ia);
    o[I_CLZLL] = __clzll(la);
    o[I_FFS] = __ffs(ia);
    o[I_FFSLL] = __ffsll(la);
    o[I_BREV] = __brev(a);
    o[I_BREVLL] = __brevll(a64);
    o[I_BYTE_PERM] = __byte_perm(a, b, s & 0x7777);
    o[I_FSHL] = __funnelshift_l(a, b, s);
    o[I_FSHR] = __funnelshift_r(a, b, s);
    o[I_FSHLC] = __funnelshift_lc(a, b, s & 63);
    o[I_FSHRC] = __funnelshift_rc(a, b, s & 63);
    o[I_SAD] = __sad(ia, ib, s);
    o[I_USAD] = __usad(a, b, s);
    o[I_HADD] = (unsigned)__hadd(ia, ib);
    o[I_RHADD] = (unsigned)__rhadd(ia, ib);
    o[I_UHADD] = __uhadd(a, b);
    o[I_URHADD] = __urhadd(a, b);
    o[I_DIV] = (unsigned)(ia / ib);
    o[I_MOD] = (unsigned)(ia % ib);
    o[I_UDIV] = a / b;
    o[I_UMOD] = a % b;
    o[I_DIV64] = (unsigned long long)(la / lb);
    o[I_MOD64] = (unsigned long long)(la % lb);
    o[I_UDIV64] = a64 / b64;
    o[I_UMOD64] = a64 % b64;
    o[I_SHL] = a << (s & 31);
    o[I_SAR] = (unsigned)(ia >> (s & 31));
    o[I_SHR] = a >> (s & 31);
    o[I_SHL64] = a64 << (s & 63);
    o[I_SAR64] = (unsigned long long)(la >> (s & 63));
    o[I_SHR64] = a64 >> (s & 63);
    unsigned r = (s & 31) | 1;
    o[I_ROTL] = (a << r) | (a >> (32 - r));
    o[I_ABS] = (unsigned)abs(ia == INT_MIN ? 0 : ia);
    o[I_LLABS] = (unsigned long long)llabs(la == LLONG_MIN ? 0 : la);
    o[I_MIN] = (unsigned)min(ia, ib);
    o[I_MAX] = (unsigned)max(ia, ib);
    o[I_UMIN] = min(a, b);
    o[I_UMAX] = max(a, b);
    o[I_MIN_IU] = min(ia, b);
    o[I_MAX_IU] = max(ia, b);
    o[I_LLMIN] = (unsigned long long)min(la, lb);
    o[I_LLMAX] = (unsigned long long)max(la, lb);
    o[I_ULLMIN] = min(a64, b64);
    o[I_ULLMAX] = max(a64, b64);
}

// The SIMD, dot-product and bit-field operations: a kernel of their own (run last), so that
// an instruction the device lacks does not hide the results of the others.
__global__ void simd_ops(const IntIn *in, unsigned long long *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    IntIn v = in[i];
    unsigned a = v.a, b = v.b, s = v.s;
    int ia = (int)a, ib = (int)b;
    long long la = (long long)v.a64;
    unsigned long long *o = out + (size_t)i * NI;
    o[I_DP4A_S] = (unsigned)__dp4a(ia, ib, (int)s);
    o[I_DP4A_U] = __dp4a(a, b, s);
    o[I_DP2A_LO_S] = (unsigned)__dp2a_lo(ia, ib, (int)s);
    o[I_DP2A_HI_U] = __dp2a_hi(a, b, s);
    o[I_VADD4] = __vadd4(a, b);
    o[I_VSUB2] = __vsub2(a, b);
    o[I_VABSDIFFU4] = __vabsdiffu4(a, b);
    o[I_VMAXS4] = __vmaxs4(a, b);
    o[I_VCMPGTU4] = __vcmpgtu4(a, b);
    o[I_VAVGU4] = __vavgu4(a, b);
    o[I_VHADDU2] = __vhaddu2(a, b);
    unsigned pos, len, bu, bs, bi;
    long long b64s;
    bf_pos_len(s, &pos, &len);
    asm("bfe.u32 %0, %1, %2, %3;" : "=r"(bu) : "r"(a), "r"(pos), "r"(len));
    asm("bfe.s32 %0, %1, %2, %3;" : "=r"(bs) : "r"(a), "r"(pos), "r"(len));
    asm("bfe.s64 %0, %1, %2, %3;" : "=l"(b64s) : "l"(la), "r"(pos), "r"(len));
    asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(bi) : "r"(a), "r"(b), "r"(pos), "r"(len));
    o[I_BFE_U32] = bu;
    o[I_BFE_S32] = bs;
    o[I_BFE_S64] = (unsigned long long)b64s;
    o[I_BFI_B32] = bi;
}

// per-lane helpers for the host references of the SIMD intrinsics
static unsigned lane_op(unsigned a, unsigned b, int bits, unsigned (*f)(unsigned, unsigned, int))
{
    unsigned r = 0, mask = bits == 8 ? 0xffu : 0xffffu;
    for (int sh = 0; sh < 32; sh += bits)
        r |= (f((a >> sh) & mask, (b >> sh) & mask, bits) & mask) << sh;
    return r;
}

static int sext(unsigned v, int bits) { return (int)(v << (32 - bits)) >> (32 - bits); }

// PTX bfe: d[i] = (i < len && pos + i <= msb) ? a[pos + i] : sbit
static unsigned long long ptx_bfe(unsigned long long a, unsigned pos, unsigned len, int msb,
                                  bool is_signed)
{
    unsigned long long sbit = 0;
    if (is_signed && len != 0) {
        unsigned top = pos + len - 1 < (unsigned)msb ? pos + len - 1 : (unsigned)msb;
        sbit = (a >> top) & 1;
    }
    unsigned long long d = 0;
    for (int i = 0; i <= msb; i++) {
        unsigned long long bit = ((unsigned)i < len && pos + i <= (unsigned)msb) ? (a >> (pos + i)) & 1
                                                                                 : sbit;
        d |= bit << i;
    }
    return d;
}

static unsigned ptx_bfi(unsigned a, unsigned b, unsigned pos, unsigned len)
{
    unsigned f = b;
    for (unsigned i = 0; i < len && pos + i <= 31; i++)
        f = (f & ~(1u << (pos + i))) | (((a >> i) & 1) << (pos + i));
    return f;
}

static unsigned brev32(unsigned x)
{
    unsigned r = 0;
    for (int k = 0; k < 32; k++)
        if (x & (1u << k))
            r |= 1u << (31 - k);
    return r;
}

static unsigned long long brev64(unsigned long long x)
{
    return ((unsigned long long)brev32((unsigned)x) << 32) | brev32((unsigned)(x >> 32));
}

static void int_expected(const IntIn &v, unsigned long long *e)
{
    unsigned a = v.a, b = v.b, s = v.s;
    int ia = (int)a, ib = (int)b;
    unsigned long long a64 = v.a64, b64 = v.b64;
    long long la = (long long)a64, lb = (long long)b64;
    e[I_UMULHI] = (unsigned)(((unsigned long long)a * b) >> 32);
    e[I_MULHI] = (unsigned)(((long long)ia * ib) >> 32);
    e[I_UMUL64HI] = (unsigned long long)(((unsigned __int128)a64 * b64) >> 64);
    e[I_MUL64HI] = (unsigned long long)(long long)(((__int128)la * lb) >> 64);
    long long a24 = (int)(a << 8) >> 8, b24 = (int)(b << 8) >> 8;
    e[I_MUL24] = (unsigned)(a24 * b24);
    e[I_UMUL24] = (unsigned)((unsigned long long)(a & 0xffffff) * (b & 0xffffff));
    e[I_POPC] = __builtin_popcount(a);
    e[I_POPCLL] = __builtin_popcountll(a64);
    e[I_CLZ] = a ? __builtin_clz(a) : 32;
    e[I_CLZLL] = a64 ? __builtin_clzll(a64) : 64;
    e[I_FFS] = __builtin_ffs(ia);
    e[I_FFSLL] = __builtin_ffsll(la);
    e[I_BREV] = brev32(a);
    e[I_BREVLL] = brev64(a64);
    {
        unsigned long long bytes = ((unsigned long long)b << 32) | a;  // x = bytes 0-3, y = 4-7
        unsigned sel = s & 0x7777, r = 0;
        for (int k = 0; k < 4; k++)
            r |= (unsigned)((bytes >> (8 * ((sel >> (4 * k)) & 7))) & 0xff) << (8 * k);
        e[I_BYTE_PERM] = r;
    }
    unsigned long long hl = ((unsigned long long)b << 32) | a;  // hi = b, lo = a
    e[I_FSHL] = (unsigned)((hl << (s & 31)) >> 32);
    e[I_FSHR] = (unsigned)(hl >> (s & 31));
    unsigned sc = (s & 63) < 32 ? (s & 63) : 32;
    e[I_FSHLC] = (unsigned)((hl << sc) >> 32);
    e[I_FSHRC] = (unsigned)(hl >> sc);
    e[I_SAD] = (unsigned)(ia < ib ? (unsigned)ib - (unsigned)ia : (unsigned)ia - (unsigned)ib) + s;
    e[I_USAD] = (unsigned)(a < b ? b - a : a - b) + s;
    e[I_HADD] = (unsigned)(int)(((long long)ia + ib) >> 1);
    e[I_RHADD] = (unsigned)(int)(((long long)ia + ib + 1) >> 1);
    e[I_UHADD] = (unsigned)(((unsigned long long)a + b) >> 1);
    e[I_URHADD] = (unsigned)(((unsigned long long)a + b + 1) >> 1);
    e[I_DIV] = (unsigned)(ia / ib);
    e[I_MOD] = (unsigned)(ia % ib);
    e[I_UDIV] = a / b;
    e[I_UMOD] = a % b;
    e[I_DIV64] = (unsigned long long)(la / lb);
    e[I_MOD64] = (unsigned long long)(la % lb);
    e[I_UDIV64] = a64 / b64;
    e[I_UMOD64] = a64 % b64;
    e[I_SHL] = a << (s & 31);
    e[I_SAR] = (unsigned)(ia >> (s & 31));
    e[I_SHR] = a >> (s & 31);
    e[I_SHL64] = a64 << (s & 63);
    e[I_SAR64] = (unsigned long long)(la >> (s & 63));
    e[I_SHR64] = a64 >> (s & 63);
    unsigned r = (s & 31) | 1;
    e[I_ROTL] = (a << r) | (a >> (32 - r));
    e[I_ABS] = (unsigned)abs(ia == INT_MIN ? 0 : ia);
    e[I_LLABS] = (unsigned long long)llabs(la == LLONG_MIN ? 0 : la);
    e[I_MIN] = (unsigned)(ia < ib ? ia : ib);
    e[I_MAX] = (unsigned)(ia > ib ? ia : ib);
    e[I_UMIN] = a < b ? a : b;
    e[I_UMAX] = a > b ? a : b;
    e[I_MIN_IU] = a < b ? a : b;  // min(int, unsigned) compares as unsigned
    e[I_MAX_IU] = a > b ? a : b;
    e[I_LLMIN] = (unsigned long long)(la < lb ? la : lb);
    e[I_LLMAX] = (unsigned long long)(la > lb ? la : lb);
    e[I_ULLMIN] = a64 < b64 ? a64 : b64;
    e[I_ULLMAX] = a64 > b64 ? a64 : b64;
    {
        long long ds = (int)s, du = s, d2 = (int)s, d2u = s;
        for (int k = 0; k < 4; k++) {
            ds += (long long)sext((a >> (8 * k)) & 0xff, 8) * sext((b >> (8 * k)) & 0xff, 8);
            du += (long long)((a >> (8 * k)) & 0xff) * ((b >> (8 * k)) & 0xff);
        }
        for (int k = 0; k < 2; k++) {
            d2 += (long long)sext((a >> (16 * k)) & 0xffff, 16) * sext((b >> (8 * k)) & 0xff, 8);
            d2u += (long long)((a >> (16 * k)) & 0xffff) * ((b >> (16 + 8 * k)) & 0xff);
        }
        e[I_DP4A_S] = (unsigned)ds;
        e[I_DP4A_U] = (unsigned)du;
        e[I_DP2A_LO_S] = (unsigned)d2;
        e[I_DP2A_HI_U] = (unsigned)d2u;
    }
    e[I_VADD4] = lane_op(a, b, 8, [](unsigned x, unsigned y, int) { return x + y; });
    e[I_VSUB2] = lane_op(a, b, 16, [](unsigned x, unsigned y, int) { return x - y; });
    e[I_VABSDIFFU4] = lane_op(a, b, 8, [](unsigned x, unsigned y, int) { return x > y ? x - y : y - x; });
    e[I_VMAXS4] = lane_op(a, b, 8, [](unsigned x, unsigned y, int n) {
        return sext(x, n) > sext(y, n) ? x : y;
    });
    e[I_VCMPGTU4] = lane_op(a, b, 8, [](unsigned x, unsigned y, int) { return x > y ? 0xffu : 0u; });
    e[I_VAVGU4] = lane_op(a, b, 8, [](unsigned x, unsigned y, int) { return (x + y + 1) >> 1; });
    e[I_VHADDU2] = lane_op(a, b, 16, [](unsigned x, unsigned y, int) { return (x + y) >> 1; });
    unsigned pos, len;
    bf_pos_len(s, &pos, &len);
    e[I_BFE_U32] = (unsigned)ptx_bfe(a, pos, len, 31, false);
    e[I_BFE_S32] = (unsigned)ptx_bfe(a, pos, len, 31, true);
    e[I_BFE_S64] = ptx_bfe(a64, pos, len, 63, true);
    e[I_BFI_B32] = ptx_bfi(a, b, pos, len);
}

static void test_ints(KtRng &rng, bool simd)
{
    const int first = simd ? I_DP4A_S : 0, last = simd ? NI : I_DP4A_S;
    const unsigned edge32[] = {0u, 1u, 2u, 3u, 0x7fffffffu, 0x80000000u, 0x80000001u, 0xffffffffu,
                               0xfffffffeu, 0x00ffffffu, 0x00800000u, 0xff800000u, 0x12345678u,
                               0xdeadbeefu, 100u, (unsigned)-100};
    const unsigned long long edge64[] = {0ull, 1ull, 0x7fffffffffffffffull, 0x8000000000000000ull,
                                         0xffffffffffffffffull, 0x00000000ffffffffull,
                                         0x0123456789abcdefull, (unsigned long long)-12345};
    const int n = 4096;
    std::vector<IntIn> in(n);
    for (int i = 0; i < n; i++) {
        IntIn &v = in[i];
        v.a = i < 256 ? edge32[i % 16] : rng.next() >> (rng.next() % 32);
        v.b = i < 256 ? edge32[i / 16] : (rng.next() | (rng.next() << 16)) >> (rng.next() % 28);
        v.s = rng.next();
        v.a64 = i < 64 ? edge64[i % 8]
                       : (((unsigned long long)rng.next() << 32) | rng.next()) >> (rng.next() % 64);
        v.b64 = i < 64 ? edge64[i / 8]
                       : (((unsigned long long)rng.next() << 32) | rng.next()) >> (rng.next() % 64);
        if (i & 1)
            v.b64 = (unsigned long long)-(long long)v.b64;
        // keep division defined: no divisor 0, no INT_MIN / -1
        if (v.b == 0)
            v.b = 7;
        if (v.a == 0x80000000u && v.b == 0xffffffffu)
            v.b = 3;
        if (v.b64 == 0)
            v.b64 = 11;
        if (v.a64 == 0x8000000000000000ull && v.b64 == 0xffffffffffffffffull)
            v.b64 = 5;
    }
    IntIn *din;
    unsigned long long *dout;
    CHECK_CUDA(cudaMalloc(&din, n * sizeof(IntIn)));
    CHECK_CUDA(cudaMalloc(&dout, (size_t)n * NI * sizeof(unsigned long long)));
    CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(IntIn), cudaMemcpyHostToDevice));
    if (simd)
        simd_ops<<<n / 128, 128>>>(din, dout, n);
    else
        int_ops<<<n / 128, 128>>>(din, dout, n);
    KT_SYNC();
    std::vector<unsigned long long> out((size_t)n * NI);
    CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(unsigned long long),
                          cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        unsigned long long e[NI];
        int_expected(in[i], e);
        for (int k = first; k < last; k++)
            if (out[(size_t)i * NI + k] != e[k])
                KT_FAIL("%s[%d] (a=0x%08x b=0x%08x s=0x%08x a64=0x%016llx b64=0x%016llx): got "
                        "0x%llx, expected 0x%llx",
                        int_names[k], i, in[i].a, in[i].b, in[i].s, in[i].a64, in[i].b64,
                        out[(size_t)i * NI + k], e[k]);
    }
    CHECK_CUDA(cudaFree(din));
    CHECK_CUDA(cudaFree(dout));
}

// ---------------------------------------------------------------- float math
enum {
    F_DIV, F_SQRT, F_FMA, F_FDIVIDEF, F_RSQRT, F_EXP, F_EXP2, F_LOG, F_LOG2, F_SIN, F_COS, F_TANH,
    F_FMIN, F_FMAX, NF
};

__global__ void float_ops(const float *x, const float *y, const float *z, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float a = x[i], b = y[i], c = z[i];
    float *o = out + (size_t)i * NF;
    o[F_DIV] = a / b;
    o[F_SQRT] = sqrtf(fabsf(a));
    o[F_FMA] = fmaf(a, b, c);
    o[F_FDIVIDEF] = __fdividef(a, b);
    o[F_RSQRT] = rsqrtf(fabsf(a));
    o[F_EXP] = expf(c);
    o[F_EXP2] = exp2f(c);
    o[F_LOG] = logf(fabsf(a));
    o[F_LOG2] = log2f(fabsf(a));
    o[F_SIN] = sinf(a);
    o[F_COS] = cosf(a);
    o[F_TANH] = tanhf(c);
    o[F_FMIN] = fminf(a, b);
    o[F_FMAX] = fmaxf(a, b);
}

// ulp of a float at magnitude |r| (subnormal spacing below 2^-126)
static long double ulp_f(long double r)
{
    r = fabsl(r);
    if (r < 0x1p-126L)
        return 0x1p-149L;
    int e;
    frexpl(r, &e);  // r = m * 2^e, m in [0.5, 1)
    return ldexpl(1.0L, e - 24);
}

static long double ulp_d(long double r)
{
    r = fabsl(r);
    if (r < 0x1p-1022L)
        return 0x1p-1074L;
    int e;
    frexpl(r, &e);
    return ldexpl(1.0L, e - 53);
}

static void check_ulps(const char *what, int i, double in1, double in2, double got,
                       long double ref, double max_ulps, bool is_float)
{
    if (std::isnan((double)ref) && std::isnan(got))
        return;
    if (std::isinf((double)ref) || std::isinf(got)) {
        if (got != (double)ref)
            KT_FAIL("%s[%d] (inputs %.9g, %.9g): got %.17g, expected %.17Lg", what, i, in1, in2,
                    got, ref);
        return;
    }
    long double err = fabsl((long double)got - ref) / (is_float ? ulp_f(ref) : ulp_d(ref));
    if (!(err <= max_ulps))
        KT_FAIL("%s[%d] (inputs %.17g, %.17g): got %.17g, expected %.20Lg (%.2Lf ulp, allowed %g)",
                what, i, in1, in2, got, ref, err, max_ulps);
}

static void test_floats(KtRng &rng)
{
    const float specials[] = {1.0f, -1.0f, 0.5f, 2.0f, 3.0f, 1e-40f, -3e-39f, 1e30f, -7e-30f,
                              0.1f, 10.0f, 100.0f, 3.14159265f, -2.71828f, 1e6f, 123456.7f,
                              -0.0f, 0.0f, 88.0f, -87.0f, 65504.0f, FLT_MIN, FLT_MAX, -1e-7f};
    const int ns = (int)(sizeof specials / sizeof specials[0]);
    const int n = 4096;
    std::vector<float> x(n), y(n), z(n);
    for (int i = 0; i < n; i++) {
        if (i < ns * ns) {
            x[i] = specials[i % ns];
            y[i] = specials[i / ns];
            z[i] = specials[(i * 7) % ns] / 16.0f;
        } else {
            // mixed magnitudes: mantissa random, exponent in [-40, 40]
            x[i] = ldexpf(rng.unit() + 0.5f, rng.range(-40, 40)) * (rng.next() & 1 ? -1 : 1);
            y[i] = ldexpf(rng.unit() + 0.5f, rng.range(-40, 40)) * (rng.next() & 1 ? -1 : 1);
            z[i] = (rng.unit() - 0.5f) * 40.0f;
        }
    }
    x[n - 1] = NAN;
    y[n - 2] = NAN;
    float *dx, *dy, *dz, *dout;
    CHECK_CUDA(cudaMalloc(&dx, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dy, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dz, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dout, (size_t)n * NF * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dz, z.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    float_ops<<<n / 64, 64>>>(dx, dy, dz, dout, n);
    KT_SYNC();
    std::vector<float> out((size_t)n * NF);
    CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        const float *o = &out[(size_t)i * NF];
        float a = x[i], b = y[i], c = z[i], fa = std::fabs(a);
        // correctly rounded: double then float is innocuous for / sqrt (53 >= 2*24 + 2)
        if (b != 0.0f)
            kt_check_f32_exact("x / y", i, o[F_DIV], (float)((double)a / (double)b));
        kt_check_f32_exact("sqrtf", i, o[F_SQRT], (float)std::sqrt((double)fa));
        kt_check_f32_exact("fmaf", i, o[F_FMA], std::fma(a, b, c));
        if (std::fabs(b) >= 0x1p-126f && std::fabs(b) <= 0x1p126f) {
            long double q = (long double)a / b;
            if (fabsl(q) >= 0x1p-126L && fabsl(q) < 0x1p127L)  // normal results only
                check_ulps("__fdividef", i, a, b, o[F_FDIVIDEF], q, 2, true);
        }
        if (fa > 0 && !std::isinf(fa))
            check_ulps("rsqrtf", i, a, 0, o[F_RSQRT], 1.0L / sqrtl((long double)fa), 2, true);
        check_ulps("expf", i, c, 0, o[F_EXP], expl((long double)c), 2, true);
        check_ulps("exp2f", i, c, 0, o[F_EXP2], exp2l((long double)c), 2, true);
        if (fa > 0 && !std::isinf(fa)) {
            check_ulps("logf", i, a, 0, o[F_LOG], logl((long double)fa), 1, true);
            check_ulps("log2f", i, a, 0, o[F_LOG2], log2l((long double)fa), 1, true);
        }
        if (fa <= 1e6f) {  // sinf/cosf: 2 ulp documented over the whole range; keep it modest
            check_ulps("sinf", i, a, 0, o[F_SIN], sinl((long double)a), 2, true);
            check_ulps("cosf", i, a, 0, o[F_COS], cosl((long double)a), 2, true);
        }
        check_ulps("tanhf", i, c, 0, o[F_TANH], tanhl((long double)c), 2, true);
        kt_check_f32_exact("fminf", i, o[F_FMIN], std::fmin(a, b) == 0 && a == 0 && b == 0
                                                      ? o[F_FMIN]  // either signed zero
                                                      : std::fmin(a, b));
        kt_check_f32_exact("fmaxf", i, o[F_FMAX], std::fmax(a, b) == 0 && a == 0 && b == 0
                                                      ? o[F_FMAX]
                                                      : std::fmax(a, b));
    }
    CHECK_CUDA(cudaFree(dx));
    CHECK_CUDA(cudaFree(dy));
    CHECK_CUDA(cudaFree(dz));
    CHECK_CUDA(cudaFree(dout));
}

// ---------------------------------------------------------------- double math
enum { D_DIV, D_SQRT, D_FMA, D_EXP, D_LOG, D_SIN, D_COS, ND };

__global__ void double_ops(const double *x, const double *y, const double *z, double *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    double a = x[i], b = y[i], c = z[i];
    double *o = out + (size_t)i * ND;
    o[D_DIV] = a / b;
    o[D_SQRT] = sqrt(fabs(a));
    o[D_FMA] = fma(a, b, c);
    o[D_EXP] = exp(c);
    o[D_LOG] = log(fabs(a));
    o[D_SIN] = sin(a);
    o[D_COS] = cos(a);
}

static void test_doubles(KtRng &rng)
{
    const int n = 2048;
    std::vector<double> x(n), y(n), z(n);
    for (int i = 0; i < n; i++) {
        double m1 = (rng.next() + 0.5) / 4294967296.0 + 0.5, m2 = (rng.next() + 0.5) / 4294967296.0;
        x[i] = ldexp(m1 + m2 * 0x1p-32, rng.range(-300, 300)) * (rng.next() & 1 ? -1 : 1);
        y[i] = ldexp(m2 + 0.5 + m1 * 0x1p-33, rng.range(-300, 300)) * (rng.next() & 1 ? -1 : 1);
        z[i] = (m1 - 1.0) * 1400.0;
        if (i % 4 == 0)
            x[i] = (m2 - 0.5) * 2e5;  // sin/cos arguments of moderate size
    }
    double *dx, *dy, *dz, *dout;
    CHECK_CUDA(cudaMalloc(&dx, n * sizeof(double)));
    CHECK_CUDA(cudaMalloc(&dy, n * sizeof(double)));
    CHECK_CUDA(cudaMalloc(&dz, n * sizeof(double)));
    CHECK_CUDA(cudaMalloc(&dout, (size_t)n * ND * sizeof(double)));
    CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dy, y.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dz, z.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    double_ops<<<n / 64, 64>>>(dx, dy, dz, dout, n);
    KT_SYNC();
    std::vector<double> out((size_t)n * ND);
    CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(double), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        const double *o = &out[(size_t)i * ND];
        double a = x[i], b = y[i], c = z[i];
        kt_check_f64_exact("double /", i, o[D_DIV], a / b);
        kt_check_f64_exact("sqrt", i, o[D_SQRT], std::sqrt(std::fabs(a)));
        kt_check_f64_exact("fma", i, o[D_FMA], std::fma(a, b, c));
        check_ulps("exp", i, c, 0, o[D_EXP], expl((long double)c), 1, false);
        check_ulps("log", i, a, 0, o[D_LOG], logl(fabsl((long double)a)), 1, false);
        if (std::fabs(a) < 1e6) {
            check_ulps("sin", i, a, 0, o[D_SIN], sinl((long double)a), 2, false);
            check_ulps("cos", i, a, 0, o[D_COS], cosl((long double)a), 2, false);
        }
    }
    CHECK_CUDA(cudaFree(dx));
    CHECK_CUDA(cudaFree(dy));
    CHECK_CUDA(cudaFree(dz));
    CHECK_CUDA(cudaFree(dout));
}

// ---------------------------------------------------------------- conversions
enum {
    C_F2I_RN, C_F2I_RZ, C_F2I_RU, C_F2I_RD, C_F2U_RN, C_F2U_RZ, C_F2U_RU, C_F2U_RD, C_F2LL_RN,
    C_F2LL_RZ, C_D2I_RN, C_D2I_RZ, C_I2F_RN, C_I2F_RZ, C_I2F_RU, C_I2F_RD, C_U2F_RN, C_LL2F_RN,
    C_D2F_RN, C_D2F_RZ, C_D2F_RU, C_D2F_RD, C_SAT_S32_RZ, C_SAT_U32_RN, C_SAT_S64_RZ, C_H_RN,
    C_H_RZ, C_H_RD, C_H_RU, C_H_BACK, C_BF_RN, C_BF_RZ, C_BF_RD, C_BF_RU, C_BF_BACK, NC
};
static const char *conv_names[NC] = {
    "__float2int_rn", "__float2int_rz", "__float2int_ru", "__float2int_rd", "__float2uint_rn",
    "__float2uint_rz", "__float2uint_ru", "__float2uint_rd", "__float2ll_rn", "__float2ll_rz",
    "__double2int_rn", "__double2int_rz", "__int2float_rn", "__int2float_rz", "__int2float_ru",
    "__int2float_rd", "__uint2float_rn", "__ll2float_rn", "__double2float_rn",
    "__double2float_rz", "__double2float_ru", "__double2float_rd", "cvt.rzi.s32.f32 (clamps)",
    "cvt.rni.u32.f32 (clamps)", "cvt.rzi.s64.f64 (clamps)", "__float2half_rn bits",
    "__float2half_rz bits", "__float2half_rd bits", "__float2half_ru bits",
    "__half2float(__float2half_rn)", "__float2bfloat16_rn bits", "__float2bfloat16_rz bits",
    "__float2bfloat16_rd bits", "__float2bfloat16_ru bits",
    "__bfloat162float(__float2bfloat16_rn)"};

struct ConvIn {
    float f;
    int i;
    double d;
    long long ll;
};

__device__ unsigned long long fbits(float f) { return __float_as_uint(f); }

__global__ void conversions(const ConvIn *in, unsigned long long *out, int n)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    ConvIn v = in[k];
    float f = v.f;
    double d = v.d;
    unsigned long long *o = out + (size_t)k * NC;
    o[C_F2I_RN] = (unsigned)__float2int_rn(f);
    o[C_F2I_RZ] = (unsigned)__float2int_rz(f);
    o[C_F2I_RU] = (unsigned)__float2int_ru(f);
    o[C_F2I_RD] = (unsigned)__float2int_rd(f);
    o[C_F2U_RN] = __float2uint_rn(f);
    o[C_F2U_RZ] = __float2uint_rz(f);
    o[C_F2U_RU] = __float2uint_ru(f);
    o[C_F2U_RD] = __float2uint_rd(f);
    o[C_F2LL_RN] = (unsigned long long)__float2ll_rn(f);
    o[C_F2LL_RZ] = (unsigned long long)__float2ll_rz(f);
    o[C_D2I_RN] = (unsigned)__double2int_rn(d);
    o[C_D2I_RZ] = (unsigned)__double2int_rz(d);
    o[C_I2F_RN] = fbits(__int2float_rn(v.i));
    o[C_I2F_RZ] = fbits(__int2float_rz(v.i));
    o[C_I2F_RU] = fbits(__int2float_ru(v.i));
    o[C_I2F_RD] = fbits(__int2float_rd(v.i));
    o[C_U2F_RN] = fbits(__uint2float_rn((unsigned)v.i));
    o[C_LL2F_RN] = fbits(__ll2float_rn(v.ll));
    o[C_D2F_RN] = fbits(__double2float_rn(d));
    o[C_D2F_RZ] = fbits(__double2float_rz(d));
    o[C_D2F_RU] = fbits(__double2float_ru(d));
    o[C_D2F_RD] = fbits(__double2float_rd(d));
    int s32;
    unsigned u32;
    long long s64;
    asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(s32) : "f"(f));
    asm("cvt.rni.u32.f32 %0, %1;" : "=r"(u32) : "f"(f));
    asm("cvt.rzi.s64.f64 %0, %1;" : "=l"(s64) : "d"(d));
    o[C_SAT_S32_RZ] = (unsigned)s32;
    o[C_SAT_U32_RN] = u32;
    o[C_SAT_S64_RZ] = (unsigned long long)s64;
    __half h = __float2half_rn(f);
    o[C_H_RN] = __half_as_ushort(h);
    o[C_H_RZ] = __half_as_ushort(__float2half_rz(f));
    o[C_H_RD] = __half_as_ushort(__float2half_rd(f));
    o[C_H_RU] = __half_as_ushort(__float2half_ru(f));
    o[C_H_BACK] = fbits(__half2float(h));
    __nv_bfloat16 bf = __float2bfloat16_rn(f);
    o[C_BF_RN] = __bfloat16_as_ushort(bf);
    o[C_BF_RZ] = __bfloat16_as_ushort(__float2bfloat16_rz(f));
    o[C_BF_RD] = __bfloat16_as_ushort(__float2bfloat16_rd(f));
    o[C_BF_RU] = __bfloat16_as_ushort(__float2bfloat16_ru(f));
    o[C_BF_BACK] = fbits(__bfloat162float(bf));
}

static float float_of_bits(unsigned long long b)
{
    uint32_t u = (uint32_t)b;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static unsigned long long host_fbits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

// Round an exactly-known double to float in mode m: 0 rn, 1 rz, 2 ru, 3 rd.
static float round_to_float(long double exact, int m)
{
    float f = (float)exact;  // nearest (exact fits a long double: int64 or double inputs)
    if (m == 1 && fabsl((long double)f) > fabsl(exact))
        f = nextafterf(f, 0.0f);
    if (m == 2 && (long double)f < exact)
        f = nextafterf(f, INFINITY);
    if (m == 3 && (long double)f > exact)
        f = nextafterf(f, -INFINITY);
    return f;
}

template <typename T>
static unsigned short raw16(T h)
{
    unsigned short r;
    memcpy(&r, &h, 2);
    return r;
}

static bool half_nan(unsigned long long b) { return (b & 0x7c00) == 0x7c00 && (b & 0x3ff); }
static bool bf16_nan(unsigned long long b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }

static void test_conversions(KtRng &rng)
{
    const float fspecial[] = {0.0f, -0.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 3.5f, -3.5f,
                              1.4999999f, -1.5000001f, 0.49999997f, 1e-40f, -1e-40f, 123456.789f,
                              -98765.4321f, 2147483520.0f, -2147483648.0f, 3.0e9f, 4294967040.0f,
                              65504.0f, 65519.99f, 65520.0f, 1e-8f, 6.1035156e-5f, 6.0e-5f,
                              5.9604645e-8f, 2.9802322e-8f, 0.1f, 0.33333334f, -0.33333334f,
                              3.4e38f, -3.4e38f, 1e10f, -1e10f, 9.3e18f, -9.3e18f, 1.0f / 1024,
                              1.00048828125f, 1.000732421875f, 1.0009765625f, 1.00390625f,
                              1.005859375f, INFINITY, -INFINITY, NAN};
    const int nfs = (int)(sizeof fspecial / sizeof fspecial[0]);
    const int ispecial[] = {0, 1, -1, 16777216, 16777217, -16777217, 16777219, 33554435,
                            INT_MAX, INT_MIN, 2147483520, -2147483585, 123456789};
    const int nis = (int)(sizeof ispecial / sizeof ispecial[0]);
    const double dspecial[] = {0.5, -0.5, 2.5, -3.5, 1e39, -1e39, 1e-46, -1e-46, 3.4028235e38,
                               1.0000000596046448, 1.0000000298023224, -1.0000000298023224,
                               1e-40, 0.1, 2147483647.4, -2147483648.9, 1e20, -1e20, 9.3e18,
                               -9.3e18, INFINITY, -INFINITY};
    const int nds = (int)(sizeof dspecial / sizeof dspecial[0]);
    const int n = 2048;
    std::vector<ConvIn> in(n);
    for (int k = 0; k < n; k++) {
        ConvIn &v = in[k];
        if (k < nfs)
            v.f = fspecial[k];
        else if (k % 3 == 0)  // integers and halves around the rounding points
            v.f = (float)rng.range(-200000, 200000) * 0.25f;
        else
            v.f = ldexpf(rng.unit() + 0.5f, rng.range(-30, 34)) * (rng.next() & 1 ? -1 : 1);
        v.i = k < nis ? ispecial[k] : (int)(rng.next() ^ (rng.next() << 16));
        if (k < nds)
            v.d = dspecial[k];
        else
            v.d = ldexp((rng.next() + 0.5) / 4294967296.0 + 0.5 + rng.next() * 0x1p-60,
                        rng.range(-160, 140)) * (rng.next() & 1 ? -1 : 1);
        v.ll = ((long long)(int)rng.next() << rng.range(0, 32)) ^ rng.next();
    }
    ConvIn *din;
    unsigned long long *dout;
    CHECK_CUDA(cudaMalloc(&din, n * sizeof(ConvIn)));
    CHECK_CUDA(cudaMalloc(&dout, (size_t)n * NC * sizeof(unsigned long long)));
    CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(ConvIn), cudaMemcpyHostToDevice));
    conversions<<<n / 64, 64>>>(din, dout, n);
    KT_SYNC();
    std::vector<unsigned long long> out((size_t)n * NC);
    CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * sizeof(unsigned long long),
                          cudaMemcpyDeviceToHost));
    for (int k = 0; k < n; k++) {
        const ConvIn &v = in[k];
        const unsigned long long *o = &out[(size_t)k * NC];
        float f = v.f;
        double d = v.d;
        bool fnan = std::isnan(f);
        auto check = [&](int what, unsigned long long e) {
            if (o[what] != e)
                KT_FAIL("%s[%d] (f=%.9g i=%d d=%.17g ll=%lld): got 0x%llx, expected 0x%llx",
                        conv_names[what], k, (double)f, v.i, d, v.ll, o[what], e);
        };
        double r[4] = {std::nearbyint((double)f), std::trunc((double)f), std::ceil((double)f),
                       std::floor((double)f)};
        for (int m = 0; m < 4; m++) {
            if (!fnan && r[m] >= -2147483648.0 && r[m] <= 2147483647.0)
                check(C_F2I_RN + m, (unsigned)(int)r[m]);
            if (!fnan && r[m] >= 0.0 && r[m] <= 4294967295.0)
                check(C_F2U_RN + m, (unsigned)r[m]);
        }
        for (int m = 0; m < 2; m++)
            if (!fnan && r[m] >= -0x1p63 && r[m] < 0x1p63)
                check(C_F2LL_RN + m, (unsigned long long)(long long)r[m]);
        double dr[2] = {std::nearbyint(d), std::trunc(d)};
        for (int m = 0; m < 2; m++)
            if (dr[m] >= -2147483648.0 && dr[m] <= 2147483647.0)
                check(C_D2I_RN + m, (unsigned)(int)dr[m]);
        for (int m = 0; m < 4; m++)
            check(C_I2F_RN + m, host_fbits(round_to_float((long double)v.i, m)));
        check(C_U2F_RN, host_fbits(round_to_float((long double)(unsigned)v.i, 0)));
        check(C_LL2F_RN, host_fbits(round_to_float((long double)v.ll, 0)));
        if (!std::isnan(d))
            for (int m = 0; m < 4; m++)
                check(C_D2F_RN + m, host_fbits(round_to_float((long double)d, m)));
        // PTX cvt float-to-integer conversions clamp to the destination range
        if (!fnan) {
            double t = std::trunc((double)f), nr = std::nearbyint((double)f);
            check(C_SAT_S32_RZ, (unsigned)(int)(t < -2147483648.0 ? -2147483648.0
                                                                 : t > 2147483647.0 ? 2147483647.0 : t));
            check(C_SAT_U32_RN, (unsigned)(nr < 0 ? 0.0 : nr > 4294967295.0 ? 4294967295.0 : nr));
        }
        if (!std::isnan(d)) {
            long double t = truncl((long double)d);
            long long e = t < -0x1p63L ? LLONG_MIN : t >= 0x1p63L ? LLONG_MAX : (long long)t;
            check(C_SAT_S64_RZ, (unsigned long long)e);
        }
        // half and bfloat16: the headers' host implementations are the reference
        unsigned long long eh[4] = {raw16(__float2half_rn(f)), raw16(__float2half_rz(f)),
                                    raw16(__float2half_rd(f)), raw16(__float2half_ru(f))};
        unsigned long long eb[4] = {raw16(__float2bfloat16_rn(f)), raw16(__float2bfloat16_rz(f)),
                                    raw16(__float2bfloat16_rd(f)),
                                    raw16(__float2bfloat16_ru(f))};
        for (int m = 0; m < 4; m++) {
            if (!(half_nan(o[C_H_RN + m]) && half_nan(eh[m])))
                check(C_H_RN + m, eh[m]);
            if (!(bf16_nan(o[C_BF_RN + m]) && bf16_nan(eb[m])))
                check(C_BF_RN + m, eb[m]);
        }
        if (fnan) {
            if (!std::isnan(float_of_bits(o[C_H_BACK])) ||
                !std::isnan(float_of_bits(o[C_BF_BACK])))
                KT_FAIL("half/bfloat16 round trip of NaN[%d] is not NaN", k);
        } else {
            check(C_H_BACK, host_fbits(__half2float(__float2half_rn(f))));
            check(C_BF_BACK, host_fbits(__bfloat162float(__float2bfloat16_rn(f))));
        }
    }
    CHECK_CUDA(cudaFree(din));
    CHECK_CUDA(cudaFree(dout));
}

// Known encodings, independent of any implementation.
static void check_known_encodings()
{
    struct {
        float f;
        unsigned short h_rn, bf_rn;
    } known[] = {{1.0f, 0x3c00, 0x3f80},      {-2.0f, 0xc000, 0xc000},   {0.1f, 0x2e66, 0x3dcd},
                 {65504.0f, 0x7bff, 0x4780},  {65520.0f, 0x7c00, 0x4780}, {1e-8f, 0x0000, 0x322c},
                 {5.9604645e-8f, 0x0001, 0x3380}, {0.33333334f, 0x3555, 0x3eab},
                 {1e30f, 0x7c00, 0x714a}};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        kt_check_u64("host __float2half_rn known encoding", k, raw16(__float2half_rn(known[k].f)),
                     known[k].h_rn);
        kt_check_u64("host __float2bfloat16_rn known encoding", k,
                     raw16(__float2bfloat16_rn(known[k].f)), known[k].bf_rn);
    }
}

// ---------------------------------------------------------------- half arithmetic
enum { H_ADD, H_SUB, H_MUL, H_FMA, H_DIV, H_ADD2_LO, H_ADD2_HI, H_MUL2_LO, H_MUL2_HI, H_FMA2_LO,
       H_FMA2_HI, H_LT, H_MAX, NH };
static const char *half_names[NH] = {"__hadd", "__hsub", "__hmul", "__hfma", "__hdiv",
                                     "__hadd2 .x", "__hadd2 .y", "__hmul2 .x", "__hmul2 .y",
                                     "__hfma2 .x", "__hfma2 .y", "__hlt", "__hmax"};

__global__ void half_ops(const unsigned short *a, const unsigned short *b,
                         const unsigned short *c, unsigned short *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    __half x = __ushort_as_half(a[i]), y = __ushort_as_half(b[i]), z = __ushort_as_half(c[i]);
    unsigned short *o = out + (size_t)i * NH;
    o[H_ADD] = __half_as_ushort(__hadd(x, y));
    o[H_SUB] = __half_as_ushort(__hsub(x, y));
    o[H_MUL] = __half_as_ushort(__hmul(x, y));
    o[H_FMA] = __half_as_ushort(__hfma(x, y, z));
    o[H_DIV] = __half_as_ushort(__hdiv(x, y));
    __half2 p = __halves2half2(x, z), q = __halves2half2(y, x), r = __halves2half2(z, y);
    __half2 s = __hadd2(p, q), m = __hmul2(p, q), f = __hfma2(p, q, r);
    o[H_ADD2_LO] = __half_as_ushort(__low2half(s));
    o[H_ADD2_HI] = __half_as_ushort(__high2half(s));
    o[H_MUL2_LO] = __half_as_ushort(__low2half(m));
    o[H_MUL2_HI] = __half_as_ushort(__high2half(m));
    o[H_FMA2_LO] = __half_as_ushort(__low2half(f));
    o[H_FMA2_HI] = __half_as_ushort(__high2half(f));
    o[H_LT] = __hlt(x, y);
    o[H_MAX] = __half_as_ushort(__hmax(x, y));
}

static double half_value(unsigned short bits)
{
    __half h;
    memcpy(&h, &bits, 2);
    return (double)__half2float(h);
}

// exact double result -> half, one rounding (round to nearest even)
static unsigned short to_half_bits(double v) { return raw16(__double2half(v)); }

static void test_half(KtRng &rng)
{
    // magnitudes in [2^-6, 2^6]: every sum, product and fma is exact in double
    const int n = 3000;
    std::vector<unsigned short> a(n), b(n), c(n);
    auto gen = [&]() {
        float v = ldexpf(1.0f + rng.range(0, 1023) / 1024.0f, rng.range(-6, 5));
        return to_half_bits(rng.next() & 1 ? -v : v);
    };
    for (int i = 0; i < n; i++) {
        a[i] = gen();
        b[i] = gen();
        c[i] = gen();
    }
    unsigned short *da, *db, *dc, *dout;
    CHECK_CUDA(cudaMalloc(&da, n * 2));
    CHECK_CUDA(cudaMalloc(&db, n * 2));
    CHECK_CUDA(cudaMalloc(&dc, n * 2));
    CHECK_CUDA(cudaMalloc(&dout, (size_t)n * NH * 2));
    CHECK_CUDA(cudaMemcpy(da, a.data(), n * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(db, b.data(), n * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dc, c.data(), n * 2, cudaMemcpyHostToDevice));
    half_ops<<<(n + 127) / 128, 128>>>(da, db, dc, dout, n);
    KT_SYNC();
    std::vector<unsigned short> out((size_t)n * NH);
    CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        double x = half_value(a[i]), y = half_value(b[i]), z = half_value(c[i]);
        unsigned e[NH];
        e[H_ADD] = to_half_bits(x + y);
        e[H_SUB] = to_half_bits(x - y);
        e[H_MUL] = to_half_bits(x * y);
        e[H_FMA] = to_half_bits(x * y + z);
        e[H_DIV] = to_half_bits(x / y);  // double rounding is innocuous: 53 >= 2 * 11 + 2
        e[H_ADD2_LO] = to_half_bits(x + y);
        e[H_ADD2_HI] = to_half_bits(z + x);
        e[H_MUL2_LO] = to_half_bits(x * y);
        e[H_MUL2_HI] = to_half_bits(z * x);
        e[H_FMA2_LO] = to_half_bits(x * y + z);
        e[H_FMA2_HI] = to_half_bits(z * x + y);
        e[H_LT] = x < y;
        e[H_MAX] = x > y ? a[i] : b[i];
        for (int k = 0; k < NH; k++)
            if (out[(size_t)i * NH + k] != e[k])
                KT_FAIL("%s[%d] (x=%.9g y=%.9g z=%.9g): got 0x%04x, expected 0x%04x",
                        half_names[k], i, x, y, z, out[(size_t)i * NH + k], e[k]);
    }
    CHECK_CUDA(cudaFree(da));
    CHECK_CUDA(cudaFree(db));
    CHECK_CUDA(cudaFree(dc));
    CHECK_CUDA(cudaFree(dout));
}

int main()
{
    kt_start("misc_ops");
    KtRng rng(12);
    check_known_encodings();  // the host reference itself, before it judges the device
    KtRng rng_simd = rng;  // the same operands for both integer kernels
    test_ints(rng, false);
    test_floats(rng);
    test_doubles(rng);
    test_conversions(rng);
    test_half(rng);
    test_ints(rng_simd, true);
    kt_pass();
    return 0;
}
