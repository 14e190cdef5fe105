/* TLS 1.3 over memory buffers (OpenSSL's libssl), for both ends of a connection.
 *
 * A cr_tls_t is one side of one connection. It never touches a socket: ciphertext comes in
 * as a buffer the caller read (cr_tls_handshake, cr_tls_read), and what it has to send
 * collects in an output buffer the caller takes and writes (cr_tls_seal, cr_tls_take). So
 * the server drives it from its event loop and its executors, the stub from blocking
 * sockets (tls_socket.h), with the same code. Each call locks the object: one thread may
 * read while another seals, which OpenSSL does not allow on one SSL without a lock.
 *
 * Only TLS 1.3 is spoken, both ways. A failure leaves one line saying what failed (unknown
 * CA, name mismatch, expired, no client certificate, not TLS 1.3, not TLS at all) in
 * cr_tls_why.
 *
 * Threads: any; a cr_tls_t serializes its own calls. */
#ifndef CR_TLS_H
#define CR_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "buf.h"

typedef struct cr_tls_s cr_tls_t;
typedef struct ssl_ctx_st cr_tls_context_t; /* OpenSSL's SSL_CTX */

/* The most plaintext one cr_tls_seal call is asked to take by the loops that write big
 * payloads: a bounded piece, so that encrypting and sending overlap. */
#define CR_TLS_SEAL_CHUNK (256u << 10)

/* A server's context: its certificate chain and key (PEM files), and with client_ca (a PEM
 * file of CAs, or NULL) every client must present a certificate one of them signed. NULL
 * with the reason in err. */
cr_tls_context_t *cr_tls_server_context(const char *cert, const char *key, const char *client_ca,
                                        char *err, size_t err_len);
/* A client's context: the CAs it trusts (a PEM file; NULL: the system's store), and its
 * own certificate and key (both or neither). NULL with the reason in err. */
cr_tls_context_t *cr_tls_client_context(const char *ca, const char *cert, const char *key,
                                        char *err, size_t err_len);
void cr_tls_context_free(cr_tls_context_t *ctx);

/* One side of a connection on ctx (the object holds its own reference to ctx). A client
 * names the server it expects (its certificate must be for that name; also sent as SNI).
 * NULL when out of memory. */
cr_tls_t *cr_tls_new(cr_tls_context_t *ctx, int is_server, const char *server_name);
void cr_tls_free(cr_tls_t *t);

/* Advances the handshake with the ciphertext in[0..in_len); *used says how much it took
 * (all of it unless it finished). 1: done, 0: it needs more input (and may have output to
 * send first), CR_E*: failed (cr_tls_why says why; an alert for the peer may be waiting in
 * the output). */
int cr_tls_handshake(cr_tls_t *t, const uint8_t *in, size_t in_len, size_t *used);
/* Decrypts: the ciphertext in[0..in_len) goes in (*used says how much), up to cap bytes of
 * plaintext come out into dst. Returns the plaintext bytes (> 0); 0 when it needs more
 * input (all of in was taken and nothing is left inside); CR_ECLOSED when the peer closed
 * the connection cleanly; another CR_E* when it failed (cr_tls_why). */
ssize_t cr_tls_read(cr_tls_t *t, const uint8_t *in, size_t in_len, size_t *used, void *dst,
                    size_t cap);
/* A server's connection frees its record buffers whenever they are empty, so that one that
 * has not said hello costs little; once it is admitted it keeps them (no allocation per
 * record). */
void cr_tls_keep_buffers(cr_tls_t *t);
/* 1 when plaintext already decrypted waits inside (a read needs no input). */
int cr_tls_has_plaintext(cr_tls_t *t);
/* Encrypts up to max bytes of the plaintext iov[0..n), starting `skip` bytes in, and
 * appends to out whatever was waiting to be sent (handshake messages, alerts) followed by
 * the ciphertext. Returns the plaintext bytes taken, or CR_E* (cr_tls_why). */
ssize_t cr_tls_seal(cr_tls_t *t, const struct iovec *iov, int n, size_t skip, size_t max,
                    cr_buf_t *out);
/* Appends to out whatever waits to be sent (handshake messages, alerts). Returns the
 * bytes appended; CR_ENOMEM. */
ssize_t cr_tls_take(cr_tls_t *t, cr_buf_t *out);
/* 1 when something waits to be sent. */
int cr_tls_has_output(cr_tls_t *t);

/* Why the last call failed: one line, for people. */
const char *cr_tls_why(cr_tls_t *t);
/* After the handshake: the negotiated protocol and cipher ("TLSv1.3 TLS_AES_128_GCM_SHA256"). */
void cr_tls_describe(cr_tls_t *t, char *out, size_t len);
/* After the handshake: the names of the peer's verified certificate, each as "CN=...",
 * "DNS:..." or "URI:...", to fn one at a time; fn returns nonzero to stop. Returns how many
 * names fn saw (0: the peer presented no certificate). */
int cr_tls_peer_names(cr_tls_t *t, int (*fn)(const char *name, void *arg), void *arg);
/* The peer's certificate's subject, "CN=alice" where it has a CN, into out ("" if none). */
void cr_tls_peer_subject(cr_tls_t *t, char *out, size_t len);

/* 1 when the bytes look like the start of a TLS handshake (a ClientHello's record). */
int cr_tls_looks_like_hello(const uint8_t *p, size_t n);

#endif
