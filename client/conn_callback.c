/* Host functions (conn.h): the server asks the client to run a host function it launched
 * (cuLaunchHostFunc); the reader queues it here, and one callback thread runs them in the
 * order they came, acknowledging each so that the server opens the stream behind it. The
 * stub's own jobs (cr_conn_run_later) run there too, unacknowledged.
 *
 * Threads: the reader (whichever thread holds the read role) queues; the callback thread,
 * started at the first host function, runs the application's function, which may block
 * it, then takes the send lock to acknowledge. It waits on cb_cond while the queue is
 * empty and lives as long as the process. */
#include "conn_state.h"

#include <signal.h>
#include <stdlib.h>

#include "cr_opcodes.h"
#include "error.h"

static void *callback_main(void *arg)
{
    cr_conn_t *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->cb_lock);
        while (!c->cb_head)
            pthread_cond_wait(&c->cb_cond, &c->cb_lock);
        callback_job_t *job = c->cb_head;
        c->cb_head = job->next;
        if (!c->cb_head)
            c->cb_tail = NULL;
        pthread_mutex_unlock(&c->cb_lock);

        job->fn(job->data);

        cr_msg_t m;
        if (job->call_id && cr_msg_begin(c, &m, CR_OP_HOST_FUNC_DONE) == 0) {
            m.call_id = job->call_id; /* the acknowledgement names the launch it answers */
            msgpack_pack_array(&m.pk, 0);
            cr_conn_send_now(&m);
        }
        free(job);
    }
    return NULL;
}

int cr_conn_queue_host_func(cr_conn_t *c, uint64_t call_id, void (*fn)(void *), void *data)
{
    callback_job_t *job = calloc(1, sizeof *job);
    if (!job)
        return CR_ENOMEM;
    job->call_id = call_id;
    job->fn = fn;
    job->data = data;
    pthread_mutex_lock(&c->cb_lock);
    if (!c->cb_started) {
        /* like the reader, it takes no signal meant for the application's threads */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int rc = pthread_create(&c->cb_thread, NULL, callback_main, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
            pthread_mutex_unlock(&c->cb_lock);
            free(job);
            return CR_ENOMEM;
        }
        pthread_detach(c->cb_thread);
        c->cb_started = 1;
    }
    if (c->cb_tail)
        c->cb_tail->next = job;
    else
        c->cb_head = job;
    c->cb_tail = job;
    pthread_cond_signal(&c->cb_cond);
    pthread_mutex_unlock(&c->cb_lock);
    return 0;
}

int cr_conn_run_later(cr_conn_t *c, void (*fn)(void *), void *data)
{
    return cr_conn_queue_host_func(c, 0, fn, data); /* call ids start at 1: 0 is ours */
}
