/* The sensors' wire keys and the UUID as NVML writes it (nvml_view.h). */
#include "nvml_view.h"

#include <stdio.h>

const char *cr_nvml_sensor_key(cr_nvml_sensor_t s)
{
    static const char *const keys[] = {
#define CR_NVML_SENSOR_KEY(id, key) key,
        CR_NVML_SENSOR_LIST(CR_NVML_SENSOR_KEY)
#undef CR_NVML_SENSOR_KEY
    };
    return (unsigned)s < CR_NVML_SENSOR_COUNT ? keys[s] : "?";
}

void cr_nvml_uuid_text(const uint8_t u[16], char *out, size_t cap)
{
    snprintf(out, cap, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}
