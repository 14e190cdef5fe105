/* cuda-remoted: serves one GPU (or the emulated device) to cuda-remote clients.
 *
 * Its options, their defaults and checks are the table in options.c (`cuda-remoted --help`
 * prints them). The first process binds the listening sockets and supervises the server
 * process, which it starts again when the device context is lost (supervisor.c).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "guard.h"
#include "host_window.h"
#include "listen.h"
#include "log.h"
#include "loop.h"
#include "options.h"
#include "scheduler.h"
#include "session.h"
#include "shm.h"
#include "status.h"
#include "supervisor.h"
#include "tenants.h"
#include "tls_config.h"
#include "waiter.h"

int main(int argc, char **argv)
{
    static cr_server_options_t o; /* its strings and limits are used for the server's life */
    int status = cr_options_parse(argc, argv, &o);
    if (status >= 0)
        return status;
    cr_session_set_input_limit((size_t)o.max_queued);
    if (o.no_shm)
        cr_shm_set_enabled(0);
    cr_shm_set_limit(o.max_shared);
    setenv("CUDA_REMOTE_LOG", o.log_level, 1);
    cr_log_init("cuda-remoted", CR_LOG_INFO, 1);
    signal(SIGPIPE, SIG_IGN);
    cr_guard_configure(&o.limits); /* here: the raised file limit holds for every child */

    static cr_backend_t backend;
    char err[512];
    if (cr_tenants_load(o.tenants_file, err, sizeof err) != 0) {
        CR_ERROR("--tenants: %s", err);
        return 2;
    }
    if (cr_tls_config_load(&o.tls, err, sizeof err) != 0) {
        CR_ERROR("TLS: %s", err);
        return 2;
    }
    cr_listener_t listeners[CR_MAX_LISTEN], metrics_listener;
    for (int i = 0; i < o.listen.count; i++) {
        if (cr_listen_bind(o.listen.addr[i], 1, &listeners[i]) != 0)
            return 1;
        if (!listeners[i].is_unix && !listeners[i].loopback && !cr_tls_config_enabled() &&
            !o.insecure) {
            CR_ERROR("--listen %s: plaintext TCP on an address other hosts reach; give "
                     "--tls-cert and --tls-key, or --insecure to accept that anyone on the "
                     "network can read and forge its traffic",
                     o.listen.addr[i]);
            return 2;
        }
    }
    if (o.metrics && cr_listen_bind(o.metrics, 0, &metrics_listener) != 0)
        return 1;
    cr_status_start();

    /* from here on, in the server process (started again after a lost context) */
    int generation = cr_supervise();
    cr_status_set_restarts(generation);
    if (generation > 0 && o.tenants_file) /* the file as it is now, not as it was at start */
        cr_tenants_reload();
    if (generation > 0) /* the certificates too */
        cr_tls_config_reload();
    if (cr_backend_open(&o.backend, &backend, err, sizeof err) != 0) {
        CR_ERROR("backend %s: %s", o.backend.kind, err);
        return 1;
    }
    cr_backend_describe_export_tables(&backend);
    if (!o.no_shm) /* after the backend: the driver has made its own reservations */
        cr_host_window_init();
    if (generation == 0) {
        CR_INFO("backend %s%s%s: %s, %zu MiB, driver %d", backend.kind,
                strcmp(backend.kind, "cuda") == 0 ? " " : "",
                strcmp(backend.kind, "cuda") == 0 ? backend.path : "", backend.desc.name,
                backend.desc.total_mem >> 20, backend.driver_version);
        for (int i = 0; i < o.listen.count; i++)
            CR_INFO("listening on %s (%s)", listeners[i].bound,
                    listeners[i].is_unix ? "local socket" : cr_tls_config_describe());
        if (o.metrics)
            CR_INFO("metrics on http://%s/metrics", metrics_listener.bound);
    } else {
        CR_INFO("server process %d with a new device context: serving again", generation);
    }
    cr_waiter_init(&backend);
    if (cr_sched_start(&backend) != 0) {
        CR_ERROR("cannot start the scheduler: out of memory");
        return 1;
    }
    return cr_server_run(&backend, listeners, o.listen.count, o.metrics ? &metrics_listener : NULL);
}
