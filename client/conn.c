/* The client's connection (conn.h): opening it, its state, and the registrations of what
 * the server will send for asynchronous requests. Sending is conn_send.c, receiving
 * conn_read.c, host functions conn_callback.c.
 *
 * Threads: cr_conn_open runs on the thread in cuInit and starts the background reader;
 * everything else runs on any thread. Nothing here waits but for the connection's lock. */
#include "conn_state.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "error.h"
#include "log.h"

/* A waiting thread polls the socket this long before sleeping: a wake-up costs 25-35 us on
 * a virtual machine, a reply from a near server comes sooner. CUDA_REMOTE_SPIN_US sets it. */
#define DEFAULT_SPIN_US 50

/* Frees a connection whose reader never started. */
static void conn_free(cr_conn_t *c)
{
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    pthread_cond_destroy(&c->cb_cond);
    pthread_mutex_destroy(&c->cb_lock);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->send_lock);
    cr_transport_close(&c->tr);
    free(c->rbuf);
    free(c);
}

int cr_conn_open(const cr_address_t *addr, cr_conn_t **out, char *err, size_t err_len)
{
    cr_conn_t *c = calloc(1, sizeof *c);
    uint8_t *rbuf = malloc(READ_BUFFER);
    if (!c || !rbuf) {
        free(c);
        free(rbuf);
        snprintf(err, err_len, "out of memory");
        return CR_ENOMEM;
    }
    int rc = cr_transport_connect(&c->tr, addr, 10000, err, err_len);
    if (rc != 0) {
        free(c);
        free(rbuf);
        return rc;
    }
    c->rbuf = rbuf;
    if (addr->is_unix)
        snprintf(c->address, sizeof c->address, "unix:%s", addr->path);
    else
        snprintf(c->address, sizeof c->address, "%s%s:%d", addr->tls ? "tls://" : "", addr->host,
                 addr->port);
    pthread_mutex_init(&c->send_lock, NULL);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    pthread_mutex_init(&c->cb_lock, NULL);
    pthread_cond_init(&c->cb_cond, NULL);
    const char *spin = getenv("CUDA_REMOTE_SPIN_US");
    c->spin_ns = (spin ? strtoull(spin, NULL, 10) : DEFAULT_SPIN_US) * 1000;
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->wake_fd < 0) {
        conn_free(c);
        snprintf(err, err_len, "cannot create an eventfd");
        return CR_ENOMEM;
    }
    /* the reader must not take signals meant for the application's threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&c->reader, NULL, cr_conn_reader_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        conn_free(c);
        snprintf(err, err_len, "cannot start the reader thread");
        return CR_ENOMEM;
    }
    pthread_detach(c->reader);
    *out = c;
    return 0;
}

/* Registers r under id in map (one of the connection's, under its lock); frees r when it
 * cannot. */
static int put_reg(cr_conn_t *c, cr_idmap_t *map, uint64_t id, async_reg_t *r)
{
    pthread_mutex_lock(&c->lock);
    int err = cr_idmap_put(map, id, (uint64_t)(uintptr_t)r);
    pthread_mutex_unlock(&c->lock);
    if (err)
        free(r);
    return err;
}

static async_reg_t *host_func_reg(void (*fn)(void *), void *data)
{
    async_reg_t *r = calloc(1, sizeof *r);
    if (r) {
        r->is_host_func = 1;
        r->fn = fn;
        r->data = data;
    }
    return r;
}

int cr_conn_expect_data(cr_conn_t *c, uint64_t call_id, const cr_sink_t *sink)
{
    async_reg_t *r = calloc(1, sizeof *r);
    if (!r)
        return CR_ENOMEM;
    r->sink = *sink;
    r->sink.pos = 0;
    return put_reg(c, &c->async_regs, call_id, r);
}

int cr_conn_expect_host_func(cr_conn_t *c, uint64_t call_id, void (*fn)(void *), void *data)
{
    async_reg_t *r = host_func_reg(fn, data);
    return r ? put_reg(c, &c->async_regs, call_id, r) : CR_ENOMEM;
}

int cr_conn_keep_host_func(cr_conn_t *c, uint64_t host_id, void (*fn)(void *), void *data)
{
    async_reg_t *r = host_func_reg(fn, data);
    return r ? put_reg(c, &c->kept_host_funcs, host_id, r) : CR_ENOMEM;
}

int cr_conn_kept_host_func(cr_conn_t *c, uint64_t host_id, void (**fn)(void *), void **data)
{
    uint64_t v;
    pthread_mutex_lock(&c->lock);
    int found = cr_idmap_get(&c->kept_host_funcs, host_id, &v);
    pthread_mutex_unlock(&c->lock);
    if (found) { /* kept for as long as the process lives: never freed under us */
        const async_reg_t *r = (const async_reg_t *)(uintptr_t)v;
        *fn = r->fn;
        *data = r->data;
    }
    return found;
}

void cr_conn_mark_dead(cr_conn_t *c, const char *why)
{
    pthread_mutex_lock(&c->lock);
    if (!c->dead) {
        c->dead = 1;
        snprintf(c->why, sizeof c->why, "%s", why);
        /* before the hello, its own failure says what happened; after a context error, the
         * server closed the connection on purpose */
        if (c->established && !__atomic_load_n(&c->context_error, __ATOMIC_ACQUIRE))
            CR_ERROR("connection to cuda-remoted at %s lost: %s", c->address, why);
    }
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

const char *cr_conn_why(cr_conn_t *c)
{
    pthread_mutex_lock(&c->lock);
    const char *why = c->dead ? c->why : NULL; /* set once, never changed after */
    pthread_mutex_unlock(&c->lock);
    return why;
}

int cr_conn_context_error(cr_conn_t *c)
{
    return __atomic_load_n(&c->context_error, __ATOMIC_ACQUIRE);
}

void cr_conn_established(cr_conn_t *c)
{
    pthread_mutex_lock(&c->lock);
    c->established = 1;
    pthread_mutex_unlock(&c->lock);
}

int cr_conn_dead(cr_conn_t *c)
{
    pthread_mutex_lock(&c->lock);
    int dead = c->dead;
    pthread_mutex_unlock(&c->lock);
    return dead;
}
