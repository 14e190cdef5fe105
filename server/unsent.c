/* How much output a session leaves unsent: bytes queued for its client and not yet
 * written, and device-to-host bytes staged for output still to come. Past --max-unsent its
 * executor runs nothing more until the client reads, so a client that does not read holds
 * only its own work back. And the other way round: once the executor caught up with a
 * paused connection's input, the loop takes the request to read it again. Any thread. */
#include <pthread.h>

#include "guard.h"
#include "loop.h"
#include "session_private.h"

/* The session's unsent output has passed its bound. Caller holds s->lock. */
int cr_unsent_full_locked(const cr_session_t *s)
{
    uint64_t limit = cr_guard_limits()->unsent;
    return limit && s->out_bytes + s->staged_bytes > limit;
}

static void output_change(cr_session_t *s, uint64_t *counter, int64_t delta)
{
    pthread_mutex_lock(&s->lock);
    *counter += (uint64_t)delta;
    if (s->output_waiting && !cr_unsent_full_locked(s))
        pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void cr_unsent_written(cr_session_t *s, uint64_t bytes)
{
    output_change(s, &s->out_bytes, -(int64_t)bytes);
}

void cr_unsent_stage(cr_session_t *s, uint64_t bytes)
{
    output_change(s, &s->staged_bytes, (int64_t)bytes);
}

void cr_unsent_unstage(cr_session_t *s, uint64_t bytes)
{
    output_change(s, &s->staged_bytes, -(int64_t)bytes);
}

/* The executor caught up with a paused connection's input: reading may resume (once).
 * Caller holds s->lock. */
int cr_unsent_take_resume_locked(cr_session_t *s)
{
    int resume = s->resume_reading && s->reading_paused;
    if (resume)
        s->reading_paused = s->resume_reading = 0;
    return resume;
}

int cr_unsent_take_resume(cr_session_t *s)
{
    pthread_mutex_lock(&s->lock);
    int resume = cr_unsent_take_resume_locked(s);
    pthread_mutex_unlock(&s->lock);
    return resume;
}
