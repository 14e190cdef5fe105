// mapped: page-locked host memory that kernels read and write through the program's own
// pointer (mapped host memory): cudaHostAlloc(cudaHostAllocMapped) and cudaMallocHost with
// cudaHostGetDevicePointer, kernels writing and reading it across a 4 MiB buffer, memsets
// and device-to-device copies naming it as device memory, many
// buffers allocated, freed and allocated again (none overlaps another, none loses its
// contents), pointer attributes, and the errors: flags, memory that is not page-locked,
// freed memory. The argument says where the program runs:
//   native   NVIDIA's driver: all page-locked memory is mapped, registered memory too
//   shared   through the stub, with the server on this host sharing memory: as native,
//            but memory the program registered (cudaHostRegister) is its own pages,
//            which the server's device cannot reach (cudaErrorNotSupported)
//   remote   through the stub without shared memory (another host): the device reaches
//            no page-locked memory (cudaErrorNotSupported); copies still work
//   limited N  through the stub, against a server that lets the session share only so
//            much (--max-shared): N more 8 MiB buffers are mapped, the next is not
#include "cr_test.h"

#include <vector>

__global__ void fill(unsigned *p, unsigned n, unsigned seed)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = i * 2654435761u + seed;
}

__global__ void sum(const unsigned *p, unsigned n, unsigned long long *out)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(out, (unsigned long long)p[i]);
}

static unsigned expected(unsigned i, unsigned seed)
{
    return i * 2654435761u + seed;
}

static void check_filled(const unsigned *h, unsigned n, unsigned seed, const char *what)
{
    for (unsigned i = 0; i < n; i++)
        CHECK(h[i] == expected(i, seed), "%s: element %u of %u is %u, expected %u", what, i, n,
              h[i], expected(i, seed));
}

// A kernel writes the buffer through the device pointer, the host reads it; the host writes,
// a kernel reads it through the host's own pointer and sums it.
static void round_trip(unsigned *h, unsigned n, unsigned seed)
{
    unsigned *d = nullptr;
    CHECK_CUDA(cudaHostGetDevicePointer((void **)&d, h, 0));
    CHECK(d == h, "device pointer %p of page-locked %p differs (unified addressing)", (void *)d,
          (void *)h);
    unsigned *inside = nullptr;
    CHECK_CUDA(cudaHostGetDevicePointer((void **)&inside, h + n / 2, 0));
    CHECK(inside == h + n / 2, "device pointer of %p inside is %p", (void *)(h + n / 2),
          (void *)inside);
    fill<<<(n + 255) / 256, 256>>>(d, n, seed);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    check_filled(h, n, seed, "written by a kernel");
    unsigned long long want = 0;
    for (unsigned i = 0; i < n; i++) {
        h[i] = (i * 7 + seed) % 1000;
        want += h[i];
    }
    unsigned long long *dsum = nullptr, got = 0;
    CHECK_CUDA(cudaMalloc(&dsum, sizeof *dsum));
    CHECK_CUDA(cudaMemset(dsum, 0, sizeof *dsum));
    sum<<<(n + 255) / 256, 256>>>(h, n, dsum);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(&got, dsum, sizeof got, cudaMemcpyDeviceToHost));
    CHECK(got == want, "a kernel summed the host's values to %llu, expected %llu", got, want);
    CHECK_CUDA(cudaFree(dsum));
}

// Memsets and device-to-device copies may name mapped memory as device memory.
static void as_device_memory(unsigned *h, unsigned n)
{
    CHECK_CUDA(cudaMemset(h, 0x5a, n * sizeof *h));
    CHECK_CUDA(cudaDeviceSynchronize());
    for (unsigned i = 0; i < n; i++)
        CHECK(h[i] == 0x5a5a5a5au, "a memset of mapped memory left element %u at %#x", i, h[i]);
    unsigned *dev = nullptr;
    CHECK_CUDA(cudaMalloc(&dev, n * sizeof *h));
    for (unsigned i = 0; i < n; i++)
        h[i] = expected(i, 9);
    CHECK_CUDA(cudaMemcpy(dev, h, n * sizeof *h, cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaDeviceSynchronize()); // a device-to-device copy may return before it ran
    memset(h, 0, n * sizeof *h);
    CHECK_CUDA(cudaMemcpy(h, dev, n * sizeof *h, cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaDeviceSynchronize());
    check_filled(h, n, 9, "copied device to device through mapped memory and back");
    CHECK_CUDA(cudaFree(dev));
}

static void mapped_buffer(bool reached)
{
    const unsigned n = (1u << 20) + 123; // a bit over 4 MiB
    unsigned *h = nullptr;
    CHECK_CUDA(cudaHostAlloc(&h, n * sizeof *h, cudaHostAllocMapped));
    if (reached) {
        round_trip(h, n, 7);
        as_device_memory(h, n);
        cudaPointerAttributes a;
        CHECK_CUDA(cudaPointerGetAttributes(&a, h));
        CHECK(a.type == cudaMemoryTypeHost && a.devicePointer == h && a.hostPointer == h,
              "attributes of mapped %p: type %d, device %p, host %p", (void *)h, (int)a.type,
              a.devicePointer, a.hostPointer);
    } else {
        void *d = nullptr;
        EXPECT_CUDA_ERROR(cudaHostGetDevicePointer(&d, h, 0), cudaErrorNotSupported);
        EXPECT_CUDA_ERROR(cudaMemset(h, 0, n * sizeof *h), cudaErrorInvalidValue);
        // the memory is still page-locked memory for copies
        for (unsigned i = 0; i < n; i++)
            h[i] = expected(i, 3);
        unsigned *dev = nullptr;
        CHECK_CUDA(cudaMalloc(&dev, n * sizeof *h));
        CHECK_CUDA(cudaMemcpy(dev, h, n * sizeof *h, cudaMemcpyHostToDevice));
        memset(h, 0, n * sizeof *h);
        CHECK_CUDA(cudaMemcpy(h, dev, n * sizeof *h, cudaMemcpyDeviceToHost));
        check_filled(h, n, 3, "copied there and back");
        CHECK_CUDA(cudaFree(dev));
    }
    void *d = nullptr;
    EXPECT_CUDA_ERROR(cudaHostGetDevicePointer(&d, h, 1), cudaErrorInvalidValue);
    CHECK_CUDA(cudaFreeHost(h));
    EXPECT_CUDA_ERROR(cudaHostGetDevicePointer(&d, h, 0), cudaErrorInvalidValue);
    (void)cudaGetLastError(); // the errors expected above are not a launch's
}

// Buffers of many sizes, half freed and more allocated in their place: every live one
// keeps what its kernel wrote.
static void many_buffers()
{
    struct buffer {
        unsigned *h;
        unsigned n, seed;
    };
    std::vector<buffer> live;
    auto add = [&](unsigned n, unsigned seed) {
        unsigned *h = nullptr;
        CHECK_CUDA(cudaMallocHost(&h, n * sizeof *h));
        unsigned *d = nullptr;
        CHECK_CUDA(cudaHostGetDevicePointer((void **)&d, h, 0));
        CHECK(d == h, "device pointer %p of %p", (void *)d, (void *)h);
        for (const buffer &b : live)
            CHECK((uintptr_t)(h + n) <= (uintptr_t)b.h || (uintptr_t)(b.h + b.n) <= (uintptr_t)h,
                  "page-locked %p+%u overlaps %p+%u", (void *)h, n, (void *)b.h, b.n);
        fill<<<(n + 255) / 256, 256>>>(d, n, seed);
        CHECK_CUDA(cudaGetLastError());
        live.push_back({h, n, seed});
    };
    for (unsigned i = 0; i < 24; i++)
        add(1000 + i * 4099, 100 + i);
    CHECK_CUDA(cudaDeviceSynchronize());
    for (size_t i = 1; i < live.size(); i++) { // every other one goes
        CHECK_CUDA(cudaFreeHost(live[i].h));
        live.erase(live.begin() + (long)i);
    }
    for (unsigned i = 0; i < 16; i++)
        add(500 + i * 8191, 200 + i);
    CHECK_CUDA(cudaDeviceSynchronize());
    for (const buffer &b : live)
        check_filled(b.h, b.n, b.seed, "one of many buffers");
    for (const buffer &b : live)
        CHECK_CUDA(cudaFreeHost(b.h));
}

static void errors(bool native)
{
    void *d = nullptr;
    std::vector<unsigned> plain(1024);
    EXPECT_CUDA_ERROR(cudaHostGetDevicePointer(&d, plain.data(), 0), cudaErrorInvalidValue);
    void *dev = nullptr;
    CHECK_CUDA(cudaMalloc(&dev, 4096));
    EXPECT_CUDA_ERROR(cudaHostGetDevicePointer(&d, dev, 0), cudaErrorInvalidValue);
    CHECK_CUDA(cudaFree(dev));
    // memory the program already had, registered: mapped natively, its own pages remotely
    const size_t size = 1 << 20;
    void *own = aligned_alloc(4096, size);
    CHECK(own != nullptr, "aligned_alloc");
    CHECK_CUDA(cudaHostRegister(own, size, cudaHostRegisterMapped));
    if (native) {
        CHECK_CUDA(cudaHostGetDevicePointer(&d, own, 0));
        CHECK(d == own, "device pointer %p of registered %p", d, own);
    } else {
        EXPECT_CUDA_ERROR(cudaHostGetDevicePointer(&d, own, 0), cudaErrorNotSupported);
    }
    CHECK_CUDA(cudaHostUnregister(own));
    EXPECT_CUDA_ERROR(cudaHostGetDevicePointer(&d, own, 0), cudaErrorInvalidValue);
    free(own);
}

// Against a server that lets a session share `reach` more 8 MiB buffers (--max-shared):
// those are mapped, the next is not (yet still page-locked memory for copies), and one
// freed makes room again.
static void limited(unsigned reach)
{
    const size_t size = 8u << 20;
    std::vector<void *> mapped;
    void *d = nullptr;
    for (unsigned i = 0; i < reach; i++) {
        void *h = nullptr;
        CHECK_CUDA(cudaMallocHost(&h, size));
        CHECK_CUDA(cudaHostGetDevicePointer(&d, h, 0));
        mapped.push_back(h);
    }
    void *over = nullptr;
    CHECK_CUDA(cudaMallocHost(&over, size));
    EXPECT_CUDA_ERROR(cudaHostGetDevicePointer(&d, over, 0), cudaErrorNotSupported);
    cudaGetLastError();
    CHECK_CUDA(cudaFreeHost(mapped.back()));
    mapped.pop_back();
    void *again = nullptr;
    CHECK_CUDA(cudaMallocHost(&again, size));
    CHECK_CUDA(cudaHostGetDevicePointer(&d, again, 0));
    mapped.push_back(again);
    // the buffer past the limit is page-locked memory all the same
    unsigned *dev = nullptr, *in = (unsigned *)over, *back = (unsigned *)mapped[0];
    const unsigned n = (unsigned)(size / sizeof *in);
    for (unsigned i = 0; i < n; i++)
        in[i] = expected(i, 5);
    CHECK_CUDA(cudaMalloc(&dev, size));
    CHECK_CUDA(cudaMemcpy(dev, in, size, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(back, dev, size, cudaMemcpyDeviceToHost));
    check_filled(back, n, 5, "copied from memory past the limit and back");
    CHECK_CUDA(cudaFree(dev));
    CHECK_CUDA(cudaFreeHost(over));
    for (void *h : mapped)
        CHECK_CUDA(cudaFreeHost(h));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "limited") == 0 && argc > 2) {
        limited((unsigned)atoi(argv[2]));
        printf("mapped: all checks passed (limited to %s buffers)\n", argv[2]);
        return 0;
    }
    bool native = strcmp(mode, "native") == 0, shared = strcmp(mode, "shared") == 0;
    CHECK(native || shared || strcmp(mode, "remote") == 0,
          "usage: mapped native|shared|remote (where it runs)");
    mapped_buffer(native || shared);
    if (native || shared)
        many_buffers();
    errors(native);
    printf("mapped: all checks passed (%s)\n", mode);
    return 0;
}
