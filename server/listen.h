/* Listening sockets (listen.c): bound before any server process starts, adopted by each
 * server process's loop. */
#ifndef CR_SERVER_LISTEN_H
#define CR_SERVER_LISTEN_H

#include <stdlib.h>
#include <uv.h>

/* A listening socket, bound and listening before any server process starts, so that it
 * outlives a restart of the server process (supervisor.c). */
typedef struct {
    int fd;
    int is_unix;
    int loopback;    /* TCP on a loopback address: only this host reaches it */
    char bound[300]; /* the address really bound (the port for port 0) */
} cr_listener_t;

/* --listen addresses one server takes */
#define CR_MAX_LISTEN 16

/* Binds and listens on text (host:port, or unix:/path when allow_unix). 0 or CR_E*
 * (logged). */
int cr_listen_bind(const char *text, int allow_unix, cr_listener_t *out);
/* Accepts connections on a bound listener with on_conn and data on the handle, or NULL
 * (logged). */
uv_stream_t *cr_listen_adopt(uv_loop_t *loop, const cr_listener_t *l, uv_connection_cb on_conn,
                             void *data);

/* A close callback for a handle that was malloc'd on its own. */
static inline void cr_free_handle(uv_handle_t *h)
{
    free(h);
}

#endif
