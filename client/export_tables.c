/* The driver's private export tables (cuGetExportTable), served in the client.
 *
 * The tables are those of common/export_tables.h. cudart's seven (asked for at start-up,
 * before cuInit for the first) are always served: every driver has them, and none needs
 * the server. Every other table is served when the server's driver has it (the hello says
 * which, and their sizes), at the driver's size, because libraries such as cuBLASLt call
 * slots without checking the size; else CUDA_ERROR_NOT_FOUND, as that driver answers.
 * Every slot is a function: the known ones do what the driver does; every other one says
 * once which table and slot it is (CUDA_REMOTE_LOG=info) and returns
 * CUDA_ERROR_NOT_SUPPORTED. Slot 0 of most tables holds the table's size in bytes. The
 * integrity check hashes the addresses of the runtime-interface table, of its own table
 * and of its check function, so those tables are static and their addresses stable.
 *
 * Threads: any, from cudart and the libraries, also before cuInit. Nothing here waits but
 * for the tables' locks, except slots that are driver calls and wait as those do. */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "context.h"
#include "export_tables.h"
#include "handles.h"
#include "idmap.h"
#include "integrity.h"
#include "log.h"
#include "module.h"

#define SLOT(fn) ((void *)(fn))
#define TABLE_SIZE(n) ((void *)(uintptr_t)((n) * sizeof(void *)))

/* --- slots nobody implemented ---------------------------------------------------------------- */

static unsigned char unknown_said[CR_EXPORT_TABLE_COUNT][CR_EXPORT_TABLE_MAX_SLOTS]; /* atomic */

static CUresult unknown_slot(int table, int slot)
{
    if (!__atomic_exchange_n(&unknown_said[table][slot], 1, __ATOMIC_RELAXED)) {
        const cr_export_table_desc_t *t = cr_export_table_desc(table);
        const unsigned char *b = t->uuid;
        CR_INFO("export table %s (%02x%02x%02x%02x-%02x%02x%02x%02x-...) slot %d is not "
                "implemented: CUDA_ERROR_NOT_SUPPORTED",
                t->name, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], slot);
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* One function per table and slot, so that each knows which it is. */
#define UNKNOWN_FN(t, n)                                                                           \
    static CUresult unknown_##t##_##n(void)                                                        \
    {                                                                                              \
        return unknown_slot(t, n);                                                                 \
    }
#define UNKNOWN_PTR(t, n) SLOT(unknown_##t##_##n),
/* one line per 16 slots, which clang-format cannot settle on */
/* clang-format off */
#define EACH16(M, t, h)                                                                            \
    M(t, h##0) M(t, h##1) M(t, h##2) M(t, h##3) M(t, h##4) M(t, h##5) M(t, h##6) M(t, h##7)        \
    M(t, h##8) M(t, h##9) M(t, h##a) M(t, h##b) M(t, h##c) M(t, h##d) M(t, h##e) M(t, h##f)
#define EACH256(M, t)                                                                              \
    EACH16(M, t, 0x0) EACH16(M, t, 0x1) EACH16(M, t, 0x2) EACH16(M, t, 0x3)                        \
    EACH16(M, t, 0x4) EACH16(M, t, 0x5) EACH16(M, t, 0x6) EACH16(M, t, 0x7)                        \
    EACH16(M, t, 0x8) EACH16(M, t, 0x9) EACH16(M, t, 0xa) EACH16(M, t, 0xb)                        \
    EACH16(M, t, 0xc) EACH16(M, t, 0xd) EACH16(M, t, 0xe) EACH16(M, t, 0xf)
/* clang-format on */
#define UNKNOWN_TABLES(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)
#define UNKNOWN_TABLE_FNS(t) EACH256(UNKNOWN_FN, t)
#define UNKNOWN_TABLE_PTRS(t) {EACH256(UNKNOWN_PTR, t)},
_Static_assert(CR_EXPORT_TABLE_COUNT <= 12, "UNKNOWN_TABLES lists fewer tables than are known");
_Static_assert(CR_EXPORT_TABLE_MAX_SLOTS == 256, "EACH256 makes 256 slots");
UNKNOWN_TABLES(UNKNOWN_TABLE_FNS)
static void *const unknown_slots[12][CR_EXPORT_TABLE_MAX_SLOTS] = {
    UNKNOWN_TABLES(UNKNOWN_TABLE_PTRS)};

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

/* Slots 1 and 5 notify an attached tool (a profiler) of runtime events, e.g. from
 * cudaGetFuncBySymbol; with no tool attached there is nothing to do. */
static uintptr_t hooks_no_tool(void)
{
    return 0;
}

/* Slots 3 and 4: a stream's and a context's id, for the tool's records. */
static CUresult hooks_stream_id(CUcontext ctx, CUstream stream, unsigned long long *id)
{
    (void)ctx;
    return cr_hand_cuStreamGetId(stream, id);
}

static CUresult hooks_context_id(CUcontext ctx, unsigned long long *id)
{
    return cr_hand_cuCtxGetId(ctx, id);
}

static void *hooks_table[7] = {TABLE_SIZE(7),         SLOT(hooks_no_tool),    SLOT(hooks_buffer1),
                               SLOT(hooks_stream_id), SLOT(hooks_context_id), SLOT(hooks_no_tool),
                               SLOT(hooks_buffer2)};

/* --- 42d85a81: tools thread-local storage -------------------------------------------------- */

/* Slot 1 is cuCtxSetCurrent, slot 2 cuCtxGetCurrent: cuBLAS and cuBLASLt ask slot 2 before
 * each kernel lookup, and find no kernel when it does not answer. Slot 3 is unknown. */
static CUresult tools_tls_set(CUcontext ctx)
{
    return cr_hand_cuCtxSetCurrent(ctx);
}

static CUresult tools_tls_get(CUcontext *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = cr_ctx_current();
    return CUDA_SUCCESS;
}

static void *tools_tls_table[4] = {TABLE_SIZE(4), SLOT(tools_tls_set), SLOT(tools_tls_get), NULL};

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

static void *integrity_table[CR_INTEGRITY_TABLE_SLOTS] = {TABLE_SIZE(CR_INTEGRITY_TABLE_SLOTS),
                                                          SLOT(integrity_check), NULL};

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

/* --- 21318c60: tools context (cuBLAS, cuBLASLt, cuFFT, CUPTI) ------------------------------- */

/* The table grows by appending; what cuBLAS 13 calls: slot 51 for a stream's tools handle
 * and 39 for its id, cuBLASLt and cuFFT slot 4 (after the tools TLS's slot 2). */

/* Slot 3: the context's device. */
static CUresult tools_context_device(CUcontext ctx, CUdevice *device)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx)
        return cr_hand_cuCtxGetDevice(device);
    return cr_hand_cuCtxGetDevice_v2(device, ctx);
}

/* Slot 4: the context's id (cuCtxGetId); cuBLASLt's GEMM heuristics key on it. */
static CUresult tools_context_id(CUcontext ctx, unsigned long long *id)
{
    return cr_hand_cuCtxGetId(ctx, id);
}

/* Tools handles of streams (slot 51), which slot 39 takes back: one per stream, kept for
 * the life of the process (a stream id is never reused). */
typedef struct {
    unsigned long long stream_id;
    unsigned char zero[56]; /* what tools may read of it: nothing set */
} tools_stream_t;

static pthread_mutex_t tools_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_idmap_t tools_stream_by_id; /* stream id -> tools_stream_t * */
static cr_idmap_t tools_stream_known; /* tools_stream_t * -> stream id */

/* Slot 51: the stream's tools handle; `per_thread` makes NULL the per-thread default
 * stream (cuBLAS passes stream == CU_STREAM_PER_THREAD for it). */
static CUresult tools_stream_handle(CUcontext ctx, CUstream stream, void **handle,
                                    unsigned char per_thread)
{
    (void)ctx;
    unsigned long long id;
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (!stream && per_thread)
        stream = CU_STREAM_PER_THREAD;
    CUresult r = cr_hand_cuStreamGetId(stream, &id);
    if (r != CUDA_SUCCESS)
        return r;
    uint64_t found = 0;
    pthread_mutex_lock(&tools_streams_lock);
    if (!cr_idmap_get(&tools_stream_by_id, id, &found)) {
        tools_stream_t *t = calloc(1, sizeof *t);
        if (t) {
            t->stream_id = id;
            found = (uint64_t)(uintptr_t)t;
            if (cr_idmap_put(&tools_stream_by_id, id, found) != 0 ||
                cr_idmap_put(&tools_stream_known, found, id) != 0) {
                cr_idmap_remove(&tools_stream_by_id, id, NULL);
                free(t);
                found = 0;
            }
        }
    }
    pthread_mutex_unlock(&tools_streams_lock);
    *handle = (void *)(uintptr_t)found;
    return found ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Slot 39: the id of the stream behind a tools handle of slot 51 (a plain stream is taken
 * as one too). */
static CUresult tools_stream_id(CUcontext ctx, void *tools_stream, unsigned long long *id)
{
    (void)ctx;
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t stream_id;
    pthread_mutex_lock(&tools_streams_lock);
    int known = cr_idmap_get(&tools_stream_known, (uint64_t)(uintptr_t)tools_stream, &stream_id);
    pthread_mutex_unlock(&tools_streams_lock);
    if (known) {
        *id = stream_id;
        return CUDA_SUCCESS;
    }
    return cr_hand_cuStreamGetId((CUstream)tools_stream, id);
}

/* --- 6e163fbe: tools module --------------------------------------------------------------- */

/* Slot 7 walks a module's functions: cb(user, function object, owner) for each, returning
 * how many there were (cuFFT plans call it for each module they load and then use what
 * they were given as CUfunctions). cuFFT reads the object's memory, so it is a block of
 * the layout the driver's function objects were found to have where cuFFT looks (public
 * findings of another remoting project; what the other fields mean is not known), one per
 * function for the life of the process, and an alias of the function's id in every later
 * call (handles.c). `owner` is taken to be the function's name, as an older published
 * layout of the object has it at +0x8. */
#define FUNCTION_OBJECT_SIZE 0x500

typedef void (*module_function_cb)(void *user, void *function, uint64_t owner);

static pthread_mutex_t function_objects_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_idmap_t function_objects; /* function id -> its object */

static void *function_object(uint64_t id, const char *name)
{
    uint64_t found = 0;
    pthread_mutex_lock(&function_objects_lock);
    if (!cr_idmap_get(&function_objects, id, &found)) {
        uint8_t *o = calloc(1, FUNCTION_OBJECT_SIZE);
        if (o) {
            uint64_t one_one = 0x0000000100000001ull, owner = (uint64_t)(uintptr_t)name;
            uint64_t twelve = 0xc, one = 1, x80 = 0x80;
            uint32_t two = 2;
            memcpy(o + 0x00, &one_one, 8);
            memcpy(o + 0x08, &owner, 8);
            memcpy(o + 0x10, &twelve, 8);
            memcpy(o + 0x18, &one, 8);
            memcpy(o + 0x28, &x80, 8);
            memcpy(o + 0x370, &two, 4);
            found = (uint64_t)(uintptr_t)o;
            if (cr_idmap_put(&function_objects, id, found) != 0 ||
                cr_handles_alias(found, id) != 0) {
                cr_idmap_remove(&function_objects, id, NULL);
                free(o);
                found = 0;
            }
        }
    }
    pthread_mutex_unlock(&function_objects_lock);
    return (void *)(uintptr_t)found;
}

static uint64_t tools_module_functions(CUcontext ctx, CUmodule module, module_function_cb cb,
                                       void *user)
{
    (void)ctx;
    const char *names[256];
    size_t n = cr_code_kernel_names((uint64_t)(uintptr_t)module, names, 256);
    if (!cb || n > 256)
        return 0;
    uint64_t done = 0;
    for (size_t i = 0; i < n; i++) {
        CUfunction f;
        if (cr_hand_cuModuleGetFunction(&f, module, names[i]) != CUDA_SUCCESS)
            continue;
        void *o = function_object((uint64_t)(uintptr_t)f, names[i]);
        if (!o)
            continue;
        cb(user, o, (uint64_t)(uintptr_t)names[i]);
        done++;
    }
    return done;
}

#define IMPLEMENTED_SLOTS                                                                          \
    {CR_EXPORT_TOOLS_MODULE, 7, SLOT(tools_module_functions)},                                     \
        {CR_EXPORT_TOOLS_CONTEXT, 3, SLOT(tools_context_device)},                                  \
        {CR_EXPORT_TOOLS_CONTEXT, 4, SLOT(tools_context_id)},                                      \
        {CR_EXPORT_TOOLS_CONTEXT, 39, SLOT(tools_stream_id)},                                      \
        {CR_EXPORT_TOOLS_CONTEXT, 51, SLOT(tools_stream_handle)},

/* --- lookup --------------------------------------------------------------------------------- */

/* cudart's own tables: static (the integrity check hashes two of their addresses). */
static const struct {
    void **table;
    int slots;
} static_tables[CR_EXPORT_TABLE_COUNT] = {
#define STATIC_TABLE(id, t) [CR_EXPORT_##id] = {t, (int)(sizeof t / sizeof t[0])}
    STATIC_TABLE(ERROR_SINK, error_sink_table), STATIC_TABLE(RUNTIME, runtime_table),
    STATIC_TABLE(TOOLS_HOOKS, hooks_table),     STATIC_TABLE(TOOLS_TLS, tools_tls_table),
    STATIC_TABLE(CONTEXT_STORAGE, cls_table),   STATIC_TABLE(CONTEXT_CHECKS, context_checks_table),
    STATIC_TABLE(INTEGRITY, integrity_table),
#undef STATIC_TABLE
};

/* The slots the stub implements in the tables it builds at the driver's size. */
static const struct {
    int table, slot;
    void *fn;
} implemented[] = {IMPLEMENTED_SLOTS};

static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;
static void *built[CR_EXPORT_TABLE_COUNT][CR_EXPORT_TABLE_MAX_SLOTS];
static int ready[CR_EXPORT_TABLE_COUNT]; /* atomic: static table filled, or table built */

/* cudart's table i, its empty slots made functions that say what they are. */
static void **static_table(int i)
{
    if (!__atomic_load_n(&ready[i], __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&build_lock);
        void **t = static_tables[i].table;
        int first = cr_export_table_desc(i)->has_size; /* slot 0 is the size */
        for (int j = first; j < static_tables[i].slots; j++)
            if (!t[j])
                t[j] = unknown_slots[i][j];
        __atomic_store_n(&ready[i], 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&build_lock);
    }
    return static_tables[i].table;
}

/* Table i at `bytes` (0: the driver said no size), its known slots in place. */
static void **built_table(int i, int32_t bytes)
{
    if (__atomic_load_n(&ready[i], __ATOMIC_ACQUIRE))
        return built[i];
    pthread_mutex_lock(&build_lock);
    if (!ready[i]) {
        const cr_export_table_desc_t *d = cr_export_table_desc(i);
        /* a size the driver does not say: as many slots as the stub serves, so that a
         * library calling past the real end still finds a function */
        int slots = bytes > 0      ? bytes / (int)sizeof(void *)
                    : d->emu_slots ? d->emu_slots
                                   : CR_EXPORT_TABLE_MAX_SLOTS;
        for (size_t k = 0; k < sizeof implemented / sizeof implemented[0]; k++)
            if (implemented[k].table == i && implemented[k].slot >= slots)
                slots = implemented[k].slot + 1;
        if (slots > CR_EXPORT_TABLE_MAX_SLOTS) {
            CR_WARN("export table %s has %d slots; serving the first %d", d->name, slots,
                    CR_EXPORT_TABLE_MAX_SLOTS);
            slots = CR_EXPORT_TABLE_MAX_SLOTS;
        }
        for (int j = 0; j < slots; j++)
            built[i][j] = unknown_slots[i][j];
        for (size_t k = 0; k < sizeof implemented / sizeof implemented[0]; k++)
            if (implemented[k].table == i)
                built[i][implemented[k].slot] = implemented[k].fn;
        if (d->has_size)
            built[i][0] = TABLE_SIZE(slots);
        __atomic_store_n(&ready[i], 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&build_lock);
    return built[i];
}

static void log_uuid(const char *what, const unsigned char *b)
{
    CR_INFO("%s %02x%02x%02x%02x-%02x%02x%02x%02x-%02x%02x%02x%02x-%02x%02x%02x%02x", what, b[0],
            b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
            b[15]);
}

CUresult cr_hand_cuGetExportTable(const void **table, const CUuuid *id)
{
    if (!table || !id)
        return CUDA_ERROR_INVALID_VALUE;
    *table = NULL;
    int i = 0;
    while (i < CR_EXPORT_TABLE_COUNT && memcmp(cr_export_table_desc(i)->uuid, id->bytes, 16))
        i++;
    if (i == CR_EXPORT_TABLE_COUNT) {
        log_uuid("asked for an unknown export table:", (const unsigned char *)id->bytes);
        return CUDA_ERROR_NOT_FOUND;
    }
    if (static_tables[i].table) {
        *table = static_table(i);
        return CUDA_SUCCESS;
    }
    /* the server's driver says whether it has the table: that needs the connection */
    cr_client_t *cl = cr_client();
    if (!cl && cr_hand_cuInit(0) == CUDA_SUCCESS)
        cl = cr_client();
    if (!cl || cl->export_table_size[i] < 0) {
        if (cl)
            log_uuid("the server's driver has no export table", cr_export_table_desc(i)->uuid);
        return CUDA_ERROR_NOT_FOUND;
    }
    *table = built_table(i, cl->export_table_size[i]);
    return CUDA_SUCCESS;
}
