/* Kernel launches (launch.c): what graph.c needs to make kernel nodes, which carry a
 * launch's arguments as cuLaunchKernel sends them. */
#ifndef CR_LAUNCH_H
#define CR_LAUNCH_H

#include <msgpack.h>
#include <stdint.h>

#include "cr_client_hand.h"
#include "fatbin.h"

typedef struct {
    unsigned grid[3], block[3], shared;
} cr_launch_dims_t;

/* A host function a graph runs at each launch (a host node, or one launched on a capturing
 * stream): kept by the connection under a new id, *host_id, which the node names. */
CUresult cr_launch_keep_host_func(void (*fn)(void *), void *data, uint64_t *host_id);

/* The parameter buffer and its layout, from kernelParams or from `extra`. */
typedef struct {
    uint8_t *buf;
    size_t size;
    const cr_param_t *params;
    uint32_t count;
    cr_param_t whole; /* the layout of a buffer passed through `extra`, if unknown */
} cr_launch_params_t;

typedef struct {
    CUfunction f;
    cr_launch_dims_t dims;
    cr_launch_params_t params;
} cr_launch_t;

/* Checks a launch of f as CUDA does on the spot and builds its parameter buffer into l
 * (free it with cr_launch_free; on failure there is nothing to free). */
CUresult cr_launch_prepare(cr_launch_t *l, CUfunction f, const cr_launch_dims_t *d,
                           void **kernel_params, void **extra);
/* Packs the array of cuLaunchKernel's six arguments (stream `sid`), with room for `extra`
 * more elements the caller packs after; the parameter buffer goes as the message's bulk. */
void cr_launch_pack(msgpack_packer *pk, const cr_launch_t *l, uint64_t sid, unsigned extra);
void cr_launch_free(cr_launch_t *l);
/* cuLaunchKernelEx's seventh argument, its attributes: [[id, value bytes]...] (events
 * inside are the client's handles). */
void cr_launch_pack_attrs(msgpack_packer *pk, const CUlaunchAttribute *attrs, unsigned count);

#endif
