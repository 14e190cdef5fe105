/* Stream memory operations (memops.c): checking and packing a batch, for the stream calls
 * and for graph nodes of batch memory operations (graph.c). */
#ifndef CR_MEMOPS_H
#define CR_MEMOPS_H

#include <msgpack.h>

#include "client.h"

/* CUDA_SUCCESS when the server would take these `count` operations (1 to 255). */
CUresult cr_memops_check(const CUstreamBatchMemOpParams *ops, unsigned count);
/* Packs them as [[operation, address, value, flags]...]. */
void cr_memops_pack(msgpack_packer *pk, const CUstreamBatchMemOpParams *ops, unsigned count);
/* Reads such an array back into ops (room for CR_MEMOPS_MAX): the count, or -1 when it is
 * malformed. */
#define CR_MEMOPS_MAX 255 /* "count ... must be less than 256" */
int cr_memops_unpack(const msgpack_object *o, CUstreamBatchMemOpParams *ops);

#endif
