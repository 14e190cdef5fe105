// Copies in both directions, every host memory kind (pageable, cudaMallocHost,
// cudaHostAlloc), synchronous and asynchronous, at odd sizes and odd offsets on both
// sides, from a few bytes to beyond several chunks and staging areas; then the same from
// several threads at once. Each copy lands between guard bytes that must survive, and is
// read back through another path than the one that wrote it: a path that misplaced bytes
// would show. Run over TCP, over a Unix socket with and without shared memory (run.py
// options select them), the results must be the same.
#include <pthread.h>

#include <vector>

#include "cr_test.h"

enum HostKind { PAGEABLE, MALLOC_HOST, HOST_ALLOC, HOST_KINDS };
static const char *kind_name[] = {"pageable", "cudaMallocHost", "cudaHostAlloc"};

// A host buffer of a kind, with `size` usable bytes after `offset`.
struct HostBuffer {
    HostKind kind;
    unsigned char *base = nullptr;
    size_t offset;

    HostBuffer(HostKind k, size_t size, size_t off) : kind(k), offset(off)
    {
        size_t total = size + off + 64;
        if (k == PAGEABLE)
            base = (unsigned char *)malloc(total);
        else if (k == MALLOC_HOST)
            CHECK_CUDA(cudaMallocHost(&base, total));
        else
            CHECK_CUDA(cudaHostAlloc(&base, total, cudaHostAllocPortable));
        CHECK(base != nullptr, "no host memory");
    }
    ~HostBuffer()
    {
        if (kind == PAGEABLE)
            free(base);
        else
            CHECK_CUDA(cudaFreeHost(base));
    }
    unsigned char *data() { return base + offset; }
};

static unsigned char pattern(size_t i, unsigned seed)
{
    return (unsigned char)((i * 131 + seed * 17 + (i >> 9)) ^ (i >> 17));
}

// Reads device bytes through small synchronous copies (small copies take the plain
// socket path whatever the transport), to check what the copy under test wrote.
static void read_small(void *dst, const unsigned char *src, size_t n)
{
    for (size_t off = 0; off < n; off += 4096) {
        size_t len = n - off < 4096 ? n - off : 4096;
        CHECK_CUDA(cudaMemcpy((unsigned char *)dst + off, src + off, len,
                              cudaMemcpyDeviceToHost));
    }
}

static const size_t GUARD = 256;

// One round trip: host (kind_in) -> device at dev_off -> host (kind_out), checked.
static void round_trip(HostKind kind_in, HostKind kind_out, size_t size, size_t host_off,
                       size_t dev_off, bool async, cudaStream_t stream, unsigned seed)
{
    unsigned char *dev;
    size_t dev_size = dev_off + size + GUARD;
    CHECK_CUDA(cudaMalloc(&dev, dev_size));
    CHECK_CUDA(cudaMemset(dev, 0x5a, dev_size));
    CHECK_CUDA(cudaDeviceSynchronize()); // a per-thread default stream orders no other stream

    HostBuffer in(kind_in, size, host_off), out(kind_out, size, host_off + 3);
    for (size_t i = 0; i < size; i++)
        in.data()[i] = pattern(i, seed);
    memset(out.base, 0xee, size + out.offset + 64);

    if (async) {
        CHECK_CUDA(cudaMemcpyAsync(dev + dev_off, in.data(), size, cudaMemcpyHostToDevice,
                                   stream));
        CHECK_CUDA(cudaMemcpyAsync(out.data(), dev + dev_off, size, cudaMemcpyDeviceToHost,
                                   stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
    } else {
        CHECK_CUDA(cudaMemcpy(dev + dev_off, in.data(), size, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(out.data(), dev + dev_off, size, cudaMemcpyDeviceToHost));
    }
    const char *what = async ? "async" : "sync";
    for (size_t i = 0; i < size; i++)
        CHECK(out.data()[i] == pattern(i, seed),
              "%s %s -> %s, %zu bytes (host +%zu, device +%zu): byte %zu is %#x, not %#x",
              what, kind_name[kind_in], kind_name[kind_out], size, host_off, dev_off, i,
              out.data()[i], pattern(i, seed));
    for (size_t i = 0; i < out.offset; i++)
        CHECK(out.base[i] == 0xee, "%s %zu bytes: wrote before the destination", what, size);
    for (size_t i = 0; i < 64; i++)
        CHECK(out.data()[size + i] == 0xee, "%s %zu bytes: wrote past the destination", what,
              size);

    // the device side, read through small copies: the guards and the copy's two ends (all
    // of it when small)
    std::vector<unsigned char> check(dev_size, 0);
    size_t head = dev_off + (size < 8192 ? size : 8192);
    size_t tail = dev_off + size > 8192 ? dev_off + size - 8192 : 0;
    tail = tail > head ? tail : head;
    read_small(check.data(), dev, head);
    read_small(check.data() + tail, dev + tail, dev_size - tail);
    for (size_t i = 0; i < dev_size; i++) {
        if (i >= head && i < tail)
            continue;
        unsigned char want = i < dev_off || i >= dev_off + size ? 0x5a : pattern(i - dev_off, seed);
        CHECK(check[i] == want, "%s %zu bytes (device +%zu): device byte %zu is %#x, not %#x",
              what, size, dev_off, i, check[i], want);
    }
    CHECK_CUDA(cudaFree(dev));
}

struct ThreadJob {
    int index;
    int failed;
};

// Several threads copying large buffers at once: more than there are staging areas.
static void *thread_main(void *arg)
{
    ThreadJob *job = (ThreadJob *)arg;
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int round = 0; round < 3; round++) {
        size_t size = (3u << 20) + 4099 * (size_t)job->index + (size_t)round;
        round_trip(PAGEABLE, PAGEABLE, size, (size_t)job->index, 5, false, stream,
                   (unsigned)(job->index * 7 + round));
        round_trip(MALLOC_HOST, PAGEABLE, size / 2 + 1, 1, 0, true, stream,
                   (unsigned)(job->index * 11 + round));
    }
    CHECK_CUDA(cudaStreamDestroy(stream));
    return nullptr;
}

int main()
{
    const size_t sizes[] = {1, 7, 4095, 4097, 16385, 65537, (256u << 10) + 3, (1u << 20) + 7,
                            2u << 20, (2u << 20) + 1, (5u << 20) + 13, (17u << 20) + 3};
    const size_t offsets[][2] = {{0, 0}, {1, 3}, {4093, 4097}};
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    unsigned seed = 1;
    int count = 0;
    for (size_t size : sizes)
        for (auto &off : offsets)
            for (int in = 0; in < HOST_KINDS; in++)
                for (int async = 0; async < 2; async++) {
                    // every destination kind for small sizes; one other for large ones
                    for (int out = 0; out < HOST_KINDS; out++) {
                        if (size > (1u << 20) && out != (in + 1) % HOST_KINDS)
                            continue;
                        round_trip((HostKind)in, (HostKind)out, size, off[0], off[1],
                                   async != 0, async ? stream : 0, seed++);
                        count++;
                    }
                }
    CHECK_CUDA(cudaStreamDestroy(stream));
    printf("%d round trips checked\n", count);

    enum { THREADS = 6 };
    pthread_t threads[THREADS];
    ThreadJob jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = {i, 0};
        CHECK(pthread_create(&threads[i], nullptr, thread_main, &jobs[i]) == 0, "thread");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], nullptr);
    printf("%d threads copied concurrently\n", THREADS);
    return 0;
}
