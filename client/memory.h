/* Memory in the client (memory.c): the map of device ranges the server handed out, the
 * device address windows, and what host memory is page-locked. */
#ifndef CR_MEMORY_H
#define CR_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"

enum { CR_MEM_DEVICE = 1, CR_MEM_HOST_PINNED = 2, CR_MEM_HOST_REGISTERED = 3 };

/* cuInit's step once the server said hello: reserves the server's device address windows
 * in this process so host memory never lands there. */
void cr_memory_connected(const cr_client_t *cl);

/* Records device ranges the server handed out, so that copies can infer their direction
 * and pointer attributes are answered locally. */
void cr_devmap_add(CUdeviceptr p, size_t size);
void cr_devmap_remove(CUdeviceptr p);
/* Removes the range starting at p; returns its size (0 if there was none). */
size_t cr_devmap_take(CUdeviceptr p);
/* Forgets every device allocation (the primary context was reset). */
void cr_memory_forget_device_allocations(void);
/* 1 when [p, p + len) lies inside one known device allocation or global, or in mappings of
 * the virtual-memory API one after another. */
int cr_devmap_contains(CUdeviceptr p, size_t len);
/* 1 when p lies in device memory (an allocation, a global, or a device address window). */
int cr_is_device_ptr(uint64_t p);
/* The memory type of a host pointer: CR_MEM_HOST_PINNED/REGISTERED, or 0 for pageable. */
int cr_host_mem_type(const void *p, uint64_t *base, uint64_t *size, unsigned *flags);

#endif
