/* The generic marshaller: one call by its descriptor (common/api.h), with its stream
 * arguments already resolved to wire ids. cr_remote_call (call.c) resolves them first. */
#ifndef CR_MARSHAL_H
#define CR_MARSHAL_H

#include <stdint.h>

#include "cr_client_hand.h"

/* Sends the call: asynchronous ones without waiting, the others waiting for the reply and
 * writing its outputs where the arguments point. stream_ids[i] is the wire id of the
 * stream argument i (unread for calls without one). */
CUresult cr_marshal_call(const cr_fn_desc_t *d, cr_arg_t *a, const uint64_t *stream_ids);

#endif
