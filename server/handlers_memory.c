/* Hand-written handlers for device memory and whole-session operations: allocations are
 * tracked per session (freed when the client leaves), a free waits for the session's work
 * to finish first, and synchronizing or resetting "the context" means this session's
 * streams, never another tenant's. */
#include <stdlib.h>

#include "cr_server_hand.h"
#include "dispatch.h"
#include "protocol.h"
#include "log.h"

/* --- allocations ---------------------------------------------------------------------------- */

static void after_alloc(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    /* a[0]: CUdeviceptr *; a[1]: the size (cuMemAlloc, the async allocations) */
    if (r == CUDA_SUCCESS && a[0].p)
        cr_session_track_alloc(req->session, *(CUdeviceptr *)a[0].p, a[1].u);
}

static const cr_generic_hooks_t alloc_hooks = {NULL, after_alloc};

void cr_srv_cuMemAlloc_v2(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemAlloc_v2, cr_call_cuMemAlloc_v2, &alloc_hooks);
}

void cr_srv_cuMemAllocAsync(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemAllocAsync, cr_call_cuMemAllocAsync, &alloc_hooks);
}

void cr_srv_cuMemAllocFromPoolAsync(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemAllocFromPoolAsync, cr_call_cuMemAllocFromPoolAsync,
               &alloc_hooks);
}

static void after_alloc_pitch(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    /* (dptr *, pitch *, width, height, element size) */
    if (r == CUDA_SUCCESS && a[0].p && a[1].p)
        cr_session_track_alloc(req->session, *(CUdeviceptr *)a[0].p,
                               *(size_t *)a[1].p * a[3].u);
}

static const cr_generic_hooks_t alloc_pitch_hooks = {NULL, after_alloc_pitch};

void cr_srv_cuMemAllocPitch_v2(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemAllocPitch_v2, cr_call_cuMemAllocPitch_v2, &alloc_pitch_hooks);
}

static CUresult before_free(cr_request_t *req, cr_arg_t *a)
{
    /* only the session's own allocations, and only by their start */
    return cr_session_untrack_alloc(req->session, a[0].u) ? CUDA_SUCCESS
                                                          : CUDA_ERROR_INVALID_VALUE;
}

static const cr_generic_hooks_t free_hooks = {before_free, NULL};

void cr_srv_cuMemFreeAsync(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemFreeAsync, cr_call_cuMemFreeAsync, &free_hooks);
}

/* cuMemFree: the memory may still be in use by the session's queued work, so the free
 * waits (on a waiter thread) for everything the session enqueued before it. */
typedef struct {
    cr_request_t *req;
    CUevent *events;
    unsigned count;
    CUdeviceptr ptr;
} free_task_t;

static void free_when_idle(void *arg)
{
    free_task_t *t = arg;
    cr_session_t *s = t->req->session;
    cr_session_wait_events(s, t->events, t->count);
    CUresult r = s->backend->d.cuMemFree_v2(t->ptr);
    cr_request_finish(t->req, r);
    free(t);
    cr_session_task_end(s);
}

void cr_srv_cuMemFree_v2(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t ptr;
    if (req->argc != 1 || cr_arg_u64(req, 0, &ptr) != 0) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    if (!cr_session_untrack_alloc(s, ptr)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    free_task_t *t = calloc(1, sizeof *t);
    CUresult r = t ? cr_session_mark_streams(s, &t->events, &t->count) : CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        free(t);
        cr_session_track_alloc(s, ptr, 1); /* still held: the client may retry */
        cr_request_finish(req, r);
        return;
    }
    t->req = req;
    t->ptr = ptr;
    cr_session_task_begin(s);
    if (cr_waiter_run(free_when_idle, t) != 0) {
        cr_session_task_end(s);
        cr_session_wait_events(s, t->events, t->count); /* no thread: wait here */
        cr_request_finish(req, s->backend->d.cuMemFree_v2(ptr));
        free(t);
    }
}

/* --- memory pools ------------------------------------------------------------------------------ */

static void pool_attribute(cr_request_t *req, int set)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &s->backend->d;
    uint64_t id, value = 0;
    int64_t attr;
    if (req->argc != (uint32_t)(set ? 3 : 2) || cr_arg_u64(req, 0, &id) ||
        cr_arg_i64(req, 1, &attr) || (set && cr_arg_u64(req, 2, &value))) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    CUmemoryPool pool = cr_session_handle(s, CR_HT_CUmemPoolHandle, id);
    if (!pool) {
        cr_request_finish(req, CUDA_ERROR_INVALID_HANDLE);
        return;
    }
    cuuint64_t v64 = value;
    int v32 = (int)value;
    void *p = cr_mempool_attr_is_64((int)attr) ? (void *)&v64 : (void *)&v32;
    CUresult r;
    if (set)
        r = d->cuMemPoolSetAttribute ? d->cuMemPoolSetAttribute(pool, (CUmemPool_attribute)attr, p)
                                     : CUDA_ERROR_NOT_SUPPORTED;
    else
        r = d->cuMemPoolGetAttribute ? d->cuMemPoolGetAttribute(pool, (CUmemPool_attribute)attr, p)
                                     : CUDA_ERROR_NOT_SUPPORTED;
    if (set || r != CUDA_SUCCESS) {
        cr_request_finish(req, r);
        return;
    }
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 1) == 0) {
        msgpack_pack_uint64(&reply.pk, cr_mempool_attr_is_64((int)attr) ? v64 : (uint64_t)(unsigned)v32);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

void cr_srv_cuMemPoolGetAttribute(cr_request_t *req)
{
    pool_attribute(req, 0);
}

void cr_srv_cuMemPoolSetAttribute(cr_request_t *req)
{
    pool_attribute(req, 1);
}

/* --- the session as a whole ------------------------------------------------------------------ */

typedef struct {
    cr_request_t *req;
    CUevent *events;
    unsigned count;
} sync_task_t;

static void sync_when_idle(void *arg)
{
    sync_task_t *t = arg;
    cr_session_t *s = t->req->session;
    cr_request_finish(t->req, cr_session_wait_events(s, t->events, t->count));
    free(t);
    cr_session_task_end(s);
}

void cr_srv_cuCtxSynchronize_v2(cr_request_t *req)
{
    cr_session_t *s = req->session;
    sync_task_t *t = calloc(1, sizeof *t);
    CUresult r = t ? cr_session_mark_streams(s, &t->events, &t->count) : CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        free(t);
        cr_request_finish(req, r);
        return;
    }
    t->req = req;
    cr_session_task_begin(s);
    if (cr_waiter_run(sync_when_idle, t) != 0) {
        cr_session_task_end(s);
        cr_request_finish(req, cr_session_wait_events(s, t->events, t->count));
        free(t);
    }
}

void cr_srv_cuDevicePrimaryCtxReset_v2(cr_request_t *req)
{
    /* Rare and drastic: done on the executor, which waits for the session's work. Code
     * (libraries, modules) survives, as it does in CUDA. */
    cr_session_t *s = req->session;
    cr_session_release_resources(s, 1);
    cr_code_reinit_globals(s);
    s->legacy_gen = 0;
    s->legacy.dirty = 0;
    CR_DEBUG("session %llu: primary context reset", (unsigned long long)s->id);
    cr_request_finish(req, CUDA_SUCCESS);
}
