// forks: processes forked around CUDA, as multiprocessing and test runners fork them. A child
// forked before the parent touched CUDA initialises on its own and computes; a child forked
// after it finds CUDA unusable (an error at once, as natively, never a hang) and leaves the
// parent's connection alone, so the parent goes on computing after both children exited.
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "cr_test.h"

__global__ void square(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] * in[i];
}

// Squares 0..n-1 on the device; 0 when every result is right.
static int squares(int n)
{
    std::vector<int> h(n), back(n, -1);
    for (int i = 0; i < n; i++)
        h[i] = i;
    int *in, *out;
    if (cudaMalloc(&in, n * sizeof(int)) != cudaSuccess ||
        cudaMalloc(&out, n * sizeof(int)) != cudaSuccess ||
        cudaMemcpy(in, h.data(), n * sizeof(int), cudaMemcpyHostToDevice) != cudaSuccess)
        return 1;
    square<<<(n + 127) / 128, 128>>>(in, out, n);
    if (cudaMemcpy(back.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess)
        return 2;
    for (int i = 0; i < n; i++)
        if (back[i] != i * i)
            return 3;
    cudaFree(in);
    cudaFree(out);
    return 0;
}

// Runs fn in a forked child; its exit status.
template <typename F> static int in_child(F fn)
{
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed");
    if (pid == 0)
        _exit(fn());
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid failed");
    CHECK(WIFEXITED(status), "the child did not exit (status %#x)", status);
    return WEXITSTATUS(status);
}

int main()
{
    // before the parent touched CUDA: the child is a CUDA program of its own
    int before = in_child([] { return squares(1000); });
    CHECK(before == 0, "a child forked before CUDA was used failed to compute (%d)", before);

    CHECK(squares(2000) == 0, "the parent failed to compute");

    // after: CUDA refuses at once in the child, and the parent's connection stays its own
    int after = in_child([] {
        int *p = nullptr;
        cudaError_t e = cudaMalloc(&p, 4096);
        return e == cudaSuccess ? 10 : 0;
    });
    CHECK(after == 0, "a child forked after CUDA was used could allocate (%d)", after);
    CHECK(squares(3000) == 0, "the parent failed to compute after its child exited");
    printf("forks: all checks passed\n");
    return 0;
}
