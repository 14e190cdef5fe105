/* The stub's lifecycle: cuInit's sequence, the primary-context reset, fork and exit. These
 * are the moments that concern every feature, so each feature's part is named here, in
 * order, and no feature calls another's for them.
 *
 * Threads: cuInit runs on whichever thread calls it first, under the init lock, and waits
 * for the connection and the hello; the reset on any application thread, waiting for the
 * server's reply; the fork and exit handlers where the C library runs them. */
#include <pthread.h>

#include "capture.h"
#include "answers.h"
#include "client.h"
#include "connect.h"
#include "context.h"
#include "handles.h"
#include "hello.h"
#include "lifecycle.h"
#include "log.h"
#include "memory.h"
#include "request.h"
#include "shm.h"
#include "stream.h"

/* What features do once the server said hello, before the client is published. */
static void (*const on_connect[])(const cr_client_t *cl) = {
    cr_memory_connected, /* reserve the server's device address windows */
    cr_shm_connected,    /* offer shared memory over a Unix socket */
};

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_client_t client_state;
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;
static int init_tried;

CUresult cr_hand_cuInit(unsigned int flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&init_lock);
    if (cr_client() || init_tried) {
        CUresult r = cr_client() ? CUDA_SUCCESS : init_result;
        pthread_mutex_unlock(&init_lock);
        return r;
    }
    init_tried = 1;
    cr_log_init("cuda-remote", CR_LOG_WARN, 0);
    CUresult r = cr_connect(&client_state, cr_hello_address());
    if (r == CUDA_SUCCESS) {
        for (size_t i = 0; i < sizeof on_connect / sizeof on_connect[0]; i++)
            on_connect[i](&client_state);
        cr_client_publish(&client_state);
    }
    init_result = r;
    pthread_mutex_unlock(&init_lock);
    return r;
}

CUresult cr_hand_cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUcontext ctx;
    CUresult r = cr_ctx_primary(&ctx, dev);
    if (r != CUDA_SUCCESS)
        return r;
    cr_ctx_run_cls_destructors(ctx);

    /* the server frees the session's memory, streams and events; libraries survive */
    cr_msg_t m;
    cr_pending_t p = {0};
    msgpack_unpacked u;
    int err = cr_msg_begin(cr_client()->conn, &m, CR_OP_cuDevicePrimaryCtxReset_v2);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_int(&m.pk, dev);
    r = cr_call(&m, &p, &u);
    cr_reply_done(&p, &u);
    if (r == CUDA_SUCCESS) {
        cr_memory_forget_device_allocations();
        cr_stream_forget_per_thread();
        cr_capture_forget_all();
        cr_handles_forget_type(CR_HT_CUstream); /* the server destroyed them */
        cr_handles_forget_type(CR_HT_CUevent);
        cr_ctx_primary_reset_state(ctx);
    }
    return r;
}

static int forked_after_init; /* the parent had connected */

int cr_lifecycle_forked_after_init(void)
{
    return forked_after_init;
}

/* A forked child shares the parent's socket: it must never write to it (a flush at its
 * exit would inject the parent's buffered requests twice). CUDA is unusable in a child
 * forked after initialisation, with or without cuda-remote; a child of a parent that never
 * connected initialises on its own, as natively (multiprocessing's workers). */
static void forget_connection_in_child(void)
{
    if (!cr_client() && !forked_after_init)
        return;
    cr_client_forget();
    init_tried = 1;
    init_result = CUDA_ERROR_NOT_INITIALIZED;
    forked_after_init = 1;
}

__attribute__((constructor)) static void watch_forks(void)
{
    pthread_atfork(NULL, NULL, forget_connection_in_child);
}

/* Sends what is still buffered when the program exits (the connection itself stays open
 * for cudart's exit handlers and closes with the process), and says which calls waited. */
__attribute__((destructor)) static void flush_at_exit(void)
{
    cr_client_t *cl = cr_client();
    if (cl)
        cr_conn_flush(cl->conn);
    cr_call_report();
    cr_answers_report();
}
