/* Backends: the real NVIDIA driver, loaded by path with dlopen (never our own stub), or the
 * emulated device. Both fill the same generated table of driver functions; the server
 * runs every session in the device's primary context. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cr_api_desc.h"
#include "emu/emu_api.h"
#include "error.h"
#include "log.h"

static const char *const driver_paths[] = {
    "libcuda.so.1", /* the loader's search path first */
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/local/nvidia/lib64/libcuda.so.1",
    "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
};

static void *resolve_dlsym(void *handle, const char *name)
{
    return dlsym(handle, name);
}

/* Opens the real driver library. Returns its handle, or NULL with a reason. */
static void *open_driver(const char *path, char *resolved, size_t resolved_len, char *err,
                         size_t err_len)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, err_len, "%s", dlerror());
        return NULL;
    }
    struct link_map *map = NULL;
    snprintf(resolved, resolved_len, "%s", path);
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0])
        snprintf(resolved, resolved_len, "%s", map->l_name);
    if (dlsym(h, "cr_remote_stub_version")) {
        snprintf(err, err_len, "%.400s is cuda-remote's own client stub, not NVIDIA's driver",
                 resolved);
        dlclose(h);
        return NULL;
    }
    return h;
}

static int describe_device(cr_backend_t *b, char *err, size_t err_len)
{
    const cr_driver_t *d = &b->d;
    CUresult r;
    int count = 0;
    if ((r = d->cuInit(0)) != CUDA_SUCCESS || (r = d->cuDeviceGetCount(&count)) != CUDA_SUCCESS) {
        snprintf(err, err_len, "cuInit: %s", cr_cuda_error_name(r));
        return CR_ENOTFOUND;
    }
    if (count == 0 || b->device >= count) {
        snprintf(err, err_len, "no device %d (%d present)", b->device, count);
        return CR_ENOTFOUND;
    }
    d->cuDriverGetVersion(&b->driver_version);
    if ((r = d->cuDevicePrimaryCtxRetain(&b->ctx, b->device)) != CUDA_SUCCESS ||
        (r = d->cuCtxSetCurrent(b->ctx)) != CUDA_SUCCESS) {
        snprintf(err, err_len, "cannot use device %d's primary context: %s", b->device,
                 cr_cuda_error_name(r));
        return CR_EIO;
    }
    d->cuDeviceGetName(b->desc.name, sizeof b->desc.name, b->device);
    d->cuDeviceTotalMem_v2(&b->desc.total_mem, b->device);
    d->cuDeviceGetUuid_v2(&b->desc.uuid, b->device);
    for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++)
        if (d->cuDeviceGetAttribute(&b->desc.attrs[a], a, b->device) != CUDA_SUCCESS)
            b->desc.attrs[a] = 0;
    return 0;
}

static int open_cuda(const cr_backend_options_t *opt, cr_backend_t *b, char *err, size_t err_len)
{
    char why[512], first_why[512] = "";
    size_t n = opt->driver_path ? 1 : sizeof driver_paths / sizeof driver_paths[0];
    for (size_t i = 0; i < n && !b->dl; i++) {
        const char *path = opt->driver_path ? opt->driver_path : driver_paths[i];
        b->dl = open_driver(path, b->path, sizeof b->path, why, sizeof why);
        if (!b->dl) {
            CR_DEBUG("not using %s: %s", path, why);
            /* a library that exists but is unusable says more than the missing ones */
            if (!first_why[0] && !strstr(why, "cannot open shared object file"))
                snprintf(first_why, sizeof first_why, "%s", why);
        }
    }
    if (!b->dl) {
        if (first_why[0])
            snprintf(err, err_len, "%s", first_why);
        else if (opt->driver_path)
            snprintf(err, err_len, "%s", why);
        else
            snprintf(err, err_len, "NVIDIA's libcuda.so.1 is not installed");
        return CR_ENOTFOUND;
    }
    unsigned found = cr_driver_resolve(&b->d, resolve_dlsym, b->dl);
    if (!b->d.cuInit || !b->d.cuDeviceGetCount || !b->d.cuStreamCreate) {
        snprintf(err, err_len, "%s lacks the driver API (%u functions found)", b->path, found);
        dlclose(b->dl);
        b->dl = NULL;
        return CR_ENOTFOUND;
    }
    b->kind = "cuda";
    int rc = describe_device(b, err, err_len);
    if (rc) {
        dlclose(b->dl);
        b->dl = NULL;
        memset(&b->d, 0, sizeof b->d);
    }
    return rc;
}

static int open_emu(const cr_backend_options_t *opt, cr_backend_t *b, char *err, size_t err_len)
{
    /* host functions as a GPU runs them: one at a time, for the whole context */
    cr_emu_config_t cfg = {opt->emu_memory,         0, opt->emu_trace,
                           opt->emu_context_faults, 1, opt->emu_compute_capability};
    int rc = cr_emu_configure(&cfg);
    if (rc) {
        snprintf(err, err_len, "cannot configure the emulated device: %s", cr_strerror(rc));
        return rc;
    }
    memset(&b->d, 0, sizeof b->d);
    cr_driver_fill_emu(&b->d);
    b->kind = "emu";
    snprintf(b->path, sizeof b->path, "(emulated)");
    cr_emu_device_window(&b->window_base, &b->window_size);
    return describe_device(b, err, err_len);
}

int cr_backend_open(const cr_backend_options_t *opt, cr_backend_t *b, char *err, size_t err_len)
{
    memset(b, 0, sizeof *b);
    b->device = opt->device;
    if (strcmp(opt->kind, "emu") == 0)
        return open_emu(opt, b, err, err_len);
    if (strcmp(opt->kind, "cuda") == 0)
        return open_cuda(opt, b, err, err_len);
    if (strcmp(opt->kind, "auto") != 0) {
        snprintf(err, err_len, "unknown backend %s (auto, cuda or emu)", opt->kind);
        return CR_EINVAL;
    }
    char why[512];
    if (open_cuda(opt, b, why, sizeof why) == 0)
        return 0;
    CR_INFO("notice: no usable GPU (%s); using the emulated device (backend emu), which runs "
            "kernels on a PTX interpreter: for tests and development, not for speed",
            why);
    memset(b, 0, sizeof *b);
    b->device = opt->device;
    return open_emu(opt, b, err, err_len);
}

void cr_backend_describe_export_tables(cr_backend_t *b)
{
    int emu = strcmp(b->kind, "emu") == 0;
    for (int i = 0; i < CR_EXPORT_TABLE_COUNT; i++) {
        const cr_export_table_desc_t *known = cr_export_table_desc(i);
        b->export_table_size[i] = -1;
        if (emu) {
            if (known->emu_slots)
                b->export_table_size[i] = known->emu_slots * (int32_t)sizeof(void *);
            continue;
        }
        const void *table = NULL;
        CUuuid id;
        memcpy(id.bytes, known->uuid, 16);
        if (!b->d.cuGetExportTable || b->d.cuGetExportTable(&table, &id) != CUDA_SUCCESS || !table)
            continue;
        /* slot 0 is the size in bytes where the table has one; anything implausible is
         * taken for a table that says no size */
        uintptr_t size = known->has_size ? *(const uintptr_t *)table : 0;
        if (size % sizeof(void *) != 0 || size > CR_EXPORT_TABLE_MAX_SLOTS * sizeof(void *))
            size = 0;
        b->export_table_size[i] = (int32_t)size;
        CR_DEBUG("the driver has export table %s: %zu bytes", known->name, (size_t)size);
    }
}

int cr_backend_capture_output(const cr_backend_t *b, void *stream,
                              void (*fn)(void *user, const char *text, size_t len),
                              void (*release)(void *user), void *user)
{
    if (strcmp(b->kind, "emu") != 0)
        return CR_EUNSUPPORTED;
    return cr_emu_stream_set_output(stream, fn, release, user);
}

static __thread int thread_bound;

void cr_backend_bind_thread(const cr_backend_t *b)
{
    if (b->ctx && b->d.cuCtxSetCurrent)
        b->d.cuCtxSetCurrent(b->ctx);
    thread_bound = 1;
}

int cr_backend_thread_bound(void)
{
    return thread_bound;
}
