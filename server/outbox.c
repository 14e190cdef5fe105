/* Output to clients: replies and messages any thread queues for a session.
 *
 * A message is written straight from the sending thread when nothing is queued or being
 * written before it (no hand-off to the loop on the way out); otherwise, or for what a
 * direct write could not finish without blocking, it is queued and the loop writes it,
 * woken by the server's one uv_async handle. Both paths keep the session's output in
 * order. Every byte queued counts toward the session's unsent output until it is written
 * or dropped (cr_unsent_written); a closing session's output is dropped.
 *
 * On a TLS connection the writer encrypts as it goes, a bounded piece at a time
 * (CR_TLS_SEAL_CHUNK) into the session's tls_wire: a direct writer while the socket takes
 * it, the loop for the rest, one piece written at a time (tls_busy). Whoever encrypts also
 * writes, so the records go out in the order they were made. A message is released once
 * it is encrypted: the ciphertext is the copy that waits.
 *
 * Threads: cr_server_send, cr_server_wake and cr_server_close_connection from any thread;
 * the drain on the loop thread. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "log.h"
#include "loop.h"
#include "session_private.h"
#include "session.h"

/* Sessions with output or requests for the loop, and the loop's doorbell. */
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_session_t *pending;
static uv_async_t *doorbell;

void cr_outbox_init(uv_async_t *wakeup)
{
    doorbell = wakeup;
}

static void release_msg(cr_outmsg_t *m)
{
    if (m->session)
        cr_unsent_written(m->session, m->head.len + m->bulk_len);
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
    pthread_mutex_lock(&pending_lock);
    s->next_with_output = pending;
    pending = s;
    pthread_mutex_unlock(&pending_lock);
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

/* Sends what is left of tls_wire without blocking; returns 1 when all of it went out. */
static int write_wire(cr_session_t *s, int fd)
{
    while (s->tls_wire_sent < s->tls_wire.len) {
        ssize_t w = send(fd, s->tls_wire.data + s->tls_wire_sent,
                         s->tls_wire.len - s->tls_wire_sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return 0;
        }
        s->tls_wire_sent += (size_t)w;
    }
    s->tls_wire.len = s->tls_wire_sent = 0;
    return 1;
}

/* Encrypts up to `room` more bytes of m into tls_wire; returns 1 once all of m is in, -1
 * when TLS failed (the connection is then closed). */
static int seal_message(cr_session_t *s, cr_outmsg_t *m, size_t room)
{
    struct iovec iov[2] = {{m->head.data, m->head.len}, {(void *)m->bulk, m->bulk_len}};
    ssize_t k = cr_tls_seal(s->tls, iov, m->bulk_len ? 2 : 1, m->sent, room, &s->tls_wire);
    if (k < 0)
        return -1;
    m->sent += (size_t)k;
    return m->sent == m->head.len + m->bulk_len;
}

/* The direct write of m on a TLS connection: piece by piece while the socket takes it. 1
 * when all of m went out; 0 when the rest (the unsent ciphertext in tls_wire, and what of
 * m is not encrypted yet) is the loop's; -1 when TLS failed (m is dropped). Runs with
 * direct_busy. */
static int write_direct_tls(cr_session_t *s, int fd, cr_outmsg_t *m)
{
    for (;;) {
        int all = seal_message(s, m, CR_TLS_SEAL_CHUNK);
        if (all < 0) {
            s->tls_wire.len = s->tls_wire_sent = 0;
            return -1;
        }
        if (!write_wire(s, fd))
            return 0;
        if (all)
            return 1;
    }
}

void cr_server_send(cr_session_t *s, cr_outmsg_t *m)
{
    m->next = NULL;
    m->session = s;
    m->sent = 0;
    int wake = 0, close_after = 0;
    pthread_mutex_lock(&s->lock);
    s->out_bytes += m->head.len + m->bulk_len; /* until release_msg */
    if (!s->stream && s->closing) {            /* nobody to send it to */
        pthread_mutex_unlock(&s->lock);
        release_msg(m);
        return;
    }
    if (m->head.len && s->fd >= 0 && !s->out_head && !s->writes_in_flight && !s->direct_busy &&
        s->tls_wire.len == 0) {
        /* nothing before it: write it from this thread */
        s->direct_busy = 1;
        int fd = s->fd;
        pthread_mutex_unlock(&s->lock);
        int done = s->tls ? write_direct_tls(s, fd, m) : write_direct(fd, m);
        if (done < 0) {
            CR_WARN("session %llu: TLS: %s", (unsigned long long)s->id, cr_tls_why(s->tls));
            close_after = 1;
            done = 1;
        }
        pthread_mutex_lock(&s->lock);
        s->direct_busy = 0;
        pthread_cond_broadcast(&s->cond); /* a closing connection may wait for this */
        if (done) {
            /* others queued meanwhile, or a close waits for this: the loop's turn */
            if (s->out_head || s->close_requested)
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
        uv_async_send(doorbell);
    if (close_after)
        cr_server_close_connection(s);
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

static void on_write(uv_write_t *w, int status)
{
    cr_outmsg_t *m = w->data;
    cr_session_t *s = m->session;
    pthread_mutex_lock(&s->lock);
    s->writes_in_flight--;
    pthread_mutex_unlock(&s->lock);
    release_msg(m);
}

static unsigned flush_tls(cr_session_t *s, uv_stream_t **stream_out);

unsigned cr_outbox_flush(cr_session_t *s, uv_stream_t **stream_out)
{
    if (s->tls)
        return flush_tls(s, stream_out);
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
    /* the connection closes once everything queued before went out: not while a direct
     * write runs, since what is queued behind it (a context error's notice) would be lost;
     * its writer queues the session again when it is done */
    int close_now = s->close_requested && !s->direct_busy;
    if (close_now)
        s->close_requested = 0;
    int resume = cr_unsent_take_resume_locked(s);
    pthread_mutex_unlock(&s->lock);
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
                bufs[n++] =
                    uv_buf_init((char *)m->head.data + m->sent, (unsigned)(m->head.len - m->sent));
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
    *stream_out = stream;
    return (resume && stream ? CR_OUTBOX_RESUME : 0u) |
           (close_now && stream ? CR_OUTBOX_CLOSE : 0u);
}

cr_session_t *cr_outbox_take(void)
{
    pthread_mutex_lock(&pending_lock);
    cr_session_t *s = pending;
    pending = NULL;
    pthread_mutex_unlock(&pending_lock);
    return s;
}

void cr_outbox_attach(cr_session_t *s, uv_stream_t *stream, int fd, cr_tls_t *tls)
{
    pthread_mutex_lock(&s->lock);
    s->stream = stream;
    s->fd = fd;
    s->tls = tls;
    pthread_mutex_unlock(&s->lock);
}

cr_session_t *cr_outbox_next(const cr_session_t *s)
{
    return s->next_with_output;
}

/* --- TLS: the loop's writer --------------------------------------------------------------- */

static void pump(cr_session_t *s, uv_stream_t *stream);

/* Drops what is queued (the connection is gone or TLS failed). */
static void drop_queued(cr_session_t *s)
{
    pthread_mutex_lock(&s->lock);
    cr_outmsg_t *m = s->out_head;
    s->out_head = s->out_tail = NULL;
    pthread_mutex_unlock(&s->lock);
    while (m) {
        cr_outmsg_t *next = m->next;
        release_msg(m);
        m = next;
    }
}

/* A piece of ciphertext was written: the next one (through the doorbell, which also acts on
 * requests to close or read again). */
static void on_tls_write(uv_write_t *w, int status)
{
    cr_session_t *s = w->data;
    int wake = 0;
    if (status < 0) /* the connection is broken: nothing more goes out, and it closes */
        drop_queued(s);
    pthread_mutex_lock(&s->lock);
    s->tls_wire.len = s->tls_wire_sent = 0;
    s->tls_busy = 0;
    s->writes_in_flight--;
    if (status < 0)
        s->close_requested = 1;
    if (s->stream)
        enqueue_locked(s, &wake);
    pthread_mutex_unlock(&s->lock);
    if (wake == 2)
        add_to_list(s);
    if (wake)
        uv_async_send(doorbell);
}

/* Encrypts the next piece of the queue (or what TLS itself has to send) and writes it.
 * Loop thread, not while a direct writer or another piece is at work. */
static void pump(cr_session_t *s, uv_stream_t *stream)
{
    pthread_mutex_lock(&s->lock);
    if (s->tls_busy || s->direct_busy) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->tls_busy = 1; /* from here, no direct writer starts */
    s->writes_in_flight++;
    pthread_mutex_unlock(&s->lock);
    int failed = 0;
    if (s->tls_wire_sent == s->tls_wire.len) { /* nothing left over: encrypt more */
        s->tls_wire.len = s->tls_wire_sent = 0;
        failed = cr_tls_take(s->tls, &s->tls_wire) < 0;
        while (!failed && s->tls_wire.len < CR_TLS_SEAL_CHUNK) {
            pthread_mutex_lock(&s->lock);
            cr_outmsg_t *m = s->out_head; /* only this thread takes from the head now */
            pthread_mutex_unlock(&s->lock);
            if (!m)
                break;
            int all = m->head.len ? seal_message(s, m, CR_TLS_SEAL_CHUNK - s->tls_wire.len) : 1;
            if (all < 0) {
                failed = 1;
                break;
            }
            if (!all)
                break;
            pthread_mutex_lock(&s->lock);
            s->out_head = m->next;
            if (!s->out_head)
                s->out_tail = NULL;
            pthread_mutex_unlock(&s->lock);
            release_msg(m); /* the ciphertext is its copy now */
        }
    }
    if (failed) {
        CR_WARN("session %llu: TLS: %s", (unsigned long long)s->id, cr_tls_why(s->tls));
        s->tls_wire.len = s->tls_wire_sent = 0;
        drop_queued(s);
        cr_server_close_connection(s);
    }
    uv_buf_t buf = uv_buf_init((char *)s->tls_wire.data + s->tls_wire_sent,
                               (unsigned)(s->tls_wire.len - s->tls_wire_sent));
    s->tls_write.data = s;
    if (buf.len == 0 || uv_write(&s->tls_write, stream, &buf, 1, on_tls_write) != 0) {
        pthread_mutex_lock(&s->lock);
        s->tls_busy = 0;
        s->writes_in_flight--;
        pthread_mutex_unlock(&s->lock);
        if (buf.len != 0) { /* the stream is closing */
            s->tls_wire.len = s->tls_wire_sent = 0;
            drop_queued(s);
        }
    }
}

static unsigned flush_tls(cr_session_t *s, uv_stream_t **stream_out)
{
    pthread_mutex_lock(&s->lock);
    s->out_queued = 0;
    uv_stream_t *stream = s->stream;
    int resume = cr_unsent_take_resume_locked(s);
    pthread_mutex_unlock(&s->lock);
    *stream_out = stream;
    if (!stream) { /* closed: nothing more goes out */
        drop_queued(s);
        return 0;
    }
    pump(s, stream); /* does nothing while a piece is being written or a direct writer runs */
    pthread_mutex_lock(&s->lock);
    /* the connection closes only once everything queued before went out */
    int idle = !s->tls_busy && !s->direct_busy && !s->out_head && s->tls_wire.len == 0;
    int close_now = s->close_requested && idle;
    if (close_now)
        s->close_requested = 0;
    pthread_mutex_unlock(&s->lock);
    return (resume ? CR_OUTBOX_RESUME : 0u) | (close_now ? CR_OUTBOX_CLOSE : 0u);
}

void cr_outbox_set_tls(cr_session_t *s, cr_tls_t *tls)
{
    pthread_mutex_lock(&s->lock);
    cr_tls_t *old = s->tls;
    s->tls = tls;
    pthread_mutex_unlock(&s->lock);
    cr_tls_free(old);
}

void cr_outbox_free(cr_session_t *s)
{
    cr_tls_free(s->tls);
    s->tls = NULL;
    cr_buf_free(&s->tls_wire);
}
