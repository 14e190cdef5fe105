/* The client's connection to cuda-remoted.
 *
 * One connection per process, shared by all threads. Requests are built straight into one
 * send buffer under a lock; asynchronous ones stay there (coalesced) until a request that
 * waits, a payload too large to copy or a full buffer flushes them. Bulk payloads larger
 * than a few KiB are not copied: the send buffer refers to them and the flush gathers them
 * into one sendmsg.
 *
 * One thread at a time reads what the server sends, whole frames: a thread waiting for its
 * reply reads the socket itself (polling it briefly before it sleeps, CUDA_REMOTE_SPIN_US)
 * and hands the replies of other threads to them; while no thread waits, a background
 * reader thread (started by cr_conn_open) reads, so that asynchronous data and host
 * functions progress without a synchronizing call. Whichever thread reads puts the bulk
 * bytes of a reply straight into the caller's destination, the data of an asynchronous
 * device-to-host copy into its registered destination, device printf output on stdout, and
 * queues host-function requests for a callback thread (started at the first), which runs
 * them in order and acknowledges each.
 *
 * The connection is the stub's bottom layer: it knows frames and threads, nothing of CUDA
 * calls. conn.c opens it and keeps its state, conn_send.c sends, conn_read.c receives,
 * conn_callback.c runs host functions; conn_state.h is what they share. */
#ifndef CR_CONN_H
#define CR_CONN_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "address.h"
#include "buf.h"

typedef struct cr_conn_s cr_conn_t;

/* Where the bulk bytes of a reply or of an asynchronous device-to-host copy go: `rows`
 * rows of `width` bytes, `pitch` bytes apart, filled in order. A reply whose size the
 * caller cannot know (a linked image) sets only alloc_max: the reader then allocates dst
 * for bulk bytes up to that many, and the caller frees it. */
typedef struct {
    uint8_t *dst;
    size_t width;
    size_t pitch;
    size_t rows;
    size_t pos; /* bytes received so far */
    size_t alloc_max;
} cr_sink_t;

/* A request that waits for its reply. Lives on the caller's stack. */
typedef struct cr_pending_s {
    cr_conn_t *conn;
    uint64_t call_id;
    int send_err;
    struct cr_pending_s *next;
    int done;
    int failed;     /* the connection died or the reply did not fit: no valid body */
    cr_sink_t sink; /* zero-sized when the reply carries no bulk bytes */
    cr_buf_t body;  /* the reply's msgpack body */
} cr_pending_t;

/* A message under construction: holds the connection's send lock from begin to send. */
typedef struct {
    cr_conn_t *conn;
    size_t start; /* offset of the frame header in the send buffer */
    size_t body_start;
    uint32_t body_len; /* set by cr_msg_bulk */
    uint64_t bulk_len;
    uint16_t opcode;
    uint64_t call_id;
    int flags;
    msgpack_packer pk;
} cr_msg_t;

/* Connects and starts the background reader. 0, or CR_E* with a reason in err. */
int cr_conn_open(const cr_address_t *addr, cr_conn_t **out, char *err, size_t err_len);

/* Locks the send side and starts a frame. Pack the body with m->pk. Fails with CR_ECLOSED
 * when the connection is gone (the lock is then not held). */
int cr_msg_begin(cr_conn_t *c, cr_msg_t *m, uint16_t opcode);
/* Adds bulk bytes after the body (call once, after the body is complete). Bytes are
 * referenced, not copied, unless small: they must stay valid until cr_msg_send/call
 * returns, which flushes when it referenced them. */
void cr_msg_bulk(cr_msg_t *m, const void *data, size_t len);
/* Finishes an asynchronous request and unlocks. The frame may stay buffered. */
int cr_msg_send(cr_msg_t *m);
/* Finishes a request, sends everything buffered, unlocks and waits for the reply.
 * p->sink must be set (or zeroed) by the caller. On success p->body holds the reply body
 * (free it with cr_pending_release). CR_ECLOSED when the connection died. */
int cr_msg_call(cr_msg_t *m, cr_pending_t *p);
void cr_pending_release(cr_pending_t *p);
/* cr_msg_call in two halves, so that one thread can keep several requests in flight:
 * start sends, cr_pending_wait (always called once after start, even when start failed)
 * waits for the reply and returns what cr_msg_call would. */
int cr_msg_call_start(cr_msg_t *m, cr_pending_t *p);
int cr_pending_wait(cr_pending_t *p);
/* cr_msg_call with a file descriptor passed along (SCM_RIGHTS; Unix sockets only). */
int cr_msg_call_fd(cr_msg_t *m, cr_pending_t *p, int fd);
/* Abandons a message being built (an argument turned out invalid) and unlocks. */
void cr_msg_cancel(cr_msg_t *m);

/* Sends whatever asynchronous requests are buffered. */
int cr_conn_flush(cr_conn_t *c);

/* Registers where the data of the asynchronous device-to-host copy with this call id goes.
 * Call before sending the request (use cr_msg_begin's call id). */
int cr_conn_expect_data(cr_conn_t *c, uint64_t call_id, const cr_sink_t *sink);
/* Registers a host function the server will ask to run for this call id. */
int cr_conn_expect_host_func(cr_conn_t *c, uint64_t call_id, void (*fn)(void *), void *data);
/* Keeps a host function of a graph's host node under host_id (not 0, unique): the server
 * asks for it by that id, at every launch of a graph that holds the node, for as long as
 * the process lives (executable graphs outlive their graphs). */
int cr_conn_keep_host_func(cr_conn_t *c, uint64_t host_id, void (*fn)(void *), void *data);
/* The function and data kept under host_id: 1, or 0 when none is. */
int cr_conn_kept_host_func(cr_conn_t *c, uint64_t host_id, void (**fn)(void *), void **data);
/* Runs fn(data) on the thread that runs host functions, after those already queued, with
 * no acknowledgement to the server (user objects' destructors). 0 or CR_ENOMEM. */
int cr_conn_run_later(cr_conn_t *c, void (*fn)(void *), void *data);

/* The CUresult the server said broke this client's context (a kernel fault), or 0. Calls
 * that need the server fail with it (cr_msg_begin returns CR_EBROKEN). */
int cr_conn_context_error(cr_conn_t *c);
/* 1 once the connection has failed; the reason is kept for messages. */
int cr_conn_dead(cr_conn_t *c);
/* Why the connection failed, or NULL while it works. */
const char *cr_conn_why(cr_conn_t *c);
/* The hello succeeded: from now on a connection that fails is reported as lost (before, a
 * server that refuses the hello closes it, and the refusal is the message). */
void cr_conn_established(cr_conn_t *c);

#endif
