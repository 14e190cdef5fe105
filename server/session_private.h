/* What the files of the session module share and no other module uses: session.c,
 * executor.c, hello.c, handles.c, allocations.c, legacy_stream.c, context_loss.c. */

#include "session.h"
#ifndef CR_SERVER_SESSION_PRIVATE_H
#define CR_SERVER_SESSION_PRIVATE_H


/* The first handle id a session gives out: well above NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD. */
#define CR_FIRST_HANDLE_ID 0x10000

/* Calls fn for every session, admitted or not, under the sessions' lock. */
void cr_sessions_each(void (*fn)(cr_session_t *s, void *arg), void *arg);
/* Starts the admitted session's executor (executor.c). 0, or CR_ENOMEM with nothing
 * started. */
int cr_executor_start(cr_session_t *s);
/* Whether the device context is lost, after a fault the driver's callback thread saw
 * (context_loss.c; the executor asks, for s->probe_wanted). */
void cr_session_probe_context(cr_session_t *s);
/* Routes the stream's device printf to the session's client, where the backend allows it
 * (handles.c). */
void cr_session_capture_output(cr_session_t *s, void *stream);
/* Frees the session's record of every handle, not the backend objects (handles.c).
 * Caller holds s->lock, or the last reference. */
void cr_session_forget_handles_locked(cr_session_t *s);
/* Forgets the globals of a library or module being unloaded (allocations.c). Caller holds
 * s->lock. */
void cr_session_untrack_code_locked(cr_session_t *s, uint64_t owner);

#endif
