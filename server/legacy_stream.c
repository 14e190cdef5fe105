/* CUDA's legacy default stream among a session's streams (executor only).
 *
 * The server runs every session on non-blocking streams of one context, so it keeps the
 * legacy stream's rules itself: work on the session's legacy stream waits for all earlier
 * work of its blocking streams, and their later work waits for it. Events recorded on
 * every stream let a synchronization wait for all of the session's work, and only it. */
#include <pthread.h>
#include <stdlib.h>

#include "log.h"
#include "session.h"
#include "session_private.h"

/* Makes `waiter` wait for the work `h` has so far. */
static void wait_for(cr_session_t *s, cr_handle_t *waiter, cr_handle_t *h)
{
    const cr_driver_t *d = &s->backend->d;
    if (!h->marker && d->cuEventCreate(&h->marker, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        h->marker = NULL;
        return;
    }
    if (d->cuEventRecord(h->marker, h->obj) == CUDA_SUCCESS)
        d->cuStreamWaitEvent(waiter->obj, h->marker, 0);
}

/* CUDA's legacy stream waits for all earlier work of the blocking streams, and their later
 * work waits for it. The server's context is shared, so the session keeps those rules among
 * its own streams with events, only when work actually moves between streams. */
void cr_session_stream_prepare(cr_session_t *s, cr_handle_t *st)
{
    if (st == &s->legacy) {
        pthread_mutex_lock(&s->lock);
        size_t pos = 0, n = 0;
        uint64_t id, v;
        cr_handle_t *dirty[64];
        while (cr_idmap_next(&s->handles, &pos, &id, &v)) {
            cr_handle_t *h = (cr_handle_t *)(uintptr_t)v;
            if (h->type == CR_HT_CUstream && h->blocking && h->dirty) {
                h->dirty = 0;
                if (n < 64)
                    dirty[n++] = h;
                else
                    wait_for(s, &s->legacy, h);
            }
        }
        pthread_mutex_unlock(&s->lock);
        for (size_t i = 0; i < n; i++)
            wait_for(s, &s->legacy, dirty[i]);
        s->legacy_gen++;
        return;
    }
    if (!st->blocking)
        return;
    if (st->synced_gen != s->legacy_gen) {
        if (s->legacy_gen)
            wait_for(s, st, &s->legacy);
        st->synced_gen = s->legacy_gen;
    }
    st->dirty = 1;
}

CUresult cr_session_mark_streams(cr_session_t *s, CUevent **events, unsigned *count)
{
    const cr_driver_t *d = &s->backend->d;
    pthread_mutex_lock(&s->lock);
    size_t cap = s->handles.count + 1, n = 0, pos = 0;
    void **streams = malloc(cap * sizeof *streams);
    uint64_t id, v;
    if (streams) {
        streams[n++] = s->legacy.obj;
        while (cr_idmap_next(&s->handles, &pos, &id, &v)) {
            cr_handle_t *h = (cr_handle_t *)(uintptr_t)v;
            if (h->type == CR_HT_CUstream)
                streams[n++] = h->obj;
        }
    }
    pthread_mutex_unlock(&s->lock);
    CUevent *ev = streams ? calloc(n, sizeof *ev) : NULL;
    if (!ev) {
        free(streams);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = CUDA_SUCCESS;
    unsigned made = 0;
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
        r = d->cuEventCreate(&ev[made], CU_EVENT_DISABLE_TIMING);
        if (r == CUDA_SUCCESS) {
            made++;
            r = d->cuEventRecord(ev[made - 1], streams[i]);
        }
    }
    free(streams);
    if (r != CUDA_SUCCESS) {
        for (unsigned i = 0; i < made; i++)
            d->cuEventDestroy_v2(ev[i]);
        free(ev);
        return r;
    }
    *events = ev;
    *count = made;
    return CUDA_SUCCESS;
}

CUresult cr_session_wait_events(cr_session_t *s, CUevent *events, unsigned count)
{
    const cr_driver_t *d = &s->backend->d;
    CUresult first = CUDA_SUCCESS;
    for (unsigned i = 0; i < count; i++) {
        CUresult r = d->cuEventSynchronize(events[i]);
        if (first == CUDA_SUCCESS)
            first = r;
        d->cuEventDestroy_v2(events[i]);
    }
    free(events);
    return first;
}

void cr_session_legacy_forget(cr_session_t *s)
{
    s->legacy_gen = 0;
    s->legacy.dirty = 0;
}
