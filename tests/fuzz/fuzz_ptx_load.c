/* libFuzzer target: PTX text from a tenant, parsed and decoded (cr_ptx_module_load). Any
 * input must load or be refused with a message, never crash or leak. */
#include <stddef.h>
#include <stdint.h>

#include "ptx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cr_ptx_module_t *m = NULL;
    char err[256];
    if (cr_ptx_module_load((const char *)data, size, &m, err, sizeof err) == 0)
        cr_ptx_module_free(m);
    return 0;
}
