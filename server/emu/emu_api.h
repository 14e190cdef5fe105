/* The emulated device (`emu` backend): what the server sees besides the cr_emu_cu* functions.
 *
 * The emulated device implements a subset of the CUDA driver API in host memory so that the
 * whole path (cudart, stub, protocol, server) runs on machines without a GPU. Its functions
 * are named cr_emu_<driver symbol> with exactly the driver's signatures (see emu.h); the
 * server's generated backend table picks them up by weak reference. This header needs no
 * CUDA header. */
#ifndef CR_EMU_API_H
#define CR_EMU_API_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t memory_bytes;  /* emulated device memory; 0 = default (16 GiB, or half the host RAM
                               if less); rounded up to 2 MiB */
    uint64_t va_base;       /* device address of the arena (2 MiB aligned); 0 = default
                               0x600000000000 (0x700000000000 under AddressSanitizer,
                               0x2000000000 under ThreadSanitizer) */
    const char *trace_path; /* launch trace file (JSON lines, truncated at cuInit), NULL = none;
                               copied */
} cr_emu_config_t;

/* Sets the configuration. Call before cr_emu_cuInit (later calls return CR_EBUSY); without a
 * call the defaults apply. Returns 0, CR_EINVAL (misaligned base, range outside the user
 * address space), CR_EBUSY or CR_ENOMEM. */
int cr_emu_configure(const cr_emu_config_t *cfg);

/* The device address range [*base, *base + *size) that device pointers fall in, so that
 * clients can reserve it in their own address space. Valid before cuInit (configured or
 * default values). */
void cr_emu_device_window(uint64_t *base, uint64_t *size);

/* One kernel launch, as the stream reaches it. Everything is borrowed for the duration of
 * the hook call. */
typedef struct {
    const char *kernel;             /* mangled name */
    const struct cr_image_s *image; /* the parsed image of the kernel's library (common/fatbin.h) */
    const void *code;               /* the entry loaded for sm_90: cubin or PTX text */
    size_t code_size;
    int code_kind;      /* CR_IMAGE_ELF or CR_IMAGE_PTX */
    unsigned code_arch; /* e.g. 90 */
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_bytes; /* dynamic shared memory */
    const uint8_t *params; /* the parameter buffer, param_size bytes */
    uint32_t param_size;
    uint64_t stream_id; /* 0 for the legacy stream */
    int priority;
    const void *library; /* for cr_emu_launch_global */
} cr_emu_launch_t;

/* Hook for a kernel interpreter: when set, every launch calls it on the stream's worker
 * thread, in stream order, before the launch is recorded in the trace. Returns 0 or a CR_E*
 * code; an error is reported as CUDA_ERROR_LAUNCH_FAILED by the next synchronization of the
 * stream (or of the context). NULL (the default) means launches are only recorded. */
typedef int (*cr_emu_launch_hook_t)(const cr_emu_launch_t *launch, void *user);
void cr_emu_set_launch_hook(cr_emu_launch_hook_t hook, void *user);

/* For the hook: the device address and size of a global variable (`__device__`,
 * `__constant__`) of the launch's library. Returns 0 or CR_ENOTFOUND. */
int cr_emu_launch_global(const cr_emu_launch_t *launch, const char *name, uint64_t *address,
                         uint64_t *size);

#endif
