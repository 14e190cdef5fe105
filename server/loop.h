/* The server process and its loop: output to clients (outbox.c), listening sockets
 * (listen.c), the loop and restarts (server.c), and the supervisor that restarts a server
 * process (supervisor.c). */
#ifndef CR_SERVER_LOOP_H
#define CR_SERVER_LOOP_H

#include "buf.h"
#include "session.h"

typedef struct cr_outmsg_s {
    struct cr_outmsg_s *next;
    cr_buf_t head;           /* header and body */
    const void *bulk;
    size_t bulk_len;
    size_t sent;             /* bytes of head + bulk already written */
    void (*release)(void *); /* called with release_arg once written (or dropped) */
    void *release_arg;
    uv_write_t write;
    cr_session_t *session;
} cr_outmsg_t;

/* Queues a message for the client (any thread). Takes ownership of m. */
void cr_server_send(cr_session_t *s, cr_outmsg_t *m);
/* Wakes the loop to look at the session (output, close and resume requests). */
void cr_server_wake(cr_session_t *s);
/* Closes the session's connection once its queued output is written (any thread). */
void cr_server_close_connection(cr_session_t *s);
/* A listening socket, bound and listening before any server process starts, so that it
 * outlives a restart of the server process (supervisor.c). */
typedef struct {
    int fd;
    int is_unix;
    char bound[300]; /* the address really bound (the port for port 0) */
} cr_listener_t;

/* Exit status of a server process that lost the device context: the supervisor starts a
 * fresh one. */
#define CR_EXIT_RESTART 75

/* --listen addresses one server takes */
#define CR_MAX_LISTEN 16

/* Serves clients on the listeners (and /metrics on `metrics`, unless NULL) until
 * SIGINT/SIGTERM. Returns the exit status. */
int cr_server_run(const cr_backend_t *b, const cr_listener_t *listeners, int listener_count,
                  const cr_listener_t *metrics);
/* Ends this server process once its sessions have been told (any thread): listeners are
 * closed, connections close after their queued output, and the process exits with
 * CR_EXIT_RESTART (at the latest after a short grace period). */
void cr_server_restart(void);
/* Binds and listens on text (host:port, or unix:/path when allow_unix). 0 or CR_E*
 * (logged). */
int cr_listen_bind(const char *text, int allow_unix, cr_listener_t *out);
/* In the first process: returns in each server process it starts (0 for the first, n for
 * the n-th restart); the supervisor itself exits with the last one's status. */
int cr_supervise(void);
/* Accepts connections on a bound listener with on_conn and data on the handle, or NULL
 * (logged). */
uv_stream_t *cr_listen_adopt(uv_loop_t *loop, const cr_listener_t *l, uv_connection_cb on_conn,
                             void *data);

#endif
