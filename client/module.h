/* Code in the client (module.c): what it knows of each loaded kernel. */
#ifndef CR_MODULE_H
#define CR_MODULE_H

#include <stdint.h>

#include "fatbin.h"

/* What the client knows of a kernel; a CUkernel and the CUfunctions taken from it share
 * one. */
typedef struct {
    const cr_kernel_info_t *info; /* the parameter layout and static attributes */
    uint32_t max_dynamic_shared;  /* set with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     0 until then */
} cr_kernel_t;

/* The kernel behind a kernel or function handle, NULL if unknown. */
cr_kernel_t *cr_kernel(uint64_t handle);
/* Its parameter layout, NULL if unknown. */
const cr_kernel_info_t *cr_kernel_layout(uint64_t handle);

#endif
