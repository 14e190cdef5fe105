/* Kernel faults: a broken session context, and a lost device context.
 *
 * A result that says a context is broken (cr_is_context_error) breaks the session's: it
 * is told once with @context_error and every later call fails with it. Then the device is
 * probed: if the shared context is gone too (always on a GPU), every session is told why
 * and closed, and the server process restarts (the hook its loop set,
 * cr_context_loss_on_lost). The probe calls the
 * driver, so it never runs on the driver's callback thread. */
#include <pthread.h>
#include <stddef.h>

#include "backend.h"
#include "log.h"
#include "loop.h"
#include "mpfield.h"
#include "request.h"
#include "session.h"
#include "session_private.h"

int cr_is_context_error(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
        return 1;
    default:
        return 0;
    }
}

/* Tells the client that its device state is broken: every later call fails with r. A
 * reason, when given, is printed by the client. */
static void send_context_error(cr_session_t *s, CUresult r, const char *reason)
{
    msgpack_packer pk;
    cr_outmsg_t *m = cr_message_new(CR_OP_CONTEXT_ERROR, 0, 0, &pk);
    if (!m)
        return;
    msgpack_pack_array(&pk, reason ? 2 : 1);
    msgpack_pack_int(&pk, (int)r);
    if (reason)
        cr_mp_pack_str(&pk, reason);
    cr_message_finish(m, CR_OP_CONTEXT_ERROR, 0, 0);
    cr_server_send(s, m);
}

static int context_lost;

static CUresult context_fault; /* what a session saw, for the probe */

static void (*on_lost)(void); /* restarts the server process */

void cr_context_loss_on_lost(void (*fn)(void))
{
    on_lost = fn;
}

static const char lost_reason[] =
    "the device context that cuda-remoted shares among its clients was lost (a kernel "
    "faulted); this process's device memory, streams and modules are gone: every later "
    "CUDA call fails. The server has started a new context: run the program again";

/* The session's device state is gone with the context: it is told why, and closed once
 * that is written. */
static void lose_session(cr_session_t *s, void *arg)
{
    CUresult r = *(const CUresult *)arg;
    pthread_mutex_lock(&s->lock);
    if (s->context_error == CUDA_SUCCESS)
        s->context_error = r;
    pthread_mutex_unlock(&s->lock);
    send_context_error(s, r, lost_reason);
    cr_server_close_connection(s);
}

/* Whether the fault a session saw broke the context itself (always on a GPU; with
 * --emu-faults context on the emulated device) or only that session's streams: a broken
 * context fails every call, a query of free memory too. The first to find it lost tells
 * every session and restarts the server process. */
static int context_is_lost(const cr_backend_t *b)
{
    size_t free_bytes, total;
    CUresult r = b->d.cuMemGetInfo_v2(&free_bytes, &total);
    if (!cr_is_context_error(r))
        return 0;
    if (!__atomic_exchange_n(&context_lost, 1, __ATOMIC_ACQ_REL)) {
        CR_ERROR("the device context is lost (%s; a session saw %s): every session's device "
                 "state is gone; the server process restarts with a new context",
                 cr_cuda_error_name(r),
                 cr_cuda_error_name(__atomic_load_n(&context_fault, __ATOMIC_RELAXED)));
        cr_sessions_each(lose_session, &r); /* then the supervisor starts a fresh one */
        if (on_lost)
            on_lost();
    }
    return 1;
}

void cr_session_note_result(cr_session_t *s, CUresult r)
{
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
        cr_session_count_error(s);
    if (!cr_is_context_error(r))
        return;
    pthread_mutex_lock(&s->lock);
    int first = s->context_error == CUDA_SUCCESS;
    if (first)
        s->context_error = r;
    pthread_mutex_unlock(&s->lock);
    if (!first || __atomic_load_n(&context_lost, __ATOMIC_ACQUIRE))
        return;
    CR_INFO("session %llu: %s broke its context (%s): every later call fails with it",
            (unsigned long long)s->id, s->who[0] ? s->who : s->peer, cr_cuda_error_name(r));
    __atomic_store_n(&context_fault, r, __ATOMIC_RELAXED);
    /* asked before this call's reply goes out, so that the client reads why before it
     * sees the error; the driver's callback thread must not call the driver: the
     * session's executor probes as soon as it looks up */
    if (cr_backend_thread_bound()) {
        if (!context_is_lost(s->backend))
            send_context_error(s, r, NULL);
        return;
    }
    send_context_error(s, r, NULL);
    pthread_mutex_lock(&s->lock);
    s->probe_wanted = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void cr_session_probe_context(cr_session_t *s)
{
    context_is_lost(s->backend);
}

void cr_session_defer_error(cr_session_t *s, CUresult r)
{
    cr_session_note_result(s, r);
    pthread_mutex_lock(&s->lock);
    if (s->deferred_error == CUDA_SUCCESS)
        s->deferred_error = r;
    pthread_mutex_unlock(&s->lock);
}

CUresult cr_session_call_error(cr_session_t *s, int waits)
{
    pthread_mutex_lock(&s->lock);
    CUresult r = s->context_error;    /* as on a GPU: nothing runs any more */
    if (r == CUDA_SUCCESS && waits) { /* an earlier asynchronous call failed: this reports it */
        r = s->deferred_error;
        s->deferred_error = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&s->lock);
    return r;
}
