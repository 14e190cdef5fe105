/* Reused buffers for copy payloads.
 *
 * A fresh multi-megabyte buffer costs a page fault per page and the kernel's zeroing of
 * each, which on this path costs more than the copy itself. Copies therefore take their
 * buffers from two small caches: plain buffers of one chunk for host-to-device payloads
 * read off the socket, and page-locked staging buffers (from the backend, so that device-
 * to-host copies into them are asynchronous) in power-of-two size classes. Each cache
 * keeps a bounded number of bytes; what goes beyond is freed. */
#include <pthread.h>
#include <stdlib.h>

#include "backend.h"
#include "buffers.h"
#include "protocol.h"

#define STAGING_MIN ((size_t)1 << 20)
#define STAGING_CLASSES 12                    /* 1 MiB .. 2 GiB */
#define STAGING_CACHE_MAX ((size_t)512 << 20) /* bytes kept idle */
#define BULK_CACHE_MAX 8                      /* chunk buffers kept idle */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *bulk_free[BULK_CACHE_MAX];
static int bulk_count;

typedef struct idle_s {
    struct idle_s *next;
    void *ptr;
} idle_t;

static idle_t *staging_free[STAGING_CLASSES];
static size_t staging_cached;

void *cr_bulk_get(size_t size)
{
    if (size != CR_COPY_CHUNK)
        return malloc(size ? size : 1);
    pthread_mutex_lock(&lock);
    void *p = bulk_count ? bulk_free[--bulk_count] : NULL;
    pthread_mutex_unlock(&lock);
    return p ? p : malloc(size);
}

void cr_bulk_put(void *p, size_t size)
{
    if (!p)
        return;
    if (size == CR_COPY_CHUNK) {
        pthread_mutex_lock(&lock);
        if (bulk_count < BULK_CACHE_MAX) {
            bulk_free[bulk_count++] = p;
            p = NULL;
        }
        pthread_mutex_unlock(&lock);
    }
    free(p);
}

static int staging_class(size_t size, size_t *cap)
{
    size_t c = STAGING_MIN;
    int i = 0;
    while (c < size && i < STAGING_CLASSES - 1) {
        c <<= 1;
        i++;
    }
    *cap = c;
    return c >= size ? i : -1;
}

CUresult cr_staging_get(const cr_backend_t *b, size_t size, cr_staging_t *out)
{
    size_t cap;
    int cls = staging_class(size, &cap);
    if (cls < 0) { /* beyond the classes: exact, not cached */
        out->cap = size;
        out->cls = -1;
        return b->d.cuMemAllocHost_v2(&out->ptr, size);
    }
    pthread_mutex_lock(&lock);
    idle_t *e = staging_free[cls];
    if (e) {
        staging_free[cls] = e->next;
        staging_cached -= cap;
    }
    pthread_mutex_unlock(&lock);
    out->cap = cap;
    out->cls = cls;
    if (e) {
        out->ptr = e->ptr;
        free(e);
        return CUDA_SUCCESS;
    }
    return b->d.cuMemAllocHost_v2(&out->ptr, cap);
}

void cr_staging_put(const cr_backend_t *b, cr_staging_t *st)
{
    if (!st->ptr)
        return;
    idle_t *e = st->cls >= 0 ? malloc(sizeof *e) : NULL;
    if (e) {
        pthread_mutex_lock(&lock);
        if (staging_cached + st->cap <= STAGING_CACHE_MAX) {
            e->ptr = st->ptr;
            e->next = staging_free[st->cls];
            staging_free[st->cls] = e;
            staging_cached += st->cap;
            st->ptr = NULL;
        }
        pthread_mutex_unlock(&lock);
    }
    if (st->ptr) {
        free(e);
        b->d.cuMemFreeHost(st->ptr);
        st->ptr = NULL;
    }
}
