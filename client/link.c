/* The JIT linker (cuLinkCreate .. cuLinkDestroy): each call is one message to the server,
 * whose driver links (server/handlers_link.c), so errors come from the same call as
 * natively. Files are read here, on the program's host, and sent as data.
 *
 * The caller's option arrays are the driver's contract: log buffers are filled after every
 * call with what the server's linker wrote so far, their sizes and the wall time written
 * over the option values (which must outlive the link state, as the driver documents).
 * Options that point into this process's memory (host symbol tables, name lists) cannot
 * reach a linker on another host: CUDA_ERROR_NOT_SUPPORTED, said once.
 *
 * A CUlinkState is the address of this module's link_t, known by the registry below, so a
 * stale or made-up state is refused rather than followed. The linked image belongs to the
 * state until cuLinkDestroy. Threads: a state is used by one thread at a time, as the
 * driver requires; the registry has its own lock. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "context.h"
#include "idmap.h"
#include "jit_options.h"
#include "log.h"
#include "module.h"
#include "request.h"

/* The largest linked image accepted back: what any loaded image may be. */
#define MAX_IMAGE CR_IMAGE_MAX_SIZE

typedef struct {
    uint64_t id; /* the server's */
    unsigned count;
    CUjit_option *options; /* the caller's, kept as the driver keeps them */
    void **values;
    size_t cap[2]; /* the caller's info and error log sizes */
    char *log[2];  /* and buffers */
    void *image;   /* from cuLinkComplete */
    size_t image_len;
} link_t;

static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_idmap_t links = CR_IDMAP_INIT; /* link_t address -> 1 */

static link_t *link_find(CUlinkState state)
{
    uint64_t v = 0;
    pthread_mutex_lock(&links_lock);
    int found = state && cr_idmap_get(&links, (uint64_t)(uintptr_t)state, &v);
    pthread_mutex_unlock(&links_lock);
    return found ? (link_t *)state : NULL;
}

/* Says why an option is refused, the first time only. */
static CUresult refuse(int option, const char *why)
{
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        CR_WARN("JIT option %d %s: CUDA_ERROR_NOT_SUPPORTED", option, why);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* Destroys the server's link state. */
static CUresult destroy_remote(cr_client_t *cl, uint64_t id)
{
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuLinkDestroy);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, id);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    cr_reply_done(&p, &u);
    return r;
}

/* Packs [[option, value] ...], checking each; log buffers cross as their sizes only. */
static CUresult pack_options(msgpack_packer *pk, unsigned n, const CUjit_option *options,
                             void *const *values, int logs_allowed)
{
    msgpack_pack_array(pk, n);
    for (unsigned i = 0; i < n; i++) {
        cr_jit_kind_t kind = cr_jit_option_kind((uint32_t)options[i]);
        uint64_t v = (uint64_t)(uintptr_t)values[i];
        switch (kind) {
        case CR_JIT_UNKNOWN:
            return CUDA_ERROR_INVALID_VALUE;
        case CR_JIT_HOST_POINTER:
            return refuse((int)options[i], "names memory of this process, which the linker "
                                           "on the server cannot read");
        case CR_JIT_INFO_LOG:
        case CR_JIT_ERROR_LOG:
        case CR_JIT_WALL_TIME:
            if (!logs_allowed)
                return refuse((int)options[i], "is taken by cuLinkCreate only, not per input");
            v = 0;
            break;
        case CR_JIT_INFO_SIZE:
        case CR_JIT_ERROR_SIZE:
            if (!logs_allowed)
                return refuse((int)options[i], "is taken by cuLinkCreate only, not per input");
            break;
        default:
            break;
        }
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint32(pk, (uint32_t)options[i]);
        msgpack_pack_uint64(pk, v);
    }
    return CUDA_SUCCESS;
}

/* Copies a log the server sent into the caller's buffer and writes the bytes filled over
 * its size option, as the driver does. */
static void give_log(link_t *l, int which, const msgpack_object *o)
{
    if (!l->log[which] || !l->cap[which] || o->type != MSGPACK_OBJECT_STR)
        return;
    size_t n = o->via.str.size < l->cap[which] - 1 ? o->via.str.size : l->cap[which] - 1;
    if (n) /* an empty string may come without bytes */
        memcpy(l->log[which], o->via.str.ptr, n);
    l->log[which][n] = 0;
    cr_jit_kind_t size_kind = which ? CR_JIT_ERROR_SIZE : CR_JIT_INFO_SIZE;
    for (unsigned i = 0; i < l->count; i++)
        if (cr_jit_option_kind((uint32_t)l->options[i]) == size_kind)
            l->values[i] = (void *)(uintptr_t)(n ? n + 1 : 0);
}

/* Reads the logs at reply elements first and first + 1. */
static void give_logs(link_t *l, const msgpack_unpacked *u, uint32_t first)
{
    const msgpack_object_array *a = &u->data.via.array;
    for (int which = 0; which < 2 && first + (uint32_t)which < a->size; which++)
        give_log(l, which, &a->ptr[first + (uint32_t)which]);
}

CUresult cr_hand_cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options,
                                 void **optionValues, CUlinkState *stateOut)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!stateOut || (numOptions && (!options || !optionValues)) || numOptions > CR_JIT_MAX_OPTIONS)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cr_ctx_require();
    if (r != CUDA_SUCCESS)
        return r;
    link_t *l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    l->count = numOptions;
    l->options = options;
    l->values = optionValues;
    for (unsigned i = 0; i < numOptions; i++) {
        cr_jit_kind_t kind = cr_jit_option_kind((uint32_t)options[i]);
        if (kind == CR_JIT_INFO_LOG || kind == CR_JIT_ERROR_LOG)
            l->log[kind == CR_JIT_ERROR_LOG] = optionValues[i];
        else if (kind == CR_JIT_INFO_SIZE || kind == CR_JIT_ERROR_SIZE)
            l->cap[kind == CR_JIT_ERROR_SIZE] = (size_t)(uintptr_t)optionValues[i];
    }
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuLinkCreate_v2);
    if (err) {
        free(l);
        return cr_transport_error(err);
    }
    msgpack_pack_array(&m.pk, 1);
    if ((r = pack_options(&m.pk, numOptions, options, optionValues, 1)) != CUDA_SUCCESS) {
        cr_msg_cancel(&m);
        free(l);
        return r;
    }
    for (int which = 0; which < 2; which++)
        if (l->log[which] && l->cap[which])
            l->log[which][0] = 0;
    if ((r = cr_call_u64(&m, &l->id)) == CUDA_SUCCESS) {
        pthread_mutex_lock(&links_lock);
        err = cr_idmap_put(&links, (uint64_t)(uintptr_t)l, 1);
        pthread_mutex_unlock(&links_lock);
        if (err) {
            destroy_remote(cl, l->id);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (r != CUDA_SUCCESS) {
        free(l);
        return r;
    }
    *stateOut = (CUlinkState)l;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                  const char *name, unsigned int numOptions, CUjit_option *options,
                                  void **optionValues)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    link_t *l = link_find(state);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!data || !size || (numOptions && (!options || !optionValues)) ||
        numOptions > CR_JIT_MAX_OPTIONS)
        return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_JIT_INPUT_PTX) /* the text, without what follows its NUL */
        size = strnlen(data, size);
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuLinkAddData_v2);
    if (err)
        return cr_transport_error(err);
    const char *n = name ? name : "";
    msgpack_pack_array(&m.pk, 4);
    msgpack_pack_uint64(&m.pk, l->id);
    msgpack_pack_uint32(&m.pk, (uint32_t)type);
    msgpack_pack_str(&m.pk, strlen(n));
    msgpack_pack_str_body(&m.pk, n, strlen(n));
    CUresult r = pack_options(&m.pk, numOptions, options, optionValues, 0);
    if (r != CUDA_SUCCESS) {
        cr_msg_cancel(&m);
        return r;
    }
    cr_msg_bulk(&m, data, size);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    r = cr_call(&m, &p, &u);
    if (!p.failed)
        give_logs(l, &u, 1);
    cr_reply_done(&p, &u);
    return r;
}

CUresult cr_hand_cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                                  unsigned int numOptions, CUjit_option *options,
                                  void **optionValues)
{
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    if (!link_find(state))
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = CUDA_SUCCESS;
    size_t len = 0;
    void *data = cr_code_read_file(path, &len, &r);
    if (!data)
        return r;
    r = cr_hand_cuLinkAddData_v2(state, type, data, len, path, numOptions, options, optionValues);
    free(data);
    return r;
}

CUresult cr_hand_cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    link_t *l = link_find(state);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!cubinOut || !sizeOut)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuLinkComplete);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, l->id);
    cr_pending_t p = {0};
    p.sink.alloc_max = MAX_IMAGE;
    msgpack_unpacked u;
    CUresult r = cr_call(&m, &p, &u);
    if (!p.failed) {
        const msgpack_object_array *a = &u.data.via.array;
        give_logs(l, &u, 1);
        for (unsigned i = 0; i < l->count && a->size == 5; i++) {
            cr_jit_kind_t kind = cr_jit_option_kind((uint32_t)l->options[i]);
            if (kind == CR_JIT_WALL_TIME && (a->ptr[3].type == MSGPACK_OBJECT_FLOAT32 ||
                                             a->ptr[3].type == MSGPACK_OBJECT_FLOAT64)) {
                float ms = (float)a->ptr[3].via.f64;
                memcpy(&l->values[i], &ms, sizeof ms);
            } else if (kind == CR_JIT_THREADS &&
                       a->ptr[4].type == MSGPACK_OBJECT_POSITIVE_INTEGER && a->ptr[4].via.u64) {
                l->values[i] = (void *)(uintptr_t)a->ptr[4].via.u64;
            }
        }
    }
    if (r == CUDA_SUCCESS && (!p.sink.dst || p.sink.pos == 0))
        r = CUDA_ERROR_UNKNOWN; /* the image did not come */
    if (r == CUDA_SUCCESS) {
        free(l->image);
        l->image = p.sink.dst;
        l->image_len = p.sink.pos;
        p.sink.dst = NULL;
        *cubinOut = l->image;
        *sizeOut = l->image_len;
    }
    free(p.sink.dst);
    cr_reply_done(&p, &u);
    return r;
}

CUresult cr_hand_cuLinkDestroy(CUlinkState state)
{
    link_t *l = NULL;
    pthread_mutex_lock(&links_lock);
    if (state && cr_idmap_remove(&links, (uint64_t)(uintptr_t)state, NULL))
        l = (link_t *)state;
    pthread_mutex_unlock(&links_lock);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    cr_client_t *cl = cr_client(); /* without one, the server's state went with the session */
    CUresult r = cl ? destroy_remote(cl, l->id) : CUDA_SUCCESS;
    free(l->image);
    free(l);
    return r;
}
