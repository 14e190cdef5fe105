// large_param: kernel parameter lists beyond 4 KiB (up to 32 764 bytes: CUDA 12.1 and later,
// Volta and newer). A 4 000-byte struct plus a pointer (within 4 KiB), then a 4 360-byte and a
// 12 000-byte struct followed by a pointer and an int: every element must arrive, and so must
// the parameters after the struct. (For parameter lists this large ptxas describes the layout
// with EIATTR_KPARAM_INFO_V2 records instead of EIATTR_KPARAM_INFO.)
#include "kt.h"

#include <vector>

template <int N>
struct Ints {
    int vals[N];
};

template <int N>
__global__ void take(Ints<N> h, long long *out, int tag)
{
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < N; t += blockDim.x * gridDim.x)
        out[t] = (long long)h.vals[t] * 3 - t + tag;
}

template <int N>
static void run(const char *what)
{
    static Ints<N> h;
    for (int k = 0; k < N; k++)
        h.vals[k] = (k * 7919) ^ (k << 12) ^ -k;
    long long *d;
    CHECK_CUDA(cudaMalloc(&d, N * sizeof(long long)));
    const int tag = -12345;
    take<N><<<4, 128>>>(h, d, tag);
    KT_SYNC();
    std::vector<long long> got(N);
    CHECK_CUDA(cudaMemcpy(got.data(), d, N * sizeof(long long), cudaMemcpyDeviceToHost));
    for (int k = 0; k < N; k++)
        kt_check_i64(what, k, got[k], (long long)h.vals[k] * 3 - k + tag);
    CHECK_CUDA(cudaFree(d));
}

int main()
{
    kt_start("large_param");
    run<1000>("4000-byte struct parameter: vals[k] * 3 - k + tag");
    run<1090>("4360-byte struct parameter: vals[k] * 3 - k + tag");
    run<3000>("12000-byte struct parameter: vals[k] * 3 - k + tag");
    kt_pass();
    return 0;
}
