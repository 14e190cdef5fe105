// Math: the approximate instructions, correctly rounded ones, double precision library code,
// half-precision conversions, integer intrinsics.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void approx(const float *x, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], *o = out + i * 12;
    o[0] = __sinf(v);
    o[1] = __cosf(v);
    o[2] = exp2f(v);  // ex2.approx with nvcc's defaults? see host
    float r;
    asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
    o[2] = r;
    asm("lg2.approx.f32 %0, %1;" : "=f"(r) : "f"(fabsf(v) + 0.5f));
    o[3] = r;
    asm("rsqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(fabsf(v) + 0.5f));
    o[4] = r;
    asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
    o[5] = r;
    asm("rcp.approx.f32 %0, %1;" : "=f"(r) : "f"(v + 20.0f));
    o[6] = r;
    o[7] = sqrtf(fabsf(v));  // sqrt.rn
    o[8] = v / 3.0f;         // div.rn
    o[9] = __fdividef(v, 3.0f);
    o[10] = expf(v);         // library code: ex2 + fma
    o[11] = logf(fabsf(v) + 0.5f);
}

extern "C" __global__ void dmath(const double *x, double *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double v = x[i], *o = out + i * 6;
    o[0] = sin(v);
    o[1] = exp(v);
    o[2] = log(fabs(v) + 0.5);
    o[3] = sqrt(fabs(v));
    o[4] = pow(fabs(v) + 1, 1.5);
    o[5] = atan2(v, 2.0);
}

// Every f16 value through float and back, bf16 likewise, and float to half in each rounding.
extern "C" __global__ void halves(const float *f, unsigned short *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 65536) {
        __half h = __ushort_as_half((unsigned short)i);
        out[i] = __half_as_ushort(__float2half_rn(__half2float(h)));
        __nv_bfloat16 b = __ushort_as_bfloat16((unsigned short)i);
        out[65536 + i] = __bfloat16_as_ushort(__float2bfloat16_rn(__bfloat162float(b)));
    }
    if (i < n) {
        unsigned short *o = out + 131072 + i * 6;
        o[0] = __half_as_ushort(__float2half_rn(f[i]));
        o[1] = __half_as_ushort(__float2half_rz(f[i]));
        o[2] = __half_as_ushort(__float2half_rd(f[i]));
        o[3] = __half_as_ushort(__float2half_ru(f[i]));
        o[4] = __bfloat16_as_ushort(__float2bfloat16_rn(f[i]));
        o[5] = __half_as_ushort(__hadd(__float2half_rn(f[i]), __float2half_rn(1.0f)));
    }
}

extern "C" __global__ void intrinsics(const unsigned *a, const unsigned *b, unsigned *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], y = b[i], *o = out + i * 12;
    o[0] = __popc(x);
    o[1] = __clz(x);
    o[2] = __brev(x);
    o[3] = __byte_perm(x, y, y & 0x7777);
    o[4] = __funnelshift_l(x, y, y);
    o[5] = __funnelshift_r(x, y, y);
    o[6] = __umulhi(x, y);
    o[7] = __usad(x, y, 7);
    o[8] = __ffs(x);
    o[9] = (unsigned)(__umul64hi((unsigned long long)x << 32 | y, 0x123456789abcdefull) >> 7);
    o[10] = x ^ y;
    o[11] = (int)x / ((int)(y | 1)) + (x % (y | 1));
}
