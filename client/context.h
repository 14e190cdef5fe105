/* Contexts, which live in the client (context.c). */
#ifndef CR_CONTEXT_H
#define CR_CONTEXT_H

#include "cr_client_hand.h"

/* The current context of the calling thread, binding nothing (NULL if none). */
CUcontext cr_ctx_current(void);
/* 1 when ctx is a live context handle of ours. */
int cr_ctx_valid(CUcontext ctx);
/* The primary context of a device without retaining it (runtime interface slot 2). */
CUresult cr_ctx_primary(CUcontext *out, CUdevice dev);
/* CUDA_ERROR_INVALID_CONTEXT unless the calling thread has a current context. */
CUresult cr_ctx_require(void);
int cr_ctx_device(CUcontext ctx);

/* For the primary-context reset (lifecycle.c): runs a context's context-local-storage
 * destructors, then, once the server reset it, makes the primary context inactive with
 * its default flags. */
void cr_ctx_run_cls_destructors(CUcontext ctx);
void cr_ctx_primary_reset_state(CUcontext ctx);

/* What kernels' attributes and cache preferences are: 0 at first, moved by every call that
 * may change one (a set or a cache preference, module.c; an unload; a context destroyed
 * or reset, which takes its kernels' attributes with it). An answer that depends on them
 * (a cluster query, launch.c) holds while the generation stays the one it was asked in. */
uint64_t cr_ctx_attributes_generation(void);
void cr_ctx_attributes_changed(void);

/* context-local storage, the table c693336e */
CUresult cr_cls_put(CUcontext ctx, void *key, void *value, void (*dtor)(CUcontext, void *, void *));
CUresult cr_cls_delete(CUcontext ctx, void *key);
CUresult cr_cls_get(void **value, CUcontext ctx, void *key);

#endif
