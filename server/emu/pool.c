/* Stream-ordered allocation: memory pools, cuMemAllocAsync and cuMemFreeAsync.
 *
 * An allocation is carved from the arena when the call is made (its address must be known at
 * once) and is usable by work queued after it. cuMemFreeAsync marks the allocation unusable
 * for new work at once and queues the release on the stream; when the stream reaches it the
 * block goes to its pool's cache, and the pool gives cached blocks back to the arena while it
 * holds more than its release threshold. A later allocation from the pool reuses a cached
 * block only after that block's free has executed, which is always safe.
 * All pool state sits under cr__mem_lock. */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

typedef struct {
    uint64_t base;
    uint64_t reserved;
} block_t;

struct cr__pool_s {
    cr__obj_t obj;
    uint64_t handle;
    int is_default;
    int destroyed;
    uint64_t release_threshold;
    int reuse_follow_event, reuse_opportunistic, reuse_internal;
    uint64_t max_size; /* 0 = no limit */
    uint64_t reserved_current, reserved_high;
    uint64_t used_current, used_high;
    block_t *cache;
    size_t cache_count, cache_cap;
};

static cr__pool_t *default_pool;
static cr__pool_t *current_pool; /* cuDeviceSetMemPool; referenced */

uint64_t cr__pool_handle_of(const cr__pool_t *pool)
{
    return pool->handle;
}

static void pool_release(cr__obj_t *obj)
{
    cr__pool_t *p = (cr__pool_t *)obj;
    free(p->cache);
    free(p);
}

static cr__pool_t *pool_new(void)
{
    cr__pool_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    cr__obj_init(&p->obj, pool_release);
    p->reuse_follow_event = p->reuse_opportunistic = p->reuse_internal = 1;
    p->handle = cr__handle_new(CR__H_POOL, &p->obj, p);
    if (!p->handle) {
        free(p);
        return NULL;
    }
    /* The registry holds its own reference now; the creation reference is dropped by the
     * caller when it no longer needs the pointer. */
    return p;
}

int cr__pools_init(void)
{
    if (default_pool)
        return 0; /* an earlier cuInit got this far */
    default_pool = pool_new();
    if (!default_pool)
        return CR_ENOMEM;
    default_pool->is_default = 1; /* default_pool keeps the creation reference */
    current_pool = default_pool;
    cr__obj_ref(&default_pool->obj); /* current_pool's reference */
    return 0;
}

/* Gives cached blocks back to the arena until the pool holds at most `keep` bytes. */
static void pool_trim_locked(cr__pool_t *p, uint64_t keep)
{
    while (p->reserved_current > keep && p->cache_count > 0) {
        block_t b = p->cache[--p->cache_count];
        cr__arena_give(b.base, b.reserved);
        p->reserved_current -= b.reserved;
    }
}

void cr__pool_release_locked(cr__alloc_t *a)
{
    cr__pool_t *p = a->pool;
    p->used_current -= a->reserved;
    if (!p->destroyed && p->cache_count == p->cache_cap) {
        size_t cap = p->cache_cap ? p->cache_cap * 2 : 16;
        block_t *n = realloc(p->cache, cap * sizeof *n);
        if (n) {
            p->cache = n;
            p->cache_cap = cap;
        }
    }
    if (!p->destroyed && p->cache_count < p->cache_cap) {
        p->cache[p->cache_count++] = (block_t){a->base, a->reserved};
        pool_trim_locked(p, p->release_threshold);
    } else {
        cr__arena_give(a->base, a->reserved);
        p->reserved_current -= a->reserved;
    }
    a->pool = NULL;
    cr__obj_unref(&p->obj); /* the allocation's reference (pool_release only frees) */
}

/* Allocates from pool p (under cr__mem_lock for writing). */
static int pool_alloc_locked(cr__pool_t *p, uint64_t bytes, uint64_t *dptr)
{
    uint64_t need = cr__round_up(bytes, cr__alloc_granule(bytes));
    uint64_t base = 0, reserved = 0;
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < p->cache_count; i++) {
        /* reuse a cached block of the same granule that is not more than twice as big */
        if (p->cache[i].reserved >= need && p->cache[i].reserved <= 2 * need &&
            cr__alloc_granule(p->cache[i].reserved) == cr__alloc_granule(need) &&
            (best == SIZE_MAX || p->cache[i].reserved < p->cache[best].reserved))
            best = i;
    }
    if (best != SIZE_MAX) {
        base = p->cache[best].base;
        reserved = p->cache[best].reserved;
        p->cache[best] = p->cache[--p->cache_count];
    } else {
        if (p->max_size && p->reserved_current + need > p->max_size)
            return CR_ENOMEM;
        int rc = cr__arena_take(bytes, &base, &reserved);
        if (rc != 0 && p->cache_count > 0) {
            /* free the cache to make room, then try again */
            pool_trim_locked(p, 0);
            rc = cr__arena_take(bytes, &base, &reserved);
        }
        if (rc != 0)
            return rc;
        p->reserved_current += reserved;
        if (p->reserved_current > p->reserved_high)
            p->reserved_high = p->reserved_current;
    }
    cr__alloc_t a = {
        .base = base, .size = bytes, .reserved = reserved, .kind = CR__ALLOC_POOL, .pool = p};
    if (cr__alloc_insert(&a) != 0) {
        if (p->cache_count < p->cache_cap) {
            p->cache[p->cache_count++] = (block_t){base, reserved};
        } else {
            cr__arena_give(base, reserved);
            p->reserved_current -= reserved;
        }
        return CR_ENOMEM;
    }
    cr__obj_ref(&p->obj);
    p->used_current += reserved;
    if (p->used_current > p->used_high)
        p->used_high = p->used_current;
    *dptr = base;
    return 0;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, cr__pool_t *pool_or_null,
                            uint64_t pool_handle, CUstream hStream)
{
    cr__obj_t *owner = NULL;
    cr__pool_t *p = pool_or_null;
    uint64_t base;
    int rc;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    cr__stream_t *s = cr__stream_get(hStream);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!p) {
        p = cr__handle_get(pool_handle, CR__HMASK(CR__H_POOL), &owner, NULL);
        if (!p) {
            cr__stream_put(s);
            return CUDA_ERROR_INVALID_HANDLE;
        }
    }
    pthread_rwlock_wrlock(&cr__mem_lock);
    if (!pool_or_null && p->destroyed)
        rc = CR_EINVAL;
    else
        rc = pool_alloc_locked(p, bytesize, &base);
    pthread_rwlock_unlock(&cr__mem_lock);
    cr__obj_unref(owner);
    cr__stream_put(s);
    if (rc != 0)
        return cr__error_to_cuda(rc);
    *dptr = base;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    CR__ENTER();
    pthread_rwlock_rdlock(&cr__mem_lock);
    cr__pool_t *p = current_pool;
    cr__obj_ref(&p->obj);
    pthread_rwlock_unlock(&cr__mem_lock);
    CUresult rc = alloc_async(dptr, bytesize, p, 0, hStream);
    cr__obj_unref(&p->obj);
    return rc;
}

CUresult cr_emu_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream)
{
    CR__ENTER();
    return alloc_async(dptr, bytesize, NULL, (uint64_t)(uintptr_t)pool, hStream);
}

CUresult cr_emu_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    CR__ENTER();
    if (dptr == 0)
        return CUDA_ERROR_INVALID_VALUE;
    cr__stream_t *s = cr__stream_get(hStream);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    cr__op_t *op = cr__mem_release_op(dptr);
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (op) {
        if (cr__mem_mark_free(dptr, (1u << CR__ALLOC_USER) | (1u << CR__ALLOC_POOL)) != 0) {
            cr__op_free(op);
            rc = CUDA_ERROR_INVALID_VALUE;
        } else {
            /* a failed submission leaves the allocation marked: it is lost, not corrupted */
            rc = cr__stream_submit(s, op, NULL);
        }
    }
    cr__stream_put(s);
    return rc;
}

/* ---- pools ---- */

static CUresult check_location(const CUmemLocation *loc, CUmemAllocationType type)
{
    if (!loc)
        return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_NOT_SUPPORTED; /* host pools are not emulated */
    return loc->id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cr_emu_cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    CR__ENTER_INIT();
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = (CUmemoryPool)(uintptr_t)default_pool->handle;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CR__ENTER_INIT();
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_rwlock_rdlock(&cr__mem_lock);
    *pool = (CUmemoryPool)(uintptr_t)current_pool->handle;
    pthread_rwlock_unlock(&cr__mem_lock);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    cr__obj_t *owner;
    CUresult rc = CUDA_SUCCESS;
    CR__ENTER_INIT();
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    cr__pool_t *p = cr__handle_get((uint64_t)(uintptr_t)pool, CR__HMASK(CR__H_POOL), &owner, NULL);
    if (!p)
        return CUDA_ERROR_INVALID_HANDLE;
    cr__pool_t *old = NULL;
    pthread_rwlock_wrlock(&cr__mem_lock);
    if (p->destroyed) {
        rc = CUDA_ERROR_INVALID_HANDLE;
    } else {
        old = current_pool;
        current_pool = p; /* takes the lookup's reference */
        owner = NULL;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    cr__obj_unref(owner);
    if (old)
        cr__obj_unref(&old->obj);
    return rc;
}

CUresult cr_emu_cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location,
                                       CUmemAllocationType type)
{
    CR__ENTER_INIT();
    CUresult rc = check_location(location, type);
    if (rc != CUDA_SUCCESS)
        return rc;
    return cr_emu_cuDeviceGetDefaultMemPool(pool_out, 0);
}

CUresult cr_emu_cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location,
                                CUmemAllocationType type)
{
    CR__ENTER_INIT();
    CUresult rc = check_location(location, type);
    if (rc != CUDA_SUCCESS)
        return rc;
    return cr_emu_cuDeviceGetMemPool(pool, 0);
}

CUresult cr_emu_cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type,
                                CUmemoryPool pool)
{
    CR__ENTER_INIT();
    CUresult rc = check_location(location, type);
    if (rc != CUDA_SUCCESS)
        return rc;
    return cr_emu_cuDeviceSetMemPool(0, pool);
}

CUresult cr_emu_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    CR__ENTER();
    if (!pool || !poolProps)
        return CUDA_ERROR_INVALID_VALUE;
    if (poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (poolProps->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = check_location(&poolProps->location, poolProps->allocType);
    if (rc != CUDA_SUCCESS)
        return rc;
    cr__pool_t *p = pool_new();
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->max_size = poolProps->maxSize;
    *pool = (CUmemoryPool)(uintptr_t)p->handle;
    cr__obj_unref(&p->obj); /* the registry's reference keeps it */
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuMemPoolDestroy(CUmemoryPool pool)
{
    cr__obj_t *owner;
    cr__pool_t *old = NULL;
    CR__ENTER();
    uint64_t h = (uint64_t)(uintptr_t)pool;
    cr__pool_t *p = cr__handle_get(h, CR__HMASK(CR__H_POOL), &owner, NULL);
    if (!p)
        return CUDA_ERROR_INVALID_HANDLE;
    if (p->is_default) {
        cr__obj_unref(owner);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (cr__handle_del(h, CR__HMASK(CR__H_POOL)) != 0) {
        cr__obj_unref(owner);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_rwlock_wrlock(&cr__mem_lock);
    p->destroyed = 1;
    pool_trim_locked(p, 0);
    if (current_pool == p) {
        old = p;
        current_pool = default_pool;
        cr__obj_ref(&default_pool->obj);
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    /* Live allocations keep the pool object alive; freeing them returns their memory to the
     * arena directly. */
    if (old)
        cr__obj_unref(&old->obj);
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    cr__obj_t *owner;
    CUresult rc = CUDA_SUCCESS;
    CR__ENTER();
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    cr__pool_t *p = cr__handle_get((uint64_t)(uintptr_t)pool, CR__HMASK(CR__H_POOL), &owner, NULL);
    if (!p)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_rwlock_wrlock(&cr__mem_lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        p->reuse_follow_event = *(int *)value != 0;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        p->reuse_opportunistic = *(int *)value != 0;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        p->reuse_internal = *(int *)value != 0;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        p->release_threshold = *(cuuint64_t *)value;
        pool_trim_locked(p, p->release_threshold);
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            p->reserved_high = p->reserved_current;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            p->used_high = p->used_current;
        break;
    default:
        rc = CUDA_ERROR_INVALID_VALUE;
        break;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    cr__obj_unref(owner);
    return rc;
}

CUresult cr_emu_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    cr__obj_t *owner;
    CUresult rc = CUDA_SUCCESS;
    CR__ENTER();
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    cr__pool_t *p = cr__handle_get((uint64_t)(uintptr_t)pool, CR__HMASK(CR__H_POOL), &owner, NULL);
    if (!p)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_rwlock_rdlock(&cr__mem_lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        *(int *)value = p->reuse_follow_event;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        *(int *)value = p->reuse_opportunistic;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = p->reuse_internal;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        *(cuuint64_t *)value = p->release_threshold;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
        *(cuuint64_t *)value = p->reserved_current;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        *(cuuint64_t *)value = p->reserved_high;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        *(cuuint64_t *)value = p->used_current;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        *(cuuint64_t *)value = p->used_high;
        break;
    default:
        rc = CUDA_ERROR_INVALID_VALUE;
        break;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    cr__obj_unref(owner);
    return rc;
}

CUresult cr_emu_cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    cr__obj_t *owner;
    CR__ENTER();
    cr__pool_t *p = cr__handle_get((uint64_t)(uintptr_t)pool, CR__HMASK(CR__H_POOL), &owner, NULL);
    if (!p)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_rwlock_wrlock(&cr__mem_lock);
    pool_trim_locked(p, minBytesToKeep);
    pthread_rwlock_unlock(&cr__mem_lock);
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}
