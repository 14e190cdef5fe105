/* Memory shared with clients on the same host (wire formats in common/protocol.h).
 *
 * A client on a Unix socket passes memfds; each becomes a region of its session, mapped
 * here and registered with the backend as page-locked, so that copies between it and the
 * device run asynchronously in stream order with no bytes on the socket. A region is
 * trusted for nothing: the memfd must be sealed against shrinking (a client that shrank
 * it under our mapping would crash the server at its next access), large enough for the
 * size claimed, and copies are checked to lie inside it.
 *
 * A region the client asks to have at the host window (host_window.h) is mapped at an
 * address the window hands out, which the client then maps too, and registered as mapped
 * host memory: with unified addressing the device reaches it at that same address, so
 * kernels read and write page-locked memory through the client's own pointer. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "cr_opcodes.h"
#include "cr_server_hand.h"
#include "error.h"
#include "host_window.h"
#include "idmap.h"
#include "log.h"
#include "request.h"
#include "session.h"
#include "shm.h"

#define MAX_REGIONS 65536 /* per session */

typedef struct {
    uint8_t *base;
    size_t size;
    int registered;     /* with the backend (page-locked) */
    int in_window;      /* at the host window, at the client's address */
    CUdeviceptr device; /* its device address (mapped host memory), 0: none */
} region_t;

static int enabled = 1;
static uint64_t max_bytes = UINT64_MAX; /* a tenant's regions together (--max-shared) */

void cr_shm_set_enabled(int on)
{
    enabled = on;
}

void cr_shm_set_limit(uint64_t bytes)
{
    max_bytes = bytes;
}

/* The server pins every region: a tenant's sessions together may share at most max_bytes.
 * Takes `size` bytes of its tenant's room (0), or says there is none (-1). */
static int share_take(cr_session_t *s, uint64_t size)
{
    cr_tenant_t *t = cr_session_tenant(s);
    if (!t)
        return size > max_bytes ? -1 : 0;
    uint64_t now = __atomic_load_n(&t->shared, __ATOMIC_RELAXED);
    do {
        if (size > max_bytes || now > max_bytes - size)
            return -1;
    } while (!__atomic_compare_exchange_n(&t->shared, &now, now + size, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    return 0;
}

static void share_give(cr_session_t *s, uint64_t size)
{
    cr_tenant_t *t = cr_session_tenant(s);
    if (t)
        __atomic_sub_fetch(&t->shared, size, __ATOMIC_ACQ_REL);
}

static void region_free(const cr_backend_t *b, region_t *r)
{
    if (r->registered)
        b->d.cuMemHostUnregister(r->base);
    if (r->in_window)
        cr_host_window_give((uint64_t)(uintptr_t)r->base, r->size);
    else
        munmap(r->base, r->size);
    free(r);
}

/* Maps a client's memfd after checking it, at the host window when `at_window` asks and
 * the window has room; NULL with a reason. */
static region_t *region_map(const cr_backend_t *b, int fd, uint64_t size, int at_window,
                            const char **why)
{
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *why = "not a memory file";
        return NULL;
    }
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
        *why = "not sealed against shrinking";
        return NULL;
    }
    if (size == 0 || size > (uint64_t)st.st_size || size > SIZE_MAX) {
        *why = "size does not match the file";
        return NULL;
    }
    region_t *r = calloc(1, sizeof *r);
    if (!r) {
        *why = "out of memory";
        return NULL;
    }
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t at = at_window && size % page == 0 ? cr_host_window_take(size) : 0;
    void *p = at ? mmap((void *)(uintptr_t)at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                        fd, 0)
                 : mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        *why = strerror(errno);
        if (at) /* the reservation under it may be gone: the give maps it afresh */
            cr_host_window_give(at, size);
        free(r);
        return NULL;
    }
    r->base = p;
    r->size = size;
    r->in_window = at != 0;
    /* page-locked for the backend: copies from and to it are then asynchronous; without,
     * they are still right, only synchronous. At the window it is mapped host memory too. */
    unsigned flags = CU_MEMHOSTREGISTER_PORTABLE | (at ? CU_MEMHOSTREGISTER_DEVICEMAP : 0);
    CUresult rr = b->d.cuMemHostRegister_v2(p, size, flags);
    r->registered = rr == CUDA_SUCCESS;
    if (!r->registered)
        CR_DEBUG("shared region of %llu bytes not registered: %s", (unsigned long long)size,
                 cr_cuda_error_name(rr));
    CUdeviceptr device = 0;
    if (r->registered && at && b->d.cuMemHostGetDevicePointer_v2(&device, p, 0) == CUDA_SUCCESS)
        r->device = device;
    return r;
}

/* A session's regions (its slot; the executor's, but also read by its waiter tasks). */
typedef struct {
    pthread_mutex_t lock;
    cr_idmap_t regions; /* id -> region_t *; each taken from its tenant's room (share_take) */
    int announced;      /* logged that the session shares memory */
} regions_t;

/* The session's regions, made at its first attach (executor); NULL before. */
static regions_t *regions_of(cr_session_t *s, int make)
{
    regions_t **slot = (regions_t **)cr_session_slot(s, CR_SLOT_SHM);
    regions_t *rs = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!rs && make && (rs = calloc(1, sizeof *rs)) != NULL) {
        pthread_mutex_init(&rs->lock, NULL);
        __atomic_store_n(slot, rs, __ATOMIC_RELEASE);
    }
    return rs;
}

void cr_srv_shm_attach(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t id, size, at_window = 0;
    int fd = req->fd;
    req->fd = -1;
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    const char *why = "malformed request";
    region_t *r = NULL;
    if (!enabled || fd < 0) {
        result = CUDA_ERROR_NOT_SUPPORTED;
        why = enabled ? "no descriptor came with it" : "disabled (--no-shm)";
    } else if ((req->argc == 2 || (req->argc == 3 && !cr_arg_u64(req, 2, &at_window))) &&
               !cr_arg_u64(req, 0, &id) && !cr_arg_u64(req, 1, &size) && id != 0 &&
               id != UINT64_MAX) {
        uint64_t unused;
        regions_t *rs = regions_of(s, 1);
        int taken = 0;
        size_t count = 0;
        if (rs) {
            pthread_mutex_lock(&rs->lock);
            taken = cr_idmap_get(&rs->regions, id, &unused);
            count = rs->regions.count;
            pthread_mutex_unlock(&rs->lock);
        }
        if (!rs)
            why = "out of memory", result = CUDA_ERROR_OUT_OF_MEMORY;
        else if (taken)
            why = "region id in use";
        else if (count >= MAX_REGIONS)
            why = "too many regions", result = CUDA_ERROR_OUT_OF_MEMORY;
        else if (share_take(s, size) != 0) /* the server would pin it */
            why = "more than a tenant may share (--max-shared)", result = CUDA_ERROR_OUT_OF_MEMORY;
        else if (!(r = region_map(cr_session_backend(s), fd, size, at_window != 0, &why)))
            share_give(s, size);
        else {
            pthread_mutex_lock(&rs->lock);
            int err = cr_idmap_put(&rs->regions, id, (uint64_t)(uintptr_t)r);
            pthread_mutex_unlock(&rs->lock);
            if (err) {
                region_free(cr_session_backend(s), r);
                share_give(s, size);
                r = NULL;
                why = "out of memory", result = CUDA_ERROR_OUT_OF_MEMORY;
            } else {
                result = CUDA_SUCCESS;
                if (r->device) /* memory of the session's the device reaches, as its own */
                    cr_session_track_host(s, r->device, r->size);
                CR_DEBUG("session %llu: shared region %llu attached (%llu bytes%s%s)",
                         (unsigned long long)cr_session_id(s), (unsigned long long)id,
                         (unsigned long long)size, r->registered ? ", page-locked" : "",
                         r->device ? ", mapped to the device" : "");
                if (!rs->announced) {
                    rs->announced = 1;
                    CR_INFO("session %llu: shared memory with %s",
                            (unsigned long long)cr_session_id(s), cr_session_name(s));
                }
            }
        }
    }
    if (fd >= 0)
        close(fd); /* the mapping keeps the memory */
    if (result != CUDA_SUCCESS)
        CR_DEBUG("session %llu: shared memory declined: %s", (unsigned long long)cr_session_id(s),
                 why);
    cr_reply_t reply;
    if (result != CUDA_SUCCESS || req->argc != 3) {
        cr_request_finish(req, result);
        return;
    }
    if (cr_reply_begin(req, &reply, result, 2) == 0) {
        /* where the client maps it (0: anywhere) and the device's address of it (0: none);
         * the region is the session's until it detaches it, whatever becomes of this reply */
        msgpack_pack_uint64(&reply.pk, r->in_window ? (uint64_t)(uintptr_t)r->base : 0);
        msgpack_pack_uint64(&reply.pk, r->device);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

typedef struct {
    cr_request_t *req;
    region_t *region;
    CUevent *events;
    unsigned count;
} detach_t;

/* Waiter thread: the session's streams are past every use of the region; unmap it. */
static void detach_when_idle(void *arg)
{
    detach_t *t = arg;
    cr_session_t *s = t->req->session;
    CUresult r = cr_session_wait_events(s, t->events, t->count);
    region_free(cr_session_backend(s), t->region);
    cr_request_finish(t->req, r == CUDA_SUCCESS || cr_is_context_error(r) ? CUDA_SUCCESS : r);
    free(t);
}

void cr_srv_shm_detach(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t id, v;
    if (req->argc != 1 || cr_arg_u64(req, 0, &id)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    regions_t *rs = regions_of(s, 0);
    int found = 0;
    if (rs) {
        pthread_mutex_lock(&rs->lock);
        found = cr_idmap_remove(&rs->regions, id, &v);
        pthread_mutex_unlock(&rs->lock);
        if (found) /* room for others now: its pages go once the streams are past it */
            share_give(s, ((const region_t *)(uintptr_t)v)->size);
    }
    if (!found) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    /* later requests no longer find it, nor name it as device memory; earlier ones may
     * still be queued on streams */
    const region_t *gone = (const region_t *)(uintptr_t)v;
    if (gone->device)
        cr_session_untrack_host(s, gone->device);
    detach_t *t = calloc(1, sizeof *t);
    if (!t || cr_session_mark_streams(s, &t->events, &t->count) != CUDA_SUCCESS) {
        free(t);
        const cr_driver_t *d = &cr_session_backend(s)->d;
        d->cuCtxSynchronize();
        region_free(cr_session_backend(s), (region_t *)(uintptr_t)v);
        cr_request_finish(req, CUDA_SUCCESS);
        return;
    }
    t->req = req;
    t->region = (region_t *)(uintptr_t)v;
    cr_session_finish_on_waiter(s, detach_when_idle, t);
}

void *cr_shm_host_ptr(cr_session_t *s, uint64_t id, uint64_t offset, uint64_t bytes)
{
    uint64_t v;
    regions_t *rs = regions_of(s, 0);
    if (!rs)
        return NULL;
    pthread_mutex_lock(&rs->lock);
    int found = cr_idmap_get(&rs->regions, id, &v) == 1;
    pthread_mutex_unlock(&rs->lock);
    region_t *r = found ? (region_t *)(uintptr_t)v : NULL;
    if (!r || offset > r->size || bytes > r->size - offset)
        return NULL;
    return r->base + offset;
}

void cr_shm_release_all(cr_session_t *s)
{
    regions_t *rs = regions_of(s, 0);
    if (!rs)
        return;
    *cr_session_slot(s, CR_SLOT_SHM) = NULL;
    size_t pos = 0;
    uint64_t id, v;
    while (cr_idmap_next(&rs->regions, &pos, &id, &v)) {
        share_give(s, ((const region_t *)(uintptr_t)v)->size);
        region_free(cr_session_backend(s), (region_t *)(uintptr_t)v);
    }
    cr_idmap_free(&rs->regions);
    pthread_mutex_destroy(&rs->lock);
    free(rs);
}
