/* The JIT linker: cuLinkCreate_v2, cuLinkAddData_v2, cuLinkComplete and cuLinkDestroy, run
 * by the backend's driver on the server for the client (client/link.c).
 *
 * Messages: common/protocol.h.
 * Options cross as numbers only (common/jit_options.h): the server gives the driver log
 * buffers of its own, of the sizes the client asked for (at most CR_JIT_MAX_LOG), sends
 * back what the driver wrote in them, and refuses options that point into the client's
 * memory. The link state is a handle of the session, destroyed with it. Files never reach
 * the server's file system: the client reads them (cuLinkAddFile) and sends their bytes.
 *
 * Threads: the session's executor. Linking compiles: it takes the executor for as long as
 * the driver needs, which holds up this session only. */
#include <stdlib.h>
#include <string.h>

#include "cr_server_hand.h"
#include "fatbin.h"
#include "handlers.h"
#include "jit_options.h"
#include "log.h"
#include "session.h"

#define MAX_NAME 4096                       /* bytes of an input's name */
#define MAX_INPUT_BYTES ((uint64_t)1 << 30) /* added to one link state */

typedef struct {
    const cr_driver_t *d;
    CUlinkState state;
    CUjit_option options[CR_JIT_MAX_OPTIONS];
    void *values[CR_JIT_MAX_OPTIONS]; /* the driver writes sizes and the wall time here */
    unsigned count;
    char *log[2];         /* info, error: the server's buffers */
    uint32_t cap[2];      /* their sizes (the driver writes what it filled over the options') */
    uint64_t input_bytes; /* added so far */
    int wall_at, threads_at;
} link_t;

static void link_free(void *p)
{
    link_t *l = p;
    if (!l)
        return;
    if (l->state)
        l->d->cuLinkDestroy(l->state);
    free(l->log[0]);
    free(l->log[1]);
    free(l);
}

/* Reads [[option, value] ...] into options/values. Log buffers are the server's, allocated
 * into logs[] (info, error) when logs is not NULL, else refused. */
static CUresult read_options(const msgpack_object *o, CUjit_option *options, void **values,
                             unsigned *count, char **logs, uint32_t *cap, int *wall_at,
                             int *threads_at)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > CR_JIT_MAX_OPTIONS)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t size[2] = {0, 0};
    unsigned n = o->via.array.size;
    for (unsigned i = 0; i < n; i++) {
        const msgpack_object *pair = &o->via.array.ptr[i];
        uint64_t opt, v;
        if (pair->type != MSGPACK_OBJECT_ARRAY || pair->via.array.size != 2 ||
            cr_obj_u64(&pair->via.array.ptr[0], &opt) || cr_obj_u64(&pair->via.array.ptr[1], &v))
            return CUDA_ERROR_INVALID_VALUE;
        cr_jit_kind_t kind = cr_jit_option_kind(opt > UINT32_MAX ? UINT32_MAX : (uint32_t)opt);
        options[i] = (CUjit_option)opt;
        values[i] = NULL;
        switch (kind) {
        case CR_JIT_UNKNOWN:
            return CUDA_ERROR_INVALID_VALUE;
        case CR_JIT_HOST_POINTER:
            return CUDA_ERROR_NOT_SUPPORTED;
        case CR_JIT_SCALAR:
        case CR_JIT_THREADS:
            if (v > UINT32_MAX)
                return CUDA_ERROR_INVALID_VALUE;
            values[i] = (void *)(uintptr_t)v;
            if (kind == CR_JIT_THREADS && threads_at)
                *threads_at = (int)i;
            break;
        case CR_JIT_WALL_TIME:
            if (wall_at)
                *wall_at = (int)i;
            break;
        case CR_JIT_INFO_SIZE:
        case CR_JIT_ERROR_SIZE: {
            int which = kind == CR_JIT_ERROR_SIZE;
            if (!logs)
                return CUDA_ERROR_NOT_SUPPORTED;
            size[which] = v < CR_JIT_MAX_LOG ? v : CR_JIT_MAX_LOG;
            values[i] = (void *)(uintptr_t)size[which];
            cap[which] = (uint32_t)size[which];
            break;
        }
        case CR_JIT_INFO_LOG:
        case CR_JIT_ERROR_LOG:
            if (!logs)
                return CUDA_ERROR_NOT_SUPPORTED;
            break; /* the buffer is set below, once its size is known */
        }
    }
    /* every log option names the one buffer of its kind and its one size, the last given:
     * a size option repeated must not promise the driver more room than was allocated */
    for (unsigned i = 0; logs && i < n; i++) {
        cr_jit_kind_t kind = cr_jit_option_kind((uint32_t)options[i]);
        int which = kind == CR_JIT_ERROR_LOG || kind == CR_JIT_ERROR_SIZE;
        if (kind == CR_JIT_INFO_SIZE || kind == CR_JIT_ERROR_SIZE) {
            values[i] = (void *)(uintptr_t)size[which];
        } else if (kind == CR_JIT_INFO_LOG || kind == CR_JIT_ERROR_LOG) {
            if (size[which] && !logs[which] && !(logs[which] = calloc(1, size[which])))
                return CUDA_ERROR_OUT_OF_MEMORY;
            values[i] = logs[which];
        }
    }
    *count = n;
    return CUDA_SUCCESS;
}

static link_t *link_of(cr_request_t *req)
{
    uint64_t id;
    if (req->argc < 1 || cr_arg_u64(req, 0, &id))
        return NULL;
    return cr_session_handle(req->session, CR_HT_CUlinkState, id);
}

void cr_srv_cuLinkCreate_v2(cr_request_t *req)
{
    cr_session_t *s = req->session;
    const cr_driver_t *d = &cr_session_backend(s)->d;
    link_t *l = calloc(1, sizeof *l);
    CUresult r = l ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    if (l) {
        l->d = d;
        l->wall_at = l->threads_at = -1;
    }
    if (r == CUDA_SUCCESS && req->argc != 1)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = read_options(&req->args[0], l->options, l->values, &l->count, l->log, l->cap,
                         &l->wall_at, &l->threads_at);
    if (r == CUDA_SUCCESS &&
        (!d->cuLinkCreate_v2 || !d->cuLinkAddData_v2 || !d->cuLinkComplete || !d->cuLinkDestroy))
        r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS)
        r = d->cuLinkCreate_v2(l->count, l->options, l->values, &l->state);
    uint64_t id = 0;
    if (r == CUDA_SUCCESS && cr_session_add_handle(s, CR_HT_CUlinkState, l, 0, &id) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS && cr_session_handle_attach(s, id, 0, l, link_free) != 0) {
        cr_session_remove_handle(s, id);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r != CUDA_SUCCESS)
        link_free(l);
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 1) == 0) {
        msgpack_pack_uint64(&reply.pk, r == CUDA_SUCCESS ? id : 0);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

static void pack_log(msgpack_packer *pk, const link_t *l, int which)
{
    const char *log = l && l->cap[which] ? l->log[which] : NULL;
    size_t n = log ? strnlen(log, l->cap[which]) : 0;
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, log ? log : "", n);
}

void cr_srv_cuLinkAddData_v2(cr_request_t *req)
{
    link_t *l = link_of(req);
    uint64_t type;
    CUjit_option options[CR_JIT_MAX_OPTIONS];
    void *values[CR_JIT_MAX_OPTIONS];
    unsigned count = 0;
    CUresult r = l ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    const msgpack_object *name = req->argc == 4 ? &req->args[2] : NULL;
    if (r == CUDA_SUCCESS && (req->argc != 4 || cr_arg_u64(req, 1, &type) ||
                              type >= CU_JIT_NUM_INPUT_TYPES || name->type != MSGPACK_OBJECT_STR ||
                              name->via.str.size > MAX_NAME || !req->bulk || !req->hdr.bulk_len))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && req->hdr.bulk_len > MAX_INPUT_BYTES - l->input_bytes)
        r = CUDA_ERROR_OUT_OF_MEMORY; /* the driver keeps every input until the link ends */
    if (r == CUDA_SUCCESS)
        r = read_options(&req->args[3], options, values, &count, NULL, NULL, NULL, NULL);
    /* images the driver reads by their own headers must fit inside what came */
    size_t need;
    if (r == CUDA_SUCCESS && (type == CU_JIT_INPUT_FATBINARY || type == CU_JIT_INPUT_CUBIN) &&
        (cr_image_measure_bounded(req->bulk, req->hdr.bulk_len, &need) != 0 ||
         need > req->hdr.bulk_len))
        r = CUDA_ERROR_INVALID_IMAGE;
    char *data = NULL, *input_name = NULL;
    if (r == CUDA_SUCCESS) { /* a NUL after each: PTX and the name are read as C strings */
        data = malloc(req->hdr.bulk_len + 1);
        input_name = malloc(name->via.str.size + 1);
        if (!data || !input_name)
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        memcpy(data, req->bulk, req->hdr.bulk_len);
        data[req->hdr.bulk_len] = 0;
        if (name->via.str.size) /* an empty name may come without bytes */
            memcpy(input_name, name->via.str.ptr, name->via.str.size);
        input_name[name->via.str.size] = 0;
        r = l->d->cuLinkAddData_v2(l->state, (CUjitInputType)type, data,
                                   req->hdr.bulk_len + (type == CU_JIT_INPUT_PTX), input_name,
                                   count, count ? options : NULL, count ? values : NULL);
        if (r == CUDA_SUCCESS)
            l->input_bytes += req->hdr.bulk_len;
    }
    free(data);
    free(input_name);
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 2) == 0) {
        pack_log(&reply.pk, l, 0);
        pack_log(&reply.pk, l, 1);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

void cr_srv_cuLinkComplete(cr_request_t *req)
{
    link_t *l = req->argc == 1 ? link_of(req) : NULL;
    CUresult r = l ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    void *image = NULL;
    size_t size = 0;
    if (r == CUDA_SUCCESS)
        r = l->d->cuLinkComplete(l->state, &image, &size);
    void *copy = NULL; /* the driver's image lives as long as the state: the reply owns a copy */
    if (r == CUDA_SUCCESS && (!image || !size))
        r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS && !(copy = malloc(size)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (copy)
        memcpy(copy, image, size);
    float wall = 0;
    uint64_t threads = 0;
    if (l && l->wall_at >= 0)
        memcpy(&wall, &l->values[l->wall_at], sizeof wall);
    if (l && l->threads_at >= 0)
        threads = (uint32_t)(uintptr_t)l->values[l->threads_at];
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 4) == 0) {
        pack_log(&reply.pk, l, 0);
        pack_log(&reply.pk, l, 1);
        msgpack_pack_float(&reply.pk, wall);
        msgpack_pack_uint64(&reply.pk, threads);
        if (copy)
            cr_reply_bulk(&reply, copy, size, free, copy);
        cr_reply_send(req, &reply, 0);
    } else {
        free(copy);
    }
    cr_request_free(req);
}

void cr_srv_cuLinkDestroy(cr_request_t *req)
{
    uint64_t id;
    CUresult r = CUDA_ERROR_INVALID_HANDLE;
    if (req->argc == 1 && cr_arg_u64(req, 0, &id) == 0 &&
        cr_session_handle(req->session, CR_HT_CUlinkState, id)) {
        cr_session_remove_handle(req->session, id);
        r = CUDA_SUCCESS;
    }
    cr_request_finish(req, r);
}
