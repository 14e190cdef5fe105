/* Handle registry of the emulated device.
 *
 * Handles are tokens, not pointers: 0xE3 in the top byte, the handle type in the next, and a
 * 48-bit sequence number that is never reused. So a stale or forged handle can never reach a
 * freed or foreign object: it is simply not in the registry (CUDA_ERROR_INVALID_HANDLE).
 * The registry is a chained hash table under one mutex; objects carry a reference count. */
#include "emu.h"

#include <stdlib.h>

#include "error.h"

#define HANDLE_TAG ((uint64_t)0xE3 << 56)

typedef struct entry_s {
    struct entry_s *next;
    uint64_t handle;
    cr__htype_t type;
    cr__obj_t *owner;
    void *ptr;
} entry_t;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t **buckets;
static size_t bucket_count; /* power of two */
static size_t entry_count;
static uint64_t next_seq = 1;

void cr__obj_init(cr__obj_t *obj, void (*release)(cr__obj_t *))
{
    atomic_init(&obj->refs, 1);
    obj->release = release;
}

void cr__obj_ref(cr__obj_t *obj)
{
    atomic_fetch_add_explicit(&obj->refs, 1, memory_order_relaxed);
}

void cr__obj_unref(cr__obj_t *obj)
{
    if (obj && atomic_fetch_sub_explicit(&obj->refs, 1, memory_order_acq_rel) == 1 && obj->release)
        obj->release(obj);
}

static size_t bucket_of(uint64_t handle, size_t count)
{
    uint64_t h = handle * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (count - 1);
}

static int grow(void)
{
    size_t count = bucket_count ? bucket_count * 2 : 256;
    entry_t **nb = calloc(count, sizeof *nb);
    if (!nb)
        return CR_ENOMEM;
    for (size_t i = 0; i < bucket_count; i++) {
        entry_t *e = buckets[i];
        while (e) {
            entry_t *next = e->next;
            size_t b = bucket_of(e->handle, count);
            e->next = nb[b];
            nb[b] = e;
            e = next;
        }
    }
    free(buckets);
    buckets = nb;
    bucket_count = count;
    return 0;
}

uint64_t cr__handle_new(cr__htype_t type, cr__obj_t *owner, void *ptr)
{
    uint64_t handle = 0;
    entry_t *e = malloc(sizeof *e);
    if (!e)
        return 0;
    pthread_mutex_lock(&registry_lock);
    if (entry_count >= bucket_count && grow() != 0) {
        pthread_mutex_unlock(&registry_lock);
        free(e);
        return 0;
    }
    handle = HANDLE_TAG | ((uint64_t)type << 48) | (next_seq++ & 0xFFFFFFFFFFFFull);
    e->handle = handle;
    e->type = type;
    e->owner = owner;
    e->ptr = ptr;
    cr__obj_ref(owner);
    size_t b = bucket_of(handle, bucket_count);
    e->next = buckets[b];
    buckets[b] = e;
    entry_count++;
    pthread_mutex_unlock(&registry_lock);
    return handle;
}

void *cr__handle_get(uint64_t handle, unsigned mask, cr__obj_t **owner, cr__htype_t *type)
{
    void *ptr = NULL;
    if ((handle & ((uint64_t)0xFF << 56)) != HANDLE_TAG)
        return NULL;
    pthread_mutex_lock(&registry_lock);
    if (bucket_count) {
        for (entry_t *e = buckets[bucket_of(handle, bucket_count)]; e; e = e->next) {
            if (e->handle != handle)
                continue;
            if (mask & CR__HMASK(e->type)) {
                ptr = e->ptr;
                cr__obj_ref(e->owner);
                *owner = e->owner;
                if (type)
                    *type = e->type;
            }
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return ptr;
}

int cr__handle_del(uint64_t handle, unsigned mask)
{
    entry_t *found = NULL;
    if ((handle & ((uint64_t)0xFF << 56)) != HANDLE_TAG)
        return -1;
    pthread_mutex_lock(&registry_lock);
    if (bucket_count) {
        entry_t **link = &buckets[bucket_of(handle, bucket_count)];
        for (; *link; link = &(*link)->next) {
            if ((*link)->handle != handle)
                continue;
            if (mask & CR__HMASK((*link)->type)) {
                found = *link;
                *link = found->next;
                entry_count--;
            }
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (!found)
        return -1;
    cr__obj_unref(found->owner);
    free(found);
    return 0;
}
