/* Copies between this process and the device (wire formats in common/protocol.h).
 *
 * With shared memory (shm.c), a host side in shared page-locked memory is named by region
 * and offset and no bytes travel; pageable memory passes through a staging area in
 * chunks, several in flight, so that our memcpy of one chunk overlaps the server's copy of
 * another. Otherwise host-to-device bytes go out as the bulk of request frames, written
 * straight from the caller's buffer, and device-to-host bytes are read straight into the
 * caller's buffer. A copy CUDA makes asynchronous only for page-locked memory (device to
 * host) is asynchronous here only for page-locked memory too: into pageable memory it
 * returns once the bytes have landed, as CUDA's does.
 *
 * Threads: any application thread. A copy that waits waits for its replies (a staged
 * one, for each chunk's). */
#include <string.h>

#include "capture.h"
#include "client.h"
#include "context.h"
#include "error.h"
#include "memory.h"
#include "protocol.h"
#include "request.h"
#include "shm.h"
#include "stream.h"

static CUresult begin(cr_msg_t *m, uint16_t opcode)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    return cr_transport_error(cr_msg_begin(cl->conn, m, opcode));
}

static CUresult wait_reply(cr_msg_t *m, cr_sink_t *sink)
{
    cr_pending_t p = {0};
    msgpack_unpacked u;
    if (sink)
        p.sink = *sink;
    CUresult r = cr_call(m, &p, &u);
    cr_reply_done(&p, &u);
    return r;
}

/* --- 1D through shared memory ----------------------------------------------------------------- */

/* Smaller pageable copies go over the socket: one round trip with the bytes inline costs
 * less than a staged copy's wait for the device copy. */
#define STAGED_HTOD_MIN ((size_t)256 << 10)
#define STAGED_DTOH_MIN ((size_t)16 << 10)
#define STAGING_SLOTS (CR_SHM_STAGING_SIZE / CR_SHM_SLOT)

static CUresult begin_shared(cr_msg_t *m, uint16_t opcode, CUdeviceptr dev, size_t len,
                             uint64_t sid, uint64_t region, uint64_t offset)
{
    CUresult r = begin(m, opcode);
    if (r != CUDA_SUCCESS)
        return r;
    msgpack_pack_array(&m->pk, 5);
    msgpack_pack_uint64(&m->pk, dev);
    msgpack_pack_uint64(&m->pk, len);
    msgpack_pack_uint64(&m->pk, sid);
    msgpack_pack_uint64(&m->pk, region);
    msgpack_pack_uint64(&m->pk, offset);
    return CUDA_SUCCESS;
}

/* The host side already lies in shared memory: one request, no bytes. */
static CUresult copy_shared(int to_device, CUdeviceptr dev, size_t n, uint64_t sid, uint64_t region,
                            uint64_t offset, int wait)
{
    uint16_t op = to_device ? (wait ? CR_OP_cuMemcpyHtoD_v2 : CR_OP_cuMemcpyHtoDAsync_v2)
                            : (wait ? CR_OP_cuMemcpyDtoH_v2 : CR_OP_cuMemcpyDtoHAsync_v2);
    cr_msg_t m;
    CUresult r = begin_shared(&m, op, dev, n, sid, region, offset);
    if (r != CUDA_SUCCESS)
        return r;
    return wait ? wait_reply(&m, NULL) : cr_transport_error(cr_msg_send(&m));
}

/* Pageable memory through a staging area, chunk by chunk, STAGING_SLOTS in flight: chunk k
 * uses slot k % STAGING_SLOTS, reused once the server answered for the chunk before. */
typedef struct {
    int to_device;
    uint8_t *host;
    cr_shm_staging_t *st;
    cr_pending_t pend[STAGING_SLOTS];
    size_t at[STAGING_SLOTS], len[STAGING_SLOTS];
    int busy[STAGING_SLOTS];
    CUresult result; /* the first failure */
} staged_t;

/* Waits for the chunk in flight in a slot; device-to-host, its bytes go to their place. */
static void staged_finish(staged_t *c, size_t slot)
{
    msgpack_unpacked u;
    CUresult r = cr_call_finish(&c->pend[slot], &u);
    cr_reply_done(&c->pend[slot], &u);
    c->busy[slot] = 0;
    if (r == CUDA_SUCCESS && !c->to_device)
        memcpy(c->host + c->at[slot], c->st->base + slot * CR_SHM_SLOT, c->len[slot]);
    if (c->result == CUDA_SUCCESS)
        c->result = r;
}

static CUresult copy_staged(int to_device, CUdeviceptr dev, uint8_t *host, size_t n, uint64_t sid,
                            cr_shm_staging_t *st)
{
    staged_t c = {.to_device = to_device, .host = host, .st = st};
    size_t off = 0, k = 0;
    for (; off < n; k++) {
        size_t slot = k % STAGING_SLOTS;
        if (c.busy[slot])
            staged_finish(&c, slot);
        if (c.result != CUDA_SUCCESS)
            break;
        size_t len = n - off < CR_SHM_SLOT ? n - off : CR_SHM_SLOT;
        if (to_device)
            memcpy(st->base + slot * CR_SHM_SLOT, host + off, len);
        cr_msg_t m;
        c.result = begin_shared(&m, to_device ? CR_OP_cuMemcpyHtoD_v2 : CR_OP_cuMemcpyDtoH_v2,
                                dev + off, len, sid, st->region, slot * CR_SHM_SLOT);
        if (c.result != CUDA_SUCCESS)
            break;
        c.pend[slot] = (cr_pending_t){0};
        c.at[slot] = off;
        c.len[slot] = len;
        cr_call_start(&m, &c.pend[slot]);
        c.busy[slot] = 1;
        off += len;
    }
    for (size_t i = 0; i < STAGING_SLOTS; i++) /* the rest, oldest first */
        if (c.busy[(k + i) % STAGING_SLOTS])
            staged_finish(&c, (k + i) % STAGING_SLOTS);
    return c.result;
}

/* Copies through shared memory when it can: 1 with *r set, 0 to use the socket. */
static int try_shared(int to_device, CUdeviceptr dev, uint8_t *host, size_t n, uint64_t sid,
                      int wait, CUresult *r)
{
    uint64_t region, offset;
    if (n == 0 || !cr_shm_enabled())
        return 0;
    if (cr_shm_find(host, n, &region, &offset)) {
        *r = copy_shared(to_device, dev, n, sid, region, offset, wait);
        return 1;
    }
    if (n < (to_device ? STAGED_HTOD_MIN : STAGED_DTOH_MIN))
        return 0;
    cr_shm_staging_t *st = cr_shm_staging_take();
    if (!st)
        return 0; /* every area is in use: this copy takes the socket */
    *r = copy_staged(to_device, dev, host, n, sid, st);
    cr_shm_staging_give(st);
    return 1;
}

/* --- 1D ------------------------------------------------------------------------------------- */

static CUresult copy_htod(CUdeviceptr dst, const void *src, size_t n, CUstream stream, int wait)
{
    uint64_t sid;
    if (!src && n)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cr_stream_wire_id(stream, &sid);
    if (r == CUDA_SUCCESS) /* host memory is this process's: no capture can replay it */
        r = cr_capture_check(sid, 0);
    if (r != CUDA_SUCCESS)
        return r;
    if (try_shared(1, dst, (uint8_t *)src, n, sid, wait, &r))
        return r;
    size_t off = 0;
    do {
        size_t len = n - off < CR_COPY_CHUNK ? n - off : CR_COPY_CHUNK;
        int last = off + len == n;
        cr_msg_t m;
        r = begin(&m, wait && last ? CR_OP_cuMemcpyHtoD_v2 : CR_OP_cuMemcpyHtoDAsync_v2);
        if (r != CUDA_SUCCESS)
            return r;
        msgpack_pack_array(&m.pk, 3);
        msgpack_pack_uint64(&m.pk, dst + off);
        msgpack_pack_uint64(&m.pk, len);
        msgpack_pack_uint64(&m.pk, sid);
        cr_msg_bulk(&m, (const char *)src + off, len);
        if (wait && last)
            return wait_reply(&m, NULL);
        if ((r = cr_transport_error(cr_msg_send(&m))) != CUDA_SUCCESS)
            return r;
        off += len;
    } while (off < n);
    return CUDA_SUCCESS;
}

static CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream stream, int async)
{
    uint64_t sid;
    if (!dst && n)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cr_stream_wire_id(stream, &sid);
    if (r == CUDA_SUCCESS) /* host memory is this process's: no capture can replay it */
        r = cr_capture_check(sid, 0);
    if (r != CUDA_SUCCESS)
        return r;
    if (async && !cr_host_mem_type(dst, NULL, NULL, NULL))
        async = 0; /* pageable destination: CUDA returns after the copy, so do we */
    if (try_shared(0, src, dst, n, sid, !async, &r))
        return r;
    cr_sink_t sink = {dst, n ? n : 1, n ? n : 1, 1, 0};
    cr_msg_t m;
    r = begin(&m, async ? CR_OP_cuMemcpyDtoHAsync_v2 : CR_OP_cuMemcpyDtoH_v2);
    if (r != CUDA_SUCCESS)
        return r;
    msgpack_pack_array(&m.pk, 3);
    msgpack_pack_uint64(&m.pk, src);
    msgpack_pack_uint64(&m.pk, n);
    msgpack_pack_uint64(&m.pk, sid);
    if (!async)
        return wait_reply(&m, &sink);
    int err = cr_conn_expect_data(m.conn, m.call_id, &sink);
    if (err) {
        cr_msg_cancel(&m);
        return cr_transport_error(err);
    }
    return cr_transport_error(cr_msg_send(&m));
}

/* Device-to-device copies are asynchronous; like the driver, they reject ranges outside
 * every allocation at once. */
static CUresult copy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream, int async)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (n && (!cr_devmap_contains(dst, n) || !cr_devmap_contains(src, n)))
        return CUDA_ERROR_INVALID_VALUE;
    if (async)
        return cr_remote_call(&cr_desc_cuMemcpyDtoDAsync_v2,
                              (cr_arg_t[]){{.u = dst}, {.u = src}, {.u = n}, {.p = stream}});
    return cr_remote_call(&cr_desc_cuMemcpyDtoD_v2,
                          (cr_arg_t[]){{.u = dst}, {.u = src}, {.u = n}, {.p = NULL}});
}

CUresult cr_hand_cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return copy_htod(dst, src, n, NULL, 1);
}

CUresult cr_hand_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
    return copy_htod(dst, src, n, stream, 0);
}

CUresult cr_hand_cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy_dtod(dst, src, n, NULL, 0);
}

CUresult cr_hand_cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
    return copy_dtod(dst, src, n, stream, 1);
}

CUresult cr_hand_cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return copy_dtoh(dst, src, n, NULL, 0);
}

CUresult cr_hand_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream stream)
{
    return copy_dtoh(dst, src, n, stream, 1);
}

/* Unified addressing: the direction follows from which side each address lies on. */
static CUresult copy_unified(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream, int async)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    int dst_dev = cr_is_device_ptr(dst), src_dev = cr_is_device_ptr(src);
    if (dst_dev && src_dev)
        return copy_dtod(dst, src, n, stream, async);
    if (dst_dev)
        return copy_htod(dst, (const void *)(uintptr_t)src, n, stream, !async);
    if (src_dev)
        return copy_dtoh((void *)(uintptr_t)dst, src, n, stream, async);
    if (n && (!dst || !src))
        return CUDA_ERROR_INVALID_VALUE;
    if (!async) { /* host to host, ordered after the stream's work like CUDA's */
        CUresult r = cr_remote_call(&cr_desc_cuStreamSynchronize, (cr_arg_t[]){{.p = stream}});
        if (r != CUDA_SUCCESS)
            return r;
    }
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy_unified(dst, src, n, NULL, 0);
}

CUresult cr_hand_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
    return copy_unified(dst, src, n, stream, 1);
}

CUresult cr_hand_cuMemcpyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                              CUcontext src_ctx, size_t n)
{
    if (!cr_ctx_valid(dst_ctx) || !cr_ctx_valid(src_ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return copy_dtod(dst, src, n, NULL, 0);
}

CUresult cr_hand_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                   CUcontext src_ctx, size_t n, CUstream stream)
{
    if (!cr_ctx_valid(dst_ctx) || !cr_ctx_valid(src_ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return copy_dtod(dst, src, n, stream, 1);
}

/* --- 2D and 3D ------------------------------------------------------------------------------ */

/* One side of a copy, in the terms of CUDA_MEMCPY3D. */
typedef struct {
    CUmemorytype type;
    const void *host;
    CUdeviceptr device;
    size_t x, y, z, pitch, height;
} side_t;

static CUresult classify(side_t *s)
{
    if (s->type == CU_MEMORYTYPE_UNIFIED)
        s->type = cr_is_device_ptr(s->device) ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (s->type == CU_MEMORYTYPE_HOST && !s->host)
        s->host = (const void *)(uintptr_t)s->device; /* unified: the address is the host one */
    if (s->type == CU_MEMORYTYPE_ARRAY)
        return cr_unsupported("copies to or from CUDA arrays");
    if (s->type != CU_MEMORYTYPE_HOST && s->type != CU_MEMORYTYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* The address of row (y, z) of a host side. */
static const uint8_t *host_row(const side_t *s, size_t y, size_t z)
{
    return (const uint8_t *)s->host + s->x + (s->y + y + (s->z + z) * s->height) * s->pitch;
}

static void pack_device_side(msgpack_packer *pk, const side_t *s)
{
    if (s->type != CU_MEMORYTYPE_DEVICE) {
        msgpack_pack_nil(pk);
        return;
    }
    msgpack_pack_array(pk, 6);
    msgpack_pack_uint64(pk, s->device);
    msgpack_pack_uint64(pk, s->x);
    msgpack_pack_uint64(pk, s->y);
    msgpack_pack_uint64(pk, s->z);
    msgpack_pack_uint64(pk, s->pitch);
    msgpack_pack_uint64(pk, s->height);
}

/* One 2D/3D copy message: at most CR_COPY3D_MAX_BYTES of rows. */
static CUresult copy_3d_message(side_t src, side_t dst, size_t width, size_t height, size_t depth,
                                CUstream stream, int async)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = classify(&src);
    if (r == CUDA_SUCCESS)
        r = classify(&dst);
    if (r != CUDA_SUCCESS)
        return r;
    if (width == 0 || height == 0 || depth == 0)
        return CUDA_SUCCESS;
    if ((src.type == CU_MEMORYTYPE_HOST && src.pitch < width) ||
        (dst.type == CU_MEMORYTYPE_HOST && dst.pitch < width))
        return CUDA_ERROR_INVALID_VALUE;
    size_t rows = height * depth; /* copy_3d checked it */

    if (src.type == CU_MEMORYTYPE_HOST && dst.type == CU_MEMORYTYPE_HOST) {
        if (!async) {
            r = cr_remote_call(&cr_desc_cuStreamSynchronize, (cr_arg_t[]){{.p = stream}});
            if (r != CUDA_SUCCESS)
                return r;
        }
        for (size_t z = 0; z < depth; z++)
            for (size_t y = 0; y < height; y++)
                memmove((void *)host_row(&dst, y, z), host_row(&src, y, z), width);
        return CUDA_SUCCESS;
    }
    int direction = src.type == CU_MEMORYTYPE_HOST   ? CR_COPY_HTOD
                    : dst.type == CU_MEMORYTYPE_HOST ? CR_COPY_DTOH
                                                     : CR_COPY_DTOD;
    if (direction == CR_COPY_DTOH && async && !cr_host_mem_type(dst.host, NULL, NULL, NULL))
        async = 0;
    uint64_t sid;
    if ((r = cr_stream_wire_id(stream, &sid)) != CUDA_SUCCESS ||
        (r = cr_capture_check(sid, 0)) != CUDA_SUCCESS) /* not among what a capture holds */
        return r;

    /* host rows travel packed: gather them for host-to-device */
    uint8_t *packed = NULL;
    if (direction == CR_COPY_HTOD) {
        packed = malloc(width * rows);
        if (!packed)
            return CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t z = 0; z < depth; z++)
            for (size_t y = 0; y < height; y++)
                memcpy(packed + (z * height + y) * width, host_row(&src, y, z), width);
    }
    cr_msg_t m;
    r = begin(&m, async ? CR_OP_cuMemcpy3DAsync_v2 : CR_OP_cuMemcpy3D_v2);
    if (r != CUDA_SUCCESS) {
        free(packed);
        return r;
    }
    msgpack_pack_array(&m.pk, 7);
    msgpack_pack_int(&m.pk, direction);
    msgpack_pack_uint64(&m.pk, sid);
    msgpack_pack_uint64(&m.pk, width);
    msgpack_pack_uint64(&m.pk, height);
    msgpack_pack_uint64(&m.pk, depth);
    pack_device_side(&m.pk, &src);
    pack_device_side(&m.pk, &dst);
    if (packed)
        cr_msg_bulk(&m, packed, width * rows);

    /* device-to-host rows land row by row at the destination's pitch */
    size_t dst_pitch = dst.pitch;
    cr_sink_t sink = {0};
    if (direction == CR_COPY_DTOH) {
        if (depth > 1 &&
            dst.height != height) { /* slices not contiguous in rows: go slice by slice */
            cr_msg_cancel(&m);
            for (size_t z = 0; z < depth && r == CUDA_SUCCESS; z++) {
                side_t s = src, d = dst;
                s.z += z;
                d.z += z;
                r = copy_3d_message(s, d, width, height, 1, stream, async);
            }
            return r;
        }
        sink = (cr_sink_t){(uint8_t *)host_row(&dst, 0, 0), width, dst_pitch, rows, 0};
    }
    if (async) {
        if (direction == CR_COPY_DTOH) {
            int err = cr_conn_expect_data(m.conn, m.call_id, &sink);
            if (err) {
                cr_msg_cancel(&m);
                return cr_transport_error(err);
            }
        }
        r = cr_transport_error(cr_msg_send(&m));
    } else {
        r = wait_reply(&m, direction == CR_COPY_DTOH ? &sink : NULL);
    }
    free(packed);
    return r;
}

/* A 2D/3D copy of any size: the server takes at most CR_COPY3D_MAX_BYTES of rows in one
 * message (that much is staged or buffered at once), so a larger copy goes as pieces of
 * whole rows, in order, or, for rows wider than that, of one row's columns. */
static CUresult copy_3d(side_t src, side_t dst, size_t width, size_t height, size_t depth,
                        CUstream stream, int async)
{
    size_t rows, bytes;
    if (__builtin_mul_overflow(height, depth, &rows) || __builtin_mul_overflow(width, rows, &bytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes <= CR_COPY3D_MAX_BYTES)
        return copy_3d_message(src, dst, width, height, depth, stream, async);
    const size_t cap = CR_COPY3D_MAX_BYTES;
    CUresult r = CUDA_SUCCESS;
    for (size_t z = 0; z < depth && r == CUDA_SUCCESS; z++) {
        for (size_t y = 0; y < height && r == CUDA_SUCCESS;) {
            side_t s = src, d = dst;
            s.y += y, s.z += z, d.y += y, d.z += z;
            if (width <= cap) {
                size_t n = cap / width < height - y ? cap / width : height - y;
                r = copy_3d_message(s, d, width, n, 1, stream, async);
                y += n;
                continue;
            }
            for (size_t x = 0; x < width && r == CUDA_SUCCESS; x += cap) {
                side_t sx = s, dx = d;
                sx.x += x, dx.x += x;
                r = copy_3d_message(sx, dx, width - x < cap ? width - x : cap, 1, 1, stream, async);
            }
            y++;
        }
    }
    return r;
}

static side_t side_2d(CUmemorytype type, const void *host, CUdeviceptr device, size_t x, size_t y,
                      size_t pitch)
{
    return (side_t){type, host, device, x, y, 0, pitch, 0};
}

static CUresult copy_2d(const CUDA_MEMCPY2D *p, CUstream stream, int async)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    side_t src =
        side_2d(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcPitch);
    side_t dst =
        side_2d(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstPitch);
    if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return cr_unsupported("copies to or from CUDA arrays");
    src.height = dst.height = p->Height;
    if (src.pitch == 0)
        src.pitch = p->WidthInBytes;
    if (dst.pitch == 0)
        dst.pitch = p->WidthInBytes;
    return copy_3d(src, dst, p->WidthInBytes, p->Height, 1, stream, async);
}

CUresult cr_hand_cuMemcpy2D_v2(const CUDA_MEMCPY2D *p)
{
    return copy_2d(p, NULL, 0);
}

CUresult cr_hand_cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p)
{
    return copy_2d(p, NULL, 0);
}

CUresult cr_hand_cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream stream)
{
    return copy_2d(p, stream, 1);
}

static CUresult copy_3d_desc(const CUDA_MEMCPY3D *p, CUstream stream, int async)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return cr_unsupported("copies to or from CUDA arrays");
    side_t src = {p->srcMemoryType,
                  p->srcHost,
                  p->srcDevice,
                  p->srcXInBytes,
                  p->srcY,
                  p->srcZ,
                  p->srcPitch ? p->srcPitch : p->WidthInBytes,
                  p->srcHeight ? p->srcHeight : p->Height};
    side_t dst = {p->dstMemoryType,
                  p->dstHost,
                  p->dstDevice,
                  p->dstXInBytes,
                  p->dstY,
                  p->dstZ,
                  p->dstPitch ? p->dstPitch : p->WidthInBytes,
                  p->dstHeight ? p->dstHeight : p->Height};
    return copy_3d(src, dst, p->WidthInBytes, p->Height, p->Depth, stream, async);
}

CUresult cr_hand_cuMemcpy3D_v2(const CUDA_MEMCPY3D *p)
{
    return copy_3d_desc(p, NULL, 0);
}

CUresult cr_hand_cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream stream)
{
    return copy_3d_desc(p, stream, 1);
}
