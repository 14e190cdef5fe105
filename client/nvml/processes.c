/* NVML's memory and process functions (nvml_lib.h), from the tenant's usage: memory as
 * cuMemGetInfo gives it to the tenant (its quota as the total), and as compute processes
 * the tenant's clients that use the device, each with its pid on its own host. No
 * graphics or MPS processes. nvidia-smi reads processes through a private table instead
 * (nvmlInternalGetExportTable), answered here from the same list. */
#include <stdint.h>
#include <string.h>

#include "nvml_lib.h"

static nvmlReturn_t usage(nvmlDevice_t device, const void *out, cr_nvml_usage_t *u)
{
    nvmlReturn_t r = cr_nvml_check(device);
    if (r == NVML_SUCCESS && !out)
        r = NVML_ERROR_INVALID_ARGUMENT;
    return r == NVML_SUCCESS ? cr_nvml_usage(u) : r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    cr_nvml_usage_t u;
    nvmlReturn_t r = usage(device, memory, &u);
    if (r == NVML_SUCCESS) {
        memory->total = u.memory_total;
        memory->used = u.memory_used;
        memory->free = u.memory_free;
    }
    return r;
}

CR_NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    cr_nvml_usage_t u;
    nvmlReturn_t r = usage(device, memory, &u);
    if (r == NVML_SUCCESS && memory->version != nvmlMemory_v2)
        r = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (r == NVML_SUCCESS) {
        memory->total = u.memory_total;
        memory->used = u.memory_used;
        memory->free = u.memory_free;
        /* what the tenant can neither use nor holds (other tenants' memory, the driver's,
         * where the device has less free than the quota leaves), so that the four add up
         * as NVIDIA's NVML's do */
        uint64_t counted = u.memory_used + u.memory_free;
        memory->reserved = u.memory_total > counted ? u.memory_total - counted : 0;
    }
    return r;
}

/* Lists the processes NVML's way into an array of `stride`-byte entries, each filled by
 * fill(entry, process): NVML_ERROR_INSUFFICIENT_SIZE with the number needed in *count
 * when it holds fewer. `none` lists nothing (graphics and MPS processes). */
static nvmlReturn_t list(nvmlDevice_t device, unsigned *count, void *entries, size_t stride,
                         void (*fill)(void *entry, const cr_nvml_process_t *p), int none)
{
    cr_nvml_usage_t u;
    nvmlReturn_t r = usage(device, count, &u);
    if (r != NVML_SUCCESS)
        return r;
    unsigned n = none ? 0 : u.process_count;
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n && !entries)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < n; i++)
        fill((char *)entries + i * stride, &u.processes[i]);
    *count = n;
    return NVML_SUCCESS;
}

static void fill_v1(void *entry, const cr_nvml_process_t *p)
{
    nvmlProcessInfo_v1_t *e = entry;
    e->pid = p->pid;
    e->usedGpuMemory = p->used_memory;
}

static void fill_v2(void *entry, const cr_nvml_process_t *p)
{
    nvmlProcessInfo_v2_t *e = entry;
    e->pid = p->pid;
    e->usedGpuMemory = p->used_memory;
    e->gpuInstanceId = 0xffffffffu; /* not MIG */
    e->computeInstanceId = 0xffffffffu;
}

/* The compute, graphics and MPS lists, in NVML's three versions of the entry. */
#define PROCESS_LISTS(X)                                                                           \
    X(ComputeRunningProcesses, 0)                                                                  \
    X(GraphicsRunningProcesses, 1)                                                                 \
    X(MPSComputeRunningProcesses, 1)

#define PROCESS_LIST_FUNCTIONS(kind, none)                                                         \
    CR_NVML_API nvmlReturn_t nvmlDeviceGet##kind##_v3(nvmlDevice_t device, unsigned int *count,    \
                                                      nvmlProcessInfo_t *infos)                    \
    {                                                                                              \
        return list(device, count, infos, sizeof *infos, fill_v2, none);                           \
    }                                                                                              \
    CR_NVML_API nvmlReturn_t nvmlDeviceGet##kind##_v2(nvmlDevice_t device, unsigned int *count,    \
                                                      nvmlProcessInfo_v2_t *infos)                 \
    {                                                                                              \
        return list(device, count, infos, sizeof *infos, fill_v2, none);                           \
    }                                                                                              \
    CR_NVML_API nvmlReturn_t nvmlDeviceGet##kind(nvmlDevice_t device, unsigned int *count,         \
                                                 nvmlProcessInfo_v1_t *infos)                      \
    {                                                                                              \
        return list(device, count, infos, sizeof *infos, fill_v1, none);                           \
    }
PROCESS_LISTS(PROCESS_LIST_FUNCTIONS)

/* ---- nvidia-smi's private table ----
 * nvidia-smi (the 535 series) asks nvmlInternalGetExportTable for the table below right
 * after nvmlInit and stops ("Mismatch in versions between nvidia-smi and NVML") without
 * it. The table starts with its size in bytes; nvidia-smi calls an entry only when the
 * size covers it and it is not NULL, else it does without. Entries 0x6a8, 0x6b0 and
 * 0x6b8 list compute, MPS and graphics processes as fn(device, count (in: room), entries)
 * with 0x1020-byte entries, read as below (from what nvidia-smi prints of them). */
static const unsigned char smi_table_uuid[16] = {0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                                 0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4};

typedef struct {
    uint32_t pid;
    uint32_t reserved;
    uint64_t used_memory;
    uint32_t gpu_instance, compute_instance;
    uint64_t unknown; /* left 0 */
    char name[0x1000];
} smi_process_t;
_Static_assert(sizeof(smi_process_t) == 0x1020, "nvidia-smi's process entry is 0x1020 bytes");

static void fill_smi(void *entry, const cr_nvml_process_t *p)
{
    smi_process_t *e = entry;
    memset(e, 0, sizeof *e);
    e->pid = p->pid;
    e->used_memory = p->used_memory;
    e->gpu_instance = e->compute_instance = 0xffffffffu;
    memcpy(e->name, p->name, strnlen(p->name, sizeof p->name));
}

static nvmlReturn_t smi_compute(nvmlDevice_t device, unsigned *count, void *entries)
{
    return list(device, count, entries, sizeof(smi_process_t), fill_smi, 0);
}

static nvmlReturn_t smi_none(nvmlDevice_t device, unsigned *count, void *entries)
{
    return list(device, count, entries, sizeof(smi_process_t), fill_smi, 1);
}

#define SMI_SLOT(offset) ((offset) / sizeof(void *))
static const void *const smi_table[SMI_SLOT(0x6c0)] = {
    [0] = (const void *)(uintptr_t)sizeof smi_table,
    [SMI_SLOT(0x6a8)] = (const void *)smi_compute,
    [SMI_SLOT(0x6b0)] = (const void *)smi_none,
    [SMI_SLOT(0x6b8)] = (const void *)smi_none,
};

CR_NVML_API nvmlReturn_t nvmlInternalGetExportTable(const void **table, const void *uuid);
CR_NVML_API nvmlReturn_t nvmlInternalGetExportTable(const void **table, const void *uuid)
{
    if (!table || !uuid)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memcmp(uuid, smi_table_uuid, sizeof smi_table_uuid) != 0) {
        static int said;
        return cr_nvml_unsupported("nvmlInternalGetExportTable (another table)", &said);
    }
    *table = smi_table;
    return NVML_SUCCESS;
}
