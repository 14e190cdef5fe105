/* The executor: one thread per admitted session that runs its requests in arrival order.
 *
 * The loop puts each complete request in the session's inbox (cr_executor_submit), and
 * stops reading a connection whose session, or tenant, holds too much unrun input. The
 * executor takes requests from the inbox, decodes each into a zone it reuses (or the
 * request's own, when it is answered off the executor), and hands it to cr_dispatch. It
 * never waits on the device: calls that wait finish on waiter threads. It runs nothing
 * more while the client leaves too much output unread, and when the connection closes it
 * waits for the session's tasks, then releases everything the session held. */
#include "backend.h"
#include "clock.h"
#include "cpu.h"
#include "dispatch.h"
#include "error.h"
#include "graph.h"
#include "guard.h"
#include "handlers.h"
#include "log.h"
#include "loop.h"
#include "memops.h"
#include "scheduler.h"
#include "session.h"
#include "session_private.h"
#include "shm.h"

/* How long an idle executor keeps looking for the next request before it sleeps. */
#define SPIN_NS 20000

/* Unrun input a session may hold before the loop stops reading its connection (reading
 * resumes at a quarter of it): a client cannot make the server buffer without bound. */
static size_t inbox_high = (size_t)256 << 20;

void cr_session_set_input_limit(size_t bytes)
{
    inbox_high = bytes ? bytes : 1;
}

static uint64_t tenant_queued_limit(void)
{
    uint64_t limit = cr_guard_limits()->tenant_queued;
    return limit ? limit : UINT64_MAX;
}

int cr_executor_submit(cr_session_t *s, cr_request_t *req)
{
    req->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->inbox_tail)
        s->inbox_tail->next = req;
    else
        __atomic_store_n(&s->inbox_head, req, __ATOMIC_RELEASE); /* the executor peeks */
    s->inbox_tail = req;
    s->inbox_bytes += cr_request_size(req);
    s->inbox_count++;
    uint64_t tenant_queued =
        __atomic_add_fetch(&s->tenant->queued_bytes, cr_request_size(req), __ATOMIC_RELAXED);
    int pause = (s->inbox_bytes > inbox_high || tenant_queued > tenant_queued_limit() ||
                 cr_unsent_full_locked(s)) &&
                !s->reading_paused;
    if (pause) {
        s->reading_paused = 1;
        s->resume_reading = 0;
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return pause;
}

/* Takes the oldest request from the inbox (caller holds s->lock and saw one); *resume
 * says that the loop may read the connection again (cr_server_wake). */
static cr_request_t *inbox_take_locked(cr_session_t *s, int *resume)
{
    cr_request_t *req = s->inbox_head;
    __atomic_store_n(&s->inbox_head, req->next, __ATOMIC_RELEASE);
    if (!s->inbox_head)
        s->inbox_tail = NULL;
    s->inbox_bytes -= cr_request_size(req);
    s->inbox_count--;
    uint64_t tenant_queued =
        __atomic_sub_fetch(&s->tenant->queued_bytes, cr_request_size(req), __ATOMIC_RELAXED);
    /* reading resumes once the session caught up, and its tenant's other sessions too,
     * unless it has nothing queued at all: each session can always take one more */
    *resume = s->reading_paused && !s->resume_reading && s->inbox_bytes < inbox_high / 4 &&
              (tenant_queued < tenant_queued_limit() / 2 || !s->inbox_head);
    if (*resume)
        s->resume_reading = 1;
    return req;
}

/* The client is gone: what it still asked for is dropped. */
static void inbox_drop(cr_session_t *s)
{
    pthread_mutex_lock(&s->lock);
    cr_request_t *r = s->inbox_head;
    s->inbox_head = s->inbox_tail = NULL;
    __atomic_sub_fetch(&s->tenant->queued_bytes, s->inbox_bytes, __ATOMIC_RELAXED);
    s->inbox_bytes = 0;
    s->inbox_count = 0;
    pthread_mutex_unlock(&s->lock);
    while (r) {
        cr_request_t *next = r->next;
        cr_request_free(r);
        r = next;
    }
}

static void *executor_main(void *arg)
{
    cr_session_t *s = arg;
    const cr_driver_t *d = &s->backend->d;
    cr_backend_bind_thread(s->backend);
    msgpack_zone exec_zone;
    msgpack_zone_init(&exec_zone, 8192);
    s->legacy.type = CR_HT_CUstream; /* created at hello, at its tenant's priority */
    for (;;) {
        /* a client that just sent something often sends more at once: look for it a
         * little while before sleeping, which would cost a wake-up per request */
        int64_t until = cr_now_ns() + (int64_t)SPIN_NS;
        while (!__atomic_load_n(&s->inbox_head, __ATOMIC_ACQUIRE) &&
               !__atomic_load_n(&s->closing, __ATOMIC_ACQUIRE) && cr_now_ns() < until)
            cr_cpu_relax();
        if (!__atomic_load_n(&s->inbox_head, __ATOMIC_ACQUIRE))
            cr_sched_flush(s); /* what it launched is measured before it sleeps */
        pthread_mutex_lock(&s->lock);
        while (!s->closing && !s->probe_wanted && (!s->inbox_head || cr_unsent_full_locked(s))) {
            if (!s->inbox_head) {
                pthread_cond_wait(&s->cond, &s->lock);
                continue;
            }
            /* the client has not read what it asked for: run nothing more of its until it
             * does (its launches so far are measured meanwhile) */
            s->output_waiting = 1;
            pthread_mutex_unlock(&s->lock);
            cr_sched_flush(s);
            pthread_mutex_lock(&s->lock);
            while (!s->closing && !s->probe_wanted && cr_unsent_full_locked(s))
                pthread_cond_wait(&s->cond, &s->lock);
            s->output_waiting = 0;
        }
        if (s->probe_wanted) { /* a fault seen on the driver's callback thread */
            s->probe_wanted = 0;
            pthread_mutex_unlock(&s->lock);
            cr_session_probe_context(s);
            continue;
        }
        if (s->closing) { /* the client is gone: what it still asked for does not matter */
            pthread_mutex_unlock(&s->lock);
            break;
        }
        int resume;
        cr_request_t *req = inbox_take_locked(s, &resume);
        pthread_mutex_unlock(&s->lock);
        if (resume)
            cr_server_wake(s);
        __atomic_add_fetch(&s->stat_requests, 1, __ATOMIC_RELAXED);

        /* decode into the executor's zone, reused request after request, unless the
         * request is answered off the executor */
        msgpack_zone *zone = &exec_zone;
        if (cr_request_outlives_executor(req) && !(zone = req->zone = msgpack_zone_new(2048))) {
            cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
            continue;
        }
        if (cr_request_decode(req, zone) != 0) {
            CR_WARN("session %llu: malformed %s from %s; closing the connection",
                    (unsigned long long)s->id, cr_opcode_name(req->hdr.opcode), s->peer);
            cr_request_free(req);
            msgpack_zone_clear(&exec_zone);
            cr_server_close_connection(s);
            continue;
        }
        if (!s->hello_done && !(cr_opcode_rule(req->hdr.opcode)->flags & CR_OPR_FIRST)) {
            cr_server_close_connection(s); /* the loop admitted it: the hello comes first */
            cr_request_free(req);
            msgpack_zone_clear(&exec_zone);
            continue;
        }
        if (cr_graph_capture(req)) { /* work for a capturing stream is kept, not run */
            msgpack_zone_clear(&exec_zone);
            continue;
        }
        if (!cr_request_is_launch(req))
            cr_sched_flush(s); /* launches in a measured batch are consecutive */
        cr_dispatch(req);
        msgpack_zone_clear(&exec_zone); /* nothing the executor decoded is used after this */
    }
    msgpack_zone_destroy(&exec_zone);
    inbox_drop(s);
    cr_host_funcs_open_all(s); /* its streams must not wait for answers that cannot come */
    cr_memops_release(s);      /* nor for values no one will write */
    cr_sched_flush(s);

    /* wait for the waiter threads and host functions still using the session */
    pthread_mutex_lock(&s->lock);
    while (s->tasks > 0)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    if (s->legacy.obj) {
        cr_session_release_resources(s, 0);
        d->cuStreamDestroy_v2(s->legacy.obj);
        if (s->legacy.marker)
            d->cuEventDestroy_v2(s->legacy.marker);
    }
    pthread_mutex_lock(&s->lock);
    cr_session_forget_handles_locked(s); /* what release left, or all when it did not run */
    pthread_mutex_unlock(&s->lock);
    cr_graph_release_all(s);    /* captures never ended (graphs went with their handles) */
    cr_host_func_gates_free(s); /* its streams are done */
    cr_shm_release_all(s);      /* after the work that may still have used the regions */
    cr_memops_free(s);
    if (s->tenant)
        __atomic_sub_fetch(&s->tenant->sessions, 1, __ATOMIC_RELAXED);
    CR_INFO("session %llu: resources of %s released (%llu requests)", (unsigned long long)s->id,
            s->who[0] ? s->who : s->peer, (unsigned long long)s->stat_requests);
    cr_session_unref(s);
    return NULL;
}

int cr_executor_start(cr_session_t *s)
{
    cr_graph_set_runner(cr_dispatch); /* a graph's launch replays requests through it */
    pthread_mutex_lock(&s->lock);
    s->refs++; /* the executor's */
    pthread_mutex_unlock(&s->lock);
    if (pthread_create(&s->executor, NULL, executor_main, s) == 0) {
        pthread_detach(s->executor);
        return 0;
    }
    pthread_mutex_lock(&s->lock);
    s->refs--;
    pthread_mutex_unlock(&s->lock);
    return CR_ENOMEM;
}

void cr_session_close(cr_session_t *s, const char *why)
{
    pthread_mutex_lock(&s->lock);
    int first = !s->closing;
    __atomic_store_n(&s->closing, 1, __ATOMIC_RELEASE); /* the executor peeks */
    s->stream = NULL;
    s->fd = -1;            /* no direct writes any more: the loop closes the socket */
    while (s->direct_busy) /* one in progress uses the old fd: it must not be reused yet */
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_cond_broadcast(&s->cond); /* the executor and blocked host functions */
    pthread_mutex_unlock(&s->lock);
    cr_sched_wake(); /* its executor may wait to launch */
    if (first)
        CR_INFO("session %llu: %s from %s ended: %s", (unsigned long long)s->id,
                s->who[0] ? s->who : "client", s->peer, why);
}
