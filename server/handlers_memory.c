/* Hand-written handlers for device memory and whole-session operations: allocations are
 * tracked per session (freed when the client leaves), a free waits for the session's work
 * to finish first, and synchronizing or resetting "the context" means this session's
 * streams, never another tenant's. */
#include <stdlib.h>

#include "cr_api_desc.h"
#include "cr_server_hand.h"
#include "dispatch.h"
#include "graph.h"
#include "handlers.h"
#include "log.h"
#include "memops.h"
#include "protocol.h"
#include "session.h"

/* --- allocations ----------------------------------------------------------------------------- */

/* cuMemAlloc and the stream-ordered allocations: (CUdeviceptr *, size, ...). The size is
 * charged to the tenant before the device sees the request, so a tenant never holds more
 * than its quota, not even for a moment. */
static CUresult before_alloc(cr_request_t *req, cr_arg_t *a)
{
    return cr_session_charge(req->session, a[1].u);
}

static CUresult after_alloc(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    if (r == CUDA_SUCCESS && a[0].p)
        cr_session_track_alloc(req->session, *(CUdeviceptr *)a[0].p, a[1].u);
    else
        cr_session_uncharge(req->session, a[1].u);
    return r;
}

static const cr_generic_hooks_t alloc_hooks = {before_alloc, after_alloc};

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

/* (dptr *, pitch *, width, height, element size): the size is known only once the device
 * chose the pitch; a pitched allocation past the quota is freed again. */
static CUresult after_alloc_pitch(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    if (r != CUDA_SUCCESS || !a[0].p || !a[1].p)
        return r;
    CUdeviceptr p = *(CUdeviceptr *)a[0].p;
    uint64_t size = (uint64_t) * (size_t *)a[1].p * a[3].u;
    if ((r = cr_session_charge(req->session, size)) != CUDA_SUCCESS) {
        cr_session_backend(req->session)->d.cuMemFree_v2(p);
        return r;
    }
    cr_session_track_alloc(req->session, p, size);
    return CUDA_SUCCESS;
}

static const cr_generic_hooks_t alloc_pitch_hooks = {NULL, after_alloc_pitch};

void cr_srv_cuMemAllocPitch_v2(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemAllocPitch_v2, cr_call_cuMemAllocPitch_v2, &alloc_pitch_hooks);
}

/* cuMemFreeAsync: only the session's own allocations, and only by their start; the
 * tenant has the bytes back once the free is enqueued. */
static CUresult before_free(cr_request_t *req, cr_arg_t *a)
{
    uint64_t size = cr_session_alloc_size(req->session, a[0].u);
    /* not while a stream waits on it (memops.c) */
    return size && !cr_memops_reading(req->session, a[0].u, size) ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_INVALID_VALUE;
}

static CUresult after_free(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    if (r == CUDA_SUCCESS)
        cr_session_uncharge(req->session, cr_session_untrack_alloc(req->session, a[0].u));
    return r;
}

static const cr_generic_hooks_t free_hooks = {before_free, after_free};

void cr_srv_cuMemFreeAsync(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemFreeAsync, cr_call_cuMemFreeAsync, &free_hooks);
}

/* cuMemFree: the memory may still be in use by the session's queued work, so the free
 * waits (on a waiter thread) for everything the session enqueued before it. */
static void freed(void *req, CUresult r)
{
    cr_request_finish(req, r);
}

void cr_srv_cuMemFree_v2(cr_request_t *req)
{
    uint64_t ptr;
    CUresult r = req->argc != 1 || cr_arg_u64(req, 0, &ptr) != 0
                     ? CUDA_ERROR_INVALID_VALUE
                     : cr_session_free_when_idle(req->session, ptr, freed, req);
    if (r != CUDA_SUCCESS)
        cr_request_finish(req, r);
}

CUresult cr_session_memory_info(cr_session_t *s, size_t *free_bytes, size_t *total)
{
    CUresult r = cr_session_backend(s)->d.cuMemGetInfo_v2(free_bytes, total);
    if (r == CUDA_SUCCESS && cr_session_tenant(s)) {
        uint64_t quota = __atomic_load_n(&cr_session_tenant(s)->quota, __ATOMIC_RELAXED);
        uint64_t used = __atomic_load_n(&cr_session_tenant(s)->used, __ATOMIC_RELAXED);
        if (quota && quota < *total)
            *total = quota;
        if (quota) {
            uint64_t left = quota > used ? quota - used : 0;
            if (left < *free_bytes)
                *free_bytes = left;
        }
    }
    return r;
}

void cr_srv_cuMemGetInfo_v2(cr_request_t *req)
{
    size_t free_bytes = 0, total = 0;
    CUresult r = cr_session_memory_info(req->session, &free_bytes, &total);
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 2) == 0) {
        if (r == CUDA_SUCCESS) {
            msgpack_pack_uint64(&reply.pk, free_bytes);
            msgpack_pack_uint64(&reply.pk, total);
        } else {
            msgpack_pack_nil(&reply.pk);
            msgpack_pack_nil(&reply.pk);
        }
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

/* --- memory pools ------------------------------------------------------------------------------ */

static void pool_attribute(cr_request_t *req, int set)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    uint64_t id, value = 0;
    int64_t attr;
    if (req->argc != (uint32_t)(set ? 3 : 2) || cr_arg_u64(req, 0, &id) ||
        cr_arg_i64(req, 1, &attr) || (set && cr_arg_u64(req, 2, &value)) ||
        !cr_enum_has(&cr_enum_CUmemPool_attribute, attr)) { /* only what the driver knows */
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
        msgpack_pack_uint64(&reply.pk,
                            cr_mempool_attr_is_64((int)attr) ? v64 : (uint64_t)(unsigned)v32);
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
    cr_session_finish_on_waiter(s, sync_when_idle, t);
}

void cr_srv_cuDevicePrimaryCtxReset_v2(cr_request_t *req)
{
    /* Rare and drastic: done on the executor, which waits for the session's work. Code
     * (libraries, modules) survives, as it does in CUDA. */
    cr_session_t *s = req->session;
    cr_memops_release(s); /* its streams must drain: no wait is left for a value */
    cr_session_release_resources(s, 1);
    cr_graph_end_captures(s); /* their streams are gone */
    cr_code_reinit_globals(s);
    cr_session_legacy_forget(s);
    CR_DEBUG("session %llu: primary context reset", (unsigned long long)cr_session_id(s));
    cr_request_finish(req, CUDA_SUCCESS);
}
