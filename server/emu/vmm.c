/* Virtual memory management of the emulated device: address ranges reserved without memory
 * (cuMemAddressReserve), physical memory without an address (cuMemCreate), and mappings of
 * the one into the other (cuMemMap), as PyTorch's expandable segments use them.
 *
 * Reserved ranges lie in a region of their own right after the arena, VMM_VA_FACTOR times
 * its size, mapped PROT_NONE at start so that nothing else lands there (an unmapped range
 * gets fresh anonymous pages instead: see cr_emu_cuMemUnmap); physical memory is
 * a memfd, and a mapping is that memfd mapped MAP_SHARED|MAP_FIXED over its range, so two
 * mappings of the same memory see the same bytes, as on a GPU. A mapping is registered as an
 * allocation (CR__ALLOC_MAPPED): copies and kernels reach it like any other device memory,
 * and adjacent mappings form one span for copies (cr__mem_check). Physical memory counts
 * against the device's memory (cr__vmm_physical) from cuMemCreate until its handle is
 * released and its last mapping unmapped. Access flags (cuMemSetAccess) are recorded and
 * reported; the emulated device does not enforce them.
 *
 * Everything here is under cr__mem_lock (writing), with the allocation table. */
#define _GNU_SOURCE
#include "emu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "array.h"
#include "error.h"
#include "log.h"

#define VMM_VA_FACTOR 4    /* reservable address space: 4 times the device memory */
#define GRANULE (2u << 20) /* cuMemGetAllocationGranularity, both kinds */
#define VMM_HANDLE_BASE 0x564d0000000000ull /* "VM": handles are ids from here, never reused */

uint64_t cr__vmm_physical; /* bytes of physical memory alive (under cr__mem_lock) */

typedef struct phys_s {
    struct phys_s *next;
    uint64_t id;
    int fd;
    uint64_t size;
    CUmemAllocationProp prop;
    unsigned refs;     /* the handle's: cuMemCreate and each cuMemRetainAllocationHandle */
    unsigned mappings; /* ranges it is mapped at */
} phys_t;

typedef struct {
    uint64_t base, size;
    phys_t *phys;
    uint64_t offset;
    unsigned long long access; /* CUmemAccess_flags for the device */
} mapping_t;

typedef struct {
    uint64_t base, size;
} span_t;

static phys_t *physicals;
static uint64_t next_id = VMM_HANDLE_BASE;
static span_t *reserved; /* sorted by base */
static size_t reserved_count, reserved_cap;
static span_t *va_free; /* the region's free ranges, sorted, never adjacent */
static size_t va_free_count, va_free_cap;
static mapping_t *maps; /* sorted by base */
static size_t map_count, map_cap;
static uint64_t region_base, region_size;

/* ---- the region ---- */

int cr__vmm_init(void)
{
    if (region_size)
        return 0;
    uint64_t size = cr__emu.memory_bytes * VMM_VA_FACTOR;
    uint64_t base = cr__emu.va_base + cr__emu.memory_bytes;
    void *want = (void *)(uintptr_t)base;
    void *p = mmap(want, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED || p != want) {
        if (p != MAP_FAILED)
            munmap(p, size);
        CR_ERROR("emu: cannot reserve the virtual-memory region at 0x%llx (%llu MiB)",
                 (unsigned long long)base, (unsigned long long)(size >> 20));
        return CR_EIO;
    }
    va_free = malloc(sizeof *va_free);
    if (!va_free) {
        munmap(p, size);
        return CR_ENOMEM;
    }
    va_free[0] = (span_t){base, size};
    va_free_count = va_free_cap = 1;
    region_base = base;
    region_size = size;
    return 0;
}

uint64_t cr__vmm_region_size(uint64_t memory_bytes)
{
    return memory_bytes * VMM_VA_FACTOR;
}

int cr__in_vmm_region(uint64_t addr)
{
    return region_size && addr >= region_base && addr - region_base < region_size;
}

static void span_insert(span_t **a, size_t *count, size_t i, span_t s)
{
    memmove(&(*a)[i + 1], &(*a)[i], (*count - i) * sizeof s);
    (*a)[i] = s;
    (*count)++;
}

static void span_erase(span_t *a, size_t *count, size_t i)
{
    memmove(&a[i], &a[i + 1], (*count - i - 1) * sizeof *a);
    (*count)--;
}

/* First fit of size bytes aligned to align in the region's free ranges. */
static int va_take(uint64_t size, uint64_t align, uint64_t *out)
{
    if (cr_array_room((void **)&va_free, &va_free_cap, va_free_count + 1, sizeof *va_free) != 0)
        return CR_ENOMEM;
    for (size_t i = 0; i < va_free_count; i++) {
        span_t f = va_free[i];
        uint64_t start = cr__round_up(f.base, align), end = f.base + f.size;
        if (start >= end || end - start < size)
            continue;
        span_erase(va_free, &va_free_count, i);
        size_t at = i;
        if (start > f.base)
            span_insert(&va_free, &va_free_count, at++, (span_t){f.base, start - f.base});
        if (end > start + size)
            span_insert(&va_free, &va_free_count, at, (span_t){start + size, end - start - size});
        *out = start;
        return 0;
    }
    return CR_ENOMEM;
}

static int va_give(uint64_t base, uint64_t size)
{
    if (cr_array_room((void **)&va_free, &va_free_cap, va_free_count + 1, sizeof *va_free) != 0)
        return CR_ENOMEM;
    size_t i = 0;
    while (i < va_free_count && va_free[i].base < base)
        i++;
    span_insert(&va_free, &va_free_count, i, (span_t){base, size});
    if (i + 1 < va_free_count && base + size == va_free[i + 1].base) {
        va_free[i].size += va_free[i + 1].size;
        span_erase(va_free, &va_free_count, i + 1);
    }
    if (i > 0 && va_free[i - 1].base + va_free[i - 1].size == base) {
        va_free[i - 1].size += va_free[i].size;
        span_erase(va_free, &va_free_count, i);
    }
    return 0;
}

/* The reservation containing [p, p + size), or NULL. */
static span_t *reservation_of(uint64_t p, uint64_t size)
{
    for (size_t i = 0; i < reserved_count; i++)
        if (p >= reserved[i].base && p - reserved[i].base < reserved[i].size &&
            size <= reserved[i].base + reserved[i].size - p)
            return &reserved[i];
    return NULL;
}

static phys_t *phys_of(CUmemGenericAllocationHandle h)
{
    for (phys_t *p = physicals; p; p = p->next)
        if (p->id == h && p->refs > 0)
            return p;
    return NULL;
}

/* Frees physical memory nothing holds any more. */
static void phys_drop(phys_t *p)
{
    if (p->refs || p->mappings)
        return;
    for (phys_t **pp = &physicals; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    cr__vmm_physical -= p->size;
    close(p->fd);
    free(p);
}

/* Index of the first mapping with base >= p. */
static size_t map_lower(uint64_t p)
{
    size_t i = 0;
    while (i < map_count && maps[i].base < p)
        i++;
    return i;
}

/* ---- the API ---- */

static int valid_prop(const CUmemAllocationProp *prop)
{
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
           prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop->location.id == 0;
}

CUresult cr_emu_cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option)
{
    CR__ENTER();
    if (!granularity || !valid_prop(prop) ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = GRANULE;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags)
{
    CR__ENTER();
    (void)addr; /* a hint, as on a GPU: the range may lie elsewhere */
    if (!ptr || size == 0 || size % GRANULE || flags != 0 ||
        (alignment && (alignment & (alignment - 1))))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t base;
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_rwlock_wrlock(&cr__mem_lock);
    if (cr_array_room((void **)&reserved, &reserved_cap, reserved_count, sizeof *reserved) == 0 &&
        va_take(size, alignment > GRANULE ? alignment : GRANULE, &base) == 0) {
        size_t i = 0;
        while (i < reserved_count && reserved[i].base < base)
            i++;
        span_insert(&reserved, &reserved_count, i, (span_t){base, size});
        *ptr = base;
        r = CUDA_SUCCESS;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    return r;
}

CUresult cr_emu_cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CR__ENTER();
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_wrlock(&cr__mem_lock);
    for (size_t i = 0; i < reserved_count; i++) {
        if (reserved[i].base != ptr || reserved[i].size != size)
            continue;
        size_t m = map_lower(ptr);
        if (m < map_count && maps[m].base < ptr + size)
            break; /* still mapped: unmap first */
        if (va_give(ptr, size) == 0) {
            span_erase(reserved, &reserved_count, i);
            r = CUDA_SUCCESS;
        } else {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        break;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    return r;
}

CUresult cr_emu_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    CR__ENTER();
    if (!handle || size == 0 || size % GRANULE || flags != 0 || !valid_prop(prop))
        return CUDA_ERROR_INVALID_VALUE;
    phys_t *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_rwlock_wrlock(&cr__mem_lock);
    if (cr__mem_used_locked() + size <= cr__emu.memory_bytes) {
        p->fd = memfd_create("cuda-remote emulated device memory", MFD_CLOEXEC);
        if (p->fd >= 0 && ftruncate(p->fd, (off_t)size) == 0) {
            p->id = next_id++;
            p->size = size;
            p->prop = *prop;
            p->prop.win32HandleMetaData = NULL;
            p->refs = 1;
            p->next = physicals;
            physicals = p;
            cr__vmm_physical += size;
            *handle = p->id;
            r = CUDA_SUCCESS;
        } else if (p->fd >= 0) {
            close(p->fd);
        }
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    if (r != CUDA_SUCCESS)
        free(p);
    return r;
}

CUresult cr_emu_cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CR__ENTER();
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_wrlock(&cr__mem_lock);
    phys_t *p = phys_of(handle);
    if (p) {
        p->refs--;
        phys_drop(p);
        r = CUDA_SUCCESS;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    return r;
}

CUresult cr_emu_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    CR__ENTER();
    if (size == 0 || size % GRANULE || ptr % GRANULE || offset % GRANULE || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_wrlock(&cr__mem_lock);
    phys_t *p = phys_of(handle);
    size_t m = map_lower(ptr);
    int overlaps = (m < map_count && maps[m].base < ptr + size) ||
                   (m > 0 && maps[m - 1].base + maps[m - 1].size > ptr);
    if (!p || offset > p->size || size > p->size - offset || !reservation_of(ptr, size) || overlaps)
        goto out;
    r = CUDA_ERROR_OUT_OF_MEMORY;
    if (cr_array_room((void **)&maps, &map_cap, map_count, sizeof *maps) != 0)
        goto out;
    cr__alloc_t a = {.base = ptr, .size = size, .kind = CR__ALLOC_MAPPED};
    if (cr__alloc_insert(&a) != 0)
        goto out;
    void *at = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                    p->fd, (off_t)offset);
    if (at == MAP_FAILED) {
        cr__alloc_remove(ptr, NULL);
        goto out;
    }
    memmove(&maps[m + 1], &maps[m], (map_count - m) * sizeof *maps);
    maps[m] = (mapping_t){ptr, size, p, offset, CU_MEM_ACCESS_FLAGS_PROT_NONE};
    map_count++;
    p->mappings++;
    r = CUDA_SUCCESS;
out:
    pthread_rwlock_unlock(&cr__mem_lock);
    return r;
}

CUresult cr_emu_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CR__ENTER();
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_wrlock(&cr__mem_lock);
    /* the range must be whole mappings, one after another */
    size_t first = map_lower(ptr), last = first;
    uint64_t at = ptr;
    while (last < map_count && maps[last].base == at && at - ptr < size) {
        at += maps[last].size;
        last++;
    }
    if (size == 0 || first == last || at != ptr + size)
        goto out;
    /* the address range goes back to being reserved: fresh anonymous pages, not PROT_NONE,
     * because a kernel still running may have the range in its cache of checked ranges
     * (unmapping memory in use is the program's error; it must not crash the server) */
    void *back = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (back == MAP_FAILED) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    for (size_t i = first; i < last; i++) {
        cr__alloc_remove(maps[i].base, NULL);
        maps[i].phys->mappings--;
        phys_drop(maps[i].phys);
    }
    memmove(&maps[first], &maps[last], (map_count - last) * sizeof *maps);
    map_count -= last - first;
    r = CUDA_SUCCESS;
out:
    pthread_rwlock_unlock(&cr__mem_lock);
    return r;
}

CUresult cr_emu_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count)
{
    CR__ENTER();
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned long long flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id != 0 ||
            (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
             desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
             desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
            return CUDA_ERROR_INVALID_VALUE;
        flags = desc[i].flags;
    }
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_wrlock(&cr__mem_lock);
    /* every byte of the range must be mapped */
    size_t first = map_lower(ptr), i = first;
    uint64_t at = ptr;
    if (first > 0 && maps[first - 1].base + maps[first - 1].size > ptr)
        first = --i;
    at = i < map_count ? maps[i].base : 0;
    while (i < map_count && maps[i].base == at && at < ptr + size) {
        at += maps[i].size;
        i++;
    }
    if (i > first && maps[first].base <= ptr && at >= ptr + size) {
        for (size_t k = first; k < i; k++)
            maps[k].access = flags;
        r = CUDA_SUCCESS;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    return r;
}

CUresult cr_emu_cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                               CUdeviceptr ptr)
{
    CR__ENTER();
    if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE || location->id != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_rdlock(&cr__mem_lock);
    for (size_t i = 0; i < map_count; i++)
        if (ptr >= maps[i].base && ptr - maps[i].base < maps[i].size) {
            *flags = maps[i].access;
            r = CUDA_SUCCESS;
        }
    pthread_rwlock_unlock(&cr__mem_lock);
    return r;
}

CUresult cr_emu_cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                       CUmemGenericAllocationHandle handle)
{
    CR__ENTER();
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_rdlock(&cr__mem_lock);
    phys_t *p = phys_of(handle);
    if (p) {
        *prop = p->prop;
        r = CUDA_SUCCESS;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    return r;
}

CUresult cr_emu_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    CR__ENTER();
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t a = (uint64_t)(uintptr_t)addr;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_wrlock(&cr__mem_lock);
    for (size_t i = 0; i < map_count; i++)
        if (a >= maps[i].base && a - maps[i].base < maps[i].size) { /* released or not */
            maps[i].phys->refs++;
            *handle = maps[i].phys->id;
            r = CUDA_SUCCESS;
        }
    pthread_rwlock_unlock(&cr__mem_lock);
    return r;
}
