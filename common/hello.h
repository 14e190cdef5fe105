/* The hello, every connection's first request (body in common/protocol.h), as clients
 * build it: the client stub and `cuda-remote` say who they are, and find their server,
 * the same way. */
#ifndef CR_HELLO_H
#define CR_HELLO_H

#include <msgpack.h>
#include <stddef.h>

/* The server a client talks to: $CUDA_REMOTE_ADDR, or CR_DEFAULT_ADDR when that is unset
 * or empty. */
const char *cr_hello_address(void);

/* Packs a hello's body: the protocol version, the driver API version the client implements
 * (0 for none), what the client is, this process's pid and host, the program (NULL: this
 * process's executable) and the tenant's token from $CUDA_REMOTE_TOKEN (nil without one). */
void cr_hello_pack(msgpack_packer *pk, int cuda_version, const char *client, const char *program);

/* The reason in a refused hello's reply [error, "reason"]; "" when it gives none. */
void cr_hello_refusal(const msgpack_object *reply, char *why, size_t cap);

#endif
