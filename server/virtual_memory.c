/* What a session holds of the virtual-memory API (session.h): the address ranges it
 * reserved, the physical memory it created (charged to its tenant's quota from cuMemCreate
 * until the memory is really gone: its handle released and its last mapping unmapped), and
 * where that memory is mapped. A client names physical memory by an id of its session,
 * never by the backend's handle, and reaches only the ranges it reserved; mapped ranges are
 * device memory it owns (cr_session_owns), adjacent mappings one span. */
#include <stdlib.h>

#include "backend.h"
#include "log.h"
#include "session.h"
#include "session_private.h"

#define FIRST_PHYSICAL_ID 0x20000 /* well above 0: a zero handle stays invalid */

typedef struct {
    uint64_t backend; /* CUmemGenericAllocationHandle of the backend */
    uint64_t size;    /* bytes charged */
    unsigned refs;    /* the client's handle: cuMemCreate and each retain, less releases */
    unsigned mappings;
} physical_t;

static physical_t *physical_locked(cr_session_t *s, uint64_t id)
{
    uint64_t v;
    return cr_idmap_get(&s->vmm_physical, id, &v) ? (physical_t *)(uintptr_t)v : NULL;
}

/* Forgets physical memory nothing holds any more and gives its tenant the bytes back.
 * Caller holds s->lock. */
static void drop_locked(cr_session_t *s, uint64_t id, physical_t *p)
{
    if (p->refs || p->mappings)
        return;
    cr_idmap_remove(&s->vmm_physical, id, NULL);
    cr_session_uncharge(s, p->size);
    free(p);
}

int cr_session_vmm_reserve(cr_session_t *s, CUdeviceptr base, uint64_t size)
{
    pthread_mutex_lock(&s->lock);
    int err = cr_rangemap_add(&s->vmm_reserved, base, size, 0);
    pthread_mutex_unlock(&s->lock);
    return err;
}

int cr_session_vmm_reserved(cr_session_t *s, CUdeviceptr p, uint64_t size)
{
    pthread_mutex_lock(&s->lock);
    int in = size && cr_rangemap_contains(&s->vmm_reserved, p, size);
    pthread_mutex_unlock(&s->lock);
    return in;
}

int cr_session_vmm_is_reservation(cr_session_t *s, CUdeviceptr base, uint64_t size)
{
    pthread_mutex_lock(&s->lock);
    const cr_range_t *r = cr_rangemap_find(&s->vmm_reserved, base);
    int exact = r && r->start == base && r->size == size;
    pthread_mutex_unlock(&s->lock);
    return exact;
}

void cr_session_vmm_unreserve(cr_session_t *s, CUdeviceptr base)
{
    pthread_mutex_lock(&s->lock);
    cr_rangemap_remove(&s->vmm_reserved, base, NULL);
    pthread_mutex_unlock(&s->lock);
}

uint64_t cr_session_vmm_add_physical(cr_session_t *s, uint64_t backend, uint64_t size)
{
    physical_t *p = calloc(1, sizeof *p);
    if (!p)
        return 0;
    *p = (physical_t){backend, size, 1, 0};
    pthread_mutex_lock(&s->lock);
    if (s->next_physical_id < FIRST_PHYSICAL_ID)
        s->next_physical_id = FIRST_PHYSICAL_ID;
    uint64_t id = s->next_physical_id++;
    if (cr_idmap_put(&s->vmm_physical, id, (uint64_t)(uintptr_t)p) != 0) {
        free(p);
        id = 0;
    }
    pthread_mutex_unlock(&s->lock);
    return id;
}

int cr_session_vmm_physical(cr_session_t *s, uint64_t id, uint64_t *backend, uint64_t *size)
{
    pthread_mutex_lock(&s->lock);
    physical_t *p = physical_locked(s, id);
    int found = p && p->refs > 0;
    if (found) {
        *backend = p->backend;
        if (size)
            *size = p->size;
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

void cr_session_vmm_release(cr_session_t *s, uint64_t id)
{
    pthread_mutex_lock(&s->lock);
    physical_t *p = physical_locked(s, id);
    if (p && p->refs > 0) {
        p->refs--;
        drop_locked(s, id, p);
    }
    pthread_mutex_unlock(&s->lock);
}

uint64_t cr_session_vmm_retain(cr_session_t *s, CUdeviceptr addr)
{
    pthread_mutex_lock(&s->lock);
    const cr_range_t *r = cr_rangemap_find(&s->vmm_mapped, addr);
    uint64_t id = r ? r->value : 0;
    physical_t *p = id ? physical_locked(s, id) : NULL;
    if (p)
        p->refs++;
    pthread_mutex_unlock(&s->lock);
    return p ? id : 0;
}

int cr_session_vmm_map(cr_session_t *s, CUdeviceptr base, uint64_t size, uint64_t id)
{
    pthread_mutex_lock(&s->lock);
    physical_t *p = physical_locked(s, id);
    int err = p ? cr_rangemap_add(&s->vmm_mapped, base, size, id) : -1;
    if (err == 0)
        p->mappings++;
    pthread_mutex_unlock(&s->lock);
    return err;
}

int cr_session_vmm_mapped(cr_session_t *s, CUdeviceptr p, uint64_t len)
{
    pthread_mutex_lock(&s->lock);
    int in = cr_rangemap_covers(&s->vmm_mapped, p, len);
    pthread_mutex_unlock(&s->lock);
    return in;
}

int cr_session_vmm_unmappable(cr_session_t *s, CUdeviceptr base, uint64_t size)
{
    pthread_mutex_lock(&s->lock);
    const cr_range_t *first = cr_rangemap_find(&s->vmm_mapped, base);
    int whole = first && first->start == base && cr_rangemap_covers(&s->vmm_mapped, base, size);
    const cr_range_t *last = whole ? cr_rangemap_find(&s->vmm_mapped, base + size - 1) : NULL;
    whole = whole && last && last->start + last->size == base + size;
    pthread_mutex_unlock(&s->lock);
    return whole;
}

void cr_session_vmm_unmap(cr_session_t *s, CUdeviceptr base, uint64_t size)
{
    pthread_mutex_lock(&s->lock);
    for (uint64_t p = base; p < base + size;) {
        cr_range_t r;
        const cr_range_t *f = cr_rangemap_find(&s->vmm_mapped, p);
        if (!f || !cr_rangemap_remove(&s->vmm_mapped, f->start, &r))
            break;
        physical_t *ph = physical_locked(s, r.value);
        if (ph) {
            ph->mappings--;
            drop_locked(s, r.value, ph);
        }
        p = r.start + r.size;
    }
    pthread_mutex_unlock(&s->lock);
}

void cr_session_vmm_release_all(cr_session_t *s)
{
    const cr_driver_t *d = &s->backend->d;
    pthread_mutex_lock(&s->lock);
    cr_rangemap_t mapped = s->vmm_mapped, reserved = s->vmm_reserved;
    cr_idmap_t physical = s->vmm_physical;
    s->vmm_mapped = s->vmm_reserved = (cr_rangemap_t)CR_RANGEMAP_INIT;
    s->vmm_physical = (cr_idmap_t){0};
    pthread_mutex_unlock(&s->lock);
    /* in the order a program would: unmap, release, give the addresses back */
    for (size_t i = 0; i < mapped.count; i++)
        if (d->cuMemUnmap)
            d->cuMemUnmap(mapped.ranges[i].start, mapped.ranges[i].size);
    size_t pos = 0;
    uint64_t id, v;
    while (cr_idmap_next(&physical, &pos, &id, &v)) {
        physical_t *p = (physical_t *)(uintptr_t)v;
        for (unsigned k = 0; k < p->refs && d->cuMemRelease; k++)
            d->cuMemRelease(p->backend);
        cr_session_uncharge(s, p->size);
        free(p);
    }
    for (size_t i = 0; i < reserved.count; i++)
        if (d->cuMemAddressFree)
            d->cuMemAddressFree(reserved.ranges[i].start, reserved.ranges[i].size);
    cr_rangemap_free(&mapped);
    cr_rangemap_free(&reserved);
    cr_idmap_free(&physical);
}
