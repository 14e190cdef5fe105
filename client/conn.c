/* The client's connection: send buffer, reader thread, pending replies, asynchronous data
 * and host-function callbacks (see conn.h). */
#include "conn.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <limits.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "clock.h"
#include "cr_opcodes.h"
#include "error.h"
#include "frame.h"
#include "idmap.h"
#include "log.h"
#include "mpcheck.h"

#ifndef IOV_MAX
#define IOV_MAX 1024 /* Linux's UIO_MAXIOV */
#endif

#define FLUSH_THRESHOLD (64u << 10) /* coalesce asynchronous requests up to this many bytes */
#define COPY_BULK_MAX (8u << 10)    /* smaller bulk payloads are copied into the buffer */
#define READ_BUFFER (256u << 10)
#define DIRECT_READ_MIN (16u << 10) /* larger bulk reads bypass the read buffer */
/* A waiting thread polls the socket this long before sleeping: a wake-up costs 25-35 us on
 * a virtual machine, a reply from a near server comes sooner. CUDA_REMOTE_SPIN_US sets it. */
#define DEFAULT_SPIN_US 50

typedef struct {
    size_t at; /* offset in the send buffer where these bytes belong */
    const void *data;
    size_t len;
} bulk_ref_t;

/* Something the server will send for an asynchronous request. */
typedef struct {
    int is_host_func;
    cr_sink_t sink;
    void (*fn)(void *);
    void *data;
} async_reg_t;

typedef struct callback_job_s {
    struct callback_job_s *next;
    uint64_t call_id;
    void (*fn)(void *);
    void *data;
} callback_job_t;

struct cr_conn_s {
    int fd;
    char address[300];

    pthread_mutex_t send_lock;
    cr_buf_t out;
    bulk_ref_t *refs;
    size_t ref_count, ref_cap;
    uint64_t next_call_id;

    pthread_mutex_t lock; /* pending list, async registrations, dead, the read role */
    pthread_cond_t cond;  /* broadcast when a reply completes or the read role is free */
    cr_pending_t *pending;
    cr_idmap_t async_regs; /* call id -> async_reg_t * */
    int dead;
    int established; /* the hello succeeded (cr_conn_established) */
    int context_error; /* CUresult the server said broke the context, 0 if none */
    int context_reason_told; /* the server's reason was printed (receiving thread only) */

    /* Reading: one thread at a time holds the read role and reads whole frames. A thread
     * waiting for its reply reads itself (spinning briefly first), so a round trip costs no
     * thread hand-off; the background reader reads only while nobody waits, so that
     * asynchronous data and host functions progress without a synchronizing call. */
    int role;             /* ROLE_* */
    int app_waiters;      /* threads waiting for a reply */
    int wake_fd;          /* eventfd: asks the background reader to give up the role */
    uint8_t *rbuf;
    size_t rpos, rlen;
    pthread_t reader;
    uint64_t spin_ns;     /* how long a waiting thread polls the socket before sleeping */

    pthread_mutex_t cb_lock;
    pthread_cond_t cb_cond;
    callback_job_t *cb_head, *cb_tail;
    pthread_t cb_thread;
    int cb_started;
};

enum { ROLE_NONE, ROLE_APP, ROLE_BACKGROUND };

static int read_frame(cr_conn_t *c, int spin);
static void mark_dead(cr_conn_t *c, const char *why);

/* --- sending -------------------------------------------------------------------------- */

/* Writes iov; pass_fd >= 0 travels (SCM_RIGHTS) with the first bytes. */
static int write_all_iov(int fd, struct iovec *iov, int n, int pass_fd)
{
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    while (n > 0) {
        /* sendmsg, not writev: MSG_NOSIGNAL keeps a closed connection from raising SIGPIPE
         * in the application */
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)(n > IOV_MAX ? IOV_MAX : n)};
        if (pass_fd >= 0) {
            memset(&control, 0, sizeof control);
            msg.msg_control = control.space;
            msg.msg_controllen = sizeof control.space;
            struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
        }
        ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return CR_EIO;
        }
        pass_fd = -1; /* sent with the first bytes */
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

static void mark_dead(cr_conn_t *c, const char *why);

/* Writes the send buffer and the payloads it refers to, with pass_fd (or -1) attached.
 * Caller holds send_lock. */
static int flush_locked(cr_conn_t *c, int pass_fd)
{
    if (c->out.len == 0)
        return 0;
    struct iovec stack_iov[64], *iov = stack_iov;
    size_t need = 2 * c->ref_count + 1;
    if (need > 64) {
        iov = malloc(need * sizeof *iov);
        if (!iov)
            return CR_ENOMEM;
    }
    int n = 0;
    size_t pos = 0;
    for (size_t i = 0; i < c->ref_count; i++) {
        if (c->refs[i].at > pos)
            iov[n++] = (struct iovec){c->out.data + pos, c->refs[i].at - pos};
        iov[n++] = (struct iovec){(void *)c->refs[i].data, c->refs[i].len};
        pos = c->refs[i].at;
    }
    if (c->out.len > pos)
        iov[n++] = (struct iovec){c->out.data + pos, c->out.len - pos};
    int err = write_all_iov(c->fd, iov, n, pass_fd);
    if (iov != stack_iov)
        free(iov);
    cr_buf_reset(&c->out);
    c->ref_count = 0;
    if (err)
        mark_dead(c, "write to the server failed");
    return err;
}

int cr_msg_begin(cr_conn_t *c, cr_msg_t *m, uint16_t opcode)
{
    pthread_mutex_lock(&c->send_lock);
    if (cr_conn_dead(c)) {
        pthread_mutex_unlock(&c->send_lock);
        return CR_ECLOSED;
    }
    if (__atomic_load_n(&c->context_error, __ATOMIC_ACQUIRE)) {
        pthread_mutex_unlock(&c->send_lock);
        return CR_EBROKEN;
    }
    m->conn = c;
    m->opcode = opcode;
    m->call_id = ++c->next_call_id;
    m->bulk_len = 0;
    m->flags = 0;
    m->start = c->out.len;
    if (!cr_buf_grow(&c->out, CR_FRAME_HEADER_SIZE)) {
        pthread_mutex_unlock(&c->send_lock);
        return CR_ENOMEM;
    }
    m->body_start = c->out.len;
    msgpack_packer_init(&m->pk, &c->out, cr_buf_msgpack_write);
    return 0;
}

void cr_msg_bulk(cr_msg_t *m, const void *data, size_t len)
{
    cr_conn_t *c = m->conn;
    m->body_len = (uint32_t)(c->out.len - m->body_start); /* the body ends here */
    m->bulk_len = len;
    if (len == 0)
        return;
    if (len <= COPY_BULK_MAX) {
        cr_buf_append(&c->out, data, len);
        return;
    }
    if (c->ref_count == c->ref_cap) {
        size_t cap = c->ref_cap ? 2 * c->ref_cap : 8;
        bulk_ref_t *r = realloc(c->refs, cap * sizeof *r);
        if (!r) {
            c->out.failed = 1;
            return;
        }
        c->refs = r;
        c->ref_cap = cap;
    }
    c->refs[c->ref_count++] = (bulk_ref_t){c->out.len, data, len};
}

/* Writes the frame header in place. */
static void finish_frame(cr_msg_t *m, uint32_t flags)
{
    cr_conn_t *c = m->conn;
    uint32_t body_len = m->bulk_len ? m->body_len : (uint32_t)(c->out.len - m->body_start);
    cr_frame_header_t h = {CR_PROTOCOL_VERSION, m->opcode, flags, body_len, m->call_id,
                           m->bulk_len};
    cr_frame_encode(&h, c->out.data + m->start);
}

void cr_msg_cancel(cr_msg_t *m)
{
    cr_conn_t *c = m->conn;
    c->out.len = m->start;
    c->out.failed = 0;
    while (c->ref_count && c->refs[c->ref_count - 1].at > m->start)
        c->ref_count--;
    pthread_mutex_unlock(&c->send_lock);
}

static int send_common(cr_msg_t *m, uint32_t flags, int flush, int pass_fd)
{
    cr_conn_t *c = m->conn;
    if (c->out.failed) {
        cr_msg_cancel(m);
        return CR_ENOMEM;
    }
    finish_frame(m, flags);
    int err = 0;
    if (flush || c->ref_count || c->out.len >= FLUSH_THRESHOLD)
        err = flush_locked(c, pass_fd);
    pthread_mutex_unlock(&c->send_lock);
    return err;
}

int cr_msg_send(cr_msg_t *m)
{
    return send_common(m, CR_FRAME_ASYNC, 0, -1);
}

/* An asynchronous message that must not wait in the buffer (acknowledgements). */
static int cr_msg_send_now(cr_msg_t *m)
{
    return send_common(m, CR_FRAME_ASYNC, 1, -1);
}

int cr_conn_flush(cr_conn_t *c)
{
    pthread_mutex_lock(&c->send_lock);
    int err = flush_locked(c, -1);
    pthread_mutex_unlock(&c->send_lock);
    return err;
}

static int call_start(cr_msg_t *m, cr_pending_t *p, int pass_fd)
{
    cr_conn_t *c = m->conn;
    p->conn = c;
    p->call_id = m->call_id;
    p->done = p->failed = 0;
    p->body = (cr_buf_t)CR_BUF_INIT;
    p->sink.pos = 0;

    pthread_mutex_lock(&c->lock);
    p->next = c->pending;
    c->pending = p;
    c->app_waiters++;
    pthread_mutex_unlock(&c->lock);

    p->send_err = send_common(m, 0, 1, pass_fd);
    return p->send_err;
}

int cr_msg_call_start(cr_msg_t *m, cr_pending_t *p)
{
    return call_start(m, p, -1);
}

int cr_msg_call_fd(cr_msg_t *m, cr_pending_t *p, int fd)
{
    call_start(m, p, fd);
    return cr_pending_wait(p);
}

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
                mark_dead(c, rerr == CR_ECLOSED ? "connection closed by the server"
                           : rerr == CR_EPROTO  ? "malformed frame from the server"
                                                : "read failed");
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
    call_start(m, p, -1);
    return cr_pending_wait(p);
}

void cr_pending_release(cr_pending_t *p)
{
    cr_buf_free(&p->body);
}

int cr_conn_expect_data(cr_conn_t *c, uint64_t call_id, const cr_sink_t *sink)
{
    async_reg_t *r = calloc(1, sizeof *r);
    if (!r)
        return CR_ENOMEM;
    r->sink = *sink;
    r->sink.pos = 0;
    pthread_mutex_lock(&c->lock);
    int err = cr_idmap_put(&c->async_regs, call_id, (uint64_t)(uintptr_t)r);
    pthread_mutex_unlock(&c->lock);
    if (err)
        free(r);
    return err;
}

int cr_conn_expect_host_func(cr_conn_t *c, uint64_t call_id, void (*fn)(void *), void *data)
{
    async_reg_t *r = calloc(1, sizeof *r);
    if (!r)
        return CR_ENOMEM;
    r->is_host_func = 1;
    r->fn = fn;
    r->data = data;
    pthread_mutex_lock(&c->lock);
    int err = cr_idmap_put(&c->async_regs, call_id, (uint64_t)(uintptr_t)r);
    pthread_mutex_unlock(&c->lock);
    if (err)
        free(r);
    return err;
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

const char *cr_conn_address(cr_conn_t *c)
{
    return c->address;
}

/* --- host functions ------------------------------------------------------------------- */

static void *callback_main(void *arg)
{
    cr_conn_t *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->cb_lock);
        while (!c->cb_head)
            pthread_cond_wait(&c->cb_cond, &c->cb_lock);
        callback_job_t *job = c->cb_head;
        c->cb_head = job->next;
        if (!c->cb_head)
            c->cb_tail = NULL;
        pthread_mutex_unlock(&c->cb_lock);

        job->fn(job->data);

        cr_msg_t m;
        if (cr_msg_begin(c, &m, CR_OP_HOST_FUNC_DONE) == 0) {
            m.call_id = job->call_id; /* the acknowledgement names the launch it answers */
            msgpack_pack_array(&m.pk, 0);
            cr_msg_send_now(&m);
        }
        free(job);
    }
    return NULL;
}

static int queue_callback(cr_conn_t *c, uint64_t call_id, void (*fn)(void *), void *data)
{
    callback_job_t *job = calloc(1, sizeof *job);
    if (!job)
        return CR_ENOMEM;
    job->call_id = call_id;
    job->fn = fn;
    job->data = data;
    pthread_mutex_lock(&c->cb_lock);
    if (!c->cb_started) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int rc = pthread_create(&c->cb_thread, NULL, callback_main, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
            pthread_mutex_unlock(&c->cb_lock);
            free(job);
            return CR_ENOMEM;
        }
        pthread_detach(c->cb_thread);
        c->cb_started = 1;
    }
    if (c->cb_tail)
        c->cb_tail->next = job;
    else
        c->cb_head = job;
    c->cb_tail = job;
    pthread_cond_signal(&c->cb_cond);
    pthread_mutex_unlock(&c->cb_lock);
    return 0;
}

/* --- receiving ------------------------------------------------------------------------ */

static void mark_dead(cr_conn_t *c, const char *why)
{
    pthread_mutex_lock(&c->lock);
    if (!c->dead) {
        c->dead = 1;
        /* before the hello, its own failure says what happened; after a context error, the
         * server closed the connection on purpose */
        if (c->established && !__atomic_load_n(&c->context_error, __ATOMIC_ACQUIRE))
            CR_ERROR("connection to cuda-remoted at %s lost: %s", c->address, why);
    }
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* Refills the read buffer. With `spin`, polls the socket without sleeping for up to spin_ns
 * first: a reply that comes within that time costs no wake-up. */
static int fill(cr_conn_t *c, int spin)
{
    int64_t deadline = spin && c->spin_ns ? cr_now_ns() + (int64_t)c->spin_ns : 0;
    for (;;) {
        ssize_t r = recv(c->fd, c->rbuf, READ_BUFFER, deadline ? MSG_DONTWAIT : 0);
        if (r > 0) {
            c->rpos = 0;
            c->rlen = (size_t)r;
            return 0;
        }
        if (r == 0)
            return CR_ECLOSED;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return CR_EIO;
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
            ssize_t r = recv(c->fd, d, n, 0);
            if (r > 0) {
                d += r;
                n -= (size_t)r;
                continue;
            }
            if (r < 0 && errno == EINTR)
                continue;
            return r == 0 ? CR_ECLOSED : CR_EIO;
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

static int handle_async(cr_conn_t *c, const cr_frame_header_t *h)
{
    uint64_t v;
    int last = !(h->flags & CR_FRAME_PARTIAL);
    pthread_mutex_lock(&c->lock);
    int found = cr_idmap_get(&c->async_regs, h->call_id, &v);
    if (found && last)
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
            err = queue_callback(c, h->call_id, r->fn, r->data);
        else if (!r || !r->is_host_func)
            CR_WARN("server asked for an unknown host function (call %llu)",
                    (unsigned long long)h->call_id);
    }
    if (r && last)
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
    if (h.body_len && (!cr_buf_grow(&body, h.body_len) || (err = read_exact(c, body.data,
                                                                              h.body_len)))) {
        cr_buf_free(&body);
        return err ? err : CR_ENOMEM;
    }
    if (h.flags & CR_FRAME_REPLY)
        err = handle_reply(c, &h, &body);
    else if (h.opcode == CR_OP_D2H_DATA || h.opcode == CR_OP_HOST_FUNC)
        err = handle_async(c, &h);
    else if (h.opcode == CR_OP_CONTEXT_ERROR)
        err = handle_context_error(c, &h, &body);
    else if (h.opcode == CR_OP_DEVICE_OUTPUT)
        err = handle_device_output(c, &h);
    else
        err = CR_EPROTO;
    cr_buf_free(&body); /* what handle_reply did not take */
    return err;
}

/* The background reader: holds the read role only while no thread waits for a reply, and
 * gives it up when one starts waiting (wake_fd). */
static void *reader_main(void *arg)
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
        struct pollfd fds[2] = {{c->fd, POLLIN, 0}, {c->wake_fd, POLLIN, 0}};
        if (c->rpos == c->rlen && poll(fds, 2, -1) < 0 && errno != EINTR)
            err = CR_EIO;
        if (fds[1].revents & POLLIN) {
            uint64_t n;
            ssize_t r = read(c->wake_fd, &n, sizeof n);
            (void)r;
        }
        /* whatever is there now, frame by frame; a waiting thread takes over after */
        while (!err && (c->rpos < c->rlen || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))) {
            fds[0].revents = 0;
            err = read_frame(c, 0);
            if (!err && c->rpos == c->rlen) { /* more already on the socket? */
                struct pollfd more = {c->fd, POLLIN, 0};
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
            mark_dead(c, err == CR_ECLOSED ? "connection closed by the server"
                         : err == CR_EPROTO ? "malformed frame from the server"
                                            : "read failed");
            return NULL;
        }
    }
}

int cr_conn_open(const cr_address_t *addr, cr_conn_t **out, char *err, size_t err_len)
{
    char reason[256] = "";
    int fd = cr_address_connect(addr, 10000, reason, sizeof reason);
    if (fd < 0) {
        snprintf(err, err_len, "%s", reason);
        return fd;
    }
    cr_conn_t *c = calloc(1, sizeof *c);
    uint8_t *rbuf = malloc(READ_BUFFER);
    if (!c || !rbuf) {
        free(c);
        free(rbuf);
        close(fd);
        snprintf(err, err_len, "out of memory");
        return CR_ENOMEM;
    }
    c->fd = fd;
    c->rbuf = rbuf;
    if (addr->is_unix)
        snprintf(c->address, sizeof c->address, "unix:%s", addr->path);
    else
        snprintf(c->address, sizeof c->address, "%s:%d", addr->host, addr->port);
    pthread_mutex_init(&c->send_lock, NULL);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    const char *spin = getenv("CUDA_REMOTE_SPIN_US");
    c->spin_ns = (spin ? strtoull(spin, NULL, 10) : DEFAULT_SPIN_US) * 1000;
    pthread_mutex_init(&c->cb_lock, NULL);
    pthread_cond_init(&c->cb_cond, NULL);
    /* the reader must not take signals meant for the application's threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&c->reader, NULL, reader_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(fd);
        free(rbuf);
        free(c);
        snprintf(err, err_len, "cannot start the reader thread");
        return CR_ENOMEM;
    }
    pthread_detach(c->reader);
    *out = c;
    return 0;
}
