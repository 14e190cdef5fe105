/* Routing requests (dispatch.c) and the generic marshaller (marshal.c).
 *
 * The generated table (cr_dispatch.c) maps each opcode either to the generic marshaller,
 * which interprets the call's descriptor (common/api.h), or to a hand-written handler
 * cr_srv_<name>. A handler owns the request (request.h). */
#ifndef CR_SERVER_DISPATCH_H
#define CR_SERVER_DISPATCH_H

#include "request.h"
#include "session.h"

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
/* 1 when the request is answered off the executor (its decoded body must outlive the
 * executor's zone). */
int cr_request_outlives_executor(const cr_request_t *req);
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

#endif
