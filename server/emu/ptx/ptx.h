/* The PTX interpreter of the emulated device: runs kernels from the PTX text that nvcc embeds
 * in every default build, so CUDA programs compute their results without a GPU.
 *
 * A module is parsed and decoded once (cr_ptx_module_load) into a compact form; a launch
 * (cr_ptx_launch) runs the blocks of a grid on a small pool of host threads shared by all
 * launches, warps of 32 threads in lockstep inside each block. Device addresses are host
 * addresses of the calling process: the embedder tells the interpreter which ranges are live
 * device memory and where a module's variables live (cr_ptx_env_t).
 *
 * Thread safety: a loaded module is immutable; any number of threads may launch its kernels
 * at once. This header needs no CUDA header: results are CUresult values as ints. */
#ifndef CR_PTX_H
#define CR_PTX_H

#include <stddef.h>
#include <stdint.h>

typedef struct cr_ptx_module_s cr_ptx_module_t;

/* Parses and decodes `len` bytes of PTX text (need not be NUL-terminated). On success *out is
 * the module (free with cr_ptx_module_free). On failure returns CR_ECORRUPT with a message
 * naming the line in err (err_len bytes, may be 0), or CR_ENOMEM. Instructions the
 * interpreter does not know do not fail the load: a launch of a kernel that can reach one
 * fails instead (CUDA_ERROR_NOT_SUPPORTED), naming it. */
int cr_ptx_module_load(const char *ptx, size_t len, cr_ptx_module_t **out, char *err,
                       size_t err_len);
void cr_ptx_module_free(cr_ptx_module_t *m);

/* 1 when the module defines an entry (kernel) of that name. */
int cr_ptx_module_has_kernel(const cr_ptx_module_t *m, const char *kernel);

/* What a launch needs from its embedder. Callbacks run on the interpreter's threads, several
 * at once: they must be thread-safe. */
typedef struct {
    void *user;
    /* The device address and size of a module-scope .global/.const variable of this module.
     * Returns 0, or nonzero when the embedder does not hold it: the interpreter then keeps the
     * variable in memory of its own (one copy per module, initialised from the PTX). */
    int (*global_address)(void *user, const char *name, uint64_t *address, uint64_t *size);
    /* The live device allocation that contains `addr`: returns 1 and sets [*base, *base +
     * *size), else 0. Allocations found live stay live until the launch returns. */
    int (*allocation)(void *user, uint64_t addr, uint64_t *base, uint64_t *size);
    /* Device printf output (and assertion messages), one or more whole lines, in order.
     * NULL writes to stdout. */
    void (*output)(void *user, const char *text, size_t len);
    /* cudaGraphSetConditional(handle, value): returns 0, or nonzero when the launch has no
     * such handle (the kernel then faults with CUDA_ERROR_ILLEGAL_ADDRESS). NULL: none has. */
    int (*set_conditional)(void *user, uint64_t handle, uint32_t value);
} cr_ptx_env_t;

typedef struct {
    uint32_t grid[3], block[3];
    uint32_t dynamic_shared; /* bytes */
    const uint8_t *params;   /* the parameter buffer as the kernel's .param list lays it out */
    uint32_t param_size;
} cr_ptx_launch_t;

typedef struct {
    int code;          /* CUresult of the fault, 0 for none */
    char message[256]; /* what happened, where (kernel, block, thread, PTX line) */
} cr_ptx_fault_t;

/* Runs kernel `kernel` of m to completion on the calling thread and the interpreter's pool.
 * Returns 0, or the CUresult of the first fault (also in *fault when non-NULL):
 * CUDA_ERROR_ILLEGAL_ADDRESS (outside every live allocation, or outside shared/local memory),
 * CUDA_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_ASSERT (__assertfail), CUDA_ERROR_ILLEGAL_INSTRUCTION
 * (trap), CUDA_ERROR_NOT_SUPPORTED (an instruction the interpreter does not know, or no such
 * kernel), CUDA_ERROR_LAUNCH_FAILED (call stack overflow, barrier deadlock),
 * CUDA_ERROR_OUT_OF_MEMORY. */
int cr_ptx_launch(cr_ptx_module_t *m, const char *kernel, const cr_ptx_launch_t *l,
                  const cr_ptx_env_t *env, cr_ptx_fault_t *fault);

#endif
