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
static cr_conn_t *conn;       /* set once shared memory works with this server */
static cr_rangemap_t regions; /* address -> region id */
static uint64_t next_region = 1;
static cr_shm_staging_t staging[STAGING_MAX];
static int staging_count;

static size_t page_round(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (size + page - 1) / page * page;
}

/* A sealed memfd of `size` bytes, mapped. The descriptor stays open for attaching. */
static uint8_t *region_create(size_t size, int *fd_out)
{
    int fd = memfd_create("cuda-remote", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return NULL;
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return NULL;
    }
    *fd_out = fd;
    return p;
}

/* Offers the region to the server; CUDA_SUCCESS once it mapped it. */
static CUresult region_attach(cr_conn_t *c, uint64_t id, size_t size, int fd)
{
    cr_msg_t m;
    CUresult r = cr_transport_error(cr_msg_begin(c, &m, CR_OP_SHM_ATTACH));
    if (r != CUDA_SUCCESS)
        return r;
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_uint64(&m.pk, id);
    msgpack_pack_uint64(&m.pk, size);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    r = cr_call_fd(&m, &p, &u, fd);
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

/* Creates, maps and attaches a region; NULL when any step fails. */
static uint8_t *region_new(cr_conn_t *c, size_t size, uint64_t *id_out, CUresult *why)
{
    int fd;
    uint8_t *base = region_create(size, &fd);
    if (!base) {
        *why = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    pthread_mutex_lock(&lock);
    uint64_t id = next_region++;
    pthread_mutex_unlock(&lock);
    *why = region_attach(c, id, size, fd);
    close(fd); /* the mappings keep the memory */
    if (*why != CUDA_SUCCESS) {
        munmap(base, size);
        return NULL;
    }
    pthread_mutex_lock(&lock);
    int err = cr_rangemap_add(&regions, (uint64_t)(uintptr_t)base, size, id);
    pthread_mutex_unlock(&lock);
    if (err) {
        region_detach(c, id);
        munmap(base, size);
        *why = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    *id_out = id;
    return base;
}

void cr_shm_connected(const cr_client_t *cl)
{
    const char *env = getenv("CUDA_REMOTE_SHM");
    if (!cl->is_unix || (env && strcmp(env, "0") == 0))
        return;
    cr_conn_t *c = cl->conn;
    /* the first staging area doubles as the probe: does the server take shared memory? */
    CUresult why;
    uint64_t id;
    uint8_t *base = region_new(c, CR_SHM_STAGING_SIZE, &id, &why);
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
    uint64_t id;
    return region_new(c, page_round(size), &id, &why);
}

int cr_shm_free(void *p)
{
    cr_range_t r;
    pthread_mutex_lock(&lock);
    cr_conn_t *c = conn;
    const cr_range_t *found = cr_rangemap_find(&regions, (uint64_t)(uintptr_t)p);
    int ok = c && found && found->start == (uint64_t)(uintptr_t)p &&
             cr_rangemap_remove(&regions, found->start, &r);
    pthread_mutex_unlock(&lock);
    if (!ok)
        return 0;
    /* the server unmaps it once its streams are done with it; ours goes after that */
    region_detach(c, r.value);
    munmap(p, r.size);
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
    uint64_t id;
    uint8_t *base = region_new(c, CR_SHM_STAGING_SIZE, &id, &why);
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
