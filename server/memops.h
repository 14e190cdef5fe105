/* Stream memory operations (memops.c): writes and waits of 32- and 64-bit values on a
 * session's streams, and what the server does so that a wait cannot keep a stream of the
 * shared device blocked once its session is gone. */
#ifndef CR_SERVER_MEMOPS_H
#define CR_SERVER_MEMOPS_H

#include <msgpack.h>
#include <stdint.h>

#include "session.h"

/* CUDA_SUCCESS when the operations `ops` ([[operation, address, value, flags]...], 1 to
 * 255 of them) are ones the server would enqueue for session s (a graph's node of them:
 * checked when added or captured, and again at each replay). */
CUresult cr_memops_check(cr_session_t *s, const msgpack_object *ops);

/* 1 when a wait the session enqueued, not yet seen done, reads memory in [p, p + len):
 * freeing or unmapping such memory is refused (the wait would read what another tenant
 * may get, and could not be released at the session's end). Any thread. */
int cr_memops_reading(cr_session_t *s, uint64_t p, uint64_t len);

/* Meets every wait of the session not yet done, by writing a value that satisfies it, so
 * that its streams drain: before the session's end waits for its work (executor), and
 * before its resources are released. Then forgets them all. */
void cr_memops_release(cr_session_t *s);
/* Empties the session's slot, once no other thread can use it (the session's end). */
void cr_memops_free(cr_session_t *s);

#endif
