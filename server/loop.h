/* The server process's loop and its output: frames to clients (message.c), their queue
 * and writing (outbox.c), and the loop with its restarts (server.c). */
#ifndef CR_SERVER_LOOP_H
#define CR_SERVER_LOOP_H

#include <msgpack.h>

#include "buf.h"
#include "listen.h"
#include "session.h"
#include "tls.h"

typedef struct cr_outmsg_s {
    struct cr_outmsg_s *next;
    cr_buf_t head; /* header and body */
    const void *bulk;
    size_t bulk_len;
    size_t sent;             /* bytes of head + bulk already written */
    void (*release)(void *); /* called with release_arg once written (or dropped) */
    void *release_arg;
    uv_write_t write;
    cr_session_t *session;
} cr_outmsg_t;

/* Builds a frame for the client (message.c): pack its body with *pk, then finish it with its
 * header (a reply carries CR_FRAME_REPLY). */
cr_outmsg_t *cr_message_new(uint16_t opcode, uint64_t call_id, uint32_t flags, msgpack_packer *pk);
void cr_message_finish(cr_outmsg_t *m, uint16_t opcode, uint64_t call_id, uint32_t flags);
/* unsent.c: */
/* Output bytes of the session's that have been written or dropped (any thread). */
void cr_unsent_written(cr_session_t *s, uint64_t bytes);
/* Device-to-host bytes about to be staged for the session's output, and their release
 * once written: the executor runs nothing more while a session's unsent output passes
 * its bound, so a client that does not read holds only its own work back. */
void cr_unsent_stage(cr_session_t *s, uint64_t bytes);
void cr_unsent_unstage(cr_session_t *s, uint64_t bytes);
/* The session's unsent output has passed its bound (--max-unsent): its executor runs
 * nothing more until the client reads. Caller holds s->lock. */
int cr_unsent_full_locked(const cr_session_t *s);
/* Whether the session's executor asked for its paused connection to be read again; the
 * request is taken (cr_outbox_flush takes it too). The _locked one with s->lock held. */
int cr_unsent_take_resume(cr_session_t *s);
int cr_unsent_take_resume_locked(cr_session_t *s);
/* The loop's doorbell, rung when a session has output or a request for the loop (call
 * once before any output). */
void cr_outbox_init(uv_async_t *wakeup);
/* Where the session's output goes: its connection's stream, written by the loop, and its
 * socket, written straight from a sending thread when nothing is queued before; with tls
 * (which the session then owns), encrypted on the way (loop thread). */
void cr_outbox_attach(cr_session_t *s, uv_stream_t *stream, int fd, cr_tls_t *tls);
/* Drops TLS from a session's output before anything was sent (a plaintext client on a TLS
 * listener is answered in plaintext); frees the old one (loop thread). */
void cr_outbox_set_tls(cr_session_t *s, cr_tls_t *tls);
/* Frees what the session's output holds (session.c, at the last reference). */
void cr_outbox_free(cr_session_t *s);
/* The sessions that rang since the last take, one after another (cr_outbox_next); the
 * loop flushes each and drops the reference the list held (loop thread). */
cr_session_t *cr_outbox_take(void);
cr_session_t *cr_outbox_next(const cr_session_t *s);
enum { CR_OUTBOX_RESUME = 1, CR_OUTBOX_CLOSE = 2 };

/* Writes the session's queued output to its connection (*stream: NULL once it closed) and
 * returns what else the connection should do: read again (CR_OUTBOX_RESUME, its executor
 * caught up) and close once written (CR_OUTBOX_CLOSE). Loop thread. */
unsigned cr_outbox_flush(cr_session_t *s, uv_stream_t **stream);
/* Queues a message for the client (any thread). Takes ownership of m. */
void cr_server_send(cr_session_t *s, cr_outmsg_t *m);
/* Wakes the loop to look at the session (output, close and resume requests). */
void cr_server_wake(cr_session_t *s);
/* Closes the session's connection once its queued output is written (any thread). */
void cr_server_close_connection(cr_session_t *s);

/* Serves clients on the listeners (and /metrics on `metrics`, unless NULL) until
 * SIGINT/SIGTERM. Returns the exit status. */
int cr_server_run(const cr_backend_t *b, const cr_listener_t *listeners, int listener_count,
                  const cr_listener_t *metrics);
/* Ends this server process once its sessions have been told (any thread): listeners are
 * closed, connections close after their queued output, and the process exits with
 * CR_EXIT_RESTART (at the latest after a short grace period). */
void cr_server_restart(void);

#endif
