/* Reused copy buffers (buffers.c): bulk payloads of requests and page-locked staging
 * memory, cached by size class. */
#ifndef CR_SERVER_BUFFERS_H
#define CR_SERVER_BUFFERS_H

#include <stddef.h>
#include "backend.h"

/* A plain buffer for a request's bulk payload (cached when it is one CR_COPY_CHUNK). */
void *cr_bulk_get(size_t size);
void cr_bulk_put(void *p, size_t size);

/* A page-locked staging buffer of at least `size` bytes, from a size-class cache. */
typedef struct {
    void *ptr;
    size_t cap;
    int cls; /* size class, -1 when not cached */
} cr_staging_t;
CUresult cr_staging_get(const cr_backend_t *b, size_t size, cr_staging_t *out);
/* Returns it to the cache, or frees it when the cache is full (any thread bound to the
 * backend). */
void cr_staging_put(const cr_backend_t *b, cr_staging_t *st);

#endif
