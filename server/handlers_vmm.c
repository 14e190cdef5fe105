/* Hand-written handlers of the virtual-memory API (cuMemAddressReserve, cuMemCreate,
 * cuMemMap, ...), around the generic marshaller: a client reaches only address ranges it
 * reserved and physical memory it created, by ids of its session (virtual_memory.c);
 * physical memory is charged to its tenant before the device sees the request and given
 * back once it is really gone; mapped ranges are its device memory like its allocations.
 * CUmemAllocationProp carries one pointer (a Windows handle's metadata): it is cleared,
 * never followed. Physical memory may be made exportable as a file descriptor, as
 * PyTorch's expandable segments always ask, but no handle is exported (the export and
 * import calls are not remoted), so none leaves the session. A
 * client sees one device, 0: the locations it names are the server's device, and only
 * device memory is remoted. */
#include "cr_server_hand.h"
#include "dispatch.h"
#include "handlers.h"
#include "memops.h"
#include "session.h"

/* The one pointer inside a CUmemAllocationProp: cleared, whatever the client sent. */
static void clear_pointer(void *prop)
{
    if (prop)
        ((CUmemAllocationProp *)prop)->win32HandleMetaData = NULL;
}

/* The client's device 0 as the server's device; other locations are not remoted. */
static CUresult to_server_location(cr_request_t *req, CUmemLocation *loc)
{
    if (!loc)
        return CUDA_SUCCESS;
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (loc->id != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    loc->id = (int)cr_session_backend(req->session)->device;
    return CUDA_SUCCESS;
}

/* A CUmemAllocationProp from the client: its pointer cleared, its location the server's. */
static CUresult from_client_prop(cr_request_t *req, void *p)
{
    clear_pointer(p);
    return p ? to_server_location(req, &((CUmemAllocationProp *)p)->location) : CUDA_SUCCESS;
}

/* (granularity *, prop, option) */
static CUresult before_granularity(cr_request_t *req, cr_arg_t *a)
{
    return from_client_prop(req, a[1].p);
}

static const cr_generic_hooks_t granularity_hooks = {before_granularity, NULL};

void cr_srv_cuMemGetAllocationGranularity(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemGetAllocationGranularity, cr_call_cuMemGetAllocationGranularity,
               &granularity_hooks);
}

/* (ptr *, size, alignment, addr, flags): the range becomes the session's */
static CUresult after_reserve(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    if (r != CUDA_SUCCESS || !a[0].p)
        return r;
    CUdeviceptr p = *(CUdeviceptr *)a[0].p;
    if (cr_session_vmm_reserve(req->session, p, a[1].u) != 0) {
        cr_session_backend(req->session)->d.cuMemAddressFree(p, a[1].u);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return r;
}

static const cr_generic_hooks_t reserve_hooks = {NULL, after_reserve};

void cr_srv_cuMemAddressReserve(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemAddressReserve, cr_call_cuMemAddressReserve, &reserve_hooks);
}

/* (ptr, size): one of the session's reservations, whole */
static CUresult before_address_free(cr_request_t *req, cr_arg_t *a)
{
    return cr_session_vmm_is_reservation(req->session, a[0].u, a[1].u) ? CUDA_SUCCESS
                                                                       : CUDA_ERROR_INVALID_VALUE;
}

static CUresult after_address_free(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    if (r == CUDA_SUCCESS)
        cr_session_vmm_unreserve(req->session, a[0].u);
    return r;
}

static const cr_generic_hooks_t address_free_hooks = {before_address_free, after_address_free};

void cr_srv_cuMemAddressFree(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemAddressFree, cr_call_cuMemAddressFree, &address_free_hooks);
}

/* (handle *, size, prop, flags): charged first; the client gets an id of its session */
static CUresult before_create(cr_request_t *req, cr_arg_t *a)
{
    const CUmemAllocationProp *prop = a[2].p;
    CUresult r = from_client_prop(req, a[2].p);
    if (r != CUDA_SUCCESS)
        return r;
    if (prop && prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
        prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED; /* Windows' handles, fabric handles across machines */
    return cr_session_charge(req->session, a[1].u);
}

static CUresult after_create(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    if (r != CUDA_SUCCESS || !a[0].p) {
        cr_session_uncharge(req->session, a[1].u);
        return r;
    }
    CUmemGenericAllocationHandle *h = a[0].p;
    uint64_t id = cr_session_vmm_add_physical(req->session, *h, a[1].u);
    if (!id) {
        cr_session_backend(req->session)->d.cuMemRelease(*h);
        cr_session_uncharge(req->session, a[1].u);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *h = id;
    return r;
}

static const cr_generic_hooks_t create_hooks = {before_create, after_create};

void cr_srv_cuMemCreate(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemCreate, cr_call_cuMemCreate, &create_hooks);
}

/* The backend's handle in place of the session's id in a[i]; CUDA_ERROR_INVALID_VALUE for
 * an id not its own. The id is kept in *id. */
static CUresult to_backend(cr_request_t *req, cr_arg_t *a, int i, uint64_t *id)
{
    uint64_t backend;
    *id = a[i].u;
    if (!cr_session_vmm_physical(req->session, a[i].u, &backend, NULL))
        return CUDA_ERROR_INVALID_VALUE;
    a[i].u = backend;
    return CUDA_SUCCESS;
}

/* (handle) */
static CUresult before_release(cr_request_t *req, cr_arg_t *a)
{
    uint64_t id;
    CUresult r = to_backend(req, a, 0, &id);
    req->hook_arg = id;
    return r;
}

static CUresult after_release(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    if (r == CUDA_SUCCESS)
        cr_session_vmm_release(req->session, req->hook_arg);
    return r;
}

static const cr_generic_hooks_t release_hooks = {before_release, after_release};

void cr_srv_cuMemRelease(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemRelease, cr_call_cuMemRelease, &release_hooks);
}

/* (ptr, size, offset, handle, flags): inside one of the session's reservations, memory of
 * its own */
static CUresult before_map(cr_request_t *req, cr_arg_t *a)
{
    if (!cr_session_vmm_reserved(req->session, a[0].u, a[1].u))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t id;
    CUresult r = to_backend(req, a, 3, &id);
    req->hook_arg = id;
    return r;
}

static CUresult after_map(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    if (r == CUDA_SUCCESS && cr_session_vmm_map(req->session, a[0].u, a[1].u, req->hook_arg)) {
        cr_session_backend(req->session)->d.cuMemUnmap(a[0].u, a[1].u);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return r;
}

static const cr_generic_hooks_t map_hooks = {before_map, after_map};

void cr_srv_cuMemMap(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemMap, cr_call_cuMemMap, &map_hooks);
}

/* (ptr, size): whole mappings of the session's */
static CUresult before_unmap(cr_request_t *req, cr_arg_t *a)
{
    return cr_session_vmm_unmappable(req->session, a[0].u, a[1].u) &&
                   !cr_memops_reading(req->session, a[0].u, a[1].u) /* a stream waits on it */
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
}

static CUresult after_unmap(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    if (r == CUDA_SUCCESS)
        cr_session_vmm_unmap(req->session, a[0].u, a[1].u);
    return r;
}

static const cr_generic_hooks_t unmap_hooks = {before_unmap, after_unmap};

void cr_srv_cuMemUnmap(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemUnmap, cr_call_cuMemUnmap, &unmap_hooks);
}

/* (ptr, size, desc[count], count): mapped memory of the session's, for the device */
static CUresult before_set_access(cr_request_t *req, cr_arg_t *a)
{
    CUmemAccessDesc *desc = a[2].p;
    for (uint64_t i = 0; desc && i < a[3].u; i++) {
        CUresult r = to_server_location(req, &desc[i].location);
        if (r != CUDA_SUCCESS)
            return r; /* host access to device memory is not remoted */
    }
    return cr_session_vmm_mapped(req->session, a[0].u, a[1].u) ? CUDA_SUCCESS
                                                               : CUDA_ERROR_INVALID_VALUE;
}

static const cr_generic_hooks_t set_access_hooks = {before_set_access, NULL};

void cr_srv_cuMemSetAccess(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemSetAccess, cr_call_cuMemSetAccess, &set_access_hooks);
}

/* (flags *, location, ptr) */
static CUresult before_get_access(cr_request_t *req, cr_arg_t *a)
{
    CUresult r = to_server_location(req, a[1].p);
    if (r != CUDA_SUCCESS)
        return r;
    return cr_session_vmm_mapped(req->session, a[2].u, 1) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static const cr_generic_hooks_t get_access_hooks = {before_get_access, NULL};

void cr_srv_cuMemGetAccess(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemGetAccess, cr_call_cuMemGetAccess, &get_access_hooks);
}

/* (prop *, handle) */
static CUresult before_properties(cr_request_t *req, cr_arg_t *a)
{
    uint64_t id;
    return to_backend(req, a, 1, &id);
}

static CUresult after_properties(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    CUmemAllocationProp *prop = a[0].p;
    clear_pointer(prop);
    if (r == CUDA_SUCCESS && prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        prop->location.id = 0; /* the client's name for the server's device */
    return r;
}

static const cr_generic_hooks_t properties_hooks = {before_properties, after_properties};

void cr_srv_cuMemGetAllocationPropertiesFromHandle(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuMemGetAllocationPropertiesFromHandle,
               cr_call_cuMemGetAllocationPropertiesFromHandle, &properties_hooks);
}

/* [address] -> handle: an address of one of the session's mappings; the driver's handle it
 * gives back becomes the session's id of that memory, which one more cuMemRelease then
 * lets go (the id's count goes up with the driver's). */
void cr_srv_cuMemRetainAllocationHandle(cr_request_t *req)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    uint64_t addr, id = 0;
    CUmemGenericAllocationHandle h;
    CUresult r = req->argc != 1 || cr_arg_u64(req, 0, &addr) || !cr_session_vmm_mapped(s, addr, 1)
                     ? CUDA_ERROR_INVALID_VALUE
                 : !d->cuMemRetainAllocationHandle
                     ? CUDA_ERROR_NOT_SUPPORTED
                     : d->cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)addr);
    if (r == CUDA_SUCCESS && !(id = cr_session_vmm_retain(s, addr))) {
        d->cuMemRelease(h); /* unmapped meanwhile: give the driver's reference back */
        r = CUDA_ERROR_INVALID_VALUE;
    }
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 1) == 0) {
        msgpack_pack_uint64(&reply.pk, id);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}
