/* Receiving (conn.h): whole frames, one thread at a time. Replies go to the thread waiting
 * for them, their bulk bytes straight into the caller's destination; device-to-host data
 * of asynchronous copies lands where it was registered; host-function requests are queued
 * for the callback thread; context errors and device output are handled on the spot.
 *
 * Threads: whoever holds the read role. A thread waiting for its reply (cr_pending_wait)
 * spins briefly, then reads the socket itself when nobody else does; the background reader
 * reads only while no thread waits. Both block in recv or poll and wait on the connection's
 * lock and condition; neither takes the send lock, so a reply is read while a sender blocks. */
#include "conn_state.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cuda.h>

#include "clock.h"
#include "cr_opcodes.h"
#include "error.h"
#include "frame.h"
#include "log.h"
#include "mpcheck.h"

#define DIRECT_READ_MIN (16u << 10) /* larger bulk reads bypass the read buffer */

static int read_frame(cr_conn_t *c, int spin);

static const char *read_error(const cr_conn_t *c, int err)
{
    return c->tr.why[0]        ? c->tr.why /* TLS says what failed */
           : err == CR_ECLOSED ? "connection closed by the server"
           : err == CR_EPROTO  ? "malformed frame from the server"
                               : "read failed";
}

/* --- waiting for a reply ------------------------------------------------------------------ */

int cr_pending_wait(cr_pending_t *p)
{
    cr_conn_t *c = p->conn;
    int err = p->send_err;
    pthread_mutex_lock(&c->lock);
    while (!p->done && !c->dead) {
        if (c->role == ROLE_NONE) {
            /* read ourselves until our reply is in; other replies we meet are handed over */
            c->role = ROLE_APP;
            pthread_mutex_unlock(&c->lock);
            int rerr = 0;
            while (!__atomic_load_n(&p->done, __ATOMIC_ACQUIRE) && !rerr)
                rerr = read_frame(c, 1);
            pthread_mutex_lock(&c->lock);
            c->role = ROLE_NONE;
            pthread_cond_broadcast(&c->cond);
            if (rerr) {
                pthread_mutex_unlock(&c->lock);
                cr_conn_mark_dead(c, read_error(c, rerr));
                pthread_mutex_lock(&c->lock);
            }
            continue;
        }
        if (c->role == ROLE_BACKGROUND) { /* ask it to hand the socket over */
            uint64_t one = 1;
            ssize_t w = write(c->wake_fd, &one, sizeof one);
            (void)w;
        }
        pthread_cond_wait(&c->cond, &c->lock);
    }
    if (!p->done) { /* the connection died: unlink ourselves */
        for (cr_pending_t **pp = &c->pending; *pp; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                break;
            }
        p->failed = 1;
    }
    if (--c->app_waiters == 0)
        pthread_cond_broadcast(&c->cond); /* the background reader may read again */
    pthread_mutex_unlock(&c->lock);
    if (err == 0 && p->failed)
        err = CR_ECLOSED;
    if (err)
        cr_buf_free(&p->body);
    return err;
}

int cr_msg_call(cr_msg_t *m, cr_pending_t *p)
{
    cr_conn_call_start(m, p, -1);
    return cr_pending_wait(p);
}

int cr_msg_call_fd(cr_msg_t *m, cr_pending_t *p, int fd)
{
    cr_conn_call_start(m, p, fd);
    return cr_pending_wait(p);
}

void cr_pending_release(cr_pending_t *p)
{
    cr_buf_free(&p->body);
}

/* --- reading ------------------------------------------------------------------------------ */

/* Refills the read buffer. With `spin`, polls the socket without sleeping for up to spin_ns
 * first: a reply that comes within that time costs no wake-up. */
static int fill(cr_conn_t *c, int spin)
{
    int64_t deadline = spin && c->spin_ns ? cr_now_ns() + (int64_t)c->spin_ns : 0;
    for (;;) {
        ssize_t r = cr_transport_recv(&c->tr, c->rbuf, READ_BUFFER, deadline != 0);
        if (r > 0) {
            c->rpos = 0;
            c->rlen = (size_t)r;
            return 0;
        }
        if (r < 0)
            return (int)r;
        if (cr_now_ns() >= deadline)
            deadline = 0; /* from now on, sleep in recv */
    }
}

/* Reads exactly n bytes (dst may be NULL to discard them). */
static int read_exact(cr_conn_t *c, void *dst, size_t n)
{
    uint8_t *d = dst;
    while (n > 0) {
        if (c->rpos < c->rlen) {
            size_t take = c->rlen - c->rpos < n ? c->rlen - c->rpos : n;
            if (d) {
                memcpy(d, c->rbuf + c->rpos, take);
                d += take;
            }
            c->rpos += take;
            n -= take;
            continue;
        }
        if (d && n >= DIRECT_READ_MIN) { /* large bulk: straight to its destination */
            ssize_t r = cr_transport_recv(&c->tr, d, n, 0);
            if (r < 0)
                return (int)r;
            d += r;
            n -= (size_t)r;
            continue;
        }
        int err = fill(c, 0);
        if (err)
            return err;
    }
    return 0;
}

/* Reads n bulk bytes into a sink, row by row. */
static int read_into_sink(cr_conn_t *c, cr_sink_t *s, uint64_t n)
{
    while (n > 0) {
        size_t row = s->pos / s->width, col = s->pos % s->width;
        size_t take = s->width - col < n ? s->width - col : (size_t)n;
        int err = read_exact(c, s->dst + row * s->pitch + col, take);
        if (err)
            return err;
        s->pos += take;
        n -= take;
    }
    return 0;
}

static int sink_fits(const cr_sink_t *s, uint64_t n)
{
    uint64_t cap = (uint64_t)s->width * s->rows;
    return s->dst && n <= cap - s->pos;
}

/* --- what the server sends ---------------------------------------------------------------- */

static int handle_reply(cr_conn_t *c, const cr_frame_header_t *h, cr_buf_t *body)
{
    pthread_mutex_lock(&c->lock);
    cr_pending_t *p = c->pending;
    while (p && p->call_id != h->call_id)
        p = p->next;
    pthread_mutex_unlock(&c->lock);
    if (!p) {
        CR_WARN("reply for unknown call %llu (%s)", (unsigned long long)h->call_id,
                cr_opcode_name(h->opcode));
        return read_exact(c, NULL, h->bulk_len);
    }
    /* p stays valid: only this thread completes it, and its owner waits until then */
    int err = 0;
    cr_sink_t *k = &p->sink;
    if (h->bulk_len && !k->dst && h->bulk_len <= k->alloc_max && (k->dst = malloc(h->bulk_len)))
        k->width = k->pitch = h->bulk_len, k->rows = 1;
    if (h->bulk_len) {
        if (sink_fits(&p->sink, h->bulk_len)) {
            err = read_into_sink(c, &p->sink, h->bulk_len);
        } else {
            p->failed = 1;
            err = read_exact(c, NULL, h->bulk_len);
        }
    }
    if (err || (h->flags & CR_FRAME_PARTIAL))
        return err;
    pthread_mutex_lock(&c->lock);
    for (cr_pending_t **pp = &c->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    p->body = *body; /* hand the body over; the reader starts a new one */
    *body = (cr_buf_t)CR_BUF_INIT;
    __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/* The host id in a @host_func body [host id] that asks for a graph's host node; 0 when
 * the body names none (a host function launched on its own, found by its call id). */
static uint64_t host_id_of(const cr_buf_t *body)
{
    msgpack_unpacked u;
    size_t off = 0;
    uint64_t id = 0;
    msgpack_unpacked_init(&u);
    if (body->len && cr_mpcheck(body->data, body->len) == 0 &&
        msgpack_unpack_next(&u, (const char *)body->data, body->len, &off) ==
            MSGPACK_UNPACK_SUCCESS &&
        u.data.type == MSGPACK_OBJECT_ARRAY && u.data.via.array.size == 1 &&
        u.data.via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        id = u.data.via.array.ptr[0].via.u64;
    msgpack_unpacked_destroy(&u);
    return id;
}

static int handle_async(cr_conn_t *c, const cr_frame_header_t *h, const cr_buf_t *body)
{
    uint64_t v, host_id = h->opcode == CR_OP_HOST_FUNC ? host_id_of(body) : 0;
    int last = !(h->flags & CR_FRAME_PARTIAL);
    pthread_mutex_lock(&c->lock);
    int kept = host_id != 0, found;
    if (kept) /* a graph's host node: kept for every launch */
        found = cr_idmap_get(&c->kept_host_funcs, host_id, &v);
    else if ((found = cr_idmap_get(&c->async_regs, h->call_id, &v)) && last)
        cr_idmap_remove(&c->async_regs, h->call_id, NULL);
    pthread_mutex_unlock(&c->lock);
    async_reg_t *r = found ? (async_reg_t *)(uintptr_t)v : NULL;
    int err = 0;
    if (h->opcode == CR_OP_D2H_DATA) {
        if (r && !r->is_host_func && sink_fits(&r->sink, h->bulk_len))
            err = read_into_sink(c, &r->sink, h->bulk_len);
        else {
            if (h->bulk_len)
                CR_WARN("unexpected copy data for call %llu", (unsigned long long)h->call_id);
            err = read_exact(c, NULL, h->bulk_len);
        }
    } else { /* CR_OP_HOST_FUNC */
        err = read_exact(c, NULL, h->bulk_len);
        if (r && r->is_host_func && !err)
            err = cr_conn_queue_host_func(c, h->call_id, r->fn, r->data);
        else if (!r || !r->is_host_func)
            CR_WARN("server asked for an unknown host function (call %llu, host node %llu)",
                    (unsigned long long)h->call_id, (unsigned long long)host_id);
    }
    if (r && last && !kept)
        free(r);
    return err;
}

static int handle_context_error(cr_conn_t *c, const cr_frame_header_t *h, const cr_buf_t *body)
{
    msgpack_unpacked u;
    size_t off = 0;
    int r = CUDA_ERROR_LAUNCH_FAILED; /* should the body not say */
    msgpack_unpacked_init(&u);
    if (body->len && cr_mpcheck(body->data, body->len) == 0 &&
        msgpack_unpack_next(&u, (const char *)body->data, body->len, &off) ==
            MSGPACK_UNPACK_SUCCESS &&
        u.data.type == MSGPACK_OBJECT_ARRAY && u.data.via.array.size >= 1 &&
        u.data.via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
        u.data.via.array.ptr[0].via.u64 != 0) {
        r = (int)u.data.via.array.ptr[0].via.u64;
        const msgpack_object *why = u.data.via.array.size >= 2 ? &u.data.via.array.ptr[1] : NULL;
        /* once: the faulting call may have told this client already, without a reason */
        if (why && why->type == MSGPACK_OBJECT_STR && !c->context_reason_told++)
            CR_ERROR("%.*s", (int)why->via.str.size, why->via.str.ptr);
    }
    msgpack_unpacked_destroy(&u);
    __atomic_store_n(&c->context_error, r, __ATOMIC_RELEASE);
    return read_exact(c, NULL, h->bulk_len);
}

/* Device printf text: to this process's stdout, before whatever follows it on the wire. */
static int handle_device_output(cr_conn_t *c, const cr_frame_header_t *h)
{
    char chunk[4096];
    uint64_t left = h->bulk_len;
    while (left > 0) {
        size_t n = left < sizeof chunk ? (size_t)left : sizeof chunk;
        int err = read_exact(c, chunk, n);
        if (err)
            return err;
        fflush(stdout); /* the program's own buffered output first */
        for (size_t done = 0; done < n;) {
            ssize_t w = write(STDOUT_FILENO, chunk + done, n - done);
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        left -= n;
    }
    return 0;
}

/* Reads and dispatches one whole frame. The caller holds the read role. */
static int read_frame(cr_conn_t *c, int spin)
{
    uint8_t raw[CR_FRAME_HEADER_SIZE];
    cr_frame_header_t h;
    int err = 0;
    if (c->rpos == c->rlen && (err = fill(c, spin)) != 0)
        return err;
    if ((err = read_exact(c, raw, sizeof raw)) != 0)
        return err;
    if (cr_frame_decode(raw, &h) != 0)
        return CR_EPROTO;
    cr_buf_t body = CR_BUF_INIT;
    if (h.body_len &&
        (!cr_buf_grow(&body, h.body_len) || (err = read_exact(c, body.data, h.body_len)))) {
        cr_buf_free(&body);
        return err ? err : CR_ENOMEM;
    }
    if (h.flags & CR_FRAME_REPLY)
        err = handle_reply(c, &h, &body);
    else if (h.opcode == CR_OP_D2H_DATA || h.opcode == CR_OP_HOST_FUNC)
        err = handle_async(c, &h, &body);
    else if (h.opcode == CR_OP_CONTEXT_ERROR)
        err = handle_context_error(c, &h, &body);
    else if (h.opcode == CR_OP_DEVICE_OUTPUT)
        err = handle_device_output(c, &h);
    else
        err = CR_EPROTO;
    cr_buf_free(&body); /* what handle_reply did not take */
    return err;
}

/* --- a failed write ------------------------------------------------------------------------ */

/* For the thread that reads to finish what the server sent before it closed (a context
 * error, which the failed call must report): the reader meets the end of the connection at
 * once, but a loaded machine (or a sanitizer) may keep it from running for a while, and
 * only a call that already failed waits. */
#define DRAIN_WAIT_NS 2000000000LL

void cr_conn_write_failed(cr_conn_t *c, const char *why)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(DRAIN_WAIT_NS / 1000000000);
    until.tv_nsec += (long)(DRAIN_WAIT_NS % 1000000000);
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&c->lock);
    /* a thread reading now meets the end of the connection and what came before it */
    while (c->role != ROLE_NONE && !c->dead)
        if (pthread_cond_timedwait(&c->cond, &c->lock, &until) != 0)
            break;
    int mine = c->role == ROLE_NONE && !c->dead;
    if (mine)
        c->role = ROLE_APP;
    pthread_mutex_unlock(&c->lock);
    if (mine) { /* read what is already there, whole frames, without waiting for more */
        for (;;) {
            struct pollfd ready = {c->tr.fd, POLLIN, 0};
            if (c->rpos == c->rlen && !cr_transport_buffered(&c->tr) && poll(&ready, 1, 0) <= 0)
                break;
            if (read_frame(c, 0) != 0)
                break;
        }
        pthread_mutex_lock(&c->lock);
        c->role = ROLE_NONE;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
    }
    cr_conn_mark_dead(c, why);
}

/* --- the background reader ---------------------------------------------------------------- */

/* Holds the read role only while no thread waits for a reply, and gives it up when one
 * starts waiting (wake_fd). Ends when the connection dies. */
void *cr_conn_reader_main(void *arg)
{
    cr_conn_t *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->lock);
        while (!c->dead && (c->role != ROLE_NONE || c->app_waiters > 0))
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->dead) {
            pthread_mutex_unlock(&c->lock);
            return NULL;
        }
        c->role = ROLE_BACKGROUND;
        pthread_mutex_unlock(&c->lock);

        int err = 0;
        struct pollfd fds[2] = {{c->tr.fd, POLLIN, 0}, {c->wake_fd, POLLIN, 0}};
        int buffered = c->rpos < c->rlen || cr_transport_buffered(&c->tr);
        if (!buffered && poll(fds, 2, -1) < 0 && errno != EINTR)
            err = CR_EIO;
        if (fds[1].revents & POLLIN) {
            uint64_t n;
            ssize_t r = read(c->wake_fd, &n, sizeof n);
            (void)r;
        }
        /* whatever is there now, frame by frame; a waiting thread takes over after */
        while (!err && (buffered || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))) {
            fds[0].revents = 0;
            err = read_frame(c, 0);
            buffered = c->rpos < c->rlen || cr_transport_buffered(&c->tr);
            if (!err && !buffered) { /* more already on the socket? */
                struct pollfd more = {c->tr.fd, POLLIN, 0};
                if (poll(&more, 1, 0) > 0)
                    fds[0].revents = more.revents;
            }
            pthread_mutex_lock(&c->lock);
            int yield = c->app_waiters > 0;
            pthread_mutex_unlock(&c->lock);
            if (yield)
                break;
        }
        pthread_mutex_lock(&c->lock);
        c->role = ROLE_NONE;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
        if (err) {
            cr_conn_mark_dead(c, read_error(c, err));
            return NULL;
        }
    }
}
