/* The server's generic marshaller: unpacks a call from its descriptor (common/api.h),
 * with every count, length, handle and device address checked, calls the backend, and
 * packs the outputs. Calls that may wait on the device finish on a waiter thread.
 * Unpacking and packing (marshal.h) ask the session only through cr_generic_session_t, so
 * that they run without one; cr_generic gives them the request's session. */
#include "marshal.h"
#include "dispatch.h"
#include "session.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "mpcheck.h"
#include "protocol.h"

/* Memory for one call's pointer arguments, freed together (cr_generic_args_free). */
static void *scratch_alloc(cr_generic_args_t *u, size_t n)
{
    if (u->block_count == CR_MAX_PARAMS)
        return NULL;
    void *p = calloc(1, n ? n : 1);
    if (p)
        u->blocks[u->block_count++] = p;
    return p;
}

void cr_generic_args_free(cr_generic_args_t *u)
{
    for (int i = 0; i < u->block_count; i++)
        free(u->blocks[i]);
    u->block_count = 0;
}

typedef struct {
    cr_request_t *req;
    const cr_fn_desc_t *desc;
    cr_call_fn call;
    const cr_generic_hooks_t *hooks;
} generic_call_t;

static int is_nil(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_NIL;
}

/* Copies bytes msgpack decoded, whose pointer is NULL when there are none. */
static void copy_wire(void *dst, const void *src, size_t n)
{
    if (n)
        memcpy(dst, src, n);
}

/* An unsigned integer on the wire (cr_obj_u64's rule, kept here so that unpacking needs
 * nothing of request.c). */
static int wire_u64(const msgpack_object *o, uint64_t *v)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return -1;
    *v = o->via.u64;
    return 0;
}

/* Whether a VAL of an enum type is one of its values (an enum is 4 bytes, signed). */
static int enum_value_known(const cr_param_desc_t *pd, cr_arg_t v)
{
    int64_t x = pd->size == 4 ? (int64_t)(int32_t)v.u : v.i;
    if (pd->size == 4 && v.u > UINT32_MAX && v.i != x) /* not a 32-bit value at all */
        return 0;
    return cr_enum_has(pd->values, x);
}

/* First pass: values, handles and streams. Returns a CUresult for the client, or -1 for a
 * malformed request. */
static int unpack_values(const cr_fn_desc_t *d, const msgpack_object *args,
                         const cr_generic_session_t *s, cr_arg_t *a)
{
    for (int i = 0; i < d->param_count; i++) {
        const cr_param_desc_t *pd = &d->params[i];
        const msgpack_object *o = &args[i];
        switch (pd->kind) {
        case CR_P_VAL:
            if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                a[i].u = o->via.u64;
            else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && (pd->flags & CR_PF_SIGNED))
                a[i].i = o->via.i64;
            else
                return -1;
            if (pd->values && !enum_value_known(pd, a[i]))
                return CUDA_ERROR_INVALID_VALUE;
            break;
        case CR_P_FLOAT:
            if (o->type != MSGPACK_OBJECT_FLOAT32 && o->type != MSGPACK_OBJECT_FLOAT64)
                return -1;
            if (pd->size == 8)
                a[i].d = o->via.f64;
            else
                a[i].f = (float)o->via.f64;
            break;
        case CR_P_DPTR:
            if (wire_u64(o, &a[i].u))
                return -1;
            break;
        case CR_P_HANDLE: {
            uint64_t id;
            if (wire_u64(o, &id))
                return -1;
            a[i].p = id ? s->handle(s->ctx, pd->handle_type, id) : NULL;
            if (id && !a[i].p)
                return CUDA_ERROR_INVALID_HANDLE;
            break;
        }
        case CR_P_STREAM: {
            uint64_t id;
            if (wire_u64(o, &id))
                return -1;
            if (s->stream(s->ctx, id, (d->flags & CR_FN_ASYNC) != 0, &a[i].p) != 0)
                return CUDA_ERROR_INVALID_HANDLE;
            break;
        }
        case CR_P_IGNORED:
            a[i].u = 0;
            break;
        default:
            break; /* pointers: second pass */
        }
    }
    return CUDA_SUCCESS;
}

static uint64_t count_value(const cr_fn_desc_t *d, const cr_arg_t *a, int idx)
{
    if (idx < 0 || idx >= d->param_count || d->params[idx].kind != CR_P_VAL)
        return UINT64_MAX;
    if ((d->params[idx].flags & CR_PF_SIGNED) && a[idx].i < 0)
        return UINT64_MAX;
    return a[idx].u;
}

/* Second pass: buffers, bounded before they are allocated. u->client_id[i] gets the id an
 * asynchronous call's client chose for the handle parameter i creates. */
static int unpack_pointers(const cr_fn_desc_t *d, const msgpack_object *args, int waits,
                           cr_generic_args_t *u)
{
    cr_arg_t *a = u->a;
    for (int i = 0; i < d->param_count; i++) {
        const cr_param_desc_t *pd = &d->params[i];
        const msgpack_object *o = &args[i];
        switch (pd->kind) {
        case CR_P_OUT_HANDLE:
            if (!waits) { /* created without a reply: under the client's id */
                if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 < CR_CLIENT_ID_BASE ||
                    o->via.u64 == UINT64_MAX)
                    return -1;
                u->client_id[i] = o->via.u64;
                if (!(a[i].p = scratch_alloc(u, 8)))
                    return CUDA_ERROR_OUT_OF_MEMORY;
                break;
            }
            /* fall through */
        case CR_P_OUT:
            if (is_nil(o)) {
                a[i].p = NULL;
            } else if (o->type == MSGPACK_OBJECT_BOOLEAN) {
                if (!(a[i].p = scratch_alloc(u, pd->size > 8 ? pd->size : 8)))
                    return CUDA_ERROR_OUT_OF_MEMORY;
            } else {
                return -1;
            }
            break;
        case CR_P_IN:
        case CR_P_INOUT:
            if (is_nil(o)) {
                a[i].p = NULL;
                break;
            }
            if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != pd->size)
                return -1;
            if (!(a[i].p = scratch_alloc(u, pd->size))) /* aligned copy */
                return CUDA_ERROR_OUT_OF_MEMORY;
            memcpy(a[i].p, o->via.bin.ptr, pd->size);
            break;
        case CR_P_IN_ARRAY: {
            if (is_nil(o)) {
                a[i].p = NULL;
                break;
            }
            uint64_t n = count_value(d, a, pd->count_param);
            if (o->type != MSGPACK_OBJECT_BIN ||
                n > CR_MAX_ARRAY_BYTES / (pd->size ? pd->size : 1) ||
                o->via.bin.size != n * pd->size)
                return -1;
            if (!(a[i].p = scratch_alloc(u, o->via.bin.size)))
                return CUDA_ERROR_OUT_OF_MEMORY;
            copy_wire(a[i].p, o->via.bin.ptr, o->via.bin.size);
            break;
        }
        case CR_P_OUT_ARRAY:
        case CR_P_OUT_STR: {
            if (is_nil(o)) {
                a[i].p = NULL;
                break;
            }
            uint64_t n = count_value(d, a, pd->count_param), cap;
            if (wire_u64(o, &cap) || cap != n || n > CR_MAX_ARRAY_BYTES / (pd->size ? pd->size : 1))
                return -1;
            if (!(a[i].p = scratch_alloc(u, (size_t)n * pd->size)))
                return CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        case CR_P_STR:
            if (is_nil(o)) {
                a[i].p = NULL;
                break;
            }
            if (o->type != MSGPACK_OBJECT_STR || o->via.str.size >= CR_MAX_ARRAY_BYTES)
                return -1;
            if (!(a[i].p = scratch_alloc(u, o->via.str.size + 1)))
                return CUDA_ERROR_OUT_OF_MEMORY;
            copy_wire(a[i].p, o->via.str.ptr, o->via.str.size);
            break;
        default:
            break;
        }
    }
    return CUDA_SUCCESS;
}

static int is_output(uint8_t kind)
{
    return kind == CR_P_OUT || kind == CR_P_OUT_HANDLE || kind == CR_P_INOUT ||
           kind == CR_P_OUT_ARRAY || kind == CR_P_OUT_STR;
}

/* The module, library or kernel a call takes a part of: its first handle argument. */
static void *code_owner(const cr_fn_desc_t *d, const cr_arg_t *a)
{
    for (int i = 0; i < d->param_count; i++)
        if (d->params[i].kind == CR_P_HANDLE)
            return a[i].p;
    return NULL;
}

static void pack_output(msgpack_packer *pk, const cr_fn_desc_t *d, const cr_arg_t *a, int i, int r,
                        const cr_generic_session_t *s)
{
    const cr_param_desc_t *pd = &d->params[i];
    const void *p = a[i].p;
    if (!p || r != CUDA_SUCCESS) {
        msgpack_pack_nil(pk);
        return;
    }
    switch (pd->kind) {
    case CR_P_OUT:
        if (pd->flags & CR_PF_BYTES) {
            msgpack_pack_bin(pk, pd->size);
            msgpack_pack_bin_body(pk, p, pd->size);
        } else if (pd->flags & CR_PF_FLOAT) {
            if (pd->size == 8)
                msgpack_pack_double(pk, *(const double *)p);
            else
                msgpack_pack_float(pk, *(const float *)p);
        } else {
            uint64_t v = 0;
            memcpy(&v, p, pd->size);
            if ((pd->flags & CR_PF_SIGNED) && pd->size < 8 && (v >> (8 * pd->size - 1)) & 1)
                v |= ~0ULL << (8 * pd->size); /* sign-extend */
            if (pd->flags & CR_PF_SIGNED)
                msgpack_pack_int64(pk, (int64_t)v);
            else
                msgpack_pack_uint64(pk, v);
        }
        break;
    case CR_P_OUT_HANDLE: {
        void *obj = *(void *const *)p;
        msgpack_pack_uint64(pk, obj ? s->add_handle(s->ctx, pd, obj, code_owner(d, a)) : 0);
        break;
    }
    case CR_P_INOUT:
        msgpack_pack_bin(pk, pd->size);
        msgpack_pack_bin_body(pk, p, pd->size);
        break;
    case CR_P_OUT_ARRAY: {
        size_t n = (size_t)count_value(d, a, pd->count_param) * pd->size;
        msgpack_pack_bin(pk, n);
        msgpack_pack_bin_body(pk, p, n);
        break;
    }
    case CR_P_OUT_STR: {
        size_t cap = (size_t)count_value(d, a, pd->count_param);
        size_t n = strnlen(p, cap ? cap - 1 : 0);
        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, p, n);
        break;
    }
    }
}

/* How many device bytes a call reaches from its device-pointer parameter i, as its
 * descriptor says (codegen/annotations.txt); 0 on overflow, which no allocation can hold. */
static uint64_t dptr_extent(const cr_fn_desc_t *d, const cr_arg_t *a, int i)
{
    const cr_param_desc_t *pd = &d->params[i];
    uint64_t len, rows;
    switch (pd->extent) {
    case CR_EXTENT_COUNT:
        len = a[pd->count_param].u;
        if (len == 0)
            return 1;
        return __builtin_mul_overflow(len, pd->extent_elem, &len) ? 0 : len;
    case CR_EXTENT_ROWS: { /* the last row ends at pitch * (height - 1) + width */
        uint64_t width = a[pd->count_param].u, height = a[pd->extent_rows].u;
        if (width == 0 || height == 0)
            return 1;
        if (__builtin_mul_overflow(width, pd->extent_elem, &width) ||
            __builtin_mul_overflow(a[pd->extent_pitch].u, height - 1, &rows) ||
            __builtin_add_overflow(rows, width, &len))
            return 0;
        return len;
    }
    default: /* CR_EXTENT_FIRST; the generator refuses a device pointer without a rule */
        return 1;
    }
}

/* Device addresses a client passes must lie in its own memory: another tenant's are
 * refused as if they did not exist. */
static CUresult check_device_pointers(const cr_fn_desc_t *d, const cr_arg_t *a,
                                      const cr_generic_session_t *s)
{
    for (int i = 0; i < d->param_count; i++) {
        if (d->params[i].kind != CR_P_DPTR || d->params[i].extent == CR_EXTENT_ADDRESS)
            continue; /* an address: its hand-written handler checks it */
        uint64_t len = dptr_extent(d, a, i);
        if (!len || !s->owns(s->ctx, a[i].u, len))
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* Values and handles first, so that buffers are allocated only for a call on the caller's
 * own handles, streams and memory. */
int cr_generic_unpack(const cr_fn_desc_t *d, const msgpack_object *args, uint32_t argc, int waits,
                      const cr_generic_session_t *s, cr_generic_args_t *u)
{
    int r;
    memset(u, 0, sizeof *u);
    if (argc != d->param_count)
        return -1;
    if ((r = unpack_values(d, args, s, u->a)) != CUDA_SUCCESS ||
        (r = check_device_pointers(d, u->a, s)) != CUDA_SUCCESS)
        return r;
    return unpack_pointers(d, args, waits, u);
}

uint32_t cr_generic_output_count(const cr_fn_desc_t *d)
{
    uint32_t n = 0;
    for (int i = 0; i < d->param_count; i++)
        n += is_output(d->params[i].kind);
    return n;
}

void cr_generic_pack_outputs(msgpack_packer *pk, const cr_fn_desc_t *d, const cr_arg_t *a, int r,
                             const cr_generic_session_t *s)
{
    for (int i = 0; i < d->param_count; i++)
        if (is_output(d->params[i].kind))
            pack_output(pk, d, a, i, r, s);
}

/* The request's session, as unpacking and packing ask for it. */
static void *session_handle(void *ctx, uint8_t type, uint64_t id)
{
    return cr_session_handle(ctx, type, id);
}

static int session_stream(void *ctx, uint64_t id, int enqueues, void **obj)
{
    cr_handle_t *st = cr_session_stream(ctx, id);
    if (!st)
        return -1;
    if (enqueues) /* keep the legacy stream's ordering for the work it gets */
        cr_session_stream_prepare(ctx, st);
    *obj = st->obj;
    return 0;
}

static int session_owns(void *ctx, uint64_t p, uint64_t len)
{
    return cr_session_owns(ctx, p, len);
}

/* Handles the driver frees with the code they come from (a module's functions, a
 * library's kernels and modules). */
static int is_code_part(uint8_t type)
{
    return type == CR_HT_CUfunc || type == CR_HT_CUkern || type == CR_HT_CUmod;
}

static uint64_t session_add_handle(void *ctx, const cr_param_desc_t *pd, void *obj, void *parent)
{
    uint64_t id = 0;
    int err;
    if (!(pd->flags & CR_PF_CREATE) && is_code_part(pd->handle_type))
        err = cr_session_add_child_handle(ctx, pd->handle_type, obj, parent, &id);
    else
        err = cr_session_add_handle(ctx, pd->handle_type, obj, pd->flags & CR_PF_CREATE, &id);
    return err ? 0 : id;
}

static void generic_exec(void *arg)
{
    generic_call_t *call = arg;
    cr_request_t *req = call->req;
    cr_session_t *s = req->session;
    const cr_fn_desc_t *d = call->desc;
    const cr_generic_hooks_t *hooks = call->hooks;
    const cr_generic_session_t env = {s, session_handle, session_stream, session_owns,
                                      session_add_handle};
    cr_generic_args_t u;
    cr_arg_t *a = u.a;

    int r = cr_generic_unpack(d, req->args, req->argc, cr_request_waits(req), &env, &u);
    if (r == CUDA_SUCCESS &&
        (!hooks || !hooks->before || (r = hooks->before(req, a)) == CUDA_SUCCESS)) {
        r = call->call(&cr_session_backend(s)->d, a);
        if (hooks && hooks->after)
            r = hooks->after(req, a, (CUresult)r);
    }
    if (r < 0) {
        CR_WARN("session %llu: malformed arguments for %s", (unsigned long long)cr_session_id(s),
                d->name);
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) { /* handles the call destroyed */
        for (int i = 0; i < d->param_count; i++)
            if (d->params[i].kind == CR_P_HANDLE && (d->params[i].flags & CR_PF_DESTROY))
                cr_session_remove_handle(s, req->args[i].via.u64);
    }
    for (int i = 0; r == CUDA_SUCCESS && i < d->param_count; i++) {
        if (!u.client_id[i]) /* handles created under the client's ids */
            continue;
        const cr_param_desc_t *pd = &d->params[i];
        void *obj = *(void **)a[i].p;
        if (cr_session_add_handle_as(s, pd->handle_type, obj, u.client_id[i]) != 0) {
            cr_handle_destroy(&cr_session_backend(s)->d, pd->handle_type, obj);
            r = CUDA_ERROR_INVALID_VALUE; /* an id in use: the client's fault */
        }
    }
    if (!cr_request_waits(req)) {
        if (r != CUDA_SUCCESS)
            cr_session_defer_error(s, (CUresult)r);
    } else {
        cr_reply_t reply;
        if (cr_reply_begin(req, &reply, (CUresult)r, cr_generic_output_count(d)) == 0) {
            cr_generic_pack_outputs(&reply.pk, d, a, r, &env);
            cr_reply_send(req, &reply, 0);
        }
    }
    cr_generic_args_free(&u);
    cr_request_free(req);
    free(call);
}

/* Runs a described call, on a waiter thread when it may wait on the device. */
void cr_generic(cr_request_t *req, const cr_fn_desc_t *desc, cr_call_fn fn,
                const cr_generic_hooks_t *hooks)
{
    generic_call_t *call = malloc(sizeof *call);
    if (!call) {
        cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    *call = (generic_call_t){req, desc, fn, hooks};
    if (desc->flags & CR_FN_WAITS)
        cr_session_finish_on_waiter(req->session, generic_exec, call);
    else
        generic_exec(call);
}
