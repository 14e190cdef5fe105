/* cuda-remoted: serves one GPU (or the emulated device) to cuda-remote clients.
 *
 *   cuda-remoted [--listen ADDR]... [--backend auto|cuda|emu] [--device N]
 *                [--driver PATH] [--emu-memory SIZE] [--emu-trace FILE] [--no-shm]
 *                [--tenants FILE] [--metrics ADDR]
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
        {"log", required_argument, NULL, OPT_LOG},
        {"max-queued", required_argument, NULL, OPT_MAX_QUEUED},
        {"no-shm", no_argument, NULL, OPT_NO_SHM},
        {"tenants", required_argument, NULL, OPT_TENANTS},
        {"metrics", required_argument, NULL, OPT_METRICS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *listen[16];
    int listen_count = 0;
    cr_backend_options_t opt = {.kind = "auto", .emu_trace = getenv("CUDA_REMOTE_EMU_TRACE")};
    const char *log_level = NULL, *tenants_file = NULL, *metrics = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "l:h", options, NULL)) != -1) {
        switch (c) {
        case 'l':
            if (listen_count == 16) {
                fprintf(stderr, "cuda-remoted: at most 16 --listen addresses\n");
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
    if (cr_backend_open(&opt, &backend, err, sizeof err) != 0) {
        CR_ERROR("backend %s: %s", opt.kind, err);
        return 1;
    }
    CR_INFO("backend %s%s%s: %s, %zu MiB, driver %d", backend.kind,
            strcmp(backend.kind, "cuda") == 0 ? " " : "",
            strcmp(backend.kind, "cuda") == 0 ? backend.path : "", backend.desc.name,
            backend.desc.total_mem >> 20, backend.driver_version);
    cr_waiter_init(&backend);
    if (cr_sched_start(&backend) != 0) {
        CR_ERROR("cannot start the scheduler: out of memory");
        return 1;
    }
    cr_status_start();
    return cr_server_run(&backend, listen, listen_count, metrics);
}
