/* Stream creation: a stream gets the priority its tenant's level allows
 * (cr_tenant_stream_priority), so high tenants' work outranks everyone's on the device. */
#include "cr_server_hand.h"
#include "dispatch.h"
#include "handlers.h"
#include "session.h"
#include "tenants.h"

CUresult cr_session_create_stream(cr_session_t *s, CUstream *out, unsigned flags, int asked)
{
    const cr_driver_t *d = &cr_session_backend(s)->d;
    int least = 0, greatest = 0;
    if (!d->cuStreamCreateWithPriority || !d->cuCtxGetStreamPriorityRange ||
        d->cuCtxGetStreamPriorityRange(&least, &greatest) != CUDA_SUCCESS)
        return d->cuStreamCreate(out, flags);
    return d->cuStreamCreateWithPriority(
        out, flags, cr_tenant_stream_priority(cr_session_tenant(s), asked, least, greatest));
}

/* (phStream, flags): created by the hook, at the tenant's priority for the default one */
static CUresult create_default(cr_request_t *req, cr_arg_t *a)
{
    return cr_session_create_stream(req->session, a[0].p, (unsigned)a[1].u, 0);
}

static CUresult created_by_hook(const cr_driver_t *d, cr_arg_t *a)
{
    (void)d, (void)a;
    return CUDA_SUCCESS;
}

/* (phStream, flags, priority) */
static CUresult create_with_priority(cr_request_t *req, cr_arg_t *a)
{
    return cr_session_create_stream(req->session, a[0].p, (unsigned)a[1].u, (int)a[2].i);
}

static const cr_generic_hooks_t default_hooks = {create_default, NULL};
static const cr_generic_hooks_t priority_hooks = {create_with_priority, NULL};

void cr_srv_cuStreamCreate(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuStreamCreate, created_by_hook, &default_hooks);
}

void cr_srv_cuStreamCreateWithPriority(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuStreamCreateWithPriority, created_by_hook, &priority_hooks);
}
