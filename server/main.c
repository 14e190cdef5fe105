/* cuda-remoted: serves one GPU (or the emulated device) to cuda-remote clients.
 *
 *   cuda-remoted [--listen ADDR]... [--backend auto|cuda|emu] [--device N]
 *                [--driver PATH] [--emu-memory SIZE] [--emu-trace FILE]
 *                [--emu-faults session|context] [--no-shm] [--tenants FILE] [--metrics ADDR]
 *
 * The first process binds the listening sockets and supervises the server process, which
 * it starts again when the device context is lost (supervisor.c).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
            "  --max-queued SIZE  input a client may have waiting to run before the server\n"
            "                     stops reading its connection (default 256MiB)\n"
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
        OPT_LOG,
        OPT_MAX_QUEUED,
        OPT_NO_SHM,
        OPT_TENANTS,
        OPT_METRICS
    };
    static const struct option options[] = {
        {"listen", required_argument, NULL, 'l'},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"driver", required_argument, NULL, OPT_DRIVER},
        {"emu-memory", required_argument, NULL, OPT_EMU_MEMORY},
        {"emu-trace", required_argument, NULL, OPT_EMU_TRACE},
        {"emu-faults", required_argument, NULL, OPT_EMU_FAULTS},
        {"log", required_argument, NULL, OPT_LOG},
        {"max-queued", required_argument, NULL, OPT_MAX_QUEUED},
        {"no-shm", no_argument, NULL, OPT_NO_SHM},
        {"tenants", required_argument, NULL, OPT_TENANTS},
        {"metrics", required_argument, NULL, OPT_METRICS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *listen[CR_MAX_LISTEN];
    int listen_count = 0;
    cr_backend_options_t opt = {.kind = "auto", .emu_trace = getenv("CUDA_REMOTE_EMU_TRACE")};
    const char *log_level = NULL, *tenants_file = NULL, *metrics = NULL;
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
