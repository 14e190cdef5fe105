/* Sessions: one per client connection, and the one list of them all.
 *
 * A session is created for each accepted connection (cr_session_new) and lives while the
 * connection, its executor or any task still holds a reference. This file owns what makes
 * it a session: its identity and tenant, references and tasks, the output accounting that
 * holds its executor back when the client does not read, and the list that status and
 * metrics read. What a session holds and does lives in its own files: executor.c (its
 * inbox and the thread that runs it), hello.c (admission), handles.c (handle table),
 * allocations.c (device memory and globals), legacy_stream.c (default-stream ordering),
 * context_loss.c (kernel faults).
 *
 * Threads: the loop creates and closes sessions; the executor and waiter threads use
 * them; s->lock guards what struct cr_session_s (session.h) says it does. */
#include "backend.h"
#include "guard.h"
#include "loop.h"
#include "scheduler.h"
#include "session.h"
#include "session_private.h"
#include "tenants.h"
#include "waiter.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "protocol.h"

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

void cr_sessions_each(void (*fn)(cr_session_t *s, void *arg), void *arg)
{
    pthread_mutex_lock(&all_lock);
    for (cr_session_t *s = all_head; s; s = s->all_next)
        fn(s, arg);
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
            memcpy(info.program, s->program, sizeof info.program);
            info.pid = s->pid;
            memcpy(info.peer, s->peer, sizeof info.peer);
            memcpy(info.auth, s->auth, sizeof info.auth);
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
        info.drove_device = __atomic_load_n(&s->drove_device, __ATOMIC_RELAXED);
        info.usage.launches = __atomic_load_n(&s->usage.launches, __ATOMIC_RELAXED);
        info.usage.bytes_h2d = __atomic_load_n(&s->usage.bytes_h2d, __ATOMIC_RELAXED);
        info.usage.bytes_d2h = __atomic_load_n(&s->usage.bytes_d2h, __ATOMIC_RELAXED);
        info.usage.errors = __atomic_load_n(&s->usage.errors, __ATOMIC_RELAXED);
        info.usage.device_ns = __atomic_load_n(&s->usage.device_ns, __ATOMIC_RELAXED);
        fn(&info, arg);
    }
    pthread_mutex_unlock(&all_lock);
}

void cr_session_note_driver_call(cr_session_t *s)
{
    if (!__atomic_load_n(&s->drove_device, __ATOMIC_RELAXED))
        __atomic_store_n(&s->drove_device, 1, __ATOMIC_RELAXED);
}

static void count(cr_session_t *s, size_t field, uint64_t n)
{
    __atomic_add_fetch((uint64_t *)((char *)&s->usage + field), n, __ATOMIC_RELAXED);
    if (s->tenant)
        __atomic_add_fetch((uint64_t *)((char *)&s->tenant->usage + field), n, __ATOMIC_RELAXED);
}

void cr_session_count_error(cr_session_t *s)
{
    count(s, offsetof(cr_usage_t, errors), 1);
}

void cr_session_count_device_time(cr_session_t *s, uint64_t ns)
{
    count(s, offsetof(cr_usage_t, device_ns), ns);
}

void **cr_session_slot(cr_session_t *s, cr_session_slot_t slot)
{
    return &s->slots[slot];
}

void cr_session_count_launches(cr_session_t *s, uint64_t n)
{
    count(s, offsetof(cr_usage_t, launches), n);
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
    cr_idmap_free(&s->handles); /* emptied by its executor, or never filled */
    cr_idmap_free(&s->by_object);
    for (size_t i = 0; i < s->allocations.count; i++) /* normally released before */
        cr_session_uncharge(s, s->allocations.ranges[i].value);
    cr_rangemap_free(&s->allocations);
    cr_rangemap_free(&s->code_ranges);
    cr_rangemap_free(&s->host_mapped);
    cr_session_vmm_release_all(s); /* normally released before, with the backend's */
    cr_outbox_free(s);
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

typedef struct {
    cr_session_t *session;
    void (*fn)(void *);
    void *arg;
} later_t;

static void run_later(void *p)
{
    later_t later = *(later_t *)p;
    free(p);
    later.fn(later.arg);
    cr_session_task_end(later.session);
}

void cr_session_finish_on_waiter(cr_session_t *s, void (*fn)(void *), void *arg)
{
    cr_session_task_begin(s);
    later_t *later = malloc(sizeof *later);
    if (later) {
        *later = (later_t){s, fn, arg};
        if (cr_waiter_run(run_later, later) == 0)
            return;
        free(later);
    }
    fn(arg); /* no waiter thread to spare: the calling thread waits instead */
    cr_session_task_end(s);
}

typedef struct {
    cr_session_t *session;
    CUevent *events;
    unsigned count;
    CUdeviceptr ptr;
    uint64_t size;
    void (*done)(void *arg, CUresult r);
    void *arg;
} free_task_t;

static void free_when_idle(void *arg)
{
    free_task_t *t = arg;
    cr_session_t *s = t->session;
    cr_session_wait_events(s, t->events, t->count);
    CUresult r = s->backend->d.cuMemFree_v2(t->ptr);
    if (r == CUDA_SUCCESS)
        cr_session_uncharge(s, t->size);
    else /* still there: still the session's */
        cr_session_track_alloc(s, t->ptr, t->size);
    if (t->done)
        t->done(t->arg, r);
    free(t);
}

CUresult cr_session_free_when_idle(cr_session_t *s, CUdeviceptr p,
                                   void (*done)(void *arg, CUresult r), void *arg)
{
    /* forgotten at once: later requests of the session may no longer use it */
    uint64_t size = cr_session_untrack_alloc(s, p);
    if (!size)
        return CUDA_ERROR_INVALID_VALUE;
    free_task_t *t = calloc(1, sizeof *t);
    CUresult r = t ? cr_session_mark_streams(s, &t->events, &t->count) : CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        free(t);
        cr_session_track_alloc(s, p, size); /* still held: the client may retry */
        return r;
    }
    *t = (free_task_t){s, t->events, t->count, p, size, done, arg};
    cr_session_finish_on_waiter(s, free_when_idle, t);
    return CUDA_SUCCESS;
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
    s->next_handle = CR_FIRST_HANDLE_ID;
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

const cr_backend_t *cr_session_backend(const cr_session_t *s)
{
    return s->backend;
}

uint64_t cr_session_id(const cr_session_t *s)
{
    return s->id;
}

cr_tenant_t *cr_session_tenant(const cr_session_t *s)
{
    return s->tenant;
}

const char *cr_session_peer(const cr_session_t *s)
{
    return s->peer;
}

const char *cr_session_name(const cr_session_t *s)
{
    return s->who[0] ? s->who : s->peer;
}

int cr_session_closing(const cr_session_t *s)
{
    return __atomic_load_n(&s->closing, __ATOMIC_ACQUIRE);
}
