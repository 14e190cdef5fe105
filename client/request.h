/* A request that waits for its reply, as a CUresult: the layer every hand-written call and
 * the generic marshaller send through, above the connection. */
#ifndef CR_REQUEST_H
#define CR_REQUEST_H

#include <msgpack.h>

#include "conn.h"
#include "cr_client_hand.h"

/* Maps a CR_E* transport error to the CUresult the application sees. */
CUresult cr_transport_error(int err);
/* Sends the call built in m, waits for its reply and returns its CUresult (transport
 * failures come back as CUresults too). The reply's other elements can then be read from
 * u->data (an array). The caller always ends with cr_reply_done(p, u). */
CUresult cr_call(cr_msg_t *m, cr_pending_t *p, msgpack_unpacked *u);
void cr_reply_done(cr_pending_t *p, msgpack_unpacked *u);
/* cr_call for a reply [CUresult, non-negative integer]: the integer goes to *out on
 * success (CUDA_ERROR_UNKNOWN when the reply lacks it). */
CUresult cr_call_u64(cr_msg_t *m, uint64_t *out);
/* cr_call in two halves, for several calls in flight from one thread: every start is
 * followed by one finish, which returns what cr_call would. */
void cr_call_start(cr_msg_t *m, cr_pending_t *p);
CUresult cr_call_finish(cr_pending_t *p, msgpack_unpacked *u);
/* At CUDA_REMOTE_LOG=debug, logs how many calls of each function waited for a reply (the
 * most frequent), and starts counting again. */
void cr_call_report(void);
/* cr_call with a file descriptor passed along (Unix sockets only). */
CUresult cr_call_fd(cr_msg_t *m, cr_pending_t *p, msgpack_unpacked *u, int fd);

#endif
