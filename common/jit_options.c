/* See jit_options.h. */
#include "jit_options.h"

#include <cuda.h>

cr_jit_kind_t cr_jit_option_kind(uint32_t opt)
{
    switch (opt) {
    case CU_JIT_THREADS_PER_BLOCK:
        return CR_JIT_THREADS;
    case CU_JIT_WALL_TIME:
        return CR_JIT_WALL_TIME;
    case CU_JIT_INFO_LOG_BUFFER:
        return CR_JIT_INFO_LOG;
    case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        return CR_JIT_INFO_SIZE;
    case CU_JIT_ERROR_LOG_BUFFER:
        return CR_JIT_ERROR_LOG;
    case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
        return CR_JIT_ERROR_SIZE;
    case CU_JIT_GLOBAL_SYMBOL_NAMES:
    case CU_JIT_GLOBAL_SYMBOL_ADDRESSES:
    case CU_JIT_GLOBAL_SYMBOL_COUNT: /* counts the arrays above: never without them */
    case CU_JIT_REFERENCED_KERNEL_NAMES:
    case CU_JIT_REFERENCED_KERNEL_COUNT:
    case CU_JIT_REFERENCED_VARIABLE_NAMES:
    case CU_JIT_REFERENCED_VARIABLE_COUNT:
        return CR_JIT_HOST_POINTER;
    default:
        return opt < CU_JIT_NUM_OPTIONS ? CR_JIT_SCALAR : CR_JIT_UNKNOWN;
    }
}
