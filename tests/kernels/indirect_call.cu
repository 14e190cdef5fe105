// indirect_call: calls through function pointers and virtual functions in device code.
//  - a __device__ table of function pointers, initialised statically, indexed by data;
//  - a function pointer passed as a kernel argument (taken with cudaMemcpyFromSymbol of a
//    __device__ pointer variable);
//  - virtual functions: objects of two derived classes constructed in a kernel, called
//    through base-class pointers.
#include "kt.h"

#include <vector>

__device__ __noinline__ int op_add(int a, int b) { return a + b; }
__device__ __noinline__ int op_sub(int a, int b) { return a - b; }
__device__ __noinline__ int op_mul(int a, int b) { return a * b; }
__device__ __noinline__ int op_xor(int a, int b) { return a ^ b; }
typedef int (*op_fn)(int, int);
__device__ op_fn ops[4] = {op_add, op_sub, op_mul, op_xor};
__device__ op_fn chosen = op_mul;

__global__ void table_call(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = ops[in[i] & 3](in[i], i);
}

__global__ void arg_call(op_fn f, const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = f(in[i], 3);
}

struct Shape {
    __device__ virtual int area() const = 0;
    __device__ virtual int scale(int k) const { return k * area(); }
};

struct Rect : Shape {
    int w, h;
    __device__ Rect(int w_, int h_) : w(w_), h(h_) {}
    __device__ int area() const override { return w * h; }
};

struct Square : Shape {
    int s;
    __device__ explicit Square(int s_) : s(s_) {}
    __device__ int area() const override { return s * s; }
    __device__ int scale(int k) const override { return -k * area(); }
};

__global__ void virtual_call(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    Rect r(in[i] % 100, i % 50);
    Square q(in[i] % 30);
    const Shape *s = (in[i] & 1) ? (const Shape *)&r : (const Shape *)&q;
    out[i] = s->scale(i % 7) + s->area();
}

int main()
{
    kt_start("indirect_call");
    const int n = 2000;
    std::vector<int> in(n), out(n);
    KtRng rng(14);
    for (int i = 0; i < n; i++)
        in[i] = rng.range(0, 100000);
    int *din, *dout;
    CHECK_CUDA(cudaMalloc(&din, n * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dout, n * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));

    table_call<<<(n + 127) / 128, 128>>>(din, dout, n);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        int a = in[i], e;
        switch (a & 3) {
        case 0: e = a + i; break;
        case 1: e = a - i; break;
        case 2: e = a * i; break;
        default: e = a ^ i; break;
        }
        kt_check_i64("ops[a & 3](a, i) through a function-pointer table", i, out[i], e);
    }

    op_fn f;
    CHECK_CUDA(cudaMemcpyFromSymbol(&f, chosen, sizeof f));
    arg_call<<<(n + 127) / 128, 128>>>(f, din, dout, n);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        kt_check_i64("f(a, 3) with f = op_mul passed as a kernel argument", i, out[i], in[i] * 3);

    virtual_call<<<(n + 127) / 128, 128>>>(din, dout, n);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        int a = in[i], k = i % 7, e;
        if (a & 1) {
            int area = (a % 100) * (i % 50);
            e = k * area + area;
        } else {
            int area = (a % 30) * (a % 30);
            e = -k * area + area;
        }
        kt_check_i64("virtual scale(k) + area()", i, out[i], e);
    }

    CHECK_CUDA(cudaFree(din));
    CHECK_CUDA(cudaFree(dout));
    kt_pass();
    return 0;
}
