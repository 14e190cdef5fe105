/* A stand-in for NVIDIA's libnvidia-ml.so.1 beside the emulated device packaged as a
 * driver library, so that the server's passing through of the real device's identity and
 * sensors (server/nvml_device.c) runs without a GPU. It answers the functions the server
 * uses with fixed values nvml_test.py checks, for the device whose UUID the driver gives
 * (as NVML's text, "GPU-" and 36 characters); NVML_ERROR_NOT_FOUND for any other. */
#include <stdio.h>
#include <string.h>

#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

#define API __attribute__((visibility("default")))

static int device_tag, inits;
#define DEVICE ((nvmlDevice_t)&device_tag)

API nvmlReturn_t nvmlInit_v2(void)
{
    inits++;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    if (!inits)
        return NVML_ERROR_UNINITIALIZED;
    if (strncmp(uuid, "GPU-", 4) != 0 || strlen(uuid) != 40)
        return NVML_ERROR_NOT_FOUND;
    *device = DEVICE;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    return snprintf(version, length, "580.95.05") < (int)length ? NVML_SUCCESS
                                                                : NVML_ERROR_INSUFFICIENT_SIZE;
}

API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char *serial, unsigned int length)
{
    return d == DEVICE && snprintf(serial, length, "1650123456789") < (int)length
               ? NVML_SUCCESS
               : NVML_ERROR_INVALID_ARGUMENT;
}

API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
    if (d != DEVICE)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    pci->pciDeviceId = 0x233010de; /* an H100's device and vendor ids */
    pci->pciSubSystemId = 0x16c110de;
    return NVML_SUCCESS;
}

/* A sensor: value, for the device. */
static nvmlReturn_t give(nvmlDevice_t d, unsigned *out, unsigned value)
{
    if (d != DEVICE)
        return NVML_ERROR_INVALID_ARGUMENT;
    *out = value;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t s, unsigned *t)
{
    return s == NVML_TEMPERATURE_GPU ? give(d, t, 41) : NVML_ERROR_INVALID_ARGUMENT;
}

API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *mw)
{
    return give(d, mw, 71234);
}

API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned *mw)
{
    return give(d, mw, 700000);
}

API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned *mhz)
{
    return give(d, mhz, type == NVML_CLOCK_MEM ? 2619 : 1980);
}

API nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t d, nvmlPstates_t *p)
{
    return give(d, (unsigned *)p, NVML_PSTATE_0);
}

/* The device has no fan: the server must pass NOT_SUPPORTED through. */
API nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t d, unsigned *speed)
{
    (void)d, (void)speed;
    return NVML_ERROR_NOT_SUPPORTED;
}
