/* Stream memory operations (memops.c): checking and packing a batch, for the stream calls
 * and for graph nodes of batch memory operations (graph.c). */
#ifndef CR_MEMOPS_H
#define CR_MEMOPS_H

#include <msgpack.h>

#include "client.h"

#define CR_MEMOPS_MAX 255 /* "count ... must be less than 256" */

/* CUDA_SUCCESS when the server would take these `count` operations (1 to CR_MEMOPS_MAX). */
CUresult cr_memops_check(const CUstreamBatchMemOpParams *ops, unsigned count);
/* Packs them as [[operation, address, value, flags]...]. */
void cr_memops_pack(msgpack_packer *pk, const CUstreamBatchMemOpParams *ops, unsigned count);
/* Reads such an array back into ops (room for as many as it holds): the count, or -1 when
 * it is malformed or holds more than CR_MEMOPS_MAX. */
int cr_memops_unpack(const msgpack_object *o, CUstreamBatchMemOpParams *ops);

#endif
