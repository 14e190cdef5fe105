/* Whole frames over a client's transport (transport.h), for a client that makes one request
 * at a time (`cuda-remote`). The client stub reads through its own buffer
 * (client/conn_read.c); the server frames on its event loop. */
#ifndef CR_FRAME_IO_H
#define CR_FRAME_IO_H

#include <stddef.h>

#include "buf.h"
#include "frame.h"
#include "transport.h"

/* Sends one frame of h (its body_len bytes of body; no bulk). 0 or CR_EIO. */
int cr_frame_send(cr_transport_t *t, const cr_frame_header_t *h, const void *body);

/* Receives one frame: its header, checked (cr_frame_decode), and its body into *body
 * (reset first); bulk bytes are read and dropped. 0, CR_ECLOSED, CR_EIO, CR_EPROTO (TLS,
 * t->why), CR_ENOMEM, or what cr_frame_decode refuses a header with. */
int cr_frame_recv(cr_transport_t *t, cr_frame_header_t *h, cr_buf_t *body);

#endif
