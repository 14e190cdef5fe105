/* Copies (wire formats in common/protocol.h).
 *
 * Host-to-device bytes arrive as the request's bulk and are enqueued from there; the
 * backend consumes a pageable source before returning, so the request can be freed.
 * Device-to-host copies land in a page-locked staging buffer (reused, buffers.c): a
 * waiting copy is staged in CR_COPY_CHUNK pieces and answered from a waiter thread piece
 * by piece as each completes; an asynchronous one is pushed to the client by a host
 * function when the stream gets there. With shared memory (shm.c) the host side is a
 * region of the client's and no bytes travel: the copy is enqueued on it directly. */
#include <stdlib.h>
#include <string.h>

#include "buffers.h"
#include "cr_server_hand.h"
#include "dispatch.h"
#include "error.h"
#include "log.h"
#include "loop.h"
#include "protocol.h"
#include "session.h"
#include "shm.h"

/* A device-to-host copy staged for the socket. It is referenced by its owner (the code
 * that enqueues and then answers or pushes it) and by every frame still to be written
 * that points into the staging buffer; the last reference returns the buffer. */
typedef struct {
    cr_session_t *session;
    cr_request_t *req; /* waiting copies: the request to answer */
    uint64_t call_id;  /* asynchronous copies: the call the data belongs to */
    cr_staging_t staging;
    size_t size;
    int refs;
    CUevent *done;   /* waiting copies: piece k is staged once done[k] completed */
    unsigned pieces; /* events recorded */
    CUresult error;  /* a piece could not be enqueued: answer with this after the rest */
    int uncovered;   /* a copy into the buffer is enqueued that no recorded event covers */
} dtoh_t;

static void dtoh_unref(void *arg)
{
    dtoh_t *t = arg;
    if (__atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    cr_staging_put(cr_session_backend(t->session), &t->staging);
    cr_unsent_unstage(t->session, t->size);
    cr_session_unref(t->session);
    free(t->done);
    free(t);
}

/* Sends staged bytes [off, off + len) as one frame: a reply to req, or @d2h_data when req
 * is NULL. Partial unless it ends the copy. 0 or CR_ENOMEM. */
static int send_piece(dtoh_t *t, cr_request_t *req, size_t off, size_t len)
{
    uint32_t flags = off + len == t->size ? 0 : CR_FRAME_PARTIAL;
    cr_outmsg_t *m;
    cr_reply_t r;
    if (req) {
        if (cr_reply_begin(req, &r, CUDA_SUCCESS, 0) != 0)
            return CR_ENOMEM;
        m = r.msg;
    } else {
        msgpack_packer pk;
        if (!(m = cr_message_new(CR_OP_D2H_DATA, t->call_id, 0, &pk)))
            return CR_ENOMEM;
        msgpack_pack_array(&pk, 1);
        msgpack_pack_int(&pk, CUDA_SUCCESS);
    }
    m->bulk = (uint8_t *)t->staging.ptr + off;
    m->bulk_len = len;
    m->release = dtoh_unref;
    m->release_arg = t;
    __atomic_add_fetch(&t->refs, 1, __ATOMIC_ACQ_REL);
    if (req) {
        cr_reply_send(req, &r, flags);
    } else {
        cr_message_finish(m, CR_OP_D2H_DATA, t->call_id, flags);
        cr_server_send(t->session, m);
    }
    return 0;
}

/* Sends [from, to) in frames of at most CR_COPY_CHUNK. */
static int send_range(dtoh_t *t, cr_request_t *req, size_t from, size_t to)
{
    do {
        size_t len = to - from < CR_COPY_CHUNK ? to - from : CR_COPY_CHUNK;
        int err = send_piece(t, req, from, len);
        if (err) /* the client cannot get its bytes now: end the connection */
            cr_server_close_connection(t->session);
        if (err)
            return err;
        from += len;
    } while (from < to);
    return 0;
}

static void release_after_device(dtoh_t *t);

/* Waiter thread: answer a waiting device-to-host copy piece by piece, each as soon as it
 * is staged, so that the socket carries one piece while the device copies the next. */
static void reply_when_done(void *arg)
{
    dtoh_t *t = arg;
    cr_session_t *s = t->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    cr_request_t *req = t->req;
    CUresult r = CUDA_SUCCESS;
    size_t sent = 0;
    for (unsigned k = 0; k < t->pieces; k++) {
        CUresult e = d->cuEventSynchronize(t->done[k]);
        d->cuEventDestroy_v2(t->done[k]);
        if (r != CUDA_SUCCESS)
            continue;
        if (e != CUDA_SUCCESS) {
            r = e;
            continue;
        }
        if (t->error != CUDA_SUCCESS) /* a later piece was never enqueued */
            continue;
        size_t end = k + 1 == t->pieces ? t->size : (size_t)(k + 1) * CR_COPY_CHUNK;
        if (send_range(t, req, sent, end) != 0)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        sent = end;
    }
    if (r == CUDA_SUCCESS)
        r = t->error;
    if (r == CUDA_SUCCESS) { /* the last piece was the final reply */
        cr_request_free(req);
    } else if (sent == 0) {
        cr_request_finish(req, r);
    } else { /* partial frames went out: the final one says the copy failed */
        cr_reply_t rep;
        if (cr_reply_begin(req, &rep, r, 0) == 0)
            cr_reply_send(req, &rep, 0);
        cr_request_free(req);
    }
    if (t->uncovered)
        release_after_device(t);
    else
        dtoh_unref(t);
}

/* Host function, in stream order: push the data of an asynchronous copy. */
static void push_when_done(void *arg)
{
    dtoh_t *t = arg;
    send_range(t, NULL, 0, t->size);
    dtoh_unref(t);
}

/* Waiter thread: the device may still write into the staging buffer of a copy that could
 * not be seen through; let it finish before the buffer is reused. */
static void release_when_idle(void *arg)
{
    dtoh_t *t = arg;
    cr_session_backend(t->session)->d.cuCtxSynchronize();
    dtoh_unref(t);
}

static void release_after_device(dtoh_t *t)
{
    cr_session_finish_on_waiter(t->session, release_when_idle, t);
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

static dtoh_t *dtoh_new(cr_session_t *s, size_t size, unsigned pieces, CUresult *r)
{
    dtoh_t *t = calloc(1, sizeof *t);
    CUevent *done = calloc(pieces, sizeof *done);
    if (!t || !done) {
        free(t);
        free(done);
        *r = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    t->session = s;
    t->size = size;
    t->refs = 1;
    t->done = done;
    if ((*r = cr_staging_get(cr_session_backend(s), size ? size : 1, &t->staging)) !=
        CUDA_SUCCESS) {
        free(done);
        free(t);
        return NULL;
    }
    cr_unsent_stage(s, size); /* its bytes are output the client has yet to read */
    cr_session_ref(s);
    return t;
}

/* Records the event that says piece t->pieces is staged. */
static CUresult record_piece(dtoh_t *t, cr_handle_t *stream)
{
    const cr_driver_t *d = &cr_session_backend(t->session)->d;
    CUevent e;
    CUresult r = d->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS && (r = d->cuEventRecord(e, stream->obj)) != CUDA_SUCCESS)
        d->cuEventDestroy_v2(e);
    if (r == CUDA_SUCCESS)
        t->done[t->pieces++] = e;
    return r;
}

/* Arranges for the bytes the copy stages to reach the client; owns req and t. r is the
 * result of enqueuing; pieces already enqueued (t->pieces events) are waited for before a
 * failure is answered. `uncovered`: a copy into the staging buffer is enqueued that no
 * recorded event covers (the buffer is then reused only once the device is idle). */
static void finish_dtoh(cr_request_t *req, cr_handle_t *stream, dtoh_t *t, CUresult r,
                        int uncovered)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    if (!cr_request_waits(req)) {
        if (r == CUDA_SUCCESS) {
            t->call_id = req->hdr.call_id;
            r = d->cuLaunchHostFunc(stream->obj, push_when_done, t);
        }
        if (r != CUDA_SUCCESS) {
            end_expected_data(s, req->hdr.call_id);
            if (uncovered)
                release_after_device(t);
            else
                dtoh_unref(t);
        }
        cr_request_finish(req, r); /* defers a failure to the next waiting call */
        return;
    }
    if (r != CUDA_SUCCESS && t->pieces == 0) {
        cr_request_finish(req, r);
        if (uncovered)
            release_after_device(t);
        else
            dtoh_unref(t);
        return;
    }
    t->error = r;
    t->uncovered = uncovered;
    t->req = req;
    cr_session_finish_on_waiter(s, reply_when_done, t);
}

/* --- 1D ---------------------------------------------------------------------------------------- */

/* [address, bytes, stream] or [address, bytes, stream, region, offset]: *host is the
 * region's memory for the second form, NULL for the first. */
static int copy_args(cr_request_t *req, uint64_t *addr, uint64_t *bytes, cr_handle_t **stream,
                     void **host)
{
    uint64_t sid, region, offset;
    *host = NULL;
    if ((req->argc != 3 && req->argc != 5) || cr_arg_u64(req, 0, addr) ||
        cr_arg_u64(req, 1, bytes) || cr_arg_u64(req, 2, &sid))
        return CUDA_ERROR_INVALID_VALUE;
    if (req->argc == 5 && (cr_arg_u64(req, 3, &region) || cr_arg_u64(req, 4, &offset) ||
                           !(*host = cr_shm_host_ptr(req->session, region, offset, *bytes))))
        return CUDA_ERROR_INVALID_VALUE;
    if (*bytes && !cr_session_owns(req->session, *addr, *bytes))
        return CUDA_ERROR_INVALID_VALUE; /* not this client's memory */
    if (!(*stream = cr_session_stream(req->session, sid)))
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

typedef struct {
    cr_request_t *req;
    CUevent done;
} stream_wait_t;

/* Waiter thread: answer once the stream got past the event. */
static void finish_when_done(void *arg)
{
    stream_wait_t *w = arg;
    cr_session_t *s = w->req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    CUresult r = d->cuEventSynchronize(w->done);
    d->cuEventDestroy_v2(w->done);
    cr_request_finish(w->req, r);
    free(w);
}

/* Ends a request whose work was just enqueued on stream with result r: a waiting one is
 * answered once the work completed, as a copy between shared memory and the device must
 * be before the client touches its memory. Owns req. */
static void finish_after_stream(cr_request_t *req, cr_handle_t *stream, CUresult r)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    stream_wait_t *w = NULL;
    if (r == CUDA_SUCCESS && cr_request_waits(req)) {
        if (!(w = malloc(sizeof *w)))
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else if ((r = d->cuEventCreate(&w->done, CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS &&
                 (r = d->cuEventRecord(w->done, stream->obj)) != CUDA_SUCCESS)
            d->cuEventDestroy_v2(w->done);
    }
    if (r != CUDA_SUCCESS || !w) {
        free(w);
        cr_request_finish(req, r);
        return;
    }
    w->req = req;
    cr_session_finish_on_waiter(s, finish_when_done, w);
}

static void htod(cr_request_t *req)
{
    uint64_t dst, bytes;
    cr_handle_t *stream;
    void *host;
    CUresult r = copy_args(req, &dst, &bytes, &stream, &host);
    if (r == CUDA_SUCCESS && (host ? req->hdr.bulk_len != 0 : bytes != req->hdr.bulk_len))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS) {
        cr_request_finish(req, r);
        return;
    }
    const cr_driver_t *d = &cr_session_backend(req->session)->d;
    cr_session_stream_prepare(req->session, stream);
    cr_session_count_copy(req->session, CR_COPY_HTOD, bytes);
    if (host) { /* page-locked shared memory: read when the stream gets there */
        finish_after_stream(req, stream, d->cuMemcpyHtoDAsync_v2(dst, host, bytes, stream->obj));
        return;
    }
    /* The bulk is pageable to the backend: consumed before the call returns. A waiting copy
     * (cuMemcpyHtoD) is still answered only once it reached the device: programs count on
     * it being there for work they queue next on a non-blocking stream. */
    finish_after_stream(req, stream, d->cuMemcpyHtoDAsync_v2(dst, req->bulk, bytes, stream->obj));
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
    void *host;
    CUresult r = copy_args(req, &src, &bytes, &stream, &host);
    if (r == CUDA_SUCCESS && bytes > CR_FRAME_MAX_BULK)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        cr_session_count_copy(s, CR_COPY_DTOH, bytes);
    if (r == CUDA_SUCCESS && host) { /* into shared memory: nothing to send */
        cr_session_stream_prepare(s, stream);
        finish_after_stream(
            req, stream,
            cr_session_backend(s)->d.cuMemcpyDtoHAsync_v2(host, src, bytes, stream->obj));
        return;
    }
    int shared = req->argc == 5; /* a failed shared copy: the client expects no data */
    /* a waiting copy is staged and sent piece by piece, the socket busy with one piece
     * while the device copies the next */
    int waits = cr_request_waits(req);
    unsigned pieces = waits && bytes > CR_COPY_CHUNK
                          ? (unsigned)((bytes + CR_COPY_CHUNK - 1) / CR_COPY_CHUNK)
                          : 1;
    dtoh_t *t = r == CUDA_SUCCESS ? dtoh_new(s, bytes, pieces, &r) : NULL;
    if (!t) {
        fail_copy(req, r, !shared);
        return;
    }
    cr_session_stream_prepare(s, stream);
    int uncovered = 0;
    for (unsigned k = 0; k < pieces && r == CUDA_SUCCESS; k++) {
        size_t off = (size_t)k * CR_COPY_CHUNK;
        size_t len = pieces == 1                   ? bytes
                     : bytes - off < CR_COPY_CHUNK ? bytes - off
                                                   : CR_COPY_CHUNK;
        r = cr_session_backend(s)->d.cuMemcpyDtoHAsync_v2((uint8_t *)t->staging.ptr + off,
                                                          src + off, len, stream->obj);
        if (r == CUDA_SUCCESS) {
            uncovered = 1;
            if (waits && (r = record_piece(t, stream)) == CUDA_SUCCESS)
                uncovered = 0;
        }
    }
    finish_dtoh(req, stream, t, r, uncovered);
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

/* 1 when the bytes a 3D copy touches on a device side (v: x, y, z, pitch, slice height)
 * lie in the session's own memory. */
static int side_owned(cr_session_t *s, CUdeviceptr base, const size_t v[5], uint64_t width,
                      uint64_t height, uint64_t depth)
{
    uint64_t slice, first, span, t;
    if (__builtin_mul_overflow((uint64_t)v[3], (uint64_t)v[4], &slice) ||
        __builtin_mul_overflow((uint64_t)v[2], slice, &first) ||
        __builtin_mul_overflow((uint64_t)v[1], (uint64_t)v[3], &t) ||
        __builtin_add_overflow(first, t, &first) ||
        __builtin_add_overflow(first, (uint64_t)v[0], &first) ||
        __builtin_add_overflow(first, base, &first) ||
        __builtin_mul_overflow(depth - 1, slice, &span) ||
        __builtin_mul_overflow(height - 1, (uint64_t)v[3], &t) ||
        __builtin_add_overflow(span, t, &span) || __builtin_add_overflow(span, width, &span))
        return 0;
    return cr_session_owns(s, first, span);
}

static void copy_3d(cr_request_t *req)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    int64_t direction = 0;
    uint64_t sid, width, height, depth;
    if (req->argc != 7 || cr_arg_i64(req, 0, &direction) || cr_arg_u64(req, 1, &sid) ||
        cr_arg_u64(req, 2, &width) || cr_arg_u64(req, 3, &height) || cr_arg_u64(req, 4, &depth) ||
        width == 0 || height == 0 || depth == 0 || width > CR_COPY3D_MAX_BYTES ||
        height > CR_COPY3D_MAX_BYTES / width || depth > CR_COPY3D_MAX_BYTES / (width * height)) {
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
    if (src_device && !side_owned(s, p.srcDevice, v, width, height, depth)) {
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
    if (dst_device && !side_owned(s, p.dstDevice, v, width, height, depth)) {
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
    cr_session_count_copy(s, (int)direction, packed);
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
    dtoh_t *t = dtoh_new(s, packed, 1, &r);
    if (!t) {
        fail_copy(req, r, 1);
        return;
    }
    p.dstMemoryType = CU_MEMORYTYPE_HOST;
    p.dstHost = t->staging.ptr;
    p.dstPitch = width;
    p.dstHeight = height;
    r = d->cuMemcpy3DAsync_v2(&p, stream->obj);
    int uncovered = r == CUDA_SUCCESS;
    if (uncovered && cr_request_waits(req) && (r = record_piece(t, stream)) == CUDA_SUCCESS)
        uncovered = 0;
    finish_dtoh(req, stream, t, r, uncovered);
}

void cr_srv_cuMemcpy3D_v2(cr_request_t *req)
{
    copy_3d(req);
}

void cr_srv_cuMemcpy3DAsync_v2(cr_request_t *req)
{
    copy_3d(req);
}
