/* What the loop's files share and no other module uses: server.c (the loop, restarts,
 * signals), connection.c (connections and their input), outbox.c (output to clients),
 * listen.c (listening sockets). */
#ifndef CR_SERVER_LOOP_PRIVATE_H
#define CR_SERVER_LOOP_PRIVATE_H

#include "backend.h"
#include "loop.h"
#include "request.h"
#include "session.h"
#include "tls.h"

/* Every read lands in one buffer of the loop's first: nothing stays in it. */
#define CR_READ_BUFFER (64u << 10)

/* A client connection, as the loop holds it (connection.c). */
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
    int refused;          /* its hello was refused: nothing more is read */
    int admitted;         /* its hello named a tenant */
    cr_tls_t *tls;        /* TLS on this connection (the session owns it), NULL: plaintext */
    int tls_started;      /* ciphertext has come in */
    int tls_ready;        /* its handshake is done */
    int plain_on_tls;     /* it spoke plaintext to TLS: its hello is refused, in plaintext */
    uint64_t address_key; /* the guard's count it is in, 0: none */
    int64_t accepted_ns;
    struct conn_s *prev_waiting, *next_waiting; /* not admitted yet: the server's list */
    uv_shutdown_t shutdown;
} conn_t;

/* The loop and what it serves (server.c runs it). */
struct cr_server_s {
    uv_loop_t *loop;
    const cr_backend_t *backend;
    uv_async_t wakeup;
    uv_signal_t sigint, sigterm, sighup;
    uint64_t next_session;
    uv_stream_t *listener[CR_MAX_LISTEN];
    int listeners;
    int connections; /* open */
    uv_async_t restart;
    uv_timer_t restart_deadline;
    int restarting;
    void (*on_last_closed)(void); /* set while restarting: the last connection closed */
    conn_t *waiting;              /* connections that have not been admitted, newest first */
    uv_timer_t hello_deadline;
    char rbuf[CR_READ_BUFFER];  /* every read lands here first: nothing stays in it */
    char plain[CR_READ_BUFFER]; /* what TLS decrypts from rbuf, unless it goes to a request */
};

/* connection.c */
/* Accepts a client on a listener (its data is the server). */
void cr_conn_accept(uv_stream_t *listener, int status);
/* Drops the connections that have not said hello within the hello deadline (a timer). */
void cr_conn_check_hello_deadlines(uv_timer_t *t);
/* The doorbell (server->wakeup): writes what sessions queued for their clients, and acts
 * on their requests to read again or to close. */
void cr_conn_on_output(uv_async_t *wakeup);


#endif
