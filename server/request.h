/* Requests, replies and messages to the client (request.c).
 *
 * A request is one received frame: its header, its msgpack body (decoded) and its bulk
 * bytes. Whoever handles it owns it: it ends it with cr_request_finish, or with a reply
 * followed by cr_request_free, possibly later on another thread. */
#ifndef CR_SERVER_REQUEST_H
#define CR_SERVER_REQUEST_H

#include <msgpack.h>

#include "loop.h"
#include "session.h"


struct cr_request_s {
    cr_request_t *next;
    cr_session_t *session;
    cr_frame_header_t hdr;
    uint8_t *body;              /* inside the request's own allocation */
    uint8_t *bulk;              /* bulk_len bytes, or NULL; inside it too when small */
    int bulk_separate;          /* bulk was allocated on its own */
    msgpack_object root;        /* the decoded body (cr_request_decode) */
    msgpack_zone *zone;         /* the request's own zone, when it outlives the executor's */
    const msgpack_object *args; /* root's elements when it is an array */
    uint32_t argc;
    int fd;            /* a descriptor that came with the frame (@shm_attach), or -1 */
    uint64_t hook_arg; /* what a generic call's before-hook keeps for its after-hook */
};

/* The memory a received request holds, for the bounds on unrun input. */
static inline size_t cr_request_size(const cr_request_t *req)
{
    return sizeof *req + req->hdr.body_len + (size_t)req->hdr.bulk_len;
}

/* 1 for a kernel launch (consecutive launches form one measured batch). */
static inline int cr_request_is_launch(const cr_request_t *req)
{
    return (cr_opcode_rule(req->hdr.opcode)->flags & CR_OPR_LAUNCH) != 0;
}

/* Allocates a request of session s for a frame with this header: one block for the
 * request, its body and a small bulk payload. NULL when out of memory. */
cr_request_t *cr_request_new(cr_session_t *s, const cr_frame_header_t *h);
/* Checks and decodes the body into zone (the executor's, reused request after request, or
 * the request's own). 0 or CR_EPROTO. */
int cr_request_decode(cr_request_t *req, msgpack_zone *zone);

/* 1 when the client waits for a reply to this request. */
static inline int cr_request_waits(const cr_request_t *req)
{
    return !(req->hdr.flags & CR_FRAME_ASYNC);
}

void cr_request_free(cr_request_t *req);
/* Ends a request with a bare result: replies [r] when the client waits, else records a
 * failure as the session's deferred error. Frees the request. */
void cr_request_finish(cr_request_t *req, CUresult r);

/* Argument access: 0 on success, CR_EPROTO when absent or of the wrong type. */
int cr_arg_u64(const cr_request_t *req, uint32_t i, uint64_t *v);
int cr_arg_i64(const cr_request_t *req, uint32_t i, int64_t *v);
int cr_arg_array(const cr_request_t *req, uint32_t i, const msgpack_object_array **a);
int cr_arg_bin(const cr_request_t *req, uint32_t i, const void **p, size_t *len);
int cr_obj_u64(const msgpack_object *o, uint64_t *v);

/* A reply under construction. */
typedef struct {
    cr_outmsg_t *msg;
    msgpack_packer pk;
} cr_reply_t;

/* Starts the reply [result, <extra more elements>]. Returns CR_ENOMEM. */
int cr_reply_begin(cr_request_t *req, cr_reply_t *r, CUresult result, uint32_t extra);
/* Attaches bulk bytes; release(arg) runs once they are written or dropped. */
void cr_reply_bulk(cr_reply_t *r, const void *bulk, size_t len, void (*release)(void *), void *arg);
/* Sends it (flags: CR_FRAME_PARTIAL for all but the last reply frame of a call). */
void cr_reply_send(cr_request_t *req, cr_reply_t *r, uint32_t flags);

#endif
