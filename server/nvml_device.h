/* The real device as NVIDIA's NVML sees it, for @nvml on the `cuda` backend
 * (nvml_device.c): its identity beyond what the driver API says, and its sensors. */
#ifndef CR_SERVER_NVML_DEVICE_H
#define CR_SERVER_NVML_DEVICE_H

#include <stdint.h>

#include "backend.h"
#include "nvml_view.h"

/* What NVIDIA's NVML says of the backend's device that the driver API does not. */
typedef struct {
    char serial[32], driver_version[80];
    uint32_t pci_device_id, pci_subsystem_id;
} cr_nvml_device_identity_t;

/* NVIDIA's NVML for the backend's device, opened on first use (any thread; once): from the
 * folder of the driver library the backend loaded, never cuda-remote's own library. 0, or
 * CR_ENOTFOUND on the emulated device or where NVML cannot be opened (said once in the
 * log); then the caller answers without it. */
int cr_nvml_device_identity(const cr_backend_t *b, cr_nvml_device_identity_t *id);
/* Reads every sensor the device has: value[s] for each bit s set in the returned mask. */
uint32_t cr_nvml_device_sensors(const cr_backend_t *b, int64_t value[CR_NVML_SENSOR_COUNT]);

#endif
