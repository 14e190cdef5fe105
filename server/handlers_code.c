/* Loading code: the image arrives as the request's bulk bytes. Before the backend sees it,
 * its own size fields must fit inside what was received, because the driver API reads an
 * image without being told its size. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cr_server_hand.h"
#include "dispatch.h"
#include "fatbin.h"
#include "handlers.h"
#include "log.h"
#include "session.h"

/* Images larger than this are not read for their globals (cuBLAS-sized fatbins would cost
 * seconds of decompression per load); their globals keep their values over a reset. */
#define GLOBALS_IMAGE_MAX ((size_t)64 << 20)

typedef struct {
    char *name;
    uint64_t size;
    uint8_t *init; /* NULL: zeros */
} global_t;

struct cr_code_globals_s {
    uint32_t count;
    global_t globals[];
};

static void globals_free(void *p)
{
    struct cr_code_globals_s *g = p;
    if (!g)
        return;
    for (uint32_t i = 0; i < g->count; i++) {
        free(g->globals[i].name);
        free(g->globals[i].init);
    }
    free(g);
}

/* The globals of an image and their initial bytes; NULL when it has none or cannot say. */
static struct cr_code_globals_s *read_globals(const void *image, size_t size)
{
    cr_image_t *img;
    if (size > GLOBALS_IMAGE_MAX || cr_image_parse(image, size, &img) != 0)
        return NULL;
    struct cr_code_globals_s *g = NULL;
    if (img->global_count)
        g = calloc(1, sizeof *g + img->global_count * sizeof g->globals[0]);
    for (uint32_t i = 0; g && i < img->global_count; i++) {
        const cr_global_info_t *src = &img->globals[i];
        global_t *dst = &g->globals[g->count];
        dst->name = strdup(src->name);
        dst->size = src->size;
        dst->init = src->init ? malloc(src->size ? src->size : 1) : NULL;
        if (!dst->name || (src->init && !dst->init)) {
            free(dst->name);
            free(dst->init);
            globals_free(g);
            g = NULL;
            break;
        }
        if (src->init)
            memcpy(dst->init, src->init, src->size);
        g->count++;
    }
    cr_image_free(img);
    return g;
}

/* Gives the globals of one library or module their initial contents again. */
static void reinit_globals(cr_session_t *s, cr_handle_t *h, void *arg)
{
    const cr_driver_t *d = &cr_session_backend(s)->d;
    void *stream = cr_session_stream(s, 0)->obj; /* the session's own: never behind others */
    const struct cr_code_globals_s *g = h->extra_free == globals_free ? h->extra : NULL;
    for (uint32_t i = 0; g && i < g->count; i++) {
        const global_t *gl = &g->globals[i];
        CUdeviceptr addr = 0;
        size_t size = 0;
        CUresult r = h->type == CR_HT_CUlib
                         ? d->cuLibraryGetGlobal(&addr, &size, h->obj, gl->name)
                         : d->cuModuleGetGlobal_v2(&addr, &size, h->obj, gl->name);
        if (r == CUDA_SUCCESS && size == gl->size)
            r = gl->init ? d->cuMemcpyHtoDAsync_v2(addr, gl->init, size, stream)
                         : d->cuMemsetD8Async(addr, 0, size, stream);
        if (r != CUDA_SUCCESS)
            CR_DEBUG("session %llu: cannot reset global %s: %s",
                     (unsigned long long)cr_session_id(s), gl->name, cr_cuda_error_name(r));
    }
}

void cr_code_reinit_globals(cr_session_t *s)
{
    cr_session_handles_each(s, reinit_globals, NULL);
}

/* 1 when the image's self-declared extent lies within the n received bytes. */
static int image_fits(const uint8_t *p, size_t n)
{
    size_t size;
    return cr_image_measure_bounded(p, n, &size) == 0 && size <= n;
}

static void load(cr_request_t *req, int library)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    if (req->argc != 1 || !req->bulk || !image_fits(req->bulk, req->hdr.bulk_len)) {
        cr_request_finish(req, CUDA_ERROR_INVALID_IMAGE);
        return;
    }
    /* its globals are device memory of the tenant's: charged before the driver makes them */
    struct cr_code_globals_s *globals = read_globals(req->bulk, req->hdr.bulk_len);
    uint64_t bytes = 0;
    for (uint32_t i = 0; globals && i < globals->count; i++)
        bytes += globals->globals[i].size;
    CUresult r = cr_session_charge(s, bytes);
    if (r != CUDA_SUCCESS) {
        globals_free(globals);
        cr_request_finish(req, r);
        return;
    }
    void *handle = NULL;
    uint8_t type;
    if (library) {
        type = CR_HT_CUlib;
        r = d->cuLibraryLoadData ? d->cuLibraryLoadData((CUlibrary *)&handle, req->bulk, NULL, NULL,
                                                        0, NULL, NULL, 0)
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
        cr_session_uncharge(s, bytes);
        globals_free(globals);
        cr_request_finish(req, r);
        return;
    }
    /* uncharged, and the globals freed, when the handle goes */
    if (cr_session_handle_attach(s, id, bytes, globals, globals_free) != 0) {
        cr_session_uncharge(s, bytes); /* the handle went meanwhile (cannot happen) */
        globals_free(globals);
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

/* cuLibraryGetGlobal / cuModuleGetGlobal_v2 (dptr *, bytes *, owner, name): the address is
 * the session's from now on, for copies and memsets to it. */
static CUresult after_get_global(cr_request_t *req, cr_arg_t *a, CUresult r)
{
    if (r == CUDA_SUCCESS && a[0].p && a[1].p)
        cr_session_track_code(req->session, *(CUdeviceptr *)a[0].p, *(size_t *)a[1].p,
                              req->args[2].via.u64);
    return r;
}

static const cr_generic_hooks_t get_global_hooks = {NULL, after_get_global};

void cr_srv_cuLibraryGetGlobal(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuLibraryGetGlobal, cr_call_cuLibraryGetGlobal, &get_global_hooks);
}

void cr_srv_cuModuleGetGlobal_v2(cr_request_t *req)
{
    cr_generic(req, &cr_desc_cuModuleGetGlobal_v2, cr_call_cuModuleGetGlobal_v2, &get_global_hooks);
}
