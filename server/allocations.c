/* What a session holds of the device's memory: its allocations (charged to its tenant's
 * quota before they are made) and the globals of its code. Every device address a client
 * passes is checked against these: a session may only reach its own memory. */
#include "log.h"
#include "session.h"
#include "session_private.h"
#include "tenants.h"

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
void cr_session_untrack_code_locked(cr_session_t *s, uint64_t owner)
{
    for (size_t i = 0; i < s->code_ranges.count;)
        if (s->code_ranges.ranges[i].value == owner)
            cr_rangemap_remove(&s->code_ranges, s->code_ranges.ranges[i].start, NULL);
        else
            i++;
}

void cr_session_track_host(cr_session_t *s, CUdeviceptr p, uint64_t size)
{
    pthread_mutex_lock(&s->lock);
    if (cr_rangemap_add(&s->host_mapped, p, size, 1) != 0) /* then it is not the session's */
        CR_WARN("session %llu: out of memory: mapped host memory at %#llx not tracked",
                (unsigned long long)s->id, (unsigned long long)p);
    pthread_mutex_unlock(&s->lock);
}

void cr_session_untrack_host(cr_session_t *s, CUdeviceptr p)
{
    pthread_mutex_lock(&s->lock);
    cr_rangemap_remove(&s->host_mapped, p, NULL);
    pthread_mutex_unlock(&s->lock);
}

int cr_session_owns(cr_session_t *s, CUdeviceptr p, uint64_t len)
{
    pthread_mutex_lock(&s->lock);
    int owned = cr_rangemap_contains(&s->allocations, p, len) ||
                cr_rangemap_contains(&s->code_ranges, p, len) ||
                (s->vmm_mapped.count && cr_rangemap_covers(&s->vmm_mapped, p, len)) ||
                (s->host_mapped.count && cr_rangemap_contains(&s->host_mapped, p, len));
    pthread_mutex_unlock(&s->lock);
    return owned;
}
