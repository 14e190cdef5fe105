/* A client's stream to the server: a connected blocking socket, in plaintext or in TLS.
 *
 * The stub and `cuda-remote` both talk through it: cr_transport_connect connects (and, for a
 * "tls://" address, makes the TLS handshake with the settings of the CUDA_REMOTE_TLS_*
 * variables), cr_transport_writev sends, cr_transport_recv receives. Neither side above
 * knows which it is.
 *
 * Client TLS settings (environment): CUDA_REMOTE_TLS_CA (a PEM file of the CAs to trust;
 * default: the system's), CUDA_REMOTE_TLS_CERT and CUDA_REMOTE_TLS_KEY (a client
 * certificate and its key, PEM), CUDA_REMOTE_TLS_SERVER_NAME (the name the server's
 * certificate must carry; default: the host of the address).
 *
 * Threads: one thread may write (under the caller's lock) while one other receives. */
#ifndef CR_TRANSPORT_H
#define CR_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "address.h"
#include "buf.h"
#include "tls.h"

typedef struct {
    int fd;
    cr_tls_t *tls; /* NULL: plaintext */
    uint8_t *in;   /* TLS: ciphertext received, not yet decrypted (the receiver's) */
    size_t in_pos, in_len;
    int drained;     /* TLS: all received bytes went in and no plaintext waits inside */
    cr_buf_t sealed; /* TLS: ciphertext being sent (the writer's) */
    char why[320];   /* the last failure, in words */
} cr_transport_t;

/* Connects to addr within timeout_ms, with TLS for a "tls://" address (the handshake within
 * the same time). 0, or CR_E* with one line saying what failed in err. */
int cr_transport_connect(cr_transport_t *t, const cr_address_t *addr, int timeout_ms, char *err,
                         size_t err_len);
/* Writes all n buffers of iov (which it may change), with pass_fd (or -1) attached to the
 * first bytes as SCM_RIGHTS (plaintext Unix sockets only). A closed connection is an error,
 * never SIGPIPE. 0, or CR_EIO (t->why says more for TLS). */
int cr_transport_writev(cr_transport_t *t, struct iovec *iov, int n, int pass_fd);
/* Receives up to n bytes into dst, as recv(2) would. With dontwait it returns 0 instead of
 * blocking. > 0: bytes; 0: none yet (dontwait); CR_ECLOSED; CR_EIO or CR_EPROTO (a TLS
 * failure, in t->why). */
ssize_t cr_transport_recv(cr_transport_t *t, void *dst, size_t n, int dontwait);
/* 1 when bytes received from the socket wait inside (TLS), so that polling the socket would
 * not see them. */
int cr_transport_buffered(cr_transport_t *t);
/* Closes the socket and frees what the transport holds. */
void cr_transport_close(cr_transport_t *t);

#endif
