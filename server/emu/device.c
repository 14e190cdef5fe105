/* The emulated device itself: configuration, cuInit, device attributes and the one context.
 *
 * The device is H100-like (132 SMs, an H100's memory and limits) and says that it is
 * emulated in its name. It reports compute capability 9.0 unless configured otherwise; the
 * capability decides which code of an image it loads and the features that come with an
 * architecture (clusters, tensor maps), not its resources. There is exactly one context, the
 * primary one; the server makes it current on each of its threads. */
#include "emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "log.h"

#define DEVICE_NAME "cuda-remote emulated device (emu)"
/* 0x600000000000 is in the middle of AddressSanitizer's allocator and outside
 * ThreadSanitizer's application ranges: sanitizer builds default elsewhere. */
#if defined(__SANITIZE_ADDRESS__) /* GCC's way of saying so */
#define CR__ASAN 1
#elif defined(__has_feature) /* clang's */
#if __has_feature(address_sanitizer)
#define CR__ASAN 1
#endif
#endif
#if defined(CR__ASAN)
#define DEFAULT_VA_BASE 0x700000000000ull
#elif defined(__SANITIZE_THREAD__)
#define DEFAULT_VA_BASE 0x2000000000ull
#else
#define DEFAULT_VA_BASE 0x600000000000ull
#endif
#define DEFAULT_MEMORY ((uint64_t)16 << 30)
#define USER_VA_END 0x800000000000ull /* 47-bit user address space */

cr__emu_t cr__emu = {
    .init_lock = PTHREAD_MUTEX_INITIALIZER,
    .sm = CR__DEFAULT_SM,
};

static _Thread_local uint64_t current_ctx;

/* ---- helpers ---- */

int64_t cr__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

CUresult cr__error_to_cuda(int err)
{
    switch (err) {
    case 0:
        return CUDA_SUCCESS;
    case CR_ENOMEM:
        return CUDA_ERROR_OUT_OF_MEMORY;
    case CR_EINVAL:
    case CR_ETOOBIG:
        return CUDA_ERROR_INVALID_VALUE;
    case CR_ENOTFOUND:
        return CUDA_ERROR_NOT_FOUND;
    case CR_EUNSUPPORTED:
        return CUDA_ERROR_NOT_SUPPORTED;
    case CR_ECORRUPT:
        return CUDA_ERROR_INVALID_IMAGE;
    case CR_EIO:
        return CUDA_ERROR_OPERATING_SYSTEM;
    default:
        return CUDA_ERROR_UNKNOWN;
    }
}

CUresult cr__check_init(void)
{
    return atomic_load_explicit(&cr__emu.initialized, memory_order_acquire)
               ? CUDA_SUCCESS
               : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cr__check_ctx(void)
{
    if (!atomic_load_explicit(&cr__emu.initialized, memory_order_acquire))
        return CUDA_ERROR_NOT_INITIALIZED;
    if (current_ctx != cr__emu.ctx_handle)
        return CUDA_ERROR_INVALID_CONTEXT;
    return (CUresult)atomic_load_explicit(&cr__emu.context_fault, memory_order_acquire);
}

static uint64_t default_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t mem = DEFAULT_MEMORY;
    if (pages > 0 && page > 0) {
        uint64_t half = (uint64_t)pages * (uint64_t)page / 2;
        if (half < mem)
            mem = half / CR__ALIGN_LARGE * CR__ALIGN_LARGE;
    }
    return mem;
}

/* ---- public configuration ---- */

/* Whether sm (major * 10 + minor) is in CR_EMU_COMPUTE_CAPABILITIES. */
static int known_capability(unsigned sm)
{
    unsigned major, minor;
    int used;
    for (const char *p = CR_EMU_COMPUTE_CAPABILITIES;
         sscanf(p, "%u.%u%n", &major, &minor, &used) == 2; p += used)
        if (major * 10 + minor == sm)
            return 1;
    return 0;
}

int cr_emu_parse_compute_capability(const char *text, unsigned *out)
{
    const char *p = text;
    unsigned major = 0;
    if (!text)
        return CR_EINVAL;
    /* one or two digits, '.', one digit, nothing else: not "9", "90", " 9.0" or "9.0.1" */
    for (; *p >= '0' && *p <= '9' && p - text < 2; p++)
        major = major * 10 + (unsigned)(*p - '0');
    if (p == text || p[0] != '.' || p[1] < '0' || p[1] > '9' || p[2] != 0)
        return CR_EINVAL;
    unsigned sm = major * 10 + (unsigned)(p[1] - '0');
    if (!known_capability(sm))
        return CR_EINVAL;
    *out = sm;
    return 0;
}

int cr_emu_configure(const cr_emu_config_t *cfg)
{
    int rc = 0;
    char *path = NULL;
    if (!cfg)
        return CR_EINVAL;
    uint64_t base = cfg->va_base ? cfg->va_base : DEFAULT_VA_BASE;
    uint64_t mem =
        cfg->memory_bytes ? cr__round_up(cfg->memory_bytes, CR__ALIGN_LARGE) : default_memory();
    unsigned sm = cfg->compute_capability ? cfg->compute_capability : CR__DEFAULT_SM;
    uint64_t window = mem + cr__vmm_region_size(mem); /* the arena, then vmm.c's region */
    if (base % CR__ALIGN_LARGE || mem == 0 || base >= USER_VA_END || window < mem ||
        window > USER_VA_END - base || !known_capability(sm))
        return CR_EINVAL;
    if (cfg->trace_path && !(path = strdup(cfg->trace_path)))
        return CR_ENOMEM;
    pthread_mutex_lock(&cr__emu.init_lock);
    if (atomic_load(&cr__emu.initialized)) {
        rc = CR_EBUSY;
    } else {
        cr__emu.va_base = base;
        cr__emu.memory_bytes = mem;
        free(cr__emu.trace_path);
        cr__emu.trace_path = path;
        cr__emu.context_faults = cfg->context_faults;
        cr__emu.serial_callbacks = cfg->serial_callbacks;
        cr__emu.sm = sm;
        path = NULL;
    }
    pthread_mutex_unlock(&cr__emu.init_lock);
    free(path);
    return rc;
}

void cr_emu_device_window(uint64_t *base, uint64_t *size)
{
    pthread_mutex_lock(&cr__emu.init_lock);
    if (!cr__emu.va_base) {
        cr__emu.va_base = DEFAULT_VA_BASE;
        cr__emu.memory_bytes = default_memory();
    }
    if (base)
        *base = cr__emu.va_base;
    if (size) /* the arena, then the region reserved ranges come from (vmm.c) */
        *size = cr__emu.memory_bytes + cr__vmm_region_size(cr__emu.memory_bytes);
    pthread_mutex_unlock(&cr__emu.init_lock);
}

void cr_emu_set_execution(int enabled)
{
    pthread_mutex_lock(&cr__emu.init_lock);
    cr__emu.no_execute = !enabled;
    pthread_mutex_unlock(&cr__emu.init_lock);
}

void cr_emu_set_launch_hook(cr_emu_launch_hook_t hook, void *user)
{
    pthread_mutex_lock(&cr__emu.init_lock);
    cr__emu.hook = hook;
    cr__emu.hook_user = user;
    pthread_mutex_unlock(&cr__emu.init_lock);
}

/* ---- initialization ---- */

static void context_release(cr__obj_t *obj)
{
    (void)obj; /* the context object is static */
}
static cr__obj_t context_obj;

CUresult cr_emu_cuInit(unsigned int Flags)
{
    CUresult rc = CUDA_SUCCESS;
    int err;
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (atomic_load_explicit(&cr__emu.initialized, memory_order_acquire))
        return CUDA_SUCCESS;
    pthread_mutex_lock(&cr__emu.init_lock);
    if (atomic_load(&cr__emu.initialized))
        goto out;
    if (!cr__emu.va_base) {
        cr__emu.va_base = DEFAULT_VA_BASE;
        cr__emu.memory_bytes = default_memory();
    }
    if ((err = cr__arena_init()) != 0 || (err = cr__vmm_init()) != 0) {
        rc = err == CR_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_OPERATING_SYSTEM;
        goto out;
    }
    if (cr__emu.trace_path && cr__trace_open(cr__emu.trace_path) != 0) { /* replaces any */
        rc = CUDA_ERROR_OPERATING_SYSTEM;
        goto out;
    }
    if (!cr__emu.ctx_handle) {
        cr__obj_init(&context_obj, context_release);
        cr__emu.ctx_handle = cr__handle_new(CR__H_CONTEXT, &context_obj, &context_obj);
    }
    if (!cr__emu.ctx_handle || cr__streams_init() != 0 || cr__pools_init() != 0) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    CR_INFO("emu: emulated device ready: compute capability %u.%u, %llu MiB of device memory "
            "at 0x%llx",
            cr__emu.sm / 10, cr__emu.sm % 10, (unsigned long long)(cr__emu.memory_bytes >> 20),
            (unsigned long long)cr__emu.va_base);
    atomic_store_explicit(&cr__emu.initialized, 1, memory_order_release);
out:
    pthread_mutex_unlock(&cr__emu.init_lock);
    return rc;
}

CUresult cr_emu_cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = CR__DRIVER_VERSION;
    return CUDA_SUCCESS;
}

/* ---- device ---- */

#define CHECK_DEV(dev)                                                                             \
    do {                                                                                           \
        if ((dev) != 0)                                                                            \
            return CUDA_ERROR_INVALID_DEVICE;                                                      \
    } while (0)

CUresult cr_emu_cuDeviceGet(CUdevice *device, int ordinal)
{
    CR__ENTER_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(ordinal);
    *device = 0;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDeviceGetCount(int *count)
{
    CR__ENTER_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CR__ENTER_INIT();
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    snprintf(name, (size_t)len, "%s", DEVICE_NAME);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    static const unsigned char bytes[16] = {'c',  'r',  '-',  'e',  'm',  'u',  0x4e, 0x55,
                                            0x9a, 0x1d, 0x90, 0x00, 0x00, 0x00, 0x00, 0x01};
    CR__ENTER_INIT();
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    memcpy(uuid->bytes, bytes, sizeof bytes);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return cr_emu_cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cr_emu_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CR__ENTER_INIT();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    *bytes = cr__emu.memory_bytes;
    return CUDA_SUCCESS;
}

/* H100 SXM-like values, indexed by CUdevice_attribute; absent entries are 0 (unsupported). */
static const int attributes[CU_DEVICE_ATTRIBUTE_MAX] = {
    [CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = CR__MAX_THREADS_PER_BLOCK,
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X] = CR__MAX_BLOCK_XY,
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y] = CR__MAX_BLOCK_XY,
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z] = CR__MAX_BLOCK_Z,
    [CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X] = (int)CR__MAX_GRID_X,
    [CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y] = CR__MAX_GRID_YZ,
    [CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z] = CR__MAX_GRID_YZ,
    [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK] = CR__SHARED_PER_BLOCK,
    [CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY] = 65536,
    [CU_DEVICE_ATTRIBUTE_WARP_SIZE] = CR__WARP,
    [CU_DEVICE_ATTRIBUTE_MAX_PITCH] = 2147483647,
    [CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK] = CR__REGS_PER_BLOCK,
    [CU_DEVICE_ATTRIBUTE_CLOCK_RATE] = 1980000,
    [CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT] = 512,
    [CU_DEVICE_ATTRIBUTE_GPU_OVERLAP] = 1,
    [CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT] = CR__SM_COUNT,
    [CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT] = 0,
    [CU_DEVICE_ATTRIBUTE_INTEGRATED] = 0,
    [CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY] = 0, /* mapped host memory is not supported */
    [CU_DEVICE_ATTRIBUTE_COMPUTE_MODE] = CU_COMPUTEMODE_DEFAULT,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT] = 65536,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT] = 512,
    [CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS] = 1,
    [CU_DEVICE_ATTRIBUTE_ECC_ENABLED] = 1,
    [CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] = 0x1e,
    [CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID] = 0,
    [CU_DEVICE_ATTRIBUTE_TCC_DRIVER] = 0,
    [CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE] = 2619000,
    [CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH] = 5120,
    [CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE] = 52428800,
    [CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR] = CR__MAX_THREADS_PER_SM,
    [CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT] = 2,
    [CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING] = 1,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER] = 1,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE] = 8192,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE] = 8192,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE] = 32768,
    [CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] = 0,
    [CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT] = 32,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS] = 2046,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT] = 65536,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS] = 2046,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH] = 268435456,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT] = 65000,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH] = 2097120,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT] = 32768,
    /* COMPUTE_CAPABILITY_MAJOR/MINOR: from the configuration (attribute()) */
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR] = CR__SHARED_PER_SM,
    [CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR] = CR__REGS_PER_SM,
    [CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY] = 0, /* managed memory is not supported */
    [CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD] = 0,
    [CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID] = 0,
    [CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED] = 0,
    [CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO] = 2,
    [CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS] = 0,
    [CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS] = 0,
    [CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM] = 0,
    [CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH] = 1,
    [CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH] = 0,
    [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN] = CR__SHARED_PER_BLOCK_OPTIN,
    [CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES] = 0,
    [CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES] = 0,
    [CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST] = 0,
    [CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED] = 0, /* cuMemCreate/Map: no */
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR] = CR__MAX_BLOCKS_PER_SM,
    [CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED] = 0,
    [CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE] = 32768000,
    [CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE] = 134213632,
    [CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK] = CR__SHARED_RESERVED_PER_BLOCK,
    [CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES] = 0,
    [CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH] = 1,
    [CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT] = 4,
    [CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS] = 1,
    [CU_DEVICE_ATTRIBUTE_NUMA_CONFIG] = 0,
    [CU_DEVICE_ATTRIBUTE_NUMA_ID] = -1,
    [CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID] = -1,
    [CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID] = 0x233010de, /* device 0x2330, vendor 0x10de */
    [CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID] = 0x16c110de,
};

/* An attribute's value: the table's, except what follows from the compute capability.
 * Clusters, tensor maps and four memory synchronization domains came with 9.0; programs
 * and libraries test these attributes (not the capability) before using the feature. */
static int attribute(CUdevice_attribute attrib)
{
    unsigned sm = cr__emu.sm;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        return (int)(sm / 10);
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        return (int)(sm % 10);
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED:
        return sm >= 90 ? attributes[attrib] : 0;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT:
        return sm >= 90 ? attributes[attrib] : 1;
    default:
        return attributes[attrib];
    }
}

CUresult cr_emu_cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CR__ENTER_INIT();
    if (!pi || (int)attrib < 1 || (int)attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    *pi = attribute(attrib);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CR__ENTER_INIT();
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    snprintf(
        pciBusId, (size_t)len, "%04x:%02x:%02x.0", attributes[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID],
        attributes[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID], attributes[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID]);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    unsigned domain, bus, device, function = 0;
    CR__ENTER_INIT();
    if (!dev || !pciBusId)
        return CUDA_ERROR_INVALID_VALUE;
    /* "domain:bus:device.function" or "bus:device.function" */
    if (sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &device, &function) < 3) {
        domain = 0;
        if (sscanf(pciBusId, "%x:%x.%x", &bus, &device, &function) < 2)
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (domain != (unsigned)attributes[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] ||
        bus != (unsigned)attributes[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] ||
        device != (unsigned)attributes[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID] || function != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = 0;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    CR__ENTER_INIT();
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    *major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    *minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDeviceGetProperties(CUdevprop *prop, CUdevice dev)
{
    CR__ENTER_INIT();
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    prop->maxThreadsPerBlock = attributes[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
    prop->maxThreadsDim[0] = attributes[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X];
    prop->maxThreadsDim[1] = attributes[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y];
    prop->maxThreadsDim[2] = attributes[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z];
    prop->maxGridSize[0] = attributes[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X];
    prop->maxGridSize[1] = attributes[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y];
    prop->maxGridSize[2] = attributes[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z];
    prop->sharedMemPerBlock = attributes[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK];
    prop->totalConstantMemory = attributes[CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY];
    prop->SIMDWidth = attributes[CU_DEVICE_ATTRIBUTE_WARP_SIZE];
    prop->memPitch = attributes[CU_DEVICE_ATTRIBUTE_MAX_PITCH];
    prop->regsPerBlock = attributes[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK];
    prop->clockRate = attributes[CU_DEVICE_ATTRIBUTE_CLOCK_RATE];
    prop->textureAlign = attributes[CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT];
    return CUDA_SUCCESS;
}

/* ---- primary context ---- */

#define CTX_FLAGS_MASK                                                                             \
    0xffu /* sched (0x7), LMEM_RESIZE_TO_MAX, COREDUMP, USER_COREDUMP, SYNC_MEMOPS */

CUresult cr_emu_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CR__ENTER_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    atomic_fetch_add(&cr__emu.ctx_retains, 1);
    *pctx = (CUcontext)(uintptr_t)cr__emu.ctx_handle;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CR__ENTER_INIT();
    CHECK_DEV(dev);
    int n = atomic_load(&cr__emu.ctx_retains);
    do {
        if (n <= 0)
            return CUDA_ERROR_INVALID_CONTEXT;
    } while (!atomic_compare_exchange_weak(&cr__emu.ctx_retains, &n, n - 1));
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CR__ENTER_INIT();
    CHECK_DEV(dev);
    /* The one context is shared by every client of the server: a reset waits for all work and
     * resets the flags, but keeps memory, streams and modules (unlike the driver). */
    (void)cr__sync_all();
    atomic_store(&cr__emu.ctx_flags, 0);
    atomic_store(&cr__emu.cache_config, CU_FUNC_CACHE_PREFER_NONE);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CR__ENTER_INIT();
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    *flags = atomic_load(&cr__emu.ctx_flags);
    *active = atomic_load(&cr__emu.ctx_retains) > 0;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CR__ENTER_INIT();
    CHECK_DEV(dev);
    if ((flags & ~CTX_FLAGS_MASK) || (flags & CU_CTX_SCHED_MASK) == 3 ||
        (flags & CU_CTX_SCHED_MASK) > CU_CTX_SCHED_BLOCKING_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    atomic_store(&cr__emu.ctx_flags, flags);
    return CUDA_SUCCESS;
}

/* ---- current context ---- */

/* ctx == NULL means the calling thread's current context. */
static CUresult resolve_ctx(CUcontext ctx)
{
    if (!ctx)
        return current_ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    return (uint64_t)(uintptr_t)ctx == cr__emu.ctx_handle ? CUDA_SUCCESS
                                                          : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cr_emu_cuCtxSetCurrent(CUcontext ctx)
{
    CR__ENTER_INIT();
    if (ctx && (uint64_t)(uintptr_t)ctx != cr__emu.ctx_handle)
        return CUDA_ERROR_INVALID_CONTEXT;
    current_ctx = (uint64_t)(uintptr_t)ctx;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxGetCurrent(CUcontext *pctx)
{
    CR__ENTER_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)(uintptr_t)current_ctx;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxGetDevice(CUdevice *device)
{
    CR__ENTER();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = 0;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    CR__ENTER_INIT();
    CUresult rc = resolve_ctx(ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = 0;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxSynchronize(void)
{
    CR__ENTER();
    return cr__sync_all();
}

CUresult cr_emu_cuCtxSynchronize_v2(CUcontext ctx)
{
    CR__ENTER_INIT();
    CUresult rc = resolve_ctx(ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    return cr__sync_all();
}

static _Atomic size_t limits[CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED + 1] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1048576,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8388608,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
    [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
    [CU_LIMIT_SHMEM_SIZE] = 0,
    [CU_LIMIT_CIG_ENABLED] = 0,
    [CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED] = 0,
};

CUresult cr_emu_cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    CR__ENTER();
    if (!pvalue)
        return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned)limit > CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    *pvalue = atomic_load(&limits[limit]);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxSetLimit(CUlimit limit, size_t value)
{
    CR__ENTER();
    switch (limit) {
    case CU_LIMIT_STACK_SIZE:
    case CU_LIMIT_PRINTF_FIFO_SIZE:
    case CU_LIMIT_MALLOC_HEAP_SIZE:
    case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH:
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
        break;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
        if (value > 128)
            return CUDA_ERROR_INVALID_VALUE;
        break;
    case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
        if (value > (size_t)attributes[CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE])
            return CUDA_ERROR_INVALID_VALUE;
        break;
    default:
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    }
    atomic_store(&limits[limit], value);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    CR__ENTER();
    /* Either pointer may be NULL, as in the driver. */
    if (leastPriority)
        *leastPriority = CR__PRIORITY_LEAST;
    if (greatestPriority)
        *greatestPriority = CR__PRIORITY_GREATEST;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
    CR__ENTER();
    if (!pconfig)
        return CUDA_ERROR_INVALID_VALUE;
    *pconfig = (CUfunc_cache)atomic_load(&cr__emu.cache_config);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxSetCacheConfig(CUfunc_cache config)
{
    CR__ENTER();
    if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    atomic_store(&cr__emu.cache_config, (int)config);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    CR__ENTER_INIT();
    CUresult rc = resolve_ctx(ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = CR__DRIVER_VERSION;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxGetFlags(unsigned int *flags)
{
    CR__ENTER();
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = atomic_load(&cr__emu.ctx_flags);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxSetFlags(unsigned int flags)
{
    CR__ENTER();
    if (flags & ~CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    atomic_store(&cr__emu.ctx_flags, flags);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    CR__ENTER_INIT();
    CUresult rc = resolve_ctx(ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    *ctxId = 1;
    return CUDA_SUCCESS;
}
