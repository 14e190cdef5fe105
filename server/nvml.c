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

#include "array.h"
#include "backend.h"
#include "cr_server_hand.h"
#include "error.h"
#include "handlers.h"
#include "mpfield.h"
#include "nvml_device.h"
#include "nvml_view.h"
#include "request.h"
#include "scheduler.h"
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

/* The sessions a viewer sees as processes: its tenant's (every one for an admin) that made
 * a driver call and whose client is still there. */
typedef struct {
    cr_session_info_t *list;
    size_t count, cap;
    const cr_tenant_t *only; /* NULL: every tenant's */
    int failed;
} process_list_t;

static void add_process(const cr_session_info_t *s, void *arg)
{
    process_list_t *l = arg;
    if (l->failed || (l->only && s->tenant != l->only) || !s->drove_device || s->ending)
        return;
    if (cr_array_room((void **)&l->list, &l->cap, l->count, sizeof *l->list)) {
        l->failed = 1;
        return;
    }
    l->list[l->count++] = *s;
}

/* The device time the viewer's tenant had lately, in percent (all tenants' for an admin). */
typedef struct {
    const cr_tenant_t *only;
    double share;
} share_sum_t;

static void add_share(const cr_tenant_t *t, void *arg)
{
    share_sum_t *sum = arg;
    if (sum->only && t != sum->only)
        return;
    double share = 0;
    unsigned inflight = 0;
    cr_sched_figures(t, &share, &inflight);
    sum->share += share;
}

/* 0, or CR_ENOMEM when the list cannot be made. */
static int collect_processes(cr_session_t *s, process_list_t *procs)
{
    const cr_tenant_t *viewer = cr_session_tenant(s);
    int all = viewer && __atomic_load_n(&viewer->admin, __ATOMIC_RELAXED);
    procs->only = all ? NULL : viewer;
    cr_sessions_foreach(add_process, procs);
    return procs->failed ? CR_ENOMEM : 0;
}

#define USAGE_FIELDS 5
static void pack_usage(msgpack_packer *pk, cr_session_t *s, const process_list_t *procs)
{
    size_t free_bytes = 0, total = 0;
    if (cr_session_memory_info(s, &free_bytes, &total) != CUDA_SUCCESS)
        free_bytes = total = 0;
    const cr_tenant_t *t = cr_session_tenant(s);
    uint64_t used = t ? __atomic_load_n(&t->used, __ATOMIC_RELAXED) : 0;
    cr_mp_pack_kv_u64(pk, CR_NVML_MEMORY_TOTAL, total);
    cr_mp_pack_kv_u64(pk, CR_NVML_MEMORY_USED, used);
    cr_mp_pack_kv_u64(pk, CR_NVML_MEMORY_FREE, free_bytes);

    share_sum_t sum = {procs->only, 0};
    cr_tenants_foreach(add_share, &sum);
    double percent = round(sum.share * 100);
    cr_mp_pack_kv_u64(pk, CR_NVML_UTILIZATION,
                      percent < 0     ? 0
                      : percent > 100 ? 100
                                      : (uint64_t)percent);

    cr_mp_pack_str(pk, CR_NVML_PROCESSES);
    msgpack_pack_array(pk, (uint32_t)procs->count);
    for (size_t i = 0; i < procs->count; i++) {
        const cr_session_info_t *p = &procs->list[i];
        msgpack_pack_array(pk, 3);
        msgpack_pack_uint32(pk, p->pid);
        msgpack_pack_uint64(pk, p->memory);
        cr_mp_pack_str(pk, p->program);
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
    process_list_t procs = {0};
    if ((parts & CR_NVML_USAGE) && collect_processes(s, &procs) != 0) {
        free(procs.list);
        cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    const cr_backend_t *b = cr_session_backend(s);
    cr_reply_t r;
    if (cr_reply_begin(req, &r, CUDA_SUCCESS, 1) != 0) {
        free(procs.list);
        cr_request_free(req);
        return;
    }
    msgpack_pack_map(&r.pk, ((parts & CR_NVML_IDENTITY) ? IDENTITY_FIELDS : 0) +
                                ((parts & CR_NVML_USAGE) ? USAGE_FIELDS : 0) +
                                ((parts & CR_NVML_SENSORS) ? 1 : 0));
    if (parts & CR_NVML_IDENTITY)
        pack_identity(&r.pk, b);
    if (parts & CR_NVML_USAGE)
        pack_usage(&r.pk, s, &procs);
    if (parts & CR_NVML_SENSORS)
        pack_sensors(&r.pk, b);
    free(procs.list);
    cr_reply_send(req, &r, 0);
    cr_request_free(req);
}
