/* Code in the client (module.c): what it knows of each loaded kernel. */
#ifndef CR_MODULE_H
#define CR_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "cr_client_hand.h"
#include "fatbin.h"

/* A value the stub set for a kernel (an attribute, its cache preference). */
typedef struct {
    int valid, value, device;
    uint64_t handle;     /* set through: the kernel, or a function (of one context) */
    uint64_t generation; /* the attributes' generation it was set in (context.h) */
} cr_kernel_set_t;

/* What the client knows of a kernel; a CUkernel and the CUfunctions taken from it share
 * one. */
typedef struct {
    const cr_kernel_info_t *info; /* the parameter layout and static attributes */
    uint32_t max_dynamic_shared;  /* set with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     0 until then */
    uint32_t version;             /* moves with every set that may have changed it */
    cr_kernel_set_t set[CU_FUNC_ATTRIBUTE_MAX + 1]; /* the last of each attribute, then the
                                                       cache preference */
} cr_kernel_t;

/* The kernel behind a kernel or function handle, NULL if unknown. */
cr_kernel_t *cr_kernel(uint64_t handle);
/* The version of the attributes of the kernel behind a handle, for keys of answers about
 * it (answers.h); 0 for a handle of no kernel the client knows (a set on it moves the
 * attributes' generation instead). */
uint32_t cr_kernel_version(uint64_t handle);
/* Its parameter layout, NULL if unknown. */
const cr_kernel_info_t *cr_kernel_layout(uint64_t handle);
/* The names of the kernels of a module or library, as many as fit in names (room); the
 * number there are. The names live as long as the code. */
size_t cr_code_kernel_names(uint64_t module, const char **names, size_t room);
/* The library kernel a function was taken from (cuKernelGetFunction), 0 for none. */
uint64_t cr_kernel_behind(uint64_t func);

/* The whole of a code file of this host (cuModuleLoad, cuLinkAddFile), with a NUL after
 * it; *len (when not NULL) its size. NULL with *r set when it cannot be read. Free it. */
void *cr_code_read_file(const char *path, size_t *len, CUresult *r);

/* A load's JIT options (cuModuleLoadDataEx, cuLibraryLoadData) as the driver leaves them
 * after a load that logged nothing: the server compiles with its own settings, so the
 * caller's log buffers are emptied, their sizes and the wall time set to 0. */
void cr_jit_logs_empty(unsigned n, const CUjit_option *options, void **values);

#endif
