/* Streams as the wire names them: the legacy default stream, the calling thread's
 * per-thread default stream (made on first use), and every other stream by its handle. */
#ifndef CR_STREAM_H
#define CR_STREAM_H

#include <stdint.h>

#include "cr_client_hand.h"

/* The stream id sent for a CUstream: 0 is the legacy default stream; NULL means legacy,
 * or the calling thread's per-thread stream during a _ptds/_ptsz call or with
 * CU_STREAM_PER_THREAD (created on first use). */
CUresult cr_stream_wire_id(CUstream s, uint64_t *id);
/* Forgets every per-thread stream (the primary-context reset destroyed them). */
void cr_stream_forget_per_thread(void);

#endif
