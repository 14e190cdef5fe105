/* Server addresses as users write them: "host:port", "host" (port 7470), "[v6addr]:port",
 * "unix:/path/to/socket", and any TCP one after "tls://" for TLS. */
#ifndef CR_ADDRESS_H
#define CR_ADDRESS_H

#define CR_DEFAULT_PORT 7470
#define CR_DEFAULT_ADDR "127.0.0.1:7470"

typedef struct {
    int is_unix;
    int tls;        /* "tls://host:port" */
    char host[256]; /* host name or numeric address, without brackets */
    int port;
    char path[108]; /* unix socket path */
} cr_address_t;

/* Parses text into *out. 0 or CR_EINVAL (empty, bad port, path too long). */
int cr_address_parse(const char *text, cr_address_t *out);

/* Connects a blocking stream socket to the address, giving up after timeout_ms.
 * Sets TCP_NODELAY on TCP. Returns the fd, or a negative CR_E* code with errno's message
 * written to err (if err). */
int cr_address_connect(const cr_address_t *addr, int timeout_ms, char *err, int err_len);

#endif
