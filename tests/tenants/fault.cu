// A client for the lost-context test: `fault` launches a kernel that stores to an address no
// allocation holds and reports what the next calls return; `work SECONDS` increments a
// buffer in a loop of kernels until the time is up or a call fails, then checks the count.
// Prints one line a test reads:
//   fault: FAULT <sync error> <malloc error after>
//   work:  WORK <iterations> <first error> <copy error> <value or -1>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

__global__ void poke(int *p) { *p = 7; }

__global__ void add_one(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

static int fault()
{
    int *d;
    cudaError_t e = cudaMalloc(&d, 4096);
    if (e != cudaSuccess) {
        printf("FAULT setup %s\n", cudaGetErrorName(e));
        return 2;
    }
    poke<<<1, 1>>>((int *)0x10);
    cudaError_t sync = cudaDeviceSynchronize();
    int *d2;
    cudaError_t after = cudaMalloc(&d2, 4096);
    printf("FAULT %s %s\n", cudaGetErrorName(sync), cudaGetErrorName(after));
    return 0;
}

static int work(double seconds)
{
    const int n = 4096;
    int *d;
    cudaError_t e = cudaMalloc(&d, n * sizeof(int));
    if (e == cudaSuccess)
        e = cudaMemset(d, 0, n * sizeof(int));
    if (e != cudaSuccess) {
        printf("WORK 0 %s - -1\n", cudaGetErrorName(e));
        return 2;
    }
    auto t0 = std::chrono::steady_clock::now();
    int iterations = 0;
    cudaError_t first = cudaSuccess;
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() <
           seconds) {
        add_one<<<n / 256, 256>>>(d, n);
        if ((first = cudaDeviceSynchronize()) != cudaSuccess)
            break;
        iterations++;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    static int h[n];
    cudaError_t copy = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf("WORK %d %s %s %d\n", iterations, cudaGetErrorName(first), cudaGetErrorName(copy),
           copy == cudaSuccess ? h[n - 1] : -1);
    return first != cudaSuccess || copy != cudaSuccess || h[n - 1] != iterations;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "fault") == 0)
        return fault();
    if (argc >= 3 && strcmp(argv[1], "work") == 0)
        return work(atof(argv[2]));
    fprintf(stderr, "usage: fault fault | work SECONDS\n");
    return 2;
}
