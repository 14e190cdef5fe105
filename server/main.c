/* cuda-remoted: serves one GPU (or the emulated device) to cuda-remote clients.
 *
 *   cuda-remoted [--listen ADDR]... [--backend auto|cuda|emu] [--device N]
 *                [--driver PATH] [--emu-memory SIZE] [--emu-trace FILE]
 *                [--emu-faults session|context] [--emu-compute-capability X.Y]
 *                [--no-shm] [--tenants FILE] [--metrics ADDR]
 *                [--max-queued SIZE] [--max-connections N] [--max-per-address N]
 *                [--hello-timeout SECONDS] [--max-sessions-per-tenant N]
 *                [--max-unsent SIZE] [--max-queued-per-tenant SIZE]
 *
 * The first process binds the listening sockets and supervises the server process, which
 * it starts again when the device context is lost (supervisor.c).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/emu_api.h"
#include "error.h"
#include "internal.h"
#include "log.h"
#include "size.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cuda-remoted [options]\n"
            "  --listen ADDR      host:port, host (port %d) or unix:/path; repeatable\n"
            "                     (default %s)\n"
            "  --backend KIND     auto (default: the GPU if one is usable, else emu),\n"
            "                     cuda (NVIDIA's driver) or emu (emulated device, no GPU)\n"
            "  --device N         which GPU this server serves (default 0)\n"
            "  --driver PATH      NVIDIA's libcuda.so.1 (default: the usual places)\n"
            "  --emu-memory SIZE  emulated device memory, e.g. 4GiB (default 16GiB)\n"
            "  --emu-trace FILE   record emulated launches there (default:\n"
            "                     $CUDA_REMOTE_EMU_TRACE)\n"
            "  --emu-faults SCOPE what an emulated kernel fault breaks: session (default:\n"
            "                     only the faulting client's) or context (every session's\n"
            "                     state, as on a GPU; the server then starts afresh)\n"
            "  --emu-compute-capability X.Y\n"
            "                     the compute capability the emulated device reports, and so\n"
            "                     which code of a library it loads and which PTX it runs\n"
            "                     (default 9.0; one of " CR_EMU_COMPUTE_CAPABILITIES ")\n"
            "  --max-queued SIZE  input a client may have waiting to run before the server\n"
            "                     stops reading its connection (default 256MiB)\n"
            "  --max-queued-per-tenant SIZE\n"
            "                     the same for all of a tenant's clients together\n"
            "                     (default 1GiB)\n"
            "  --max-unsent SIZE  replies a client has not read yet before the server runs\n"
            "                     nothing more of its and stops reading it (default 64MiB)\n"
            "  --max-connections N  open connections at once (default: what the open-file\n"
            "                     limit allows; the server raises it to its hard limit)\n"
            "  --max-per-address N  open connections from one address (default 256, 0: any;\n"
            "                     Unix-socket clients count per user)\n"
            "  --hello-timeout SECONDS  a connection that has not said hello by then is\n"
            "                     dropped (default 10)\n"
            "  --max-sessions-per-tenant N  a tenant's sessions at once, unless its entry\n"
            "                     in the tenants file says (\"sessions\"; default 1024, 0: any)\n"
            "  --no-shm           decline shared memory from clients on Unix sockets\n"
            "                     (their bytes then travel over the socket)\n"
            "  --tenants FILE     tenants (JSON: name, token, memory, weight, priority);\n"
            "                     clients then need CUDA_REMOTE_TOKEN; SIGHUP reloads it\n"
            "                     (default: one tenant, \"default\", with the whole device)\n"
            "  --metrics ADDR     serve Prometheus metrics at http://ADDR/metrics\n"
            "                     (host:port; only trusted clients should reach it)\n"
            "  --log LEVEL        debug, info (default), warn or error\n",
            CR_DEFAULT_PORT, CR_DEFAULT_ADDR);
}

int main(int argc, char **argv)
{
    enum {
        OPT_BACKEND = 256,
        OPT_DEVICE,
        OPT_DRIVER,
        OPT_EMU_MEMORY,
        OPT_EMU_TRACE,
        OPT_EMU_FAULTS,
        OPT_EMU_CC,
        OPT_LOG,
        OPT_MAX_QUEUED,
        OPT_NO_SHM,
        OPT_TENANTS,
        OPT_METRICS,
        OPT_MAX_QUEUED_TENANT,
        OPT_MAX_UNSENT,
        OPT_MAX_CONNECTIONS,
        OPT_MAX_PER_ADDRESS,
        OPT_HELLO_TIMEOUT,
        OPT_MAX_SESSIONS_TENANT
    };
    static const struct option options[] = {
        {"listen", required_argument, NULL, 'l'},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"driver", required_argument, NULL, OPT_DRIVER},
        {"emu-memory", required_argument, NULL, OPT_EMU_MEMORY},
        {"emu-trace", required_argument, NULL, OPT_EMU_TRACE},
        {"emu-faults", required_argument, NULL, OPT_EMU_FAULTS},
        {"emu-compute-capability", required_argument, NULL, OPT_EMU_CC},
        {"log", required_argument, NULL, OPT_LOG},
        {"max-queued", required_argument, NULL, OPT_MAX_QUEUED},
        {"no-shm", no_argument, NULL, OPT_NO_SHM},
        {"tenants", required_argument, NULL, OPT_TENANTS},
        {"metrics", required_argument, NULL, OPT_METRICS},
        {"max-queued-per-tenant", required_argument, NULL, OPT_MAX_QUEUED_TENANT},
        {"max-unsent", required_argument, NULL, OPT_MAX_UNSENT},
        {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
        {"max-per-address", required_argument, NULL, OPT_MAX_PER_ADDRESS},
        {"hello-timeout", required_argument, NULL, OPT_HELLO_TIMEOUT},
        {"max-sessions-per-tenant", required_argument, NULL, OPT_MAX_SESSIONS_TENANT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *listen[CR_MAX_LISTEN];
    int listen_count = 0;
    cr_backend_options_t opt = {.kind = "auto", .emu_trace = getenv("CUDA_REMOTE_EMU_TRACE")};
    const char *log_level = NULL, *tenants_file = NULL, *metrics = NULL;
    cr_guard_limits_t limits = {
        .connections = 0,
        .per_address = 256,
        .hello_timeout_ms = 10000,
        .tenant_sessions = 1024,
        .unsent = (uint64_t)64 << 20,
        .tenant_queued = (uint64_t)1 << 30,
    };
    int c;
    while ((c = getopt_long(argc, argv, "l:h", options, NULL)) != -1) {
        switch (c) {
        case 'l':
            if (listen_count == CR_MAX_LISTEN) {
                fprintf(stderr, "cuda-remoted: at most %d --listen addresses\n", CR_MAX_LISTEN);
                return 2;
            }
            listen[listen_count++] = optarg;
            break;
        case OPT_BACKEND:
            opt.kind = optarg;
            break;
        case OPT_DEVICE:
            opt.device = atoi(optarg);
            break;
        case OPT_DRIVER:
            opt.driver_path = optarg;
            break;
        case OPT_EMU_MEMORY:
            if (cr_parse_size(optarg, &opt.emu_memory) != 0) {
                fprintf(stderr, "cuda-remoted: --emu-memory %s: not a size\n", optarg);
                return 2;
            }
            break;
        case OPT_EMU_TRACE:
            opt.emu_trace = optarg;
            break;
        case OPT_EMU_FAULTS:
            if (strcmp(optarg, "session") != 0 && strcmp(optarg, "context") != 0) {
                fprintf(stderr, "cuda-remoted: --emu-faults %s: session or context\n", optarg);
                return 2;
            }
            opt.emu_context_faults = strcmp(optarg, "context") == 0;
            break;
        case OPT_EMU_CC:
            if (cr_emu_parse_compute_capability(optarg, &opt.emu_compute_capability) != 0) {
                fprintf(stderr,
                        "cuda-remoted: --emu-compute-capability %s: not a compute capability "
                        "the emulated device knows (%s)\n",
                        optarg, CR_EMU_COMPUTE_CAPABILITIES);
                return 2;
            }
            break;
        case OPT_LOG:
            log_level = optarg;
            break;
        case OPT_MAX_QUEUED: {
            uint64_t bytes;
            if (cr_parse_size(optarg, &bytes) != 0) {
                fprintf(stderr, "cuda-remoted: --max-queued %s: not a size\n", optarg);
                return 2;
            }
            cr_session_set_input_limit((size_t)bytes);
            break;
        }
        case OPT_MAX_QUEUED_TENANT:
        case OPT_MAX_UNSENT: {
            uint64_t bytes;
            if (cr_parse_size(optarg, &bytes) != 0 || bytes == 0) {
                fprintf(stderr, "cuda-remoted: %s %s: not a size\n",
                        c == OPT_MAX_UNSENT ? "--max-unsent" : "--max-queued-per-tenant",
                        optarg);
                return 2;
            }
            *(c == OPT_MAX_UNSENT ? &limits.unsent : &limits.tenant_queued) = bytes;
            break;
        }
        case OPT_MAX_CONNECTIONS:
        case OPT_MAX_PER_ADDRESS:
        case OPT_HELLO_TIMEOUT:
        case OPT_MAX_SESSIONS_TENANT: {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (*optarg < '0' || *optarg > '9' || *end || v > 1000000 ||
                (c == OPT_HELLO_TIMEOUT && (v == 0 || v > 3600))) {
                fprintf(stderr, "cuda-remoted: %s: not a count%s\n", optarg,
                        c == OPT_HELLO_TIMEOUT ? " of seconds (1 to 3600)" : "");
                return 2;
            }
            if (c == OPT_MAX_CONNECTIONS)
                limits.connections = (unsigned)v;
            else if (c == OPT_MAX_PER_ADDRESS)
                limits.per_address = (unsigned)v;
            else if (c == OPT_HELLO_TIMEOUT)
                limits.hello_timeout_ms = (unsigned)v * 1000;
            else
                limits.tenant_sessions = (unsigned)v;
            break;
        }
        case OPT_NO_SHM:
            cr_shm_set_enabled(0);
            break;
        case OPT_TENANTS:
            tenants_file = optarg;
            break;
        case OPT_METRICS:
            metrics = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cuda-remoted: unexpected argument %s\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (log_level)
        setenv("CUDA_REMOTE_LOG", log_level, 1);
    cr_log_init("cuda-remoted", CR_LOG_INFO, 1);
    if (listen_count == 0)
        listen[listen_count++] = CR_DEFAULT_ADDR;
    signal(SIGPIPE, SIG_IGN);
    cr_guard_configure(&limits); /* here: the raised file limit holds for every child */

    static cr_backend_t backend;
    char err[512];
    if (cr_tenants_load(tenants_file, err, sizeof err) != 0) {
        CR_ERROR("--tenants: %s", err);
        return 2;
    }
    cr_listener_t listeners[CR_MAX_LISTEN], metrics_listener;
    for (int i = 0; i < listen_count; i++)
        if (cr_listen_bind(listen[i], 1, &listeners[i]) != 0)
            return 1;
    if (metrics && cr_listen_bind(metrics, 0, &metrics_listener) != 0)
        return 1;
    cr_status_start();

    /* from here on, in the server process (started again after a lost context) */
    int generation = cr_supervise();
    cr_status_set_restarts(generation);
    if (generation > 0 && tenants_file) /* the file as it is now, not as it was at start */
        cr_tenants_reload();
    if (cr_backend_open(&opt, &backend, err, sizeof err) != 0) {
        CR_ERROR("backend %s: %s", opt.kind, err);
        return 1;
    }
    cr_backend_describe_export_tables(&backend);
    if (generation == 0) {
        CR_INFO("backend %s%s%s: %s, %zu MiB, driver %d", backend.kind,
                strcmp(backend.kind, "cuda") == 0 ? " " : "",
                strcmp(backend.kind, "cuda") == 0 ? backend.path : "", backend.desc.name,
                backend.desc.total_mem >> 20, backend.driver_version);
        for (int i = 0; i < listen_count; i++)
            CR_INFO("listening on %s", listeners[i].bound);
        if (metrics)
            CR_INFO("metrics on http://%s/metrics", metrics_listener.bound);
    } else {
        CR_INFO("server process %d with a new device context: serving again", generation);
    }
    cr_waiter_init(&backend);
    if (cr_sched_start(&backend) != 0) {
        CR_ERROR("cannot start the scheduler: out of memory");
        return 1;
    }
    return cr_server_run(&backend, listeners, listen_count, metrics ? &metrics_listener : NULL);
}
