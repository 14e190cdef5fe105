/* The router: each request goes where the generated table (cr_dispatch.c, from
 * codegen/annotations.txt) sends it, under the rules cr_opcode_rule gives its opcode: to a
 * hand-written handler, to the generic marshaller (marshal.c), or, for protocol messages,
 * straight to their handler. Driver calls of a session whose context is broken fail with
 * that error; a waiting call reports an earlier asynchronous failure instead of running. */
#include "dispatch.h"

#include "error.h"
#include "log.h"
#include "protocol.h"
#include "session.h"

int cr_request_outlives_executor(const cr_request_t *req)
{
    unsigned op = req->hdr.opcode;
    const cr_dispatch_entry_t *e = op < CR_OP_COUNT ? &cr_dispatch_table[op] : NULL;
    /* a hand handler of a waiting call may hand it to the generic path too (cuMemUnmap),
     * which finishes it on a waiter thread: its descriptor says it waits */
    const cr_fn_desc_t *d = !e ? NULL : e->desc ? e->desc : cr_fn_desc(op);
    return d && (d->flags & CR_FN_WAITS);
}

void cr_dispatch(cr_request_t *req)
{
    cr_session_t *s = req->session;
    unsigned op = req->hdr.opcode;
    const cr_dispatch_entry_t *e = op < CR_OP_COUNT ? &cr_dispatch_table[op] : NULL;
    if (!e || (!e->hand && !e->desc)) {
        CR_WARN("session %llu: %s (opcode %u) is not served here",
                (unsigned long long)cr_session_id(s), cr_opcode_name(op), op);
        cr_request_finish(req, CUDA_ERROR_NOT_SUPPORTED);
        return;
    }
    unsigned flags = cr_opcode_rule(op)->flags;
    if (flags & CR_OPR_ON_LOOP) { /* answered by the loop; a frame that reached us is odd */
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    if (flags & CR_OPR_MESSAGE) { /* not a driver call: the rules below do not apply */
        e->hand(req);
        return;
    }
    cr_session_note_driver_call(s);
    CUresult stop = cr_session_call_error(s, cr_request_waits(req));
    if (stop != CUDA_SUCCESS) { /* a broken context runs nothing; or an earlier failure */
        if (cr_request_waits(req))
            cr_request_finish(req, stop);
        else
            cr_request_free(req);
        return;
    }
    if (e->hand)
        e->hand(req);
    else
        cr_generic(req, e->desc, e->call, NULL);
}

int cr_dispatch_on_loop(cr_request_t *req)
{
    unsigned op = req->hdr.opcode;
    if (!(cr_opcode_rule(op)->flags & CR_OPR_ON_LOOP))
        return 0;
    cr_dispatch_table[op].hand(req);
    return 1;
}
