/* Stream memory operations: cuStreamBatchMemOp_v2 [stream, [[operation, address, value,
 * flags]...]], which the client sends for cuStreamWaitValue32/64, cuStreamWriteValue32/64
 * and cuStreamBatchMemOp alike, enqueued on the session's stream as one batch.
 *
 * Checked as the driver checks them, and more: at most 255 operations; each write's and
 * wait's address aligned to its 4 or 8 bytes and in the session's own memory, its value
 * within its width; write flags 0 (the _v2 forms take no other); wait conditions GEQ, EQ,
 * AND, NOR (with or without FLUSH); barrier and flush flags the driver knows.
 *
 * A wait blocks its stream until the device sees a value that meets it; the driver never
 * gives up. On a device shared by tenants that must not outlive the session, so the server
 * keeps every batch with waits it enqueued, with an event recorded after it, until the
 * event says the batch is done:
 *  - a wait no value could meet (AND with 0, NOR with every bit set) is refused
 *    (CUDA_ERROR_INVALID_VALUE), where the driver would block for ever;
 *  - memory a pending wait reads cannot be freed with cuMemFreeAsync or unmapped
 *    (cr_memops_reading): it stays the session's, so that
 *  - when the session ends (or its context is reset) the server writes, on a stream of its
 *    own, a value that meets each pending wait (cr_memops_release), one wait at a time in
 *    the order they were enqueued, each left a moment to be seen (longer each round), a few
 *    rounds, so that waits on one address for different values (a sequence) are met in
 *    turn, and its streams drain. Waits that want different values of one address at once,
 *    behind work that runs longer than the rounds, may still miss theirs: the stream then
 *    stays blocked, and the session's resources with it (its tenant's quota bounds them).
 * At most MAX_WAITS waits may be pending per session (CUDA_ERROR_OUT_OF_MEMORY beyond),
 * which bounds the time the release takes (about 23 s when none is ever met).
 *
 * Threads: the handler on the session's executor; cr_memops_reading also on waiter threads
 * (cuMemUnmap): the session's state has a lock. */
#include "memops.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "cr_server_hand.h"
#include "handlers.h"
#include "log.h"
#include "request.h"

#define MAX_OPS 255      /* "count ... must be less than 256" */
#define MAX_WAITS 1024   /* waits not yet seen done, per session */
#define RELEASE_ROUNDS 3 /* writes of every pending wait's value, at the session's end */
/* after each write, for its waiter to see it before the next: a GPU polls at once, the
 * emulated device within 200 us when its threads run; each round waits ten times longer
 * than the one before, for a loaded machine (a sequence of waits on one address misses a
 * value its waiter did not see in time) */
#define RELEASE_PAUSE_NS 200000L

typedef struct {
    uint64_t addr, value;
    unsigned size; /* 4 or 8 */
    unsigned cond; /* CU_STREAM_WAIT_VALUE_GEQ, _EQ, _AND or _NOR */
} wait_t;

typedef struct {
    CUevent done; /* recorded after the batch; NULL: never known done */
    unsigned n;
    wait_t waits[];
} batch_t;

typedef struct {
    pthread_mutex_t lock;
    batch_t **pending; /* in the order they were enqueued */
    size_t n, cap;
    size_t waits; /* in them */
} memops_t;

static memops_t *state(cr_session_t *s, int create)
{
    memops_t **slot = (memops_t **)cr_session_slot(s, CR_SLOT_MEMOPS);
    if (!*slot && create && (*slot = calloc(1, sizeof **slot)))
        pthread_mutex_init(&(*slot)->lock, NULL);
    return *slot;
}

/* Drops the batches the device is done with (or that a lost context took). Locked. */
static void prune_locked(cr_session_t *s, memops_t *m)
{
    const cr_driver_t *d = &cr_session_backend(s)->d;
    for (size_t i = 0; i < m->n;) {
        batch_t *b = m->pending[i];
        if (!b->done || d->cuEventQuery(b->done) == CUDA_ERROR_NOT_READY) {
            i++;
            continue;
        }
        d->cuEventDestroy_v2(b->done);
        m->waits -= b->n;
        free(b);
        memmove(&m->pending[i], &m->pending[i + 1], (--m->n - i) * sizeof *m->pending);
    }
}

/* Reads op `o` ([operation, address, value, flags]) into *op: CUDA_SUCCESS when the driver
 * would take it and its memory is the session's. *wait: it is a wait. */
static CUresult parse_op(cr_session_t *s, const msgpack_object *o, CUstreamBatchMemOpParams *op,
                         int *wait)
{
    uint64_t v[4];
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 4)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < 4; i++)
        if (cr_obj_u64(&o->via.array.ptr[i], &v[i]))
            return CUDA_ERROR_INVALID_VALUE;
    uint64_t kind = v[0], addr = v[1], value = v[2], flags = v[3];
    *op = (CUstreamBatchMemOpParams){.operation = (CUstreamBatchMemOpType)kind};
    *wait = kind == CU_STREAM_MEM_OP_WAIT_VALUE_32 || kind == CU_STREAM_MEM_OP_WAIT_VALUE_64;
    switch (kind) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
        int wide =
            kind == CU_STREAM_MEM_OP_WAIT_VALUE_64 || kind == CU_STREAM_MEM_OP_WRITE_VALUE_64;
        uint64_t size = wide ? 8 : 4, all = wide ? UINT64_MAX : UINT32_MAX;
        if (value > all || addr % size || !cr_session_owns(s, addr, size))
            return CUDA_ERROR_INVALID_VALUE;
        if (*wait) {
            uint64_t cond = flags & ~(uint64_t)CU_STREAM_WAIT_VALUE_FLUSH;
            if (cond > CU_STREAM_WAIT_VALUE_NOR || (cond == CU_STREAM_WAIT_VALUE_AND && !value) ||
                (cond == CU_STREAM_WAIT_VALUE_NOR && value == all))
                return CUDA_ERROR_INVALID_VALUE; /* unknown, or never met */
            op->waitValue.address = addr;
            op->waitValue.value64 = value;
            op->waitValue.flags = (unsigned)flags;
        } else {
            if (flags)
                return CUDA_ERROR_INVALID_VALUE;
            op->writeValue.address = addr;
            op->writeValue.value64 = value;
        }
        return CUDA_SUCCESS;
    }
    case CU_STREAM_MEM_OP_BARRIER:
        if (flags > CU_STREAM_MEMORY_BARRIER_TYPE_GPU)
            return CUDA_ERROR_INVALID_VALUE;
        op->memoryBarrier.flags = (unsigned)flags;
        return CUDA_SUCCESS;
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Keeps the waits of ops (n of them, `waits` waits) as a pending batch, done when `done`
 * is. Locked. 0, or -1 out of memory (the batch is then never known done: its waits stay
 * pending until the session's end). */
static int keep_locked(memops_t *m, const CUstreamBatchMemOpParams *ops, unsigned n, unsigned waits,
                       CUevent done)
{
    batch_t *b = malloc(sizeof *b + waits * sizeof *b->waits);
    if (!b || cr_array_room((void **)&m->pending, &m->cap, m->n, sizeof *m->pending)) {
        free(b);
        return -1;
    }
    b->done = done;
    b->n = 0;
    for (unsigned i = 0; i < n; i++) {
        const CUstreamBatchMemOpParams *op = &ops[i];
        int wide = op->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
        if (op->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 || wide)
            b->waits[b->n++] =
                (wait_t){op->waitValue.address, op->waitValue.value64, wide ? 8u : 4u,
                         op->waitValue.flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH};
    }
    m->pending[m->n++] = b;
    m->waits += b->n;
    return 0;
}

/* Reads a batch ([[operation, address, value, flags]...], 1 to MAX_OPS of them) into ops:
 * CUDA_SUCCESS with *n operations, *waits of them waits, when parse_op takes each. */
static CUresult parse_ops(cr_session_t *s, const msgpack_object *list,
                          CUstreamBatchMemOpParams ops[MAX_OPS], unsigned *n, unsigned *waits)
{
    *n = *waits = 0;
    if (list->type != MSGPACK_OBJECT_ARRAY || !list->via.array.size ||
        list->via.array.size > MAX_OPS)
        return CUDA_ERROR_INVALID_VALUE;
    for (; *n < list->via.array.size; ++*n) {
        int wait;
        CUresult r = parse_op(s, &list->via.array.ptr[*n], &ops[*n], &wait);
        if (r != CUDA_SUCCESS)
            return r;
        *waits += wait;
    }
    return CUDA_SUCCESS;
}

CUresult cr_memops_check(cr_session_t *s, const msgpack_object *ops)
{
    CUstreamBatchMemOpParams parsed[MAX_OPS];
    unsigned n, waits;
    return parse_ops(s, ops, parsed, &n, &waits);
}

void cr_srv_cuStreamBatchMemOp_v2(cr_request_t *req)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    CUstreamBatchMemOpParams ops[MAX_OPS];
    uint64_t sid;
    cr_handle_t *stream =
        req->argc == 2 && !cr_arg_u64(req, 0, &sid) ? cr_session_stream(s, sid) : NULL;
    unsigned n = 0, waits = 0;
    CUresult r = stream ? parse_ops(s, &req->args[1], ops, &n, &waits) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && !d->cuStreamBatchMemOp_v2)
        r = CUDA_ERROR_NOT_SUPPORTED;
    memops_t *m = r == CUDA_SUCCESS && waits ? state(s, 1) : NULL;
    CUevent done = NULL;
    if (r == CUDA_SUCCESS && waits) { /* room to keep it, and an event to know it done */
        if (!m) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            pthread_mutex_lock(&m->lock);
            prune_locked(s, m);
            int full = m->waits + waits > MAX_WAITS;
            pthread_mutex_unlock(&m->lock);
            if (full)
                r = CUDA_ERROR_OUT_OF_MEMORY;
            else if (d->cuEventCreate(&done, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
                done = NULL; /* kept as never known done */
        }
    }
    if (r == CUDA_SUCCESS) {
        cr_session_stream_prepare(s, stream);
        r = d->cuStreamBatchMemOp_v2(stream->obj, n, ops, 0);
    }
    if (r == CUDA_SUCCESS && waits) {
        if (done && d->cuEventRecord(done, stream->obj) != CUDA_SUCCESS) {
            d->cuEventDestroy_v2(done);
            done = NULL;
        }
        pthread_mutex_lock(&m->lock);
        if (keep_locked(m, ops, n, waits, done) != 0)
            CR_WARN("session %llu: out of memory keeping a stream wait: its memory is not "
                    "guarded",
                    (unsigned long long)cr_session_id(s));
        pthread_mutex_unlock(&m->lock);
    } else if (done) {
        d->cuEventDestroy_v2(done);
    }
    cr_request_finish(req, r);
}

int cr_memops_reading(cr_session_t *s, uint64_t p, uint64_t len)
{
    memops_t *m = state(s, 0);
    if (!m)
        return 0;
    int reading = 0;
    pthread_mutex_lock(&m->lock);
    prune_locked(s, m);
    for (size_t i = 0; i < m->n && !reading; i++)
        for (unsigned k = 0; k < m->pending[i]->n && !reading; k++) {
            const wait_t *w = &m->pending[i]->waits[k];
            reading = w->addr < p + len && p < w->addr + w->size;
        }
    pthread_mutex_unlock(&m->lock);
    return reading;
}

/* The write that meets wait w. */
static CUstreamBatchMemOpParams meeting(const wait_t *w)
{
    CUstreamBatchMemOpParams op = {.operation = w->size == 8 ? CU_STREAM_MEM_OP_WRITE_VALUE_64
                                                             : CU_STREAM_MEM_OP_WRITE_VALUE_32};
    op.writeValue.address = w->addr;
    /* GEQ and EQ: the value; AND: the value (not 0); NOR: 0 (the value has a bit clear) */
    op.writeValue.value64 = w->cond == CU_STREAM_WAIT_VALUE_NOR ? 0 : w->value;
    return op;
}

void cr_memops_release(cr_session_t *s)
{
    memops_t *m = state(s, 0);
    if (!m)
        return;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    pthread_mutex_lock(&m->lock);
    prune_locked(s, m);
    size_t before = m->waits;
    CUstream own = NULL;
    if (before && d->cuStreamCreate(&own, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        own = NULL;
    long pause_ns = RELEASE_PAUSE_NS;
    for (int round = 0; own && m->n && round < RELEASE_ROUNDS; round++, pause_ns *= 10) {
        for (size_t i = 0; i < m->n; i++)
            for (unsigned k = 0; k < m->pending[i]->n; k++) {
                CUstreamBatchMemOpParams op = meeting(&m->pending[i]->waits[k]);
                d->cuStreamBatchMemOp_v2(own, 1, &op, 0);
                d->cuStreamSynchronize(own);
                struct timespec pause = {pause_ns / 1000000000L, pause_ns % 1000000000L};
                nanosleep(&pause, NULL);
            }
        prune_locked(s, m);
    }
    if (own)
        d->cuStreamDestroy_v2(own);
    if (before)
        CR_INFO("session %llu: %zu stream waits met at its end%s",
                (unsigned long long)cr_session_id(s), before - m->waits,
                m->n ? ", some not: its streams may not drain" : "");
    for (size_t i = 0; i < m->n; i++) {
        if (m->pending[i]->done)
            d->cuEventDestroy_v2(m->pending[i]->done);
        free(m->pending[i]);
    }
    m->n = 0;
    m->waits = 0;
    pthread_mutex_unlock(&m->lock);
}

void cr_memops_free(cr_session_t *s)
{
    memops_t **slot = (memops_t **)cr_session_slot(s, CR_SLOT_MEMOPS);
    if (!*slot)
        return;
    cr_memops_release(s); /* nothing is pending by now; events go */
    pthread_mutex_destroy(&(*slot)->lock);
    free((*slot)->pending);
    free(*slot);
    *slot = NULL;
}
