/* The tenant's view of its device for cuda-remote's libnvidia-ml.so.1 (common/nvml_view.h):
 * the one entry point the stub exports beside the driver API. The NVML library links to
 * the stub, so a process that uses both NVML and CUDA (PyTorch) has one connection, made
 * by cuInit's code with cuInit's settings (address, token, TLS). In a child forked after its
 * parent connected, where CUDA is unusable, NVML connects on its own (it holds none of the
 * server's handles), as NVIDIA's library works in such a child.
 *
 * Threads: any; each call waits for its reply. */
#include <pthread.h>
#include <string.h>

#include "client.h"
#include "connect.h"
#include "hello.h"
#include "lifecycle.h"
#include "log.h"
#include "mpfield.h"
#include "nvml_view.h"
#include "request.h"

static uint64_t u64_field(const msgpack_object *map, const char *key)
{
    const msgpack_object *o = cr_mp_field(map, key);
    return o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : 0;
}

static uint32_t u32_field(const msgpack_object *map, const char *key)
{
    uint64_t v = u64_field(map, key);
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static void read_identity(const msgpack_object *m, cr_nvml_identity_t *v)
{
    cr_mp_copy_str(v->name, sizeof v->name, cr_mp_field(m, CR_NVML_NAME));
    cr_mp_copy_str(v->serial, sizeof v->serial, cr_mp_field(m, CR_NVML_SERIAL));
    cr_mp_copy_str(v->backend, sizeof v->backend, cr_mp_field(m, CR_NVML_BACKEND));
    cr_mp_copy_str(v->driver_version, sizeof v->driver_version,
                   cr_mp_field(m, CR_NVML_DRIVER_VERSION));
    cr_mp_copy_str(v->pci_bus_id, sizeof v->pci_bus_id, cr_mp_field(m, CR_NVML_PCI_BUS_ID));
    const msgpack_object *uuid = cr_mp_field(m, CR_NVML_UUID);
    memset(v->uuid, 0, sizeof v->uuid);
    if (uuid && uuid->type == MSGPACK_OBJECT_BIN && uuid->via.bin.size == sizeof v->uuid)
        memcpy(v->uuid, uuid->via.bin.ptr, sizeof v->uuid);
    v->pci_domain = u32_field(m, CR_NVML_PCI_DOMAIN);
    v->pci_bus = u32_field(m, CR_NVML_PCI_BUS);
    v->pci_device = u32_field(m, CR_NVML_PCI_DEVICE);
    v->pci_device_id = u32_field(m, CR_NVML_PCI_DEVICE_ID);
    v->pci_subsystem_id = u32_field(m, CR_NVML_PCI_SUBSYSTEM_ID);
    v->cc_major = (int)u32_field(m, CR_NVML_CC_MAJOR);
    v->cc_minor = (int)u32_field(m, CR_NVML_CC_MINOR);
    v->cuda_version = (int)u32_field(m, CR_NVML_CUDA_VERSION);
}

static void read_usage(const msgpack_object *m, cr_nvml_usage_t *v)
{
    v->memory_total = u64_field(m, CR_NVML_MEMORY_TOTAL);
    v->memory_used = u64_field(m, CR_NVML_MEMORY_USED);
    v->memory_free = u64_field(m, CR_NVML_MEMORY_FREE);
    uint32_t util = u32_field(m, CR_NVML_UTILIZATION);
    v->utilization = util > 100 ? 100 : util;
    v->process_count = 0;
    const msgpack_object *list = cr_mp_field(m, CR_NVML_PROCESSES);
    if (!list || list->type != MSGPACK_OBJECT_ARRAY)
        return;
    for (uint32_t i = 0; i < list->via.array.size && v->process_count < CR_NVML_MAX_PROCESSES;
         i++) {
        const msgpack_object *e = &list->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 3 ||
            e->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
            e->via.array.ptr[0].via.u64 > UINT32_MAX ||
            e->via.array.ptr[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            continue;
        cr_nvml_process_t *p = &v->processes[v->process_count++];
        p->pid = (uint32_t)e->via.array.ptr[0].via.u64;
        p->used_memory = e->via.array.ptr[1].via.u64;
        cr_mp_copy_str(p->name, sizeof p->name, &e->via.array.ptr[2]);
    }
}

static void read_sensors(const msgpack_object *m, cr_nvml_sensors_t *v)
{
    const msgpack_object *sensors = cr_mp_field(m, CR_NVML_SENSORS_KEY);
    v->read = 0;
    if (!sensors || sensors->type != MSGPACK_OBJECT_MAP)
        return;
    for (int s = 0; s < CR_NVML_SENSOR_COUNT; s++) {
        const msgpack_object *o = cr_mp_field(sensors, cr_nvml_sensor_key((cr_nvml_sensor_t)s));
        if (o && (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
                  o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)) {
            v->value[s] = o->via.i64;
            v->read |= 1u << s;
        }
    }
}

static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_client_t own; /* NVML's own connection, in a child forked after init */
static int own_tried;
static CUresult own_result;

/* A child forked from a process that had NVML's own connection makes one of its own too
 * (the parent's is left alone: its threads are not in the child). */
static void forget_own_in_child(void)
{
    own_tried = 0;
    memset(&own, 0, sizeof own);
}

__attribute__((constructor)) static void watch_forks(void)
{
    pthread_atfork(NULL, NULL, forget_own_in_child);
}

/* The connection to ask through, or NULL with the reason in *r. */
static cr_conn_t *view_connection(CUresult *r)
{
    if (!cr_lifecycle_forked_after_init()) {
        *r = cr_hand_cuInit(0);
        return *r == CUDA_SUCCESS ? cr_client()->conn : NULL;
    }
    pthread_mutex_lock(&own_lock);
    if (!own_tried) {
        own_tried = 1;
        own_result = cr_connect(&own, cr_hello_address());
    }
    *r = own_result;
    pthread_mutex_unlock(&own_lock);
    return *r == CUDA_SUCCESS ? own.conn : NULL;
}

__attribute__((visibility("default"))) int cr_remote_nvml_view(unsigned parts, cr_nvml_view_t *view,
                                                               size_t view_size)
{
    if (!view || view_size != sizeof *view) /* a library built against another record */
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r;
    cr_conn_t *conn = view_connection(&r);
    if (!conn)
        return r;
    cr_msg_t m;
    cr_pending_t p = {0};
    msgpack_unpacked u;
    int err = cr_msg_begin(conn, &m, CR_OP_NVML);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_unsigned_int(&m.pk, parts);
    r = cr_call(&m, &p, &u);
    const msgpack_object *map =
        r == CUDA_SUCCESS && u.data.type == MSGPACK_OBJECT_ARRAY && u.data.via.array.size >= 2
            ? &u.data.via.array.ptr[1]
            : NULL;
    if (r == CUDA_SUCCESS && (!map || map->type != MSGPACK_OBJECT_MAP))
        r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS) {
        if (parts & CR_NVML_IDENTITY)
            read_identity(map, &view->id);
        if (parts & CR_NVML_USAGE)
            read_usage(map, &view->usage);
        if (parts & CR_NVML_SENSORS)
            read_sensors(map, &view->sensors);
    }
    cr_reply_done(&p, &u);
    return r;
}
