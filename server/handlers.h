/* What the hand-written handlers offer the rest of the server, beyond answering their
 * requests (cr_server_hand.h): streams at a tenant's priority, code globals after a
 * context reset, launches as the driver takes them, and host functions' gates. */
#ifndef CR_SERVER_HANDLERS_H
#define CR_SERVER_HANDLERS_H

#include "session.h"

/* Creates a stream for the session at the priority its tenant allows for `asked`
 * (handlers_stream.c). */
CUresult cr_session_create_stream(cr_session_t *s, CUstream *out, unsigned flags, int asked);

/* How much device memory the session's tenant sees (cuMemGetInfo, NVML): its quota as the
 * total, and what is left of it, never more than the device really has free
 * (handlers_memory.c). */
CUresult cr_session_memory_info(cr_session_t *s, size_t *free_bytes, size_t *total);

/* A launch or stream attribute as the session's tenant may have it: a priority becomes
 * the one its tenant's level allows, an access policy window must lie in the session's
 * memory (else CUDA_ERROR_INVALID_VALUE); an id the driver does not have is refused;
 * others pass (handlers_stream.c). */
CUresult cr_session_check_attribute(cr_session_t *s, unsigned id, CUlaunchAttributeValue *v);

/* Gives every global of the session's libraries and modules its initial contents again:
 * a primary-context reset on a GPU reloads code into a fresh context. */
void cr_code_reinit_globals(cr_session_t *s);

/* A kernel launch as the driver takes it, from a cuLaunchKernel, cuLaunchCooperativeKernel
 * or cuLaunchKernelEx request (handlers_launch.c): its function the session's, its layout
 * exactly the kernel's parameters, its attributes as its tenant may have them (events the
 * driver's). cr_launch_parse fills it (CUDA_SUCCESS, or the error the launch gets);
 * cr_launch_clear frees what it holds. params point into the request's bytes. */
#define CR_MAX_LAUNCH_ATTRS 32
typedef struct {
    uint64_t function_id; /* the session's id of f */
    CUfunction f;
    unsigned grid[3], block[3], shared;
    cr_handle_t *stream;
    void **params;
    int cooperative;  /* cuLaunchCooperativeKernel */
    int names_events; /* an attribute names an event */
    unsigned nattrs;
    CUlaunchAttribute attrs[CR_MAX_LAUNCH_ATTRS]; /* last: not cleared */
} cr_launch_t;
CUresult cr_launch_parse(cr_request_t *req, cr_launch_t *l);
void cr_launch_clear(cr_launch_t *l);

/* Host functions (handlers_launch.c). The client answered call_id (loop thread): opens
 * its stream's gate, or lets the host function that holds the driver's thread return. */
void cr_host_func_done(cr_session_t *s, uint64_t call_id);
/* The client is gone: opens every gate its streams wait on. */
void cr_host_funcs_open_all(cr_session_t *s);
/* Frees the gates, once the session's streams are done. */
void cr_host_func_gates_free(cr_session_t *s);

#endif
