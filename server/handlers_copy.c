/* Copies (wire formats in common/protocol.h).
 *
 * Host-to-device bytes arrive as the request's bulk and are enqueued from there; the
 * backend consumes a pageable source before returning, so the request can be freed.
 * Device-to-host copies land in a page-locked staging buffer (reused, buffers.c): a
 * waiting copy replies from a waiter thread once its event completed; an asynchronous one
 * is pushed to the client by a host function when the stream gets there. Large data leaves in CR_COPY_CHUNK
 * frames. */
#include <stdlib.h>
#include <string.h>

#include "cr_server_hand.h"
#include "dispatch.h"
#include "error.h"
#include "log.h"
#include "protocol.h"

typedef struct {
    cr_session_t *session;
    cr_request_t *req; /* waiting copies: the request to answer */
    uint64_t call_id;  /* asynchronous copies: the call the data belongs to */
    cr_staging_t staging;
    size_t size;
    CUevent done;
} dtoh_t;

static void staging_release(void *arg)
{
    dtoh_t *t = arg;
    cr_staging_put(t->session->backend, &t->staging);
    cr_session_unref(t->session);
    free(t);
}

/* Sends the staged bytes as `opcode` frames (replies or @d2h_data), the last one without
 * CR_FRAME_PARTIAL; the last frame's release frees the staging buffer. */
static void send_staged(dtoh_t *t, cr_request_t *req, uint16_t opcode)
{
    size_t off = 0;
    do {
        size_t len = t->size - off < CR_COPY_CHUNK ? t->size - off : CR_COPY_CHUNK;
        int last = off + len == t->size;
        msgpack_packer pk;
        cr_outmsg_t *m = req ? NULL : cr_message_new(opcode, t->call_id, 0, &pk);
        cr_reply_t r;
        if (req) {
            if (cr_reply_begin(req, &r, CUDA_SUCCESS, 0) != 0)
                break;
            m = r.msg;
        } else {
            if (!m)
                break;
            msgpack_pack_array(&pk, 1);
            msgpack_pack_int(&pk, CUDA_SUCCESS);
        }
        m->bulk = (uint8_t *)t->staging.ptr + off;
        m->bulk_len = len;
        if (last) {
            m->release = staging_release;
            m->release_arg = t;
        }
        uint32_t flags = last ? 0 : CR_FRAME_PARTIAL;
        if (req) {
            r.msg = m;
            cr_reply_send(req, &r, flags);
        } else {
            cr_message_finish(m, opcode, t->call_id, flags);
            cr_server_send(t->session, m);
        }
        if (last)
            return;
        off += len;
    } while (1);
    staging_release(t); /* out of memory midway: the client sees the connection's end */
}

/* Waiter thread: answer a waiting device-to-host copy once its event completed. */
static void reply_when_done(void *arg)
{
    dtoh_t *t = arg;
    cr_session_t *s = t->session;
    const cr_driver_t *d = &s->backend->d;
    CUresult r = d->cuEventSynchronize(t->done);
    d->cuEventDestroy_v2(t->done);
    cr_request_t *req = t->req;
    cr_session_ref(s); /* t may be freed by send_staged */
    if (r == CUDA_SUCCESS) {
        send_staged(t, req, req->hdr.opcode);
        cr_request_free(req);
    } else {
        cr_request_finish(req, r);
        staging_release(t);
    }
    cr_session_task_end(s);
    cr_session_unref(s);
}

/* Host function, in stream order: push the data of an asynchronous copy. */
static void push_when_done(void *arg)
{
    dtoh_t *t = arg;
    send_staged(t, NULL, CR_OP_D2H_DATA);
}

/* The copy of an asynchronous device-to-host request failed: tell the client no data is
 * coming for it (the error itself surfaces at its next waiting call). */
static void end_expected_data(cr_session_t *s, uint64_t call_id)
{
    msgpack_packer pk;
    cr_outmsg_t *m = cr_message_new(CR_OP_D2H_DATA, call_id, 0, &pk);
    if (!m)
        return;
    msgpack_pack_array(&pk, 1);
    msgpack_pack_int(&pk, CUDA_ERROR_INVALID_VALUE);
    cr_message_finish(m, CR_OP_D2H_DATA, call_id, 0);
    cr_server_send(s, m);
}

/* Ends a request that failed before its copy was enqueued; owns req. */
static void fail_copy(cr_request_t *req, CUresult r, int expects_data)
{
    if (expects_data && !cr_request_waits(req))
        end_expected_data(req->session, req->hdr.call_id);
    cr_request_finish(req, r);
}

/* Arranges for the bytes the copy stages to reach the client; owns req. */
static void finish_dtoh(cr_request_t *req, cr_handle_t *stream, dtoh_t *t, CUresult r)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &s->backend->d;
    if (r == CUDA_SUCCESS && !cr_request_waits(req)) {
        t->call_id = req->hdr.call_id;
        r = d->cuLaunchHostFunc(stream->obj, push_when_done, t);
    }
    if (r != CUDA_SUCCESS) {
        if (!cr_request_waits(req))
            end_expected_data(s, req->hdr.call_id);
        cr_request_finish(req, r);
        staging_release(t);
        return;
    }
    if (!cr_request_waits(req)) {
        cr_request_free(req);
        return;
    }
    t->req = req;
    if ((r = d->cuEventCreate(&t->done, CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS &&
        (r = d->cuEventRecord(t->done, stream->obj)) != CUDA_SUCCESS)
        d->cuEventDestroy_v2(t->done);
    if (r != CUDA_SUCCESS) {
        cr_request_finish(req, r);
        staging_release(t);
        return;
    }
    cr_session_task_begin(s);
    if (cr_waiter_run(reply_when_done, t) != 0)
        reply_when_done(t); /* no thread to spare: wait here */
}

static dtoh_t *dtoh_new(cr_session_t *s, size_t size, CUresult *r)
{
    dtoh_t *t = calloc(1, sizeof *t);
    if (!t) {
        *r = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    t->session = s;
    t->size = size;
    if ((*r = cr_staging_get(s->backend, size ? size : 1, &t->staging)) != CUDA_SUCCESS) {
        free(t);
        return NULL;
    }
    cr_session_ref(s);
    return t;
}

/* --- 1D ---------------------------------------------------------------------------------------- */

/* [address, bytes, stream] */
static int copy_args(cr_request_t *req, uint64_t *addr, uint64_t *bytes, cr_handle_t **stream)
{
    uint64_t sid;
    if (req->argc != 3 || cr_arg_u64(req, 0, addr) || cr_arg_u64(req, 1, bytes) ||
        cr_arg_u64(req, 2, &sid))
        return CUDA_ERROR_INVALID_VALUE;
    if (!(*stream = cr_session_stream(req->session, sid)))
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

static void htod(cr_request_t *req)
{
    uint64_t dst, bytes;
    cr_handle_t *stream;
    CUresult r = copy_args(req, &dst, &bytes, &stream);
    if (r == CUDA_SUCCESS && bytes != req->hdr.bulk_len)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        const cr_driver_t *d = &req->session->backend->d;
        cr_session_stream_prepare(req->session, stream);
        r = d->cuMemcpyHtoDAsync_v2(dst, req->bulk, bytes, stream->obj);
    }
    cr_request_finish(req, r);
}

void cr_srv_cuMemcpyHtoD_v2(cr_request_t *req)
{
    htod(req);
}

void cr_srv_cuMemcpyHtoDAsync_v2(cr_request_t *req)
{
    htod(req);
}

static void dtoh(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t src, bytes;
    cr_handle_t *stream;
    CUresult r = copy_args(req, &src, &bytes, &stream);
    if (r == CUDA_SUCCESS && bytes > CR_FRAME_MAX_BULK)
        r = CUDA_ERROR_INVALID_VALUE;
    dtoh_t *t = r == CUDA_SUCCESS ? dtoh_new(s, bytes, &r) : NULL;
    if (!t) {
        fail_copy(req, r, 1);
        return;
    }
    cr_session_stream_prepare(s, stream);
    r = s->backend->d.cuMemcpyDtoHAsync_v2(t->staging.ptr, src, bytes, stream->obj);
    finish_dtoh(req, stream, t, r);
}

void cr_srv_cuMemcpyDtoH_v2(cr_request_t *req)
{
    dtoh(req);
}

void cr_srv_cuMemcpyDtoHAsync_v2(cr_request_t *req)
{
    dtoh(req);
}

/* --- 2D and 3D -------------------------------------------------------------------------------- */

/* A device side: [address, x_bytes, y, z, pitch, slice_height]. */
static int device_side(const msgpack_object *o, CUdeviceptr *addr, size_t v[5])
{
    uint64_t f[6];
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 6)
        return CR_EPROTO;
    for (int i = 0; i < 6; i++)
        if (cr_obj_u64(&o->via.array.ptr[i], &f[i]))
            return CR_EPROTO;
    *addr = f[0];
    for (int i = 0; i < 5; i++)
        v[i] = f[i + 1];
    return 0;
}

static void copy_3d(cr_request_t *req)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &s->backend->d;
    int64_t direction = 0;
    uint64_t sid, width, height, depth;
    if (req->argc != 7 || cr_arg_i64(req, 0, &direction) || cr_arg_u64(req, 1, &sid) ||
        cr_arg_u64(req, 2, &width) || cr_arg_u64(req, 3, &height) ||
        cr_arg_u64(req, 4, &depth) || width == 0 || height == 0 || depth == 0 ||
        width > CR_FRAME_MAX_BULK || height > CR_FRAME_MAX_BULK / width ||
        depth > CR_FRAME_MAX_BULK / (width * height)) {
        fail_copy(req, CUDA_ERROR_INVALID_VALUE, direction == CR_COPY_DTOH);
        return;
    }
    cr_handle_t *stream = cr_session_stream(s, sid);
    if (!stream) {
        fail_copy(req, CUDA_ERROR_INVALID_HANDLE, direction == CR_COPY_DTOH);
        return;
    }
    uint64_t packed = width * height * depth;
    CUDA_MEMCPY3D p = {0};
    p.WidthInBytes = width;
    p.Height = height;
    p.Depth = depth;
    size_t v[5];
    int src_device = direction == CR_COPY_DTOH || direction == CR_COPY_DTOD;
    int dst_device = direction == CR_COPY_HTOD || direction == CR_COPY_DTOD;
    if ((direction != CR_COPY_HTOD && direction != CR_COPY_DTOH && direction != CR_COPY_DTOD) ||
        (src_device && device_side(&req->args[5], &p.srcDevice, v) != 0) ||
        (!src_device && req->args[5].type != MSGPACK_OBJECT_NIL)) {
        fail_copy(req, CUDA_ERROR_INVALID_VALUE, direction == CR_COPY_DTOH);
        return;
    }
    if (src_device) {
        p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        p.srcXInBytes = v[0], p.srcY = v[1], p.srcZ = v[2], p.srcPitch = v[3], p.srcHeight = v[4];
    }
    if ((dst_device && device_side(&req->args[6], &p.dstDevice, v) != 0) ||
        (!dst_device && req->args[6].type != MSGPACK_OBJECT_NIL)) {
        fail_copy(req, CUDA_ERROR_INVALID_VALUE, direction == CR_COPY_DTOH);
        return;
    }
    if (dst_device) {
        p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        p.dstXInBytes = v[0], p.dstY = v[1], p.dstZ = v[2], p.dstPitch = v[3], p.dstHeight = v[4];
    }
    CR_DEBUG("3D copy %d: %llux%llux%llu src %#llx (%zu,%zu,%zu) pitch %zu height %zu dst %#llx "
             "(%zu,%zu,%zu) pitch %zu height %zu",
             (int)direction, (unsigned long long)width, (unsigned long long)height,
             (unsigned long long)depth, (unsigned long long)p.srcDevice, p.srcXInBytes, p.srcY,
             p.srcZ, p.srcPitch, p.srcHeight, (unsigned long long)p.dstDevice, p.dstXInBytes,
             p.dstY, p.dstZ, p.dstPitch, p.dstHeight);
    cr_session_stream_prepare(s, stream);
    if (direction == CR_COPY_HTOD) { /* the packed rows came as bulk */
        if (req->hdr.bulk_len != packed) {
            cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
            return;
        }
        p.srcMemoryType = CU_MEMORYTYPE_HOST;
        p.srcHost = req->bulk;
        p.srcPitch = width;
        p.srcHeight = height;
    }
    if (direction != CR_COPY_DTOH) {
        cr_request_finish(req, d->cuMemcpy3DAsync_v2(&p, stream->obj));
        return;
    }
    CUresult r;
    dtoh_t *t = dtoh_new(s, packed, &r);
    if (!t) {
        fail_copy(req, r, 1);
        return;
    }
    p.dstMemoryType = CU_MEMORYTYPE_HOST;
    p.dstHost = t->staging.ptr;
    p.dstPitch = width;
    p.dstHeight = height;
    finish_dtoh(req, stream, t, d->cuMemcpy3DAsync_v2(&p, stream->obj));
}

void cr_srv_cuMemcpy3D_v2(cr_request_t *req)
{
    copy_3d(req);
}

void cr_srv_cuMemcpy3DAsync_v2(cr_request_t *req)
{
    copy_3d(req);
}
