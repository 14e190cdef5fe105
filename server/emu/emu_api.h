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
    int context_faults;     /* 1: a kernel fault breaks the whole context, as on a GPU: every
                               later call that needs the context returns it, for good;
                               0 (default): only the faulting stream and its events */
    int serial_callbacks;   /* 1: host functions of all streams run on one thread, one at a
                               time, as a GPU's driver runs them; 0 (default): each stream
                               runs its own */
    unsigned compute_capability; /* major * 10 + minor, one of CR_EMU_COMPUTE_CAPABILITIES;
                                    0 = default 90. The device reports it and loads (and runs
                                    the PTX of) what a device of that capability would */
} cr_emu_config_t;

/* The compute capabilities the emulated device may report: those CUDA 13.0 compiles for
 * (nvcc --list-gpu-arch), so every one is a real device's. */
#define CR_EMU_COMPUTE_CAPABILITIES "7.5 8.0 8.6 8.7 8.8 8.9 9.0 10.0 10.3 11.0 12.0 12.1"

/* Parses "X.Y" (one of CR_EMU_COMPUTE_CAPABILITIES) into *out = X * 10 + Y. Returns 0, or
 * CR_EINVAL for anything else (*out untouched). */
int cr_emu_parse_compute_capability(const char *text, unsigned *out);

/* Sets the configuration. Call before cr_emu_cuInit (later calls return CR_EBUSY); without a
 * call the defaults apply. Returns 0, CR_EINVAL (misaligned base, range outside the user
 * address space, unknown compute capability), CR_EBUSY or CR_ENOMEM. */
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
    const void *code;               /* the entry the device loaded: cubin or PTX text */
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

/* Kernels run on the PTX interpreter (server/emu/ptx): when the stream reaches a launch, the
 * kernel's PTX (the newest PTX entry of its image a device of the configured compute
 * capability could JIT, compiled once per library) runs to completion, then the launch is
 * recorded in the trace. A fault (out-of-bounds or misaligned access, trap, failed device
 * assertion, an instruction the interpreter does not know) fails the launch with the
 * CUresult a device gives and is sticky for its stream: every later synchronization of the
 * stream, of an event recorded on it after the launch and of the context reports it, until
 * the stream is destroyed. A kernel whose image has no PTX that device could JIT (a cubin
 * alone, or PTX for a newer capability only) fails at once: cuLaunchKernel returns
 * CUDA_ERROR_NOT_SUPPORTED.
 *
 * enabled = 0 only records launches (tests that launch kernels with made-up arguments);
 * 1 is the default. */
void cr_emu_set_execution(int enabled);

/* Hook that replaces the interpreter (tests): when set, every launch calls it on the stream's
 * worker thread, in stream order, before the launch is recorded in the trace. It returns a
 * CUresult: nonzero fails the launch and is sticky for the stream like a fault. (A negative
 * return, a CR_E* code of older hooks, is reported once as CUDA_ERROR_LAUNCH_FAILED.) NULL
 * (the default) means the interpreter runs (or nothing, with execution disabled). */
typedef int (*cr_emu_launch_hook_t)(const cr_emu_launch_t *launch, void *user);
void cr_emu_set_launch_hook(cr_emu_launch_hook_t hook, void *user);

/* Device printf output of kernels launched on `stream` (the emu's CUstream handle; NULL or
 * CU_STREAM_LEGACY for the legacy stream) goes to fn(user, text, len): whole lines, a block's
 * output at a time, all of a launch's before the launch completes (so in order with the
 * stream's other work), called from the interpreter's threads but never concurrently for one
 * launch. fn NULL restores the default, the server's stdout. release(user), when not NULL, is
 * called once the sink is no longer used: when the stream is freed after its last work, or
 * when the sink is replaced (set it before the stream's first launch). Returns 0, or
 * CR_EINVAL for an unknown stream (then release is not called). */
typedef void (*cr_emu_output_fn)(void *user, const char *text, size_t len);
int cr_emu_stream_set_output(void *stream, cr_emu_output_fn fn, void (*release)(void *user),
                             void *user);

/* For the hook: the device address and size of a global variable (`__device__`,
 * `__constant__`) of the launch's library. Returns 0 or CR_ENOTFOUND. */
int cr_emu_launch_global(const cr_emu_launch_t *launch, const char *name, uint64_t *address,
                         uint64_t *size);

#endif
