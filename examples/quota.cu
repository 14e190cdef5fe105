// A tenant's view of the device: what cudaMemGetInfo says, then how much it can really
// allocate in 16 MiB steps before the server says no. With a tenants file the two agree
// with the tenant's quota, whatever the device holds. An argument N holds the memory N
// seconds before freeing it. Used by scripts/demo-tenants.sh.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <unistd.h>

#include <cuda_runtime.h>

int main(int argc, char **argv)
{
    int hold = argc > 1 ? atoi(argv[1]) : 0;
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        fprintf(stderr, "cudaMemGetInfo failed: %s\n", cudaGetErrorString(e));
        return 1;
    }
    printf("cudaMemGetInfo: %zu MiB free of %zu MiB\n", free_b >> 20, total_b >> 20);
    const size_t step = 16 << 20;
    std::vector<void *> blocks;
    for (;;) {
        void *p;
        e = cudaMalloc(&p, step);
        if (e != cudaSuccess)
            break;
        blocks.push_back(p);
    }
    printf("allocated %zu MiB in 16 MiB blocks; the next one: %s\n",
           blocks.size() * (step >> 20), cudaGetErrorString(e));
    cudaGetLastError(); // the refusal is not sticky
    fflush(stdout);
    sleep(hold);
    for (void *p : blocks)
        cudaFree(p);
    return blocks.size() * step <= total_b ? 0 : 1;
}
