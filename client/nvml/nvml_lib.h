/* cuda-remote's libnvidia-ml.so.1: NVIDIA's NVML ABI answered from the tenant's view of its
 * server's device, which the stub asks the server for (cr_remote_nvml_view, nvml_view.h).
 *
 * The library's modules, each a family of NVML's functions:
 *   library.c      init and shutdown, the view, error strings, what is not supported
 *   system.c       versions, device count and handles, process names
 *   device.c       identity, modes, sensors, utilization, events, field values
 *   processes.c    memory, processes, and nvidia-smi's private table of them
 *   unsupported.c  generated: every other function of nvml.h, NVML_ERROR_NOT_SUPPORTED
 *
 * Threads: any; the view is kept under one lock and copied out. */
#ifndef CR_NVML_LIB_H
#define CR_NVML_LIB_H

#define NVML_NO_UNVERSIONED_FUNC_DEFS /* declare the older names too: we export them all */
#include <nvml.h>

#include "nvml_view.h"

/* An exported NVML function. */
#define CR_NVML_API __attribute__((visibility("default")))

/* The one device (one server per GPU). */
extern const int cr_nvml_device_tag;
#define CR_NVML_DEVICE ((nvmlDevice_t)(uintptr_t)&cr_nvml_device_tag)

/* NVML_ERROR_UNINITIALIZED before nvmlInit, NVML_ERROR_INVALID_ARGUMENT for another
 * handle, else NVML_SUCCESS. */
nvmlReturn_t cr_nvml_check(nvmlDevice_t device);
/* The device's identity, as read at nvmlInit. */
nvmlReturn_t cr_nvml_identity(cr_nvml_identity_t *out);
/* The tenant's memory, processes and utilization, fresh from the server. */
nvmlReturn_t cr_nvml_usage(cr_nvml_usage_t *out);
/* Copies text NVML's way: NVML_ERROR_INSUFFICIENT_SIZE when it does not fit with its NUL. */
nvmlReturn_t cr_nvml_text(char *dst, unsigned length, const char *text);
/* A sensor of the real device (read at most once a second): NVML_ERROR_NOT_SUPPORTED
 * where it has none. */
nvmlReturn_t cr_nvml_sensor(nvmlDevice_t device, cr_nvml_sensor_t s, long long *value);
/* The answer of a function cuda-remote does not answer: says so once (CUDA_REMOTE_LOG=info
 * shows it) and returns NVML_ERROR_NOT_SUPPORTED. *said is the function's own flag. An int:
 * the generated stubs see no NVML type. */
int cr_nvml_unsupported(const char *name, int *said);

#endif
