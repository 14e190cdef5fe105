/* Contexts live in the client.
 *
 * The server runs every tenant in one CUDA context, so a client's contexts are local
 * objects: each thread's current-context stack, primary contexts with their retain counts,
 * contexts made with cuCtxCreate, and the context-local storage that cudart keeps in them
 * (export table c693336e). Work from any of a client's contexts goes to its one session;
 * resetting the primary context, which frees the session's memory, streams and events, is
 * lifecycle.c's.
 *
 * Threads: any application thread; the current-context stack is the calling thread's.
 * Nothing here waits but for the contexts' lock, and cuCtxSynchronize for its reply.
 * Context-local storage destructors run without the lock: they may call the driver. */
#include "context.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "error.h"
#include "idmap.h"
#include "log.h"
#include "request.h"
#include "stream.h"

#define CTX_STACK_MAX 64

typedef struct cls_entry_s {
    struct cls_entry_s *next;
    void *key;
    void *value;
    void (*dtor)(CUcontext, void *, void *);
} cls_entry_t;

struct CUctx_st {
    int device;
    unsigned flags;
    int primary;
    int retain_count; /* primary contexts */
    int alive;        /* created contexts until destroyed */
    unsigned long long id;
    cls_entry_t *cls;
};

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUctx_st primary_ctx[CR_MAX_DEVICES];
static cr_idmap_t live_contexts = CR_IDMAP_INIT; /* created contexts (address -> 1) */
static unsigned long long next_ctx_id = 1;

static __thread CUcontext ctx_stack[CTX_STACK_MAX];
static __thread int ctx_depth;

int cr_ctx_valid(CUcontext ctx)
{
    if (!ctx)
        return 0;
    if (ctx >= primary_ctx && ctx < primary_ctx + CR_MAX_DEVICES) {
        cr_client_t *cl = cr_client();
        return cl && ctx - primary_ctx < cl->device_count;
    }
    pthread_mutex_lock(&ctx_lock);
    int ok = cr_idmap_get(&live_contexts, (uint64_t)(uintptr_t)ctx, NULL) && ctx->alive;
    pthread_mutex_unlock(&ctx_lock);
    return ok;
}

CUcontext cr_ctx_current(void)
{
    return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
}

CUresult cr_ctx_require(void)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    return cr_ctx_current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

int cr_ctx_device(CUcontext ctx)
{
    return ctx ? ctx->device : 0;
}

static CUresult check_device(CUdevice dev)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= cl->device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

static struct CUctx_st *primary_of(CUdevice dev)
{
    struct CUctx_st *c = &primary_ctx[dev];
    if (!c->id) { /* first use: give it its identity (under ctx_lock) */
        c->device = dev;
        c->primary = 1;
        c->id = next_ctx_id++;
    }
    return c;
}

CUresult cr_ctx_primary(CUcontext *out, CUdevice dev)
{
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&ctx_lock);
    *out = primary_of(dev);
    pthread_mutex_unlock(&ctx_lock);
    return CUDA_SUCCESS;
}

/* --- primary contexts -------------------------------------------------------------------- */

CUresult cr_hand_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&ctx_lock);
    struct CUctx_st *c = primary_of(dev);
    c->retain_count++;
    *pctx = c;
    pthread_mutex_unlock(&ctx_lock);
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&ctx_lock);
    struct CUctx_st *c = primary_of(dev);
    if (c->retain_count > 0) {
        /* At zero the context is inactive; its server-side resources stay with the
         * session until a reset or the end of the connection. */
        c->retain_count--;
        r = CUDA_SUCCESS;
    } else {
        r = CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_unlock(&ctx_lock);
    return r;
}

CUresult cr_hand_cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&ctx_lock);
    struct CUctx_st *c = primary_of(dev);
    *flags = c->flags;
    *active = c->retain_count > 0;
    pthread_mutex_unlock(&ctx_lock);
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    const unsigned known = CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX |
                           CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE |
                           CU_CTX_SYNC_MEMOPS;
    if (flags & ~known)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&ctx_lock);
    primary_of(dev)->flags = flags;
    pthread_mutex_unlock(&ctx_lock);
    return CUDA_SUCCESS;
}

/* Takes the context's storage out under the lock and runs the destructors outside it:
 * cudart's destructors may call back into the driver. */
void cr_ctx_run_cls_destructors(CUcontext ctx)
{
    pthread_mutex_lock(&ctx_lock);
    cls_entry_t *e = ctx->cls;
    ctx->cls = NULL;
    pthread_mutex_unlock(&ctx_lock);
    while (e) {
        cls_entry_t *next = e->next;
        if (e->dtor)
            e->dtor(ctx, e->key, e->value);
        free(e);
        e = next;
    }
}

static uint64_t attributes_generation;

uint64_t cr_ctx_attributes_generation(void)
{
    return __atomic_load_n(&attributes_generation, __ATOMIC_ACQUIRE);
}

void cr_ctx_attributes_changed(void)
{
    __atomic_add_fetch(&attributes_generation, 1, __ATOMIC_ACQ_REL);
}

void cr_ctx_primary_reset_state(CUcontext ctx)
{
    cr_ctx_attributes_changed(); /* its kernels' attributes went with it */
    pthread_mutex_lock(&ctx_lock);
    ctx->retain_count = 0;
    ctx->flags = 0;
    pthread_mutex_unlock(&ctx_lock);
}

/* --- created contexts and the current-context stack --------------------------------------- */

static CUresult create_context(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->device = dev;
    c->flags = flags;
    c->alive = 1;
    pthread_mutex_lock(&ctx_lock);
    c->id = next_ctx_id++;
    int err = cr_idmap_put(&live_contexts, (uint64_t)(uintptr_t)c, 1);
    pthread_mutex_unlock(&ctx_lock);
    if (err) {
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (ctx_depth == CTX_STACK_MAX)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_stack[ctx_depth++] = c; /* a new context becomes current, pushed */
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return create_context(pctx, flags, dev);
}

CUresult cr_hand_cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                                CUdevice dev)
{
    if (params && (params->execAffinityParams || params->cigParams))
        return cr_unsupported("cuCtxCreate with execution affinity or CIG parameters");
    return create_context(pctx, flags, dev);
}

CUresult cr_hand_cuCtxDestroy_v2(CUcontext ctx)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx || ctx->primary || !cr_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    cr_ctx_run_cls_destructors(ctx);
    pthread_mutex_lock(&ctx_lock);
    ctx->alive = 0; /* kept in the registry so a stale handle is recognised as invalid */
    pthread_mutex_unlock(&ctx_lock);
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] == ctx) { /* remove it from this thread's stack */
            memmove(&ctx_stack[i], &ctx_stack[i + 1], (size_t)(ctx_depth - i - 1) * sizeof ctx);
            ctx_depth--;
            i--;
        }
    cr_ctx_attributes_changed(); /* its kernels' attributes went with it */
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuCtxGetCurrent(CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    *pctx = cr_ctx_current();
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuCtxSetCurrent(CUcontext ctx)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx && !cr_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!ctx) {
        if (ctx_depth)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (ctx_depth == 0)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuCtxPushCurrent_v2(CUcontext ctx)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!cr_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == CTX_STACK_MAX)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuCtxPopCurrent_v2(CUcontext *pctx)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx_depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext c = ctx_stack[--ctx_depth];
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

static CUresult resolve(CUcontext *ctx)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!*ctx)
        *ctx = cr_ctx_current();
    if (!*ctx || !cr_ctx_valid(*ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = resolve(&ctx);
    if (r == CUDA_SUCCESS)
        *device = ctx->device;
    return r;
}

CUresult cr_hand_cuCtxGetDevice(CUdevice *device)
{
    return cr_hand_cuCtxGetDevice_v2(device, NULL);
}

CUresult cr_hand_cuCtxGetFlags(unsigned int *flags)
{
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = NULL;
    CUresult r = resolve(&ctx);
    if (r == CUDA_SUCCESS)
        *flags = ctx->flags;
    return r;
}

CUresult cr_hand_cuCtxSetFlags(unsigned int flags)
{
    CUcontext ctx = NULL;
    CUresult r = resolve(&ctx);
    if (r == CUDA_SUCCESS)
        ctx->flags = flags;
    return r;
}

CUresult cr_hand_cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = resolve(&ctx);
    if (r == CUDA_SUCCESS)
        *version = 3020; /* what the driver reports for every context since CUDA 3.2 */
    return r;
}

CUresult cr_hand_cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = resolve(&ctx);
    if (r == CUDA_SUCCESS)
        *id = ctx->id;
    return r;
}

CUresult cr_hand_cuCtxSynchronize_v2(CUcontext ctx)
{
    CUresult r = resolve(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    /* all of the session's streams: one context on the server holds them all */
    cr_msg_t m;
    cr_pending_t p = {0};
    msgpack_unpacked u;
    int err = cr_msg_begin(cr_client()->conn, &m, CR_OP_cuCtxSynchronize_v2);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 0);
    r = cr_call(&m, &p, &u);
    cr_reply_done(&p, &u);
    return r;
}

CUresult cr_hand_cuCtxSynchronize(void)
{
    return cr_hand_cuCtxSynchronize_v2(NULL);
}

CUresult cr_hand_cuStreamGetCtx(CUstream stream, CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = NULL;
    CUresult r = resolve(&ctx);
    if (r == CUDA_SUCCESS)
        *pctx = ctx; /* streams are not tied to client contexts: report the current one */
    return r;
}

CUresult cr_hand_cuStreamGetCtx_v2(CUstream stream, CUcontext *pctx, CUgreenCtx *pgreen)
{
    if (!pgreen)
        return CUDA_ERROR_INVALID_VALUE;
    *pgreen = NULL;
    return cr_hand_cuStreamGetCtx(stream, pctx);
}

/* A stream's id, unique in the process and stable: its id on the wire (the session's
 * legacy stream is 0 there), plus one. Answered here: libraries ask it on every call. */
CUresult cr_hand_cuStreamGetId(CUstream stream, unsigned long long *id)
{
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    uint64_t wire;
    CUresult r = cr_stream_wire_id(stream, &wire);
    if (r == CUDA_SUCCESS)
        *id = wire + 1;
    return r;
}

CUresult cr_hand_cuStreamGetDevice(CUstream stream, CUdevice *device)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = NULL;
    CUresult r = resolve(&ctx);
    if (r == CUDA_SUCCESS)
        *device = ctx->device;
    return r;
}

/* --- context-local storage (export table c693336e) ---------------------------------------- */

static CUresult cls_context(CUcontext *ctx)
{
    if (!*ctx)
        *ctx = cr_ctx_current();
    if (!*ctx)
        return CUDA_ERROR_INVALID_CONTEXT; /* what makes cudart bind its primary context */
    return cr_ctx_valid(*ctx) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cr_cls_put(CUcontext ctx, void *key, void *value, void (*dtor)(CUcontext, void *, void *))
{
    CUresult r = cls_context(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&ctx_lock);
    cls_entry_t *e = ctx->cls;
    while (e && e->key != key)
        e = e->next;
    if (!e && (e = calloc(1, sizeof *e)) != NULL) {
        e->key = key;
        e->next = ctx->cls;
        ctx->cls = e;
    }
    if (e) {
        e->value = value;
        e->dtor = dtor;
    }
    pthread_mutex_unlock(&ctx_lock);
    return e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cr_cls_delete(CUcontext ctx, void *key)
{
    CUresult r = cls_context(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&ctx_lock);
    for (cls_entry_t **pe = &ctx->cls; *pe; pe = &(*pe)->next)
        if ((*pe)->key == key) {
            cls_entry_t *e = *pe;
            *pe = e->next;
            free(e);
            break;
        }
    pthread_mutex_unlock(&ctx_lock);
    return CUDA_SUCCESS;
}

CUresult cr_cls_get(void **value, CUcontext ctx, void *key)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    /* runs on nearly every runtime call: the current context needs no lookup */
    if (!ctx) {
        ctx = cr_ctx_current();
        if (!ctx)
            return CUDA_ERROR_INVALID_CONTEXT;
    } else if (!cr_ctx_valid(ctx)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    CUresult r = CUDA_ERROR_INVALID_HANDLE; /* a key never put */
    pthread_mutex_lock(&ctx_lock);
    for (cls_entry_t *e = ctx->cls; e; e = e->next)
        if (e->key == key) {
            *value = e->value;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&ctx_lock);
    return r;
}
