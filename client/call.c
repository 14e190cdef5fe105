/* cr_remote_call, the way every generated remote stub reaches the server: the call's stream
 * arguments become wire ids (stream.c) and pass the capture rules (capture.c), then the
 * generic marshaller sends it (marshal.c).
 *
 * Threads: any application thread; waits as its call does. */
#include "capture.h"
#include "client.h"
#include "marshal.h"
#include "stream.h"

CUresult cr_remote_call(const cr_fn_desc_t *d, cr_arg_t *a)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    /* streams first: the per-thread stream may need a call of its own */
    uint64_t stream_ids[CR_MAX_PARAMS];
    for (int i = 0; i < d->param_count; i++) {
        if (d->params[i].kind != CR_P_STREAM)
            continue;
        CUstream s = (d->flags & CR_FN_IMPLICIT_STREAM) && i == d->param_count - 1
                         ? NULL /* the default stream the function works on */
                         : (CUstream)a[i].p;
        CUresult r = cr_stream_wire_id(s, &stream_ids[i]);
        if (r == CUDA_SUCCESS)
            r = cr_capture_check_call(d, stream_ids[i]);
        if (r != CUDA_SUCCESS)
            return r;
    }
    /* events tie streams into a capture, by the rule the server follows too */
    if (d->opcode == CR_OP_cuEventRecord || d->opcode == CR_OP_cuEventRecordWithFlags)
        cr_capture_event_recorded((uint64_t)(uintptr_t)a[0].p, stream_ids[1]);
    else if (d->opcode == CR_OP_cuStreamWaitEvent)
        cr_capture_event_waited(stream_ids[0], (uint64_t)(uintptr_t)a[1].p);
    return cr_marshal_call(d, a, stream_ids);
}
