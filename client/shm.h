/* Memory shared with a server on the same host (shm.c). */
#ifndef CR_SHM_H
#define CR_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"

#define CR_SHM_STAGING_SIZE ((size_t)16 << 20) /* one staging area */
#define CR_SHM_SLOT ((size_t)2 << 20)          /* a staged copy's chunk; areas hold several */

/* cuInit's step once the server said hello: offers shared memory to the server when the
 * address is a Unix socket (and CUDA_REMOTE_SHM is not 0) by attaching the first staging
 * area. */
void cr_shm_connected(const cr_client_t *cl);
int cr_shm_enabled(void);
/* Page-locked host memory the server maps too, at the host window when it can be (then the
 * device reaches it: cr_shm_device_ptr); NULL when there is none to be had (the caller
 * falls back to memory of its own). */
void *cr_shm_alloc(size_t size);
/* Frees memory from cr_shm_alloc once the server let go of it; 0 if p is not such. */
int cr_shm_free(void *p);
/* 1 when the device reaches p (page-locked memory at the server's host window): its
 * device address, which with unified addressing is p itself. */
int cr_shm_device_ptr(const void *p, uint64_t *device);
/* 1 when [p, p + len) lies in one region the device reaches (as device memory: memsets
 * and device-to-device copies may name it). */
int cr_shm_device_contains(uint64_t p, size_t len);
/* 1 when [p, p + len) lies in one region shared with the server: its id and p's offset. */
int cr_shm_find(const void *p, size_t len, uint64_t *region, uint64_t *offset);

/* A staging area for copies of pageable memory, held by one copy at a time. */
typedef struct {
    uint64_t region;
    uint8_t *base;
    size_t size;
    int busy;
} cr_shm_staging_t;
/* A free staging area (made on demand, a few at most), or NULL: use the socket. */
cr_shm_staging_t *cr_shm_staging_take(void);
void cr_shm_staging_give(cr_shm_staging_t *st);

#endif
