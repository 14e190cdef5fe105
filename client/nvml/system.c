/* NVML's system functions, the device count and handles (nvml_lib.h): one device, the
 * server's. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nvml_lib.h"

CR_NVML_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    cr_nvml_identity_t v;
    nvmlReturn_t r = cr_nvml_identity(&v);
    return r == NVML_SUCCESS ? cr_nvml_text(version, length, v.driver_version) : r;
}

CR_NVML_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    cr_nvml_identity_t v;
    nvmlReturn_t r = cr_nvml_identity(&v);
    if (r != NVML_SUCCESS)
        return r;
    char text[128]; /* NVML's own form: the CUDA major version, then the driver's */
    snprintf(text, sizeof text, "%d.%s", v.cuda_version / 1000, v.driver_version);
    return cr_nvml_text(version, length, text);
}

CR_NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version)
{
    cr_nvml_identity_t v;
    nvmlReturn_t r = cr_nvml_identity(&v);
    if (r == NVML_SUCCESS && !version)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *version = v.cuda_version;
    return r;
}

CR_NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version)
{
    return nvmlSystemGetCudaDriverVersion_v2(version);
}

/* The name of a process NVML lists; NVML_ERROR_NOT_FOUND for any other. */
CR_NVML_API nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
    cr_nvml_usage_t v;
    nvmlReturn_t r = cr_nvml_usage(&v);
    if (r == NVML_SUCCESS) {
        r = NVML_ERROR_NOT_FOUND;
        for (unsigned i = 0; i < v.process_count; i++)
            if (v.processes[i].pid == pid) {
                r = cr_nvml_text(name, length, v.processes[i].name);
                break;
            }
    }
    return r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    nvmlReturn_t r = cr_nvml_check(CR_NVML_DEVICE);
    if (r == NVML_SUCCESS && !count)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *count = 1; /* one server per GPU */
    return r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
    return nvmlDeviceGetCount_v2(count);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t r = cr_nvml_check(CR_NVML_DEVICE);
    if (r == NVML_SUCCESS && (index != 0 || !device))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *device = CR_NVML_DEVICE;
    return r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* The handle when `matches` holds of the device, NVML_ERROR_NOT_FOUND when not. */
static nvmlReturn_t handle_if(int (*matches)(const cr_nvml_identity_t *v, const char *key),
                              const char *key, nvmlDevice_t *device)
{
    cr_nvml_identity_t v;
    nvmlReturn_t r = cr_nvml_identity(&v);
    if (r == NVML_SUCCESS && (!key || !device))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !matches(&v, key))
        r = NVML_ERROR_NOT_FOUND;
    if (r == NVML_SUCCESS)
        *device = CR_NVML_DEVICE;
    return r;
}

static int uuid_matches(const cr_nvml_identity_t *v, const char *key)
{
    char uuid[48];
    cr_nvml_uuid_text(v->uuid, uuid, sizeof uuid);
    return strcasecmp(uuid, key) == 0;
}

static int serial_matches(const cr_nvml_identity_t *v, const char *key)
{
    return v->serial[0] && strcmp(v->serial, key) == 0;
}

/* "domain:bus:device.function" with the domain of 4 or 8 digits, in either case. */
static int bus_id_matches(const cr_nvml_identity_t *v, const char *key)
{
    unsigned domain, bus, dev, fn = 0;
    if (sscanf(key, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) < 3) {
        domain = 0; /* "bus:device.function" */
        if (sscanf(key, "%x:%x.%x", &bus, &dev, &fn) < 2)
            return 0;
    }
    return domain == v->pci_domain && bus == v->pci_bus && dev == v->pci_device && fn == 0;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    return handle_if(uuid_matches, uuid, device);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetHandleBySerial(const char *serial, nvmlDevice_t *device)
{
    return handle_if(serial_matches, serial, device);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId,
                                                          nvmlDevice_t *device)
{
    return handle_if(bus_id_matches, pciBusId, device);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return handle_if(bus_id_matches, pciBusId, device);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    nvmlReturn_t r = cr_nvml_check(device);
    if (r == NVML_SUCCESS && !index)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *index = 0;
    return r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    return nvmlDeviceGetIndex(device, minor); /* /dev/nvidia0 as the container sees it */
}
