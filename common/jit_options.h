/* The JIT linker's options (cuLinkCreate, cuLinkAddData): which ones carry a plain number
 * that may cross the network as it is, and which ones point into the caller's memory. The
 * client packs, the server checks and the emulated device reads them by this one list. */
#ifndef CR_JIT_OPTIONS_H
#define CR_JIT_OPTIONS_H

#include <stdint.h>

typedef enum {
    CR_JIT_UNKNOWN = 0, /* not an option of this CUDA: CUDA_ERROR_INVALID_VALUE */
    CR_JIT_SCALAR,      /* a number in the value itself (int, unsigned or an enum) */
    CR_JIT_THREADS,     /* CU_JIT_THREADS_PER_BLOCK: a number in, the one used out */
    CR_JIT_WALL_TIME,   /* out: the milliseconds spent, a float written over the value */
    CR_JIT_INFO_LOG,    /* a char buffer of the caller's */
    CR_JIT_INFO_SIZE,   /* its size in, the bytes filled out */
    CR_JIT_ERROR_LOG,
    CR_JIT_ERROR_SIZE,
    CR_JIT_HOST_POINTER, /* host symbol tables and name lists, and their counts: they point
                          * into memory of the caller's host, out of the server's reach */
} cr_jit_kind_t;

/* What option `opt` (a CUjit_option) is. */
cr_jit_kind_t cr_jit_option_kind(uint32_t opt);

/* Bounds on what one link may ask for: options per call, and the log a server keeps. */
#define CR_JIT_MAX_OPTIONS 64u
#define CR_JIT_MAX_LOG ((uint32_t)1 << 20)

#endif
