// Kernels that keep the device busy for a set time, for the scheduling tests and the priority
// bench. Each kernel is one thread that spins on the device's clock (%globaltimer, in
// nanoseconds on a GPU and on the emulated device alike) and then counts itself.
//
//   spin saturate SECONDS KERNEL_US   keeps KERNEL_US kernels queued (DEPTH deep) for SECONDS;
//                                     prints "LAUNCHES n" and checks every kernel ran
//   spin latency COUNT KERNEL_US      COUNT times: launch one kernel and wait for it; prints
//                                     "LATENCY_US median p90 p99" of those round trips
//   spin flood COUNT KERNEL_US        launches COUNT kernels at once, then waits for them
//   spin loop SECONDS KERNEL_US BATCH  a training or inference loop for SECONDS: launches
//                                     BATCH kernels, synchronizes, again; prints
//                                     "LAUNCHES n"
//   spin graph SECONDS KERNEL_US BATCH the same loop with the BATCH kernels captured once in
//                                     a CUDA graph, launched and waited for again and again
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                  \
                    cudaGetErrorString(e_));                                               \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static const int DEPTH = 4; // kernels queued at once while saturating

__device__ static unsigned long long device_now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void spin(unsigned long long ns, unsigned long long *ran)
{
    unsigned long long t0 = device_now();
    while (device_now() - t0 < ns) {
    }
    atomicAdd(ran, 1ull);
}

static double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int main(int argc, char **argv)
{
    int loop = argc == 5 && strcmp(argv[1], "loop") == 0;
    int graph = argc == 5 && strcmp(argv[1], "graph") == 0;
    if ((argc != 4 && !loop && !graph) ||
        (strcmp(argv[1], "saturate") && strcmp(argv[1], "latency") && strcmp(argv[1], "flood") &&
         !loop && !graph)) {
        fprintf(stderr, "usage: spin saturate SECONDS KERNEL_US | spin latency COUNT KERNEL_US | "
                        "spin flood COUNT KERNEL_US | spin loop|graph SECONDS KERNEL_US BATCH\n");
        return 2;
    }
    unsigned long long ns = strtoull(argv[3], NULL, 10) * 1000;
    unsigned long long *ran;
    CHECK(cudaMalloc(&ran, sizeof *ran));
    CHECK(cudaMemset(ran, 0, sizeof *ran));
    unsigned long long launched = 0;

    if (strcmp(argv[1], "saturate") == 0) {
        double seconds = atof(argv[2]);
        cudaEvent_t done[DEPTH];
        for (int i = 0; i < DEPTH; i++)
            CHECK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
        auto t0 = std::chrono::steady_clock::now();
        while (seconds_since(t0) < seconds) {
            int slot = launched % DEPTH;
            if (launched >= DEPTH)
                CHECK(cudaEventSynchronize(done[slot])); // keeps DEPTH kernels queued
            spin<<<1, 1>>>(ns, ran);
            CHECK(cudaGetLastError());
            CHECK(cudaEventRecord(done[slot]));
            launched++;
        }
        CHECK(cudaDeviceSynchronize());
        printf("LAUNCHES %llu\n", launched);
    } else if (loop) {
        double seconds = atof(argv[2]);
        int batch = atoi(argv[4]);
        auto t0 = std::chrono::steady_clock::now();
        while (seconds_since(t0) < seconds) {
            for (int i = 0; i < batch; i++, launched++) {
                spin<<<1, 1>>>(ns, ran);
                CHECK(cudaGetLastError());
            }
            CHECK(cudaStreamSynchronize(0)); // the step's loss.item(): the loop waits
        }
        printf("LAUNCHES %llu\n", launched);
    } else if (graph) {
        double seconds = atof(argv[2]);
        int batch = atoi(argv[4]);
        cudaStream_t stream;
        CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < batch; i++)
            spin<<<1, 1, 0, stream>>>(ns, ran);
        CHECK(cudaGetLastError());
        cudaGraph_t g;
        cudaGraphExec_t exec;
        CHECK(cudaStreamEndCapture(stream, &g));
        CHECK(cudaGraphInstantiate(&exec, g, 0));
        auto t0 = std::chrono::steady_clock::now();
        while (seconds_since(t0) < seconds) {
            CHECK(cudaGraphLaunch(exec, stream));
            launched += batch;
            CHECK(cudaStreamSynchronize(stream));
        }
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(g));
        printf("LAUNCHES %llu\n", launched);
    } else if (strcmp(argv[1], "flood") == 0) {
        for (int i = atoi(argv[2]); i > 0; i--, launched++) {
            spin<<<1, 1>>>(ns, ran);
            CHECK(cudaGetLastError());
        }
        CHECK(cudaDeviceSynchronize());
        printf("LAUNCHES %llu\n", launched);
    } else {
        int count = atoi(argv[2]);
        std::vector<double> us;
        for (int i = 0; i < count; i++) {
            auto t0 = std::chrono::steady_clock::now();
            spin<<<1, 1>>>(ns, ran);
            CHECK(cudaGetLastError());
            CHECK(cudaStreamSynchronize(0));
            us.push_back(seconds_since(t0) * 1e6);
            launched++;
        }
        std::sort(us.begin(), us.end());
        printf("LATENCY_US %.1f %.1f %.1f\n", us[us.size() / 2], us[us.size() * 9 / 10],
               us[us.size() * 99 / 100]);
    }
    unsigned long long ran_host = 0;
    CHECK(cudaMemcpy(&ran_host, ran, sizeof ran_host, cudaMemcpyDeviceToHost));
    if (ran_host != launched) {
        fprintf(stderr, "spin: %llu kernels launched, %llu ran\n", launched, ran_host);
        return 1;
    }
    return 0;
}
