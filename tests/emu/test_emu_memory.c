/* Emulated device memory: the allocator over a 64 MiB arena, pointer attributes, page-locked
 * host memory, and synchronous copies and memsets (1D, 2D, 3D) against a host reference. */
#include <sys/mman.h>

#include "emu_test.h"

#define ARENA (64ull << 20)
#define MiB (1ull << 20)

static size_t free_now(void)
{
    size_t f = 0, t = 0;
    cr_emu_cuMemGetInfo_v2(&f, &t);
    return f;
}

/* Number of resident pages in [p, p + n). */
static size_t resident_pages(uint64_t p, size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), count = 0;
    unsigned char vec[4096];
    size_t pages = n / page;
    if (pages > sizeof vec)
        pages = sizeof vec;
    if (mincore((void *)(uintptr_t)p, pages * page, vec) != 0)
        return (size_t)-1;
    for (size_t i = 0; i < pages; i++)
        count += vec[i] & 1;
    return count;
}

static void test_allocator(void)
{
    CUdeviceptr a, b, c, big, p[64];
    size_t f, t;
    CHECK_OK(cr_emu_cuMemGetInfo_v2(&f, &t));
    CHECK_EQ_U64(t, ARENA);
    CHECK_EQ_U64(f, ARENA);
    CHECK_CU(cr_emu_cuMemGetInfo_v2(NULL, &t), CUDA_ERROR_INVALID_VALUE);

    /* small allocations: 512-byte granules */
    CHECK_OK(cr_emu_cuMemAlloc_v2(&a, 1));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&b, 700));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&c, 512));
    CHECK_EQ_U64(a % 512, 0);
    CHECK_EQ_U64(b % 512, 0);
    CHECK_EQ_U64(c % 512, 0);
    CHECK(a >= TEST_VA_BASE && a < TEST_VA_BASE + ARENA);
    CHECK(b >= a + 512 || a >= b + 1024);
    CHECK_EQ_U64(free_now(), ARENA - 512 - 1024 - 512);
    /* 2 MiB and more: 2 MiB aligned and rounded */
    CHECK_OK(cr_emu_cuMemAlloc_v2(&big, 3 * MiB));
    CHECK_EQ_U64(big % (2 * MiB), 0);
    CHECK_EQ_U64(free_now(), ARENA - 2048 - 4 * MiB);
    CUdeviceptr rb;
    size_t rs;
    CHECK_OK(cr_emu_cuMemGetAddressRange_v2(&rb, &rs, big + 12345));
    CHECK_EQ_U64(rb, big);
    CHECK_EQ_U64(rs, 3 * MiB);
    CHECK_OK(cr_emu_cuMemGetAddressRange_v2(&rb, NULL, b + 699));
    CHECK_EQ_U64(rb, b);
    CHECK_CU(cr_emu_cuMemGetAddressRange_v2(&rb, &rs, b + 700), CUDA_ERROR_NOT_FOUND);

    /* bad requests */
    CHECK_CU(cr_emu_cuMemAlloc_v2(&a, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemAlloc_v2(NULL, 16), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemAlloc_v2(&rb, ARENA), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cr_emu_cuMemAlloc_v2(&rb, (size_t)-1), CUDA_ERROR_OUT_OF_MEMORY);

    /* invalid frees */
    CHECK_CU(cr_emu_cuMemFree_v2(0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemFree_v2(big + 512), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemFree_v2((CUdeviceptr)(uintptr_t)&f), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuMemFree_v2(a));
    CHECK_CU(cr_emu_cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE); /* double free */
    CHECK_OK(cr_emu_cuMemFree_v2(b));
    CHECK_OK(cr_emu_cuMemFree_v2(c));
    CHECK_OK(cr_emu_cuMemFree_v2(big));
    CHECK_EQ_U64(free_now(), ARENA);

    /* exhaustion exactly at capacity */
    CHECK_OK(cr_emu_cuMemAlloc_v2(&big, ARENA));
    CHECK_EQ_U64(big, TEST_VA_BASE);
    CHECK_EQ_U64(free_now(), 0);
    CHECK_CU(cr_emu_cuMemAlloc_v2(&a, 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_OK(cr_emu_cuMemFree_v2(big));
    for (int i = 0; i < 32; i++)
        CHECK_OK(cr_emu_cuMemAlloc_v2(&p[i], 2 * MiB));
    CHECK_CU(cr_emu_cuMemAlloc_v2(&a, 2 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cr_emu_cuMemAlloc_v2(&a, 1), CUDA_ERROR_OUT_OF_MEMORY);
    /* a free makes room, in the same place */
    CUdeviceptr hole = p[13];
    CHECK_OK(cr_emu_cuMemFree_v2(p[13]));
    CHECK_EQ_U64(free_now(), 2 * MiB);
    CHECK_CU(cr_emu_cuMemAlloc_v2(&a, 2 * MiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_OK(cr_emu_cuMemAlloc_v2(&p[13], 2 * MiB));
    CHECK_EQ_U64(p[13], hole);
    for (int i = 0; i < 32; i++)
        CHECK_OK(cr_emu_cuMemFree_v2(p[i]));
    CHECK_EQ_U64(free_now(), ARENA);
    /* 1 MiB requests use 512-byte granules: 64 fit, the 65th does not */
    for (int i = 0; i < 64; i++)
        CHECK_OK(cr_emu_cuMemAlloc_v2(&p[i], MiB));
    CHECK_CU(cr_emu_cuMemAlloc_v2(&a, 512), CUDA_ERROR_OUT_OF_MEMORY);
    /* freeing every other one leaves 1 MiB holes: a 2 MiB request cannot fit */
    for (int i = 0; i < 64; i += 2)
        CHECK_OK(cr_emu_cuMemFree_v2(p[i]));
    CHECK_EQ_U64(free_now(), 32 * MiB);
    CHECK_CU(cr_emu_cuMemAlloc_v2(&a, 2 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    for (int i = 1; i < 64; i += 2)
        CHECK_OK(cr_emu_cuMemFree_v2(p[i]));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&a, ARENA)); /* coalesced back into one range */
    CHECK_OK(cr_emu_cuMemFree_v2(a));

    /* freed pages go back to the OS */
    CHECK_OK(cr_emu_cuMemAlloc_v2(&a, 4 * MiB));
    memset((void *)(uintptr_t)a, 0x5a, 4 * MiB);
    CHECK(resident_pages(a, 4 * MiB) >= (4 * MiB) / (size_t)sysconf(_SC_PAGESIZE) / 2);
    CHECK_OK(cr_emu_cuMemFree_v2(a));
    CHECK_EQ_U64(resident_pages(a, 4 * MiB), 0);

    /* pitched allocations */
    size_t pitch;
    CHECK_OK(cr_emu_cuMemAllocPitch_v2(&a, &pitch, 100, 10, 4));
    CHECK_EQ_U64(pitch, 512);
    CHECK_OK(cr_emu_cuMemGetAddressRange_v2(NULL, &rs, a));
    CHECK_EQ_U64(rs, 512 * 10);
    CHECK_OK(cr_emu_cuMemAllocPitch_v2(&b, &pitch, 1000, 3, 16));
    CHECK_EQ_U64(pitch, 1024);
    int align;
    CHECK_OK(cr_emu_cuDeviceGetAttribute(&align, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 0));
    CHECK_EQ_U64(pitch % (size_t)align, 0);
    CHECK_CU(cr_emu_cuMemAllocPitch_v2(&c, &pitch, 100, 10, 3), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemAllocPitch_v2(&c, &pitch, 0, 10, 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuMemFree_v2(a));
    CHECK_OK(cr_emu_cuMemFree_v2(b));
    CHECK_EQ_U64(free_now(), ARENA);
}

static void test_pointer_attributes(void)
{
    CUdeviceptr a, b;
    CHECK_OK(cr_emu_cuMemAlloc_v2(&a, 1000));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&b, 1000));
    unsigned type = 0;
    CUdeviceptr dp = 0, start = 0;
    size_t size = 0;
    unsigned long long id_a = 0, id_b = 0;
    CUcontext ctx = NULL, cur = NULL;
    int ordinal = -1;
    CHECK_OK(cr_emu_cuCtxGetCurrent(&cur));
    CHECK_OK(cr_emu_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 10));
    CHECK_EQ_INT(type, CU_MEMORYTYPE_DEVICE);
    CHECK_OK(cr_emu_cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, a + 10));
    CHECK_EQ_U64(dp, a + 10);
    CHECK_OK(cr_emu_cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 10));
    CHECK_EQ_U64(start, a);
    CHECK_OK(cr_emu_cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 10));
    CHECK_EQ_U64(size, 1000);
    CHECK_OK(cr_emu_cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, a));
    CHECK(ctx == cur);
    CHECK_OK(cr_emu_cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a));
    CHECK_EQ_INT(ordinal, 0);
    CHECK_OK(cr_emu_cuPointerGetAttribute(&id_a, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));
    CHECK_OK(cr_emu_cuPointerGetAttribute(&id_b, CU_POINTER_ATTRIBUTE_BUFFER_ID, b));
    CHECK(id_a != id_b && id_a && id_b);
    CHECK_CU(cr_emu_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 1000),
             CUDA_ERROR_INVALID_VALUE); /* one past the end of a: not b's first byte */
    int local;
    CHECK_CU(cr_emu_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                          (CUdeviceptr)(uintptr_t)&local),
             CUDA_ERROR_INVALID_VALUE);
    /* the multi-attribute form answers zeroes for an unknown pointer */
    CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    unsigned t2 = 77, managed = 77;
    size_t s2 = 77;
    void *data[3] = {&t2, &s2, &managed};
    CHECK_OK(cr_emu_cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)&local));
    CHECK_EQ_INT(t2, 0);
    CHECK_EQ_U64(s2, 0);
    CHECK_EQ_INT(managed, 0);
    CHECK_OK(cr_emu_cuPointerGetAttributes(3, attrs, data, b + 5));
    CHECK_EQ_INT(t2, CU_MEMORYTYPE_DEVICE);
    CHECK_EQ_U64(s2, 1000);
    CHECK_OK(cr_emu_cuMemFree_v2(a));
    CHECK_CU(cr_emu_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuMemFree_v2(b));
}

static void test_host_memory(void)
{
    void *h = NULL, *h2 = NULL;
    unsigned flags = 99, type = 0;
    CHECK_OK(cr_emu_cuMemAllocHost_v2(&h, 10000));
    CHECK(h != NULL);
    memset(h, 1, 10000);
    CHECK_OK(cr_emu_cuMemHostGetFlags(&flags, (char *)h + 100));
    CHECK_EQ_INT(flags, 0);
    CHECK_OK(cr_emu_cuMemHostAlloc(&h2, 4096, CU_MEMHOSTALLOC_PORTABLE));
    CHECK_OK(cr_emu_cuMemHostGetFlags(&flags, h2));
    CHECK_EQ_INT(flags, CU_MEMHOSTALLOC_PORTABLE);
    CHECK_CU(cr_emu_cuMemHostAlloc(&h2, 4096, 0x100), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                          (CUdeviceptr)(uintptr_t)h));
    CHECK_EQ_INT(type, CU_MEMORYTYPE_HOST);
    CHECK_CU(cr_emu_cuMemFreeHost((char *)h + 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuMemFreeHost(h));
    CHECK_CU(cr_emu_cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuMemFreeHost(h2));

    char *buf = malloc(8192);
    CHECK_CU(cr_emu_cuMemHostGetFlags(&flags, buf), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuMemHostRegister_v2(buf, 8192, CU_MEMHOSTREGISTER_PORTABLE));
    CHECK_OK(cr_emu_cuMemHostGetFlags(&flags, buf + 8191));
    CHECK_EQ_INT(flags, CU_MEMHOSTREGISTER_PORTABLE);
    CHECK_CU(cr_emu_cuMemHostRegister_v2(buf + 100, 10, 0),
             CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK_CU(cr_emu_cuMemHostUnregister(buf + 100), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CHECK_CU(cr_emu_cuMemFreeHost(buf), CUDA_ERROR_INVALID_VALUE); /* registered, not ours */
    CHECK_OK(cr_emu_cuMemHostUnregister(buf));
    CHECK_CU(cr_emu_cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CHECK_CU(cr_emu_cuMemHostRegister_v2(buf, 0, 0), CUDA_ERROR_INVALID_VALUE);
    free(buf);
    CUdeviceptr d;
    CHECK_OK(cr_emu_cuMemAlloc_v2(&d, 4096));
    CHECK_CU(cr_emu_cuMemHostRegister_v2((void *)(uintptr_t)d, 4096, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuMemFree_v2(d));
}

static void test_copies_1d(void)
{
    enum { N = 100000 };
    unsigned char *src = malloc(N), *dst = malloc(N), *ref = malloc(N);
    CUdeviceptr a, b, c;
    fill_random(src, N, 1);
    CHECK_OK(cr_emu_cuMemAlloc_v2(&a, N));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&b, N));
    CHECK_OK(cr_emu_cuMemAlloc_v2(&c, 64));
    CHECK_OK(cr_emu_cuMemcpyHtoD_v2(a, src, N));
    CHECK_OK(cr_emu_cuMemcpyDtoD_v2(b, a, N));
    memset(dst, 0, N);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(dst, b, N));
    CHECK_EQ_MEM(dst, src, N);
    /* offsets, and unified copies in every direction */
    memcpy(ref, src, N);
    CHECK_OK(cr_emu_cuMemcpy(b + 1000, (CUdeviceptr)(uintptr_t)(src + 5), 333)); /* H->D */
    memcpy(ref + 1000, src + 5, 333);
    CHECK_OK(cr_emu_cuMemcpy(b + 5000, a + 7, 4444)); /* D->D */
    memcpy(ref + 5000, src + 7, 4444);
    CHECK_OK(cr_emu_cuMemcpy((CUdeviceptr)(uintptr_t)dst, b, N)); /* D->H */
    CHECK_EQ_MEM(dst, ref, N);
    unsigned char small[64];
    CHECK_OK(cr_emu_cuMemcpy((CUdeviceptr)(uintptr_t)small, (CUdeviceptr)(uintptr_t)src, 64));
    CHECK_EQ_MEM(small, src, 64); /* H->H */
    /* overlapping device-to-device copy behaves like memmove */
    CHECK_OK(cr_emu_cuMemcpyDtoD_v2(a + 10, a, 1000));
    memmove(ref, src, N);
    memmove(ref + 10, src, 1000);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(dst, a, 2000));
    CHECK_EQ_MEM(dst, ref, 2000);

    /* ranges outside live allocations */
    CHECK_CU(cr_emu_cuMemcpyHtoD_v2(a, src, N + 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemcpyHtoD_v2(a + N - 10, src, 11), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemcpyDtoH_v2(dst, c, 65), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemcpyDtoD_v2(c, a + N - 1, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemcpyDtoH_v2(dst, TEST_VA_BASE + ARENA - 4096, 16),
             CUDA_ERROR_INVALID_VALUE); /* unallocated arena */
    CHECK_CU(cr_emu_cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)dst, src, 16),
             CUDA_ERROR_INVALID_VALUE); /* not a device address */
    CHECK_CU(cr_emu_cuMemcpyHtoD_v2(a, NULL, 16), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemcpyHtoD_v2(a, src, (size_t)-1), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuMemcpyHtoD_v2(a, src, 0));
    CHECK_OK(cr_emu_cuMemFree_v2(c));
    CHECK_CU(cr_emu_cuMemcpyHtoD_v2(c, src, 16), CUDA_ERROR_INVALID_VALUE); /* freed */
    CHECK_OK(cr_emu_cuMemFree_v2(a));
    CHECK_OK(cr_emu_cuMemFree_v2(b));
    free(src);
    free(dst);
    free(ref);
}

/* Host model of a 2D copy between two byte buffers. */
static void ref_copy_2d(unsigned char *dst, size_t dx, size_t dy, size_t dpitch,
                        const unsigned char *src, size_t sx, size_t sy, size_t spitch, size_t w,
                        size_t h)
{
    for (size_t y = 0; y < h; y++)
        memcpy(dst + (dy + y) * dpitch + dx, src + (sy + y) * spitch + sx, w);
}

static void test_copies_2d(void)
{
    enum { HP = 301, HH = 40, W = 130, H = 25 };
    unsigned char *host = malloc(HP * HH), *out = malloc(HP * HH), *ref = malloc(HP * HH);
    CUdeviceptr d, e;
    size_t dp, ep;
    fill_random(host, HP * HH, 7);
    CHECK_OK(cr_emu_cuMemAllocPitch_v2(&d, &dp, 200, 30, 4));
    CHECK_OK(cr_emu_cuMemAllocPitch_v2(&e, &ep, 600, 30, 4));
    CHECK_EQ_U64(dp, 512);
    CHECK_EQ_U64(ep, 1024);
    unsigned char *dref = calloc(1, dp * 30), *eref = calloc(1, ep * 30);
    CHECK_OK(cr_emu_cuMemsetD8_v2(d, 0, dp * 30));
    CHECK_OK(cr_emu_cuMemsetD8_v2(e, 0, ep * 30));

    /* host (pitch 301, offset 11,3) -> device (pitch 512, offset 40,2) */
    CUDA_MEMCPY2D m = {0};
    m.srcMemoryType = CU_MEMORYTYPE_HOST;
    m.srcHost = host;
    m.srcPitch = HP;
    m.srcXInBytes = 11;
    m.srcY = 3;
    m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.dstDevice = d;
    m.dstPitch = dp;
    m.dstXInBytes = 40;
    m.dstY = 2;
    m.WidthInBytes = W;
    m.Height = H;
    CHECK_OK(cr_emu_cuMemcpy2D_v2(&m));
    ref_copy_2d(dref, 40, 2, dp, host, 11, 3, HP, W, H);
    /* device -> device (unified types), offset 100,4 */
    CUDA_MEMCPY2D m2 = {0};
    m2.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    m2.srcDevice = d;
    m2.srcPitch = dp;
    m2.srcXInBytes = 30;
    m2.srcY = 1;
    m2.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    m2.dstDevice = e;
    m2.dstPitch = ep;
    m2.dstXInBytes = 100;
    m2.dstY = 4;
    m2.WidthInBytes = 150;
    m2.Height = 20;
    CHECK_OK(cr_emu_cuMemcpy2DUnaligned_v2(&m2));
    ref_copy_2d(eref, 100, 4, ep, dref, 30, 1, dp, 150, 20);
    /* device -> host: the whole pitched buffer, rows packed */
    unsigned char *packed = malloc(600 * 30), *pref = malloc(600 * 30);
    CUDA_MEMCPY2D m3 = {0};
    m3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    m3.srcDevice = e;
    m3.srcPitch = ep;
    m3.dstMemoryType = CU_MEMORYTYPE_HOST;
    m3.dstHost = packed;
    m3.dstPitch = 600;
    m3.WidthInBytes = 600;
    m3.Height = 30;
    CHECK_OK(cr_emu_cuMemcpy2D_v2(&m3));
    ref_copy_2d(pref, 0, 0, 600, eref, 0, 0, ep, 600, 30);
    CHECK_EQ_MEM(packed, pref, 600 * 30);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(out, d, dp * 30 < HP * HH ? dp * 30 : HP * HH));
    CHECK_EQ_MEM(out, dref, dp * 30 < HP * HH ? dp * 30 : HP * HH);

    /* errors */
    CUDA_MEMCPY2D bad = m;
    bad.dstPitch = 100; /* narrower than the width */
    CHECK_CU(cr_emu_cuMemcpy2D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
    bad = m;
    bad.dstXInBytes = dp - W + 1; /* a row crosses the pitch */
    CHECK_CU(cr_emu_cuMemcpy2D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
    bad = m;
    bad.dstY = 30 - H + 1; /* past the last row */
    CHECK_CU(cr_emu_cuMemcpy2D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
    bad = m;
    bad.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    CHECK_CU(cr_emu_cuMemcpy2D_v2(&bad), CUDA_ERROR_NOT_SUPPORTED);
    bad = m;
    bad.srcMemoryType = (CUmemorytype)9;
    CHECK_CU(cr_emu_cuMemcpy2D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemcpy2D_v2(NULL), CUDA_ERROR_INVALID_VALUE);
    free(packed);
    free(pref);
    free(dref);
    free(eref);
    CHECK_OK(cr_emu_cuMemFree_v2(d));
    CHECK_OK(cr_emu_cuMemFree_v2(e));
    free(host);
    free(out);
    free(ref);
}

static void test_copies_3d(void)
{
    /* host volume 50 x 20 rows x 6 slices (pitch 50, 20 rows per slice) */
    enum { SP = 50, SH = 20, SD = 6, W = 17, H = 9, D = 4 };
    unsigned char *host = malloc(SP * SH * SD), *back = calloc(1, SP * SH * SD);
    unsigned char *ref = calloc(1, SP * SH * SD);
    fill_random(host, SP * SH * SD, 3);
    /* device volume: pitch 512, 12 rows per slice, 5 slices */
    CUdeviceptr d;
    CHECK_OK(cr_emu_cuMemAlloc_v2(&d, 512 * 12 * 5));
    CHECK_OK(cr_emu_cuMemsetD8_v2(d, 0, 512 * 12 * 5));
    CUDA_MEMCPY3D m = {0};
    m.srcMemoryType = CU_MEMORYTYPE_HOST;
    m.srcHost = host;
    m.srcPitch = SP;
    m.srcHeight = SH;
    m.srcXInBytes = 5;
    m.srcY = 7;
    m.srcZ = 1;
    m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.dstDevice = d;
    m.dstPitch = 512;
    m.dstHeight = 12;
    m.dstXInBytes = 300;
    m.dstY = 2;
    m.dstZ = 1;
    m.WidthInBytes = W;
    m.Height = H;
    m.Depth = D;
    CHECK_OK(cr_emu_cuMemcpy3D_v2(&m));
    /* and back into another host layout: pitch 50, 20 rows, offset (1, 1, 0) */
    CUDA_MEMCPY3D r = {0};
    r.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    r.srcDevice = d;
    r.srcPitch = 512;
    r.srcHeight = 12;
    r.srcXInBytes = 300;
    r.srcY = 2;
    r.srcZ = 1;
    r.dstMemoryType = CU_MEMORYTYPE_HOST;
    r.dstHost = back;
    r.dstPitch = SP;
    r.dstHeight = SH;
    r.dstXInBytes = 1;
    r.dstY = 1;
    r.WidthInBytes = W;
    r.Height = H;
    r.Depth = D;
    CHECK_OK(cr_emu_cuMemcpy3D_v2(&r));
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            memcpy(ref + (size_t)(z * SH + 1 + y) * SP + 1,
                   host + (size_t)((1 + z) * SH + 7 + y) * SP + 5, W);
    CHECK_EQ_MEM(back, ref, SP * SH * SD);
    /* the device bytes outside the box stay zero */
    unsigned char *dev = malloc(512 * 12 * 5);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(dev, d, 512 * 12 * 5));
    size_t nonzero = 0;
    for (size_t i = 0; i < 512 * 12 * 5; i++)
        nonzero += dev[i] != 0;
    size_t expected_nonzero = 0;
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                expected_nonzero += host[(size_t)((1 + z) * SH + 7 + y) * SP + 5 + x] != 0;
    CHECK_EQ_U64(nonzero, expected_nonzero);
    CHECK_EQ_INT(dev[(size_t)(1 * 12 + 2) * 512 + 300], host[(size_t)(1 * SH + 7) * SP + 5]);
    /* one slice at a time at a z offset: the slice pitch still applies (depth 1) */
    memset(back, 0, SP * SH * SD);
    for (int z = 0; z < D; z++) {
        CUDA_MEMCPY3D one = r;
        one.srcZ = 1 + z;
        one.dstZ = z;
        one.Depth = 1;
        CHECK_OK(cr_emu_cuMemcpy3D_v2(&one));
    }
    CHECK_EQ_MEM(back, ref, SP * SH * SD);
    /* errors: slice too short, box past the allocation, LOD */
    CUDA_MEMCPY3D bad = m;
    bad.dstHeight = 10; /* dstY 2 + 9 rows > 10 */
    CHECK_CU(cr_emu_cuMemcpy3D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
    bad = m;
    bad.dstZ = 2; /* slices 2..5 of 5 */
    CHECK_CU(cr_emu_cuMemcpy3D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
    bad = m;
    bad.srcLOD = 1;
    CHECK_CU(cr_emu_cuMemcpy3D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
    bad = m;
    bad.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    CHECK_CU(cr_emu_cuMemcpy3D_v2(&bad), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_OK(cr_emu_cuMemFree_v2(d));
    free(dev);
    free(host);
    free(back);
    free(ref);
}

static void test_memsets(void)
{
    enum { N = 4096 };
    unsigned char *out = malloc(N), *ref = malloc(N);
    CUdeviceptr d;
    CHECK_OK(cr_emu_cuMemAlloc_v2(&d, N));
    CHECK_OK(cr_emu_cuMemsetD8_v2(d, 0xab, N));
    memset(ref, 0xab, N);
    CHECK_OK(cr_emu_cuMemsetD8_v2(d + 3, 0x11, 10));
    memset(ref + 3, 0x11, 10);
    CHECK_OK(cr_emu_cuMemsetD16_v2(d + 100, 0xbeef, 7));
    for (int i = 0; i < 7; i++) {
        ref[100 + 2 * i] = 0xef;
        ref[101 + 2 * i] = 0xbe;
    }
    CHECK_OK(cr_emu_cuMemsetD32_v2(d + 200, 0x01020304, 5));
    for (int i = 0; i < 5; i++)
        memcpy(ref + 200 + 4 * i, "\x04\x03\x02\x01", 4);
    /* 2D: 3 rows of pitch 256, gaps untouched */
    CHECK_OK(cr_emu_cuMemsetD2D8_v2(d + 1024, 256, 0x77, 10, 3));
    for (int y = 0; y < 3; y++)
        memset(ref + 1024 + y * 256, 0x77, 10);
    CHECK_OK(cr_emu_cuMemsetD2D16_v2(d + 2048, 128, 0x1234, 5, 4));
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 5; x++)
            memcpy(ref + 2048 + y * 128 + 2 * x, "\x34\x12", 2);
    CHECK_OK(cr_emu_cuMemsetD2D32_v2(d + 3072, 64, 0xdeadbeef, 3, 5));
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 3; x++)
            memcpy(ref + 3072 + y * 64 + 4 * x, "\xef\xbe\xad\xde", 4);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(out, d, N));
    CHECK_EQ_MEM(out, ref, N);

    /* alignment and range errors */
    CHECK_CU(cr_emu_cuMemsetD16_v2(d + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemsetD32_v2(d + 2, 0, 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemsetD2D32_v2(d, 66, 0, 4, 2), CUDA_ERROR_INVALID_VALUE); /* pitch */
    CHECK_CU(cr_emu_cuMemsetD2D16_v2(d, 8, 0, 5, 2), CUDA_ERROR_INVALID_VALUE);  /* pitch < row */
    CHECK_CU(cr_emu_cuMemsetD8_v2(d, 0, N + 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemsetD32_v2(d + N - 8, 0, 3), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemsetD2D8_v2(d, 1024, 0, 10, 5), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemsetD8_v2(TEST_VA_BASE + ARENA - 512, 0, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuMemsetD8_v2(d, 0, 0));
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(out, d, N));
    CHECK_EQ_MEM(out, ref, N); /* the failed memsets wrote nothing */
    CHECK_OK(cr_emu_cuMemFree_v2(d));
    free(out);
    free(ref);
}

int main(void)
{
    test_setup(ARENA, NULL);
    test_allocator();
    test_pointer_attributes();
    test_host_memory();
    test_copies_1d();
    test_copies_2d();
    test_copies_3d();
    test_memsets();
    CHECK_EQ_U64(free_now(), ARENA);
    CHECK_DONE();
}
