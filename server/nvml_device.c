/* The real device through NVIDIA's NVML (nvml_device.h), for what the driver API cannot
 * say: serial, driver version, PCI ids, and the sensors @nvml passes through.
 *
 * NVIDIA's libnvidia-ml.so.1 is opened by path from the folder of the driver library the
 * backend loaded (the loader's search path after that), never cuda-remote's own library,
 * which says what it is with a marker symbol. The device is found by the UUID the driver
 * gave. NVML is thread-safe: executors read it concurrently once it is open. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

#include "error.h"
#include "log.h"
#include "nvml_device.h"

/* The functions used, resolved by name. */
#define NVML_FUNCTIONS(X)                                                                          \
    X(nvmlInit_v2)                                                                                 \
    X(nvmlDeviceGetHandleByUUID)                                                                   \
    X(nvmlSystemGetDriverVersion)                                                                  \
    X(nvmlDeviceGetSerial)                                                                         \
    X(nvmlDeviceGetPciInfo_v3)                                                                     \
    X(nvmlDeviceGetTemperature)                                                                    \
    X(nvmlDeviceGetPowerUsage)                                                                     \
    X(nvmlDeviceGetEnforcedPowerLimit)                                                             \
    X(nvmlDeviceGetPowerManagementDefaultLimit)                                                    \
    X(nvmlDeviceGetFanSpeed)                                                                       \
    X(nvmlDeviceGetPerformanceState)                                                               \
    X(nvmlDeviceGetClockInfo)                                                                      \
    X(nvmlDeviceGetMaxClockInfo)                                                                   \
    X(nvmlDeviceGetEccMode)                                                                        \
    X(nvmlDeviceGetTotalEccErrors)                                                                 \
    X(nvmlDeviceGetPcieThroughput)                                                                 \
    X(nvmlDeviceGetCurrPcieLinkGeneration)                                                         \
    X(nvmlDeviceGetCurrPcieLinkWidth)                                                              \
    X(nvmlDeviceGetMaxPcieLinkGeneration)                                                          \
    X(nvmlDeviceGetMaxPcieLinkWidth)                                                               \
    X(nvmlDeviceGetUtilizationRates)                                                               \
    X(nvmlDeviceGetPersistenceMode)

static struct {
    pthread_once_t once;
    int ok;
    nvmlDevice_t device;
    cr_nvml_device_identity_t identity;
#define NVML_POINTER(name) __typeof__(name) *name;
    NVML_FUNCTIONS(NVML_POINTER)
#undef NVML_POINTER
} nv = {.once = PTHREAD_ONCE_INIT};

static const cr_backend_t *opening; /* the backend open_nvml is for */

static void *open_library(const cr_backend_t *b)
{
    char path[600];
    const char *slash = strrchr(b->path, '/');
    if (slash)
        snprintf(path, sizeof path, "%.*s/libnvidia-ml.so.1", (int)(slash - b->path), b->path);
    else
        snprintf(path, sizeof path, "libnvidia-ml.so.1");
    const char *tries[] = {path, "libnvidia-ml.so.1"};
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        void *h = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            CR_DEBUG("NVML: not using %s: %s", tries[i], dlerror());
            continue;
        }
        if (dlsym(h, "cr_remote_nvml_version")) { /* our own: it would ask us */
            CR_DEBUG("NVML: %s is cuda-remote's own library, not NVIDIA's", tries[i]);
            dlclose(h);
            continue;
        }
        return h;
    }
    return NULL;
}

static void open_nvml(void)
{
    const cr_backend_t *b = opening;
    if (strcmp(b->kind, "cuda") != 0)
        return;
    void *h = open_library(b);
    if (!h) {
        CR_WARN("NVML: NVIDIA's libnvidia-ml.so.1 cannot be opened beside %s: temperature, "
                "power and clocks are not passed through",
                b->path);
        return;
    }
#define NVML_RESOLVE(name) nv.name = (__typeof__(name) *)dlsym(h, #name);
    NVML_FUNCTIONS(NVML_RESOLVE)
#undef NVML_RESOLVE
    char uuid[48];
    cr_nvml_uuid_text((const uint8_t *)b->desc.uuid.bytes, uuid, sizeof uuid);
    nvmlReturn_t r = NVML_ERROR_FUNCTION_NOT_FOUND;
    if (!nv.nvmlInit_v2 || !nv.nvmlDeviceGetHandleByUUID || (r = nv.nvmlInit_v2()) != 0 ||
        (r = nv.nvmlDeviceGetHandleByUUID(uuid, &nv.device)) != 0) {
        CR_WARN("NVML: NVIDIA's NVML does not give the device %s (error %d): sensors are not "
                "passed through",
                uuid, (int)r);
        return; /* the library stays open: NVML may have started threads */
    }
    cr_nvml_device_identity_t *id = &nv.identity;
    if (nv.nvmlDeviceGetSerial &&
        nv.nvmlDeviceGetSerial(nv.device, id->serial, sizeof id->serial) != NVML_SUCCESS)
        id->serial[0] = 0;
    if (nv.nvmlSystemGetDriverVersion &&
        nv.nvmlSystemGetDriverVersion(id->driver_version, sizeof id->driver_version) !=
            NVML_SUCCESS)
        id->driver_version[0] = 0;
    nvmlPciInfo_t pci;
    if (nv.nvmlDeviceGetPciInfo_v3 && nv.nvmlDeviceGetPciInfo_v3(nv.device, &pci) == 0) {
        id->pci_device_id = pci.pciDeviceId;
        id->pci_subsystem_id = pci.pciSubSystemId;
    }
    nv.ok = 1;
    CR_INFO("NVML: passing through sensors of %s (driver %s)", uuid, id->driver_version);
}

static int ready(const cr_backend_t *b)
{
    opening = b; /* one backend per server process: every caller passes the same */
    pthread_once(&nv.once, open_nvml);
    return nv.ok;
}

int cr_nvml_device_identity(const cr_backend_t *b, cr_nvml_device_identity_t *id)
{
    if (!ready(b))
        return CR_ENOTFOUND;
    *id = nv.identity;
    return 0;
}

/* One sensor: 1 with *v when the device has it. */
static int read_sensor(cr_nvml_sensor_t s, int64_t *v)
{
    nvmlDevice_t d = nv.device;
    unsigned u = 0;
    nvmlReturn_t r = NVML_ERROR_NOT_SUPPORTED;
    nvmlEnableState_t on = NVML_FEATURE_DISABLED, pending = NVML_FEATURE_DISABLED;
    unsigned long long count = 0;
    nvmlUtilization_t util = {0, 0};
    nvmlPstates_t ps = NVML_PSTATE_UNKNOWN;
#define CALL(fn, ...) (nv.fn ? nv.fn(__VA_ARGS__) : NVML_ERROR_FUNCTION_NOT_FOUND)
    switch (s) {
    case CR_NVML_TEMPERATURE_C:
        r = CALL(nvmlDeviceGetTemperature, d, NVML_TEMPERATURE_GPU, &u);
        break;
    case CR_NVML_POWER_MW:
        r = CALL(nvmlDeviceGetPowerUsage, d, &u);
        break;
    case CR_NVML_POWER_LIMIT_MW:
        r = CALL(nvmlDeviceGetEnforcedPowerLimit, d, &u);
        break;
    case CR_NVML_POWER_DEFAULT_LIMIT_MW:
        r = CALL(nvmlDeviceGetPowerManagementDefaultLimit, d, &u);
        break;
    case CR_NVML_FAN_PERCENT:
        r = CALL(nvmlDeviceGetFanSpeed, d, &u);
        break;
    case CR_NVML_PSTATE:
        r = CALL(nvmlDeviceGetPerformanceState, d, &ps);
        u = (unsigned)ps;
        break;
    case CR_NVML_CLOCK_GRAPHICS_MHZ:
        r = CALL(nvmlDeviceGetClockInfo, d, NVML_CLOCK_GRAPHICS, &u);
        break;
    case CR_NVML_CLOCK_SM_MHZ:
        r = CALL(nvmlDeviceGetClockInfo, d, NVML_CLOCK_SM, &u);
        break;
    case CR_NVML_CLOCK_MEMORY_MHZ:
        r = CALL(nvmlDeviceGetClockInfo, d, NVML_CLOCK_MEM, &u);
        break;
    case CR_NVML_CLOCK_VIDEO_MHZ:
        r = CALL(nvmlDeviceGetClockInfo, d, NVML_CLOCK_VIDEO, &u);
        break;
    case CR_NVML_MAX_CLOCK_GRAPHICS_MHZ:
        r = CALL(nvmlDeviceGetMaxClockInfo, d, NVML_CLOCK_GRAPHICS, &u);
        break;
    case CR_NVML_MAX_CLOCK_SM_MHZ:
        r = CALL(nvmlDeviceGetMaxClockInfo, d, NVML_CLOCK_SM, &u);
        break;
    case CR_NVML_MAX_CLOCK_MEMORY_MHZ:
        r = CALL(nvmlDeviceGetMaxClockInfo, d, NVML_CLOCK_MEM, &u);
        break;
    case CR_NVML_MAX_CLOCK_VIDEO_MHZ:
        r = CALL(nvmlDeviceGetMaxClockInfo, d, NVML_CLOCK_VIDEO, &u);
        break;
    case CR_NVML_ECC_CURRENT:
    case CR_NVML_ECC_PENDING:
        r = CALL(nvmlDeviceGetEccMode, d, &on, &pending);
        u = (s == CR_NVML_ECC_CURRENT ? on : pending) == NVML_FEATURE_ENABLED;
        break;
    case CR_NVML_ECC_UNCORRECTED_VOLATILE:
        r = CALL(nvmlDeviceGetTotalEccErrors, d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                 NVML_VOLATILE_ECC, &count);
        if (r == NVML_SUCCESS)
            *v = (int64_t)count;
        return r == NVML_SUCCESS;
    case CR_NVML_PCIE_TX_KBPS:
        r = CALL(nvmlDeviceGetPcieThroughput, d, NVML_PCIE_UTIL_TX_BYTES, &u);
        break;
    case CR_NVML_PCIE_RX_KBPS:
        r = CALL(nvmlDeviceGetPcieThroughput, d, NVML_PCIE_UTIL_RX_BYTES, &u);
        break;
    case CR_NVML_PCIE_LINK_GEN:
        r = CALL(nvmlDeviceGetCurrPcieLinkGeneration, d, &u);
        break;
    case CR_NVML_PCIE_LINK_WIDTH:
        r = CALL(nvmlDeviceGetCurrPcieLinkWidth, d, &u);
        break;
    case CR_NVML_PCIE_MAX_LINK_GEN:
        r = CALL(nvmlDeviceGetMaxPcieLinkGeneration, d, &u);
        break;
    case CR_NVML_PCIE_MAX_LINK_WIDTH:
        r = CALL(nvmlDeviceGetMaxPcieLinkWidth, d, &u);
        break;
    case CR_NVML_MEMORY_UTIL_PERCENT:
        r = CALL(nvmlDeviceGetUtilizationRates, d, &util);
        u = util.memory;
        break;
    case CR_NVML_PERSISTENCE_MODE:
        r = CALL(nvmlDeviceGetPersistenceMode, d, &on);
        u = on == NVML_FEATURE_ENABLED;
        break;
    case CR_NVML_SENSOR_COUNT:
        break;
    }
#undef CALL
    if (r != NVML_SUCCESS)
        return 0;
    *v = u;
    return 1;
}

uint32_t cr_nvml_device_sensors(const cr_backend_t *b, int64_t value[CR_NVML_SENSOR_COUNT])
{
    if (!ready(b))
        return 0;
    uint32_t mask = 0;
    for (int s = 0; s < CR_NVML_SENSOR_COUNT; s++)
        if (read_sensor((cr_nvml_sensor_t)s, &value[s]))
            mask |= 1u << s;
    return mask;
}
