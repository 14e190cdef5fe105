/* The driver's private export tables (cuGetExportTable), served in the client.
 *
 * cudart asks for seven tables by UUID at start-up (../docs: the cudart contract); none of
 * them needs the server. Slot 0 of most tables holds the table's size in bytes. The
 * integrity check hashes the addresses of the runtime-interface table, of its own table
 * and of its check function, so those tables are static and their addresses stable. */
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "integrity.h"
#include "internal.h"
#include "log.h"

#define SLOT(fn) ((void *)(fn))
#define TABLE_SIZE(n) ((void *)(uintptr_t)((n) * sizeof(void *)))

/* --- f8cff951: error-message sink ---------------------------------------------------------- */

static void error_sink(const char *component, int code, const char *fmt, va_list ap)
{
    if (!cr_log_enabled(CR_LOG_DEBUG) || !fmt)
        return;
    char text[512];
    vsnprintf(text, sizeof text, fmt, ap);
    CR_DEBUG("%s reports %d: %s", component ? component : "runtime", code, text);
}

static void *error_sink_table[] = {TABLE_SIZE(2), SLOT(error_sink)};

/* --- 6bd5fb6c: runtime interface ----------------------------------------------------------- */

/* Slots 1, 6 and 8 load a fatbin as a module; cudart 13 never calls them. */
static CUresult rt_module_from_wrapper(CUmodule *module, const void *wrapper)
{
    return cr_hand_cuModuleLoadData(module, wrapper);
}

static CUresult rt_module_from_wrapper_ext(CUmodule *module, const void *wrapper, void *a3,
                                           void *a4, unsigned a5)
{
    if (a3 || a4 || a5)
        return CUDA_ERROR_NOT_SUPPORTED;
    return cr_hand_cuModuleLoadData(module, wrapper);
}

static CUresult rt_module_from_header_ext(const void *fatbin, CUmodule *module, void *a3, void *a4,
                                          unsigned a5)
{
    if (a3 || a4 || a5)
        return CUDA_ERROR_NOT_SUPPORTED;
    return cr_hand_cuModuleLoadData(module, fatbin);
}

/* Slot 2: the device's primary context, not retained; cudart then makes it current. */
static CUresult rt_primary_context(CUcontext *out, CUdevice dev)
{
    return cr_ctx_primary(out, dev);
}

static void rt_noop(uintptr_t arg)
{
}

static CUresult rt_load_compilers(void)
{
    return CUDA_SUCCESS;
}

static void *runtime_table[13] = {
    TABLE_SIZE(13),
    SLOT(rt_module_from_wrapper),
    SLOT(rt_primary_context),
    NULL,
    NULL,
    NULL,
    SLOT(rt_module_from_wrapper_ext),
    SLOT(rt_noop),
    SLOT(rt_module_from_header_ext),
    NULL,
    NULL,
    NULL,
    SLOT(rt_load_compilers),
};

/* --- a094798c: tools callback hooks -------------------------------------------------------- */

/* cudart wants zeroed buffers of more than 522 and more than 13 bytes from slots 2 and 6. */
static unsigned char hook_buffer1[1024];
static unsigned char hook_buffer2[64];

static void hooks_buffer1(void **buf, size_t *n)
{
    *buf = hook_buffer1;
    *n = sizeof hook_buffer1;
}

static void hooks_buffer2(void **buf, size_t *n)
{
    *buf = hook_buffer2;
    *n = 14;
}

/* The other slots notify an attached tool (a profiler) of runtime events, e.g. from
 * cudaGetFuncBySymbol; with no tool attached there is nothing to do. */
static uintptr_t hooks_no_tool(void)
{
    return 0;
}

static void *hooks_table[7] = {TABLE_SIZE(7),         SLOT(hooks_no_tool), SLOT(hooks_buffer1),
                               SLOT(hooks_no_tool), SLOT(hooks_no_tool), SLOT(hooks_no_tool),
                               SLOT(hooks_buffer2)};

/* --- 42d85a81: tools thread-local storage -------------------------------------------------- */

static CUresult tools_tls_slot(void *a, void *b, void *c)
{
    return CUDA_SUCCESS;
}

static void *tools_tls_table[4] = {TABLE_SIZE(4), SLOT(tools_tls_slot), SLOT(tools_tls_slot),
                                   SLOT(tools_tls_slot)};

/* --- c693336e: context-local storage (no size slot) ---------------------------------------- */

static void *cls_table[3] = {SLOT(cr_cls_put), SLOT(cr_cls_delete), SLOT(cr_cls_get)};

/* --- 263e8860: context checks -------------------------------------------------------------- */

static CUresult context_check(CUcontext ctx, uint32_t *out, void **unused)
{
    if (out)
        *out = 0;
    return CUDA_SUCCESS;
}

static uint32_t context_check_startup(void)
{
    return 0;
}

static void *context_checks_table[4] = {TABLE_SIZE(4), NULL, SLOT(context_check),
                                        SLOT(context_check_startup)};

/* --- d4082055: integrity check ------------------------------------------------------------- */

static CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2]);

static void *integrity_table[CR_INTEGRITY_TABLE_SLOTS] = {
    TABLE_SIZE(CR_INTEGRITY_TABLE_SLOTS), SLOT(integrity_check), NULL};

static CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2])
{
    cr_client_t *cl = cr_client();
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    cr_integrity_device_t devices[CR_MAX_DEVICES];
    uint32_t count = cl ? (uint32_t)cl->device_count : 0;
    for (uint32_t i = 0; i < count; i++) {
        /* exactly what cuDeviceGetUuid and cuDeviceGetAttribute report */
        memcpy(devices[i].uuid, cl->devices[i].uuid.bytes, 16);
        devices[i].pci_domain = cl->devices[i].attrs[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID];
        devices[i].pci_bus = cl->devices[i].attrs[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID];
        devices[i].pci_device = cl->devices[i].attrs[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID];
    }
    cr_integrity_input_t in = {
        .driver_version = CR_CUDA_VERSION,
        .pid = (uint32_t)getpid(),
        .thread_id = (uint32_t)pthread_self(),
        .runtime_table = runtime_table,
        .integrity_table = integrity_table,
        .check_function = integrity_table[1],
        .unix_seconds = unix_seconds,
        .devices = devices,
        .device_count = count,
    };
    return cr_integrity_compute(&in, version, out) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* --- lookup --------------------------------------------------------------------------------- */

static const struct {
    unsigned char uuid[16];
    void **table;
} tables[] = {
    {{0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d,
      0xd9},
     error_sink_table},
    {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d,
      0xf9},
     runtime_table},
    {{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a,
      0x66},
     hooks_table},
    {{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec,
      0xdc},
     tools_tls_table},
    {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95,
      0x93},
     cls_table},
    {{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa,
      0x7e},
     context_checks_table},
    {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1,
      0xf2},
     integrity_table},
};

CUresult cr_hand_cuGetExportTable(const void **table, const CUuuid *id)
{
    if (!table || !id)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (memcmp(tables[i].uuid, id->bytes, 16) == 0) {
            *table = tables[i].table;
            return CUDA_SUCCESS;
        }
    if (cr_log_enabled(CR_LOG_DEBUG)) {
        const unsigned char *b = (const unsigned char *)id->bytes;
        CR_DEBUG("no export table %02x%02x%02x%02x-%02x%02x%02x%02x-%02x%02x%02x%02x-%02x%02x%02x"
                 "%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                 b[13], b[14], b[15]);
    }
    *table = NULL;
    return CUDA_ERROR_NOT_FOUND;
}
