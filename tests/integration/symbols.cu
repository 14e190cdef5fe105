// symbols: module globals through cudart: initial values of a __constant__ array and of
// __device__ variables (initialized and zero), cudaMemcpyToSymbol/FromSymbol with offsets
// (sync and async), cudaGetSymbolAddress/cudaGetSymbolSize, plain copies to a symbol's
// address, and a kernel reading the symbols (announced; results checked when kernels run).
#include "cr_test.h"

#include <vector>

__constant__ float coef[16] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f,
                               8.5f, 9.5f, 10.5f, 11.5f, 12.5f, 13.5f, 14.5f, 15.5f};
__device__ int counter = 42;
__device__ double table[1000];

__global__ void use_symbols(double *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = coef[i % 16] * table[i] + counter;
    if (i == 0)
        atomicAdd(&counter, 1);
}

int main()
{
    bool run = kernels_execute();

    float c[16];
    CHECK_CUDA(cudaMemcpyFromSymbol(c, coef, sizeof c));
    for (int i = 0; i < 16; i++)
        CHECK(c[i] == 0.5f + i, "coef[%d] = %f, initializer says %f", i, c[i], 0.5f + i);
    int cnt = 0;
    CHECK_CUDA(cudaMemcpyFromSymbol(&cnt, counter, sizeof cnt));
    CHECK(cnt == 42, "counter = %d, initializer says 42", cnt);
    std::vector<double> t(1000, -1.0);
    CHECK_CUDA(cudaMemcpyFromSymbol(t.data(), table, 1000 * sizeof(double)));
    for (int i = 0; i < 1000; i++)
        CHECK(t[i] == 0.0, "table[%d] = %f, expected 0 (no initializer)", i, t[i]);

    size_t size = 0;
    CHECK_CUDA(cudaGetSymbolSize(&size, coef));
    CHECK(size == 64, "cudaGetSymbolSize(coef) = %zu", size);
    CHECK_CUDA(cudaGetSymbolSize(&size, counter));
    CHECK(size == 4, "cudaGetSymbolSize(counter) = %zu", size);
    CHECK_CUDA(cudaGetSymbolSize(&size, table));
    CHECK(size == 8000, "cudaGetSymbolSize(table) = %zu", size);
    void *a_coef = nullptr, *a_counter = nullptr, *a_table = nullptr;
    CHECK_CUDA(cudaGetSymbolAddress(&a_coef, coef));
    CHECK_CUDA(cudaGetSymbolAddress(&a_counter, counter));
    CHECK_CUDA(cudaGetSymbolAddress(&a_table, table));
    CHECK(a_coef && a_counter && a_table, "null symbol address");
    uintptr_t ac = (uintptr_t)a_coef, an = (uintptr_t)a_counter, at = (uintptr_t)a_table;
    CHECK((an + 4 <= at || at + 8000 <= an) && (ac + 64 <= at || at + 8000 <= ac) &&
              (ac + 64 <= an || an + 4 <= ac),
          "symbols overlap: coef %p counter %p table %p", a_coef, a_counter, a_table);
    CHECK(at % 8 == 0 && an % 4 == 0 && ac % 4 == 0, "misaligned symbol");

    // round trips, with offsets
    for (int i = 0; i < 1000; i++)
        t[i] = i * 0.25 - 3;
    CHECK_CUDA(cudaMemcpyToSymbol(table, t.data(), 1000 * sizeof(double)));
    double part[10] = {1e10, 2e10, 3e10, 4e10, 5e10, 6e10, 7e10, 8e10, 9e10, 1e11};
    CHECK_CUDA(cudaMemcpyToSymbol(table, part, sizeof part, 500 * sizeof(double)));
    for (int i = 0; i < 10; i++)
        t[500 + i] = part[i];
    std::vector<double> t2(1000);
    CHECK_CUDA(cudaMemcpyFromSymbol(t2.data(), table, 1000 * sizeof(double)));
    for (int i = 0; i < 1000; i++)
        CHECK(t2[i] == t[i], "table[%d] = %f, expected %f", i, t2[i], t[i]);
    double few[3];
    CHECK_CUDA(cudaMemcpyFromSymbol(few, table, sizeof few, 499 * sizeof(double)));
    CHECK(few[0] == t[499] && few[1] == 1e10 && few[2] == 2e10, "read at an offset: %f %f %f",
          few[0], few[1], few[2]);

    float c2[4] = {-1, -2, -3, -4};
    CHECK_CUDA(cudaMemcpyToSymbol(coef, c2, sizeof c2, 12 * sizeof(float)));
    for (int i = 0; i < 4; i++)
        c[12 + i] = c2[i];
    float c3[16];
    CHECK_CUDA(cudaMemcpyFromSymbol(c3, coef, sizeof c3));
    for (int i = 0; i < 16; i++)
        CHECK(c3[i] == c[i], "coef[%d] = %f, expected %f", i, c3[i], c[i]);

    // async, on a stream, into pinned memory
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));
    int *pinned;
    CHECK_CUDA(cudaMallocHost(&pinned, 2 * sizeof(int)));
    pinned[0] = 1234;
    pinned[1] = 0;
    CHECK_CUDA(cudaMemcpyToSymbolAsync(counter, &pinned[0], sizeof(int), 0,
                                       cudaMemcpyHostToDevice, s));
    CHECK_CUDA(cudaMemcpyFromSymbolAsync(&pinned[1], counter, sizeof(int), 0,
                                         cudaMemcpyDeviceToHost, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(pinned[1] == 1234, "counter after async copies = %d", pinned[1]);

    // plain copies to and from a symbol's address
    int v = 777;
    CHECK_CUDA(cudaMemcpy(a_counter, &v, sizeof v, cudaMemcpyDefault));
    CHECK_CUDA(cudaMemcpyFromSymbol(&cnt, counter, sizeof cnt));
    CHECK(cnt == 777, "counter after cudaMemcpyDefault to its address = %d", cnt);
    double d5 = 0;
    CHECK_CUDA(cudaMemcpy(&d5, (double *)a_table + 505, sizeof d5, cudaMemcpyDeviceToHost));
    CHECK(d5 == 6e10, "table[505] read through its address = %f", d5);
    // symbol to symbol (device to device)
    CHECK_CUDA(cudaMemcpyToSymbol(table, a_table, 8 * sizeof(double), 992 * sizeof(double),
                                  cudaMemcpyDeviceToDevice));
    for (int i = 0; i < 8; i++)
        t[992 + i] = t[i];
    CHECK_CUDA(cudaMemcpyFromSymbol(t2.data(), table, 1000 * sizeof(double)));
    for (int i = 0; i < 1000; i++)
        CHECK(t2[i] == t[i], "table[%d] = %f after a D2D symbol copy, expected %f", i, t2[i],
              t[i]);

    // a kernel reading all three
    const int n = 1000;
    double *out;
    CHECK_CUDA(cudaMalloc(&out, n * sizeof(double)));
    use_symbols<<<4, 256>>>(out, n);
    CHECK_CUDA(cudaGetLastError());
    struct {
        double *out;
        int n;
    } params = {out, n};
    unsigned char buf[12] = {};
    memcpy(buf, &params.out, 8);
    memcpy(buf + 8, &params.n, 4);
    expect_launch("use_symbols", dim3(4), dim3(256), 0, buf, sizeof buf);
    CHECK_CUDA(cudaDeviceSynchronize());
    if (run) {
        std::vector<double> o(n);
        CHECK_CUDA(cudaMemcpy(o.data(), out, n * sizeof(double), cudaMemcpyDeviceToHost));
        // thread 0's atomicAdd races with the other threads' reads of counter (on a GPU
        // too): each element saw 777 or 778
        for (int i = 0; i < n; i++) {
            double want = (double)c[i % 16] * t[i] + 777;
            CHECK(o[i] == want || o[i] == want + 1, "out[%d] = %f, expected %f (or + 1)", i,
                  o[i], want);
        }
        CHECK_CUDA(cudaMemcpyFromSymbol(&cnt, counter, sizeof cnt));
        CHECK(cnt == 778, "counter after the kernel = %d", cnt);
    }

    CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFreeHost(pinned));
    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaGetLastError());
    printf("symbols: all checks passed\n");
    return 0;
}
