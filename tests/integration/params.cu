// params: kernel parameter buffers checked byte for byte in the launch trace. Each expected
// buffer is built on the host from the C++ ABI (offsetof into a host struct laid out like
// the parameter list; gaps between parameters are zero): mixed scalars around a 48-byte
// struct (offsets 0,2,8,56,64,72; 80 bytes), a 16-byte-aligned struct holding a float4,
// many small arguments, a templated kernel for float and double, no parameters at all, a
// 256-byte struct by value and a 4 KiB struct by value. When kernels run, each kernel
// writes back what it received and that is checked too.
#include "cr_test.h"

#include <cstddef>
#include <cstdint>
#include <vector>

// ---- 1: char, short, 48-byte struct, double, int*, long long ----
struct Big48 {
    char tag;
    char pad0[7];  // explicit, so that every byte of the struct has a defined value
    double x;
    int y[3];
    int pad1;
    long long z;
    short w;
    char pad2[6];
};
static_assert(sizeof(Big48) == 48 && alignof(Big48) == 8, "Big48 layout");

struct MixedArgs {  // the parameter list as a struct: the same offsets
    char c;
    short s;
    Big48 b;
    double d;
    int *p;
    long long ll;
};
static_assert(offsetof(MixedArgs, c) == 0 && offsetof(MixedArgs, s) == 2 &&
                  offsetof(MixedArgs, b) == 8 && offsetof(MixedArgs, d) == 56 &&
                  offsetof(MixedArgs, p) == 64 && offsetof(MixedArgs, ll) == 72,
              "MixedArgs offsets");

__global__ void mixed_kernel(char c, short s, Big48 b, double d, int *p, long long ll)
{
    long long *out = (long long *)p;
    out[0] = c;
    out[1] = s;
    out[2] = b.tag;
    out[3] = (long long)(b.x * 1000);
    out[4] = b.y[0] + b.y[1] + b.y[2];
    out[5] = b.z;
    out[6] = b.w;
    out[7] = (long long)(d * 1000);
    out[8] = ll;
    out[9] = b.pad0[3] + b.pad2[5];
}

// ---- 2: a 16-byte-aligned struct ----
struct Vec {
    float4 v;
    int tag;
    int pad[3];
};
static_assert(sizeof(Vec) == 32 && alignof(Vec) == 16, "Vec layout");
struct AlignedArgs {
    int a;
    Vec v;
    char c;
    float *out;
};

__global__ void aligned_kernel(int a, Vec v, char c, float *out)
{
    out[0] = (float)a;
    out[1] = v.v.x;
    out[2] = v.v.y;
    out[3] = v.v.z;
    out[4] = v.v.w;
    out[5] = (float)v.tag;
    out[6] = (float)c;
}

// ---- 3: many small arguments ----
struct SmallArgs {
    bool b1;
    unsigned char u8;
    uint16_t u16;
    int i;
    float f;
    double d;
    int *p;
    bool b2;
    short sh;
    float f2;
    unsigned char u8b;
    long long ll;
    char ch;
};

__global__ void small_kernel(bool b1, unsigned char u8, uint16_t u16, int i, float f, double d,
                             int *p, bool b2, short sh, float f2, unsigned char u8b, long long ll,
                             char ch)
{
    double *out = (double *)p;
    out[0] = b1;
    out[1] = u8;
    out[2] = u16;
    out[3] = i;
    out[4] = f;
    out[5] = d;
    out[6] = b2;
    out[7] = sh;
    out[8] = f2;
    out[9] = u8b;
    out[10] = (double)ll;
    out[11] = ch;
}

// ---- 4: a template ----
template <typename T> __global__ void templ_kernel(T *out, T value, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = value * i;
}
template <typename T> struct TemplArgs {
    T *out;
    T value;
    int n;
};

// ---- 5: no parameters ----
__device__ int no_param_flag;
__global__ void no_params_kernel()
{
    no_param_flag = 0x5eed;
}

// ---- 6: 256-byte and 4 KiB structs by value ----
struct S256 {
    int v[64];
};
struct S256Args {
    int x;
    S256 s;
    int *out;
};
__global__ void s256_kernel(int x, S256 s, int *out)
{
    int sum = x;
    for (int i = 0; i < 64; i++)
        sum += s.v[i] * (i + 1);
    out[0] = sum;
}

struct S4K {
    unsigned char bytes[4096];
};
struct S4KArgs {
    S4K s;
    unsigned *out;
};
__global__ void s4k_kernel(S4K s, unsigned *out)
{
    unsigned sum = 0;
    for (int i = 0; i < 4096; i++)
        sum = sum * 31 + s.bytes[i];
    out[0] = sum;
}

// The expected parameter buffer: zero, then each parameter at its offset.
struct Expected {
    std::vector<unsigned char> bytes;
    explicit Expected(size_t size) : bytes(size, 0) {}
    template <typename T> void put(size_t offset, const T &value)
    {
        CHECK(offset + sizeof(T) <= bytes.size(), "parameter at %zu past the end", offset);
        memcpy(bytes.data() + offset, &value, sizeof(T));
    }
};
#define END_OF(S, last) (offsetof(S, last) + sizeof(((S *)0)->last))

int main()
{
    bool run = kernels_execute();
    void *scratch;
    CHECK_CUDA(cudaMalloc(&scratch, 1 << 16));
    CHECK_CUDA(cudaMemset(scratch, 0, 1 << 16));

    // 1
    {
        Big48 b;
        memset(&b, 0, sizeof b);
        b.tag = 'T';
        memset(b.pad0, 0xa1, sizeof b.pad0);
        b.x = 2.5;
        b.y[0] = 1;
        b.y[1] = -20;
        b.y[2] = 300;
        b.pad1 = 0x0badf00d;
        b.z = 0x123456789abcdefLL;
        b.w = -7;
        memset(b.pad2, 0x5c, sizeof b.pad2);
        char c = 'c';
        short s = -12345;
        double d = -0.125;
        int *p = (int *)scratch;
        long long ll = -0x7edcba9876543210LL;
        mixed_kernel<<<1, 1>>>(c, s, b, d, p, ll);
        CHECK_CUDA(cudaGetLastError());
        Expected e(END_OF(MixedArgs, ll));
        CHECK(e.bytes.size() == 80, "MixedArgs size %zu", e.bytes.size());
        e.put(offsetof(MixedArgs, c), c);
        e.put(offsetof(MixedArgs, s), s);
        e.put(offsetof(MixedArgs, b), b);
        e.put(offsetof(MixedArgs, d), d);
        e.put(offsetof(MixedArgs, p), p);
        e.put(offsetof(MixedArgs, ll), ll);
        expect_launch("mixed_kernel", dim3(1), dim3(1), 0, e.bytes.data(), e.bytes.size());
        CHECK_CUDA(cudaDeviceSynchronize());
        if (run) {
            long long o[10];
            CHECK_CUDA(cudaMemcpy(o, scratch, sizeof o, cudaMemcpyDeviceToHost));
            long long want[10] = {'c', -12345, 'T', 2500, 281, 0x123456789abcdefLL, -7, -125,
                                  ll, (signed char)0xa1 + 0x5c};
            for (int i = 0; i < 10; i++)
                CHECK(o[i] == want[i], "mixed_kernel value %d: %lld, expected %lld", i, o[i],
                      want[i]);
        }
    }

    // 2
    {
        Vec v;
        memset(&v, 0, sizeof v);
        v.v = make_float4(1.5f, -2.5f, 3.25f, 1e6f);
        v.tag = 99;
        v.pad[0] = v.pad[1] = v.pad[2] = 0x01020304;
        int a = 17;
        char c = -3;
        float *out = (float *)scratch;
        aligned_kernel<<<1, 1>>>(a, v, c, out);
        CHECK_CUDA(cudaGetLastError());
        Expected e(END_OF(AlignedArgs, out));
        CHECK(offsetof(AlignedArgs, v) == 16 && offsetof(AlignedArgs, c) == 48 &&
                  offsetof(AlignedArgs, out) == 56 && e.bytes.size() == 64,
              "AlignedArgs layout");
        e.put(offsetof(AlignedArgs, a), a);
        e.put(offsetof(AlignedArgs, v), v);
        e.put(offsetof(AlignedArgs, c), c);
        e.put(offsetof(AlignedArgs, out), out);
        expect_launch("aligned_kernel", dim3(1), dim3(1), 0, e.bytes.data(), e.bytes.size());
        CHECK_CUDA(cudaDeviceSynchronize());
        if (run) {
            float o[7];
            CHECK_CUDA(cudaMemcpy(o, scratch, sizeof o, cudaMemcpyDeviceToHost));
            float want[7] = {17, 1.5f, -2.5f, 3.25f, 1e6f, 99, -3};
            for (int i = 0; i < 7; i++)
                CHECK(o[i] == want[i], "aligned_kernel value %d: %f, expected %f", i, o[i],
                      want[i]);
        }
    }

    // 3
    {
        SmallArgs h;
        memset(&h, 0, sizeof h);
        h.b1 = true;
        h.u8 = 200;
        h.u16 = 65000;
        h.i = -2000000000;
        h.f = 0.75f;
        h.d = 1e-300;
        h.p = (int *)scratch;
        h.b2 = false;
        h.sh = -2;
        h.f2 = -1e30f;
        h.u8b = 0xfe;
        h.ll = 1LL << 62;
        h.ch = 'z';
        small_kernel<<<1, 1>>>(h.b1, h.u8, h.u16, h.i, h.f, h.d, h.p, h.b2, h.sh, h.f2, h.u8b,
                               h.ll, h.ch);
        CHECK_CUDA(cudaGetLastError());
        Expected e(END_OF(SmallArgs, ch));
        e.put(offsetof(SmallArgs, b1), h.b1);
        e.put(offsetof(SmallArgs, u8), h.u8);
        e.put(offsetof(SmallArgs, u16), h.u16);
        e.put(offsetof(SmallArgs, i), h.i);
        e.put(offsetof(SmallArgs, f), h.f);
        e.put(offsetof(SmallArgs, d), h.d);
        e.put(offsetof(SmallArgs, p), h.p);
        e.put(offsetof(SmallArgs, b2), h.b2);
        e.put(offsetof(SmallArgs, sh), h.sh);
        e.put(offsetof(SmallArgs, f2), h.f2);
        e.put(offsetof(SmallArgs, u8b), h.u8b);
        e.put(offsetof(SmallArgs, ll), h.ll);
        e.put(offsetof(SmallArgs, ch), h.ch);
        expect_launch("small_kernel", dim3(1), dim3(1), 0, e.bytes.data(), e.bytes.size());
        CHECK_CUDA(cudaDeviceSynchronize());
        if (run) {
            double o[12];
            CHECK_CUDA(cudaMemcpy(o, scratch, sizeof o, cudaMemcpyDeviceToHost));
            double want[12] = {1, 200, 65000, -2000000000, 0.75, 1e-300, 0, -2, (double)-1e30f,
                               0xfe, (double)(1LL << 62), 'z'};
            for (int i = 0; i < 12; i++)
                CHECK(o[i] == want[i], "small_kernel value %d: %g, expected %g", i, o[i],
                      want[i]);
        }
    }

    // 4
    {
        float *fo = (float *)scratch;
        templ_kernel<float><<<2, 64>>>(fo, 0.5f, 100);
        CHECK_CUDA(cudaGetLastError());
        Expected ef(END_OF(TemplArgs<float>, n));
        CHECK(ef.bytes.size() == 16, "TemplArgs<float> size %zu", ef.bytes.size());
        ef.put(offsetof(TemplArgs<float>, out), fo);
        ef.put(offsetof(TemplArgs<float>, value), 0.5f);
        ef.put(offsetof(TemplArgs<float>, n), 100);
        expect_launch("templ_kernelIfEvPT_S0_i", dim3(2), dim3(64), 0, ef.bytes.data(),
                      ef.bytes.size());
        CHECK_CUDA(cudaDeviceSynchronize());
        if (run) {
            float o[100];
            CHECK_CUDA(cudaMemcpy(o, fo, sizeof o, cudaMemcpyDeviceToHost));
            for (int i = 0; i < 100; i++)
                CHECK(o[i] == 0.5f * i, "templ_kernel<float>[%d] = %f", i, o[i]);
        }

        double *dout = (double *)scratch + 1024;
        templ_kernel<double><<<3, 32>>>(dout, -1.5, 90);
        CHECK_CUDA(cudaGetLastError());
        Expected ed(END_OF(TemplArgs<double>, n));
        CHECK(ed.bytes.size() == 20, "TemplArgs<double> size %zu", ed.bytes.size());
        ed.put(offsetof(TemplArgs<double>, out), dout);
        ed.put(offsetof(TemplArgs<double>, value), -1.5);
        ed.put(offsetof(TemplArgs<double>, n), 90);
        expect_launch("templ_kernelIdEvPT_S0_i", dim3(3), dim3(32), 0, ed.bytes.data(),
                      ed.bytes.size());
        CHECK_CUDA(cudaDeviceSynchronize());
        if (run) {
            double o[90];
            CHECK_CUDA(cudaMemcpy(o, dout, sizeof o, cudaMemcpyDeviceToHost));
            for (int i = 0; i < 90; i++)
                CHECK(o[i] == -1.5 * i, "templ_kernel<double>[%d] = %f", i, o[i]);
        }
    }

    // 5
    {
        no_params_kernel<<<1, 1>>>();
        CHECK_CUDA(cudaGetLastError());
        expect_launch("no_params_kernel", dim3(1), dim3(1), 0, nullptr, 0);
        void *none[1] = {nullptr};
        CHECK_CUDA(cudaLaunchKernel((const void *)no_params_kernel, dim3(2), dim3(3), none, 0, 0));
        expect_launch("no_params_kernel", dim3(2), dim3(3), 0, nullptr, 0);
        CHECK_CUDA(cudaDeviceSynchronize());
        if (run) {
            int flag = 0;
            CHECK_CUDA(cudaMemcpyFromSymbol(&flag, no_param_flag, sizeof flag));
            CHECK(flag == 0x5eed, "no_params_kernel flag %#x", flag);
        }
    }

    // 6
    {
        S256 s;
        int want = 11;
        for (int i = 0; i < 64; i++) {
            s.v[i] = i * i - 100;
            want += s.v[i] * (i + 1);
        }
        int *out = (int *)scratch;
        s256_kernel<<<1, 1>>>(11, s, out);
        CHECK_CUDA(cudaGetLastError());
        Expected e(END_OF(S256Args, out));
        CHECK(offsetof(S256Args, s) == 4 && offsetof(S256Args, out) == 264 &&
                  e.bytes.size() == 272,
              "S256Args layout");
        e.put(offsetof(S256Args, x), 11);
        e.put(offsetof(S256Args, s), s);
        e.put(offsetof(S256Args, out), out);
        expect_launch("s256_kernel", dim3(1), dim3(1), 0, e.bytes.data(), e.bytes.size());
        CHECK_CUDA(cudaDeviceSynchronize());
        if (run) {
            int o = 0;
            CHECK_CUDA(cudaMemcpy(&o, out, sizeof o, cudaMemcpyDeviceToHost));
            CHECK(o == want, "s256_kernel sum %d, expected %d", o, want);
        }

        S4K big;
        unsigned sum = 0;
        for (int i = 0; i < 4096; i++) {
            big.bytes[i] = (unsigned char)(i * 13 + (i >> 8));
            sum = sum * 31 + big.bytes[i];
        }
        unsigned *uout = (unsigned *)scratch + 16;
        s4k_kernel<<<1, 1>>>(big, uout);
        CHECK_CUDA(cudaGetLastError());
        Expected e4(END_OF(S4KArgs, out));
        CHECK(e4.bytes.size() == 4104, "S4KArgs size %zu", e4.bytes.size());
        e4.put(offsetof(S4KArgs, s), big);
        e4.put(offsetof(S4KArgs, out), uout);
        expect_launch("s4k_kernel", dim3(1), dim3(1), 0, e4.bytes.data(), e4.bytes.size());
        CHECK_CUDA(cudaDeviceSynchronize());
        if (run) {
            unsigned o = 0;
            CHECK_CUDA(cudaMemcpy(&o, uout, sizeof o, cudaMemcpyDeviceToHost));
            CHECK(o == sum, "s4k_kernel checksum %u, expected %u", o, sum);
        }
    }

    CHECK_CUDA(cudaFree(scratch));
    CHECK_CUDA(cudaGetLastError());
    printf("params: all checks passed\n");
    return 0;
}
