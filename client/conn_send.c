/* Sending (conn.h): requests are built straight into the connection's send buffer under
 * its send lock; asynchronous ones stay there, coalesced, until a request that waits, a
 * referenced payload or a full buffer flushes them. Bulk payloads above a few KiB are not
 * copied: the buffer refers to them and the flush gathers them into one sendmsg.
 *
 * Threads: application threads and the callback thread (acknowledgements). The send lock
 * is held from cr_msg_begin to the send; the flush may block in sendmsg while the socket
 * is full, until the server reads. */
#include "conn_state.h"

#include <stdlib.h>
#include <sys/uio.h>

#include "error.h"
#include "frame.h"
#include "cr_opcodes.h"
#include "log.h"

#define FLUSH_THRESHOLD (64u << 10) /* coalesce asynchronous requests up to this many bytes */
#define COPY_BULK_MAX (8u << 10)    /* smaller bulk payloads are copied into the buffer */

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
    int err = cr_transport_writev(&c->tr, iov, n, pass_fd);
    if (iov != stack_iov)
        free(iov);
    cr_buf_reset(&c->out);
    c->ref_count = 0;
    if (err)
        cr_conn_write_failed(c, c->tr.why[0] ? c->tr.why : "write to the server failed");
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
    cr_frame_header_t h = {CR_PROTOCOL_VERSION, m->opcode,  flags, body_len,
                           m->call_id,          m->bulk_len};
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
    /* the server would refuse the frame and end the connection: the same rule, here */
    if (m->bulk_len > cr_opcode_rule(m->opcode)->bulk_limit) {
        CR_WARN("%s: %llu bytes of payload, more than the %llu it may carry: not sent",
                cr_opcode_name(m->opcode), (unsigned long long)m->bulk_len,
                cr_opcode_rule(m->opcode)->bulk_limit);
        cr_msg_cancel(m);
        return CR_ETOOBIG;
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

int cr_conn_send_now(cr_msg_t *m)
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

int cr_conn_call_start(cr_msg_t *m, cr_pending_t *p, int pass_fd)
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
    return cr_conn_call_start(m, p, -1);
}
