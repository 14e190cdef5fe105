/* CUDA user objects (user_object.h).
 *
 * An object is a record of this module; its handle is the record's address, valid while the
 * objects map holds it. References: the count on the object is every owner's together (the
 * program's and each holder's); a holder (a graph or an executable graph, by its server id)
 * keeps how many of each object it owns. When the count reaches zero the object leaves the
 * map and its destructor runs on the thread that runs host functions (the driver runs it on
 * an internal thread: never inside the call that released the last reference). Releasing
 * more references than exist is undefined natively; here it is refused. An executable
 * graph's references outlive it until its launched work is done: a host function on each
 * stream it was launched on (the first MAX_STREAMS; after that, the context is
 * synchronized instead) releases them.
 *
 * Threads: any application thread; destructors and the deferred releases run on the
 * callback thread. The lock is never held across a call to the server. */
#include "user_object.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

#include "client.h"
#include "cr_client_hand.h"
#include "error.h"
#include "idmap.h"
#include "log.h"

#define MAX_STREAMS 8 /* streams an executable graph's launches are followed on */

typedef struct {
    void *ptr;
    CUhostFn destroy;
    uint64_t refs; /* every owner's references */
} object_t;

typedef struct {
    object_t *object;
    uint64_t count;
} ref_t;

typedef struct {
    ref_t *refs;
    size_t count, cap;
    CUstream streams[MAX_STREAMS]; /* an executable graph's launches, distinct */
    unsigned stream_count;
    int more_streams; /* launched on more than MAX_STREAMS */
} holder_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cr_idmap_t objects = CR_IDMAP_INIT; /* object address -> 1 */
static cr_idmap_t holders = CR_IDMAP_INIT; /* graph or executable graph id -> holder_t * */

static object_t *object_live(CUuserObject h)
{
    uint64_t key = (uint64_t)(uintptr_t)h;
    return key && cr_idmap_get(&objects, key, NULL) ? (object_t *)h : NULL;
}

static void destroy_job(void *arg)
{
    object_t *o = arg;
    o->destroy(o->ptr);
    free(o);
}

/* Drops `count` references (lock held); returns the object when they were its last, to be
 * destroyed once the lock is let go. */
static object_t *drop(object_t *o, uint64_t count)
{
    o->refs -= count;
    if (o->refs)
        return NULL;
    cr_idmap_remove(&objects, (uint64_t)(uintptr_t)o, NULL);
    return o;
}

static void destroy_later(object_t *o)
{
    cr_client_t *cl = cr_client();
    if (!cl || cr_conn_run_later(cl->conn, destroy_job, o) != 0)
        destroy_job(o); /* no thread for it: at once rather than never */
}

static holder_t *holder_of(uint64_t id, int make)
{
    uint64_t v;
    if (cr_idmap_get(&holders, id, &v))
        return (holder_t *)(uintptr_t)v;
    holder_t *h = make ? calloc(1, sizeof *h) : NULL;
    if (h && cr_idmap_put(&holders, id, (uint64_t)(uintptr_t)h) != 0) {
        free(h);
        h = NULL;
    }
    return h;
}

/* Adds references a holder owns (lock held); 0 or CR_ENOMEM. */
static int hold(holder_t *h, object_t *o, uint64_t count)
{
    for (size_t i = 0; i < h->count; i++)
        if (h->refs[i].object == o) {
            h->refs[i].count += count;
            return 0;
        }
    if (h->count == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 4;
        ref_t *n = realloc(h->refs, cap * sizeof *n);
        if (!n)
            return CR_ENOMEM;
        h->refs = n;
        h->cap = cap;
    }
    h->refs[h->count++] = (ref_t){o, count};
    return 0;
}

/* Releases every reference of a holder that has left the map; destructors run later. */
static void holder_release(holder_t *h)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < h->count; i++) {
        object_t *o = drop(h->refs[i].object, h->refs[i].count);
        if (o) /* queued; only without a thread for it does it run here, under the lock,
                  which a destructor cannot come back for: it may not call the driver */
            destroy_later(o);
    }
    pthread_mutex_unlock(&lock);
    free(h->refs);
    free(h);
}

static holder_t *holder_take(uint64_t id)
{
    uint64_t v = 0;
    pthread_mutex_lock(&lock);
    int found = cr_idmap_remove(&holders, id, &v);
    pthread_mutex_unlock(&lock);
    return found ? (holder_t *)(uintptr_t)v : NULL;
}

/* --- the driver's calls ----------------------------------------------------------------- */

CUresult cr_hand_cuUserObjectCreate(CUuserObject *out, void *ptr, CUhostFn destroy,
                                    unsigned int initial, unsigned int flags)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!out || !destroy || initial == 0 || initial > INT_MAX ||
        flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    object_t *o = malloc(sizeof *o);
    if (!o)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *o = (object_t){ptr, destroy, initial};
    pthread_mutex_lock(&lock);
    int err = cr_idmap_put(&objects, (uint64_t)(uintptr_t)o, 1);
    pthread_mutex_unlock(&lock);
    if (err) {
        free(o);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = (CUuserObject)o;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuUserObjectRetain(CUuserObject object, unsigned int count)
{
    if (count == 0 || count > INT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    object_t *o = object_live(object);
    if (o)
        o->refs += count;
    pthread_mutex_unlock(&lock);
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuUserObjectRelease(CUuserObject object, unsigned int count)
{
    if (count == 0 || count > INT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    object_t *o = object_live(object), *dead = NULL;
    int ok = o && o->refs >= count;
    if (ok)
        dead = drop(o, count);
    pthread_mutex_unlock(&lock);
    if (dead)
        destroy_later(dead);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_user_objects_retain(uint64_t holder, CUuserObject object, unsigned int count,
                                unsigned int flags)
{
    if (count == 0 || count > INT_MAX || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    object_t *o = object_live(object);
    holder_t *h = o ? holder_of(holder, 1) : NULL;
    CUresult r = !o                        ? CUDA_ERROR_INVALID_VALUE
                 : !h || hold(h, o, count) ? CUDA_ERROR_OUT_OF_MEMORY
                                           : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && !(flags & CU_GRAPH_USER_OBJECT_MOVE))
        o->refs += count; /* new references; moved ones were the caller's, counted already */
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cr_user_objects_release(uint64_t holder, CUuserObject object, unsigned int count)
{
    if (count == 0 || count > INT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    object_t *o = object_live(object);
    holder_t *h = o ? holder_of(holder, 0) : NULL;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; h && i < h->count; i++) {
        ref_t *ref = &h->refs[i];
        if (ref->object != o || ref->count < count)
            continue;
        ref->count -= count;
        if (ref->count == 0)
            *ref = h->refs[--h->count];
        object_t *dead = drop(o, count);
        if (dead)
            destroy_later(dead);
        r = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* --- what graphs tell us ------------------------------------------------------------------ */

void cr_user_objects_copy(uint64_t from, uint64_t to)
{
    pthread_mutex_lock(&lock);
    holder_t *src = holder_of(from, 0);
    holder_t *dst = src && src->count ? holder_of(to, 1) : NULL;
    for (size_t i = 0; dst && i < src->count; i++) {
        if (hold(dst, src->refs[i].object, src->refs[i].count) != 0) {
            CR_WARN("out of memory: a graph's user objects are not kept by its copy");
            break;
        }
        src->refs[i].object->refs += src->refs[i].count;
    }
    pthread_mutex_unlock(&lock);
}

void cr_user_objects_graph_gone(uint64_t id)
{
    holder_t *h = holder_take(id);
    if (h)
        holder_release(h);
}

void cr_user_objects_launched(uint64_t id, CUstream stream)
{
    pthread_mutex_lock(&lock);
    holder_t *h = holders.count ? holder_of(id, 0) : NULL;
    unsigned i = 0;
    while (h && i < h->stream_count && h->streams[i] != stream)
        i++;
    if (h && i == h->stream_count) {
        if (i < MAX_STREAMS)
            h->streams[h->stream_count++] = stream;
        else
            h->more_streams = 1;
    }
    pthread_mutex_unlock(&lock);
}

typedef struct {
    holder_t *holder;
    unsigned pending; /* host functions still to run */
} deferred_t;

static void deferred_step(void *arg)
{
    deferred_t *d = arg;
    if (__atomic_sub_fetch(&d->pending, 1, __ATOMIC_ACQ_REL) == 0) {
        holder_release(d->holder);
        free(d);
    }
}

void cr_user_objects_exec_gone(uint64_t id)
{
    holder_t *h = holder_take(id);
    if (!h)
        return;
    deferred_t *d = h->stream_count && !h->more_streams ? malloc(sizeof *d) : NULL;
    if (!d) { /* never launched, or on too many streams to follow (or no memory) */
        if (h->stream_count)
            cr_hand_cuCtxSynchronize();
        holder_release(h);
        return;
    }
    /* one count for this function, so that no step finishes it before all are queued */
    *d = (deferred_t){h, h->stream_count + 1};
    for (unsigned i = 0; i < h->stream_count; i++)
        if (cr_hand_cuLaunchHostFunc(h->streams[i], deferred_step, d) != CUDA_SUCCESS)
            deferred_step(d); /* a stream destroyed since: nothing to follow there */
    deferred_step(d);
}

void cr_user_objects_replace(uint64_t exec, uint64_t graph)
{
    cr_user_objects_exec_gone(exec); /* after the launches so far, as the driver does */
    cr_user_objects_copy(graph, exec);
}
