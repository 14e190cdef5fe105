// saxpy_double: y = a*x + y in double over 1 M elements (one thread per element, then a
// second pass with a negative a through a grid-stride loop); every element within 1e-12
// of the host result, relative to |a*x| + |y| (the device may fuse into an FMA).
#include "kt.h"

#include <vector>

__global__ void daxpy(double a, const double *x, double *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

__global__ void daxpy_stride(double a, const double *__restrict__ x, double *__restrict__ y,
                             int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
}

int main()
{
    kt_start("saxpy_double");
    const int n = 1 << 20;
    std::vector<double> x(n), y(n), r(n), got(n);
    KtRng rng(2);
    for (int i = 0; i < n; i++) {
        x[i] = ((double)rng.next() / 4294967296.0 - 0.5) * 1e3 + 1e-7 * i;
        y[i] = ((double)rng.next() / 4294967296.0) * 3.0 - 1.0 / (1 + i);
    }
    double *dx, *dy;
    CHECK_CUDA(cudaMalloc(&dx, n * sizeof(double)));
    CHECK_CUDA(cudaMalloc(&dy, n * sizeof(double)));
    CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dy, y.data(), n * sizeof(double), cudaMemcpyHostToDevice));

    const double a1 = 2.718281828459045, a2 = -0.3333333333333333;
    daxpy<<<(n + 255) / 256, 256>>>(a1, dx, dy, n);
    KT_SYNC();
    CHECK_CUDA(cudaMemcpy(got.data(), dy, n * sizeof(double), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        r[i] = a1 * x[i] + y[i];
        kt_check_close("y = a1*x + y", i, got[i], r[i], 1e-12,
                       std::fabs(a1 * x[i]) + std::fabs(y[i]));
    }

    daxpy_stride<<<64, 128>>>(a2, dx, dy, n);
    KT_SYNC();
    std::vector<double> got2(n);
    CHECK_CUDA(cudaMemcpy(got2.data(), dy, n * sizeof(double), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        // from the device's own first-pass value, so errors do not accumulate across passes
        double e = a2 * x[i] + got[i];
        kt_check_close("y = a2*x + y", i, got2[i], e, 1e-12,
                       std::fabs(a2 * x[i]) + std::fabs(got[i]));
    }

    CHECK_CUDA(cudaFree(dx));
    CHECK_CUDA(cudaFree(dy));
    kt_pass();
    return 0;
}
