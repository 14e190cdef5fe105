/* Connections: accepting clients, reading their frames, closing.
 *
 * Incoming bytes are cut into requests (a header, a bounded body, and bulk bytes read
 * straight into the request's own buffer) and handed to the session's executor; a frame
 * the rules of its opcode refuse (cr_frame_admissible) ends the connection before
 * anything is allocated for it. Until its hello admits it (hello.c decides, on this
 * thread), a connection may send one small hello and nothing else, within the hello
 * deadline; it has no executor and no buffer of its own yet, and the connection guard
 * (guard.c) counts it against the limits per address and in all.
 *
 * Threads: the loop thread only. */
#define _GNU_SOURCE /* struct ucred */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "dispatch.h"
#include "error.h"
#include "guard.h"
#include "hello.h"
#include "le.h"
#include "log.h"
#include "loop.h"
#include "loop_private.h"
#include "protocol.h"
#include "session.h"
#include "tls_config.h"

#define DIRECT_READ_MIN (16u << 10)

#define MAX_PASSED_FDS 8 /* descriptors received ahead of the frames they belong to */

#define PLAIN_ON_TLS                                                                               \
    "this server speaks TLS on this port: connect with CUDA_REMOTE_ADDR=tls://host:port"

static void begin_close(conn_t *c, const char *why);

static void on_shutdown(uv_shutdown_t *req, int status)
{
    begin_close(req->data, "closed by the server");
}

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
    if (--srv->connections == 0 && srv->on_last_closed)
        srv->on_last_closed(); /* a restart waits for it */
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
    uv_close((uv_handle_t *)tmp, cr_free_handle);
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
        char why[600];
        if (c->plain_on_tls) { /* answered in plaintext, so that the client can read why */
            snprintf(why, sizeof why, "%s", PLAIN_ON_TLS);
            cr_hello_refuse(req, CUDA_ERROR_NOT_PERMITTED, why);
            cr_guard_refuse(CR_GUARD_TLS, cr_session_peer(c->session), why);
            goto refused;
        }
        if (cr_session_admit(c->session, req, why, sizeof why) != 0) {
            /* the refusal is on its way: the connection closes once it is written */
            cr_guard_refuse(CR_GUARD_HELLO_REFUSED, cr_session_peer(c->session), why);
        refused:
            cr_request_free(req);
            c->refused = 1;
            forget_waiting(c); /* it closes once the refusal is written */
            uv_read_stop(&c->h.stream);
            cr_server_close_connection(c->session);
            return 0;
        }
        c->admitted = 1;
        forget_waiting(c);
        if (c->tls)
            cr_tls_keep_buffers(c->tls);
    }
    if (cr_opcode_rule(req->hdr.opcode)->flags & CR_OPR_PASSES_FD)
        req->fd = take_passed_fd(c);
    if (cr_executor_submit(c->session, req)) { /* the executor is behind: the client waits */
        CR_DEBUG("session %llu: input paused", (unsigned long long)cr_session_id(c->session));
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
    if ((err = cr_frame_admissible(&h, c->admitted)) != 0)
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

/* The handshake is done: says so at debug level (admission reads the client's certificate
 * from the session's TLS when the hello comes). */
static void tls_established(conn_t *c)
{
    char how[96], subject[256];
    c->tls_ready = 1;
    cr_tls_describe(c->tls, how, sizeof how);
    cr_tls_peer_subject(c->tls, subject, sizeof subject);
    CR_DEBUG("session %llu: %s from %s%s%s", (unsigned long long)cr_session_id(c->session), how,
             cr_session_peer(c->session), subject[0] ? ", certificate " : "", subject);
}

/* The handshake failed: the alert that says why goes to the client, then the connection
 * closes. A client that sent a frame of ours in plaintext is answered in plaintext. */
static void tls_failed(conn_t *c, const uint8_t *p, size_t n, int first)
{
    if (first && n >= 4 && cr_le_get32(p) == CR_FRAME_MAGIC) {
        c->plain_on_tls = 1; /* its hello is refused (complete), in plaintext */
        c->tls = NULL;
        cr_outbox_set_tls(c->session, NULL);
        int err = feed(c, p, n);
        if (err)
            begin_close(c, "malformed frame");
        return;
    }
    char why[400];
    snprintf(why, sizeof why, "TLS: %s", cr_tls_why(c->tls));
    cr_guard_refuse(CR_GUARD_TLS, cr_session_peer(c->session), why);
    c->refused = 1;
    forget_waiting(c);
    uv_read_stop(&c->h.stream);
    cr_server_close_connection(c->session); /* after the alert */
}

/* Ciphertext from the client: the handshake, then plaintext into feed, or a request's bulk
 * bytes straight into its buffer. Everything in p is taken before it returns (p is the
 * loop's one read buffer). */
static int tls_input(conn_t *c, const uint8_t *p, size_t n)
{
    const uint8_t *start = p;
    size_t total = n;
    int first = !c->tls_started, err = 0;
    c->tls_started = 1;
    while (!err && !c->closing && !c->refused) {
        size_t used = 0;
        if (!c->tls_ready) {
            int rc = cr_tls_handshake(c->tls, p, n, &used);
            p += used;
            n -= used;
            if (rc < 0) {
                tls_failed(c, start, total, first);
                return 0;
            }
            if (rc == 0)
                break;
            tls_established(c);
            continue;
        }
        uint8_t *dst = (uint8_t *)c->server->plain;
        size_t cap = sizeof c->server->plain;
        int direct = c->req && c->body_got == c->req->hdr.body_len &&
                     c->req->hdr.bulk_len - c->bulk_got >= DIRECT_READ_MIN;
        if (direct) { /* bulk bytes are decrypted into their buffer */
            dst = c->req->bulk + c->bulk_got;
            cap = (size_t)(c->req->hdr.bulk_len - c->bulk_got);
        }
        ssize_t got = cr_tls_read(c->tls, p, n, &used, dst, cap);
        p += used;
        n -= used;
        if (got == 0)
            break;
        if (got < 0) {
            char why[400];
            snprintf(why, sizeof why, "TLS: %s",
                     got == CR_ECLOSED ? "the client closed the connection" : cr_tls_why(c->tls));
            begin_close(c, why);
            return 0;
        }
        if (direct) {
            c->bulk_got += (uint64_t)got;
            if (request_done(c))
                err = complete(c);
        } else {
            err = feed(c, dst, (size_t)got);
        }
    }
    if (c->tls && cr_tls_has_output(c->tls)) /* handshake messages, alerts */
        cr_server_wake(c->session);
    return err;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn_t *c = h->data;
    (void)suggested;
    if (!c->tls && c->req && c->body_got == c->req->hdr.body_len) {
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
    if (c->tls) {
        err = tls_input(c, (const uint8_t *)buf->base, (size_t)nread);
    } else if (buf->base != c->server->rbuf) {
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
        snprintf(detail, sizeof detail, "session %llu: %s",
                 (unsigned long long)cr_session_id(c->session), why);
        cr_guard_refuse(c->admitted ? CR_GUARD_MALFORMED : CR_GUARD_BEFORE_HELLO,
                        cr_session_peer(c->session), detail);
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

void cr_conn_accept(uv_stream_t *listener, int status)
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
    if (!is_pipe && cr_tls_config_enabled() && !(c->tls = cr_tls_config_connection())) {
        CR_ERROR("cannot start TLS for %s: out of memory", peer);
        begin_close(c, "out of memory");
        return;
    }
    uv_os_fd_t fd = -1;
    uv_fileno(&c->h.handle, &fd);
    cr_outbox_attach(c->session, &c->h.stream, fd, c->tls); /* the session owns c->tls */
    c->accepted_ns = cr_now_ns();
    c->next_waiting = srv->waiting;
    if (srv->waiting)
        srv->waiting->prev_waiting = c;
    srv->waiting = c;
    if (uv_read_start(&c->h.stream, on_alloc, on_read) != 0)
        begin_close(c, "the server cannot read the connection");
}

/* Drops the connections that have not been admitted within the hello deadline (a client
 * that connects and says nothing, or says it a byte at a time). */
void cr_conn_check_hello_deadlines(uv_timer_t *t)
{
    cr_server_t *srv = t->data;
    int64_t deadline = cr_now_ns() - (int64_t)cr_guard_limits()->hello_timeout_ms * 1000000;
    conn_t *next;
    for (conn_t *c = srv->waiting; c; c = next) {
        next = c->next_waiting;
        if (c->accepted_ns <= deadline && !c->closing) {
            forget_waiting(c);
            cr_guard_refuse(CR_GUARD_HELLO_TIMEOUT, cr_session_peer(c->session), NULL);
            begin_close(c, "no hello in time");
        }
    }
}

static void resume_reading(conn_t *c)
{
    if (!c->closing && uv_read_start(&c->h.stream, on_alloc, on_read) != 0)
        begin_close(c, "the server cannot read the connection");
}

static void shut(conn_t *c)
{
    c->shutdown.data = c;
    if (c->closing || uv_shutdown(&c->shutdown, &c->h.stream, on_shutdown) != 0)
        begin_close(c, "closed by the server");
}

void cr_conn_on_output(uv_async_t *wakeup)
{
    (void)wakeup;
    for (cr_session_t *s = cr_outbox_take(), *next; s; s = next) {
        next = cr_outbox_next(s);
        uv_stream_t *stream;
        unsigned actions = cr_outbox_flush(s, &stream);
        if (actions & CR_OUTBOX_RESUME)
            resume_reading(stream->data);
        if (actions & CR_OUTBOX_CLOSE)
            shut(stream->data);
        cr_session_unref(s);
    }
}
