// struct_arg: kernels taking structs by value.
//  - Mixed {signed char; double; int[3]; float2} (padding after the char, float2 aligned to
//    8): 300 threads derive values from every member (sign extension of the char included)
//    and write a modified copy of the struct back;
//  - a kernel whose parameters interleave scalars and structs (char, Mixed, short, a 264-byte
//    Big, Args {bool, unsigned char, short, long long, float *, float}): every member must
//    arrive, at its offset, including a device pointer inside a struct that the kernel
//    writes through.
// (Parameter lists beyond 4 KiB are in large_param.cu.)
// All values are exactly representable: results are compared exactly.
#include "kt.h"

#include <cstddef>
#include <vector>

struct Mixed {
    signed char c;
    double d;
    int v[3];
    float2 f;
};

struct Big {
    int vals[64];
    double tail;
};

struct Args {
    bool flag;
    unsigned char u8;
    short s16;
    long long i64;
    float *dst;
    float scale;
};

struct Layout {
    int size, off_d, off_v, off_f, big_size, args_size, off_dst;
};

__global__ void derive(Mixed m, double *od, int *oi, float *of, Mixed *os, Layout *layout)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 300)
        return;
    od[i] = m.d * i + m.c;
    for (int k = 0; k < 3; k++)
        oi[3 * i + k] = m.v[k] * (i + 1) - m.c;
    of[2 * i] = m.f.x * i + m.f.y;
    of[2 * i + 1] = m.f.y * m.c;
    Mixed n;
    n.c = (signed char)(m.c + i);
    n.d = m.d * 2 - i;
    n.v[0] = m.v[1];
    n.v[1] = m.v[2];
    n.v[2] = m.v[0] ^ i;
    n.f = make_float2(m.f.y, m.f.x + i);
    os[i] = n;
    if (i == 0)
        *layout = Layout{(int)sizeof(Mixed), (int)offsetof(Mixed, d), (int)offsetof(Mixed, v),
                         (int)offsetof(Mixed, f), (int)sizeof(Big), (int)sizeof(Args),
                         (int)offsetof(Args, dst)};
}

__global__ void interleaved(char tag, Mixed m, short s, Big big, Args args, long long *out)
{
    int t = threadIdx.x;
    if (t < 64)
        out[t] = (long long)big.vals[t] * tag + s;  // one per element of big
    if (t == 64) {
        long long sum = 0;
        for (int k = 0; k < 64; k++)
            sum += big.vals[k];
        out[64] = sum;
        out[65] = (long long)(big.tail * 4);
        out[66] = m.c;
        out[67] = (long long)(m.d * 8);
        out[68] = m.v[0] + m.v[1] + m.v[2];
        out[69] = (long long)(m.f.x * 4) * 1000 + (long long)(m.f.y * 4);
        out[70] = args.flag;
        out[71] = args.u8;
        out[72] = args.s16;
        out[73] = args.i64;
        out[74] = tag;
        out[75] = s;
    }
    if (t < 16)
        args.dst[t] = args.flag ? args.scale * t : -1.0f;
}

int main()
{
    kt_start("struct_arg");
    Mixed m;
    memset(&m, 0, sizeof m);
    m.c = -5;
    m.d = 0.375;
    m.v[0] = 1000;
    m.v[1] = -77;
    m.v[2] = 123456;
    m.f = make_float2(1.5f, -2.25f);

    const int n = 300;
    double *od;
    int *oi;
    float *of;
    Mixed *os;
    Layout *dl, layout;
    CHECK_CUDA(cudaMalloc(&od, n * sizeof(double)));
    CHECK_CUDA(cudaMalloc(&oi, 3 * n * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&of, 2 * n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&os, n * sizeof(Mixed)));
    CHECK_CUDA(cudaMalloc(&dl, sizeof(Layout)));
    derive<<<3, 128>>>(m, od, oi, of, os, dl);
    KT_SYNC();
    std::vector<double> hd(n);
    std::vector<int> hi(3 * n);
    std::vector<float> hf(2 * n);
    std::vector<Mixed> hs(n);
    CHECK_CUDA(cudaMemcpy(hd.data(), od, n * sizeof(double), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hi.data(), oi, 3 * n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hf.data(), of, 2 * n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hs.data(), os, n * sizeof(Mixed), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(&layout, dl, sizeof layout, cudaMemcpyDeviceToHost));
    kt_check_i64("device sizeof(Mixed)", 0, layout.size, sizeof(Mixed));
    kt_check_i64("device offsetof(Mixed, d)", 0, layout.off_d, offsetof(Mixed, d));
    kt_check_i64("device offsetof(Mixed, v)", 0, layout.off_v, offsetof(Mixed, v));
    kt_check_i64("device offsetof(Mixed, f)", 0, layout.off_f, offsetof(Mixed, f));
    kt_check_i64("device sizeof(Big)", 0, layout.big_size, sizeof(Big));
    kt_check_i64("device sizeof(Args)", 0, layout.args_size, sizeof(Args));
    kt_check_i64("device offsetof(Args, dst)", 0, layout.off_dst, offsetof(Args, dst));
    for (int i = 0; i < n; i++) {
        kt_check_f64_exact("m.d * i + m.c", i, hd[i], m.d * i + m.c);
        for (int k = 0; k < 3; k++)
            kt_check_i64("m.v[k] * (i + 1) - m.c", 3 * i + k, hi[3 * i + k], m.v[k] * (i + 1) - m.c);
        kt_check_f32_exact("m.f.x * i + m.f.y", i, hf[2 * i], m.f.x * i + m.f.y);
        kt_check_f32_exact("m.f.y * m.c", i, hf[2 * i + 1], m.f.y * m.c);
        kt_check_i64("written struct .c", i, hs[i].c, (signed char)(m.c + i));
        kt_check_f64_exact("written struct .d", i, hs[i].d, m.d * 2 - i);
        kt_check_i64("written struct .v[0]", i, hs[i].v[0], m.v[1]);
        kt_check_i64("written struct .v[1]", i, hs[i].v[1], m.v[2]);
        kt_check_i64("written struct .v[2]", i, hs[i].v[2], m.v[0] ^ i);
        kt_check_f32_exact("written struct .f.x", i, hs[i].f.x, m.f.y);
        kt_check_f32_exact("written struct .f.y", i, hs[i].f.y, m.f.x + i);
    }

    Big big;
    for (int k = 0; k < 64; k++)
        big.vals[k] = (k * 37 - 1000) * (k % 3 == 0 ? -1 : 1);
    big.tail = -12.75;
    float *dst;
    CHECK_CUDA(cudaMalloc(&dst, 16 * sizeof(float)));
    Args args;
    memset(&args, 0, sizeof args);
    args.flag = true;
    args.u8 = 250;
    args.s16 = -31000;
    args.i64 = -1234567890123456789LL;
    args.dst = dst;
    args.scale = 0.5f;
    const char tag = 'Q';
    const short s = -300;
    long long *out;
    CHECK_CUDA(cudaMalloc(&out, 76 * sizeof(long long)));
    interleaved<<<1, 96>>>(tag, m, s, big, args, out);
    KT_SYNC();
    long long h[76];
    float hdst[16];
    CHECK_CUDA(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hdst, dst, sizeof hdst, cudaMemcpyDeviceToHost));
    long long sum = 0;
    for (int k = 0; k < 64; k++) {
        kt_check_i64("big.vals[t] * tag + s", k, h[k], (long long)big.vals[k] * tag + s);
        sum += big.vals[k];
    }
    kt_check_i64("sum of big.vals", 64, h[64], sum);
    kt_check_i64("big.tail * 4", 65, h[65], -51);
    kt_check_i64("m.c", 66, h[66], -5);
    kt_check_i64("m.d * 8", 67, h[67], 3);
    kt_check_i64("sum of m.v", 68, h[68], 1000 - 77 + 123456);
    kt_check_i64("m.f (x*4*1000 + y*4)", 69, h[69], 6 * 1000 - 9);
    kt_check_i64("args.flag", 70, h[70], 1);
    kt_check_i64("args.u8", 71, h[71], 250);
    kt_check_i64("args.s16", 72, h[72], -31000);
    kt_check_i64("args.i64", 73, h[73], -1234567890123456789LL);
    kt_check_i64("tag", 74, h[74], 'Q');
    kt_check_i64("s", 75, h[75], -300);
    for (int t = 0; t < 16; t++)
        kt_check_f32_exact("args.dst[t] (through a pointer in a struct)", t, hdst[t], 0.5f * t);

    CHECK_CUDA(cudaFree(od));
    CHECK_CUDA(cudaFree(oi));
    CHECK_CUDA(cudaFree(of));
    CHECK_CUDA(cudaFree(os));
    CHECK_CUDA(cudaFree(dl));
    CHECK_CUDA(cudaFree(dst));
    CHECK_CUDA(cudaFree(out));
    kt_pass();
    return 0;
}
