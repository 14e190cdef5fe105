/* Streams, events and host functions of the emulated device.
 *
 * Each stream is a FIFO of operations run in order by its own worker thread, started at the
 * first submission and ended when the stream is destroyed and drained. Operations carry
 * dependencies (stream, sequence number): the worker waits until each named stream has
 * completed that many operations before running the next one. That one mechanism gives
 *  - cuStreamWaitEvent: a dependency on the stream and position of the event's last record;
 *  - the legacy default stream: an operation on it depends on the last operation submitted
 *    to every blocking stream, and an operation on a blocking stream depends on the last
 *    operation submitted to the legacy stream (non-blocking streams are exempt).
 * Submissions are serialized by one global lock (the streams lock), so dependencies always
 * point at earlier submissions and can never form a cycle.
 *
 * Synchronous calls (cuMemcpy*, cuMemset*) are operations on the legacy stream; when it and
 * everything it would wait for are idle they run on the calling thread instead of the worker
 * (cr__stream_try_inline), still occupying the stream meanwhile.
 *
 * An asynchronous error is reported once by the next synchronization; a kernel fault
 * (cr__stream_fault) is sticky: the stream, the events recorded on it after the fault and
 * the context report it at every synchronization until the stream is destroyed.
 *
 * Frees never wait (the server calls them from its event loop): cr__after_all queues the
 * release on an internal "reaper" stream with a dependency on every stream's pending work,
 * so memory is reused only after the work queued before the free has run. */
#include "cpu.h"
#include "emu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static cr__stream_t *stream_list;
static cr__stream_t legacy_stream;
/* Runs the deferred releases of cr__after_all; non-blocking, never named by a handle. */
static cr__stream_t reaper_stream;
static _Atomic uint64_t next_stream_id = 1;

/* ---- streams ---- */

static void list_add(cr__stream_t *s) /* under streams_lock */
{
    s->prev = NULL;
    s->next = stream_list;
    if (stream_list)
        stream_list->prev = s;
    stream_list = s;
    s->in_list = 1;
}

static void list_remove(cr__stream_t *s) /* under streams_lock */
{
    if (!s->in_list)
        return;
    if (s->prev)
        s->prev->next = s->next;
    else
        stream_list = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->in_list = 0;
}

static void stream_release(cr__obj_t *obj)
{
    cr__stream_t *s = (cr__stream_t *)obj;
    if (s->out_release)
        s->out_release(s->out_user);
    if (s->is_legacy || s == &reaper_stream)
        return; /* static */
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work_cond);
    pthread_cond_destroy(&s->done_cond);
    free(s);
}

static int stream_init(cr__stream_t *s, unsigned flags, int priority, int legacy)
{
    cr__obj_init(&s->obj, stream_release);
    s->flags = flags;
    s->priority = priority;
    s->is_legacy = legacy;
    s->id = legacy ? 0 : atomic_fetch_add(&next_stream_id, 1);
    atomic_init(&s->completed, 0);
    if (pthread_mutex_init(&s->lock, NULL) != 0)
        return CR_ENOMEM;
    if (pthread_cond_init(&s->work_cond, NULL) != 0) {
        pthread_mutex_destroy(&s->lock);
        return CR_ENOMEM;
    }
    if (pthread_cond_init(&s->done_cond, NULL) != 0) {
        pthread_cond_destroy(&s->work_cond);
        pthread_mutex_destroy(&s->lock);
        return CR_ENOMEM;
    }
    return 0;
}

int cr__streams_init(void)
{
    static int ready;
    if (ready)
        return 0; /* an earlier cuInit got this far (cuInit calls are serialized) */
    int rc = stream_init(&legacy_stream, 0, 0, 1);
    if (rc != 0)
        return rc;
    if ((rc = stream_init(&reaper_stream, CU_STREAM_NON_BLOCKING, 0, 0)) != 0)
        return rc; /* (cuInit fails; the legacy stream's mutex stays) */
    reaper_stream.id = UINT64_MAX;
    atomic_store(&next_stream_id, 1); /* user streams are numbered from 1 */
    ready = 1;
    pthread_mutex_lock(&streams_lock);
    list_add(&legacy_stream);
    list_add(&reaper_stream);
    pthread_mutex_unlock(&streams_lock);
    return 0;
}

cr__stream_t *cr__stream_get(CUstream h)
{
    cr__obj_t *owner;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        cr__obj_ref(&legacy_stream.obj);
        return &legacy_stream;
    }
    return cr__handle_get((uint64_t)(uintptr_t)h, CR__HMASK(CR__H_STREAM), &owner, NULL);
}

void cr__stream_put(cr__stream_t *s)
{
    if (s)
        cr__obj_unref(&s->obj);
}

void cr__op_free(cr__op_t *op)
{
    for (unsigned i = 0; i < op->dep_count; i++)
        cr__obj_unref(&op->deps[i].stream->obj);
    free(op->deps);
    if (op->destroy)
        op->destroy(op);
    else
        free(op);
}

int cr__op_add_dep(cr__op_t *op, cr__stream_t *t, uint64_t seq)
{
    cr__dep_t *d = realloc(op->deps, (op->dep_count + 1) * sizeof *d);
    if (!d)
        return CR_ENOMEM;
    op->deps = d;
    cr__obj_ref(&t->obj);
    d[op->dep_count++] = (cr__dep_t){t, seq};
    return 0;
}

void cr__stream_wait(cr__stream_t *s, uint64_t seq)
{
    if (atomic_load_explicit(&s->completed, memory_order_acquire) >= seq)
        return;
    pthread_mutex_lock(&s->lock);
    while (atomic_load_explicit(&s->completed, memory_order_acquire) < seq)
        pthread_cond_wait(&s->done_cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

/* Marks the head op (seq) complete; under s->lock. */
static void complete_head(cr__stream_t *s, cr__op_t *op, CUresult rc)
{
    if (rc != CUDA_SUCCESS && s->error == CUDA_SUCCESS)
        s->error = rc;
    s->head = op->next;
    if (!s->head)
        s->tail = NULL;
    atomic_store_explicit(&s->completed, op->seq, memory_order_release);
    pthread_cond_broadcast(&s->done_cond);
}

/* How long an idle worker looks for more work before it sleeps: a stream fed a launch at a
 * time would otherwise sleep and be woken (two system calls and a context switch) per op. */
#define WORKER_SPIN_NS 20000

/* Waits up to WORKER_SPIN_NS for an op past `seen` to be appended; s->lock not held. */
static void spin_for_work(cr__stream_t *s, uint64_t seen)
{
    int64_t until = cr__now_ns() + WORKER_SPIN_NS;
    while (__atomic_load_n(&s->submitted, __ATOMIC_ACQUIRE) == seen && cr__now_ns() < until)
        cr_cpu_relax();
}

static void *worker(void *arg)
{
    cr__stream_t *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        cr__op_t *op = s->head;
        if (!op && !s->destroying && !s->spun) { /* look a little while before sleeping */
            uint64_t seen = s->submitted;
            s->spun = 1;
            pthread_mutex_unlock(&s->lock);
            spin_for_work(s, seen);
            pthread_mutex_lock(&s->lock);
            continue;
        }
        if (!op || op->run_inline) {
            /* nothing to do, or the submitting thread runs the head op */
            if (!op && s->destroying)
                break;
            pthread_cond_wait(&s->work_cond, &s->lock);
            continue;
        }
        s->spun = 0;
        pthread_mutex_unlock(&s->lock);
        for (unsigned i = 0; i < op->dep_count; i++)
            cr__stream_wait(op->deps[i].stream, op->deps[i].seq);
        CUresult rc = op->run ? op->run(op, s) : CUDA_SUCCESS;
        pthread_mutex_lock(&s->lock);
        complete_head(s, op, rc);
        pthread_mutex_unlock(&s->lock);
        cr__op_free(op);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_lock(&streams_lock);
    list_remove(s);
    pthread_mutex_unlock(&streams_lock);
    cr__obj_unref(&s->obj); /* the worker's reference */
    return NULL;
}

/* Adds the legacy-stream dependencies of a submission to s; under streams_lock. */
static int add_implicit_deps(cr__stream_t *s, cr__op_t *op)
{
    if (s->is_legacy) {
        for (cr__stream_t *t = stream_list; t; t = t->next) {
            if (t == s || (t->flags & CU_STREAM_NON_BLOCKING))
                continue;
            if (t->submitted > atomic_load(&t->completed) &&
                cr__op_add_dep(op, t, t->submitted) != 0)
                return CR_ENOMEM;
        }
    } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
        cr__stream_t *t = &legacy_stream;
        if (t->submitted > atomic_load(&t->completed) && cr__op_add_dep(op, t, t->submitted) != 0)
            return CR_ENOMEM;
    }
    return 0;
}

/* 1 when s and everything a new op on s would wait for are idle; under streams_lock. */
static int ready_locked(cr__stream_t *s)
{
    if (s->submitted != atomic_load(&s->completed))
        return 0;
    if (s->is_legacy) {
        for (cr__stream_t *t = stream_list; t; t = t->next)
            if (!(t->flags & CU_STREAM_NON_BLOCKING) && t->submitted != atomic_load(&t->completed))
                return 0;
    } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
        if (legacy_stream.submitted != atomic_load(&legacy_stream.completed))
            return 0;
    }
    return 1;
}

/* Appends op to s and returns its sequence number; under streams_lock. The worker may run
 * and free op as soon as s->lock is released. */
static uint64_t append_locked(cr__stream_t *s, cr__op_t *op)
{
    pthread_mutex_lock(&s->lock);
    uint64_t seq = s->submitted + 1;
    __atomic_store_n(&s->submitted, seq, __ATOMIC_RELEASE); /* an idle worker spins on it */
    op->next = NULL;
    op->seq = seq;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_signal(&s->work_cond);
    pthread_mutex_unlock(&s->lock);
    return seq;
}

/* Starts s's worker if needed and appends op; under streams_lock. On failure op is left to
 * the caller. */
static CUresult submit_locked(cr__stream_t *s, cr__op_t *op, uint64_t *seq)
{
    if (s->destroying) /* looked up just before it was destroyed */
        return CUDA_ERROR_INVALID_HANDLE;
    if (add_implicit_deps(s, op) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!s->thread_started) {
        pthread_attr_t attr;
        pthread_t thread;
        int err;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        cr__obj_ref(&s->obj);
        err = pthread_create(&thread, &attr, worker, s);
        pthread_attr_destroy(&attr);
        if (err != 0) {
            cr__obj_unref(&s->obj);
            CR_ERROR("emu: cannot start a stream thread: %s", strerror(err));
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        s->thread_started = 1;
    }
    uint64_t n = append_locked(s, op);
    if (seq)
        *seq = n;
    return CUDA_SUCCESS;
}

CUresult cr__stream_submit(cr__stream_t *s, cr__op_t *op, uint64_t *seq)
{
    pthread_mutex_lock(&streams_lock);
    CUresult rc = submit_locked(s, op, seq);
    pthread_mutex_unlock(&streams_lock);
    if (rc != CUDA_SUCCESS)
        cr__op_free(op);
    return rc;
}

CUresult cr__after_all(cr__op_t *op)
{
    CUresult rc = CUDA_SUCCESS;
    int nomem = 0;
    pthread_mutex_lock(&streams_lock);
    for (cr__stream_t *t = stream_list; t && !nomem; t = t->next)
        if (t != &reaper_stream && t->submitted > atomic_load(&t->completed))
            nomem = cr__op_add_dep(op, t, t->submitted) != 0;
    if (!nomem && op->dep_count > 0) {
        rc = submit_locked(&reaper_stream, op, NULL);
        op = rc == CUDA_SUCCESS ? NULL : op;
    }
    pthread_mutex_unlock(&streams_lock);
    if (!op)
        return CUDA_SUCCESS;
    /* nothing pending, or no way to queue: wait here (rarely) and run it now */
    if (nomem || rc != CUDA_SUCCESS)
        (void)cr__sync_all();
    rc = op->run ? op->run(op, NULL) : CUDA_SUCCESS;
    cr__op_free(op);
    return rc;
}

int cr__stream_try_inline(cr__stream_t *s, cr__op_t *op, CUresult *rc)
{
    pthread_mutex_lock(&streams_lock);
    if (s->destroying || !ready_locked(s)) {
        pthread_mutex_unlock(&streams_lock);
        return 0;
    }
    op->run_inline = 1;
    append_locked(s, op);
    pthread_mutex_unlock(&streams_lock);
    *rc = op->run ? op->run(op, s) : CUDA_SUCCESS;
    pthread_mutex_lock(&s->lock);
    complete_head(s, op, CUDA_SUCCESS);
    pthread_cond_signal(&s->work_cond); /* the worker may wait behind this op */
    pthread_mutex_unlock(&s->lock);
    cr__op_free(op);
    return 1;
}

CUresult cr__stream_run_sync(cr__stream_t *s, cr__op_t *op)
{
    CUresult rc;
    uint64_t seq;
    if (cr__stream_try_inline(s, op, &rc))
        return rc;
    rc = cr__stream_submit(s, op, &seq);
    if (rc == CUDA_SUCCESS)
        cr__stream_wait(s, seq);
    return rc;
}

/* The stream's fault (sticky), else its first asynchronous error (reported once). */
static CUresult take_error(cr__stream_t *s)
{
    pthread_mutex_lock(&s->lock);
    CUresult rc = s->fault != CUDA_SUCCESS ? s->fault : s->error;
    s->error = CUDA_SUCCESS;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void cr__stream_fault(cr__stream_t *s, CUresult fault)
{
    pthread_mutex_lock(&s->lock);
    if (s->fault == CUDA_SUCCESS)
        s->fault = fault;
    pthread_mutex_unlock(&s->lock);
    if (cr__emu.context_faults) { /* the first fault breaks the context for good */
        int none = CUDA_SUCCESS;
        atomic_compare_exchange_strong(&cr__emu.context_fault, &none, (int)fault);
    }
}

int cr_emu_stream_set_output(void *stream, cr_emu_output_fn fn, void (*release)(void *user),
                             void *user)
{
    cr__stream_t *s = cr__stream_get((CUstream)stream);
    if (!s)
        return CR_EINVAL;
    pthread_mutex_lock(&s->lock);
    void (*old_release)(void *) = s->out_release;
    void *old_user = s->out_user;
    s->out_fn = fn;
    s->out_release = fn ? release : NULL;
    s->out_user = fn ? user : NULL;
    pthread_mutex_unlock(&s->lock);
    cr__stream_put(s);
    if (old_release)
        old_release(old_user);
    if (!fn && release)
        release(user);
    return 0;
}

CUresult cr__sync_all(void)
{
    cr__dep_t *waits = NULL;
    size_t n = 0, cap = 0;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&streams_lock);
    for (cr__stream_t *t = stream_list; t; t = t->next) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            cr__dep_t *w = realloc(waits, ncap * sizeof *w);
            if (!w)
                break; /* wait for what we have; better than failing */
            waits = w;
            cap = ncap;
        }
        cr__obj_ref(&t->obj);
        waits[n++] = (cr__dep_t){t, t->submitted};
    }
    pthread_mutex_unlock(&streams_lock);
    for (size_t i = 0; i < n; i++) {
        cr__stream_wait(waits[i].stream, waits[i].seq);
        CUresult e = take_error(waits[i].stream);
        if (rc == CUDA_SUCCESS)
            rc = e;
        cr__obj_unref(&waits[i].stream->obj);
    }
    free(waits);
    return rc;
}

/* ---- stream API ---- */

#define GET_STREAM(s, h)                                                                           \
    cr__stream_t *s = cr__stream_get(h);                                                           \
    if (!s)                                                                                        \
    return CUDA_ERROR_INVALID_HANDLE

CUresult cr_emu_cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    CR__ENTER();
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    if (priority < CR__PRIORITY_GREATEST)
        priority = CR__PRIORITY_GREATEST;
    if (priority > CR__PRIORITY_LEAST)
        priority = CR__PRIORITY_LEAST;
    cr__stream_t *s = calloc(1, sizeof *s);
    if (!s || stream_init(s, flags, priority, 0) != 0) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->handle = cr__handle_new(CR__H_STREAM, &s->obj, s);
    if (!s->handle) {
        cr__obj_unref(&s->obj);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&streams_lock);
    list_add(s);
    pthread_mutex_unlock(&streams_lock);
    *phStream = (CUstream)(uintptr_t)s->handle;
    cr__obj_unref(&s->obj); /* the registry's reference keeps it */
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    return cr_emu_cuStreamCreateWithPriority(phStream, Flags, 0);
}

CUresult cr_emu_cuStreamDestroy_v2(CUstream hStream)
{
    CR__ENTER();
    GET_STREAM(s, hStream);
    if (s->is_legacy || cr__handle_del(s->handle, CR__HMASK(CR__H_STREAM)) != 0) {
        cr__stream_put(s);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    /* Pending work still runs; the worker ends once the queue is empty. */
    pthread_mutex_lock(&streams_lock);
    pthread_mutex_lock(&s->lock);
    s->destroying = 1;
    pthread_cond_signal(&s->work_cond);
    int started = s->thread_started;
    pthread_mutex_unlock(&s->lock);
    if (!started)
        list_remove(s);
    pthread_mutex_unlock(&streams_lock);
    cr__stream_put(s);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuStreamSynchronize(CUstream hStream)
{
    CR__ENTER();
    GET_STREAM(s, hStream);
    pthread_mutex_lock(&s->lock);
    uint64_t seq = s->submitted;
    pthread_mutex_unlock(&s->lock);
    cr__stream_wait(s, seq);
    CUresult rc = take_error(s);
    cr__stream_put(s);
    return rc;
}

CUresult cr_emu_cuStreamQuery(CUstream hStream)
{
    CR__ENTER();
    GET_STREAM(s, hStream);
    CUresult rc = CUDA_ERROR_NOT_READY;
    pthread_mutex_lock(&s->lock);
    if (s->submitted == atomic_load(&s->completed)) {
        rc = s->fault != CUDA_SUCCESS ? s->fault : s->error; /* an error once, a fault always */
        s->error = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&s->lock);
    cr__stream_put(s);
    return rc;
}

CUresult cr_emu_cuStreamGetPriority(CUstream hStream, int *priority)
{
    CR__ENTER();
    if (!priority)
        return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(s, hStream);
    *priority = s->priority;
    cr__stream_put(s);
    return CUDA_SUCCESS;
}

/* The stream attributes a GPU takes as hints (access policy window, synchronization
 * policy, memory sync domain) are kept and given back; the priority is the stream's. */
CUresult cr_emu_cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr,
                                     const CUstreamAttrValue *value)
{
    CR__ENTER();
    if (!value || attr == 0 || (unsigned)attr >= CR__STREAM_ATTRS)
        return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(s, hStream);
    pthread_mutex_lock(&s->lock);
    if (attr == CU_STREAM_ATTRIBUTE_PRIORITY) {
        s->priority = value->priority;
    } else {
        s->attrs[attr] = *value;
        s->attrs_set |= 1u << attr;
    }
    pthread_mutex_unlock(&s->lock);
    cr__stream_put(s);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr,
                                     CUstreamAttrValue *value)
{
    CR__ENTER();
    if (!value || attr == 0 || (unsigned)attr >= CR__STREAM_ATTRS)
        return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(s, hStream);
    pthread_mutex_lock(&s->lock);
    memset(value, 0, sizeof *value);
    if (attr == CU_STREAM_ATTRIBUTE_PRIORITY)
        value->priority = s->priority;
    else if (s->attrs_set & (1u << attr))
        *value = s->attrs[attr];
    pthread_mutex_unlock(&s->lock);
    cr__stream_put(s);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    CR__ENTER();
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(s, hStream);
    *flags = s->flags;
    cr__stream_put(s);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
    CR__ENTER();
    if (!streamId)
        return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(s, hStream);
    *streamId = s->id;
    cr__stream_put(s);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    CR__ENTER();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(s, hStream);
    *pctx = (CUcontext)(uintptr_t)cr__emu.ctx_handle;
    cr__stream_put(s);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    CR__ENTER();
    if (!pCtx || !pGreenCtx)
        return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(s, hStream);
    *pCtx = (CUcontext)(uintptr_t)cr__emu.ctx_handle;
    *pGreenCtx = NULL;
    cr__stream_put(s);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuStreamGetDevice(CUstream hStream, CUdevice *device)
{
    CR__ENTER();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(s, hStream);
    *device = 0;
    cr__stream_put(s);
    return CUDA_SUCCESS;
}

/* ---- host functions ----
 * A GPU runs the host functions of every stream of a context on one thread of the driver's,
 * in the order their streams reach them: one that waits holds all the others. With
 * serial_callbacks so does this device (the stream's thread hands the function to the
 * context's callback thread and waits for it to return); otherwise each stream's thread
 * runs its own. */

typedef struct host_op_s {
    cr__op_t op;
    CUhostFn fn;
    CUstreamCallback callback;
    CUstream handle; /* as the caller named the stream, for the callback */
    void *user;
    struct host_op_s *next_call; /* the callback thread's queue */
    int done;
} host_op_t;

static void call_host(const host_op_t *h)
{
    if (h->fn)
        h->fn(h->user);
    else
        h->callback(h->handle, CUDA_SUCCESS, h->user);
}

static pthread_mutex_t callback_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t callback_cond = PTHREAD_COND_INITIALIZER;
static host_op_t *calls_head, *calls_tail;
static int callback_thread_started;

static void *callback_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&callback_lock);
    for (;;) {
        while (!calls_head)
            pthread_cond_wait(&callback_cond, &callback_lock);
        host_op_t *h = calls_head;
        calls_head = h->next_call;
        if (!calls_head)
            calls_tail = NULL;
        pthread_mutex_unlock(&callback_lock);
        call_host(h);
        pthread_mutex_lock(&callback_lock);
        h->done = 1;
        pthread_cond_broadcast(&callback_cond);
    }
    return NULL;
}

static CUresult host_run(cr__op_t *op, cr__stream_t *s)
{
    host_op_t *h = (host_op_t *)op;
    (void)s;
    if (!cr__emu.serial_callbacks) {
        call_host(h);
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&callback_lock);
    if (!callback_thread_started) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, callback_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            pthread_mutex_unlock(&callback_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        callback_thread_started = 1;
    }
    h->next_call = NULL;
    h->done = 0;
    if (calls_tail)
        calls_tail->next_call = h;
    else
        calls_head = h;
    calls_tail = h;
    pthread_cond_broadcast(&callback_cond);
    while (!h->done)
        pthread_cond_wait(&callback_cond, &callback_lock);
    pthread_mutex_unlock(&callback_lock);
    return CUDA_SUCCESS;
}

static CUresult submit_host(CUstream hStream, CUhostFn fn, CUstreamCallback cb, void *user)
{
    GET_STREAM(s, hStream);
    host_op_t *h = calloc(1, sizeof *h);
    if (!h) {
        cr__stream_put(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h->op.run = host_run;
    h->fn = fn;
    h->callback = cb;
    h->handle = hStream;
    h->user = user;
    CUresult rc = cr__stream_submit(s, &h->op, NULL);
    cr__stream_put(s);
    return rc;
}

CUresult cr_emu_cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    CR__ENTER();
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    return submit_host(hStream, fn, NULL, userData);
}

CUresult cr_emu_cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                                    unsigned int flags)
{
    CR__ENTER();
    if (!callback || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return submit_host(hStream, NULL, callback, userData);
}

/* ---- stream memory operations: writes and waits of 32- and 64-bit values ---- */

typedef struct {
    cr__op_t op;
    unsigned n;
    CUstreamBatchMemOpParams ops[];
} memops_op_t;

static int is_wide(CUstreamBatchMemOpType kind)
{
    return kind == CU_STREAM_MEM_OP_WAIT_VALUE_64 || kind == CU_STREAM_MEM_OP_WRITE_VALUE_64;
}

/* Whether value v meets a wait for `want` under `condition`, at that width. */
static int value_reached(uint64_t v, uint64_t want, unsigned condition, int wide)
{
    uint64_t mask = wide ? UINT64_MAX : UINT32_MAX;
    v &= mask;
    want &= mask;
    switch (condition) {
    case CU_STREAM_WAIT_VALUE_GEQ: /* cyclic: wraparound ignored */
        return wide ? (int64_t)(v - want) >= 0 : (int32_t)(uint32_t)(v - want) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
        return v == want;
    case CU_STREAM_WAIT_VALUE_AND:
        return (v & want) != 0;
    default: /* CU_STREAM_WAIT_VALUE_NOR */
        return (~(v | want) & mask) != 0;
    }
}

static uint64_t load_value(uint64_t addr, int wide)
{
    CR__DEVICE_ACCESS_BEGIN();
    uint64_t v =
        wide
            ? atomic_load_explicit((const _Atomic uint64_t *)(uintptr_t)addr, memory_order_acquire)
            : atomic_load_explicit((const _Atomic uint32_t *)(uintptr_t)addr, memory_order_acquire);
    CR__DEVICE_ACCESS_END();
    return v;
}

static CUresult memops_run(cr__op_t *op, cr__stream_t *s)
{
    memops_op_t *m = (memops_op_t *)op;
    (void)s;
    for (unsigned i = 0; i < m->n; i++) {
        const CUstreamBatchMemOpParams *p = &m->ops[i];
        int wide = is_wide(p->operation);
        switch (p->operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
            unsigned condition = p->waitValue.flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH;
            struct timespec pause = {0, 1000};
            while (!value_reached(load_value(p->waitValue.address, wide), p->waitValue.value64,
                                  condition, wide)) {
                nanosleep(&pause, NULL);
                if (pause.tv_nsec < 200000)
                    pause.tv_nsec *= 2; /* a GPU polls; this backs off */
            }
            break;
        }
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        case CU_STREAM_MEM_OP_WRITE_VALUE_64:
            CR__DEVICE_ACCESS_BEGIN();
            if (wide)
                atomic_store_explicit((_Atomic uint64_t *)(uintptr_t)p->writeValue.address,
                                      p->writeValue.value64, memory_order_release);
            else
                atomic_store_explicit((_Atomic uint32_t *)(uintptr_t)p->writeValue.address,
                                      p->writeValue.value, memory_order_release);
            CR__DEVICE_ACCESS_END();
            break;
        default: /* a barrier, a flush of remote writes */
            atomic_thread_fence(memory_order_seq_cst);
        }
    }
    return CUDA_SUCCESS;
}

/* CUDA_SUCCESS when the driver would take op. */
static CUresult memop_check(const CUstreamBatchMemOpParams *op)
{
    uint64_t addr, size = is_wide(op->operation) ? 8 : 4;
    switch (op->operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        if ((op->waitValue.flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH) >
            CU_STREAM_WAIT_VALUE_NOR)
            return CUDA_ERROR_INVALID_VALUE;
        addr = op->waitValue.address;
        break;
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        if (op->writeValue.flags) /* the _v2 forms take no flag */
            return CUDA_ERROR_INVALID_VALUE;
        addr = op->writeValue.address;
        break;
    case CU_STREAM_MEM_OP_BARRIER:
        return op->memoryBarrier.flags <= CU_STREAM_MEMORY_BARRIER_TYPE_GPU
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        return op->flushRemoteWrites.flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (addr % size)
        return CUDA_ERROR_INVALID_VALUE;
    /* page-locked host memory or device memory: both are this process's memory here */
    return cr__host_mapped((uintptr_t)addr, size) || cr__mem_check(addr, size) == CUDA_SUCCESS
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_emu_cuStreamBatchMemOp_v2(CUstream hStream, unsigned int count,
                                      CUstreamBatchMemOpParams *paramArray, unsigned int flags)
{
    CR__ENTER();
    if (!count || count > 255 || !paramArray || flags) /* "less than 256" */
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) {
        CUresult rc = memop_check(&paramArray[i]);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    GET_STREAM(s, hStream);
    memops_op_t *m = malloc(sizeof *m + count * sizeof *m->ops);
    if (!m) {
        cr__stream_put(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *m = (memops_op_t){.op.run = memops_run, .n = count};
    memcpy(m->ops, paramArray, count * sizeof *m->ops);
    CUresult rc = cr__stream_submit(s, &m->op, NULL);
    cr__stream_put(s);
    return rc;
}

CUresult cr_emu_cuStreamWaitValue32_v2(CUstream hStream, CUdeviceptr addr, cuuint32_t value,
                                       unsigned int flags)
{
    CUstreamBatchMemOpParams op = {.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32};
    op.waitValue.address = addr;
    op.waitValue.value = value;
    op.waitValue.flags = flags;
    return cr_emu_cuStreamBatchMemOp_v2(hStream, 1, &op, 0);
}

/* ---- events ---- */

typedef struct {
    cr__obj_t obj;
    uint64_t handle;
    unsigned flags;
    pthread_mutex_t lock;
    cr__stream_t *stream; /* of the last record (referenced), NULL before the first */
    uint64_t seq;         /* position of the last record in it */
    uint64_t gen;         /* number of records */
    uint64_t time_gen;    /* the record that time_ns belongs to */
    int64_t time_ns;
    uint64_t fault_gen; /* the record that found its stream faulted */
    CUresult fault;
} event_t;

static void event_release(cr__obj_t *obj)
{
    event_t *e = (event_t *)obj;
    if (e->stream)
        cr__obj_unref(&e->stream->obj);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

static event_t *event_get(CUevent h, cr__obj_t **owner)
{
    return cr__handle_get((uint64_t)(uintptr_t)h, CR__HMASK(CR__H_EVENT), owner, NULL);
}

CUresult cr_emu_cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    CR__ENTER();
    if (!phEvent || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                         CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    event_t *e = calloc(1, sizeof *e);
    if (!e || pthread_mutex_init(&e->lock, NULL) != 0) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    cr__obj_init(&e->obj, event_release);
    e->flags = Flags;
    e->handle = cr__handle_new(CR__H_EVENT, &e->obj, e);
    if (!e->handle) {
        cr__obj_unref(&e->obj);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phEvent = (CUevent)(uintptr_t)e->handle;
    cr__obj_unref(&e->obj);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuEventDestroy_v2(CUevent hEvent)
{
    CR__ENTER();
    /* Records still queued hold their own reference. */
    if (cr__handle_del((uint64_t)(uintptr_t)hEvent, CR__HMASK(CR__H_EVENT)) != 0)
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

typedef struct {
    cr__op_t op;
    event_t *event; /* referenced */
    uint64_t gen;
} record_op_t;

static CUresult record_run(cr__op_t *op, cr__stream_t *s)
{
    record_op_t *r = (record_op_t *)op;
    int64_t now = cr__now_ns();
    CUresult fault = CUDA_SUCCESS;
    if (s) { /* a fault earlier on the stream: this record reports it */
        pthread_mutex_lock(&s->lock);
        fault = s->fault;
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_lock(&r->event->lock);
    if (r->event->gen == r->gen) {
        r->event->time_ns = now;
        r->event->time_gen = r->gen;
        r->event->fault = fault;
        r->event->fault_gen = r->gen;
    }
    pthread_mutex_unlock(&r->event->lock);
    return CUDA_SUCCESS;
}

static void record_destroy(cr__op_t *op)
{
    record_op_t *r = (record_op_t *)op;
    cr__obj_unref(&r->event->obj);
    free(r);
}

/* Records event e (referenced by the caller) on stream s. */
static CUresult event_record(event_t *e, cr__stream_t *s)
{
    uint64_t seq;
    record_op_t *r = calloc(1, sizeof *r);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r->op.run = record_run;
    r->op.destroy = record_destroy;
    r->event = e;
    cr__obj_ref(&e->obj);
    pthread_mutex_lock(&e->lock);
    r->gen = e->gen + 1;
    CUresult rc = cr__stream_submit(s, &r->op, &seq);
    cr__stream_t *old = NULL;
    if (rc == CUDA_SUCCESS) {
        /* The op cannot have stored its time yet: it needs e->lock, held here. */
        e->gen++;
        old = e->stream;
        e->stream = s;
        cr__obj_ref(&s->obj);
        e->seq = seq;
    }
    pthread_mutex_unlock(&e->lock);
    if (old)
        cr__obj_unref(&old->obj);
    return rc;
}

/* Exported for launch attributes (programmatic / completion events). */
CUresult cr__event_record(uint64_t handle, cr__stream_t *s)
{
    cr__obj_t *owner;
    event_t *e = event_get((CUevent)(uintptr_t)handle, &owner);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = event_record(e, s);
    cr__obj_unref(owner);
    return rc;
}

int cr__event_valid(uint64_t handle)
{
    cr__obj_t *owner;
    if (!event_get((CUevent)(uintptr_t)handle, &owner))
        return 0;
    cr__obj_unref(owner);
    return 1;
}

CUresult cr_emu_cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    cr__obj_t *owner;
    CR__ENTER();
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    event_t *e = event_get(hEvent, &owner);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    cr__stream_t *s = cr__stream_get(hStream);
    if (!s) {
        cr__obj_unref(owner);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    CUresult rc = event_record(e, s);
    cr__stream_put(s);
    cr__obj_unref(owner);
    return rc;
}

CUresult cr_emu_cuEventRecord(CUevent hEvent, CUstream hStream)
{
    return cr_emu_cuEventRecordWithFlags(hEvent, hStream, 0);
}

/* The stream and position of e's last record (stream referenced), or NULL if never
 * recorded. */
static cr__stream_t *event_position(event_t *e, uint64_t *seq, uint64_t *gen)
{
    pthread_mutex_lock(&e->lock);
    cr__stream_t *s = e->stream;
    if (s)
        cr__obj_ref(&s->obj);
    *seq = e->seq;
    if (gen)
        *gen = e->gen;
    pthread_mutex_unlock(&e->lock);
    return s;
}

/* The fault the record `gen` of e found on its stream (once it ran), else CUDA_SUCCESS. */
static CUresult event_fault(event_t *e, uint64_t gen)
{
    pthread_mutex_lock(&e->lock);
    CUresult rc = e->fault_gen == gen ? e->fault : CUDA_SUCCESS;
    pthread_mutex_unlock(&e->lock);
    return rc;
}

CUresult cr_emu_cuEventQuery(CUevent hEvent)
{
    cr__obj_t *owner;
    uint64_t seq;
    CR__ENTER();
    event_t *e = event_get(hEvent, &owner);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = CUDA_SUCCESS;
    uint64_t gen;
    cr__stream_t *s = event_position(e, &seq, &gen);
    if (s && atomic_load(&s->completed) < seq)
        rc = CUDA_ERROR_NOT_READY;
    else if (s)
        rc = event_fault(e, gen);
    cr__stream_put(s);
    cr__obj_unref(owner);
    return rc;
}

CUresult cr_emu_cuEventSynchronize(CUevent hEvent)
{
    cr__obj_t *owner;
    uint64_t seq;
    CR__ENTER();
    event_t *e = event_get(hEvent, &owner);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t gen;
    CUresult rc = CUDA_SUCCESS;
    cr__stream_t *s = event_position(e, &seq, &gen);
    if (s) {
        cr__stream_wait(s, seq);
        rc = event_fault(e, gen);
    }
    cr__stream_put(s);
    cr__obj_unref(owner);
    return rc;
}

/* The time of e's last record: CUDA_SUCCESS, CUDA_ERROR_NOT_READY or
 * CUDA_ERROR_INVALID_HANDLE (never recorded, or timing disabled). */
static CUresult event_time(event_t *e, int64_t *ns)
{
    uint64_t seq, gen;
    CUresult rc = CUDA_SUCCESS;
    if (e->flags & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    cr__stream_t *s = event_position(e, &seq, &gen);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (atomic_load(&s->completed) < seq)
        rc = CUDA_ERROR_NOT_READY;
    cr__stream_put(s);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&e->lock);
    if (e->gen != gen || e->time_gen != gen)
        rc = CUDA_ERROR_NOT_READY; /* re-recorded meanwhile */
    *ns = e->time_ns;
    pthread_mutex_unlock(&e->lock);
    return rc;
}

CUresult cr_emu_cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    cr__obj_t *o1 = NULL, *o2 = NULL;
    int64_t t1 = 0, t2 = 0;
    CUresult rc;
    CR__ENTER();
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    event_t *start = event_get(hStart, &o1);
    event_t *end = event_get(hEnd, &o2);
    if (!start || !end) {
        rc = CUDA_ERROR_INVALID_HANDLE;
        goto out;
    }
    rc = event_time(start, &t1);
    if (rc == CUDA_SUCCESS)
        rc = event_time(end, &t2);
    if (rc == CUDA_SUCCESS)
        *pMilliseconds = (float)((double)(t2 - t1) / 1e6);
out:
    cr__obj_unref(o1);
    cr__obj_unref(o2);
    return rc;
}

CUresult cr_emu_cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cr_emu_cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

typedef struct {
    cr__op_t op;
} wait_op_t;

CUresult cr_emu_cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    cr__obj_t *owner;
    uint64_t seq;
    CR__ENTER();
    if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    event_t *e = event_get(hEvent, &owner);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    cr__stream_t *s = cr__stream_get(hStream);
    if (!s) {
        cr__obj_unref(owner);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    CUresult rc = CUDA_SUCCESS;
    cr__stream_t *t = event_position(e, &seq, NULL);
    /* An event never recorded, or already reached, asks for no wait. */
    if (t && t != s && atomic_load(&t->completed) < seq) {
        wait_op_t *w = calloc(1, sizeof *w);
        if (!w || cr__op_add_dep(&w->op, t, seq) != 0) {
            free(w);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            rc = cr__stream_submit(s, &w->op, NULL);
        }
    }
    cr__stream_put(t);
    cr__stream_put(s);
    cr__obj_unref(owner);
    return rc;
}
