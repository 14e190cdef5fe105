/* cuda-remoted's option table (server/options.c): every option appears once in the usage
 * text, every default it shows is a value its parser takes, the defaults are the server's
 * documented ones, values land in the right members, and wrong ones are refused. */
#include <stdlib.h>

#include "check.h"
#include "options.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof(a[0])) - 1)

/* How often `needle` starts a line of the usage text (after its indentation). */
static int headings(const char *usage, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *line = usage; *line;) {
        const char *p = line + strspn(line, " ");
        if (p[0] == '-' && p[1] != '-' && p[2] == ',') /* "-l, " */
            p += 4;
        if (strncmp(p, needle, len) == 0 && (p[len] == ' ' || p[len] == '\n'))
            n++;
        const char *end = strchr(line, '\n');
        line = end ? end + 1 : line + strlen(line);
    }
    return n;
}

static void test_usage_lists_every_option(void)
{
    char *usage = NULL;
    size_t size = 0, count;
    FILE *f = open_memstream(&usage, &size);
    cr_options_usage(f);
    fclose(f);
    const cr_option_t *t = cr_options_table(&count);
    CHECK(count >= 19);
    for (size_t i = 0; i < count; i++) {
        char name[64];
        snprintf(name, sizeof name, "--%s", t[i].name);
        if (headings(usage, name) != 1)
            fprintf(stderr, "%s: %d headings in the usage text\n", name, headings(usage, name));
        CHECK_EQ_INT(headings(usage, name), 1);
        CHECK(t[i].help && t[i].help[0]);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(t[i].name, t[j].name) != 0 &&
                  (!t[i].letter || t[i].letter != t[j].letter));
    }
    free(usage);
}

/* A default the usage text shows as a value must be one its option's parser takes. */
static void test_defaults_parse(void)
{
    size_t count;
    const cr_option_t *t = cr_options_table(&count);
    for (size_t i = 0; i < count; i++) {
        cr_server_options_t o;
        char why[256];
        memset(&o, 0, sizeof o);
        if (!t[i].deflt)
            continue;
        CHECK(t[i].set != NULL);
        int rc = t[i].set(&t[i], t[i].deflt, (char *)&o + t[i].offset, why, sizeof why);
        if (rc != 0)
            fprintf(stderr, "--%s %s: %s\n", t[i].name, t[i].deflt, why);
        CHECK_EQ_INT(rc, 0);
    }
}

static void test_server_defaults(void)
{
    char *argv[] = {"cuda-remoted", NULL};
    cr_server_options_t o;
    unsetenv("CUDA_REMOTE_EMU_TRACE");
    unsetenv("CUDA_REMOTE_LOG");
    CHECK_EQ_INT(cr_options_parse(ARGC(argv), argv, &o), -1);
    CHECK_EQ_INT(o.listen.count, 1);
    CHECK_EQ_STR(o.listen.addr[0], "127.0.0.1:7470");
    CHECK_EQ_STR(o.backend.kind, "auto");
    CHECK_EQ_INT(o.backend.device, 0);
    CHECK(o.backend.driver_path == NULL);
    CHECK_EQ_U64(o.backend.emu_memory, 0); /* the emulated device's own default */
    CHECK(o.backend.emu_trace == NULL);
    CHECK_EQ_INT(o.backend.emu_context_faults, 0);
    CHECK_EQ_INT(o.backend.emu_compute_capability, 90);
    CHECK_EQ_U64(o.max_queued, (uint64_t)256 << 20);
    CHECK_EQ_U64(o.limits.tenant_queued, (uint64_t)1 << 30);
    CHECK_EQ_U64(o.limits.unsent, (uint64_t)64 << 20);
    CHECK_EQ_INT(o.limits.connections, 0);
    CHECK_EQ_INT(o.limits.per_address, 256);
    CHECK_EQ_INT(o.limits.hello_timeout_ms, 10000);
    CHECK_EQ_INT(o.limits.tenant_sessions, 1024);
    CHECK_EQ_INT(o.no_shm, 0);
    CHECK(o.tenants_file == NULL && o.metrics == NULL);
    CHECK_EQ_STR(o.log_level, "info");

    setenv("CUDA_REMOTE_EMU_TRACE", "/tmp/env-trace", 1);
    setenv("CUDA_REMOTE_LOG", "debug", 1);
    CHECK_EQ_INT(cr_options_parse(ARGC(argv), argv, &o), -1);
    CHECK_EQ_STR(o.backend.emu_trace, "/tmp/env-trace");
    CHECK_EQ_STR(o.log_level, "debug");
    char *given[] = {"cuda-remoted", "--emu-trace", "/tmp/given", "--log", "warn", NULL};
    CHECK_EQ_INT(cr_options_parse(ARGC(given), given, &o), -1);
    CHECK_EQ_STR(o.backend.emu_trace, "/tmp/given");
    CHECK_EQ_STR(o.log_level, "warn");
    unsetenv("CUDA_REMOTE_EMU_TRACE");
    unsetenv("CUDA_REMOTE_LOG");
}

static void test_values(void)
{
    char *argv[] = {"cuda-remoted",
                    "--listen",
                    "127.0.0.1:1",
                    "-l",
                    "unix:/tmp/s",
                    "--backend",
                    "emu",
                    "--device",
                    "2",
                    "--driver",
                    "/lib/libcuda.so.1",
                    "--emu-memory",
                    "1.5G",
                    "--emu-faults",
                    "context",
                    "--emu-compute-capability",
                    "12.0",
                    "--max-queued",
                    "1M",
                    "--max-queued-per-tenant",
                    "2GiB",
                    "--max-unsent",
                    "4096",
                    "--max-connections",
                    "100",
                    "--max-per-address",
                    "0",
                    "--hello-timeout",
                    "3600",
                    "--max-sessions-per-tenant",
                    "7",
                    "--no-shm",
                    "--tenants",
                    "t.json",
                    "--metrics",
                    "127.0.0.1:9100",
                    "--log=error",
                    NULL};
    cr_server_options_t o;
    CHECK_EQ_INT(cr_options_parse(ARGC(argv), argv, &o), -1);
    CHECK_EQ_INT(o.listen.count, 2);
    CHECK_EQ_STR(o.listen.addr[0], "127.0.0.1:1");
    CHECK_EQ_STR(o.listen.addr[1], "unix:/tmp/s");
    CHECK_EQ_STR(o.backend.kind, "emu");
    CHECK_EQ_INT(o.backend.device, 2);
    CHECK_EQ_STR(o.backend.driver_path, "/lib/libcuda.so.1");
    CHECK_EQ_U64(o.backend.emu_memory, (uint64_t)3 << 29);
    CHECK_EQ_INT(o.backend.emu_context_faults, 1);
    CHECK_EQ_INT(o.backend.emu_compute_capability, 120);
    CHECK_EQ_U64(o.max_queued, 1 << 20);
    CHECK_EQ_U64(o.limits.tenant_queued, (uint64_t)2 << 30);
    CHECK_EQ_U64(o.limits.unsent, 4096);
    CHECK_EQ_INT(o.limits.connections, 100);
    CHECK_EQ_INT(o.limits.per_address, 0);
    CHECK_EQ_INT(o.limits.hello_timeout_ms, 3600000);
    CHECK_EQ_INT(o.limits.tenant_sessions, 7);
    CHECK_EQ_INT(o.no_shm, 1);
    CHECK_EQ_STR(o.tenants_file, "t.json");
    CHECK_EQ_STR(o.metrics, "127.0.0.1:9100");
    CHECK_EQ_STR(o.log_level, "error");
}

/* Each refused with exit status 2 and a message on stderr (unknown options and stray
 * arguments: tests/integration/server_options.py). */
static void test_refused(void)
{
    static const char *const bad[][2] = {
        {"--emu-memory", "lots"},
        {"--max-queued", "0"},
        {"--max-unsent", "0.1"},
        {"--max-queued-per-tenant", "1X"},
        {"--emu-faults", "all"},
        {"--emu-compute-capability", "7.0"},
        {"--max-connections", "x"},
        {"--max-per-address", "1000001"},
        {"--max-sessions-per-tenant", "-1"},
        {"--hello-timeout", "0"},
        {"--hello-timeout", "3601"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"cuda-remoted", (char *)bad[i][0], (char *)bad[i][1], NULL};
        cr_server_options_t o;
        int rc = cr_options_parse(ARGC(argv), argv, &o);
        if (rc != 2)
            fprintf(stderr, "%s %s: %d\n", bad[i][0], bad[i][1], rc);
        CHECK_EQ_INT(rc, 2);
    }
}

int main(void)
{
    test_usage_lists_every_option();
    test_defaults_parse();
    test_server_defaults();
    test_values();
    test_refused();
    CHECK_DONE();
}
