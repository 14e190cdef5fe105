/* What NVML shows a tenant: the @nvml message (layout in common/protocol.h), its field
 * names, and the record the stub fills from its reply for cuda-remote's libnvidia-ml.so.1.
 *
 * The server writes the fields (server/nvml.c), the stub reads them (client/nvml_view.c),
 * and the NVML library answers from the record (client/nvml/): every name is here once,
 * sensors in one list. */
#ifndef CR_NVML_VIEW_H
#define CR_NVML_VIEW_H

#include <stddef.h>
#include <stdint.h>

/* What an @nvml request asks for (its body: [parts]). */
enum {
    CR_NVML_IDENTITY = 1u << 0, /* name, UUID, PCI, versions: fixed while a server runs */
    CR_NVML_USAGE = 1u << 1,    /* the tenant's memory, processes and utilization */
    CR_NVML_SENSORS = 1u << 2,  /* temperature, power, clocks...: the real device's */
};

/* Sensors: read from the real device through NVIDIA's NVML on the `cuda` backend; the
 * emulated device has none (each is then NVML_ERROR_NOT_SUPPORTED). X(ID, "wire key"). */
#define CR_NVML_SENSOR_LIST(X)                                                                     \
    X(TEMPERATURE_C, "temperature_c")           /* GPU core, degrees C */                          \
    X(POWER_MW, "power_mw")                     /* drawn now */                                    \
    X(POWER_LIMIT_MW, "power_limit_mw")         /* enforced limit */                               \
    X(FAN_PERCENT, "fan_percent")               /* intended fan speed */                           \
    X(PSTATE, "pstate")                         /* performance state, 0 to 15 */                   \
    X(CLOCK_GRAPHICS_MHZ, "clock_graphics_mhz") /* now */                                          \
    X(CLOCK_SM_MHZ, "clock_sm_mhz")                                                                \
    X(CLOCK_MEMORY_MHZ, "clock_memory_mhz")                                                        \
    X(CLOCK_VIDEO_MHZ, "clock_video_mhz")                                                          \
    X(MAX_CLOCK_GRAPHICS_MHZ, "max_clock_graphics_mhz")                                            \
    X(MAX_CLOCK_SM_MHZ, "max_clock_sm_mhz")                                                        \
    X(MAX_CLOCK_MEMORY_MHZ, "max_clock_memory_mhz")                                                \
    X(MAX_CLOCK_VIDEO_MHZ, "max_clock_video_mhz")                                                  \
    X(ECC_CURRENT, "ecc_current") /* 1: enabled */                                                 \
    X(ECC_PENDING, "ecc_pending")                                                                  \
    X(ECC_UNCORRECTED_VOLATILE, "ecc_uncorrected_volatile") /* errors since the last reboot */     \
    X(PCIE_TX_KBPS, "pcie_tx_kbps")                                                                \
    X(PCIE_RX_KBPS, "pcie_rx_kbps")                                                                \
    X(PCIE_LINK_GEN, "pcie_link_gen")                                                              \
    X(PCIE_LINK_WIDTH, "pcie_link_width")                                                          \
    X(PCIE_MAX_LINK_GEN, "pcie_max_link_gen")                                                      \
    X(PCIE_MAX_LINK_WIDTH, "pcie_max_link_width")                                                  \
    X(MEMORY_UTIL_PERCENT, "memory_util_percent") /* the device's memory controller */             \
    X(PERSISTENCE_MODE, "persistence_mode")                                                        \
    X(POWER_DEFAULT_LIMIT_MW, "power_default_limit_mw")

typedef enum {
#define CR_NVML_SENSOR_ENUM(id, key) CR_NVML_##id,
    CR_NVML_SENSOR_LIST(CR_NVML_SENSOR_ENUM)
#undef CR_NVML_SENSOR_ENUM
        CR_NVML_SENSOR_COUNT
} cr_nvml_sensor_t;

/* The wire key of a sensor. */
const char *cr_nvml_sensor_key(cr_nvml_sensor_t s);
/* A device UUID as NVML writes it: "GPU-" and 8-4-4-4-12 hex digits (41 bytes with NUL). */
void cr_nvml_uuid_text(const uint8_t uuid[16], char *out, size_t cap);

/* Keys of the reply's map. */
#define CR_NVML_NAME "name"
#define CR_NVML_UUID "uuid" /* bin 16 */
#define CR_NVML_SERIAL "serial"
#define CR_NVML_BACKEND "backend"
#define CR_NVML_DRIVER_VERSION "driver_version" /* text, as NVIDIA's NVML says it */
#define CR_NVML_CUDA_VERSION "cuda_version"     /* the driver API version, e.g. 13000 */
#define CR_NVML_PCI_BUS_ID "pci_bus_id"         /* "00000000:01:00.0" */
#define CR_NVML_PCI_DOMAIN "pci_domain"
#define CR_NVML_PCI_BUS "pci_bus"
#define CR_NVML_PCI_DEVICE "pci_device"
#define CR_NVML_PCI_DEVICE_ID "pci_device_id"       /* device << 16 | vendor */
#define CR_NVML_PCI_SUBSYSTEM_ID "pci_subsystem_id" /* 0 when unknown */
#define CR_NVML_CC_MAJOR "cc_major"
#define CR_NVML_CC_MINOR "cc_minor"
#define CR_NVML_MEMORY_TOTAL "memory_total"
#define CR_NVML_MEMORY_USED "memory_used"
#define CR_NVML_MEMORY_FREE "memory_free"
#define CR_NVML_UTILIZATION "utilization" /* percent of device time, lately */
#define CR_NVML_PROCESSES "processes"     /* [[pid, device memory, program]...] */
#define CR_NVML_SENSORS_KEY "sensors"     /* {key: integer}: only those read */

#define CR_NVML_MAX_PROCESSES 256

typedef struct {
    uint32_t pid; /* on the client's own host */
    uint64_t used_memory;
    char name[64]; /* the program, without its folder */
} cr_nvml_process_t;

typedef struct { /* CR_NVML_IDENTITY */
    char name[96], serial[32], backend[16], driver_version[80], pci_bus_id[32];
    uint8_t uuid[16];
    uint32_t pci_domain, pci_bus, pci_device, pci_device_id, pci_subsystem_id;
    int cc_major, cc_minor, cuda_version;
} cr_nvml_identity_t;

typedef struct { /* CR_NVML_USAGE */
    uint64_t memory_total, memory_used, memory_free;
    unsigned utilization;   /* percent */
    unsigned process_count; /* kept, at most CR_NVML_MAX_PROCESSES */
    cr_nvml_process_t processes[CR_NVML_MAX_PROCESSES];
} cr_nvml_usage_t;

typedef struct {   /* CR_NVML_SENSORS */
    uint32_t read; /* bit per sensor: its value was read */
    int64_t value[CR_NVML_SENSOR_COUNT];
} cr_nvml_sensors_t;

/* The tenant's view of its device, as the stub fills it. Parts not asked for keep what
 * they had. */
typedef struct {
    cr_nvml_identity_t id;
    cr_nvml_usage_t usage;
    cr_nvml_sensors_t sensors;
} cr_nvml_view_t;
_Static_assert(CR_NVML_SENSOR_COUNT <= 32, "sensors.read has a bit per sensor");

/* The stub's entry for cuda-remote's libnvidia-ml.so.1 (client/nvml_view.c): connects as
 * cuInit does (once per process, the same connection CUDA calls use), asks the server for
 * `parts` and fills them in *view. view_size is sizeof(cr_nvml_view_t) as the caller was
 * built with: a library from another build is refused. Returns a CUresult. */
int cr_remote_nvml_view(unsigned parts, cr_nvml_view_t *view, size_t view_size);

#endif
