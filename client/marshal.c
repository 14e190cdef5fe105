/* The generic marshaller (marshal.h): packs a call from its descriptor (common/api.h),
 * sends it, and for calls that wait, writes the reply's outputs where the caller asked.
 * Packing and unpacking touch no connection, only the handle table (handles.c).
 *
 * Threads: any application thread; a call that waits waits for its reply (request.c). */
#include "marshal.h"

#include <string.h>

#include "client.h"
#include "error.h"
#include "handles.h"
#include "log.h"
#include "request.h"

static uint64_t count_of(const cr_fn_desc_t *d, const cr_arg_t *a, int idx)
{
    const cr_param_desc_t *c = &d->params[idx];
    if (c->kind == CR_P_VAL)
        return (c->flags & CR_PF_SIGNED) && a[idx].i < 0 ? UINT64_MAX : a[idx].u;
    return UINT64_MAX; /* a count that is not a value: refuse */
}

static uint64_t scalar_value(const cr_param_desc_t *pd, const cr_arg_t *arg)
{
    /* slots hold the value widened by the stub; narrow to the parameter's own width */
    uint64_t v = arg->u;
    if (pd->size < 8) {
        uint64_t mask = (1ULL << (8 * pd->size)) - 1;
        v &= mask;
        if ((pd->flags & CR_PF_SIGNED) && (v >> (8 * pd->size - 1)) & 1)
            v |= ~mask;
    }
    return v;
}

/* Packs one parameter. Returns a CUresult for arguments the server must not see. */
static CUresult pack_param(msgpack_packer *pk, const cr_fn_desc_t *d, cr_arg_t *a, int i,
                           const uint64_t *stream_ids)
{
    const cr_param_desc_t *pd = &d->params[i];
    cr_arg_t *arg = &a[i];
    switch (pd->kind) {
    case CR_P_VAL:
        if (pd->flags & CR_PF_SIGNED)
            msgpack_pack_int64(pk, (int64_t)scalar_value(pd, arg));
        else
            msgpack_pack_uint64(pk, scalar_value(pd, arg));
        return CUDA_SUCCESS;
    case CR_P_DPTR:
        msgpack_pack_uint64(pk, arg->u);
        return CUDA_SUCCESS;
    case CR_P_HANDLE:
        msgpack_pack_uint64(pk, cr_handles_resolve(arg->u));
        return CUDA_SUCCESS;
    case CR_P_FLOAT:
        if (pd->size == 8)
            msgpack_pack_double(pk, arg->d);
        else
            msgpack_pack_float(pk, arg->f);
        return CUDA_SUCCESS;
    case CR_P_STREAM:
        msgpack_pack_uint64(pk, stream_ids[i]);
        return CUDA_SUCCESS;
    case CR_P_OUT_HANDLE:
        if (d->flags & CR_FN_ASYNC) { /* created without waiting: we choose its id */
            if (!arg->p)
                return CUDA_ERROR_INVALID_VALUE;
            uint64_t id = cr_handles_new_id();
            *(void **)arg->p = (void *)(uintptr_t)id;
            msgpack_pack_uint64(pk, id);
            return CUDA_SUCCESS;
        }
        /* fall through */
    case CR_P_OUT:
        if (arg->p)
            msgpack_pack_true(pk);
        else
            msgpack_pack_nil(pk);
        return CUDA_SUCCESS;
    case CR_P_IN:
    case CR_P_INOUT:
        if (!arg->p) {
            msgpack_pack_nil(pk);
            return CUDA_SUCCESS;
        }
        msgpack_pack_bin(pk, pd->size);
        msgpack_pack_bin_body(pk, arg->p, pd->size);
        return CUDA_SUCCESS;
    case CR_P_IN_ARRAY:
    case CR_P_OUT_ARRAY:
    case CR_P_OUT_STR: {
        uint64_t n = count_of(d, a, pd->count_param);
        if (!arg->p) {
            msgpack_pack_nil(pk);
            return CUDA_SUCCESS;
        }
        if (n > CR_MAX_ARRAY_BYTES / (pd->size ? pd->size : 1))
            return CUDA_ERROR_INVALID_VALUE;
        if (pd->kind == CR_P_IN_ARRAY) {
            msgpack_pack_bin(pk, (size_t)n * pd->size);
            msgpack_pack_bin_body(pk, arg->p, (size_t)n * pd->size);
        } else {
            msgpack_pack_uint64(pk, n); /* capacity */
        }
        return CUDA_SUCCESS;
    }
    case CR_P_STR: {
        if (!arg->p) {
            msgpack_pack_nil(pk);
            return CUDA_SUCCESS;
        }
        size_t n = strnlen(arg->p, CR_MAX_ARRAY_BYTES);
        if (n == CR_MAX_ARRAY_BYTES)
            return CUDA_ERROR_INVALID_VALUE;
        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, arg->p, n);
        return CUDA_SUCCESS;
    }
    case CR_P_IGNORED:
        msgpack_pack_nil(pk);
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static int is_int(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER || o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER;
}

/* Copies bytes msgpack decoded, whose pointer is NULL when there are none. */
static void copy_wire(void *dst, const void *src, size_t n)
{
    if (n)
        memcpy(dst, src, n);
}

/* Writes one output of the reply to where the caller's pointer says. */
static int unpack_output(const cr_fn_desc_t *d, cr_arg_t *a, int i, const msgpack_object *o)
{
    const cr_param_desc_t *pd = &d->params[i];
    void *dst = a[i].p;
    if (!dst || o->type == MSGPACK_OBJECT_NIL)
        return 0;
    switch (pd->kind) {
    case CR_P_OUT:
        if (pd->flags & CR_PF_BYTES) {
            if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != pd->size)
                return CR_EPROTO;
            memcpy(dst, o->via.bin.ptr, pd->size);
        } else if (pd->flags & CR_PF_FLOAT) {
            if (o->type != MSGPACK_OBJECT_FLOAT32 && o->type != MSGPACK_OBJECT_FLOAT64)
                return CR_EPROTO;
            if (pd->size == 8)
                *(double *)dst = o->via.f64;
            else
                *(float *)dst = (float)o->via.f64;
        } else {
            if (!is_int(o) || pd->size > 8)
                return CR_EPROTO;
            uint64_t v = o->via.u64;   /* two's complement either way */
            memcpy(dst, &v, pd->size); /* little-endian: the low bytes */
        }
        return 0;
    case CR_P_OUT_HANDLE:
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return CR_EPROTO;
        *(void **)dst = (void *)(uintptr_t)o->via.u64;
        cr_handles_add(o->via.u64, pd->handle_type);
        return 0;
    case CR_P_INOUT:
        if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != pd->size)
            return CR_EPROTO;
        memcpy(dst, o->via.bin.ptr, pd->size);
        return 0;
    case CR_P_OUT_ARRAY: {
        uint64_t cap = count_of(d, a, pd->count_param) * pd->size;
        if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size > cap)
            return CR_EPROTO;
        copy_wire(dst, o->via.bin.ptr, o->via.bin.size);
        return 0;
    }
    case CR_P_OUT_STR: {
        uint64_t cap = count_of(d, a, pd->count_param);
        if (o->type != MSGPACK_OBJECT_STR || cap == 0 || o->via.str.size >= cap)
            return CR_EPROTO;
        copy_wire(dst, o->via.str.ptr, o->via.str.size);
        ((char *)dst)[o->via.str.size] = '\0';
        return 0;
    }
    }
    return 0;
}

static int is_output(uint8_t kind)
{
    return kind == CR_P_OUT || kind == CR_P_OUT_HANDLE || kind == CR_P_INOUT ||
           kind == CR_P_OUT_ARRAY || kind == CR_P_OUT_STR;
}

CUresult cr_marshal_pack_args(msgpack_packer *pk, const cr_fn_desc_t *d, cr_arg_t *a,
                              const uint64_t *stream_ids)
{
    msgpack_pack_array(pk, d->param_count);
    for (int i = 0; i < d->param_count; i++) {
        CUresult r = pack_param(pk, d, a, i, stream_ids);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

int cr_marshal_unpack_reply(const cr_fn_desc_t *d, cr_arg_t *a, const msgpack_object_array *reply)
{
    uint32_t next = 1; /* after the CUresult */
    for (int i = 0; i < d->param_count; i++) {
        if (!is_output(d->params[i].kind))
            continue;
        if (next >= reply->size || unpack_output(d, a, i, &reply->ptr[next]) != 0)
            return CR_EPROTO;
        next++;
    }
    return 0;
}

CUresult cr_marshal_call(const cr_fn_desc_t *d, cr_arg_t *a, const uint64_t *stream_ids)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;

    /* an asynchronous call cannot report a bad handle later without confusing the caller */
    if (d->flags & CR_FN_ASYNC)
        for (int i = 0; i < d->param_count; i++)
            if (d->params[i].kind == CR_P_HANDLE &&
                !cr_handles_valid(a[i].u, d->params[i].handle_type))
                return CUDA_ERROR_INVALID_HANDLE;

    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, d->opcode);
    if (err)
        return cr_transport_error(err);
    CUresult r = cr_marshal_pack_args(&m.pk, d, a, stream_ids);
    if (r != CUDA_SUCCESS) {
        cr_msg_cancel(&m);
        return r;
    }
    if (d->flags & CR_FN_ASYNC) {
        r = cr_transport_error(cr_msg_send(&m));
        for (int i = 0; i < d->param_count && r == CUDA_SUCCESS; i++)
            if (d->params[i].kind == CR_P_OUT_HANDLE) /* the id we chose */
                cr_handles_add((uint64_t)(uintptr_t) * (void **)a[i].p, d->params[i].handle_type);
        return r;
    }

    cr_pending_t p = {0};
    msgpack_unpacked u;
    r = cr_call(&m, &p, &u);
    if (r == CUDA_SUCCESS) {
        for (int i = 0; i < d->param_count; i++) /* handles the call destroyed */
            if (d->params[i].kind == CR_P_HANDLE && (d->params[i].flags & CR_PF_DESTROY))
                cr_handles_remove(a[i].u);
        if (cr_marshal_unpack_reply(d, a, &u.data.via.array) != 0) {
            CR_ERROR("malformed reply to %s", d->name);
            r = CUDA_ERROR_UNKNOWN;
        }
    }
    cr_reply_done(&p, &u);
    return r;
}
