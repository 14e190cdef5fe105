// stream_alloc: stream-ordered allocation: cudaMallocAsync/cudaFreeAsync with data round
// trips (a stream and the NULL stream), the device's default and current pool, the release
// threshold attribute round trip, cudaMallocFromPoolAsync with the pool's used/reserved
// memory attributes following the allocations, cudaMemPoolTrimTo, and (where supported) a
// pool of our own made the device's current pool.
#include "cr_test.h"

#include <cstdint>
#include <vector>

static void fill(std::vector<unsigned char> &v, unsigned seed)
{
    uint32_t x = seed;
    for (auto &b : v) {
        x = x * 1103515245u + 12345u;
        b = (unsigned char)(x >> 16);
    }
}

static void round_trip(void *d, size_t n, cudaStream_t s, unsigned seed, const char *what)
{
    std::vector<unsigned char> in(n), out(n, 0);
    fill(in, seed);
    CHECK_CUDA(cudaMemcpyAsync(d, in.data(), n, cudaMemcpyHostToDevice, s));
    CHECK_CUDA(cudaMemcpyAsync(out.data(), d, n, cudaMemcpyDeviceToHost, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(memcmp(in.data(), out.data(), n) == 0, "%s: data differs after a round trip", what);
}

static uint64_t pool_attr(cudaMemPool_t pool, cudaMemPoolAttr attr)
{
    uint64_t v = ~0ull;
    CHECK_CUDA(cudaMemPoolGetAttribute(pool, attr, &v));
    return v;
}

// Allocations from `pool` (nothing else allocated from it meanwhile): its used and reserved
// memory follow, and cudaMemPoolTrimTo(0) gives back all of it.
static void exercise_pool(cudaMemPool_t pool, cudaStream_t s, const char *what)
{
    CHECK(pool_attr(pool, cudaMemPoolAttrUsedMemCurrent) == 0, "%s: idle pool uses %llu bytes",
          what, (unsigned long long)pool_attr(pool, cudaMemPoolAttrUsedMemCurrent));
    const size_t n1 = 2 << 20, n2 = 3 << 20 | 5;
    void *p1, *p2;
    CHECK_CUDA(cudaMallocFromPoolAsync(&p1, n1, pool, s));
    CHECK_CUDA(cudaMallocFromPoolAsync(&p2, n2, pool, s));
    round_trip(p1, n1, s, 11, "pool allocation 1");
    round_trip(p2, n2, s, 12, "pool allocation 2");
    uint64_t used = pool_attr(pool, cudaMemPoolAttrUsedMemCurrent);
    uint64_t reserved = pool_attr(pool, cudaMemPoolAttrReservedMemCurrent);
    CHECK(used >= n1 + n2, "%s uses %llu bytes with %zu allocated", what,
          (unsigned long long)used, n1 + n2);
    CHECK(reserved >= used, "%s reserves %llu < used %llu", what, (unsigned long long)reserved,
          (unsigned long long)used);
    CHECK_CUDA(cudaFreeAsync(p1, s));
    CHECK_CUDA(cudaFreeAsync(p2, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(pool_attr(pool, cudaMemPoolAttrUsedMemCurrent) == 0, "%s still uses %llu bytes", what,
          (unsigned long long)pool_attr(pool, cudaMemPoolAttrUsedMemCurrent));
    CHECK(pool_attr(pool, cudaMemPoolAttrUsedMemHigh) >= n1 + n2, "%s: used high mark %llu",
          what, (unsigned long long)pool_attr(pool, cudaMemPoolAttrUsedMemHigh));
    CHECK_CUDA(cudaMemPoolTrimTo(pool, 0));
    CHECK(pool_attr(pool, cudaMemPoolAttrReservedMemCurrent) == 0,
          "%s reserves %llu bytes after cudaMemPoolTrimTo(0)", what,
          (unsigned long long)pool_attr(pool, cudaMemPoolAttrReservedMemCurrent));
}

int main()
{
    int supported = 0;
    CHECK_CUDA(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0));
    CHECK(supported == 1, "cudaDevAttrMemoryPoolsSupported = %d", supported);

    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    // cudaMallocAsync / cudaFreeAsync on a stream and on the NULL stream
    const size_t sizes[] = {1, 4096, 3 * 1024 * 1024 + 7, 12u << 20};
    for (size_t n : sizes) {
        void *d = nullptr;
        CHECK_CUDA(cudaMallocAsync(&d, n, s));
        CHECK(d != nullptr, "cudaMallocAsync(%zu) gave NULL", n);
        round_trip(d, n, s, (unsigned)n, "cudaMallocAsync memory");
        CHECK_CUDA(cudaFreeAsync(d, s));
    }
    CHECK_CUDA(cudaStreamSynchronize(s));
    {
        void *a = nullptr, *b = nullptr;
        CHECK_CUDA(cudaMallocAsync(&a, 1 << 20, 0));
        CHECK_CUDA(cudaMallocAsync(&b, 1 << 20, 0));
        CHECK(a && b && a != b, "two live stream allocations: %p %p", a, b);
        CHECK((uintptr_t)a + (1 << 20) <= (uintptr_t)b || (uintptr_t)b + (1 << 20) <= (uintptr_t)a,
              "two live stream allocations overlap: %p %p", a, b);
        round_trip(a, 1 << 20, 0, 1, "cudaMallocAsync on the NULL stream");
        CHECK_CUDA(cudaMemcpyAsync(b, a, 1 << 20, cudaMemcpyDeviceToDevice, 0));
        std::vector<unsigned char> want(1 << 20), got(1 << 20);
        fill(want, 1);
        CHECK_CUDA(cudaMemcpy(got.data(), b, 1 << 20, cudaMemcpyDeviceToHost));
        CHECK(memcmp(want.data(), got.data(), 1 << 20) == 0, "D2D between stream allocations");
        cudaPointerAttributes pa;
        CHECK_CUDA(cudaPointerGetAttributes(&pa, a));
        CHECK(pa.type == cudaMemoryTypeDevice, "stream allocation has memory type %d",
              (int)pa.type);
        CHECK_CUDA(cudaFreeAsync(a, 0));
        CHECK_CUDA(cudaFreeAsync(b, 0));
        CHECK_CUDA(cudaStreamSynchronize(0));
    }

    // the default pool, and its release threshold
    cudaMemPool_t def = nullptr, cur = nullptr;
    CHECK_CUDA(cudaDeviceGetDefaultMemPool(&def, 0));
    CHECK_CUDA(cudaDeviceGetMemPool(&cur, 0));
    CHECK(def != nullptr && cur == def, "default pool %p, current pool %p", (void *)def,
          (void *)cur);
    uint64_t threshold = 64ull << 20;
    CHECK_CUDA(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &threshold));
    CHECK(pool_attr(def, cudaMemPoolAttrReleaseThreshold) == threshold,
          "release threshold reads %llu, set %llu",
          (unsigned long long)pool_attr(def, cudaMemPoolAttrReleaseThreshold),
          (unsigned long long)threshold);
    threshold = 0;
    CHECK_CUDA(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &threshold));
    CHECK(pool_attr(def, cudaMemPoolAttrReleaseThreshold) == 0, "release threshold not reset");
    CHECK_CUDA(cudaMemPoolTrimTo(def, 0));
    exercise_pool(def, s, "default pool");

    // a pool of our own, made the device's current pool
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    cudaError_t e = cudaMemPoolCreate(&pool, &props);
    if (e == cudaErrorNotSupported) {
        printf("NOTE: cudaMemPoolCreate is not supported here; own-pool checks skipped\n");
        (void)cudaGetLastError();
    } else {
        CHECK_CUDA(e);
        CHECK(pool != def, "cudaMemPoolCreate returned the default pool");
        threshold = 32ull << 20;
        CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
        CHECK(pool_attr(pool, cudaMemPoolAttrReleaseThreshold) == threshold,
              "own pool release threshold");
        exercise_pool(pool, s, "own pool");
        CHECK_CUDA(cudaDeviceSetMemPool(0, pool));
        CHECK_CUDA(cudaDeviceGetMemPool(&cur, 0));
        CHECK(cur == pool, "cudaDeviceGetMemPool after cudaDeviceSetMemPool");
        void *p3;
        CHECK_CUDA(cudaMallocAsync(&p3, 1 << 20, s));
        CHECK_CUDA(cudaStreamSynchronize(s));
        CHECK(pool_attr(pool, cudaMemPoolAttrUsedMemCurrent) >= (1 << 20),
              "cudaMallocAsync did not draw from the current pool");
        round_trip(p3, 1 << 20, s, 13, "current pool allocation");
        CHECK_CUDA(cudaFreeAsync(p3, s));
        CHECK_CUDA(cudaStreamSynchronize(s));
        CHECK_CUDA(cudaDeviceSetMemPool(0, def));
        CHECK_CUDA(cudaMemPoolDestroy(pool));
    }

    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaGetLastError());
    printf("stream_alloc: all checks passed\n");
    return 0;
}
