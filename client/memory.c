/* Memory in the client: the map of device ranges the server handed out (so that unified
 * copies infer their direction and pointer attributes are answered locally), device
 * address windows reserved in this process so host memory never lands on a device
 * address, device allocation calls, and page-locked host memory, which is local.
 *
 * Threads: any application thread; cr_memory_connected runs once in cuInit. Nothing here
 * waits but for the map's lock and for the replies of the calls it makes. */
#include "memory.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "context.h"
#include "error.h"
#include "log.h"
#include "protocol.h"
#include "rangemap.h"
#include "request.h"
#include "shm.h"

static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_rangemap_t device_ranges = CR_RANGEMAP_INIT; /* value: buffer id */
static cr_rangemap_t host_ranges = CR_RANGEMAP_INIT;   /* value: flags | kind << 32 */
static cr_device_window_t windows[CR_MAX_DEVICE_WINDOWS];
static int window_count;
static uint64_t next_buffer_id = 1;

static void reserve_window(uint64_t base, uint64_t size)
{
    if (!size || window_count == CR_MAX_DEVICE_WINDOWS)
        return;
    void *p = mmap((void *)(uintptr_t)base, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED || p != (void *)(uintptr_t)base) {
        if (p != MAP_FAILED)
            munmap(p, size);
        /* something of the program already lives there: copies still work, but a host
         * address inside the window would be taken for a device one */
        CR_WARN("cannot reserve the device address range %#llx-%#llx in this process (%s)",
                (unsigned long long)base, (unsigned long long)(base + size), strerror(errno));
    }
    pthread_mutex_lock(&map_lock);
    windows[window_count].base = base;
    windows[window_count].size = size;
    window_count++;
    pthread_mutex_unlock(&map_lock);
}

void cr_memory_connected(const cr_client_t *cl)
{
    for (int i = 0; i < cl->window_count; i++)
        reserve_window(cl->windows[i].base, cl->windows[i].size);
}

#define MAPPED (1ull << 63) /* in a range's value: a mapping of the virtual-memory API */

static void devmap_add(CUdeviceptr p, size_t size, uint64_t flags)
{
    pthread_mutex_lock(&map_lock);
    /* the server just handed this range out: whatever the map still says of it is stale */
    if (cr_rangemap_remove_overlapping(&device_ranges, p, size ? size : 1))
        CR_DEBUG("device range %#llx+%zu replaces stale ones", (unsigned long long)p, size);
    cr_rangemap_add(&device_ranges, p, size ? size : 1, next_buffer_id++ | flags);
    pthread_mutex_unlock(&map_lock);
}

void cr_devmap_add(CUdeviceptr p, size_t size)
{
    devmap_add(p, size, 0);
}

void cr_devmap_remove(CUdeviceptr p)
{
    cr_devmap_take(p);
}

size_t cr_devmap_take(CUdeviceptr p)
{
    cr_range_t r = {0, 0, 0};
    pthread_mutex_lock(&map_lock);
    cr_rangemap_remove(&device_ranges, p, &r);
    pthread_mutex_unlock(&map_lock);
    return (size_t)r.size;
}

void cr_memory_forget_device_allocations(void)
{
    pthread_mutex_lock(&map_lock);
    cr_rangemap_free(&device_ranges);
    pthread_mutex_unlock(&map_lock);
}

int cr_devmap_contains(CUdeviceptr p, size_t len)
{
    pthread_mutex_lock(&map_lock);
    int inside = cr_rangemap_contains(&device_ranges, p, len);
    /* mappings of the virtual-memory API one after another are one span */
    const cr_range_t *r = inside ? NULL : cr_rangemap_find(&device_ranges, p);
    while (r && (r->value & MAPPED)) {
        uint64_t end = r->start + r->size;
        if (p + len <= end) {
            inside = 1;
            break;
        }
        r = cr_rangemap_find(&device_ranges, end);
        r = r && r->start == end ? r : NULL;
    }
    pthread_mutex_unlock(&map_lock);
    /* page-locked memory the device reaches (at the host window) is device memory too */
    return inside || cr_shm_device_contains(p, len);
}

int cr_is_device_ptr(uint64_t p)
{
    pthread_mutex_lock(&map_lock);
    int found = cr_rangemap_find(&device_ranges, p) != NULL;
    for (int i = 0; !found && i < window_count; i++)
        found = p - windows[i].base < windows[i].size;
    pthread_mutex_unlock(&map_lock);
    return found;
}

int cr_host_mem_type(const void *p, uint64_t *base, uint64_t *size, unsigned *flags)
{
    pthread_mutex_lock(&map_lock);
    const cr_range_t *r = cr_rangemap_find(&host_ranges, (uint64_t)(uintptr_t)p);
    int type = 0;
    if (r) {
        type = (int)(r->value >> 32);
        if (base)
            *base = r->start;
        if (size)
            *size = r->size;
        if (flags)
            *flags = (unsigned)r->value;
    }
    pthread_mutex_unlock(&map_lock);
    return type;
}

/* --- device allocations -------------------------------------------------------------------- */

CUresult cr_hand_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    CUresult r = cr_ctx_require();
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    r = cr_remote_cuMemAlloc_v2(dptr, bytesize);
    if (r == CUDA_SUCCESS)
        cr_devmap_add(*dptr, bytesize);
    return r;
}

CUresult cr_hand_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                    unsigned int element_size)
{
    CUresult r = cr_ctx_require();
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || !pitch)
        return CUDA_ERROR_INVALID_VALUE;
    r = cr_remote_cuMemAllocPitch_v2(dptr, pitch, width, height, element_size);
    if (r == CUDA_SUCCESS)
        cr_devmap_add(*dptr, *pitch * height);
    return r;
}

CUresult cr_hand_cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult r = cr_ctx_require();
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr) /* cudart hands cudaFree(NULL) down as is, and it must succeed */
        return CUDA_SUCCESS;
    /* forget it first: once freed, another thread may be handed the same range at once */
    size_t size = cr_devmap_take(dptr);
    r = cr_remote_cuMemFree_v2(dptr);
    if (r != CUDA_SUCCESS && size)
        cr_devmap_add(dptr, size);
    return r;
}

/* The virtual-memory API: a mapped range is device memory as the stub's map knows it (copy
 * directions, pointer attributes), one range per mapping. */
CUresult cr_hand_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    CUresult r = cr_remote_cuMemMap(ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS)
        devmap_add(ptr, size, MAPPED);
    return r;
}

CUresult cr_hand_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult r = cr_remote_cuMemUnmap(ptr, size);
    for (CUdeviceptr p = ptr; r == CUDA_SUCCESS && p < ptr + size;) {
        size_t one = cr_devmap_take(p); /* the mappings it unmapped, one after another */
        if (!one)
            break;
        p += one;
    }
    return r;
}

CUresult cr_hand_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cr_remote_cuMemAllocAsync(dptr, bytesize, stream);
    if (r == CUDA_SUCCESS)
        cr_devmap_add(*dptr, bytesize);
    return r;
}

CUresult cr_hand_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream stream)
{
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cr_remote_cuMemAllocFromPoolAsync(dptr, bytesize, pool, stream);
    if (r == CUDA_SUCCESS)
        cr_devmap_add(*dptr, bytesize);
    return r;
}

CUresult cr_hand_cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    /* the address stays valid on the device until the stream reaches the free; the client
     * forgets it first, since another thread may be handed the same range next */
    size_t size = cr_devmap_take(dptr);
    CUresult r = cr_remote_cuMemFreeAsync(dptr, stream);
    if (r != CUDA_SUCCESS && size)
        cr_devmap_add(dptr, size);
    return r;
}

CUresult cr_hand_cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&map_lock);
    const cr_range_t *r = cr_rangemap_find(&device_ranges, dptr);
    cr_range_t copy = r ? *r : (cr_range_t){0, 0, 0};
    pthread_mutex_unlock(&map_lock);
    if (!r)
        return CUDA_ERROR_NOT_FOUND;
    if (base)
        *base = copy.start;
    if (size)
        *size = copy.size;
    return CUDA_SUCCESS;
}

/* --- page-locked host memory: local to the client --------------------------------------- */

static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pp || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* shared with a server on this host when possible: copies then need no bytes on the
     * socket */
    void *p = cr_shm_alloc(size);
    if (!p)
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&map_lock);
    int err = cr_rangemap_add(&host_ranges, (uint64_t)(uintptr_t)p, size,
                              (uint64_t)CR_MEM_HOST_PINNED << 32 | flags);
    pthread_mutex_unlock(&map_lock);
    if (err) {
        if (!cr_shm_free(p))
            munmap(p, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuMemAllocHost_v2(void **pp, size_t size)
{
    return host_alloc(pp, size, 0);
}

CUresult cr_hand_cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
    if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    return host_alloc(pp, size, flags);
}

CUresult cr_hand_cuMemFreeHost(void *p)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    cr_range_t r;
    pthread_mutex_lock(&map_lock);
    const cr_range_t *found = cr_rangemap_find(&host_ranges, (uint64_t)(uintptr_t)p);
    int ok = found && found->start == (uint64_t)(uintptr_t)p &&
             (found->value >> 32) == CR_MEM_HOST_PINNED &&
             cr_rangemap_remove(&host_ranges, (uint64_t)(uintptr_t)p, &r);
    pthread_mutex_unlock(&map_lock);
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    if (!cr_shm_free(p))
        munmap(p, r.size);
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!p || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & (CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY))
        return cr_unsupported("cuMemHostRegister with IOMEMORY or READ_ONLY");
    pthread_mutex_lock(&map_lock);
    int err = cr_rangemap_add(&host_ranges, (uint64_t)(uintptr_t)p, size,
                              (uint64_t)CR_MEM_HOST_REGISTERED << 32 | flags);
    pthread_mutex_unlock(&map_lock);
    return err == CR_EEXISTS ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
           : err             ? CUDA_ERROR_OUT_OF_MEMORY
                             : CUDA_SUCCESS;
}

CUresult cr_hand_cuMemHostUnregister(void *p)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&map_lock);
    const cr_range_t *found = cr_rangemap_find(&host_ranges, (uint64_t)(uintptr_t)p);
    int ok = found && found->start == (uint64_t)(uintptr_t)p &&
             (found->value >> 32) == CR_MEM_HOST_REGISTERED &&
             cr_rangemap_remove(&host_ranges, (uint64_t)(uintptr_t)p, NULL);
    pthread_mutex_unlock(&map_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

CUresult cr_hand_cuMemHostGetFlags(unsigned int *flags, void *p)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned f;
    if (!cr_host_mem_type(p, NULL, NULL, &f))
        return CUDA_ERROR_INVALID_VALUE;
    *flags = f;
    return CUDA_SUCCESS;
}

/* Page-locked memory at the server's host window is the device's at its own address
 * (shm.c); other page-locked memory is this process's alone, which no device reaches. */
CUresult cr_hand_cuMemHostGetDevicePointer_v2(CUdeviceptr *dptr, void *p, unsigned int flags)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!dptr || !p || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t device;
    if (cr_shm_device_ptr(p, &device)) {
        *dptr = (CUdeviceptr)device;
        return CUDA_SUCCESS;
    }
    int kind = cr_host_mem_type(p, NULL, NULL, NULL);
    if (!kind)
        return CUDA_ERROR_INVALID_VALUE; /* not page-locked: the driver says the same */
    if (kind == CR_MEM_HOST_REGISTERED)
        return cr_unsupported("cuMemHostGetDevicePointer of memory registered with "
                              "cuMemHostRegister (the program's own pages, which the server's "
                              "device cannot reach; memory from cuMemHostAlloc can be, with "
                              "the server on this host)");
    return cr_unsupported("cuMemHostGetDevicePointer without shared memory (the server is on "
                          "another host, or its host window is unavailable here): the device "
                          "cannot reach this process's memory");
}

/* --- pointer attributes ------------------------------------------------------------------- */

typedef struct {
    int kind; /* 0 unknown, CR_MEM_DEVICE, CR_MEM_HOST_* */
    uint64_t base, size, id;
    unsigned flags;
} pointer_info_t;

static pointer_info_t pointer_info(CUdeviceptr ptr)
{
    pointer_info_t info = {0};
    pthread_mutex_lock(&map_lock);
    const cr_range_t *r = cr_rangemap_find(&device_ranges, ptr);
    if (r) {
        info = (pointer_info_t){CR_MEM_DEVICE, r->start, r->size, r->value & ~MAPPED, 0};
    } else if ((r = cr_rangemap_find(&host_ranges, ptr)) != NULL) {
        info = (pointer_info_t){(int)(r->value >> 32), r->start, r->size,
                                r->start /* stable per buffer */, (unsigned)r->value};
    }
    pthread_mutex_unlock(&map_lock);
    return info;
}

/* Writes one attribute. CUDA_ERROR_INVALID_VALUE when the pointer is unknown to us. */
static CUresult pointer_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr,
                                  const pointer_info_t *info)
{
    int device = info->kind == CR_MEM_DEVICE;
    CUcontext ctx = cr_ctx_current();
    if (!ctx)
        cr_ctx_primary(&ctx, 0);
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = info->kind ? ctx : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = device ? CU_MEMORYTYPE_DEVICE : info->kind ? CU_MEMORYTYPE_HOST : 0;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (info->kind == 0 || (attr == CU_POINTER_ATTRIBUTE_HOST_POINTER && device))
            return CUDA_ERROR_INVALID_VALUE;
        *(CUdeviceptr *)data = ptr;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = info->kind != 0;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *(unsigned long long *)data = info->id;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        *(int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = info->kind ? cr_ctx_device(ctx) : -2;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(CUdeviceptr *)data = info->base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = info->size;
        break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned long long *)data = info->kind ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
                                                 : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
        break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(CUmemoryPool *)data = NULL;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return info->kind || attr == CU_POINTER_ATTRIBUTE_MEMORY_TYPE ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    pointer_info_t info = pointer_info(ptr);
    if (!info.kind)
        return CUDA_ERROR_INVALID_VALUE; /* not memory the driver knows */
    return pointer_attribute(data, attr, ptr, &info);
}

/* The size of an attribute's value, for the zero cuPointerGetAttributes writes where an
 * attribute does not apply. */
static size_t attribute_size(CUpointer_attribute attr)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        return 8;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
        return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
    default:
        return 4; /* memory type, booleans, the device ordinal */
    }
}

CUresult cr_hand_cuPointerGetAttributes(unsigned int count, CUpointer_attribute *attrs, void **data,
                                        CUdeviceptr ptr)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!attrs || !data)
        return CUDA_ERROR_INVALID_VALUE;
    /* unlike the singular call, nothing here is an error: what does not apply reads zero */
    pointer_info_t info = pointer_info(ptr);
    for (unsigned i = 0; i < count; i++) {
        if (!data[i])
            continue;
        if (pointer_attribute(data[i], attrs[i], ptr, &info) != CUDA_SUCCESS)
            memset(data[i], 0, attribute_size(attrs[i]));
    }
    return CUDA_SUCCESS;
}

/* --- managed memory ------------------------------------------------------------------------
 * None is handed out (cuMemAllocManaged is not remoted), so every range given to these is
 * memory that is not managed, which NVIDIA's driver refuses with CUDA_ERROR_INVALID_VALUE
 * (seen on an H100 for device, page-locked and registered memory alike, also for a count
 * of 0). Libraries that prefetch whatever they are given carry on as they do natively. */

static CUresult not_managed(void)
{
    CUresult r = cr_ctx_require();
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuMemPrefetchAsync(CUdeviceptr p, size_t count, CUdevice device, CUstream stream)
{
    (void)p, (void)count, (void)device, (void)stream;
    return not_managed();
}

CUresult cr_hand_cuMemPrefetchAsync_v2(CUdeviceptr p, size_t count, CUmemLocation location,
                                       unsigned int flags, CUstream stream)
{
    (void)p, (void)count, (void)location, (void)flags, (void)stream;
    return not_managed();
}

CUresult cr_hand_cuMemAdvise(CUdeviceptr p, size_t count, CUmem_advise advice, CUdevice device)
{
    (void)p, (void)count, (void)advice, (void)device;
    return not_managed();
}

CUresult cr_hand_cuMemAdvise_v2(CUdeviceptr p, size_t count, CUmem_advise advice,
                                CUmemLocation location)
{
    (void)p, (void)count, (void)advice, (void)location;
    return not_managed();
}

CUresult cr_hand_cuMemRangeGetAttribute(void *data, size_t size, CUmem_range_attribute attribute,
                                        CUdeviceptr p, size_t count)
{
    (void)data, (void)size, (void)attribute, (void)p, (void)count;
    return not_managed();
}

CUresult cr_hand_cuMemRangeGetAttributes(void **data, size_t *sizes,
                                         CUmem_range_attribute *attributes, size_t count_attrs,
                                         CUdeviceptr p, size_t count)
{
    (void)data, (void)sizes, (void)attributes, (void)count_attrs, (void)p, (void)count;
    return not_managed();
}

/* --- memory pools: the value's type depends on the attribute ------------------------------ */

static CUresult pool_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value, int set)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err =
        cr_msg_begin(cl->conn, &m, set ? CR_OP_cuMemPoolSetAttribute : CR_OP_cuMemPoolGetAttribute);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, set ? 3 : 2);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)pool);
    msgpack_pack_int(&m.pk, attr);
    if (set)
        msgpack_pack_uint64(&m.pk, cr_mempool_attr_is_64(attr) ? *(cuuint64_t *)value
                                                               : (uint64_t) * (int *)value);
    if (set) {
        cr_pending_t p = {0};
        msgpack_unpacked u;
        CUresult r = cr_call(&m, &p, &u);
        cr_reply_done(&p, &u);
        return r;
    }
    uint64_t got = 0;
    CUresult r = cr_call_u64(&m, &got);
    if (r == CUDA_SUCCESS && cr_mempool_attr_is_64(attr))
        *(cuuint64_t *)value = got;
    else if (r == CUDA_SUCCESS)
        *(int *)value = (int)got;
    return r;
}

CUresult cr_hand_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    return pool_attribute(pool, attr, value, 0);
}

CUresult cr_hand_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    return pool_attribute(pool, attr, value, 1);
}

/* [address] -> the session's id of the physical memory mapped there (server/handlers_vmm.c) */
CUresult cr_hand_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuMemRetainAllocationHandle);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, (uint64_t)(uintptr_t)addr);
    uint64_t id = 0;
    CUresult r = cr_call_u64(&m, &id);
    if (r == CUDA_SUCCESS)
        *handle = id;
    return r;
}
