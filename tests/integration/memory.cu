// memory: device allocations (1 B .. 64 MiB, distinct and non-overlapping), H2D/D2H round
// trips of patterns at odd sizes and offsets (one bigger than the 8 MiB wire chunk), D2D,
// cudaMemcpyDefault in every direction, partial cudaMemset with the bytes around intact,
// pitched 2D allocations/copies/memsets on sub-rectangles, 2D copies larger than one wire
// message (whole rows, and rows wider than one), 3D copies with positions, pinned
// and registered host memory with async copies, and cudaPointerGetAttributes.
#include "cr_test.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <unistd.h>

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (unsigned char)(x >> 24);
    }
}

static void expect_equal(const unsigned char *got, const unsigned char *want, size_t n,
                         const char *what)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && bad++ == 0)
            first = i;
    CHECK(bad == 0, "%s: %zu of %zu bytes differ, the first at %zu is 0x%02x, expected 0x%02x",
          what, bad, n, first, got[first], want[first]);
}

static void allocations()
{
    const size_t sizes[] = {1, 2, 3, 255, 256, 4096, 65537, (1u << 20) + 1, 16u << 20, 64u << 20};
    const int n = sizeof sizes / sizeof sizes[0];
    void *ptrs[n];
    for (int i = 0; i < n; i++) {
        ptrs[i] = nullptr;
        CHECK_CUDA(cudaMalloc(&ptrs[i], sizes[i]));
        CHECK(ptrs[i] != nullptr, "cudaMalloc(%zu) returned NULL", sizes[i]);
        CHECK((uintptr_t)ptrs[i] % 256 == 0, "cudaMalloc(%zu) = %p not 256-byte aligned",
              sizes[i], ptrs[i]);
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            uintptr_t a = (uintptr_t)ptrs[i], b = (uintptr_t)ptrs[j];
            CHECK(a + sizes[i] <= b || b + sizes[j] <= a, "allocations %p+%zu and %p+%zu overlap",
                  ptrs[i], sizes[i], ptrs[j], sizes[j]);
        }
    // the last byte of each allocation is usable
    for (int i = 0; i < n; i++) {
        unsigned char v = (unsigned char)(0x40 + i), back = 0;
        CHECK_CUDA(cudaMemcpy((char *)ptrs[i] + sizes[i] - 1, &v, 1, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(&back, (char *)ptrs[i] + sizes[i] - 1, 1, cudaMemcpyDeviceToHost));
        CHECK(back == v, "last byte of allocation %d: 0x%02x", i, back);
    }
    size_t free_before, free_after, total;
    CHECK_CUDA(cudaMemGetInfo(&free_before, &total));
    for (int i = 0; i < n; i++)
        CHECK_CUDA(cudaFree(ptrs[i]));
    CHECK_CUDA(cudaMemGetInfo(&free_after, &total));
    CHECK(free_after >= free_before + (64u << 20), "freeing 80 MiB raised free memory from %zu "
          "to %zu only", free_before, free_after);
}

static void round_trips()
{
    const size_t cap = 24u << 20;
    unsigned char *d;
    CHECK_CUDA(cudaMalloc(&d, cap));
    std::vector<unsigned char> src(cap), dst(cap);
    const size_t sizes[] = {1, 4095, (1u << 20) + 3, 20u << 20};
    const size_t offsets[] = {0, 1, 7, 4093};
    unsigned seed = 1;
    for (size_t n : sizes)
        for (size_t off : offsets) {
            fill(src.data(), n, seed++);
            std::fill(dst.begin(), dst.begin() + n, 0);
            CHECK_CUDA(cudaMemcpy(d + off, src.data(), n, cudaMemcpyHostToDevice));
            CHECK_CUDA(cudaMemcpy(dst.data(), d + off, n, cudaMemcpyDeviceToHost));
            char what[64];
            snprintf(what, sizeof what, "round trip of %zu bytes at offset %zu", n, off);
            expect_equal(dst.data(), src.data(), n, what);
        }
    // an odd host offset too
    fill(src.data(), 100003, 77);
    CHECK_CUDA(cudaMemcpy(d + 5, src.data() + 3, 100000, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dst.data() + 11, d + 5, 100000, cudaMemcpyDeviceToHost));
    expect_equal(dst.data() + 11, src.data() + 3, 100000, "odd host offsets");

    // D2D: a 20 MiB pattern copied between allocations, and an overlapping-free sub range
    unsigned char *e;
    CHECK_CUDA(cudaMalloc(&e, cap));
    fill(src.data(), cap, 99);
    CHECK_CUDA(cudaMemcpy(d, src.data(), cap, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(e, 0x11, cap));
    CHECK_CUDA(cudaMemcpy(e + 3, d + 1000, 20u << 20, cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaMemcpy(dst.data(), e, cap, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < cap; i++) {
        unsigned char want = (i >= 3 && i < 3 + (20u << 20)) ? src[i - 3 + 1000] : 0x11;
        CHECK(dst[i] == want, "D2D: byte %zu is 0x%02x, expected 0x%02x", i, dst[i], want);
    }
    CHECK_CUDA(cudaFree(e));
    CHECK_CUDA(cudaFree(d));
}

static void default_direction()
{
    const size_t n = 3 * 1024 * 1024 + 17;
    std::vector<unsigned char> a(n), b(n), c(n);
    unsigned char *d1, *d2;
    CHECK_CUDA(cudaMalloc(&d1, n));
    CHECK_CUDA(cudaMalloc(&d2, n));
    fill(a.data(), n, 5);
    CHECK_CUDA(cudaMemcpy(d1, a.data(), n, cudaMemcpyDefault));  // H2D
    CHECK_CUDA(cudaMemcpy(d2, d1, n, cudaMemcpyDefault));        // D2D
    CHECK_CUDA(cudaMemcpy(b.data(), d2, n, cudaMemcpyDefault));  // D2H
    expect_equal(b.data(), a.data(), n, "cudaMemcpyDefault H2D/D2D/D2H");
    CHECK_CUDA(cudaMemcpy(c.data(), b.data(), n, cudaMemcpyDefault));  // H2H
    expect_equal(c.data(), a.data(), n, "cudaMemcpyDefault H2H");
    // H2H with an explicit kind
    std::fill(c.begin(), c.end(), 0);
    CHECK_CUDA(cudaMemcpy(c.data(), a.data(), n, cudaMemcpyHostToHost));
    expect_equal(c.data(), a.data(), n, "cudaMemcpyHostToHost");
    // default direction inside allocations (pointers not at the start)
    std::fill(b.begin(), b.end(), 0);
    CHECK_CUDA(cudaMemcpy(d2 + 1001, a.data() + 3, 5000, cudaMemcpyDefault));
    CHECK_CUDA(cudaMemcpy(d1 + 7, d2 + 1001, 5000, cudaMemcpyDefault));
    CHECK_CUDA(cudaMemcpy(b.data(), d1 + 7, 5000, cudaMemcpyDefault));
    expect_equal(b.data(), a.data() + 3, 5000, "cudaMemcpyDefault with interior pointers");
    // async default copies on the legacy stream
    std::fill(b.begin(), b.end(), 0);
    CHECK_CUDA(cudaMemcpyAsync(d2, a.data() + 1, 4096, cudaMemcpyDefault, 0));
    CHECK_CUDA(cudaMemcpyAsync(b.data(), d2, 4096, cudaMemcpyDefault, 0));
    CHECK_CUDA(cudaStreamSynchronize(0));
    expect_equal(b.data(), a.data() + 1, 4096, "async cudaMemcpyDefault");
    CHECK_CUDA(cudaFree(d1));
    CHECK_CUDA(cudaFree(d2));
}

static void memsets()
{
    const size_t n = 1 << 20;
    std::vector<unsigned char> model(n), got(n);
    unsigned char *d;
    CHECK_CUDA(cudaMalloc(&d, n));
    fill(model.data(), n, 3);
    CHECK_CUDA(cudaMemcpy(d, model.data(), n, cudaMemcpyHostToDevice));
    struct {
        size_t off, len;
        int value;
    } ranges[] = {{0, 1, 0x00}, {5, 3, 0xff}, {100, 1000, 0x5c}, {4095, 2, 0x01},
                  {65536 + 3, 300001, 0xa7}, {n - 1, 1, 0x42}, {200, 0, 0x99},
                  {777, 64, 0x1ab /* only the low byte counts */}};
    for (auto &r : ranges) {
        CHECK_CUDA(cudaMemset(d + r.off, r.value, r.len));
        memset(model.data() + r.off, r.value & 0xff, r.len);
    }
    CHECK_CUDA(cudaMemcpy(got.data(), d, n, cudaMemcpyDeviceToHost));
    expect_equal(got.data(), model.data(), n, "memsets");
    // async memset on a stream
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));
    CHECK_CUDA(cudaMemsetAsync(d + 33, 0x3c, 10000, s));
    memset(model.data() + 33, 0x3c, 10000);
    CHECK_CUDA(cudaMemcpyAsync(got.data(), d, n, cudaMemcpyDeviceToHost, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_equal(got.data(), model.data(), n, "async memset");
    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaFree(d));
}

static void pitched()
{
    const size_t width = 1000, height = 37;  // bytes, rows
    unsigned char *d;
    size_t pitch = 0;
    CHECK_CUDA(cudaMallocPitch((void **)&d, &pitch, width, height));
    CHECK(pitch >= width, "pitch %zu < width %zu", pitch, width);
    CHECK(pitch % 128 == 0, "pitch %zu not a multiple of 128", pitch);
    // device model: pitch * height bytes
    std::vector<unsigned char> dev(pitch * height), got(pitch * height);
    CHECK_CUDA(cudaMemset(d, 0x77, pitch * height));
    std::fill(dev.begin(), dev.end(), 0x77);

    // full H2D from a host buffer with a larger pitch
    const size_t hpitch = 1203;
    std::vector<unsigned char> host(hpitch * height);
    fill(host.data(), host.size(), 8);
    CHECK_CUDA(cudaMemcpy2D(d, pitch, host.data(), hpitch, width, height,
                            cudaMemcpyHostToDevice));
    for (size_t y = 0; y < height; y++)
        memcpy(&dev[y * pitch], &host[y * hpitch], width);
    CHECK_CUDA(cudaMemcpy(got.data(), d, pitch * height, cudaMemcpyDeviceToHost));
    expect_equal(got.data(), dev.data(), pitch * height, "cudaMemcpy2D H2D (full)");

    // sub-rectangle H2D: 123 bytes x 9 rows at (x 17, y 5) from host (x 3, y 2)
    fill(host.data(), host.size(), 9);
    CHECK_CUDA(cudaMemcpy2D(d + 5 * pitch + 17, pitch, host.data() + 2 * hpitch + 3, hpitch, 123,
                            9, cudaMemcpyHostToDevice));
    for (size_t y = 0; y < 9; y++)
        memcpy(&dev[(5 + y) * pitch + 17], &host[(2 + y) * hpitch + 3], 123);
    CHECK_CUDA(cudaMemcpy(got.data(), d, pitch * height, cudaMemcpyDeviceToHost));
    expect_equal(got.data(), dev.data(), pitch * height, "cudaMemcpy2D H2D (sub-rectangle)");

    // sub-rectangle D2H into a tightly packed host buffer, bytes around untouched
    const size_t w2 = 501, h2 = 20, x2 = 499, y2 = 17;
    std::vector<unsigned char> out(w2 * h2 + 64, 0xee);
    CHECK_CUDA(cudaMemcpy2D(out.data() + 32, w2, d + y2 * pitch + x2, pitch, w2, h2,
                            cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < 32; i++)
        CHECK(out[i] == 0xee && out[32 + w2 * h2 + i] == 0xee, "D2H 2D wrote outside");
    for (size_t y = 0; y < h2; y++)
        expect_equal(&out[32 + y * w2], &dev[(y2 + y) * pitch + x2], w2, "cudaMemcpy2D D2H");

    // D2D between two pitched allocations
    unsigned char *e;
    size_t epitch;
    CHECK_CUDA(cudaMallocPitch((void **)&e, &epitch, 700, 50));
    std::vector<unsigned char> edev(epitch * 50, 0), egot(epitch * 50);
    CHECK_CUDA(cudaMemset2D(e, epitch, 0, 700, 50));
    for (size_t y = 0; y < 50; y++)
        std::fill(&edev[y * epitch], &edev[y * epitch] + 700, 0);
    CHECK_CUDA(cudaMemset(e, 0, epitch * 50));
    std::fill(edev.begin(), edev.end(), 0);
    CHECK_CUDA(cudaMemcpy2D(e + 10 * epitch + 50, epitch, d + 3 * pitch + 300, pitch, 600, 30,
                            cudaMemcpyDeviceToDevice));
    for (size_t y = 0; y < 30; y++)
        memcpy(&edev[(10 + y) * epitch + 50], &dev[(3 + y) * pitch + 300], 600);
    CHECK_CUDA(cudaMemcpy(egot.data(), e, epitch * 50, cudaMemcpyDeviceToHost));
    expect_equal(egot.data(), edev.data(), epitch * 50, "cudaMemcpy2D D2D");

    // cudaMemset2D on a sub-rectangle (and async on a stream)
    CHECK_CUDA(cudaMemset2D(d + 4 * pitch + 250, pitch, 0xc3, 333, 11));
    for (size_t y = 0; y < 11; y++)
        memset(&dev[(4 + y) * pitch + 250], 0xc3, 333);
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));
    CHECK_CUDA(cudaMemset2DAsync(d + 30 * pitch + 1, pitch, 0x0d, 998, 7, s));
    for (size_t y = 0; y < 7; y++)
        memset(&dev[(30 + y) * pitch + 1], 0x0d, 998);
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaMemcpy(got.data(), d, pitch * height, cudaMemcpyDeviceToHost));
    expect_equal(got.data(), dev.data(), pitch * height, "cudaMemset2D");

    // async 2D D2H on the stream
    std::vector<unsigned char> out2(width * height);
    CHECK_CUDA(cudaMemcpy2DAsync(out2.data(), width, d, pitch, width, height,
                                 cudaMemcpyDeviceToHost, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    for (size_t y = 0; y < height; y++)
        expect_equal(&out2[y * width], &dev[y * pitch], width, "cudaMemcpy2DAsync D2H");
    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaFree(e));
    CHECK_CUDA(cudaFree(d));
}

// 2D copies past one message's 64 MiB: the stub sends them as pieces of rows, in order
static void large_2d()
{
    const size_t width = 3000, height = 30000, hpitch = 3011; // 90 MB of rows
    unsigned char *d;
    size_t pitch = 0;
    CHECK_CUDA(cudaMallocPitch((void **)&d, &pitch, width, height));
    std::vector<unsigned char> host(hpitch * height), back(width * height + 16, 0xee);
    fill(host.data(), host.size(), 11);
    CHECK_CUDA(cudaMemcpy2D(d, pitch, host.data(), hpitch, width, height,
                            cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy2D(back.data(), width, d, pitch, width, height,
                            cudaMemcpyDeviceToHost));
    for (size_t y = 0; y < height; y += 997)
        expect_equal(&back[y * width], &host[y * hpitch], width, "large cudaMemcpy2D row");
    expect_equal(&back[(height - 1) * width], &host[(height - 1) * hpitch], width,
                 "large cudaMemcpy2D last row");
    CHECK(back[width * height] == 0xee, "large cudaMemcpy2D wrote past its destination");
    CHECK_CUDA(cudaFree(d));

    // rows wider than one message: pieces of a row's columns
    const size_t wide = (65u << 20) + 3, rows = 2;
    CHECK_CUDA(cudaMallocPitch((void **)&d, &pitch, wide, rows));
    std::vector<unsigned char> in(wide * rows), out(wide * rows);
    fill(in.data(), in.size(), 12);
    CHECK_CUDA(cudaMemcpy2D(d, pitch, in.data(), wide, wide, rows, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy2D(out.data(), wide, d, pitch, wide, rows, cudaMemcpyDeviceToHost));
    expect_equal(out.data(), in.data(), in.size(), "cudaMemcpy2D of 65 MiB rows");
    CHECK_CUDA(cudaFree(d));
}

static void three_d()
{
    const size_t W = 120, H = 20, D = 6;  // bytes, rows, slices
    cudaPitchedPtr dp;
    CHECK_CUDA(cudaMalloc3D(&dp, make_cudaExtent(W, H, D)));
    CHECK(dp.ptr != nullptr && dp.pitch >= W && dp.xsize == W && dp.ysize == H,
          "cudaMalloc3D: ptr %p pitch %zu xsize %zu ysize %zu", dp.ptr, dp.pitch, dp.xsize,
          dp.ysize);
    const size_t slice = dp.pitch * H;
    std::vector<unsigned char> dev(slice * D, 0), got(slice * D);
    CHECK_CUDA(cudaMemset3D(dp, 0, make_cudaExtent(W, H, D)));
    CHECK_CUDA(cudaMemset(dp.ptr, 0, slice * D));

    // host volume with its own pitch and height
    const size_t hp = 130, hh = 25, hd = 8;
    std::vector<unsigned char> host(hp * hh * hd);
    fill(host.data(), host.size(), 31);

    // H2D: 100 x 15 x 4 from host position (7, 3, 2) to device position (11, 4, 1)
    cudaMemcpy3DParms p = {};
    p.srcPtr = make_cudaPitchedPtr(host.data(), hp, hp, hh);
    p.srcPos = make_cudaPos(7, 3, 2);
    p.dstPtr = dp;
    p.dstPos = make_cudaPos(11, 4, 1);
    p.extent = make_cudaExtent(100, 15, 4);
    p.kind = cudaMemcpyHostToDevice;
    CHECK_CUDA(cudaMemcpy3D(&p));
    for (size_t z = 0; z < 4; z++)
        for (size_t y = 0; y < 15; y++)
            memcpy(&dev[(1 + z) * slice + (4 + y) * dp.pitch + 11],
                   &host[(2 + z) * hp * hh + (3 + y) * hp + 7], 100);
    CHECK_CUDA(cudaMemcpy(got.data(), dp.ptr, slice * D, cudaMemcpyDeviceToHost));
    expect_equal(got.data(), dev.data(), slice * D, "cudaMemcpy3D H2D");

    // D2H: the whole volume into a host buffer with another pitch, at a position
    const size_t op = 128, oh = 22, od = 7;
    std::vector<unsigned char> out(op * oh * od, 0x5a), model(op * oh * od, 0x5a);
    cudaMemcpy3DParms q = {};
    q.srcPtr = dp;
    q.dstPtr = make_cudaPitchedPtr(out.data(), op, op, oh);
    q.dstPos = make_cudaPos(2, 1, 1);
    q.extent = make_cudaExtent(W, H, D);
    q.kind = cudaMemcpyDeviceToHost;
    CHECK_CUDA(cudaMemcpy3D(&q));
    for (size_t z = 0; z < D; z++)
        for (size_t y = 0; y < H; y++)
            memcpy(&model[(1 + z) * op * oh + (1 + y) * op + 2], &dev[z * slice + y * dp.pitch],
                   W);
    expect_equal(out.data(), model.data(), out.size(), "cudaMemcpy3D D2H");

    // D2D between 3D allocations, async on a stream, and cudaMemcpyDefault
    cudaPitchedPtr ep;
    CHECK_CUDA(cudaMalloc3D(&ep, make_cudaExtent(W, H, D)));
    const size_t eslice = ep.pitch * H;
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));
    // on s too: with a per-thread default stream nothing orders it before the copy on s
    CHECK_CUDA(cudaMemsetAsync(ep.ptr, 0xff, eslice * D, s));
    std::vector<unsigned char> edev(eslice * D, 0xff), egot(eslice * D);
    cudaMemcpy3DParms r = {};
    r.srcPtr = dp;
    r.srcPos = make_cudaPos(10, 3, 1);
    r.dstPtr = ep;
    r.dstPos = make_cudaPos(0, 0, 2);
    r.extent = make_cudaExtent(105, 16, 4);
    r.kind = cudaMemcpyDefault;
    CHECK_CUDA(cudaMemcpy3DAsync(&r, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaStreamDestroy(s));
    for (size_t z = 0; z < 4; z++)
        for (size_t y = 0; y < 16; y++)
            memcpy(&edev[(2 + z) * eslice + y * ep.pitch], &dev[(1 + z) * slice + (3 + y) * dp.pitch + 10],
                   105);
    CHECK_CUDA(cudaMemcpy(egot.data(), ep.ptr, eslice * D, cudaMemcpyDeviceToHost));
    expect_equal(egot.data(), edev.data(), eslice * D, "cudaMemcpy3DAsync D2D");

    // a single slice (depth 1) at a z position: the slice height still places it
    std::vector<unsigned char> one(W * H);
    fill(one.data(), one.size(), 32);
    cudaMemcpy3DParms t = {};
    t.srcPtr = make_cudaPitchedPtr(one.data(), W, W, H);
    t.dstPtr = ep;
    t.dstPos = make_cudaPos(0, 0, 5);
    t.extent = make_cudaExtent(W, H, 1);
    t.kind = cudaMemcpyHostToDevice;
    CHECK_CUDA(cudaMemcpy3D(&t));
    for (size_t y = 0; y < H; y++)
        memcpy(&edev[5 * eslice + y * ep.pitch], &one[y * W], W);
    CHECK_CUDA(cudaMemcpy(egot.data(), ep.ptr, eslice * D, cudaMemcpyDeviceToHost));
    expect_equal(egot.data(), edev.data(), eslice * D, "cudaMemcpy3D H2D of one slice at z 5");

    CHECK_CUDA(cudaFree(ep.ptr));
    CHECK_CUDA(cudaFree(dp.ptr));
}

static void pinned()
{
    const size_t n = 5 * 1024 * 1024 + 11;
    unsigned char *h1, *h2, *h3;
    CHECK_CUDA(cudaMallocHost(&h1, n));
    CHECK_CUDA(cudaHostAlloc(&h2, n, cudaHostAllocDefault));
    CHECK_CUDA(cudaHostAlloc(&h3, n, cudaHostAllocPortable));
    unsigned flags = 123;
    CHECK_CUDA(cudaHostGetFlags(&flags, h3));
    CHECK(flags & cudaHostAllocPortable, "cudaHostGetFlags = %#x", flags);
    // pageable memory registered with cudaHostRegister
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t rn = (n + page - 1) / page * page;
    unsigned char *reg = (unsigned char *)aligned_alloc(page, rn);
    CHECK(reg, "aligned_alloc");
    CHECK_CUDA(cudaHostRegister(reg, rn, cudaHostRegisterDefault));

    unsigned char *d1, *d2;
    CHECK_CUDA(cudaMalloc(&d1, n));
    CHECK_CUDA(cudaMalloc(&d2, n));
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreate(&s));
    fill(h1, n, 41);
    memset(h2, 0, n);
    CHECK_CUDA(cudaMemcpyAsync(d1, h1, n, cudaMemcpyHostToDevice, s));
    CHECK_CUDA(cudaMemcpyAsync(d2, d1, n, cudaMemcpyDeviceToDevice, s));
    CHECK_CUDA(cudaMemcpyAsync(h2, d2, n, cudaMemcpyDeviceToHost, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_equal(h2, h1, n, "async copies through pinned memory");

    fill(reg, n, 42);
    memset(h3, 0, n);
    CHECK_CUDA(cudaMemcpyAsync(d1 + 1, reg, n - 1, cudaMemcpyDefault, s));
    CHECK_CUDA(cudaMemcpyAsync(h3, d1 + 1, n - 1, cudaMemcpyDefault, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect_equal(h3, reg, n - 1, "async copies through registered memory");

    // pointer attributes
    cudaPointerAttributes a;
    memset(&a, 0x7f, sizeof a);
    CHECK_CUDA(cudaPointerGetAttributes(&a, d1 + 100));
    CHECK(a.type == cudaMemoryTypeDevice, "device pointer: type %d", (int)a.type);
    CHECK(a.device == 0, "device pointer: device %d", a.device);
    CHECK(a.devicePointer == d1 + 100, "device pointer: devicePointer %p, expected %p",
          a.devicePointer, d1 + 100);
    CHECK(a.hostPointer == nullptr, "device pointer: hostPointer %p", a.hostPointer);

    memset(&a, 0x7f, sizeof a);
    CHECK_CUDA(cudaPointerGetAttributes(&a, h1 + 5));
    CHECK(a.type == cudaMemoryTypeHost, "pinned pointer: type %d", (int)a.type);
    CHECK(a.device == 0, "pinned pointer: device %d", a.device);
    CHECK(a.hostPointer == h1 + 5, "pinned pointer: hostPointer %p, expected %p", a.hostPointer,
          h1 + 5);

    memset(&a, 0x7f, sizeof a);
    CHECK_CUDA(cudaPointerGetAttributes(&a, reg));
    CHECK(a.type == cudaMemoryTypeHost, "registered pointer: type %d", (int)a.type);
    CHECK(a.hostPointer == reg, "registered pointer: hostPointer %p, expected %p", a.hostPointer,
          reg);

    std::vector<unsigned char> pageable(64);
    memset(&a, 0x7f, sizeof a);
    CHECK_CUDA(cudaPointerGetAttributes(&a, pageable.data()));
    CHECK(a.type == cudaMemoryTypeUnregistered, "pageable pointer: type %d", (int)a.type);
    // NULL, or the pointer itself where the device can reach pageable memory (HMM)
    CHECK(a.devicePointer == nullptr || a.devicePointer == pageable.data(),
          "pageable pointer: devicePointer %p", a.devicePointer);
    CHECK(a.hostPointer == nullptr || a.hostPointer == pageable.data(),
          "pageable pointer: hostPointer %p", a.hostPointer);

    CHECK_CUDA(cudaHostUnregister(reg));
    memset(&a, 0x7f, sizeof a);
    CHECK_CUDA(cudaPointerGetAttributes(&a, reg));
    CHECK(a.type == cudaMemoryTypeUnregistered, "unregistered pointer: type %d", (int)a.type);

    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaFree(d1));
    CHECK_CUDA(cudaFree(d2));
    free(reg);
    CHECK_CUDA(cudaFreeHost(h1));
    CHECK_CUDA(cudaFreeHost(h2));
    CHECK_CUDA(cudaFreeHost(h3));
}

int main()
{
    allocations();
    round_trips();
    default_direction();
    memsets();
    pitched();
    large_2d();
    pinned();
    three_d();
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaGetLastError());
    printf("memory: all checks passed\n");
    return 0;
}
