/* Requests and their replies as CUresults (request.h).
 *
 * Threads: any application thread; a call waits for its reply in the connection
 * (cr_pending_wait), nothing else. */
#include "request.h"

#include "client.h"
#include "error.h"
#include "log.h"
#include "mpcheck.h"

CUresult cr_transport_error(int err)
{
    cr_client_t *cl = cr_client();
    switch (err) {
    case 0:
        return CUDA_SUCCESS;
    case CR_ENOMEM:
        return CUDA_ERROR_OUT_OF_MEMORY;
    case CR_ETOOBIG: /* refused before it was sent (cr_opcode_rule) */
        return CUDA_ERROR_INVALID_VALUE;
    case CR_EBROKEN: /* a kernel fault: every call now fails with what broke the context */
        return cl ? (CUresult)cr_conn_context_error(cl->conn) : CUDA_ERROR_LAUNCH_FAILED;
    default:
        /* after a context error the server closes the connection: calls that were waiting
         * then fail with that error too */
        if (cl && cr_conn_context_error(cl->conn))
            return (CUresult)cr_conn_context_error(cl->conn);
        /* the server is gone: the device is as unreachable as a lost GPU */
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
}

/* The CUresult of a completed call whose transport result was err. */
static CUresult reply_result(int err, cr_pending_t *p, msgpack_unpacked *u)
{
    if (err)
        return cr_transport_error(err);
    size_t off = 0;
    if (cr_mpcheck(p->body.data, p->body.len) != 0 ||
        msgpack_unpack_next(u, (const char *)p->body.data, p->body.len, &off) !=
            MSGPACK_UNPACK_SUCCESS ||
        u->data.type != MSGPACK_OBJECT_ARRAY || u->data.via.array.size < 1 ||
        (u->data.via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER)) {
        CR_ERROR("malformed reply from the server");
        return CUDA_ERROR_UNKNOWN;
    }
    if (p->failed) /* the reply's bulk data did not fit where it was expected */
        return CUDA_ERROR_UNKNOWN;
    return (CUresult)u->data.via.array.ptr[0].via.u64;
}

/* Calls that waited for a reply, by opcode: what a program's time through the stub goes to
 * (printed at exit with CUDA_REMOTE_LOG=debug). */
static uint64_t waited[CR_OP_COUNT]; /* atomic */

static void count_wait(uint16_t opcode)
{
    if (opcode < CR_OP_COUNT)
        __atomic_add_fetch(&waited[opcode], 1, __ATOMIC_RELAXED);
}

void cr_call_report(void)
{
    if (!cr_log_enabled(CR_LOG_DEBUG))
        return;
    char line[1024];
    size_t len = 0;
    uint64_t total = 0;
    for (int shown = 0; shown < 12; shown++) { /* the most frequent first */
        unsigned best = CR_OP_COUNT;
        uint64_t most = 0;
        for (unsigned op = 0; op < CR_OP_COUNT; op++) {
            uint64_t n = __atomic_load_n(&waited[op], __ATOMIC_RELAXED);
            if (n > most) {
                best = op;
                most = n;
            }
        }
        if (best == CR_OP_COUNT)
            break;
        uint64_t n = __atomic_exchange_n(&waited[best], 0, __ATOMIC_RELAXED);
        total += n;
        int w = snprintf(line + len, sizeof line - len, "%s %s %llu", shown ? "," : "",
                         cr_opcode_name(best), (unsigned long long)n);
        if (w > 0 && (size_t)w < sizeof line - len)
            len += (size_t)w;
    }
    if (total)
        CR_DEBUG("calls that waited for the server, most frequent first:%s", line);
}

CUresult cr_call(cr_msg_t *m, cr_pending_t *p, msgpack_unpacked *u)
{
    count_wait(m->opcode);
    msgpack_unpacked_init(u);
    return reply_result(cr_msg_call(m, p), p, u);
}

CUresult cr_call_u64(cr_msg_t *m, uint64_t *out)
{
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(m, &p, &u);
    if (r == CUDA_SUCCESS) {
        const msgpack_object_array *a = &u.data.via.array;
        if (a->size < 2 || a->ptr[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            r = CUDA_ERROR_UNKNOWN;
        else
            *out = a->ptr[1].via.u64;
    }
    cr_reply_done(&p, &u);
    return r;
}

void cr_call_start(cr_msg_t *m, cr_pending_t *p)
{
    count_wait(m->opcode);
    cr_msg_call_start(m, p);
}

CUresult cr_call_finish(cr_pending_t *p, msgpack_unpacked *u)
{
    msgpack_unpacked_init(u);
    return reply_result(cr_pending_wait(p), p, u);
}

CUresult cr_call_fd(cr_msg_t *m, cr_pending_t *p, msgpack_unpacked *u, int fd)
{
    count_wait(m->opcode);
    msgpack_unpacked_init(u);
    return reply_result(cr_msg_call_fd(m, p, fd), p, u);
}

void cr_reply_done(cr_pending_t *p, msgpack_unpacked *u)
{
    msgpack_unpacked_destroy(u);
    msgpack_unpacked_init(u);
    cr_pending_release(p);
}
