// SAXPY through cuda-remote: an ordinary CUDA program, built with plain nvcc, that does not
// know its GPU is remote. It prints the device it got, runs y = a*x + y on 1M elements and
// checks the result against the host.
#include <cmath>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

#define CHECK_CUDA(call)                                                                     \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));               \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

int main()
{
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (compute capability %d.%d, %.1f GiB)\n", prop.name, prop.major,
           prop.minor, prop.totalGlobalMem / 1073741824.0);

    const int n = 1 << 20;
    const float a = 2.0f;
    std::vector<float> x(n), y(n), result(n);
    for (int i = 0; i < n; i++) {
        x[i] = i * 0.5f;
        y[i] = 1000.0f - i;
    }
    float *dx, *dy;
    CHECK_CUDA(cudaMalloc(&dx, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dy, n * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    saxpy<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(result.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaFree(dx));
    CHECK_CUDA(cudaFree(dy));

    int wrong = 0;
    for (int i = 0; i < n; i++)
        wrong += std::fabs(result[i] - (a * x[i] + y[i])) > 1e-3f;
    if (wrong == 0) {
        printf("saxpy on %d elements: correct (y[12345] = %.1f)\n", n, result[12345]);
        return 0;
    }
    printf("saxpy: %d of %d results wrong\n", wrong, n);
    return 1;
}
