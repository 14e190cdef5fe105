/* libFuzzer target: PTX that loads is also run: every .entry of the input, one block of 32
 * threads, a zeroed 4 KiB parameter buffer, no device allocations (every global access
 * outside the module's own variables faults). A launch must finish or fault, never crash
 * the process. Kernels that loop forever are expected: run with -timeout and, under
 * -fork, -ignore_timeouts=1 (scripts/fuzz.sh does). */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ptx.h"

static int no_allocation(void *user, uint64_t addr, uint64_t *base, uint64_t *size)
{
    (void)user, (void)addr, (void)base, (void)size;
    return 0;
}

static int own_globals(void *user, const char *name, uint64_t *address, uint64_t *size)
{
    (void)user, (void)name, (void)address, (void)size;
    return 1; /* not held: the interpreter keeps the module's variables itself */
}

static void discard(void *user, const char *text, size_t len)
{
    (void)user, (void)text, (void)len;
}

/* The name after the .entry at p, in name (cap bytes); 0 when there is none. */
static size_t entry_name(const char *p, const char *end, char *name, size_t cap)
{
    while (p < end && isspace((unsigned char)*p))
        p++;
    size_t n = 0;
    while (p < end && n < cap - 1 && (isalnum((unsigned char)*p) || *p == '_' || *p == '$'))
        name[n++] = *p++;
    name[n] = '\0';
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t params[4096];
    cr_ptx_module_t *m = NULL;
    char err[256], name[128];
    if (cr_ptx_module_load((const char *)data, size, &m, err, sizeof err) != 0)
        return 0;
    const char *text = (const char *)data, *end = text + size;
    for (const char *p = text; p + 6 < end; p++) {
        if (memcmp(p, ".entry", 6) != 0 || !entry_name(p + 6, end, name, sizeof name) ||
            !cr_ptx_module_has_kernel(m, name))
            continue;
        cr_ptx_env_t env = {NULL, own_globals, no_allocation, discard};
        cr_ptx_launch_t launch = {{1, 1, 1}, {32, 1, 1}, 64, params, sizeof params};
        cr_ptx_fault_t fault;
        cr_ptx_launch(m, name, &launch, &env, &fault);
    }
    cr_ptx_module_free(m);
    return 0;
}
