/* The host window (host_window.h): one reservation, handed out first fit from a sorted
 * list of free extents that merges neighbours on return.
 *
 * Where: a client must reserve the same addresses in its own process, so the window lies
 * where neither process has anything yet: between a position-independent executable and
 * its heap (around 0x55..-0x56.. on x86-64) and the mappings that grow down from below the
 * stack (0x7e..-0x7f..); where the emulated device's memory lies (0x600000000000 by
 * default) or a sanitizer's, the next candidate. The reservation is PROT_NONE and
 * MAP_NORESERVE: it costs neither memory nor commit. */
#define _GNU_SOURCE
#include "host_window.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

/* ThreadSanitizer lets a program map only a few ranges, none of those above: its builds
 * use 256 GiB of its low range (past the emulated device's memory there). */
#if defined(__SANITIZE_THREAD__)
#define WINDOW_SIZE (1ull << 38)
#define CANDIDATES 0x4000000000ull
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WINDOW_SIZE (1ull << 38)
#define CANDIDATES 0x4000000000ull
#endif
#endif
#ifndef WINDOW_SIZE
#define WINDOW_SIZE (1ull << 40) /* 1 TiB of page-locked memory, all clients together */
#define CANDIDATES 0x600000000000ull, 0x500000000000ull, 0x400000000000ull
#endif

typedef struct {
    uint64_t base, size;
} extent_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t window_base, window_size;
static extent_t *free_list; /* sorted by base, never adjacent */
static size_t free_count, free_cap;

int cr_host_window_init(void)
{
#if UINTPTR_MAX > 0xffffffffu
    static const uint64_t candidates[] = {CANDIDATES};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        void *want = (void *)(uintptr_t)candidates[i];
        void *p = mmap(want, WINDOW_SIZE, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED)
            continue;
        if (p != want) { /* kernels before 4.17 take MAP_FIXED_NOREPLACE as a hint */
            munmap(p, WINDOW_SIZE);
            continue;
        }
        free_list = malloc(16 * sizeof *free_list);
        if (!free_list) {
            munmap(p, WINDOW_SIZE);
            return -1;
        }
        free_cap = 16;
        free_list[0] = (extent_t){candidates[i], WINDOW_SIZE};
        free_count = 1;
        window_base = candidates[i];
        window_size = WINDOW_SIZE;
        CR_DEBUG("host window %#llx-%#llx reserved for mapped host memory",
                 (unsigned long long)window_base, (unsigned long long)(window_base + window_size));
        return 0;
    }
#endif
    CR_WARN("no address range free for the host window: page-locked memory of clients is "
            "not mapped to the device (cuMemHostGetDevicePointer fails)");
    return -1;
}

void cr_host_window_get(uint64_t *base, uint64_t *size)
{
    *base = window_base;
    *size = window_size;
}

uint64_t cr_host_window_take(uint64_t size)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), addr = 0;
    if (size == 0 || size % page)
        return 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < free_count; i++) {
        extent_t *e = &free_list[i];
        if (e->size < size)
            continue;
        addr = e->base;
        e->base += size;
        e->size -= size;
        if (e->size == 0) {
            memmove(e, e + 1, (free_count - i - 1) * sizeof *e);
            free_count--;
        }
        break;
    }
    pthread_mutex_unlock(&lock);
    return addr;
}

void cr_host_window_give(uint64_t addr, uint64_t size)
{
    /* fresh memory over the client's: the region's pages go, the range stays ours */
    void *p = mmap((void *)(uintptr_t)addr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) {
        /* the old mapping stays (the kernel refused a new one): leak the range rather than
         * hand it out with the old region's pages under it */
        CR_WARN("host window: cannot replace %#llx+%llu (%s); the range is not reused",
                (unsigned long long)addr, (unsigned long long)size, strerror(errno));
        return;
    }
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < free_count && free_list[i].base < addr)
        i++;
    int before = i > 0 && free_list[i - 1].base + free_list[i - 1].size == addr;
    int after = i < free_count && addr + size == free_list[i].base;
    if (before && after) {
        free_list[i - 1].size += size + free_list[i].size;
        memmove(&free_list[i], &free_list[i + 1], (free_count - i - 1) * sizeof *free_list);
        free_count--;
    } else if (before) {
        free_list[i - 1].size += size;
    } else if (after) {
        free_list[i].base = addr;
        free_list[i].size += size;
    } else {
        if (free_count == free_cap) {
            extent_t *n = realloc(free_list, 2 * free_cap * sizeof *n);
            if (!n) { /* the range is lost to reuse, nothing else */
                pthread_mutex_unlock(&lock);
                return;
            }
            free_list = n;
            free_cap *= 2;
        }
        memmove(&free_list[i + 1], &free_list[i], (free_count - i) * sizeof *free_list);
        free_list[i] = (extent_t){addr, size};
        free_count++;
    }
    pthread_mutex_unlock(&lock);
}
