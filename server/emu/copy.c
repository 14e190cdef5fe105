/* Copies and memsets of the emulated device.
 *
 * Every copy is described as a 3D region per side (start, pitch, slice pitch) and runs as one
 * operation: synchronous calls on the legacy stream (inline when it is idle), asynchronous
 * ones on their stream. Each device side is checked to lie inside one live allocation before
 * anything is queued. A host address inside the arena is treated as the device address it is
 * (unified addressing), so it is checked too.
 *
 * An asynchronous copy whose source is pageable host memory must have read its source when
 * the call returns: it runs at once when the stream is idle, else the source is copied into
 * a staging buffer that the queued operation reads. Page-locked sources (cuMemAllocHost,
 * cuMemHostAlloc, cuMemHostRegister) are read when the stream reaches the copy, and every
 * device-to-host copy writes the host buffer when the stream reaches it. */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

typedef struct {
    uint8_t *ptr;  /* first byte of the region */
    size_t pitch;  /* bytes between rows */
    size_t slice;  /* bytes between slices */
    size_t extent; /* bytes from the first to one past the last byte of the region */
    int device;
    int pinned; /* host side in page-locked memory */
} side_t;

typedef struct {
    size_t width, height, depth;
    side_t dst, src;
} copy_t;

typedef struct {
    cr__op_t op;
    copy_t c;
    void *staging;
} copy_op_t;

static void copy_exec(const copy_t *c)
{
    CR__DEVICE_ACCESS_BEGIN();
    for (size_t z = 0; z < c->depth; z++)
        for (size_t y = 0; y < c->height; y++)
            memmove(c->dst.ptr + z * c->dst.slice + y * c->dst.pitch,
                    c->src.ptr + z * c->src.slice + y * c->src.pitch, c->width);
    CR__DEVICE_ACCESS_END();
}

static CUresult copy_run(cr__op_t *op, cr__stream_t *s)
{
    (void)s;
    copy_exec(&((copy_op_t *)op)->c);
    return CUDA_SUCCESS;
}

static void copy_destroy(cr__op_t *op)
{
    copy_op_t *c = (copy_op_t *)op;
    free(c->staging);
    free(c);
}

/* Resolves one side of a copy and checks it. rows_per_slice is used when depth > 1 or z > 0. */
static CUresult resolve_side(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x,
                             size_t y, size_t z, size_t pitch, size_t rows_per_slice, size_t width,
                             size_t height, size_t depth, side_t *out)
{
    uint64_t addr, slice = 0, offset, extent, t;
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        addr = (uint64_t)(uintptr_t)host;
        break;
    case CU_MEMORYTYPE_DEVICE: /* page-locked host memory is the device's too */
        addr = dev;
        if (!cr__in_arena(addr) && !cr__host_mapped((uintptr_t)addr, 1))
            return CUDA_ERROR_INVALID_VALUE;
        break;
    case CU_MEMORYTYPE_UNIFIED:
        addr = dev;
        break;
    case CU_MEMORYTYPE_ARRAY:
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (addr == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((height > 1 || depth > 1) && (pitch < width || x > pitch - width))
        return CUDA_ERROR_INVALID_VALUE;
    if (depth > 1 || z > 0) { /* slices matter, also for one slice at a z offset */
        if (rows_per_slice < height || y > rows_per_slice - height)
            return CUDA_ERROR_INVALID_VALUE;
        if (__builtin_mul_overflow(pitch, rows_per_slice, &slice))
            return CUDA_ERROR_INVALID_VALUE;
    }
    /* offset = z * slice + y * pitch + x; extent = (depth-1) * slice + (height-1) * pitch + w */
    if (__builtin_mul_overflow(z, slice, &offset) || __builtin_mul_overflow(y, pitch, &t) ||
        __builtin_add_overflow(offset, t, &offset) || __builtin_add_overflow(offset, x, &offset))
        return CUDA_ERROR_INVALID_VALUE;
    if (__builtin_mul_overflow(depth - 1, slice, &extent) ||
        __builtin_mul_overflow(height - 1, pitch, &t) ||
        __builtin_add_overflow(extent, t, &extent) ||
        __builtin_add_overflow(extent, width, &extent))
        return CUDA_ERROR_INVALID_VALUE;
    if (__builtin_add_overflow(addr, offset, &addr) || addr + extent < addr)
        return CUDA_ERROR_INVALID_VALUE;
    out->ptr = (uint8_t *)(uintptr_t)addr;
    out->pitch = pitch;
    out->slice = slice;
    out->extent = extent;
    out->device = cr__in_arena(addr);
    out->pinned = 0;
    if (out->device)
        return cr__mem_check(addr, extent);
    if (type == CU_MEMORYTYPE_DEVICE && !cr__host_mapped((uintptr_t)addr, extent))
        return CUDA_ERROR_INVALID_VALUE;
    out->pinned = cr__host_is_pinned(out->ptr, extent);
    return CUDA_SUCCESS;
}

/* Runs or queues a resolved copy. hStream is ignored when !async (legacy stream, waited). */
static CUresult submit_copy(const copy_t *c, CUstream hStream, int async)
{
    CUresult rc;
    cr__stream_t *s = async ? cr__stream_get(hStream) : cr__stream_get(NULL);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (c->width == 0 || c->height == 0 || c->depth == 0) {
        cr__stream_put(s);
        return CUDA_SUCCESS;
    }
    copy_op_t *op = calloc(1, sizeof *op);
    if (!op) {
        cr__stream_put(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->op.run = copy_run;
    op->op.destroy = copy_destroy;
    op->c = *c;
    if (!async) {
        rc = cr__stream_run_sync(s, &op->op);
    } else if (c->src.device || c->src.pinned) {
        rc = cr__stream_submit(s, &op->op, NULL);
    } else if (cr__stream_try_inline(s, &op->op, &rc)) {
        /* pageable source, idle stream: done already */
    } else {
        /* pageable source, busy stream: stage it, packed */
        size_t row = c->width, bytes = 0;
        if (__builtin_mul_overflow(row, c->height, &bytes) ||
            __builtin_mul_overflow(bytes, c->depth, &bytes) || !(op->staging = malloc(bytes))) {
            /* no room to stage: wait for the stream instead */
            rc = cr__stream_run_sync(s, &op->op);
        } else {
            copy_t packed = {
                .width = c->width, .height = c->height, .depth = c->depth, .src = c->src};
            packed.dst = (side_t){.ptr = op->staging, .pitch = row, .slice = row * c->height};
            copy_exec(&packed);
            op->c.src = packed.dst;
            rc = cr__stream_submit(s, &op->op, NULL);
        }
    }
    cr__stream_put(s);
    return rc;
}

static CUresult copy_1d(uint64_t dst, CUmemorytype dst_type, uint64_t src, CUmemorytype src_type,
                        size_t bytes, CUstream hStream, int async)
{
    copy_t c = {.width = bytes, .height = 1, .depth = 1};
    CUresult rc;
    if (bytes == 0) { /* nothing to check or copy; the stream must still be valid */
        cr__stream_t *s = async ? cr__stream_get(hStream) : cr__stream_get(NULL);
        if (!s)
            return CUDA_ERROR_INVALID_HANDLE;
        cr__stream_put(s);
        return CUDA_SUCCESS;
    }
    rc = resolve_side(dst_type, (void *)(uintptr_t)dst, dst, 0, 0, 0, 0, 0, bytes, 1, 1, &c.dst);
    if (rc == CUDA_SUCCESS)
        rc =
            resolve_side(src_type, (void *)(uintptr_t)src, src, 0, 0, 0, 0, 0, bytes, 1, 1, &c.src);
    if (rc != CUDA_SUCCESS)
        return rc;
    return submit_copy(&c, hStream, async);
}

#define HOST CU_MEMORYTYPE_HOST
#define DEVICE CU_MEMORYTYPE_DEVICE
#define UNIFIED CU_MEMORYTYPE_UNIFIED

CUresult cr_emu_cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    CR__ENTER();
    return copy_1d(dstDevice, DEVICE, (uintptr_t)srcHost, HOST, ByteCount, NULL, 0);
}

CUresult cr_emu_cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    CR__ENTER();
    return copy_1d((uintptr_t)dstHost, HOST, srcDevice, DEVICE, ByteCount, NULL, 0);
}

CUresult cr_emu_cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    CR__ENTER();
    return copy_1d(dstDevice, DEVICE, srcDevice, DEVICE, ByteCount, NULL, 0);
}

CUresult cr_emu_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    CR__ENTER();
    return copy_1d(dst, UNIFIED, src, UNIFIED, ByteCount, NULL, 0);
}

CUresult cr_emu_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    CR__ENTER();
    return copy_1d(dst, UNIFIED, src, UNIFIED, ByteCount, hStream, 1);
}

CUresult cr_emu_cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                     CUstream hStream)
{
    CR__ENTER();
    return copy_1d(dstDevice, DEVICE, (uintptr_t)srcHost, HOST, ByteCount, hStream, 1);
}

CUresult cr_emu_cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream)
{
    CR__ENTER();
    return copy_1d((uintptr_t)dstHost, HOST, srcDevice, DEVICE, ByteCount, hStream, 1);
}

CUresult cr_emu_cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream)
{
    CR__ENTER();
    return copy_1d(dstDevice, DEVICE, srcDevice, DEVICE, ByteCount, hStream, 1);
}

static CUresult copy_2d(const CUDA_MEMCPY2D *p, CUstream hStream, int async)
{
    copy_t c;
    CUresult rc;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    c = (copy_t){.width = p->WidthInBytes, .height = p->Height, .depth = 1};
    if (c.width == 0 || c.height == 0)
        return submit_copy(&c, hStream, async);
    rc = resolve_side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, 0,
                      p->dstPitch, 0, c.width, c.height, 1, &c.dst);
    if (rc == CUDA_SUCCESS)
        rc = resolve_side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, 0,
                          p->srcPitch, 0, c.width, c.height, 1, &c.src);
    if (rc != CUDA_SUCCESS)
        return rc;
    return submit_copy(&c, hStream, async);
}

CUresult cr_emu_cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    CR__ENTER();
    return copy_2d(pCopy, NULL, 0);
}

CUresult cr_emu_cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    CR__ENTER();
    return copy_2d(pCopy, NULL, 0);
}

CUresult cr_emu_cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    CR__ENTER();
    return copy_2d(pCopy, hStream, 1);
}

static CUresult copy_3d(const CUDA_MEMCPY3D *p, CUstream hStream, int async)
{
    copy_t c;
    CUresult rc;
    if (!p || p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1)
        return CUDA_ERROR_INVALID_VALUE;
    c = (copy_t){.width = p->WidthInBytes, .height = p->Height, .depth = p->Depth};
    if (c.width == 0 || c.height == 0 || c.depth == 0)
        return submit_copy(&c, hStream, async);
    rc = resolve_side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ,
                      p->dstPitch, p->dstHeight, c.width, c.height, c.depth, &c.dst);
    if (rc == CUDA_SUCCESS)
        rc = resolve_side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY,
                          p->srcZ, p->srcPitch, p->srcHeight, c.width, c.height, c.depth, &c.src);
    if (rc != CUDA_SUCCESS)
        return rc;
    return submit_copy(&c, hStream, async);
}

CUresult cr_emu_cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    CR__ENTER();
    return copy_3d(pCopy, NULL, 0);
}

CUresult cr_emu_cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    CR__ENTER();
    return copy_3d(pCopy, hStream, 1);
}

/* ---- memsets ---- */

typedef struct {
    cr__op_t op;
    uint8_t *dst;
    size_t pitch;
    size_t width; /* elements */
    size_t height;
    unsigned elem; /* 1, 2 or 4 bytes */
    uint32_t value;
} memset_op_t;

static CUresult memset_run(cr__op_t *op, cr__stream_t *s)
{
    memset_op_t *m = (memset_op_t *)op;
    (void)s;
    CR__DEVICE_ACCESS_BEGIN();
    for (size_t y = 0; y < m->height; y++) {
        uint8_t *row = m->dst + y * m->pitch;
        if (m->elem == 1) {
            memset(row, (int)m->value, m->width);
        } else if (m->elem == 2) {
            uint16_t v = (uint16_t)m->value, *p = (uint16_t *)(void *)row;
            for (size_t i = 0; i < m->width; i++)
                p[i] = v;
        } else {
            uint32_t *p = (uint32_t *)(void *)row;
            for (size_t i = 0; i < m->width; i++)
                p[i] = m->value;
        }
    }
    CR__DEVICE_ACCESS_END();
    return CUDA_SUCCESS;
}

static CUresult memset_common(CUdeviceptr dst, size_t pitch, unsigned elem, uint32_t value,
                              size_t width, size_t height, CUstream hStream, int async)
{
    uint64_t row_bytes, extent;
    CUresult rc;
    cr__stream_t *s = async ? cr__stream_get(hStream) : cr__stream_get(NULL);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (width == 0 || height == 0) {
        rc = CUDA_SUCCESS;
        goto out;
    }
    rc = CUDA_ERROR_INVALID_VALUE;
    if (dst % elem != 0 || (height > 1 && pitch % elem != 0))
        goto out;
    if (__builtin_mul_overflow((uint64_t)width, (uint64_t)elem, &row_bytes))
        goto out;
    if (height > 1 && pitch < row_bytes)
        goto out;
    if (__builtin_mul_overflow((uint64_t)(height - 1), (uint64_t)pitch, &extent) ||
        __builtin_add_overflow(extent, row_bytes, &extent))
        goto out;
    if ((rc = cr__mem_check(dst, extent)) != CUDA_SUCCESS &&
        !cr__host_mapped((uintptr_t)dst, extent)) /* page-locked memory is the device's too */
        goto out;
    rc = CUDA_SUCCESS;
    memset_op_t *m = calloc(1, sizeof *m);
    if (!m) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    m->op.run = memset_run;
    m->dst = (uint8_t *)(uintptr_t)dst;
    m->pitch = pitch;
    m->width = width;
    m->height = height;
    m->elem = elem;
    m->value = value;
    rc = async ? cr__stream_submit(s, &m->op, NULL) : cr__stream_run_sync(s, &m->op);
out:
    cr__stream_put(s);
    return rc;
}

CUresult cr_emu_cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    CR__ENTER();
    return memset_common(dstDevice, 0, 1, uc, N, 1, NULL, 0);
}

CUresult cr_emu_cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    CR__ENTER();
    return memset_common(dstDevice, 0, 2, us, N, 1, NULL, 0);
}

CUresult cr_emu_cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    CR__ENTER();
    return memset_common(dstDevice, 0, 4, ui, N, 1, NULL, 0);
}

CUresult cr_emu_cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                size_t Width, size_t Height)
{
    CR__ENTER();
    return memset_common(dstDevice, dstPitch, 1, uc, Width, Height, NULL, 0);
}

CUresult cr_emu_cuMemsetD2D16_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                 size_t Width, size_t Height)
{
    CR__ENTER();
    return memset_common(dstDevice, dstPitch, 2, us, Width, Height, NULL, 0);
}

CUresult cr_emu_cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                 size_t Width, size_t Height)
{
    CR__ENTER();
    return memset_common(dstDevice, dstPitch, 4, ui, Width, Height, NULL, 0);
}

CUresult cr_emu_cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    CR__ENTER();
    return memset_common(dstDevice, 0, 1, uc, N, 1, hStream, 1);
}

CUresult cr_emu_cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                 CUstream hStream)
{
    CR__ENTER();
    return memset_common(dstDevice, 0, 2, us, N, 1, hStream, 1);
}

CUresult cr_emu_cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    CR__ENTER();
    return memset_common(dstDevice, 0, 4, ui, N, 1, hStream, 1);
}

CUresult cr_emu_cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                  size_t Width, size_t Height, CUstream hStream)
{
    CR__ENTER();
    return memset_common(dstDevice, dstPitch, 1, uc, Width, Height, hStream, 1);
}

CUresult cr_emu_cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                   size_t Width, size_t Height, CUstream hStream)
{
    CR__ENTER();
    return memset_common(dstDevice, dstPitch, 2, us, Width, Height, hStream, 1);
}

CUresult cr_emu_cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                   size_t Width, size_t Height, CUstream hStream)
{
    CR__ENTER();
    return memset_common(dstDevice, dstPitch, 4, ui, Width, Height, hStream, 1);
}
