/* The generic marshaller: one call by its descriptor (common/api.h), with its stream
 * arguments already resolved to wire ids. cr_remote_call (call.c) resolves them first.
 * Packing a call and unpacking its reply need no connection, so they can run on their own. */
#ifndef CR_MARSHAL_H
#define CR_MARSHAL_H

#include <msgpack.h>
#include <stdint.h>

#include "cr_client_hand.h"

/* Sends the call: asynchronous ones without waiting, the others waiting for the reply and
 * writing its outputs where the arguments point. stream_ids[i] is the wire id of the
 * stream argument i (unread for calls without one). */
CUresult cr_marshal_call(const cr_fn_desc_t *d, cr_arg_t *a, const uint64_t *stream_ids);

/* Packs the call's body, an array of one element per parameter, into pk. An asynchronous
 * call's new handles get ids chosen here (handles.h), written where their arguments point.
 * CUDA_SUCCESS, or the CUresult for arguments the server must not see (a NULL pointer for a
 * new handle, an array or string over CR_MAX_ARRAY_BYTES): pk then holds a partial body to
 * drop. */
CUresult cr_marshal_pack_args(msgpack_packer *pk, const cr_fn_desc_t *d, cr_arg_t *a,
                              const uint64_t *stream_ids);
/* Writes the outputs of a reply [CUresult, outputs...] where the arguments point (nowhere
 * for a NULL argument or a nil output) and records the handles it returns (handles.h).
 * 0, or CR_EPROTO for a reply the descriptor does not describe: outputs before the bad one
 * are written. */
int cr_marshal_unpack_reply(const cr_fn_desc_t *d, cr_arg_t *a, const msgpack_object_array *reply);

#endif
