/* Conversions and floating-point operations with PTX semantics.
 *
 * Rounding modes other than round-to-nearest use fesetround around one operation (this file
 * is compiled with -frounding-math so the compiler neither folds nor moves it across the mode
 * change). Half precision (f16, bf16) is converted bit-exactly with every rounding mode;
 * half arithmetic is done in double precision and rounded once to the half format.
 * Float-to-integer conversions saturate to the destination range and give 0 for NaN, as the
 * GPU does; single-precision NaN results are the canonical 0x7fffffff. */
#include <fenv.h>
#include <math.h>
#include <string.h>

#include "exec.h"

float cr__ftz32(float f)
{
    return fpclassify(f) == FP_SUBNORMAL ? copysignf(0.0f, f) : f;
}

static int fe_mode(int rnd)
{
    switch (rnd) {
    case CR__RND_RZ:
        return FE_TOWARDZERO;
    case CR__RND_RM:
        return FE_DOWNWARD;
    case CR__RND_RP:
        return FE_UPWARD;
    default:
        return FE_TONEAREST;
    }
}

float cr__f32_op(int op, float a, float b, float c, int rnd)
{
    int old = fegetround(), mode = fe_mode(rnd);
    if (mode != old)
        fesetround(mode);
    volatile float x = a, y = b, z = c, r;
    switch (op) {
    case CR__FOP_ADD:
        r = x + y;
        break;
    case CR__FOP_SUB:
        r = x - y;
        break;
    case CR__FOP_MUL:
        r = x * y;
        break;
    case CR__FOP_FMA:
        r = fmaf(x, y, z);
        break;
    case CR__FOP_DIV:
        r = x / y;
        break;
    case CR__FOP_SQRT:
        r = sqrtf(x);
        break;
    case CR__FOP_RCP:
        r = 1.0f / x;
        break;
    default:
        r = x;
        break;
    }
    float out = r;
    if (mode != old)
        fesetround(old);
    return out;
}

double cr__f64_op(int op, double a, double b, double c, int rnd)
{
    int old = fegetround(), mode = fe_mode(rnd);
    if (mode != old)
        fesetround(mode);
    volatile double x = a, y = b, z = c, r;
    switch (op) {
    case CR__FOP_ADD:
        r = x + y;
        break;
    case CR__FOP_SUB:
        r = x - y;
        break;
    case CR__FOP_MUL:
        r = x * y;
        break;
    case CR__FOP_FMA:
        r = fma(x, y, z);
        break;
    case CR__FOP_DIV:
        r = x / y;
        break;
    case CR__FOP_SQRT:
        r = sqrt(x);
        break;
    case CR__FOP_RCP:
        r = 1.0 / x;
        break;
    default:
        r = x;
        break;
    }
    double out = r;
    if (mode != old)
        fesetround(old);
    return out;
}

/* min/max: a NaN operand gives the other one; -0 is below +0. */
float cr__fmin32(float a, float b)
{
    if (isnan(a))
        return isnan(b) ? NAN : b;
    if (isnan(b))
        return a;
    if (a == 0 && b == 0)
        return signbit(a) ? a : b;
    return a < b ? a : b;
}

float cr__fmax32(float a, float b)
{
    if (isnan(a))
        return isnan(b) ? NAN : b;
    if (isnan(b))
        return a;
    if (a == 0 && b == 0)
        return signbit(a) ? b : a;
    return a > b ? a : b;
}

double cr__fmin64(double a, double b)
{
    if (isnan(a))
        return isnan(b) ? NAN : b;
    if (isnan(b))
        return a;
    if (a == 0 && b == 0)
        return signbit(a) ? a : b;
    return a < b ? a : b;
}

double cr__fmax64(double a, double b)
{
    if (isnan(a))
        return isnan(b) ? NAN : b;
    if (isnan(b))
        return a;
    if (a == 0 && b == 0)
        return signbit(a) ? b : a;
    return a > b ? a : b;
}

/* ---- half precision ---- */

/* Rounds the non-negative exact value q to an integer with mode rnd; neg is the sign of the
 * number q is the magnitude of. */
static double round_mag(double q, int rnd, int neg)
{
    double fl = floor(q), diff = q - fl;
    switch (rnd) {
    case CR__RND_RZ:
        return fl;
    case CR__RND_RM:
        return neg && diff > 0 ? fl + 1 : fl;
    case CR__RND_RP:
        return !neg && diff > 0 ? fl + 1 : fl;
    case CR__RND_RNA:
        return diff >= 0.5 ? fl + 1 : fl;
    default:
        if (diff > 0.5)
            return fl + 1;
        if (diff < 0.5)
            return fl;
        return fmod(fl, 2.0) == 0 ? fl : fl + 1;
    }
}

/* A binary format with `mant` stored mantissa bits and exponent bias `bias` (exponent field
 * `ebits` wide), from a double, with rounding mode rnd. */
static uint32_t to_small_float(double d, int rnd, int mant, int ebits, int bias, uint32_t nan)
{
    uint32_t sign = signbit(d) ? 1u << (mant + ebits) : 0;
    uint32_t inf = ((1u << ebits) - 1) << mant;
    if (isnan(d))
        return nan;
    double a = fabs(d);
    if (isinf(a))
        return sign | inf;
    if (a == 0)
        return sign;
    int e;
    frexp(a, &e);
    int E = e - 1; /* a in [2^E, 2^(E+1)) */
    int emin = 1 - bias;
    if (E < emin)
        E = emin; /* subnormal: fixed scale */
    double q = ldexp(a, mant - E);
    q = round_mag(q, rnd, sign != 0);
    if (q >= ldexp(1.0, mant + 1)) {
        q /= 2;
        E++;
    }
    int emax = (1 << ebits) - 2 - bias;
    if (E > emax) {
        int to_inf = rnd == CR__RND_RN || rnd == CR__RND_RNA || (rnd == CR__RND_RP && !sign) ||
                     (rnd == CR__RND_RM && sign);
        return sign | (to_inf ? inf : inf - 1);
    }
    uint32_t qi = (uint32_t)q;
    if (qi < (1u << mant))
        return sign | qi; /* subnormal (or zero) */
    return sign | (uint32_t)(E + bias) << mant | (qi - (1u << mant));
}

static double from_small_float(uint32_t h, int mant, int ebits, int bias)
{
    uint32_t sign = h >> (mant + ebits) & 1;
    uint32_t e = h >> mant & ((1u << ebits) - 1), f = h & ((1u << mant) - 1);
    double v;
    if (e == (1u << ebits) - 1)
        v = f ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)f, 1 - bias - mant);
    else
        v = ldexp((double)(f | 1u << mant), (int)e - bias - mant);
    return sign ? -v : v;
}

uint16_t cr__f64_to_f16(double d, int rnd)
{
    return (uint16_t)to_small_float(d, rnd, 10, 5, 15, 0x7fff);
}

uint16_t cr__f32_to_f16(float f, int rnd)
{
    return cr__f64_to_f16(f, rnd);
}

float cr__f16_to_f32(uint16_t h)
{
    return (float)from_small_float(h, 10, 5, 15);
}

uint16_t cr__f64_to_bf16(double d, int rnd)
{
    return (uint16_t)to_small_float(d, rnd, 7, 8, 127, 0x7fff);
}

uint16_t cr__f32_to_bf16(float f, int rnd)
{
    return cr__f64_to_bf16(f, rnd);
}

float cr__bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double half_value(uint16_t h, int bf)
{
    return bf ? cr__bf16_to_f32(h) : cr__f16_to_f32(h);
}

static uint16_t half_round(double d, int bf, int rnd)
{
    return bf ? cr__f64_to_bf16(d, rnd) : cr__f64_to_f16(d, rnd);
}

static double half_ftz(double d, int bf)
{
    double min_normal = bf ? ldexp(1.0, -126) : ldexp(1.0, -14);
    return fabs(d) < min_normal ? copysign(0.0, d) : d;
}

int cr__half_cmp(int cmp, int bf, uint16_t a, uint16_t b)
{
    double x = half_value(a, bf), y = half_value(b, bf);
    int un = isnan(x) || isnan(y);
    switch (cmp) {
    case CR__CMP_EQ:
        return !un && x == y;
    case CR__CMP_NE:
        return !un && x != y;
    case CR__CMP_LT:
        return !un && x < y;
    case CR__CMP_LE:
        return !un && x <= y;
    case CR__CMP_GT:
        return !un && x > y;
    case CR__CMP_GE:
        return !un && x >= y;
    case CR__CMP_EQU:
        return un || x == y;
    case CR__CMP_NEU:
        return un || x != y;
    case CR__CMP_LTU:
        return un || x < y;
    case CR__CMP_LEU:
        return un || x <= y;
    case CR__CMP_GTU:
        return un || x > y;
    case CR__CMP_GEU:
        return un || x >= y;
    case CR__CMP_NUM:
        return !un;
    default:
        return un;
    }
}

uint64_t cr__half_op(int op, int bf, int x2, uint64_t a, uint64_t b, uint64_t c, int flags)
{
    int rnd = flags & CR__FF_RND_MASK, ftz = flags & CR__FF_FTZ;
    uint64_t out = 0;
    uint16_t sign = 0x8000, nan = bf ? 0x7fff : 0x7fff;
    for (int i = 0; i < (x2 ? 2 : 1); i++) {
        uint16_t ha = (uint16_t)(a >> (16 * i)), hb = (uint16_t)(b >> (16 * i)),
                 hc = (uint16_t)(c >> (16 * i)), r;
        double x = half_value(ha, bf), y = half_value(hb, bf), z = half_value(hc, bf), v;
        if (ftz) {
            x = half_ftz(x, bf);
            y = half_ftz(y, bf);
            z = half_ftz(z, bf);
        }
        switch (op) {
        case CR__FOP_NEG:
            r = ha ^ sign;
            goto store;
        case CR__FOP_ABS:
            r = ha & (uint16_t)~sign;
            goto store;
        case CR__FOP_ADD:
            v = x + y;
            break;
        case CR__FOP_SUB:
            v = x - y;
            break;
        case CR__FOP_MUL:
            v = x * y;
            break;
        case CR__FOP_FMA:
            v = fma(x, y, z);
            break;
        case CR__FOP_MIN:
        case CR__FOP_MAX:
            if ((flags & CR__FF_NAN) && (isnan(x) || isnan(y))) {
                r = nan;
                goto store;
            }
            v = op == CR__FOP_MIN ? cr__fmin64(x, y) : cr__fmax64(x, y);
            break;
        case CR__FOP_EX2:
            v = exp2(x);
            break;
        case CR__FOP_TANH:
            v = tanh(x);
            break;
        case CR__FOP_SQRT:
            v = sqrt(x);
            break;
        case CR__FOP_RSQRT:
            v = 1.0 / sqrt(x);
            break;
        case CR__FOP_RCP:
            v = 1.0 / x;
            break;
        case CR__FOP_LG2:
            v = log2(x);
            break;
        case CR__FOP_SIN:
            v = sin(x);
            break;
        case CR__FOP_COS:
            v = cos(x);
            break;
        case CR__FOP_DIV:
            v = x / y;
            break;
        default:
            v = x;
            break;
        }
        if (flags & CR__FF_SAT)
            v = isnan(v) ? 0 : v < 0 ? 0 : v > 1 ? 1 : v;
        if ((flags & CR__FF_RELU) && !isnan(v) && v < 0)
            v = 0;
        if (ftz)
            v = half_ftz(v, bf);
        r = isnan(v) ? nan : half_round(v, bf, rnd);
        if (ftz)
            r = (uint16_t)half_round(half_ftz(half_value(r, bf), bf), bf, CR__RND_RZ);
    store:
        out |= (uint64_t)r << (16 * i);
    }
    return out;
}

/* ---- conversions ---- */

static double int_value(uint64_t v, cr__type_t st)
{
    unsigned bits = cr__type_size(st) * 8;
    if (cr__type_signed(st)) {
        uint64_t m = 1ull << (bits - 1);
        int64_t s = (int64_t)(((bits < 64 ? v & ((m << 1) - 1) : v) ^ m) - m);
        return (double)s;
    }
    if (bits < 64)
        v &= (1ull << bits) - 1;
    return (double)v;
}

/* An integer source converted to float or double with rounding mode rnd, rounded once. */
static double int_to_float(uint64_t v, cr__type_t st, int to_f32, int rnd)
{
    unsigned bits = cr__type_size(st) * 8;
    int sgn = cr__type_signed(st);
    int64_t s = 0;
    if (sgn) {
        uint64_t m = 1ull << (bits - 1);
        s = (int64_t)(((bits < 64 ? v & ((m << 1) - 1) : v) ^ m) - m);
    } else if (bits < 64) {
        v &= (1ull << bits) - 1;
    }
    int old = fegetround(), mode = fe_mode(rnd);
    if (mode != old)
        fesetround(mode);
    double r;
    if (to_f32) {
        volatile float f = sgn ? (float)s : (float)v;
        r = f;
    } else {
        volatile double d = sgn ? (double)s : (double)v;
        r = d;
    }
    if (mode != old)
        fesetround(old);
    return r;
}

static double round_integral(double d, int rnd)
{
    switch (rnd) {
    case CR__RND_RZ:
        return trunc(d);
    case CR__RND_RM:
        return floor(d);
    case CR__RND_RP:
        return ceil(d);
    case CR__RND_RNA:
        return round(d);
    default: {
        double fl = floor(d), diff = d - fl;
        if (diff > 0.5)
            return fl + 1;
        if (diff < 0.5)
            return fl;
        return fmod(fl, 2.0) == 0 ? fl : fl + 1;
    }
    }
}

/* Float to integer: rounded, then clamped to the destination range; NaN gives 0. */
static uint64_t float_to_int(double d, cr__type_t dt, int rnd)
{
    unsigned bits = cr__type_size(dt) * 8;
    uint64_t mask = bits < 64 ? (1ull << bits) - 1 : ~0ull;
    if (isnan(d))
        return 0;
    d = round_integral(d, rnd);
    if (cr__type_signed(dt)) {
        double hi = ldexp(1.0, (int)bits - 1);
        int64_t r;
        if (d >= hi)
            r = bits == 64 ? INT64_MAX : (int64_t)hi - 1;
        else if (d < -hi)
            r = bits == 64 ? INT64_MIN : -(int64_t)hi;
        else
            r = (int64_t)d;
        return (uint64_t)r & mask;
    }
    if (d <= 0)
        return 0;
    if (d >= ldexp(1.0, (int)bits))
        return mask;
    return (uint64_t)d;
}

static uint64_t bits_of_float(double d, cr__type_t dt, int rnd)
{
    switch (dt) {
    case CR__T_F64: {
        uint64_t u;
        memcpy(&u, &d, 8);
        return u;
    }
    case CR__T_F32: {
        float f = (float)d; /* exact when d came from f32 or smaller */
        return B32(f);
    }
    case CR__T_F16:
        return cr__f64_to_f16(d, rnd);
    case CR__T_BF16:
        return cr__f64_to_bf16(d, rnd);
    default:
        return 0;
    }
}

/* tf32: f32 with 10 mantissa bits, rounded to nearest, ties away from zero. */
static uint64_t to_tf32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return (u & 0x007fffffu) ? 0x7fffffffu : u;
    u += 0x1000u;
    return u & ~0x1fffu;
}

uint64_t cr__cvt(uint64_t v, cr__type_t dt, cr__type_t st, int rnd, int integer_round, int sat,
                 int ftz)
{
    int src_float = cr__type_float(st), dst_float = cr__type_float(dt);
    unsigned dbits = cr__type_size(dt) * 8;
    if (!src_float && !dst_float) { /* integer to integer with saturation */
        int sgn = cr__type_signed(st);
        unsigned sbits = cr__type_size(st) * 8;
        __int128 x;
        if (sgn) {
            uint64_t m = 1ull << (sbits - 1);
            x = (int64_t)(((sbits < 64 ? v & ((m << 1) - 1) : v) ^ m) - m);
        } else {
            x = sbits < 64 ? v & ((1ull << sbits) - 1) : v;
        }
        if (sat) {
            __int128 lo = cr__type_signed(dt) ? -((__int128)1 << (dbits - 1)) : 0;
            __int128 hi =
                cr__type_signed(dt) ? ((__int128)1 << (dbits - 1)) - 1 : ((__int128)1 << dbits) - 1;
            if (x < lo)
                x = lo;
            if (x > hi)
                x = hi;
        }
        uint64_t r = (uint64_t)x;
        return dbits < 64 ? r & ((1ull << dbits) - 1) : r;
    }
    double d;
    if (!src_float) {
        if (dt == CR__T_F32 || dt == CR__T_F64 || dt == CR__T_TF32) {
            d = int_to_float(v, st, dt != CR__T_F64, rnd);
        } else {
            d = int_value(v, st); /* exact below 2^53 */
        }
    } else {
        switch (st) {
        case CR__T_F16:
            d = cr__f16_to_f32((uint16_t)v);
            break;
        case CR__T_BF16:
            d = cr__bf16_to_f32((uint16_t)v);
            break;
        case CR__T_F32: {
            float f = F32(v);
            if (ftz)
                f = cr__ftz32(f);
            d = f;
            break;
        }
        default:
            d = F64(v);
            break;
        }
    }
    if (!dst_float)
        return float_to_int(d, dt, integer_round ? rnd : CR__RND_RZ);
    if (integer_round)
        d = round_integral(d, rnd);
    if (sat)
        d = isnan(d) ? 0 : d < 0 ? 0 : d > 1 ? 1 : d;
    if (dt == CR__T_F32 && st == CR__T_F64 && !integer_round) {
        int old = fegetround(), mode = fe_mode(rnd);
        if (mode != old)
            fesetround(mode);
        volatile float f = (float)d;
        float r = f;
        if (mode != old)
            fesetround(old);
        if (ftz)
            r = cr__ftz32(r);
        return B32(r);
    }
    if (dt == CR__T_TF32)
        return to_tf32((float)d);
    uint64_t r = bits_of_float(d, dt, rnd);
    if (dt == CR__T_F32 && ftz)
        r = B32(cr__ftz32(F32(r)));
    return r;
}

/* ---- the generic single/double precision instructions ---- */

uint64_t cr__exec_f32x(const cr__insn_t *in, uint64_t a, uint64_t b, uint64_t c)
{
    unsigned f = in->sub2;
    int rnd = f & CR__FF_RND_MASK, ftz = f & CR__FF_FTZ;
    float x = F32(a), y = F32(b), z = F32(c), r;
    if (ftz) {
        x = cr__ftz32(x);
        y = cr__ftz32(y);
        z = cr__ftz32(z);
    }
    switch (in->sub) {
    case CR__FOP_MIN:
    case CR__FOP_MAX:
        if ((f & CR__FF_NAN) && (isnan(x) || isnan(y)))
            r = NAN;
        else
            r = in->sub == CR__FOP_MIN ? cr__fmin32(x, y) : cr__fmax32(x, y);
        break;
    case CR__FOP_NEG:
        r = -x;
        break;
    case CR__FOP_ABS:
        r = fabsf(x);
        break;
    case CR__FOP_RSQRT:
        r = 1.0f / sqrtf(x);
        break;
    case CR__FOP_EX2:
        r = exp2f(x);
        break;
    case CR__FOP_LG2:
        r = log2f(x);
        break;
    case CR__FOP_SIN:
        r = sinf(x);
        break;
    case CR__FOP_COS:
        r = cosf(x);
        break;
    case CR__FOP_TANH:
        r = tanhf(x);
        break;
    default:
        r = cr__f32_op(in->sub, x, y, z, rnd);
        break;
    }
    if (ftz)
        r = cr__ftz32(r);
    if (f & CR__FF_SAT)
        r = isnan(r) ? 0.0f : r < 0 ? 0.0f : r > 1 ? 1.0f : r;
    if ((f & CR__FF_RELU) && !isnan(r) && r < 0)
        r = 0.0f;
    return B32(r);
}

uint64_t cr__exec_f64x(const cr__insn_t *in, uint64_t a, uint64_t b, uint64_t c)
{
    unsigned f = in->sub2;
    int rnd = f & CR__FF_RND_MASK;
    double x = F64(a), y = F64(b), z = F64(c), r;
    if (f & CR__FF_FTZ) { /* only .approx.ftz forms: subnormal inputs flush */
        if (fpclassify(x) == FP_SUBNORMAL)
            x = copysign(0.0, x);
    }
    switch (in->sub) {
    case CR__FOP_MIN:
    case CR__FOP_MAX:
        if ((f & CR__FF_NAN) && (isnan(x) || isnan(y)))
            r = NAN;
        else
            r = in->sub == CR__FOP_MIN ? cr__fmin64(x, y) : cr__fmax64(x, y);
        break;
    case CR__FOP_NEG:
        r = -x;
        break;
    case CR__FOP_ABS:
        r = fabs(x);
        break;
    case CR__FOP_RSQRT:
        r = 1.0 / sqrt(x);
        break;
    case CR__FOP_EX2:
        r = exp2(x);
        break;
    case CR__FOP_LG2:
        r = log2(x);
        break;
    case CR__FOP_SIN:
        r = sin(x);
        break;
    case CR__FOP_COS:
        r = cos(x);
        break;
    case CR__FOP_TANH:
        r = tanh(x);
        break;
    default:
        r = cr__f64_op(in->sub, x, y, z, rnd);
        break;
    }
    if (f & CR__FF_SAT)
        r = isnan(r) ? 0.0 : r < 0 ? 0.0 : r > 1 ? 1.0 : r;
    if ((f & CR__FF_RELU) && !isnan(r) && r < 0)
        r = 0.0;
    return B64(r);
}
