/* Sessions: one per client connection.
 *
 * A session owns a namespace of handle ids (a client can only name its own objects), the
 * device memory it allocated, its own legacy default stream, and an executor thread that
 * runs its requests in arrival order without ever waiting on the device. The executor
 * starts only once the loop admitted the session's hello (cr_session_admit), and it runs
 * nothing more while the client leaves too much of its output unread. When the client
 * goes away, for whatever reason, the executor frees everything the session held. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cpu.h"
#include "cr_server_hand.h"
#include "dispatch.h"
#include "error.h"
#include "log.h"
#include "mpfield.h"
#include "protocol.h"
#include "version.h"

#define FIRST_HANDLE_ID 0x10000 /* well above NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD */
/* Unrun input a session may hold before the loop stops reading its connection (reading
 * resumes at a quarter of it): a client cannot make the server buffer without bound. */
static size_t inbox_high = (size_t)256 << 20;

void cr_session_set_input_limit(size_t bytes)
{
    inbox_high = bytes ? bytes : 1;
}

/* How long an idle executor keeps looking for the next request before it sleeps. */
static uint64_t executor_spin_ns = 20000;

void cr_session_set_spin(uint64_t ns)
{
    executor_spin_ns = ns;
}

static uint64_t tenant_queued_limit(void)
{
    uint64_t limit = cr_guard_limits()->tenant_queued;
    return limit ? limit : UINT64_MAX;
}

/* The session's unsent output has passed its bound. Caller holds s->lock. */
static int output_full_locked(const cr_session_t *s)
{
    uint64_t limit = cr_guard_limits()->unsent;
    return limit && s->out_bytes + s->staged_bytes > limit;
}

static void output_change(cr_session_t *s, uint64_t *counter, int64_t delta)
{
    pthread_mutex_lock(&s->lock);
    *counter += (uint64_t)delta;
    if (s->output_waiting && !output_full_locked(s))
        pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void cr_session_output_done(cr_session_t *s, uint64_t bytes)
{
    output_change(s, &s->out_bytes, -(int64_t)bytes);
}

void cr_session_output_stage(cr_session_t *s, uint64_t bytes)
{
    output_change(s, &s->staged_bytes, (int64_t)bytes);
}

void cr_session_output_unstage(cr_session_t *s, uint64_t bytes)
{
    output_change(s, &s->staged_bytes, -(int64_t)bytes);
}

static size_t request_bytes(const cr_request_t *req)
{
    return sizeof *req + req->hdr.body_len + (size_t)req->hdr.bulk_len;
}
#define HANDLE_ID_STEP 0x10

/* Every session, oldest first, for status and metrics. */
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_session_t *all_head, *all_tail;

static void list_add(cr_session_t *s)
{
    pthread_mutex_lock(&all_lock);
    s->all_prev = all_tail;
    if (all_tail)
        all_tail->all_next = s;
    else
        all_head = s;
    all_tail = s;
    pthread_mutex_unlock(&all_lock);
}

static void list_remove(cr_session_t *s)
{
    pthread_mutex_lock(&all_lock);
    if (s->all_prev)
        s->all_prev->all_next = s->all_next;
    else
        all_head = s->all_next;
    if (s->all_next)
        s->all_next->all_prev = s->all_prev;
    else
        all_tail = s->all_prev;
    pthread_mutex_unlock(&all_lock);
}

void cr_sessions_foreach(void (*fn)(const cr_session_info_t *info, void *arg), void *arg)
{
    pthread_mutex_lock(&all_lock);
    for (cr_session_t *s = all_head; s; s = s->all_next) {
        cr_session_info_t info;
        pthread_mutex_lock(&s->lock);
        int listed = s->listed;
        if (listed) { /* who and tenant were set before listed, under this lock */
            info.id = s->id;
            memcpy(info.who, s->who, sizeof info.who);
            memcpy(info.peer, s->peer, sizeof info.peer);
            info.tenant = s->tenant;
            info.queued = s->inbox_count;
            info.connected_ns = s->connected_ns;
            info.ending = s->closing;
        }
        pthread_mutex_unlock(&s->lock);
        if (!listed)
            continue;
        info.memory = __atomic_load_n(&s->memory, __ATOMIC_RELAXED);
        info.requests = __atomic_load_n(&s->stat_requests, __ATOMIC_RELAXED);
        info.usage.launches = __atomic_load_n(&s->usage.launches, __ATOMIC_RELAXED);
        info.usage.bytes_h2d = __atomic_load_n(&s->usage.bytes_h2d, __ATOMIC_RELAXED);
        info.usage.bytes_d2h = __atomic_load_n(&s->usage.bytes_d2h, __ATOMIC_RELAXED);
        info.usage.errors = __atomic_load_n(&s->usage.errors, __ATOMIC_RELAXED);
        info.usage.device_ns = __atomic_load_n(&s->usage.device_ns, __ATOMIC_RELAXED);
        fn(&info, arg);
    }
    pthread_mutex_unlock(&all_lock);
}

static void count(cr_session_t *s, size_t field, uint64_t n)
{
    __atomic_add_fetch((uint64_t *)((char *)&s->usage + field), n, __ATOMIC_RELAXED);
    if (s->tenant)
        __atomic_add_fetch((uint64_t *)((char *)&s->tenant->usage + field), n,
                           __ATOMIC_RELAXED);
}

void cr_session_count_launch(cr_session_t *s)
{
    count(s, offsetof(cr_usage_t, launches), 1);
}

void cr_session_count_copy(cr_session_t *s, int direction, uint64_t bytes)
{
    if (direction == CR_COPY_HTOD)
        count(s, offsetof(cr_usage_t, bytes_h2d), bytes);
    else if (direction == CR_COPY_DTOH)
        count(s, offsetof(cr_usage_t, bytes_d2h), bytes);
}

void cr_session_ref(cr_session_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->refs++;
    pthread_mutex_unlock(&s->lock);
}

static void session_free(cr_session_t *s)
{
    list_remove(s);
    size_t pos = 0;
    uint64_t id, v;
    while (cr_idmap_next(&s->handles, &pos, &id, &v)) {
        cr_handle_t *h = (cr_handle_t *)(uintptr_t)v;
        cr_session_uncharge(s, h->charged);
        cr_code_globals_free(h->globals);
        free(h->params);
        free(h);
    }
    cr_idmap_free(&s->handles);
    cr_idmap_free(&s->by_object);
    cr_idmap_free(&s->host_func_acks);
    if (s->tenant)
        __atomic_sub_fetch(&s->tenant->queued_bytes, s->inbox_bytes, __ATOMIC_RELAXED);
    for (size_t i = 0; i < s->allocations.count; i++) /* normally released before */
        cr_session_uncharge(s, s->allocations.ranges[i].value);
    cr_rangemap_free(&s->allocations);
    cr_rangemap_free(&s->code_ranges);
    for (cr_request_t *r = s->inbox_head; r;) {
        cr_request_t *next = r->next;
        cr_request_free(r);
        r = next;
    }
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
}

void cr_session_unref(cr_session_t *s)
{
    pthread_mutex_lock(&s->lock);
    int last = --s->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (last)
        session_free(s);
}

void cr_session_task_begin(cr_session_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->refs++;
    s->tasks++;
    pthread_mutex_unlock(&s->lock);
}

void cr_session_task_end(cr_session_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->tasks--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    cr_session_unref(s);
}

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

/* --- a lost device context ------------------------------------------------------------------ */

static int context_lost;
static CUresult context_fault; /* what a session saw, for the probe */

/* Every session's device state is gone: each is told, with the reason, and closed once
 * that is written; then the server process ends and the supervisor starts a fresh one. */
static void lose_every_session(CUresult r)
{
    static const char reason[] =
        "the device context that cuda-remoted shares among its clients was lost (a kernel "
        "faulted); this process's device memory, streams and modules are gone: every later "
        "CUDA call fails. The server has started a new context: run the program again";
    pthread_mutex_lock(&all_lock);
    for (cr_session_t *s = all_head; s; s = s->all_next) {
        pthread_mutex_lock(&s->lock);
        if (s->context_error == CUDA_SUCCESS)
            s->context_error = r;
        pthread_mutex_unlock(&s->lock);
        send_context_error(s, r, reason);
        cr_server_close_connection(s);
    }
    pthread_mutex_unlock(&all_lock);
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
        lose_every_session(r);
        cr_server_restart();
    }
    return 1;
}

static void probe_later(void *backend)
{
    context_is_lost(backend);
}

void cr_session_note_result(cr_session_t *s, CUresult r)
{
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
        count(s, offsetof(cr_usage_t, errors), 1);
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
     * sees the error; the driver's callback thread must not call the driver: a waiter does */
    if (cr_backend_thread_bound()) {
        if (!context_is_lost(s->backend))
            send_context_error(s, r, NULL);
        return;
    }
    send_context_error(s, r, NULL);
    cr_waiter_run(probe_later, (void *)s->backend);
}

void cr_session_defer_error(cr_session_t *s, CUresult r)
{
    cr_session_note_result(s, r);
    pthread_mutex_lock(&s->lock);
    if (s->deferred_error == CUDA_SUCCESS)
        s->deferred_error = r;
    pthread_mutex_unlock(&s->lock);
}

/* --- handles ------------------------------------------------------------------------------- */

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
static void capture_output(cr_session_t *s, void *stream)
{
    cr_session_ref(s); /* the stream may outlive the session's last call */
    if (cr_backend_capture_output(s->backend, stream, send_device_output, release_device_output,
                                  s) != 0)
        cr_session_unref(s);
}

static void init_stream(cr_session_t *s, cr_handle_t *h)
{
    capture_output(s, h->obj);
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
    void *obj = h && (h->type == type || (type == CR_HT_CUfunc && h->type == CR_HT_CUkern))
                    ? h->obj
                    : NULL;
    pthread_mutex_unlock(&s->lock);
    return obj;
}

static void untrack_code_locked(cr_session_t *s, uint64_t owner);

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

void cr_session_remove_handle(cr_session_t *s, uint64_t id)
{
    pthread_mutex_lock(&s->lock);
    cr_handle_t *h = lookup(s, id);
    if (h) {
        cr_idmap_remove(&s->handles, id, NULL);
        cr_idmap_remove(&s->by_object, (uint64_t)(uintptr_t)h->obj, NULL);
        if (h->type == CR_HT_CUmod || h->type == CR_HT_CUlib)
            untrack_code_locked(s, id);
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
    cr_session_uncharge(s, h->charged);
    if (h->marker)
        s->backend->d.cuEventDestroy_v2(h->marker);
    cr_code_globals_free(h->globals);
    free(h->params);
    free(h);
}

/* Asks the backend for a function's or kernel's parameters, at most `cap`+1 of them. */
static CUresult query_params(const cr_driver_t *d, const cr_handle_t *h, uint32_t cap,
                             cr_kernel_param_t **params_out, uint32_t *count_out)
{
    typedef CUresult (*info_fn)(void *, size_t, size_t *, size_t *);
    info_fn info = h->type == CR_HT_CUkern ? (info_fn)d->cuKernelGetParamInfo
                                           : (info_fn)d->cuFuncGetParamInfo;
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
        CUresult r = query_params(&s->backend->d, h, CR_MAX_LAUNCH_PARAMS, &h->params,
                                  &h->param_count);
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

/* --- the legacy default stream --------------------------------------------------------------- */

/* Makes `waiter` wait for the work `h` has so far. */
static void wait_for(cr_session_t *s, cr_handle_t *waiter, cr_handle_t *h)
{
    const cr_driver_t *d = &s->backend->d;
    if (!h->marker && d->cuEventCreate(&h->marker, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        h->marker = NULL;
        return;
    }
    if (d->cuEventRecord(h->marker, h->obj) == CUDA_SUCCESS)
        d->cuStreamWaitEvent(waiter->obj, h->marker, 0);
}

/* CUDA's legacy stream waits for all earlier work of the blocking streams, and their later
 * work waits for it. The server's context is shared, so the session keeps those rules among
 * its own streams with events, only when work actually moves between streams. */
void cr_session_stream_prepare(cr_session_t *s, cr_handle_t *st)
{
    if (st == &s->legacy) {
        pthread_mutex_lock(&s->lock);
        size_t pos = 0, n = 0;
        uint64_t id, v;
        cr_handle_t *dirty[64];
        while (cr_idmap_next(&s->handles, &pos, &id, &v)) {
            cr_handle_t *h = (cr_handle_t *)(uintptr_t)v;
            if (h->type == CR_HT_CUstream && h->blocking && h->dirty) {
                h->dirty = 0;
                if (n < 64)
                    dirty[n++] = h;
                else
                    wait_for(s, &s->legacy, h);
            }
        }
        pthread_mutex_unlock(&s->lock);
        for (size_t i = 0; i < n; i++)
            wait_for(s, &s->legacy, dirty[i]);
        s->legacy_gen++;
        return;
    }
    if (!st->blocking)
        return;
    if (st->synced_gen != s->legacy_gen) {
        if (s->legacy_gen)
            wait_for(s, st, &s->legacy);
        st->synced_gen = s->legacy_gen;
    }
    st->dirty = 1;
}

CUresult cr_session_mark_streams(cr_session_t *s, CUevent **events, unsigned *count)
{
    const cr_driver_t *d = &s->backend->d;
    pthread_mutex_lock(&s->lock);
    size_t cap = s->handles.count + 1, n = 0, pos = 0;
    void **streams = malloc(cap * sizeof *streams);
    uint64_t id, v;
    if (streams) {
        streams[n++] = s->legacy.obj;
        while (cr_idmap_next(&s->handles, &pos, &id, &v)) {
            cr_handle_t *h = (cr_handle_t *)(uintptr_t)v;
            if (h->type == CR_HT_CUstream)
                streams[n++] = h->obj;
        }
    }
    pthread_mutex_unlock(&s->lock);
    CUevent *ev = streams ? calloc(n, sizeof *ev) : NULL;
    if (!ev) {
        free(streams);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = CUDA_SUCCESS;
    unsigned made = 0;
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
        r = d->cuEventCreate(&ev[made], CU_EVENT_DISABLE_TIMING);
        if (r == CUDA_SUCCESS) {
            made++;
            r = d->cuEventRecord(ev[made - 1], streams[i]);
        }
    }
    free(streams);
    if (r != CUDA_SUCCESS) {
        for (unsigned i = 0; i < made; i++)
            d->cuEventDestroy_v2(ev[i]);
        free(ev);
        return r;
    }
    *events = ev;
    *count = made;
    return CUDA_SUCCESS;
}

CUresult cr_session_wait_events(cr_session_t *s, CUevent *events, unsigned count)
{
    const cr_driver_t *d = &s->backend->d;
    CUresult first = CUDA_SUCCESS;
    for (unsigned i = 0; i < count; i++) {
        CUresult r = d->cuEventSynchronize(events[i]);
        if (first == CUDA_SUCCESS)
            first = r;
        d->cuEventDestroy_v2(events[i]);
    }
    free(events);
    return first;
}

/* --- allocations ----------------------------------------------------------------------------- */

CUresult cr_session_charge(cr_session_t *s, uint64_t bytes)
{
    CUresult r = s->tenant ? cr_tenant_charge(s->tenant, bytes) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        __atomic_add_fetch(&s->memory, bytes, __ATOMIC_RELAXED);
    return r;
}

void cr_session_uncharge(cr_session_t *s, uint64_t bytes)
{
    if (!bytes)
        return;
    __atomic_sub_fetch(&s->memory, bytes, __ATOMIC_RELAXED);
    if (s->tenant)
        cr_tenant_uncharge(s->tenant, bytes);
}

void cr_session_track_alloc(cr_session_t *s, CUdeviceptr p, size_t size)
{
    pthread_mutex_lock(&s->lock);
    if (cr_rangemap_add(&s->allocations, p, size ? size : 1, size) != 0)
        CR_WARN("session %llu: allocation %#llx+%zu overlaps another", (unsigned long long)s->id,
                (unsigned long long)p, size);
    pthread_mutex_unlock(&s->lock);
}

uint64_t cr_session_alloc_size(cr_session_t *s, CUdeviceptr p)
{
    pthread_mutex_lock(&s->lock);
    const cr_range_t *r = cr_rangemap_find(&s->allocations, p);
    uint64_t size = r && r->start == p ? r->value : 0;
    int found = r && r->start == p;
    pthread_mutex_unlock(&s->lock);
    return found ? (size ? size : 1) : 0;
}

uint64_t cr_session_untrack_alloc(cr_session_t *s, CUdeviceptr p)
{
    cr_range_t r;
    pthread_mutex_lock(&s->lock);
    int found = cr_rangemap_remove(&s->allocations, p, &r);
    pthread_mutex_unlock(&s->lock);
    return found ? (r.value ? r.value : 1) : 0;
}

void cr_session_track_code(cr_session_t *s, CUdeviceptr p, size_t size, uint64_t owner)
{
    pthread_mutex_lock(&s->lock);
    const cr_range_t *r = cr_rangemap_find(&s->code_ranges, p);
    if (!(r && r->start == p) && size)
        cr_rangemap_add(&s->code_ranges, p, size, owner);
    pthread_mutex_unlock(&s->lock);
}

/* Forgets the globals of a library or module being unloaded. Caller holds s->lock. */
static void untrack_code_locked(cr_session_t *s, uint64_t owner)
{
    for (size_t i = 0; i < s->code_ranges.count;)
        if (s->code_ranges.ranges[i].value == owner)
            cr_rangemap_remove(&s->code_ranges, s->code_ranges.ranges[i].start, NULL);
        else
            i++;
}

int cr_session_owns(cr_session_t *s, CUdeviceptr p, uint64_t len)
{
    pthread_mutex_lock(&s->lock);
    int owned = cr_rangemap_contains(&s->allocations, p, len) ||
                cr_rangemap_contains(&s->code_ranges, p, len);
    pthread_mutex_unlock(&s->lock);
    return owned;
}

/* --- releasing everything ---------------------------------------------------------------------- */

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
        size_t pos = 0;
        uint64_t id, v;
        while (cr_idmap_next(&s->handles, &pos, &id, &v)) {
            cr_handle_t *h = (cr_handle_t *)(uintptr_t)v;
            cr_session_uncharge(s, h->charged);
            cr_code_globals_free(h->globals);
            free(h->params);
            free(h);
        }
        cr_idmap_free(&s->handles);
        cr_idmap_free(&s->by_object);
        cr_rangemap_free(&s->code_ranges);
        pthread_mutex_unlock(&s->lock);
    }
}

/* --- hello --------------------------------------------------------------------------------- */

/* A field of the hello's map as text fit for the log (a number printed, control characters
 * replaced); "" when absent. */
static void copy_field(char *dst, size_t cap, const msgpack_object *map, const char *key)
{
    const msgpack_object *v = cr_mp_field(map, key);
    cr_mp_copy_str(dst, cap, v);
    if (v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        snprintf(dst, cap, "%llu", (unsigned long long)v->via.u64);
    for (char *c = dst; *c; c++)
        if ((unsigned char)*c < 0x20)
            *c = '?';
}

/* Answers a hello with a refusal and its reason. */
static void refuse_hello(cr_request_t *req, CUresult r, const char *why)
{
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 1) == 0) {
        cr_mp_pack_str(&reply.pk, why);
        cr_reply_send(req, &reply, 0);
    }
}

static void *executor_main(void *arg);

/* The tenant a hello names, if it may have one more session; else the error to answer
 * and its reason in `why`. */
static cr_tenant_t *admit_tenant(cr_session_t *s, const msgpack_object *info, CUresult *r,
                                 char *why, size_t why_len)
{
    char protocol[16];
    copy_field(protocol, sizeof protocol, info, "protocol");
    if (atoi(protocol) != CR_PROTOCOL_VERSION) {
        snprintf(why, why_len, "protocol version %s is not %d", protocol, CR_PROTOCOL_VERSION);
        *r = CUDA_ERROR_NOT_SUPPORTED;
        return NULL;
    }
    const msgpack_object *token = cr_mp_field(info, "token");
    int has_token = token && token->type == MSGPACK_OBJECT_STR;
    const char *reason = NULL;
    cr_tenant_t *tenant = cr_tenants_find(has_token ? token->via.str.ptr : NULL,
                                          has_token ? token->via.str.size : 0, &reason);
    if (!tenant) {
        snprintf(why, why_len, "%s", reason ? reason : "no such tenant");
        *r = CUDA_ERROR_NOT_PERMITTED;
        return NULL;
    }
    unsigned limit = __atomic_load_n(&tenant->max_sessions, __ATOMIC_RELAXED);
    if (!limit)
        limit = cr_guard_limits()->tenant_sessions;
    /* counted here, on the loop thread, which admits every session: no two can race */
    uint64_t now = __atomic_load_n(&tenant->sessions, __ATOMIC_RELAXED);
    if (limit && now >= limit) {
        snprintf(why, why_len, "tenant %s has %llu sessions, as many as it may have",
                 tenant->name, (unsigned long long)now);
        *r = CUDA_ERROR_NOT_PERMITTED;
        return NULL;
    }
    (void)s;
    return tenant;
}

int cr_session_admit(cr_session_t *s, cr_request_t *req, char *why, size_t why_len)
{
    msgpack_zone zone;
    msgpack_zone_init(&zone, 2048);
    int err = cr_request_decode(req, &zone);
    const msgpack_object *info =
        !err && req->root.type == MSGPACK_OBJECT_MAP ? &req->root : NULL;
    if (!info) {
        snprintf(why, why_len, "a malformed hello");
        msgpack_zone_destroy(&zone);
        return CR_EPROTO;
    }
    char pid[16], host[64], program[200];
    copy_field(pid, sizeof pid, info, "pid");
    copy_field(host, sizeof host, info, "host");
    copy_field(program, sizeof program, info, "program");
    const char *base = strrchr(program, '/');
    snprintf(s->who, sizeof s->who, "%s (pid %s) on %s", base ? base + 1 : program, pid, host);
    CUresult r = CUDA_SUCCESS;
    char reason[160];
    cr_tenant_t *tenant = admit_tenant(s, info, &r, reason, sizeof reason);
    if (tenant) {
        s->tenant = tenant;
        __atomic_add_fetch(&tenant->sessions, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&tenant->sessions_total, 1, __ATOMIC_RELAXED);
        pthread_mutex_lock(&s->lock);
        s->refs++; /* the executor's */
        pthread_mutex_unlock(&s->lock);
        if (pthread_create(&s->executor, NULL, executor_main, s) == 0) {
            pthread_detach(s->executor);
            msgpack_zone_destroy(&zone);
            return 0;
        }
        pthread_mutex_lock(&s->lock);
        s->refs--;
        pthread_mutex_unlock(&s->lock);
        __atomic_sub_fetch(&tenant->sessions, 1, __ATOMIC_RELAXED);
        s->tenant = NULL;
        snprintf(reason, sizeof reason, "the server cannot start a thread for the session");
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    refuse_hello(req, r, reason);
    snprintf(why, why_len, "%s: %s", s->who, reason);
    msgpack_zone_destroy(&zone);
    return r == CUDA_ERROR_NOT_SUPPORTED ? CR_EVERSION : CR_EPERM;
}

/* Answers the hello of an admitted session (executor): its default stream, then the
 * device as its tenant sees it. */
static int answer_hello(cr_session_t *s, cr_request_t *req)
{
    const msgpack_object *info = req->root.type == MSGPACK_OBJECT_MAP ? &req->root : NULL;
    char client[64];
    if (!info)
        return CR_EPROTO;
    copy_field(client, sizeof client, info, "client");
    const cr_backend_t *b = s->backend;
    cr_tenant_t *tenant = s->tenant;
    CUresult created = cr_session_create_stream(s, (CUstream *)&s->legacy.obj,
                                                CU_STREAM_NON_BLOCKING, 0);
    if (created != CUDA_SUCCESS) {
        s->legacy.obj = NULL;
        refuse_hello(req, created, "the server cannot create a stream for the session");
        CR_WARN("session %llu: refused %s from %s: no stream", (unsigned long long)s->id,
                s->who, s->peer);
        return CR_ENOMEM;
    }
    capture_output(s, s->legacy.obj);
    cr_reply_t r;
    if (cr_reply_begin(req, &r, CUDA_SUCCESS, 1) != 0)
        return CR_ENOMEM;
    /* the tenant sees its own slice of the device */
    uint64_t quota = __atomic_load_n(&tenant->quota, __ATOMIC_RELAXED);
    uint64_t total_mem = quota && quota < b->desc.total_mem ? quota : b->desc.total_mem;
    msgpack_pack_map(&r.pk, 8);
    cr_mp_pack_str(&r.pk, "protocol");
    msgpack_pack_int(&r.pk, CR_PROTOCOL_VERSION);
    cr_mp_pack_str(&r.pk, "server");
    cr_mp_pack_str(&r.pk, "cuda-remoted " CR_VERSION);
    cr_mp_pack_str(&r.pk, "backend");
    cr_mp_pack_str(&r.pk, b->kind);
    cr_mp_pack_str(&r.pk, "driver_version");
    msgpack_pack_int(&r.pk, b->driver_version);
    cr_mp_pack_str(&r.pk, "session");
    msgpack_pack_uint64(&r.pk, s->id);
    cr_mp_pack_str(&r.pk, "devices");
    msgpack_pack_array(&r.pk, 1); /* one server per GPU */
    msgpack_pack_map(&r.pk, 4);
    cr_mp_pack_str(&r.pk, "name");
    cr_mp_pack_str(&r.pk, b->desc.name);
    cr_mp_pack_str(&r.pk, "uuid");
    msgpack_pack_bin(&r.pk, 16);
    msgpack_pack_bin_body(&r.pk, b->desc.uuid.bytes, 16);
    cr_mp_pack_str(&r.pk, "total_mem");
    msgpack_pack_uint64(&r.pk, total_mem);
    cr_mp_pack_str(&r.pk, "attributes");
    msgpack_pack_array(&r.pk, CU_DEVICE_ATTRIBUTE_MAX);
    for (int i = 0; i < CU_DEVICE_ATTRIBUTE_MAX; i++)
        msgpack_pack_int(&r.pk, b->desc.attrs[i]);
    cr_mp_pack_str(&r.pk, "export_tables");
    uint32_t tables = 0;
    for (int i = 0; i < CR_EXPORT_TABLE_COUNT; i++)
        tables += b->export_table_size[i] >= 0;
    msgpack_pack_array(&r.pk, tables);
    for (int i = 0; i < CR_EXPORT_TABLE_COUNT; i++) {
        if (b->export_table_size[i] < 0)
            continue;
        msgpack_pack_array(&r.pk, 2);
        msgpack_pack_bin(&r.pk, 16);
        msgpack_pack_bin_body(&r.pk, cr_export_table_desc(i)->uuid, 16);
        msgpack_pack_uint32(&r.pk, (uint32_t)b->export_table_size[i]);
    }
    cr_mp_pack_str(&r.pk, "device_windows");
    if (b->window_size) {
        msgpack_pack_array(&r.pk, 1);
        msgpack_pack_array(&r.pk, 2);
        msgpack_pack_uint64(&r.pk, b->window_base);
        msgpack_pack_uint64(&r.pk, b->window_size);
    } else {
        msgpack_pack_array(&r.pk, 0);
    }
    cr_reply_send(req, &r, 0);
    s->hello_done = 1;
    pthread_mutex_lock(&s->lock);
    s->listed = 1;
    pthread_mutex_unlock(&s->lock);
    CR_INFO("session %llu: %s connected from %s as tenant %s (%s)", (unsigned long long)s->id,
            s->who, s->peer, tenant->name, client[0] ? client : "unknown client");
    return 0;
}

/* @hello: the first answers the admitted session, which ends when that fails; a second
 * is a client's mistake. */
void cr_srv_hello(cr_request_t *req)
{
    cr_session_t *s = req->session;
    if (s->hello_done) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    if (answer_hello(s, req) != 0)
        cr_server_close_connection(s);
    cr_request_free(req);
}

/* --- the executor ---------------------------------------------------------------------------- */

static void *executor_main(void *arg)
{
    cr_session_t *s = arg;
    const cr_driver_t *d = &s->backend->d;
    cr_backend_bind_thread(s->backend);
    msgpack_zone exec_zone;
    msgpack_zone_init(&exec_zone, 8192);
    s->legacy.type = CR_HT_CUstream; /* created at hello, at its tenant's priority */
    for (;;) {
        /* a client that just sent something often sends more at once: look for it a
         * little while before sleeping, which would cost a wake-up per request */
        int64_t until = cr_now_ns() + (int64_t)executor_spin_ns;
        while (!__atomic_load_n(&s->inbox_head, __ATOMIC_ACQUIRE) &&
               !__atomic_load_n(&s->closing, __ATOMIC_ACQUIRE) && cr_now_ns() < until)
            cr_cpu_relax();
        if (!__atomic_load_n(&s->inbox_head, __ATOMIC_ACQUIRE))
            cr_sched_flush(s); /* what it launched is measured before it sleeps */
        pthread_mutex_lock(&s->lock);
        while (!s->closing && (!s->inbox_head || output_full_locked(s))) {
            if (!s->inbox_head) {
                pthread_cond_wait(&s->cond, &s->lock);
                continue;
            }
            /* the client has not read what it asked for: run nothing more of its until it
             * does (its launches so far are measured meanwhile) */
            s->output_waiting = 1;
            pthread_mutex_unlock(&s->lock);
            cr_sched_flush(s);
            pthread_mutex_lock(&s->lock);
            while (!s->closing && output_full_locked(s))
                pthread_cond_wait(&s->cond, &s->lock);
            s->output_waiting = 0;
        }
        if (s->closing) { /* the client is gone: what it still asked for does not matter */
            pthread_mutex_unlock(&s->lock);
            break;
        }
        cr_request_t *req = s->inbox_head;
        __atomic_store_n(&s->inbox_head, req->next, __ATOMIC_RELEASE);
        if (!s->inbox_head)
            s->inbox_tail = NULL;
        s->inbox_bytes -= request_bytes(req);
        s->inbox_count--;
        uint64_t tenant_queued = __atomic_sub_fetch(&s->tenant->queued_bytes, request_bytes(req),
                                                    __ATOMIC_RELAXED);
        /* reading resumes once the session caught up, and its tenant's other sessions
         * too, unless it has nothing queued at all: each session can always take one more */
        int resume = s->reading_paused && !s->resume_reading && s->inbox_bytes < inbox_high / 4 &&
                     (tenant_queued < tenant_queued_limit() / 2 || !s->inbox_head);
        if (resume)
            s->resume_reading = 1;
        pthread_mutex_unlock(&s->lock);
        if (resume)
            cr_server_wake(s);
        __atomic_add_fetch(&s->stat_requests, 1, __ATOMIC_RELAXED);

        /* decode into the executor's zone, reused request after request, unless the
         * request is answered off the executor */
        msgpack_zone *zone = &exec_zone;
        if (cr_request_outlives_executor(req) && !(zone = req->zone = msgpack_zone_new(2048))) {
            cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
            continue;
        }
        if (cr_request_decode(req, zone) != 0) {
            CR_WARN("session %llu: malformed %s from %s; closing the connection",
                    (unsigned long long)s->id, cr_opcode_name(req->hdr.opcode), s->peer);
            cr_request_free(req);
            msgpack_zone_clear(&exec_zone);
            cr_server_close_connection(s);
            continue;
        }
        if (!s->hello_done && !(cr_opcode_rule(req->hdr.opcode)->flags & CR_OPR_FIRST)) {
            cr_server_close_connection(s); /* the loop admitted it: the hello comes first */
            cr_request_free(req);
            msgpack_zone_clear(&exec_zone);
            continue;
        }
        if (!cr_request_is_launch(req))
            cr_sched_flush(s); /* launches in a measured batch are consecutive */
        cr_dispatch(req);
        msgpack_zone_clear(&exec_zone); /* nothing the executor decoded is used after this */
    }
    msgpack_zone_destroy(&exec_zone);
    cr_sched_flush(s);

    /* wait for the waiter threads and host functions still using the session */
    pthread_mutex_lock(&s->lock);
    while (s->tasks > 0)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    if (s->legacy.obj) {
        cr_session_release_resources(s, 0);
        d->cuStreamDestroy_v2(s->legacy.obj);
        if (s->legacy.marker)
            d->cuEventDestroy_v2(s->legacy.marker);
    }
    cr_host_func_gates_free(s); /* its streams are done */
    cr_shm_release_all(s); /* after the work that may still have used the regions */
    if (s->tenant)
        __atomic_sub_fetch(&s->tenant->sessions, 1, __ATOMIC_RELAXED);
    CR_INFO("session %llu: resources of %s released (%llu requests)", (unsigned long long)s->id,
            s->who[0] ? s->who : s->peer, (unsigned long long)s->stat_requests);
    cr_session_unref(s);
    return NULL;
}

cr_session_t *cr_session_new(cr_server_t *server, const cr_backend_t *b, uint64_t id,
                             const char *peer)
{
    cr_session_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->server = server;
    s->backend = b;
    s->id = id;
    s->next_handle = FIRST_HANDLE_ID;
    snprintf(s->peer, sizeof s->peer, "%s", peer);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->refs = 1; /* the connection's; the executor takes one when the session is admitted */
    s->fd = -1;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    s->connected_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    list_add(s);
    return s;
}

int cr_session_submit(cr_session_t *s, cr_request_t *req)
{
    req->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->inbox_tail)
        s->inbox_tail->next = req;
    else
        __atomic_store_n(&s->inbox_head, req, __ATOMIC_RELEASE); /* the executor peeks */
    s->inbox_tail = req;
    s->inbox_bytes += request_bytes(req);
    s->inbox_count++;
    uint64_t tenant_queued = __atomic_add_fetch(&s->tenant->queued_bytes, request_bytes(req),
                                                __ATOMIC_RELAXED);
    int pause = (s->inbox_bytes > inbox_high || tenant_queued > tenant_queued_limit() ||
                 output_full_locked(s)) &&
                !s->reading_paused;
    if (pause) {
        s->reading_paused = 1;
        s->resume_reading = 0;
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return pause;
}

void cr_session_close(cr_session_t *s, const char *why)
{
    pthread_mutex_lock(&s->lock);
    int first = !s->closing;
    __atomic_store_n(&s->closing, 1, __ATOMIC_RELEASE); /* the executor peeks */
    s->stream = NULL;
    s->fd = -1; /* no direct writes any more: the loop closes the socket */
    while (s->direct_busy) /* one in progress uses the old fd: it must not be reused yet */
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_cond_broadcast(&s->cond); /* the executor and blocked host functions */
    pthread_mutex_unlock(&s->lock);
    cr_host_funcs_open_all(s); /* its streams must not wait for answers that cannot come */
    cr_sched_wake(); /* its executor may wait to launch */
    if (first)
        CR_INFO("session %llu: %s from %s ended: %s", (unsigned long long)s->id,
                s->who[0] ? s->who : "client", s->peer, why);
}
