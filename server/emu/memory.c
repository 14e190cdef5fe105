/* Device memory of the emulated device: the arena, its allocator, the table of live
 * allocations, pointer attributes, and page-locked host memory.
 *
 * The arena is one fixed mapping [va_base, va_base + memory_bytes) of the server's address
 * space, reserved with MAP_NORESERVE so that only touched pages cost RAM: a device address is
 * the server's host address of the same byte, so copies are plain memcpy. The allocator keeps
 * the free space as a sorted array of ranges (best fit, coalescing on free) and the live
 * allocations as a sorted array searched by address. Both sit under cr__mem_lock, a rwlock:
 * every copy validates its ranges under the read side.
 *
 * cuMemFree and cuMemFreeHost do not wait for queued work: the pointer is invalid for new
 * work at once, and the memory is released once the work queued before the free has run
 * (cr__after_all; at once when the device is idle). */
#include "emu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "error.h"
#include "log.h"

pthread_rwlock_t cr__mem_lock = PTHREAD_RWLOCK_INITIALIZER;

typedef struct {
    uint64_t start;
    uint64_t size;
} range_t;

static range_t *free_ranges; /* sorted by start, never adjacent */
static size_t free_count, free_cap;
static cr__alloc_t *allocs; /* sorted by base */
static size_t alloc_count, alloc_cap;
static uint64_t arena_used;
static uint64_t next_buffer_id = 1;
static size_t page_size;

/* ---- arena ---- */

int cr__arena_init(void)
{
    void *want = (void *)(uintptr_t)cr__emu.va_base;
    if (free_ranges)
        return 0; /* mapped by an earlier cuInit that failed later */
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    void *p = mmap(want, cr__emu.memory_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) {
        CR_ERROR("emu: cannot map device memory at 0x%llx (%llu MiB): %s",
                 (unsigned long long)cr__emu.va_base,
                 (unsigned long long)(cr__emu.memory_bytes >> 20), strerror(errno));
        return errno == ENOMEM ? CR_ENOMEM : CR_EIO;
    }
    if (p != want) { /* a kernel older than 4.17 treats MAP_FIXED_NOREPLACE as a hint */
        munmap(p, cr__emu.memory_bytes);
        CR_ERROR("emu: device memory range at 0x%llx is taken",
                 (unsigned long long)cr__emu.va_base);
        return CR_EIO;
    }
    free_ranges = malloc(16 * sizeof *free_ranges);
    if (!free_ranges) {
        munmap(p, cr__emu.memory_bytes);
        return CR_ENOMEM;
    }
    free_cap = 16;
    free_ranges[0] = (range_t){cr__emu.va_base, cr__emu.memory_bytes};
    free_count = 1;
    return 0;
}

uint64_t cr__mem_used_locked(void)
{
    return arena_used + cr__vmm_physical;
}

uint64_t cr__alloc_granule(uint64_t bytes)
{
    return bytes >= CR__ALIGN_LARGE ? CR__ALIGN_LARGE : CR__ALIGN_SMALL;
}

static int free_reserve(size_t n)
{
    if (n <= free_cap)
        return 0;
    size_t cap = free_cap * 2 > n ? free_cap * 2 : n;
    range_t *r = realloc(free_ranges, cap * sizeof *r);
    if (!r)
        return CR_ENOMEM;
    free_ranges = r;
    free_cap = cap;
    return 0;
}

int cr__arena_take(uint64_t bytes, uint64_t *base, uint64_t *reserved)
{
    uint64_t align = cr__alloc_granule(bytes);
    uint64_t need = cr__round_up(bytes, align);
    size_t best = SIZE_MAX;
    uint64_t best_waste = UINT64_MAX;
    if (bytes == 0 || need < bytes || need > cr__emu.memory_bytes - cr__mem_used_locked())
        return CR_ENOMEM; /* physical memory (vmm.c) counts too */
    for (size_t i = 0; i < free_count; i++) {
        uint64_t start = cr__round_up(free_ranges[i].start, align);
        uint64_t end = free_ranges[i].start + free_ranges[i].size;
        if (start >= end || end - start < need)
            continue;
        uint64_t waste = free_ranges[i].size - need;
        if (waste < best_waste) {
            best = i;
            best_waste = waste;
            if (waste == 0)
                break;
        }
    }
    if (best == SIZE_MAX)
        return CR_ENOMEM;
    /* A leading fragment (alignment) and a trailing one may remain: at most one more range. */
    if (free_reserve(free_count + 1) != 0)
        return CR_ENOMEM;
    range_t r = free_ranges[best];
    uint64_t start = cr__round_up(r.start, align);
    uint64_t end = r.start + r.size;
    range_t pieces[2];
    size_t n = 0;
    if (start > r.start)
        pieces[n++] = (range_t){r.start, start - r.start};
    if (end > start + need)
        pieces[n++] = (range_t){start + need, end - (start + need)};
    if (n == 0) {
        memmove(&free_ranges[best], &free_ranges[best + 1],
                (free_count - best - 1) * sizeof *free_ranges);
        free_count--;
    } else if (n == 1) {
        free_ranges[best] = pieces[0];
    } else {
        memmove(&free_ranges[best + 2], &free_ranges[best + 1],
                (free_count - best - 1) * sizeof *free_ranges);
        free_ranges[best] = pieces[0];
        free_ranges[best + 1] = pieces[1];
        free_count++;
    }
    arena_used += need;
    *base = start;
    *reserved = need;
    return 0;
}

void cr__arena_give(uint64_t base, uint64_t reserved)
{
    /* find the first free range after base */
    size_t lo = 0, hi = free_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (free_ranges[mid].start < base)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t i = lo;
    int merge_prev = i > 0 && free_ranges[i - 1].start + free_ranges[i - 1].size == base;
    int merge_next = i < free_count && base + reserved == free_ranges[i].start;
    range_t merged;
    arena_used -= reserved;
    if (merge_prev && merge_next) {
        free_ranges[i - 1].size += reserved + free_ranges[i].size;
        memmove(&free_ranges[i], &free_ranges[i + 1], (free_count - i - 1) * sizeof *free_ranges);
        free_count--;
        merged = free_ranges[i - 1];
    } else if (merge_prev) {
        free_ranges[i - 1].size += reserved;
        merged = free_ranges[i - 1];
    } else if (merge_next) {
        free_ranges[i].start = base;
        free_ranges[i].size += reserved;
        merged = free_ranges[i];
    } else {
        if (free_reserve(free_count + 1) != 0) {
            /* Cannot record the range: leak it rather than corrupt the free list. */
            CR_ERROR("emu: out of memory recording a free range; %llu bytes lost",
                     (unsigned long long)reserved);
            arena_used += reserved;
            return;
        }
        memmove(&free_ranges[i + 1], &free_ranges[i], (free_count - i) * sizeof *free_ranges);
        free_ranges[i] = (range_t){base, reserved};
        free_count++;
        merged = free_ranges[i];
    }
    /* Give back to the OS every page the freed block touched that is now entirely free. */
    uint64_t lo_page = base / page_size * page_size;
    if (lo_page < merged.start)
        lo_page += page_size;
    uint64_t hi_page = cr__round_up(base + reserved, page_size);
    if (hi_page > merged.start + merged.size)
        hi_page -= page_size;
    if (hi_page > lo_page)
        madvise((void *)(uintptr_t)lo_page, hi_page - lo_page, MADV_DONTNEED);
}

int cr__in_arena(uint64_t addr)
{
    return (addr >= cr__emu.va_base && addr - cr__emu.va_base < cr__emu.memory_bytes) ||
           cr__in_vmm_region(addr);
}

/* ---- allocation table ---- */

/* Index of the first allocation with base > addr. */
static size_t alloc_upper(uint64_t addr)
{
    size_t lo = 0, hi = alloc_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (allocs[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int cr__alloc_insert(const cr__alloc_t *a)
{
    if (alloc_count == alloc_cap) {
        size_t cap = alloc_cap ? alloc_cap * 2 : 64;
        cr__alloc_t *n = realloc(allocs, cap * sizeof *n);
        if (!n)
            return CR_ENOMEM;
        allocs = n;
        alloc_cap = cap;
    }
    size_t i = alloc_upper(a->base);
    memmove(&allocs[i + 1], &allocs[i], (alloc_count - i) * sizeof *allocs);
    allocs[i] = *a;
    allocs[i].buffer_id = next_buffer_id++;
    alloc_count++;
    return 0;
}

cr__alloc_t *cr__alloc_find(uint64_t addr)
{
    size_t i = alloc_upper(addr);
    if (i == 0)
        return NULL;
    cr__alloc_t *a = &allocs[i - 1];
    return addr - a->base < a->size ? a : NULL;
}

int cr__alloc_remove(uint64_t base, cr__alloc_t *out)
{
    size_t i = alloc_upper(base);
    if (i == 0 || allocs[i - 1].base != base)
        return CR_ENOTFOUND;
    if (out)
        *out = allocs[i - 1];
    memmove(&allocs[i - 1], &allocs[i], (alloc_count - i) * sizeof *allocs);
    alloc_count--;
    return 0;
}

int cr__mem_alloc(uint64_t bytes, cr__alloc_kind_t kind, uint64_t *dptr)
{
    uint64_t base, reserved;
    int rc;
    if (bytes == 0)
        return CR_EINVAL;
    pthread_rwlock_wrlock(&cr__mem_lock);
    rc = cr__arena_take(bytes, &base, &reserved);
    if (rc == 0) {
        cr__alloc_t a = {.base = base, .size = bytes, .reserved = reserved, .kind = kind};
        rc = cr__alloc_insert(&a);
        if (rc != 0)
            cr__arena_give(base, reserved);
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    if (rc == 0)
        *dptr = base;
    return rc;
}

int cr__mem_free(uint64_t dptr, unsigned kind_mask)
{
    int rc = 0;
    cr__alloc_t a;
    pthread_rwlock_wrlock(&cr__mem_lock);
    cr__alloc_t *f = cr__alloc_find(dptr);
    if (!f || f->base != dptr || !(kind_mask & (1u << f->kind)) || f->free_pending) {
        rc = CR_EINVAL;
        goto out;
    }
    cr__alloc_remove(dptr, &a);
    if (a.kind == CR__ALLOC_POOL)
        cr__pool_release_locked(&a);
    else
        cr__arena_give(a.base, a.reserved);
out:
    pthread_rwlock_unlock(&cr__mem_lock);
    return rc;
}

int cr__mem_mark_free(uint64_t dptr, unsigned kind_mask)
{
    int rc = CR_EINVAL;
    pthread_rwlock_wrlock(&cr__mem_lock);
    cr__alloc_t *a = cr__alloc_find(dptr);
    if (a && a->base == dptr && (kind_mask & (1u << a->kind)) && !a->free_pending) {
        a->free_pending = 1;
        rc = 0;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    return rc;
}

typedef struct {
    cr__op_t op;
    uint64_t base;
} release_op_t;

static CUresult release_run(cr__op_t *op, cr__stream_t *s)
{
    release_op_t *r = (release_op_t *)op;
    cr__alloc_t a;
    (void)s;
    pthread_rwlock_wrlock(&cr__mem_lock);
    if (cr__alloc_remove(r->base, &a) == 0) {
        if (a.kind == CR__ALLOC_POOL)
            cr__pool_release_locked(&a);
        else
            cr__arena_give(a.base, a.reserved);
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    return CUDA_SUCCESS;
}

cr__op_t *cr__mem_release_op(uint64_t base)
{
    release_op_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->op.run = release_run;
    r->base = base;
    return &r->op;
}

CUresult cr__mem_check(uint64_t addr, uint64_t len)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (len == 0 || addr + len < addr)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_rdlock(&cr__mem_lock);
    cr__alloc_t *a = cr__alloc_find(addr);
    while (a && !a->free_pending) {
        if (addr + len - a->base <= a->size) {
            rc = CUDA_SUCCESS;
            break;
        }
        /* adjacent mappings (vmm.c) are one span, as a reserved range is on a GPU */
        uint64_t end = a->base + a->size;
        cr__alloc_t *next = a->kind == CR__ALLOC_MAPPED ? cr__alloc_find(end) : NULL;
        a = next && next->kind == CR__ALLOC_MAPPED && next->base == end ? next : NULL;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    return rc;
}

/* ---- device memory API ---- */

CUresult cr_emu_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    uint64_t p;
    CR__ENTER();
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    int rc = cr__mem_alloc(bytesize, CR__ALLOC_USER, &p);
    if (rc != 0)
        return cr__error_to_cuda(rc);
    *dptr = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuMemFree_v2(CUdeviceptr dptr)
{
    CR__ENTER();
    if (dptr == 0)
        return CUDA_ERROR_INVALID_VALUE;
    cr__op_t *op = cr__mem_release_op(dptr);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (cr__mem_mark_free(dptr, (1u << CR__ALLOC_USER) | (1u << CR__ALLOC_POOL)) != 0) {
        cr__op_free(op);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* The pointer is invalid for new work at once. Work already queued may still use the
     * memory: it returns to the allocator when that work is done (at once when idle). */
    return cr__after_all(op);
}

CUresult cr_emu_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes)
{
    uint64_t p, bytes;
    CR__ENTER();
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t pitch = cr__round_up(WidthInBytes, CR__PITCH_ALIGN);
    if (pitch < WidthInBytes || __builtin_mul_overflow(pitch, (uint64_t)Height, &bytes))
        return CUDA_ERROR_INVALID_VALUE;
    int rc = cr__mem_alloc(bytes, CR__ALLOC_USER, &p);
    if (rc != 0)
        return cr__error_to_cuda(rc);
    *dptr = (CUdeviceptr)p;
    *pPitch = pitch;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    CR__ENTER();
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_rdlock(&cr__mem_lock);
    *free_bytes = cr__emu.memory_bytes - cr__mem_used_locked();
    pthread_rwlock_unlock(&cr__mem_lock);
    *total = cr__emu.memory_bytes;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CUresult rc = CUDA_ERROR_NOT_FOUND;
    CR__ENTER();
    pthread_rwlock_rdlock(&cr__mem_lock);
    cr__alloc_t *a = cr__alloc_find(dptr);
    if (a && !a->free_pending) {
        if (pbase)
            *pbase = a->base;
        if (psize)
            *psize = a->size;
        rc = CUDA_SUCCESS;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    return rc;
}

/* ---- page-locked host memory ---- */

typedef struct {
    uintptr_t base;
    size_t size;
    unsigned flags;
    int allocated; /* 1: cuMemAllocHost/cuMemHostAlloc (we own it), 0: cuMemHostRegister */
} host_range_t;

static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static host_range_t *host_ranges; /* sorted by base, non-overlapping */
static size_t host_count, host_cap;

/* Index of the first range with base > p. */
static size_t host_upper(uintptr_t p)
{
    size_t lo = 0, hi = host_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (host_ranges[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static host_range_t *host_find(uintptr_t p)
{
    size_t i = host_upper(p);
    if (i == 0)
        return NULL;
    host_range_t *r = &host_ranges[i - 1];
    return p - r->base < r->size ? r : NULL;
}

/* Adds a range; CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED if it overlaps one. */
static CUresult host_add(uintptr_t base, size_t size, unsigned flags, int allocated)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&host_lock);
    size_t i = host_upper(base);
    if ((i > 0 && host_ranges[i - 1].base + host_ranges[i - 1].size > base) ||
        (i < host_count && host_ranges[i].base < base + size)) {
        rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        goto out;
    }
    if (host_count == host_cap) {
        size_t cap = host_cap ? host_cap * 2 : 32;
        host_range_t *n = realloc(host_ranges, cap * sizeof *n);
        if (!n) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        host_ranges = n;
        host_cap = cap;
    }
    memmove(&host_ranges[i + 1], &host_ranges[i], (host_count - i) * sizeof *host_ranges);
    host_ranges[i] = (host_range_t){base, size, flags, allocated};
    host_count++;
out:
    pthread_mutex_unlock(&host_lock);
    return rc;
}

/* Removes the range that starts at base and was (allocated or registered). */
static int host_remove(uintptr_t base, int allocated, host_range_t *out)
{
    int rc = -1;
    pthread_mutex_lock(&host_lock);
    size_t i = host_upper(base);
    if (i > 0 && host_ranges[i - 1].base == base && host_ranges[i - 1].allocated == allocated) {
        *out = host_ranges[i - 1];
        memmove(&host_ranges[i - 1], &host_ranges[i], (host_count - i) * sizeof *host_ranges);
        host_count--;
        rc = 0;
    }
    pthread_mutex_unlock(&host_lock);
    return rc;
}

int cr__host_is_pinned(const void *p, size_t len)
{
    int pinned = 0;
    uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&host_lock);
    host_range_t *r = host_find(a);
    if (r && len <= r->size - (a - r->base))
        pinned = 1;
    pthread_mutex_unlock(&host_lock);
    return pinned;
}

CUresult cr_emu_cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    CR__ENTER();
    if (!pp || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    size_t size = cr__round_up(bytesize, page_size);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = host_add((uintptr_t)p, size, Flags, 1);
    if (rc != CUDA_SUCCESS) {
        munmap(p, size);
        return rc;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

/* Page-locked host memory is the device's too here: its device address is its own. */
CUresult cr_emu_cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    CR__ENTER();
    if (!pdptr || !p || Flags != 0 || !cr__host_mapped((uintptr_t)p, 1))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

int cr__host_mapped(uintptr_t p, size_t len)
{
    pthread_mutex_lock(&host_lock);
    const host_range_t *r = host_find(p);
    int ok = r && len <= r->size - (p - r->base);
    pthread_mutex_unlock(&host_lock);
    return ok;
}

CUresult cr_emu_cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return cr_emu_cuMemHostAlloc(pp, bytesize, 0);
}

typedef struct {
    cr__op_t op;
    void *base;
    size_t size;
} unmap_op_t;

static CUresult unmap_run(cr__op_t *op, cr__stream_t *s)
{
    unmap_op_t *u = (unmap_op_t *)op;
    (void)s;
    munmap(u->base, u->size);
    return CUDA_SUCCESS;
}

int cr__host_range(uint64_t p, uint64_t *base, uint64_t *size)
{
    pthread_mutex_lock(&host_lock);
    const host_range_t *r = host_find((uintptr_t)p);
    if (r) {
        *base = r->base;
        *size = r->size;
    }
    pthread_mutex_unlock(&host_lock);
    return r != NULL;
}

CUresult cr_emu_cuMemFreeHost(void *p)
{
    host_range_t r;
    CR__ENTER();
    unmap_op_t *u = calloc(1, sizeof *u);
    if (!u)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!p || host_remove((uintptr_t)p, 1, &r) != 0) {
        free(u);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* Queued copies may still read or write it: unmapped once they are done. */
    u->op.run = unmap_run;
    u->base = (void *)r.base;
    u->size = r.size;
    return cr__after_all(&u->op);
}

CUresult cr_emu_cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    CR__ENTER();
    if (!p || bytesize == 0 || (uintptr_t)p + bytesize < (uintptr_t)p)
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                            CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY))
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & CU_MEMHOSTREGISTER_IOMEMORY)
        return CUDA_ERROR_NOT_SUPPORTED;
    /* Device memory is not host memory, even though it is mapped in this process. */
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (a < cr__emu.va_base + cr__emu.memory_bytes && a + bytesize > cr__emu.va_base)
        return CUDA_ERROR_INVALID_VALUE;
    return host_add((uintptr_t)p, bytesize, Flags, 0);
}

CUresult cr_emu_cuMemHostUnregister(void *p)
{
    host_range_t r;
    CR__ENTER();
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (host_remove((uintptr_t)p, 0, &r) != 0)
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    CR__ENTER();
    if (!pFlags || !p)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&host_lock);
    host_range_t *r = host_find((uintptr_t)p);
    if (r) {
        *pFlags = r->flags;
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&host_lock);
    return rc;
}

/* ---- pointer attributes ---- */

typedef struct {
    int kind; /* 0 unknown, 1 device, 2 host */
    cr__alloc_t alloc;
    uint64_t pool_handle;
    host_range_t host;
} pointer_info_t;

static void pointer_info(uint64_t ptr, pointer_info_t *info)
{
    memset(info, 0, sizeof *info);
    pthread_rwlock_rdlock(&cr__mem_lock);
    cr__alloc_t *a = cr__alloc_find(ptr);
    if (a && !a->free_pending) {
        info->kind = 1;
        info->alloc = *a;
        info->pool_handle = a->pool ? cr__pool_handle_of(a->pool) : 0;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    if (info->kind)
        return;
    pthread_mutex_lock(&host_lock);
    host_range_t *r = host_find((uintptr_t)ptr);
    if (r) {
        info->kind = 2;
        info->host = *r;
    }
    pthread_mutex_unlock(&host_lock);
}

/* Writes one attribute; CUDA_ERROR_INVALID_VALUE when it does not apply to this pointer. */
static CUresult pointer_attribute(const pointer_info_t *info, uint64_t ptr,
                                  CUpointer_attribute attribute, void *data)
{
    int dev = info->kind == 1;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = (CUcontext)(uintptr_t)cr__emu.ctx_handle;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        if (!dev)
            return CUDA_ERROR_INVALID_VALUE; /* mapped host memory is not supported */
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (dev)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(unsigned *)data = 1;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *(unsigned long long *)data = dev ? info->alloc.buffer_id : info->host.base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        *(unsigned *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(CUdeviceptr *)data = dev ? info->alloc.base : info->host.base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = dev ? info->alloc.size : info->host.size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = dev ? info->alloc.reserved : info->host.size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(CUmemoryPool *)data = (CUmemoryPool)(uintptr_t)(dev ? info->pool_handle : 0);
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cr_emu_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    pointer_info_t info;
    CR__ENTER();
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    if (attribute == CU_POINTER_ATTRIBUTE_P2P_TOKENS)
        return CUDA_ERROR_NOT_SUPPORTED;
    pointer_info(ptr, &info);
    if (!info.kind)
        return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(&info, ptr, attribute, data);
}

CUresult cr_emu_cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                       void **data, CUdeviceptr ptr)
{
    pointer_info_t info;
    CR__ENTER();
    if (numAttributes == 0 || !attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    pointer_info(ptr, &info);
    /* Unlike cuPointerGetAttribute, an unknown pointer is no error: attributes that do not
     * apply get zero values (MEMORY_TYPE 0, CONTEXT NULL, ...). */
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
        CUpointer_attribute at = attributes[i];
        if (at == CU_POINTER_ATTRIBUTE_P2P_TOKENS)
            return CUDA_ERROR_NOT_SUPPORTED;
        if (at < CU_POINTER_ATTRIBUTE_CONTEXT || at > CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE)
            return CUDA_ERROR_INVALID_VALUE;
        if (info.kind && pointer_attribute(&info, ptr, at, data[i]) == CUDA_SUCCESS)
            continue;
        switch (at) { /* zero of the attribute's size */
        case CU_POINTER_ATTRIBUTE_CONTEXT:
        case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
            *(void **)data[i] = NULL;
            break;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
            *(uint64_t *)data[i] = 0;
            break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *(int *)data[i] = info.kind ? 0 : -2;
            break;
        default:
            *(unsigned *)data[i] = 0;
            break;
        }
    }
    return CUDA_SUCCESS;
}
