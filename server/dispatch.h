/* Requests and their dispatch.
 *
 * A request is one received frame: its header, its msgpack body (decoded) and its bulk
 * bytes. The generated table (cr_dispatch.c) maps each opcode either to the generic
 * marshaller, which interprets the call's descriptor (common/api.h), or to a hand-written
 * handler cr_srv_<name>. A handler owns the request: it ends it with cr_request_finish (or
 * a reply followed by cr_request_free), possibly later on another thread. */
#ifndef CR_SERVER_DISPATCH_H
#define CR_SERVER_DISPATCH_H

#include <msgpack.h>

#include "internal.h"

struct cr_request_s {
    cr_request_t *next;
    cr_session_t *session;
    cr_frame_header_t hdr;
    uint8_t *body;            /* inside the request's own allocation */
    uint8_t *bulk;            /* bulk_len bytes, or NULL; inside it too when small */
    int bulk_separate;        /* bulk was allocated on its own */
    msgpack_object root;      /* the decoded body (cr_request_decode) */
    msgpack_zone *zone;       /* the request's own zone, when it outlives the executor's */
    const msgpack_object *args; /* root's elements when it is an array */
    uint32_t argc;
    int fd;                   /* a descriptor that came with the frame (@shm_attach), or -1 */
};

/* Whether a frame with this header may be read at all, before anything is allocated for
 * it: the opcode's rules (cr_opcode_rule) bound its bulk, and before its hello is admitted
 * a connection may send only a small hello. 0, CR_EPERM or CR_ETOOBIG. */
int cr_request_admissible(const cr_frame_header_t *h, int admitted);
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
/* 1 when the request is answered off the executor (its decoded body must outlive the
 * executor's zone). */
int cr_request_outlives_executor(const cr_request_t *req);

typedef void (*cr_hand_fn)(cr_request_t *req);
typedef CUresult (*cr_call_fn)(const cr_driver_t *d, cr_arg_t *a);

/* One opcode's handler, generated from codegen/annotations.txt (its rules are
 * cr_opcode_rule's, shared with the stub). */
typedef struct {
    cr_hand_fn hand;          /* hand-written handler (cr_srv_<name>), or NULL */
    const cr_fn_desc_t *desc; /* generic: descriptor */
    cr_call_fn call;          /* generic: calls the backend function */
} cr_dispatch_entry_t;

extern const cr_dispatch_entry_t cr_dispatch_table[CR_OP_COUNT];

/* Runs one request on the session's executor: a driver call (unless the session's context
 * is broken, or an earlier asynchronous call failed and this one reports it) or a protocol
 * message. */
void cr_dispatch(cr_request_t *req);
/* On the loop thread, for a complete request: answers it there and returns 1 when its
 * opcode is answered on the loop (annotation `loop`), else returns 0 and leaves it. */
int cr_dispatch_on_loop(cr_request_t *req);

/* Hooks around the backend call of a generically marshalled request, for hand handlers
 * that add bookkeeping: `before` may refuse the call with a CUresult; `after` sees the
 * arguments (outputs filled in) and the result, and returns the result to answer with. */
typedef struct {
    CUresult (*before)(cr_request_t *req, cr_arg_t *a);
    CUresult (*after)(cr_request_t *req, cr_arg_t *a, CUresult r);
} cr_generic_hooks_t;

/* Unpacks, calls and replies with the generic marshaller (owns req). */
void cr_generic(cr_request_t *req, const cr_fn_desc_t *desc, cr_call_fn fn,
                const cr_generic_hooks_t *hooks);

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
void cr_reply_bulk(cr_reply_t *r, const void *bulk, size_t len, void (*release)(void *),
                   void *arg);
/* Sends it (flags: CR_FRAME_PARTIAL for all but the last reply frame of a call). */
void cr_reply_send(cr_request_t *req, cr_reply_t *r, uint32_t flags);

/* Builds a frame to the client that is not a reply (@d2h_data, @host_func). */
cr_outmsg_t *cr_message_new(uint16_t opcode, uint64_t call_id, uint32_t flags,
                            msgpack_packer *pk);
void cr_message_finish(cr_outmsg_t *m, uint16_t opcode, uint64_t call_id, uint32_t flags);

#endif
