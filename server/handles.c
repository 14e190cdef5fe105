/* A session's handles: the ids its client names, the backend objects behind them.
 *
 * Ids are per session, so a client can only name its own objects; an object seen before
 * keeps its id; a function, kernel or library module belongs to the code it came from and
 * is forgotten with it. Streams get the session's device-output routing. At the end,
 * cr_session_release_resources destroys what the session owns in dependency order. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "error.h"
#include "log.h"
#include "loop.h"
#include "protocol.h"
#include "request.h"
#include "session.h"
#include "session_private.h"

#define HANDLE_ID_STEP 0x10

/* Frees what the session's record of a handle holds (not the backend object): the
 * memory charged for it and what other modules keep about it. */
static void handle_free(cr_session_t *s, cr_handle_t *h)
{
    cr_session_uncharge(s, h->charged);
    if (h->extra_free)
        h->extra_free(h->extra);
    free(h->params);
    free(h);
}

/* Device printf of the session's kernels goes to its client (the backend calls this before
 * the work completes, so the text is queued before any reply that reports it complete). */
static void send_device_output(void *user, const char *text, size_t len)
{
    cr_session_t *s = user;
    msgpack_packer pk;
    cr_outmsg_t *m = cr_message_new(CR_OP_DEVICE_OUTPUT, 0, 0, &pk);
    char *copy = m ? malloc(len) : NULL;
    if (!copy) {
        if (m) {
            cr_buf_free(&m->head);
            free(m);
        }
        CR_WARN("session %llu: out of memory: %zu bytes of device output lost",
                (unsigned long long)s->id, len);
        return;
    }
    memcpy(copy, text, len);
    msgpack_pack_array(&pk, 0);
    m->bulk = copy;
    m->bulk_len = len;
    m->release = free;
    m->release_arg = copy;
    cr_message_finish(m, CR_OP_DEVICE_OUTPUT, 0, 0);
    cr_server_send(s, m);
}

static void release_device_output(void *user)
{
    cr_session_unref(user);
}

/* Routes the stream's device printf to the client, where the backend allows it. */
void cr_session_capture_output(cr_session_t *s, void *stream)
{
    cr_session_ref(s); /* the stream may outlive the session's last call */
    if (cr_backend_capture_output(s->backend, stream, send_device_output, release_device_output,
                                  s) != 0)
        cr_session_unref(s);
}

static void init_stream(cr_session_t *s, cr_handle_t *h)
{
    cr_session_capture_output(s, h->obj);
    unsigned flags = 0;
    if (s->backend->d.cuStreamGetFlags)
        s->backend->d.cuStreamGetFlags(h->obj, &flags);
    h->blocking = !(flags & CU_STREAM_NON_BLOCKING);
    h->synced_gen = UINT64_MAX; /* its first work waits for earlier legacy-stream work */
}

/* Registers obj under `want` (a client's id), or under the next id of ours when want is
 * 0, unless it is known already (then *id is its id, or CR_EEXISTS when want differs). */
static int add_handle(cr_session_t *s, uint8_t type, void *obj, int owned, uint64_t want,
                      uint64_t parent, uint64_t *id)
{
    uint64_t existing;
    pthread_mutex_lock(&s->lock);
    if (cr_idmap_get(&s->by_object, (uint64_t)(uintptr_t)obj, &existing)) {
        pthread_mutex_unlock(&s->lock);
        *id = existing;
        return want && want != existing ? CR_EEXISTS : 0;
    }
    if (want && cr_idmap_get(&s->handles, want, NULL)) {
        pthread_mutex_unlock(&s->lock);
        return CR_EEXISTS;
    }
    cr_handle_t *h = calloc(1, sizeof *h);
    int err = CR_ENOMEM;
    if (h) {
        h->id = want ? want : s->next_handle;
        h->type = type;
        h->obj = obj;
        h->owned = owned != 0;
        h->parent = parent;
        err = cr_idmap_put(&s->handles, h->id, (uint64_t)(uintptr_t)h);
        if (!err && (err = cr_idmap_put(&s->by_object, (uint64_t)(uintptr_t)obj, h->id)) != 0)
            cr_idmap_remove(&s->handles, h->id, NULL);
    }
    if (!err) {
        if (!want)
            s->next_handle += HANDLE_ID_STEP;
        *id = h->id;
    }
    pthread_mutex_unlock(&s->lock);
    if (err) {
        free(h);
        return err;
    }
    if (type == CR_HT_CUstream)
        init_stream(s, h);
    return 0;
}

int cr_session_add_handle(cr_session_t *s, uint8_t type, void *obj, int owned, uint64_t *id)
{
    return add_handle(s, type, obj, owned, 0, 0, id);
}

int cr_session_add_handle_as(cr_session_t *s, uint8_t type, void *obj, uint64_t id)
{
    uint64_t got;
    return add_handle(s, type, obj, 1, id, 0, &got);
}

int cr_session_add_child_handle(cr_session_t *s, uint8_t type, void *obj, void *parent_obj,
                                uint64_t *id)
{
    uint64_t parent = 0;
    pthread_mutex_lock(&s->lock);
    if (parent_obj)
        cr_idmap_get(&s->by_object, (uint64_t)(uintptr_t)parent_obj, &parent);
    pthread_mutex_unlock(&s->lock);
    return add_handle(s, type, obj, 0, 0, parent, id);
}

static cr_handle_t *lookup(cr_session_t *s, uint64_t id)
{
    uint64_t v;
    return cr_idmap_get(&s->handles, id, &v) ? (cr_handle_t *)(uintptr_t)v : NULL;
}

void *cr_session_handle(cr_session_t *s, uint8_t type, uint64_t id)
{
    pthread_mutex_lock(&s->lock);
    cr_handle_t *h = lookup(s, id);
    void *obj =
        h && (h->type == type || (type == CR_HT_CUfunc && h->type == CR_HT_CUkern)) ? h->obj : NULL;
    pthread_mutex_unlock(&s->lock);
    return obj;
}

/* The first handle that belongs to `parent`, or NULL. Caller holds s->lock. */
static cr_handle_t *child_locked(cr_session_t *s, uint64_t parent)
{
    size_t pos = 0;
    uint64_t key, v;
    while (cr_idmap_next(&s->handles, &pos, &key, &v)) {
        cr_handle_t *h = (cr_handle_t *)(uintptr_t)v;
        if (h->parent == parent)
            return h;
    }
    return NULL;
}

int cr_session_handle_reparent(cr_session_t *s, uint64_t id, uint64_t parent)
{
    pthread_mutex_lock(&s->lock);
    cr_handle_t *h = lookup(s, id);
    if (h)
        h->parent = parent;
    pthread_mutex_unlock(&s->lock);
    return h ? 0 : CR_ENOTFOUND;
}

void cr_session_remove_handle(cr_session_t *s, uint64_t id)
{
    pthread_mutex_lock(&s->lock);
    cr_handle_t *h = lookup(s, id);
    if (h) {
        cr_idmap_remove(&s->handles, id, NULL);
        cr_idmap_remove(&s->by_object, (uint64_t)(uintptr_t)h->obj, NULL);
        if (h->type == CR_HT_CUmod || h->type == CR_HT_CUlib)
            cr_session_untrack_code_locked(s, id);
    }
    /* what the driver freed with it (a module's functions, a library's kernels) must not
     * reach the driver again, nor lend its id to an object that reuses its address */
    pthread_mutex_unlock(&s->lock);
    while (h && h->type != CR_HT_CUstream) {
        pthread_mutex_lock(&s->lock);
        cr_handle_t *child = child_locked(s, id);
        uint64_t child_id = child ? child->id : 0;
        pthread_mutex_unlock(&s->lock);
        if (!child_id)
            break;
        cr_session_remove_handle(s, child_id);
    }
    if (!h)
        return;
    if (h->marker)
        s->backend->d.cuEventDestroy_v2(h->marker);
    handle_free(s, h);
}

/* Asks the backend for a function's or kernel's parameters, at most `cap`+1 of them. */
static CUresult query_params(const cr_driver_t *d, const cr_handle_t *h, uint32_t cap,
                             cr_kernel_param_t **params_out, uint32_t *count_out)
{
    typedef CUresult (*info_fn)(void *, size_t, size_t *, size_t *);
    info_fn info =
        h->type == CR_HT_CUkern ? (info_fn)d->cuKernelGetParamInfo : (info_fn)d->cuFuncGetParamInfo;
    if (!info)
        return CUDA_ERROR_NOT_SUPPORTED;
    uint32_t n = 0, room = 0;
    cr_kernel_param_t *params = NULL;
    CUresult r;
    for (;; n++) {
        size_t offset, size;
        if ((r = info(h->obj, n, &offset, &size)) != CUDA_SUCCESS || n > cap)
            break;
        if (n == room) {
            room = room ? 2 * room : 16;
            cr_kernel_param_t *grown = realloc(params, room * sizeof *params);
            if (!grown) {
                free(params);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            params = grown;
        }
        params[n].offset = offset > UINT32_MAX ? UINT32_MAX : (uint32_t)offset;
        params[n].size = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
    }
    /* past the last parameter the driver answers CUDA_ERROR_INVALID_VALUE; anything else
     * means it cannot tell, and then nothing is launched */
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_VALUE) {
        free(params);
        return r;
    }
    *params_out = params;
    *count_out = n;
    return CUDA_SUCCESS;
}

CUresult cr_session_kernel_params(cr_session_t *s, uint64_t id, CUfunction *f,
                                  const cr_kernel_param_t **params, uint32_t *count)
{
    pthread_mutex_lock(&s->lock);
    cr_handle_t *h = lookup(s, id);
    pthread_mutex_unlock(&s->lock);
    if (!h || (h->type != CR_HT_CUfunc && h->type != CR_HT_CUkern))
        return CUDA_ERROR_INVALID_HANDLE;
    /* only the executor launches and removes functions: h stays valid here */
    if (!h->params_known) {
        CUresult r =
            query_params(&s->backend->d, h, CR_MAX_LAUNCH_PARAMS, &h->params, &h->param_count);
        if (r != CUDA_SUCCESS)
            return r;
        h->params_known = 1;
    }
    *f = h->obj;
    *params = h->params;
    *count = h->param_count;
    return CUDA_SUCCESS;
}

cr_handle_t *cr_session_stream(cr_session_t *s, uint64_t id)
{
    if (id == 0)
        return &s->legacy;
    pthread_mutex_lock(&s->lock);
    cr_handle_t *h = lookup(s, id);
    if (h && h->type != CR_HT_CUstream)
        h = NULL;
    pthread_mutex_unlock(&s->lock);
    return h;
}

static int release_order(uint8_t type)
{
    switch (type) {
    case CR_HT_CUstream:
        return 0;
    case CR_HT_CUevent:
        return 1;
    case CR_HT_CUmemPoolHandle:
        return 3; /* after the allocations made from the pools */
    case CR_HT_CUmod:
    case CR_HT_CUlib:
        return 4;
    default:
        return -1; /* not owned: kernels, functions, borrowed pools and modules */
    }
}

void cr_session_release_resources(cr_session_t *s, int keep_code)
{
    const cr_driver_t *d = &s->backend->d;
    /* all of the session's work first: nothing may run on what is about to go */
    CUevent *events;
    unsigned count;
    if (cr_session_mark_streams(s, &events, &count) == CUDA_SUCCESS)
        cr_session_wait_events(s, events, count);
    else if (d->cuCtxSynchronize)
        d->cuCtxSynchronize();

    for (int stage = 0; stage <= 4; stage++) {
        if (stage == 2) { /* device memory */
            cr_session_vmm_release_all(s);
            pthread_mutex_lock(&s->lock);
            cr_rangemap_t allocs = s->allocations;
            s->allocations = (cr_rangemap_t)CR_RANGEMAP_INIT;
            pthread_mutex_unlock(&s->lock);
            for (size_t i = 0; i < allocs.count; i++) {
                d->cuMemFree_v2(allocs.ranges[i].start);
                cr_session_uncharge(s, allocs.ranges[i].value);
            }
            cr_rangemap_free(&allocs);
            continue;
        }
        /* collect this stage's handles under the lock, destroy them outside it */
        for (;;) {
            cr_handle_t *victim = NULL;
            pthread_mutex_lock(&s->lock);
            size_t pos = 0;
            uint64_t id, v;
            while (cr_idmap_next(&s->handles, &pos, &id, &v)) {
                cr_handle_t *h = (cr_handle_t *)(uintptr_t)v;
                int order = release_order(h->type);
                int is_code = h->type == CR_HT_CUmod || h->type == CR_HT_CUlib;
                if (order == stage && h->owned && !(keep_code && is_code)) {
                    victim = h;
                    break;
                }
            }
            pthread_mutex_unlock(&s->lock);
            if (!victim)
                break;
            CUresult r = cr_handle_destroy(d, victim->type, victim->obj);
            if (r != CUDA_SUCCESS)
                CR_DEBUG("session %llu: destroying %s: %s", (unsigned long long)s->id,
                         cr_handle_type_name(victim->type), cr_cuda_error_name(r));
            cr_session_remove_handle(s, victim->id);
        }
    }
    /* what the session freed back into the device's default pool stays reserved there:
     * return it to the device (what other sessions hold stays) */
    CUmemoryPool pool;
    if (d->cuDeviceGetDefaultMemPool && d->cuMemPoolTrimTo &&
        d->cuDeviceGetDefaultMemPool(&pool, s->backend->device) == CUDA_SUCCESS)
        d->cuMemPoolTrimTo(pool, 0);
    if (!keep_code) { /* handles into the unloaded code are gone too */
        pthread_mutex_lock(&s->lock);
        cr_session_forget_handles_locked(s);
        cr_rangemap_free(&s->code_ranges);
        pthread_mutex_unlock(&s->lock);
    }
}

void cr_session_forget_handles_locked(cr_session_t *s)
{
    size_t pos = 0;
    uint64_t id, v;
    while (cr_idmap_next(&s->handles, &pos, &id, &v))
        handle_free(s, (cr_handle_t *)(uintptr_t)v);
    cr_idmap_free(&s->handles);
    cr_idmap_free(&s->by_object);
}

void cr_session_handles_each(cr_session_t *s,
                             void (*fn)(cr_session_t *s, cr_handle_t *h, void *arg), void *arg)
{
    size_t pos = 0;
    uint64_t id, v;
    for (;;) { /* the lock only while finding the next: fn may call the driver */
        pthread_mutex_lock(&s->lock);
        int more = cr_idmap_next(&s->handles, &pos, &id, &v);
        pthread_mutex_unlock(&s->lock);
        if (!more)
            return;
        fn(s, (cr_handle_t *)(uintptr_t)v, arg);
    }
}

int cr_session_handle_attach(cr_session_t *s, uint64_t id, uint64_t charged, void *extra,
                             void (*extra_free)(void *extra))
{
    pthread_mutex_lock(&s->lock);
    cr_handle_t *h = lookup(s, id);
    if (h) {
        h->charged += charged;
        h->extra = extra;
        h->extra_free = extra_free;
    }
    pthread_mutex_unlock(&s->lock);
    return h ? 0 : CR_ENOTFOUND;
}
