/* Loading code: the image arrives as the request's bulk bytes. Before the backend sees it,
 * its own size fields must fit inside what was received, because the driver API reads an
 * image without being told its size. */
#include <string.h>

#include "cr_server_hand.h"
#include "dispatch.h"
#include "fatbin.h"

/* 1 when the image's self-declared extent lies within the n received bytes. */
static int image_fits(const uint8_t *p, size_t n)
{
    size_t size;
    return cr_image_measure_bounded(p, n, &size) == 0 && size <= n;
}

static void load(cr_request_t *req, int library)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &s->backend->d;
    if (req->argc != 1 || !req->bulk || !image_fits(req->bulk, req->hdr.bulk_len)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_IMAGE);
        return;
    }
    void *handle = NULL;
    uint8_t type;
    CUresult r;
    if (library) {
        type = CR_HT_CUlib;
        r = d->cuLibraryLoadData ? d->cuLibraryLoadData((CUlibrary *)&handle, req->bulk, NULL,
                                                        NULL, 0, NULL, NULL, 0)
                                 : CUDA_ERROR_NOT_SUPPORTED;
    } else {
        type = CR_HT_CUmod;
        r = d->cuModuleLoadData ? d->cuModuleLoadData((CUmodule *)&handle, req->bulk)
                                : CUDA_ERROR_NOT_SUPPORTED;
    }
    uint64_t id = 0;
    if (r == CUDA_SUCCESS && cr_session_add_handle(s, type, handle, 1, &id) != 0) {
        cr_handle_destroy(d, type, handle);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r != CUDA_SUCCESS) {
        cr_request_finish(req, r);
        return;
    }
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 1) == 0) {
        msgpack_pack_uint64(&reply.pk, id);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

void cr_srv_cuLibraryLoadData(cr_request_t *req)
{
    load(req, 1);
}

void cr_srv_cuModuleLoadData(cr_request_t *req)
{
    load(req, 0);
}
