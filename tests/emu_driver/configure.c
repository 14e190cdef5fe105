/* Configures the emulated device when it is loaded as a driver library: the server's
 * `cuda` backend knows nothing of it, so the test passes the trace path and the memory
 * size through the environment. */
#include <stdlib.h>

#include "emu_api.h"

__attribute__((constructor)) static void configure_from_environment(void)
{
    const char *memory = getenv("CUDA_REMOTE_EMU_MEMORY_BYTES");
    cr_emu_config_t cfg = {memory ? strtoull(memory, NULL, 10) : (1ull << 30), 0,
                           getenv("CUDA_REMOTE_EMU_TRACE")};
    cr_emu_configure(&cfg);
}
