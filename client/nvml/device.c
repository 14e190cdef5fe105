/* NVML's device functions (nvml_lib.h): identity from the server's description of its
 * device; modes as a shared device has them; sensors passed through from the real device
 * (NVML_ERROR_NOT_SUPPORTED on the emulated one); utilization as the tenant's share of
 * the device time; events and field values as a device that offers none. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nvml_lib.h"

/* Checks the handle and the output pointer, then reads the identity. */
static nvmlReturn_t identity(nvmlDevice_t device, const void *out, cr_nvml_identity_t *id)
{
    nvmlReturn_t r = cr_nvml_check(device);
    if (r == NVML_SUCCESS && !out)
        r = NVML_ERROR_INVALID_ARGUMENT;
    return r == NVML_SUCCESS ? cr_nvml_identity(id) : r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    cr_nvml_identity_t id;
    nvmlReturn_t r = identity(device, name, &id);
    return r == NVML_SUCCESS ? cr_nvml_text(name, length, id.name) : r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    cr_nvml_identity_t id;
    nvmlReturn_t r = identity(device, uuid, &id);
    if (r != NVML_SUCCESS)
        return r;
    char text[48];
    cr_nvml_uuid_text(id.uuid, text, sizeof text);
    return cr_nvml_text(uuid, length, text);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
    cr_nvml_identity_t id;
    nvmlReturn_t r = identity(device, serial, &id);
    if (r == NVML_SUCCESS && !id.serial[0])
        r = NVML_ERROR_NOT_SUPPORTED;
    return r == NVML_SUCCESS ? cr_nvml_text(serial, length, id.serial) : r;
}

static void fill_pci(const cr_nvml_identity_t *id, nvmlPciInfo_t *pci, int legacy)
{
    /* the first NVML's struct ends before busId: an old caller's is that long */
    memset(pci, 0, legacy ? offsetof(nvmlPciInfo_t, busId) : sizeof *pci);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.0", id->pci_domain & 0xffff,
             id->pci_bus, id->pci_device);
    pci->domain = id->pci_domain;
    pci->bus = id->pci_bus;
    pci->device = id->pci_device;
    pci->pciDeviceId = id->pci_device_id;
    pci->pciSubSystemId = id->pci_subsystem_id;
    if (!legacy)
        snprintf(pci->busId, sizeof pci->busId, "%s", id->pci_bus_id);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    cr_nvml_identity_t id;
    nvmlReturn_t r = identity(device, pci, &id);
    if (r == NVML_SUCCESS)
        fill_pci(&id, pci, 0);
    return r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    cr_nvml_identity_t id;
    nvmlReturn_t r = identity(device, pci, &id);
    if (r == NVML_SUCCESS)
        fill_pci(&id, pci, 1);
    return r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                            int *minor)
{
    cr_nvml_identity_t id;
    nvmlReturn_t r = identity(device, major, &id);
    if (r == NVML_SUCCESS && !minor)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS) {
        *major = id.cc_major;
        *minor = id.cc_minor;
    }
    return r;
}

/* ---- modes: a device shared by the server's tenants ---- */

/* Writes value to *out after checking the handle. */
static nvmlReturn_t answer(nvmlDevice_t device, unsigned *out, unsigned value)
{
    nvmlReturn_t r = cr_nvml_check(device);
    if (r == NVML_SUCCESS && !out)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *out = value;
    return r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
    return answer(device, (unsigned *)mode, NVML_COMPUTEMODE_DEFAULT); /* shared */
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    return answer(device, (unsigned *)mode, NVML_FEATURE_DISABLED); /* none reaches a tenant */
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    return answer(device, (unsigned *)mode, NVML_FEATURE_DISABLED);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    return answer(device, count, 0); /* the server shares the device, not its MIG slices */
}

CR_NVML_API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMig)
{
    return answer(device, isMig, 0);
}

/* ---- sensors ---- */

/* What a call with a wrong argument returns: NVML checks the handle first. */
static nvmlReturn_t refuse(nvmlDevice_t device, nvmlReturn_t why)
{
    nvmlReturn_t r = cr_nvml_check(device);
    return r == NVML_SUCCESS ? why : r;
}

/* Returns a sensor into *out, converted to the caller's type. */
#define SENSOR(device, sensor, out)                                                                \
    do {                                                                                           \
        long long value_;                                                                          \
        if (!(out))                                                                                \
            return refuse(device, NVML_ERROR_INVALID_ARGUMENT);                                    \
        nvmlReturn_t r_ = cr_nvml_sensor(device, sensor, &value_);                                 \
        if (r_ == NVML_SUCCESS)                                                                    \
            *(out) = (__typeof__(*(out)))value_;                                                   \
        return r_;                                                                                 \
    } while (0)

CR_NVML_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                  nvmlTemperatureSensors_t sensorType,
                                                  unsigned int *temp)
{
    if (sensorType != NVML_TEMPERATURE_GPU)
        return refuse(device, NVML_ERROR_INVALID_ARGUMENT);
    SENSOR(device, CR_NVML_TEMPERATURE_C, temp);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    SENSOR(device, CR_NVML_POWER_MW, power);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    SENSOR(device, CR_NVML_POWER_LIMIT_MW, limit);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
    SENSOR(device, CR_NVML_POWER_LIMIT_MW, limit);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                                  unsigned int *defaultLimit)
{
    SENSOR(device, CR_NVML_POWER_DEFAULT_LIMIT_MW, defaultLimit);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
    SENSOR(device, CR_NVML_FAN_PERCENT, speed);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState)
{
    SENSOR(device, CR_NVML_PSTATE, pState);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, nvmlPstates_t *pState)
{
    SENSOR(device, CR_NVML_PSTATE, pState);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    SENSOR(device, CR_NVML_PERSISTENCE_MODE, mode);
}

/* The sensor of a clock type, or CR_NVML_SENSOR_COUNT for a type without one. */
static cr_nvml_sensor_t clock_sensor(nvmlClockType_t type, int max)
{
    switch (type) {
    case NVML_CLOCK_GRAPHICS:
        return max ? CR_NVML_MAX_CLOCK_GRAPHICS_MHZ : CR_NVML_CLOCK_GRAPHICS_MHZ;
    case NVML_CLOCK_SM:
        return max ? CR_NVML_MAX_CLOCK_SM_MHZ : CR_NVML_CLOCK_SM_MHZ;
    case NVML_CLOCK_MEM:
        return max ? CR_NVML_MAX_CLOCK_MEMORY_MHZ : CR_NVML_CLOCK_MEMORY_MHZ;
    case NVML_CLOCK_VIDEO:
        return max ? CR_NVML_MAX_CLOCK_VIDEO_MHZ : CR_NVML_CLOCK_VIDEO_MHZ;
    default:
        return CR_NVML_SENSOR_COUNT;
    }
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                unsigned int *clock)
{
    cr_nvml_sensor_t s = clock_sensor(type, 0);
    if (s == CR_NVML_SENSOR_COUNT)
        return refuse(device, NVML_ERROR_INVALID_ARGUMENT);
    SENSOR(device, s, clock);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                   unsigned int *clock)
{
    cr_nvml_sensor_t s = clock_sensor(type, 1);
    if (s == CR_NVML_SENSOR_COUNT)
        return refuse(device, NVML_ERROR_INVALID_ARGUMENT);
    SENSOR(device, s, clock);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                              nvmlEnableState_t *pending)
{
    long long now, next;
    nvmlReturn_t r = cr_nvml_sensor(device, CR_NVML_ECC_CURRENT, &now);
    if (r == NVML_SUCCESS)
        r = cr_nvml_sensor(device, CR_NVML_ECC_PENDING, &next);
    if (r == NVML_SUCCESS && (!current || !pending))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS) {
        *current = now ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
        *pending = next ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    }
    return r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                     nvmlMemoryErrorType_t errorType,
                                                     nvmlEccCounterType_t counterType,
                                                     unsigned long long *eccCounts)
{
    if (errorType != NVML_MEMORY_ERROR_TYPE_UNCORRECTED || counterType != NVML_VOLATILE_ECC)
        return refuse(device, NVML_ERROR_NOT_SUPPORTED);
    SENSOR(device, CR_NVML_ECC_UNCORRECTED_VOLATILE, eccCounts);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device,
                                                     nvmlPcieUtilCounter_t counter,
                                                     unsigned int *value)
{
    if (counter != NVML_PCIE_UTIL_TX_BYTES && counter != NVML_PCIE_UTIL_RX_BYTES)
        return refuse(device, NVML_ERROR_INVALID_ARGUMENT);
    SENSOR(device, counter == NVML_PCIE_UTIL_TX_BYTES ? CR_NVML_PCIE_TX_KBPS : CR_NVML_PCIE_RX_KBPS,
           value);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device,
                                                             unsigned int *currLinkGen)
{
    SENSOR(device, CR_NVML_PCIE_LINK_GEN, currLinkGen);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device,
                                                        unsigned int *currLinkWidth)
{
    SENSOR(device, CR_NVML_PCIE_LINK_WIDTH, currLinkWidth);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device,
                                                            unsigned int *maxLinkGen)
{
    SENSOR(device, CR_NVML_PCIE_MAX_LINK_GEN, maxLinkGen);
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device,
                                                       unsigned int *maxLinkWidth)
{
    SENSOR(device, CR_NVML_PCIE_MAX_LINK_WIDTH, maxLinkWidth);
}

/* gpu: the tenant's share of the device time lately (every tenant's for an admin), as the
 * scheduler measures it; memory: the device's memory controller where it is read, else 0. */
CR_NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                       nvmlUtilization_t *utilization)
{
    nvmlReturn_t r = cr_nvml_check(device);
    if (r == NVML_SUCCESS && !utilization)
        r = NVML_ERROR_INVALID_ARGUMENT;
    cr_nvml_usage_t usage;
    if (r == NVML_SUCCESS)
        r = cr_nvml_usage(&usage);
    if (r != NVML_SUCCESS)
        return r;
    long long memory = 0;
    if (cr_nvml_sensor(device, CR_NVML_MEMORY_UTIL_PERCENT, &memory) != NVML_SUCCESS)
        memory = 0;
    utilization->gpu = usage.utilization;
    utilization->memory = (unsigned)memory;
    return NVML_SUCCESS;
}

/* ---- events and field values: none offered ---- */

static const int event_set_tag;

CR_NVML_API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    nvmlReturn_t r = cr_nvml_check(CR_NVML_DEVICE);
    if (r == NVML_SUCCESS && !set)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *set = (nvmlEventSet_t)(uintptr_t)&event_set_tag;
    return r;
}

CR_NVML_API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    return set == (nvmlEventSet_t)(uintptr_t)&event_set_tag ? NVML_SUCCESS
                                                            : NVML_ERROR_INVALID_ARGUMENT;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                          unsigned long long *eventTypes)
{
    nvmlReturn_t r = cr_nvml_check(device);
    if (r == NVML_SUCCESS && !eventTypes)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *eventTypes = 0;
    return r;
}

/* As NVML does: the call succeeds, each value says it is not supported. */
CR_NVML_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                                  nvmlFieldValue_t *values)
{
    nvmlReturn_t r = cr_nvml_check(device);
    if (r == NVML_SUCCESS && (valuesCount < 0 || (valuesCount > 0 && !values)))
        r = NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; r == NVML_SUCCESS && i < valuesCount; i++) {
        values[i].timestamp = 0;
        values[i].latencyUsec = 0;
        values[i].valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        values[i].value.ullVal = 0;
        values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
    return r;
}
