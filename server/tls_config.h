/* The server's TLS: the certificate, key and client CAs its options name, and the context
 * every new TCP connection gets (tls.h). SIGHUP reads the files again: connections made
 * after see the new certificate, those already open carry on with theirs.
 *
 * Threads: load from main before the loop starts; the rest on the loop thread. */
#ifndef CR_SERVER_TLS_CONFIG_H
#define CR_SERVER_TLS_CONFIG_H

#include <stddef.h>

#include "tls.h"

typedef struct {
    const char *cert;      /* PEM chain; NULL: no TLS */
    const char *key;       /* PEM */
    const char *client_ca; /* PEM CAs of client certificates; NULL: none asked for */
} cr_tls_files_t;

/* Checks the options and makes the context. 0, or CR_E* with the reason in err (the server
 * then does not start). */
int cr_tls_config_load(const cr_tls_files_t *files, char *err, size_t err_len);
/* SIGHUP: makes the context again from the same files; keeps the current one (and says
 * why) when that fails. */
void cr_tls_config_reload(void);
/* 1 when TCP connections speak TLS. */
int cr_tls_config_enabled(void);
/* 1 when every TCP client must present a certificate (--tls-client-ca). */
int cr_tls_config_verifies_clients(void);
/* The TLS side of a new TCP connection, on the current context; NULL when TLS is off or
 * memory ran out (check cr_tls_config_enabled). */
cr_tls_t *cr_tls_config_connection(void);
/* How TCP listeners are secured, for the log: "TLS 1.3, client certificates required". */
const char *cr_tls_config_describe(void);

#endif
