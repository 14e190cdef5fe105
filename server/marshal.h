/* The server's generic marshaller, the part that needs no session (marshal.c): a request
 * body unpacked into a call's arguments by its descriptor (common/api.h), with every
 * count, length and wire type checked, and the call's outputs packed into a reply.
 * What only a session can answer (its handles, its streams, the device memory it owns, ids
 * for the handles a call returns) it asks through cr_generic_session_t: cr_generic
 * (dispatch.h) passes the request's session, a unit test its own. */
#ifndef CR_SERVER_MARSHAL_H
#define CR_SERVER_MARSHAL_H

#include <msgpack.h>
#include <stdint.h>

#include "cr_api_desc.h"

/* What unpacking and packing a call ask of the caller's session; ctx is passed back. */
typedef struct {
    void *ctx;
    /* The object behind a handle id (not 0) of that type; NULL when the caller holds none. */
    void *(*handle)(void *ctx, uint8_t type, uint64_t id);
    /* The object behind a stream id (0: the legacy stream) in *obj; -1 when the caller holds
     * no such stream. enqueues: the call enqueues work on it (an asynchronous call). */
    int (*stream)(void *ctx, uint64_t id, int enqueues, void **obj);
    /* 1 when [p, p + len) lies in the caller's own device memory. */
    int (*owns)(void *ctx, uint64_t p, uint64_t len);
    /* The id the caller now knows obj by, a handle of parameter pd the call returned;
     * parent: the object of the call's first handle argument (the module of a function).
     * 0 when it cannot be recorded. */
    uint64_t (*add_handle)(void *ctx, const cr_param_desc_t *pd, void *obj, void *parent);
} cr_generic_session_t;

/* A call's arguments as unpacked from its request, and the memory they point into. */
typedef struct {
    cr_arg_t a[CR_MAX_PARAMS];
    /* per new handle of a call sent without waiting: the id its client chose; else 0 */
    uint64_t client_id[CR_MAX_PARAMS];
    void *blocks[CR_MAX_PARAMS];
    int block_count;
} cr_generic_args_t;

/* Unpacks a request body (args: the argc elements of its decoded array) into u, zeroed
 * first. waits: the client waits for the reply (else the handles the call creates come
 * with the ids the client chose). Output pointers the client sent as nil arrive NULL, the
 * others as zeroed buffers of their full size. Returns CUDA_SUCCESS, the CUresult to answer
 * with (an unknown handle or stream, device memory that is not the caller's, no memory), or
 * -1 for a body the descriptor does not describe. Whatever it returns, the caller ends
 * with cr_generic_args_free(u). */
int cr_generic_unpack(const cr_fn_desc_t *d, const msgpack_object *args, uint32_t argc, int waits,
                      const cr_generic_session_t *s, cr_generic_args_t *u);
void cr_generic_args_free(cr_generic_args_t *u);

/* How many outputs a reply to the call carries after its CUresult. */
uint32_t cr_generic_output_count(const cr_fn_desc_t *d);
/* Packs those outputs: nil where the client passed NULL or result r is not success, the
 * handles the call returned under the ids s gives them. */
void cr_generic_pack_outputs(msgpack_packer *pk, const cr_fn_desc_t *d, const cr_arg_t *a, int r,
                             const cr_generic_session_t *s);

#endif
