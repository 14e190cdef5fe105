/* Configures the emulated device when it is loaded as a driver library: the server's
 * `cuda` backend knows nothing of it, so the test passes the trace path, the memory size
 * and the compute capability (CUDA_REMOTE_EMU_COMPUTE_CAPABILITY, "X.Y", what the server's
 * --emu-compute-capability sets for its own emulated device) through the environment. */
#include <stdio.h>
#include <stdlib.h>

#include "emu_api.h"

__attribute__((constructor)) static void configure_from_environment(void)
{
    const char *memory = getenv("CUDA_REMOTE_EMU_MEMORY_BYTES");
    const char *capability = getenv("CUDA_REMOTE_EMU_COMPUTE_CAPABILITY");
    cr_emu_config_t cfg = {memory ? strtoull(memory, NULL, 10) : (1ull << 30), 0,
                           getenv("CUDA_REMOTE_EMU_TRACE")};
    /* a constructor cannot fail the load: say why the value is ignored, once */
    if (capability && cr_emu_parse_compute_capability(capability, &cfg.compute_capability) != 0)
        fprintf(stderr,
                "emulated driver: CUDA_REMOTE_EMU_COMPUTE_CAPABILITY=%s is not one of %s; "
                "the device reports 9.0\n",
                capability, CR_EMU_COMPUTE_CAPABILITIES);
    cr_emu_configure(&cfg);
}
