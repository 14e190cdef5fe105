/* Requests, replies and messages to the client.
 *
 * A request is one received frame: made by the loop for a frame it is about to read
 * (cr_request_new), decoded by the executor (cr_request_decode), answered by a handler
 * with a reply (cr_reply_*) or a bare result (cr_request_finish), possibly on another
 * thread, and freed. Every result a session answers with passes cr_session_note_result,
 * which notices a broken context; a failed asynchronous request becomes the session's
 * deferred error. Arguments are read with checked accessors (cr_arg_*). */
#include "request.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buffers.h"
#include "error.h"
#include "log.h"
#include "loop.h"
#include "mpcheck.h"
#include "protocol.h"
#include "session.h"

/* Bulk payloads up to this size share the request's allocation (launch parameters, small
 * copies); larger ones get their own, read straight into by the loop. */
#define INLINE_BULK_MAX (64u << 10)

cr_request_t *cr_request_new(cr_session_t *s, const cr_frame_header_t *h)
{
    int separate = h->bulk_len > INLINE_BULK_MAX;
    size_t inline_bytes = h->body_len + (separate ? 0 : (size_t)h->bulk_len);
    cr_request_t *req = malloc(sizeof *req + inline_bytes);
    if (!req)
        return NULL;
    memset(req, 0, sizeof *req);
    req->session = s;
    req->fd = -1;
    req->hdr = *h;
    req->body = (uint8_t *)(req + 1);
    if (h->bulk_len) {
        req->bulk = separate ? cr_bulk_get(h->bulk_len) : req->body + h->body_len;
        req->bulk_separate = separate;
        if (!req->bulk) {
            free(req);
            return NULL;
        }
    }
    return req;
}

int cr_request_decode(cr_request_t *req, msgpack_zone *zone)
{
    size_t off = 0;
    if (req->hdr.body_len == 0 || cr_mpcheck(req->body, req->hdr.body_len) != 0 ||
        msgpack_unpack((const char *)req->body, req->hdr.body_len, &off, zone, &req->root) !=
            MSGPACK_UNPACK_SUCCESS ||
        off != req->hdr.body_len)
        return CR_EPROTO;
    if (req->root.type == MSGPACK_OBJECT_ARRAY) {
        req->args = req->root.via.array.ptr;
        req->argc = req->root.via.array.size;
    } else if (req->hdr.opcode != CR_OP_HELLO) {
        return CR_EPROTO;
    }
    return 0;
}

void cr_request_free(cr_request_t *req)
{
    if (!req)
        return;
    if (req->zone)
        msgpack_zone_free(req->zone);
    if (req->fd >= 0)
        close(req->fd);
    if (req->bulk_separate)
        cr_bulk_put(req->bulk, req->hdr.bulk_len);
    free(req);
}

/* At --log debug, every call that failed, as the client will see it. */
static void log_failure(const cr_request_t *req, CUresult result)
{
    if (result != CUDA_SUCCESS && result != CUDA_ERROR_NOT_READY)
        CR_DEBUG("session %llu: %s: %s", (unsigned long long)cr_session_id(req->session),
                 cr_opcode_name(req->hdr.opcode), cr_cuda_error_name(result));
}

int cr_reply_begin(cr_request_t *req, cr_reply_t *r, CUresult result, uint32_t extra)
{
    log_failure(req, result);
    cr_session_note_result(req->session, result);
    r->msg = cr_message_new(req->hdr.opcode, req->hdr.call_id, CR_FRAME_REPLY, &r->pk);
    if (!r->msg)
        return CR_ENOMEM;
    msgpack_pack_array(&r->pk, 1 + extra);
    msgpack_pack_int(&r->pk, (int)result);
    return 0;
}

void cr_reply_bulk(cr_reply_t *r, const void *bulk, size_t len, void (*release)(void *), void *arg)
{
    r->msg->bulk = bulk;
    r->msg->bulk_len = len;
    r->msg->release = release;
    r->msg->release_arg = arg;
}

void cr_reply_send(cr_request_t *req, cr_reply_t *r, uint32_t flags)
{
    cr_message_finish(r->msg, req->hdr.opcode, req->hdr.call_id, CR_FRAME_REPLY | flags);
    cr_server_send(req->session, r->msg);
    r->msg = NULL;
}

void cr_request_finish(cr_request_t *req, CUresult result)
{
    if (cr_request_waits(req)) {
        cr_reply_t r;
        if (cr_reply_begin(req, &r, result, 0) == 0)
            cr_reply_send(req, &r, 0);
    } else if (result != CUDA_SUCCESS) {
        log_failure(req, result);
        cr_session_defer_error(req->session, result);
    }
    cr_request_free(req);
}

/* --- argument access ---------------------------------------------------------------------- */

int cr_obj_u64(const msgpack_object *o, uint64_t *v)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return CR_EPROTO;
    *v = o->via.u64;
    return 0;
}

int cr_arg_u64(const cr_request_t *req, uint32_t i, uint64_t *v)
{
    return i < req->argc ? cr_obj_u64(&req->args[i], v) : CR_EPROTO;
}

int cr_arg_i64(const cr_request_t *req, uint32_t i, int64_t *v)
{
    if (i >= req->argc)
        return CR_EPROTO;
    const msgpack_object *o = &req->args[i];
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        *v = o->via.i64;
    else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
        *v = (int64_t)o->via.u64;
    else
        return CR_EPROTO;
    return 0;
}

int cr_arg_array(const cr_request_t *req, uint32_t i, const msgpack_object_array **a)
{
    if (i >= req->argc || req->args[i].type != MSGPACK_OBJECT_ARRAY)
        return CR_EPROTO;
    *a = &req->args[i].via.array;
    return 0;
}

int cr_arg_bin(const cr_request_t *req, uint32_t i, const void **p, size_t *len)
{
    if (i >= req->argc || req->args[i].type != MSGPACK_OBJECT_BIN)
        return CR_EPROTO;
    *p = req->args[i].via.bin.ptr;
    *len = req->args[i].via.bin.size;
    return 0;
}
