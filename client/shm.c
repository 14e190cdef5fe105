/* Memory shared with a server on the same host.
 *
 * Over a Unix socket the client hands the server memfds (SCM_RIGHTS) that both sides map.
 * Page-locked host memory (cuMemAllocHost, cuMemHostAlloc) is allocated from them, so that
 * copies to and from it carry no bytes on the socket and run when their stream reaches
 * them, as on a GPU. Copies of pageable memory pass through staging areas chunk by chunk
 * (copy.c). Everything falls back to the socket when shared memory is unavailable: a TCP
 * address, CUDA_REMOTE_SHM=0, a server that declines, or memfds refused by the system.
 *
 * Each memfd is sealed against shrinking before it is offered: the server maps it, and a
 * region that shrank under it would crash the server on its next access.
 *
 * Mapped host memory: the server names a host window at hello, which this process reserves
 * too; page-locked memory is then mapped where the server placed it in its own window, at
 * the same address in both processes, and the device reaches it at that address. A kernel
 * takes the program's own pointer, as with unified addressing on a local GPU. Freed, a
 * range returns to the reservation.
 *
 * Threads: any application thread; cr_shm_connected runs once in cuInit. Attaching and
 * detaching a region wait for the server's reply, never under the module's lock. */
#define _GNU_SOURCE
#include "shm.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "rangemap.h"
#include "request.h"

#define STAGING_MAX 4 /* staging areas: concurrent staged copies; more use the socket */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cr_conn_t *conn;           /* set once shared memory works with this server */
static cr_rangemap_t regions;     /* address -> region id */
static cr_rangemap_t mapped;      /* address -> device address, of regions the device reaches */
static cr_device_window_t window; /* the server's host window, reserved here; size 0: none */
static uint64_t next_region = 1;
static cr_shm_staging_t staging[STAGING_MAX];
static int staging_count;

static size_t page_round(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (size + page - 1) / page * page;
}

/* A sealed memfd of `size` bytes, or -1. */
static int region_create(size_t size)
{
    int fd = memfd_create("cuda-remote", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd >= 0 && (ftruncate(fd, (off_t)size) != 0 ||
                    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Offers the region to the server; CUDA_SUCCESS once it mapped it. With `at_window`, asks
 * for it at the host window: *address is where to map it then (0: anywhere), *device the
 * device's address of it (0: the device does not reach it). */
static CUresult region_attach(cr_conn_t *c, uint64_t id, size_t size, int fd, int at_window,
                              uint64_t *address, uint64_t *device)
{
    cr_msg_t m;
    *address = *device = 0;
    CUresult r = cr_transport_error(cr_msg_begin(c, &m, CR_OP_SHM_ATTACH));
    if (r != CUDA_SUCCESS)
        return r;
    msgpack_pack_array(&m.pk, at_window ? 3 : 2);
    msgpack_pack_uint64(&m.pk, id);
    msgpack_pack_uint64(&m.pk, size);
    if (at_window)
        msgpack_pack_uint64(&m.pk, 1);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    r = cr_call_fd(&m, &p, &u, fd);
    if (r == CUDA_SUCCESS && at_window) {
        const msgpack_object *o = &u.data;
        if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 3 &&
            o->via.array.ptr[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
            o->via.array.ptr[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            *address = o->via.array.ptr[1].via.u64;
            *device = o->via.array.ptr[2].via.u64;
        }
    }
    cr_reply_done(&p, &u);
    return r;
}

static CUresult region_detach(cr_conn_t *c, uint64_t id)
{
    cr_msg_t m;
    CUresult r = cr_transport_error(cr_msg_begin(c, &m, CR_OP_SHM_DETACH));
    if (r != CUDA_SUCCESS)
        return r;
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, id);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    r = cr_call(&m, &p, &u);
    cr_reply_done(&p, &u);
    return r;
}

/* Gives [p, p + size) of the window back to the reservation, or unmaps it elsewhere. */
static void region_unmap(uint8_t *p, size_t size)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (window.size && a - window.base < window.size)
        mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    else
        munmap(p, size);
}

/* Creates, attaches and maps a region, at the host window when `at_window` (and the server
 * has room); NULL when any step fails. *device: the device's address of it, or 0. */
static uint8_t *region_new(cr_conn_t *c, size_t size, int at_window, uint64_t *id_out,
                           uint64_t *device, CUresult *why)
{
    int fd = region_create(size);
    if (fd < 0) {
        *why = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    pthread_mutex_lock(&lock);
    uint64_t id = next_region++;
    at_window = at_window && window.size;
    pthread_mutex_unlock(&lock);
    uint64_t address;
    *why = region_attach(c, id, size, fd, at_window, &address, device);
    void *p = MAP_FAILED;
    if (*why == CUDA_SUCCESS && address) {
        /* only inside our own reservation: a server's word never maps over our memory */
        if (address % (uint64_t)sysconf(_SC_PAGESIZE) == 0 && address - window.base < window.size &&
            size <= window.size - (address - window.base))
            p = mmap((void *)(uintptr_t)address, size, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED, fd, 0);
    } else if (*why == CUDA_SUCCESS) {
        *device = 0;
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd); /* the mappings keep the memory */
    if (*why != CUDA_SUCCESS)
        return NULL;
    uint8_t *base = p;
    int err = p == MAP_FAILED;
    if (!err) {
        pthread_mutex_lock(&lock);
        err = cr_rangemap_add(&regions, (uint64_t)(uintptr_t)base, size, id) ||
              (*device && cr_rangemap_add(&mapped, (uint64_t)(uintptr_t)base, size, *device));
        if (err)
            cr_rangemap_remove(&regions, (uint64_t)(uintptr_t)base, NULL);
        pthread_mutex_unlock(&lock);
    }
    if (err) {
        region_detach(c, id);
        if (p != MAP_FAILED)
            region_unmap(base, size);
        *why = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    *id_out = id;
    return base;
}

/* Reserves the server's host window here, so that regions may lie at its addresses. */
static void reserve_host_window(cr_device_window_t w)
{
    if (!w.size)
        return;
    void *want = (void *)(uintptr_t)w.base;
    void *p = mmap(want, w.size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != want) {
        if (p != MAP_FAILED)
            munmap(p, w.size);
        CR_INFO("the server's host window %#llx-%#llx is taken in this process: page-locked "
                "memory is not mapped to the device",
                (unsigned long long)w.base, (unsigned long long)(w.base + w.size));
        return;
    }
    pthread_mutex_lock(&lock);
    window = w;
    pthread_mutex_unlock(&lock);
}

void cr_shm_connected(const cr_client_t *cl)
{
    const char *env = getenv("CUDA_REMOTE_SHM");
    if (!cl->is_unix || (env && strcmp(env, "0") == 0))
        return;
    cr_conn_t *c = cl->conn;
    /* the first staging area doubles as the probe: does the server take shared memory? */
    CUresult why;
    uint64_t id, device;
    uint8_t *base = region_new(c, CR_SHM_STAGING_SIZE, 0, &id, &device, &why);
    if (!base) {
        CR_DEBUG("no shared memory with the server (%s); bytes travel over the socket",
                 cr_cuda_error_name(why));
        return;
    }
    pthread_mutex_lock(&lock);
    staging[0] = (cr_shm_staging_t){id, base, CR_SHM_STAGING_SIZE, 0};
    staging_count = 1;
    conn = c;
    pthread_mutex_unlock(&lock);
    reserve_host_window(cl->host_window);
    CR_DEBUG("shared memory with the server: copies bypass the socket");
}

int cr_shm_enabled(void)
{
    pthread_mutex_lock(&lock);
    int on = conn != NULL;
    pthread_mutex_unlock(&lock);
    return on;
}

void *cr_shm_alloc(size_t size)
{
    pthread_mutex_lock(&lock);
    cr_conn_t *c = conn;
    pthread_mutex_unlock(&lock);
    if (!c || size == 0)
        return NULL;
    CUresult why;
    uint64_t id, device;
    return region_new(c, page_round(size), 1, &id, &device, &why);
}

int cr_shm_free(void *p)
{
    cr_range_t r;
    pthread_mutex_lock(&lock);
    cr_conn_t *c = conn;
    const cr_range_t *found = cr_rangemap_find(&regions, (uint64_t)(uintptr_t)p);
    int ok = c && found && found->start == (uint64_t)(uintptr_t)p &&
             cr_rangemap_remove(&regions, found->start, &r);
    if (ok)
        cr_rangemap_remove(&mapped, r.start, NULL);
    pthread_mutex_unlock(&lock);
    if (!ok)
        return 0;
    /* ours goes first: once the server has let go of a range of the host window it may
     * hand it to another thread's region at once, which must not find us unmapping it.
     * The server unmaps its own mapping once its streams are done with it. */
    region_unmap(p, r.size);
    region_detach(c, r.value);
    return 1;
}

int cr_shm_find(const void *p, size_t len, uint64_t *region, uint64_t *offset)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    pthread_mutex_lock(&lock);
    const cr_range_t *r = conn ? cr_rangemap_find(&regions, a) : NULL;
    int inside = r && len <= r->size - (a - r->start);
    if (inside) {
        *region = r->value;
        *offset = a - r->start;
    }
    pthread_mutex_unlock(&lock);
    return inside;
}

int cr_shm_device_ptr(const void *p, uint64_t *device)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    pthread_mutex_lock(&lock);
    const cr_range_t *r = conn ? cr_rangemap_find(&mapped, a) : NULL;
    if (r)
        *device = r->value + (a - r->start);
    pthread_mutex_unlock(&lock);
    return r != NULL;
}

int cr_shm_device_contains(uint64_t p, size_t len)
{
    pthread_mutex_lock(&lock);
    int inside = conn && cr_rangemap_contains(&mapped, p, len ? len : 1);
    pthread_mutex_unlock(&lock);
    return inside;
}

cr_shm_staging_t *cr_shm_staging_take(void)
{
    pthread_mutex_lock(&lock);
    cr_conn_t *c = conn;
    for (int i = 0; c && i < staging_count; i++)
        if (!staging[i].busy) {
            staging[i].busy = 1;
            pthread_mutex_unlock(&lock);
            return &staging[i];
        }
    int slot = c && staging_count < STAGING_MAX ? staging_count++ : -1;
    if (slot >= 0)
        staging[slot].busy = 1; /* reserved while it is made, without the lock */
    pthread_mutex_unlock(&lock);
    if (slot < 0)
        return NULL;
    CUresult why;
    uint64_t id, device;
    uint8_t *base = region_new(c, CR_SHM_STAGING_SIZE, 0, &id, &device, &why);
    pthread_mutex_lock(&lock);
    if (base)
        staging[slot] = (cr_shm_staging_t){id, base, CR_SHM_STAGING_SIZE, 1};
    else
        staging[slot].size = 0; /* stays busy and empty: never handed out */
    pthread_mutex_unlock(&lock);
    return base ? &staging[slot] : NULL;
}

void cr_shm_staging_give(cr_shm_staging_t *st)
{
    pthread_mutex_lock(&lock);
    st->busy = 0;
    pthread_mutex_unlock(&lock);
}
