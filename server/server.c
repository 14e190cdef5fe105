/* The I/O loop (libuv): listeners, connections, framing, and the output of every session.
 *
 * Only this thread touches sockets. Incoming bytes are cut into requests (a header, a
 * bounded body, and bulk bytes read straight into the request's own buffer) and handed to
 * the session's executor. Output queued by any thread is written here, woken by one
 * uv_async handle.
 *
 * Until its hello admits it (session.c decides, on this thread), a connection may send one
 * small hello and nothing else, within the hello deadline; it has no executor and no
 * buffer of its own yet, and the connection guard (guard.c) counts it against the limits
 * per address and in all. */
#define _GNU_SOURCE /* struct ucred */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h"
#include "dispatch.h"
#include "error.h"
#include "log.h"
#include "protocol.h"

#define READ_BUFFER (64u << 10)
#define DIRECT_READ_MIN (16u << 10)
#define MAX_PASSED_FDS 8 /* descriptors received ahead of the frames they belong to */
#define RESTART_GRACE_MS 2000

typedef struct conn_s {
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
        uv_stream_t stream;
        uv_handle_t handle;
    } h;
    cr_server_t *server;
    cr_session_t *session;
    uint8_t header[CR_FRAME_HEADER_SIZE];
    size_t header_got;
    cr_request_t *req; /* being received */
    size_t body_got;
    uint64_t bulk_got;
    int closing;
    int refused;       /* its hello was refused: nothing more is read */
    int admitted;      /* its hello named a tenant */
    uint64_t address_key; /* the guard's count it is in, 0: none */
    int64_t accepted_ns;
    struct conn_s *prev_waiting, *next_waiting; /* not admitted yet: the server's list */
    uv_shutdown_t shutdown;
} conn_t;

struct cr_server_s {
    uv_loop_t *loop;
    const cr_backend_t *backend;
    uv_async_t wakeup;
    uv_signal_t sigint, sigterm, sighup;
    pthread_mutex_t lock;
    cr_session_t *output; /* sessions with queued output or a close request */
    uint64_t next_session;
    uv_stream_t *listener[CR_MAX_LISTEN];
    int listeners;
    int connections; /* open */
    uv_async_t restart;
    uv_timer_t restart_deadline;
    int restarting;
    conn_t *waiting;       /* connections that have not been admitted, newest first */
    uv_timer_t hello_deadline;
    char rbuf[READ_BUFFER]; /* every read lands here first: nothing stays in it */
};

/* --- output -------------------------------------------------------------------------------- */

static void release_msg(cr_outmsg_t *m)
{
    if (m->session)
        cr_session_output_done(m->session, m->head.len + m->bulk_len);
    if (m->release)
        m->release(m->release_arg);
    cr_buf_free(&m->head);
    free(m);
}

/* Puts the session on the loop's list of sessions to look at. Caller holds s->lock. */
static void enqueue_locked(cr_session_t *s, int *wake)
{
    if (!s->out_queued) {
        s->out_queued = 1;
        s->refs++; /* the server's list holds it */
        *wake = 2;
    } else if (!*wake) {
        *wake = 1;
    }
}

static void add_to_list(cr_session_t *s)
{
    cr_server_t *srv = s->server;
    pthread_mutex_lock(&srv->lock);
    s->next_with_output = srv->output;
    srv->output = s;
    pthread_mutex_unlock(&srv->lock);
}

/* Writes what it can of m without blocking; returns 1 when all of it went out. */
static int write_direct(int fd, cr_outmsg_t *m)
{
    struct iovec iov[2];
    int n = 0;
    size_t total = m->head.len + m->bulk_len;
    while (m->sent < total) {
        n = 0;
        if (m->sent < m->head.len)
            iov[n++] = (struct iovec){m->head.data + m->sent, m->head.len - m->sent};
        if (m->bulk_len) {
            size_t off = m->sent > m->head.len ? m->sent - m->head.len : 0;
            iov[n++] = (struct iovec){(char *)m->bulk + off, m->bulk_len - off};
        }
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return 0; /* EAGAIN (the loop takes over) or an error (the loop will see it) */
        }
        m->sent += (size_t)w;
    }
    return 1;
}

void cr_server_send(cr_session_t *s, cr_outmsg_t *m)
{
    m->next = NULL;
    m->session = s;
    m->sent = 0;
    int wake = 0;
    pthread_mutex_lock(&s->lock);
    s->out_bytes += m->head.len + m->bulk_len; /* until release_msg */
    if (!s->stream && s->closing) { /* nobody to send it to */
        pthread_mutex_unlock(&s->lock);
        release_msg(m);
        return;
    }
    if (m->head.len && s->fd >= 0 && !s->out_head && !s->writes_in_flight && !s->direct_busy) {
        /* nothing before it: write it from this thread */
        s->direct_busy = 1;
        int fd = s->fd;
        pthread_mutex_unlock(&s->lock);
        int done = write_direct(fd, m);
        pthread_mutex_lock(&s->lock);
        s->direct_busy = 0;
        pthread_cond_broadcast(&s->cond); /* a closing connection may wait for this */
        if (done) {
            if (s->out_head) /* others queued meanwhile: the loop writes them */
                enqueue_locked(s, &wake);
            pthread_mutex_unlock(&s->lock);
            release_msg(m);
            goto wake_loop;
        }
        m->next = s->out_head; /* the rest goes first, before what others queued */
        s->out_head = m;
        if (!s->out_tail)
            s->out_tail = m;
        enqueue_locked(s, &wake);
        pthread_mutex_unlock(&s->lock);
        goto wake_loop;
    }
    if (s->out_tail)
        s->out_tail->next = m;
    else
        s->out_head = m;
    s->out_tail = m;
    enqueue_locked(s, &wake);
    pthread_mutex_unlock(&s->lock);
wake_loop:
    if (wake == 2)
        add_to_list(s);
    if (wake)
        uv_async_send(&s->server->wakeup);
}

void cr_server_wake(cr_session_t *s)
{
    cr_outmsg_t *none = calloc(1, sizeof *none); /* an empty message wakes the loop */
    if (none)
        cr_server_send(s, none);
}

void cr_server_close_connection(cr_session_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->close_requested = 1;
    pthread_mutex_unlock(&s->lock);
    cr_server_wake(s);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void on_write(uv_write_t *w, int status)
{
    cr_outmsg_t *m = w->data;
    cr_session_t *s = m->session;
    pthread_mutex_lock(&s->lock);
    s->writes_in_flight--;
    pthread_mutex_unlock(&s->lock);
    release_msg(m);
}

static void begin_close(conn_t *c, const char *why);

static void on_shutdown(uv_shutdown_t *req, int status)
{
    begin_close(req->data, "closed by the server");
}

static void drain_session(cr_session_t *s)
{
    pthread_mutex_lock(&s->lock);
    /* a direct write in progress goes first: its writer re-queues the session after it */
    cr_outmsg_t *m = s->direct_busy ? NULL : s->out_head;
    if (!s->direct_busy)
        s->out_head = s->out_tail = NULL;
    s->out_queued = 0;
    for (cr_outmsg_t *q = m; q; q = q->next)
        if (q->head.len)
            s->writes_in_flight++;
    uv_stream_t *stream = s->stream;
    int close_now = s->close_requested;
    s->close_requested = 0;
    int resume = s->resume_reading && s->reading_paused;
    if (resume)
        s->reading_paused = s->resume_reading = 0;
    pthread_mutex_unlock(&s->lock);
    if (resume && stream && !((conn_t *)stream->data)->closing)
        uv_read_start(stream, on_alloc, on_read);
    while (m) {
        cr_outmsg_t *next = m->next;
        if (!stream || m->head.len == 0) {
            if (m->head.len) {
                pthread_mutex_lock(&s->lock);
                s->writes_in_flight--;
                pthread_mutex_unlock(&s->lock);
            }
            release_msg(m);
        } else {
            /* what a direct write already sent is skipped */
            uv_buf_t bufs[2];
            unsigned n = 0;
            if (m->sent < m->head.len)
                bufs[n++] = uv_buf_init((char *)m->head.data + m->sent,
                                        (unsigned)(m->head.len - m->sent));
            if (m->bulk_len) {
                size_t off = m->sent > m->head.len ? m->sent - m->head.len : 0;
                bufs[n++] = uv_buf_init((char *)m->bulk + off, (unsigned)(m->bulk_len - off));
            }
            m->write.data = m;
            if (uv_write(&m->write, stream, bufs, n, on_write) != 0)
                on_write(&m->write, -1);
        }
        m = next;
    }
    if (close_now && stream) {
        conn_t *c = stream->data;
        c->shutdown.data = c;
        if (c->closing || uv_shutdown(&c->shutdown, stream, on_shutdown) != 0)
            begin_close(c, "closed by the server");
    }
}

static void on_wakeup(uv_async_t *a)
{
    cr_server_t *srv = a->data;
    pthread_mutex_lock(&srv->lock);
    cr_session_t *s = srv->output;
    srv->output = NULL;
    pthread_mutex_unlock(&srv->lock);
    while (s) {
        cr_session_t *next = s->next_with_output;
        drain_session(s);
        cr_session_unref(s);
        s = next;
    }
}

/* --- input ---------------------------------------------------------------------------------- */

static void exit_for_restart(void);

static void forget_waiting(conn_t *c)
{
    if (c->prev_waiting)
        c->prev_waiting->next_waiting = c->next_waiting;
    else if (c->server->waiting == c)
        c->server->waiting = c->next_waiting;
    if (c->next_waiting)
        c->next_waiting->prev_waiting = c->prev_waiting;
    c->prev_waiting = c->next_waiting = NULL;
}

static void on_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    cr_server_t *srv = c->server;
    forget_waiting(c);
    if (c->address_key)
        cr_guard_release(c->address_key);
    cr_request_free(c->req);
    if (c->session)
        cr_session_unref(c->session);
    free(c);
    if (--srv->connections == 0 && srv->restarting)
        exit_for_restart();
}

static void begin_close(conn_t *c, const char *why)
{
    if (c->closing)
        return;
    c->closing = 1;
    if (c->session)
        cr_session_close(c->session, why);
    uv_close(&c->h.handle, on_closed);
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

/* The next descriptor the client passed (Unix sockets), or -1. Descriptors arrive with the
 * first byte of the write that carried them, so by the time the frame they came with is
 * complete, they are here; they are taken in the order sent. */
static int take_passed_fd(conn_t *c)
{
    if (c->h.handle.type != UV_NAMED_PIPE || uv_pipe_pending_count(&c->h.pipe) == 0)
        return -1;
    uv_pipe_t *tmp = malloc(sizeof *tmp);
    if (!tmp)
        return -1;
    /* libuv hands a passed descriptor over only as a handle; take a copy of it */
    uv_pipe_init(c->h.handle.loop, tmp, 0);
    uv_os_fd_t raw;
    int fd = -1;
    if (uv_accept(&c->h.stream, (uv_stream_t *)tmp) == 0 &&
        uv_fileno((uv_handle_t *)tmp, &raw) == 0)
        fd = fcntl(raw, F_DUPFD_CLOEXEC, 0);
    uv_close((uv_handle_t *)tmp, free_handle);
    return fd;
}

/* A request is complete: route it (the executor decodes it). Returns 0 or CR_EPROTO. */
static int complete(conn_t *c)
{
    cr_request_t *req = c->req;
    c->req = NULL;
    c->header_got = c->body_got = 0;
    c->bulk_got = 0;
    if (req->hdr.flags & (CR_FRAME_REPLY | CR_FRAME_PARTIAL)) {
        cr_request_free(req);
        return CR_EPROTO;
    }
    if (cr_dispatch_on_loop(req)) /* e.g. @host_func_done: a stream waits for it */
        return 0;
    if (!c->admitted) { /* the hello (start_request let nothing else through) */
        char why[256];
        if (cr_session_admit(c->session, req, why, sizeof why) != 0) {
            /* the refusal is on its way: the connection closes once it is written */
            cr_guard_refuse(CR_GUARD_HELLO_REFUSED, c->session->peer, why);
            cr_request_free(req);
            c->refused = 1;
            forget_waiting(c); /* it closes once the refusal is written */
            uv_read_stop(&c->h.stream);
            cr_server_close_connection(c->session);
            return 0;
        }
        c->admitted = 1;
        forget_waiting(c);
    }
    if (cr_opcode_rule(req->hdr.opcode)->flags & CR_OPR_PASSES_FD)
        req->fd = take_passed_fd(c);
    if (cr_executor_submit(c->session, req)) { /* the executor is behind: the client waits */
        CR_DEBUG("session %llu: input paused", (unsigned long long)c->session->id);
        uv_read_stop(&c->h.stream);
    }
    return 0;
}

static int start_request(conn_t *c)
{
    cr_frame_header_t h;
    int err = cr_frame_decode(c->header, &h);
    if (err)
        return err;
    if ((err = cr_request_admissible(&h, c->admitted)) != 0)
        return err; /* before anything is buffered */
    if (!(c->req = cr_request_new(c->session, &h)))
        return CR_ENOMEM;
    c->body_got = 0;
    c->bulk_got = 0;
    return 0;
}

static int request_done(const conn_t *c)
{
    return c->req && c->body_got == c->req->hdr.body_len && c->bulk_got == c->req->hdr.bulk_len;
}

/* Consumes n bytes from the read buffer. */
static int feed(conn_t *c, const uint8_t *p, size_t n)
{
    while (n > 0) {
        if (!c->req) {
            size_t take = CR_FRAME_HEADER_SIZE - c->header_got;
            take = take < n ? take : n;
            memcpy(c->header + c->header_got, p, take);
            c->header_got += take;
            p += take;
            n -= take;
            if (c->header_got < CR_FRAME_HEADER_SIZE)
                return 0;
            int err = start_request(c);
            if (err)
                return err;
        } else if (c->body_got < c->req->hdr.body_len) {
            size_t take = c->req->hdr.body_len - c->body_got;
            take = take < n ? take : n;
            memcpy(c->req->body + c->body_got, p, take);
            c->body_got += take;
            p += take;
            n -= take;
        } else {
            uint64_t left = c->req->hdr.bulk_len - c->bulk_got;
            size_t take = left < n ? (size_t)left : n;
            memcpy(c->req->bulk + c->bulk_got, p, take);
            c->bulk_got += take;
            p += take;
            n -= take;
        }
        if (request_done(c)) {
            int err = complete(c);
            if (err || c->refused)
                return err;
        }
    }
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn_t *c = h->data;
    (void)suggested;
    if (c->req && c->body_got == c->req->hdr.body_len) {
        uint64_t left = c->req->hdr.bulk_len - c->bulk_got;
        if (left >= DIRECT_READ_MIN) { /* bulk bytes go straight to their buffer */
            *buf = uv_buf_init((char *)c->req->bulk + c->bulk_got,
                               left > (1u << 30) ? (1u << 30) : (unsigned)left);
            return;
        }
    }
    *buf = uv_buf_init(c->server->rbuf, sizeof c->server->rbuf);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = stream->data;
    if (nread < 0) {
        begin_close(c, nread == UV_EOF ? "client disconnected" : uv_strerror((int)nread));
        return;
    }
    if (nread == 0 || c->closing || c->refused)
        return;
    int err = 0;
    if (buf->base != c->server->rbuf) {
        c->bulk_got += (uint64_t)nread;
        if (request_done(c))
            err = complete(c);
    } else {
        err = feed(c, (const uint8_t *)buf->base, (size_t)nread);
    }
    /* descriptors nobody asked for pile up in the server: a client may have a few in
     * flight, never more */
    if (!err && c->h.handle.type == UV_NAMED_PIPE &&
        uv_pipe_pending_count(&c->h.pipe) > MAX_PASSED_FDS)
        err = CR_EPROTO;
    if (err) {
        char why[128];
        if (c->admitted)
            snprintf(why, sizeof why, "malformed frame (%s)", cr_strerror(err));
        else if (err == CR_EPERM)
            snprintf(why, sizeof why, "its first frame was not a hello of at most %u bytes",
                     CR_HELLO_MAX_BODY);
        else
            snprintf(why, sizeof why, "malformed frame (%s) before its hello", cr_strerror(err));
        char detail[192];
        snprintf(detail, sizeof detail, "session %llu: %s", (unsigned long long)c->session->id,
                 why);
        cr_guard_refuse(c->admitted ? CR_GUARD_MALFORMED : CR_GUARD_BEFORE_HELLO,
                        c->session->peer, detail);
        begin_close(c, why);
    }
}

/* The peer as "host:port" (or "local socket") into out, and what the connection guard
 * counts it under into host_out: its host, or for a local socket its user, so that one
 * local user's connections cannot crowd out another's. */
static void peer_name(uv_stream_t *stream, int is_pipe, char *out, size_t len, char *host_out,
                      size_t host_len)
{
    if (is_pipe) {
        struct ucred cred;
        socklen_t cred_len = sizeof cred;
        uv_os_fd_t fd = -1;
        snprintf(out, len, "local socket");
        if (uv_fileno((uv_handle_t *)stream, &fd) == 0 &&
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0)
            snprintf(host_out, host_len, "local uid %u", (unsigned)cred.uid);
        else
            snprintf(host_out, host_len, "local");
        return;
    }
    struct sockaddr_storage ss;
    int n = sizeof ss;
    char host[64] = "?";
    int port = 0;
    if (uv_tcp_getpeername((uv_tcp_t *)stream, (struct sockaddr *)&ss, &n) == 0) {
        if (ss.ss_family == AF_INET) {
            uv_ip4_name((struct sockaddr_in *)&ss, host, sizeof host);
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            uv_ip6_name((struct sockaddr_in6 *)&ss, host, sizeof host);
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    snprintf(out, len, "%s:%d", host, port);
    snprintf(host_out, host_len, "%s", host);
}

static void on_connection(uv_stream_t *listener, int status)
{
    cr_server_t *srv = listener->data;
    if (status < 0) {
        CR_WARN("accept failed: %s", uv_strerror(status));
        return;
    }
    int is_pipe = listener->type == UV_NAMED_PIPE;
    conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->server = srv;
    srv->connections++;
    if (is_pipe) /* ipc: the client may pass memfds (shared memory, shm.c) */
        uv_pipe_init(srv->loop, &c->h.pipe, 1);
    else
        uv_tcp_init(srv->loop, &c->h.tcp);
    c->h.handle.data = c;
    if (uv_accept(listener, &c->h.stream) != 0) {
        uv_close(&c->h.handle, on_closed);
        return;
    }
    if (!is_pipe)
        uv_tcp_nodelay(&c->h.tcp, 1);
    char peer[128], host[64];
    peer_name(&c->h.stream, is_pipe, peer, sizeof peer, host, sizeof host);
    int refuse = cr_guard_accept(host, &c->address_key);
    if (refuse >= 0) {
        c->address_key = 0;
        cr_guard_refuse(refuse, peer, NULL);
        uv_close(&c->h.handle, on_closed);
        return;
    }
    c->session = cr_session_new(srv, srv->backend, ++srv->next_session, peer);
    if (!c->session) {
        CR_ERROR("cannot start a session for %s", peer);
        uv_close(&c->h.handle, on_closed);
        return;
    }
    uv_os_fd_t fd = -1;
    uv_fileno(&c->h.handle, &fd);
    pthread_mutex_lock(&c->session->lock);
    c->session->stream = &c->h.stream;
    c->session->fd = fd;
    pthread_mutex_unlock(&c->session->lock);
    c->accepted_ns = cr_now_ns();
    c->next_waiting = srv->waiting;
    if (srv->waiting)
        srv->waiting->prev_waiting = c;
    srv->waiting = c;
    uv_read_start(&c->h.stream, on_alloc, on_read);
}

/* Drops the connections that have not been admitted within the hello deadline (a client
 * that connects and says nothing, or says it a byte at a time). */
static void on_hello_deadline(uv_timer_t *t)
{
    cr_server_t *srv = t->data;
    int64_t deadline = cr_now_ns() - (int64_t)cr_guard_limits()->hello_timeout_ms * 1000000;
    conn_t *next;
    for (conn_t *c = srv->waiting; c; c = next) {
        next = c->next_waiting;
        if (c->accepted_ns <= deadline && !c->closing) {
            forget_waiting(c);
            cr_guard_refuse(CR_GUARD_HELLO_TIMEOUT, c->session->peer, NULL);
            begin_close(c, "no hello in time");
        }
    }
}

/* --- listeners and the loop ---------------------------------------------------------------- */

int cr_listen_bind(const char *text, int allow_unix, cr_listener_t *out)
{
    static uv_loop_t bind_loop; /* holds the bound handles for as long as the process lives */
    static int bind_loop_ready;
    cr_address_t addr;
    if (cr_address_parse(text, &addr) != 0 || (addr.is_unix && !allow_unix)) {
        CR_ERROR("%s: not an address (%s)", text, allow_unix ? "host:port or unix:/path"
                                                             : "host:port");
        return CR_EINVAL;
    }
    if (!bind_loop_ready) {
        if (uv_loop_init(&bind_loop) != 0)
            return CR_ENOMEM;
        bind_loop_ready = 1;
    }
    int rc;
    uv_handle_t *handle;
    if (addr.is_unix) {
        uv_pipe_t *p = malloc(sizeof *p);
        if (!p)
            return CR_ENOMEM;
        uv_pipe_init(&bind_loop, p, 0);
        unlink(addr.path); /* a stale socket of an earlier run */
        rc = uv_pipe_bind(p, addr.path);
        handle = (uv_handle_t *)p;
    } else {
        uv_tcp_t *t = malloc(sizeof *t);
        if (!t)
            return CR_ENOMEM;
        struct sockaddr_storage sa;
        uv_tcp_init(&bind_loop, t);
        rc = uv_ip4_addr(addr.host, addr.port, (struct sockaddr_in *)&sa);
        if (rc != 0)
            rc = uv_ip6_addr(addr.host, addr.port, (struct sockaddr_in6 *)&sa);
        if (rc == 0)
            rc = uv_tcp_bind(t, (struct sockaddr *)&sa, 0);
        handle = (uv_handle_t *)t;
    }
    uv_os_fd_t fd = -1;
    if (rc == 0)
        rc = uv_fileno(handle, &fd);
    /* listening here, before any server process runs: clients that connect while the
     * server process restarts wait in the backlog */
    if (rc == 0 && listen(fd, 128) != 0)
        rc = uv_translate_sys_error(errno);
    if (rc != 0) {
        CR_ERROR("cannot listen on %s: %s", text, uv_strerror(rc));
        uv_close(handle, (uv_close_cb)free);
        return CR_EIO;
    }
    out->fd = fd;
    out->is_unix = addr.is_unix;
    snprintf(out->bound, sizeof out->bound, "%s", text);
    if (!addr.is_unix) { /* the real port: tests listen on port 0 */
        struct sockaddr_storage bound;
        int len = sizeof bound;
        char host[64] = "?";
        if (uv_tcp_getsockname((uv_tcp_t *)handle, (struct sockaddr *)&bound, &len) == 0) {
            int port = 0;
            if (bound.ss_family == AF_INET) {
                uv_ip4_name((struct sockaddr_in *)&bound, host, sizeof host);
                port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
            } else {
                uv_ip6_name((struct sockaddr_in6 *)&bound, host, sizeof host);
                port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
            }
            snprintf(out->bound, sizeof out->bound, "%s%s%s:%d",
                     bound.ss_family == AF_INET6 ? "[" : "", host,
                     bound.ss_family == AF_INET6 ? "]" : "", port);
        }
    }
    return 0;
}

uv_stream_t *cr_listen_adopt(uv_loop_t *loop, const cr_listener_t *l, uv_connection_cb on_conn,
                             void *data)
{
    uv_stream_t *stream;
    int rc;
    if (l->is_unix) {
        uv_pipe_t *p = malloc(sizeof *p);
        if (!p)
            return NULL;
        uv_pipe_init(loop, p, 0);
        rc = uv_pipe_open(p, l->fd);
        stream = (uv_stream_t *)p;
    } else {
        uv_tcp_t *t = malloc(sizeof *t);
        if (!t)
            return NULL;
        uv_tcp_init(loop, t);
        rc = uv_tcp_open(t, l->fd);
        stream = (uv_stream_t *)t;
    }
    stream->data = data;
    if (rc == 0)
        rc = uv_listen(stream, 128, on_conn);
    if (rc != 0) {
        CR_ERROR("cannot accept on %s: %s", l->bound, uv_strerror(rc));
        uv_close((uv_handle_t *)stream, (uv_close_cb)free);
        return NULL;
    }
    return stream;
}

/* --- restarting: the device context is lost ------------------------------------------------ */

static cr_server_t *the_server; /* for a restart asked for from any thread */

static void exit_for_restart(void)
{
    CR_INFO("the server process exits; a fresh one takes over the device");
    _exit(CR_EXIT_RESTART); /* no teardown: the broken context is the driver's to drop */
}

static void on_restart_deadline(uv_timer_t *t)
{
    (void)t;
    exit_for_restart();
}

static void on_restart(uv_async_t *a)
{
    cr_server_t *srv = a->data;
    if (srv->restarting)
        return;
    srv->restarting = 1;
    /* no new connections here: they wait in the listening sockets' backlog, which the
     * supervisor keeps open, for the next server process */
    for (int i = 0; i < srv->listeners; i++)
        uv_close((uv_handle_t *)srv->listener[i], (uv_close_cb)free);
    srv->listeners = 0;
    if (srv->connections == 0)
        exit_for_restart();
    /* sessions were told and asked to close once their output is written; a client that
     * does not read gets RESTART_GRACE_MS */
    uv_timer_init(srv->loop, &srv->restart_deadline);
    uv_timer_start(&srv->restart_deadline, on_restart_deadline, RESTART_GRACE_MS, 0);
}

void cr_server_restart(void)
{
    if (the_server)
        uv_async_send(&the_server->restart);
}

static void on_signal(uv_signal_t *sig, int signum)
{
    CR_INFO("signal %d: stopping", signum);
    uv_stop(sig->loop);
}

static void on_sighup(uv_signal_t *sig, int signum)
{
    cr_tenants_reload(); /* sessions carry on */
}

int cr_server_run(const cr_backend_t *b, const cr_listener_t *listeners, int listener_count,
                  const cr_listener_t *metrics)
{
    static cr_server_t srv;
    cr_backend_bind_thread(b); /* the loop releases staging buffers once they are written */
    srv.loop = uv_default_loop();
    srv.backend = b;
    pthread_mutex_init(&srv.lock, NULL);
    uv_async_init(srv.loop, &srv.wakeup, on_wakeup);
    srv.wakeup.data = &srv;
    uv_async_init(srv.loop, &srv.restart, on_restart);
    srv.restart.data = &srv;
    the_server = &srv;
    uv_signal_init(srv.loop, &srv.sigint);
    uv_signal_init(srv.loop, &srv.sigterm);
    uv_signal_start(&srv.sigint, on_signal, SIGINT);
    uv_signal_start(&srv.sigterm, on_signal, SIGTERM);
    uv_signal_init(srv.loop, &srv.sighup);
    uv_signal_start(&srv.sighup, on_sighup, SIGHUP);
    unsigned tick = cr_guard_limits()->hello_timeout_ms / 4;
    uv_timer_init(srv.loop, &srv.hello_deadline);
    srv.hello_deadline.data = &srv;
    uv_timer_start(&srv.hello_deadline, on_hello_deadline, tick ? tick : 1, tick ? tick : 1);
    for (int i = 0; i < listener_count; i++) {
        uv_stream_t *l = cr_listen_adopt(srv.loop, &listeners[i], on_connection, &srv);
        if (!l)
            return 1;
        srv.listener[srv.listeners++] = l;
    }
    if (metrics && cr_metrics_listen(srv.loop, b, metrics) != 0)
        return 1;
    uv_run(srv.loop, UV_RUN_DEFAULT);
    return 0;
}
