/* The server process's loop (libuv): it adopts the listeners, serves connections
 * (connection.c) and writes queued output (outbox.c), stops on SIGINT/SIGTERM, reloads the
 * tenants on SIGHUP, and restarts the process when the device context is lost.
 *
 * Threads: the loop thread does the accepting, reading and closing of every connection,
 * and writes what other threads could not write straight away (outbox.c); executors,
 * waiters and the backend's threads only queue output and wake it. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend.h"
#include "guard.h"
#include "listen.h"
#include "log.h"
#include "loop.h"
#include "loop_private.h"
#include "session.h"
#include "status.h"
#include "supervisor.h"
#include "tenants.h"
#include "tls_config.h"

#define RESTART_GRACE_MS 2000

static cr_server_t *the_server; /* for a restart asked for from any thread */

static void exit_for_restart(void)
{
    CR_INFO("the server process exits; a fresh one takes over the device");
    _exit(CR_EXIT_RESTART); /* no teardown: the broken context is the driver's to drop */
}

static void on_restart_deadline(uv_timer_t *t)
{
    (void)t;
    exit_for_restart();
}

static void on_restart(uv_async_t *a)
{
    cr_server_t *srv = a->data;
    if (srv->restarting)
        return;
    srv->restarting = 1;
    srv->on_last_closed = exit_for_restart;
    /* no new connections here: they wait in the listening sockets' backlog, which the
     * supervisor keeps open, for the next server process */
    for (int i = 0; i < srv->listeners; i++)
        uv_close((uv_handle_t *)srv->listener[i], cr_free_handle);
    srv->listeners = 0;
    if (srv->connections == 0)
        exit_for_restart();
    /* sessions were told and asked to close once their output is written; a client that
     * does not read gets RESTART_GRACE_MS */
    uv_timer_init(srv->loop, &srv->restart_deadline);
    uv_timer_start(&srv->restart_deadline, on_restart_deadline, RESTART_GRACE_MS, 0);
}

void cr_server_restart(void)
{
    if (the_server)
        uv_async_send(&the_server->restart);
}

static void on_signal(uv_signal_t *sig, int signum)
{
    CR_INFO("signal %d: stopping", signum);
    uv_stop(sig->loop);
}

static void on_sighup(uv_signal_t *sig, int signum)
{
    cr_tenants_reload(); /* sessions carry on */
    cr_tls_config_reload();
}

int cr_server_run(const cr_backend_t *b, const cr_listener_t *listeners, int listener_count,
                  const cr_listener_t *metrics)
{
    static cr_server_t srv;
    cr_backend_bind_thread(b); /* the loop releases staging buffers once they are written */
    srv.loop = uv_default_loop();
    srv.backend = b;
    uv_async_init(srv.loop, &srv.wakeup, cr_conn_on_output);
    cr_outbox_init(&srv.wakeup);
    srv.wakeup.data = &srv;
    uv_async_init(srv.loop, &srv.restart, on_restart);
    srv.restart.data = &srv;
    the_server = &srv;
    cr_context_loss_on_lost(cr_server_restart);
    uv_signal_init(srv.loop, &srv.sigint);
    uv_signal_init(srv.loop, &srv.sigterm);
    uv_signal_start(&srv.sigint, on_signal, SIGINT);
    uv_signal_start(&srv.sigterm, on_signal, SIGTERM);
    uv_signal_init(srv.loop, &srv.sighup);
    uv_signal_start(&srv.sighup, on_sighup, SIGHUP);
    unsigned tick = cr_guard_limits()->hello_timeout_ms / 4;
    uv_timer_init(srv.loop, &srv.hello_deadline);
    srv.hello_deadline.data = &srv;
    uv_timer_start(&srv.hello_deadline, cr_conn_check_hello_deadlines, tick ? tick : 1,
                   tick ? tick : 1);
    for (int i = 0; i < listener_count; i++) {
        uv_stream_t *l = cr_listen_adopt(srv.loop, &listeners[i], cr_conn_accept, &srv);
        if (!l)
            return 1;
        srv.listener[srv.listeners++] = l;
    }
    if (metrics && cr_metrics_listen(srv.loop, b, metrics) != 0)
        return 1;
    uv_run(srv.loop, UV_RUN_DEFAULT);
    return 0;
}
