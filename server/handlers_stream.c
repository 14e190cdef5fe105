/* Streams' priorities and attributes: a stream gets the priority its tenant's level
 * allows (cr_tenant_stream_priority), so high tenants' work outranks everyone's on the
 * device, whether it asks at creation, through a stream attribute or through a launch
 * attribute; an access policy window may only cover the session's own memory. */
#include <string.h>

#include "cr_api_desc.h"
#include "cr_server_hand.h"
#include "dispatch.h"
#include "handlers.h"
#include "request.h"
#include "session.h"
#include "tenants.h"

/* The priority the session's tenant may have when it asks for `asked`; 0 with *none when
 * the device has no priorities. */
static int allowed_priority(cr_session_t *s, int asked, int *none)
{
    const cr_driver_t *d = &cr_session_backend(s)->d;
    int least = 0, greatest = 0;
    *none = !d->cuStreamCreateWithPriority || !d->cuCtxGetStreamPriorityRange ||
            d->cuCtxGetStreamPriorityRange(&least, &greatest) != CUDA_SUCCESS;
    return *none ? 0 : cr_tenant_stream_priority(cr_session_tenant(s), asked, least, greatest);
}

CUresult cr_session_create_stream(cr_session_t *s, CUstream *out, unsigned flags, int asked)
{
    const cr_driver_t *d = &cr_session_backend(s)->d;
    int none, priority = allowed_priority(s, asked, &none);
    return none ? d->cuStreamCreate(out, flags)
                : d->cuStreamCreateWithPriority(out, flags, priority);
}

CUresult cr_session_check_attribute(cr_session_t *s, unsigned id, CUlaunchAttributeValue *v)
{
    int none;
    switch (id) {
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        v->priority = allowed_priority(s, v->priority, &none);
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
        const CUaccessPolicyWindow *w = &v->accessPolicyWindow;
        return !w->num_bytes ||
                       cr_session_owns(s, (CUdeviceptr)(uintptr_t)w->base_ptr, w->num_bytes)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    }
    default: /* the driver is handed only attributes it has */
        return cr_enum_has(&cr_enum_CUlaunchAttributeID, id) ? CUDA_SUCCESS
                                                             : CUDA_ERROR_INVALID_VALUE;
    }
}

/* [stream, attribute, value (bin: the 64-byte union)] */
void cr_srv_cuStreamSetAttribute(cr_request_t *req)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    uint64_t sid, id;
    const void *bytes;
    size_t len;
    CUlaunchAttributeValue v;
    cr_handle_t *stream = req->argc == 3 && !cr_arg_u64(req, 0, &sid) && !cr_arg_u64(req, 1, &id) &&
                                  !cr_arg_bin(req, 2, &bytes, &len) && len == sizeof v
                              ? cr_session_stream(s, sid)
                              : NULL;
    if (!stream || id > UINT32_MAX) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    memcpy(&v, bytes, sizeof v);
    CUresult r = cr_session_check_attribute(s, (unsigned)id, &v);
    if (r == CUDA_SUCCESS)
        r = d->cuStreamSetAttribute ? d->cuStreamSetAttribute(stream->obj, (CUstreamAttrID)id, &v)
                                    : CUDA_ERROR_NOT_SUPPORTED;
    cr_request_finish(req, r);
}

/* [stream, attribute] -> value (bin) */
void cr_srv_cuStreamGetAttribute(cr_request_t *req)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    uint64_t sid, id;
    cr_handle_t *stream = req->argc == 2 && !cr_arg_u64(req, 0, &sid) && !cr_arg_u64(req, 1, &id)
                              ? cr_session_stream(s, sid)
                              : NULL;
    if (!stream || !cr_enum_has(&cr_enum_CUlaunchAttributeID, (int64_t)id)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    CUlaunchAttributeValue v;
    memset(&v, 0, sizeof v);
    CUresult r = d->cuStreamGetAttribute
                     ? d->cuStreamGetAttribute(stream->obj, (CUstreamAttrID)id, &v)
                     : CUDA_ERROR_NOT_SUPPORTED;
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 1) == 0) {
        msgpack_pack_bin(&reply.pk, sizeof v);
        msgpack_pack_bin_body(&reply.pk, &v, sizeof v);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
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
