/* @nvml (wire format in common/protocol.h): the device as NVML shows it to the caller's
 * tenant, for cuda-remote's libnvidia-ml.so.1. Its identity (the driver's description, and
 * what NVIDIA's NVML adds on the `cuda` backend), the tenant's memory exactly as
 * cuMemGetInfo gives it, the tenant's share of the device time, its sessions that use the
 * device as processes (every tenant's for an admin), and the real device's sensors, passed
 * through (none on the emulated device). Runs on the session's executor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cr_server_hand.h"
#include "error.h"
#include "handlers.h"
#include "mpfield.h"
#include "nvml_device.h"
#include "nvml_view.h"
#include "request.h"
#include "status.h"
#include "session.h"
#include "tenants.h"

#define IDENTITY_FIELDS 14
static void pack_identity(msgpack_packer *pk, const cr_backend_t *b)
{
    cr_nvml_device_identity_t id = {.serial = "", .driver_version = ""};
    int real = cr_nvml_device_identity(b, &id) == 0;
    if (!real) { /* the emulated device, or a GPU whose NVML cannot be read */
        snprintf(id.serial, sizeof id.serial, "%s", strcmp(b->kind, "emu") ? "" : "emulated");
        snprintf(id.driver_version, sizeof id.driver_version, "%s",
                 strcmp(b->kind, "emu") ? "unknown" : "emulated");
    }
    const int *a = b->desc.attrs;
    char bus_id[32];
    snprintf(bus_id, sizeof bus_id, "%08x:%02x:%02x.0",
             (unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID],
             (unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID],
             (unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID]);
    cr_mp_pack_kv_str(pk, CR_NVML_NAME, b->desc.name);
    cr_mp_pack_str(pk, CR_NVML_UUID);
    msgpack_pack_bin(pk, 16);
    msgpack_pack_bin_body(pk, b->desc.uuid.bytes, 16);
    cr_mp_pack_kv_str(pk, CR_NVML_SERIAL, id.serial);
    cr_mp_pack_kv_str(pk, CR_NVML_BACKEND, b->kind);
    cr_mp_pack_kv_str(pk, CR_NVML_DRIVER_VERSION, id.driver_version);
    cr_mp_pack_kv_u64(pk, CR_NVML_CUDA_VERSION, (uint64_t)b->driver_version);
    cr_mp_pack_kv_str(pk, CR_NVML_PCI_BUS_ID, bus_id);
    cr_mp_pack_kv_u64(pk, CR_NVML_PCI_DOMAIN, (uint32_t)a[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID]);
    cr_mp_pack_kv_u64(pk, CR_NVML_PCI_BUS, (uint32_t)a[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID]);
    cr_mp_pack_kv_u64(pk, CR_NVML_PCI_DEVICE, (uint32_t)a[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID]);
    cr_mp_pack_kv_u64(pk, CR_NVML_PCI_DEVICE_ID, id.pci_device_id);
    cr_mp_pack_kv_u64(pk, CR_NVML_PCI_SUBSYSTEM_ID, id.pci_subsystem_id);
    cr_mp_pack_kv_u64(pk, CR_NVML_CC_MAJOR,
                      (uint32_t)a[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR]);
    cr_mp_pack_kv_u64(pk, CR_NVML_CC_MINOR,
                      (uint32_t)a[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR]);
}

/* The sessions the caller sees as processes (cr_status_scope's): those that made a driver
 * call and whose client is still there. 0 or CR_ENOMEM. */
static int collect_processes(cr_session_t *s, cr_session_info_t **list, size_t *count)
{
    if (cr_status_sessions(cr_status_scope(s), list, count))
        return CR_ENOMEM;
    size_t kept = 0;
    for (size_t i = 0; i < *count; i++)
        if ((*list)[i].drove_device && !(*list)[i].ending)
            (*list)[kept++] = (*list)[i];
    *count = kept;
    return 0;
}

/* The part of the recent wall time the device spent on the work of the caller's scope, in
 * percent (0 on an idle device, as NVML says); -1 when out of memory. */
static int utilization(cr_session_t *s)
{
    const cr_tenant_t *scope = cr_status_scope(s);
    size_t count = 0;
    cr_tenant_info_t *tenants = cr_status_tenants(&count);
    if (!tenants)
        return -1;
    double busy = 0;
    for (size_t i = 0; i < count; i++)
        if (!scope || tenants[i].tenant == scope)
            busy += tenants[i].busy;
    free(tenants);
    double percent = round(busy * 100);
    return percent < 0 ? 0 : percent > 100 ? 100 : (int)percent;
}

#define USAGE_FIELDS 5
static void pack_usage(msgpack_packer *pk, cr_session_t *s, const cr_session_info_t *procs,
                       size_t proc_count, int percent)
{
    size_t free_bytes = 0, total = 0;
    if (cr_session_memory_info(s, &free_bytes, &total) != CUDA_SUCCESS)
        free_bytes = total = 0;
    const cr_tenant_t *t = cr_session_tenant(s);
    uint64_t used = t ? __atomic_load_n(&t->used, __ATOMIC_RELAXED) : 0;
    cr_mp_pack_kv_u64(pk, CR_NVML_MEMORY_TOTAL, total);
    cr_mp_pack_kv_u64(pk, CR_NVML_MEMORY_USED, used);
    cr_mp_pack_kv_u64(pk, CR_NVML_MEMORY_FREE, free_bytes);
    cr_mp_pack_kv_u64(pk, CR_NVML_UTILIZATION, (uint64_t)percent);
    cr_mp_pack_str(pk, CR_NVML_PROCESSES);
    msgpack_pack_array(pk, (uint32_t)proc_count);
    for (size_t i = 0; i < proc_count; i++) {
        msgpack_pack_array(pk, 3);
        msgpack_pack_uint32(pk, procs[i].pid);
        msgpack_pack_uint64(pk, procs[i].memory);
        cr_mp_pack_str(pk, procs[i].program);
    }
}

static void pack_sensors(msgpack_packer *pk, const cr_backend_t *b)
{
    int64_t value[CR_NVML_SENSOR_COUNT];
    uint32_t mask = cr_nvml_device_sensors(b, value);
    cr_mp_pack_str(pk, CR_NVML_SENSORS_KEY);
    msgpack_pack_map(pk, (uint32_t)__builtin_popcount(mask));
    for (int i = 0; i < CR_NVML_SENSOR_COUNT; i++) {
        if (!(mask & (1u << i)))
            continue;
        cr_mp_pack_str(pk, cr_nvml_sensor_key((cr_nvml_sensor_t)i));
        msgpack_pack_int64(pk, value[i]);
    }
}

void cr_srv_nvml(cr_request_t *req)
{
    cr_session_t *s = req->session;
    uint64_t parts;
    if (cr_arg_u64(req, 0, &parts) != 0 ||
        (parts & ~(uint64_t)(CR_NVML_IDENTITY | CR_NVML_USAGE | CR_NVML_SENSORS))) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    cr_session_info_t *procs = NULL;
    size_t proc_count = 0;
    int percent = 0;
    if ((parts & CR_NVML_USAGE) &&
        (collect_processes(s, &procs, &proc_count) || (percent = utilization(s)) < 0)) {
        free(procs);
        cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    const cr_backend_t *b = cr_session_backend(s);
    cr_reply_t r;
    if (cr_reply_begin(req, &r, CUDA_SUCCESS, 1) != 0) {
        free(procs);
        cr_request_free(req);
        return;
    }
    msgpack_pack_map(&r.pk, ((parts & CR_NVML_IDENTITY) ? IDENTITY_FIELDS : 0) +
                                ((parts & CR_NVML_USAGE) ? USAGE_FIELDS : 0) +
                                ((parts & CR_NVML_SENSORS) ? 1 : 0));
    if (parts & CR_NVML_IDENTITY)
        pack_identity(&r.pk, b);
    if (parts & CR_NVML_USAGE)
        pack_usage(&r.pk, s, procs, proc_count, percent);
    if (parts & CR_NVML_SENSORS)
        pack_sensors(&r.pk, b);
    free(procs);
    cr_reply_send(req, &r, 0);
    cr_request_free(req);
}
