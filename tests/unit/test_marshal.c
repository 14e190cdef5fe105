/* The two generic marshallers on their own, without a connection or a session: for
 * descriptors that hold every parameter kind, the client packs a call
 * (cr_marshal_pack_args), msgpack decodes the bytes, and the server unpacks them
 * (cr_generic_unpack) into the very values the caller passed, with NULL outputs NULL and
 * present ones zeroed buffers of their size; the server's outputs (cr_generic_pack_outputs)
 * reach the caller's pointers (cr_marshal_unpack_reply). Bodies and replies a descriptor
 * does not describe are refused, never half taken. The server's session is played by
 * `fake` below; the client keeps its own handle table (client/handles.c). */
#include <malloc.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "check.h"
#include "client/client.h"
#include "client/handles.h"
#include "client/marshal.h"
#include "client/request.h"
#include "error.h"
#include "protocol.h"
#include "server/marshal.h"
#include "server/request.h"
#include "server/session.h"

/* Descriptors of functions not remoted yet, exactly as codegen/generate.py writes them for
 * the annotation in each comment: no remoted function has a float by value, an IN struct
 * or array, an OUT struct, array or string, an INOUT or an IGNORED parameter yet. */

/* cuTexRefSetMipmapLevelClamp  remote */
static const cr_param_desc_t params_clamp[] = {
    {CR_P_HANDLE, 0, CR_HT_CUtexref, -1, 8, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_FLOAT, 0, CR_HT_NONE, -1, 4, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_FLOAT, 0, CR_HT_NONE, -1, 4, CR_EXTENT_NONE, 0, -1, -1},
};
static const cr_fn_desc_t desc_clamp = {"cuTexRefSetMipmapLevelClamp", 0, 0, 3, params_clamp};

/* cuDeviceGetUuid_v2  remote  uuid:out */
static const cr_param_desc_t params_uuid[] = {
    {CR_P_OUT, CR_PF_BYTES, CR_HT_NONE, -1, 16, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_VAL, CR_PF_SIGNED, CR_HT_NONE, -1, 4, CR_EXTENT_NONE, 0, -1, -1},
};
static const cr_fn_desc_t desc_uuid = {"cuDeviceGetUuid_v2", 0, 0, 2, params_uuid};

/* cuArrayCreate_v2  remote  pHandle:new  pAllocateArray:in */
static const cr_param_desc_t params_array_create[] = {
    {CR_P_OUT_HANDLE, CR_PF_CREATE, CR_HT_CUarray, -1, 8, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_IN, 0, CR_HT_NONE, -1, 24, CR_EXTENT_NONE, 0, -1, -1},
};
static const cr_fn_desc_t desc_array_create = {"cuArrayCreate_v2", 0, 0, 2, params_array_create};

/* cuDeviceGetHostAtomicCapabilities  remote  capabilities:out[count]  operations:in[count] */
static const cr_param_desc_t params_atomics[] = {
    {CR_P_OUT_ARRAY, 0, CR_HT_NONE, 2, 4, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_IN_ARRAY, 0, CR_HT_NONE, 2, 4, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_VAL, 0, CR_HT_NONE, -1, 4, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_VAL, CR_PF_SIGNED, CR_HT_NONE, -1, 4, CR_EXTENT_NONE, 0, -1, -1},
};
static const cr_fn_desc_t desc_atomics = {"cuDeviceGetHostAtomicCapabilities", 0, 0, 4,
                                          params_atomics};

/* cuMemSetAccess  remote  ptr:extent[size]  desc:in[count] */
static const cr_param_desc_t params_set_access[] = {
    {CR_P_DPTR, 0, CR_HT_NONE, 1, 8, CR_EXTENT_COUNT, 1, -1, -1},
    {CR_P_VAL, 0, CR_HT_NONE, -1, 8, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_IN_ARRAY, 0, CR_HT_NONE, 3, 12, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_VAL, 0, CR_HT_NONE, -1, 8, CR_EXTENT_NONE, 0, -1, -1},
};
static const cr_fn_desc_t desc_set_access = {"cuMemSetAccess", 0, 0, 4, params_set_access};

/* cuDeviceGetName  remote  name:outstr[len] */
static const cr_param_desc_t params_name[] = {
    {CR_P_OUT_STR, 0, CR_HT_NONE, 1, 1, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_VAL, CR_PF_SIGNED, CR_HT_NONE, -1, 4, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_VAL, CR_PF_SIGNED, CR_HT_NONE, -1, 4, CR_EXTENT_NONE, 0, -1, -1},
};
static const cr_fn_desc_t desc_name = {"cuDeviceGetName", 0, 0, 3, params_name};

/* cuGraphGetNodes  remote  nodes:ignored  numNodes:inout */
static const cr_param_desc_t params_graph_nodes[] = {
    {CR_P_HANDLE, 0, CR_HT_CUgraph, -1, 8, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_IGNORED, 0, CR_HT_NONE, -1, 0, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_INOUT, 0, CR_HT_NONE, -1, 8, CR_EXTENT_NONE, 0, -1, -1},
};
static const cr_fn_desc_t desc_graph_nodes = {"cuGraphGetNodes", 0, 0, 3, params_graph_nodes};

/* cuLinkCreate_v2  remote  options:ignored  optionValues:ignored  stateOut:new */
static const cr_param_desc_t params_link_create[] = {
    {CR_P_VAL, 0, CR_HT_NONE, -1, 4, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_IGNORED, 0, CR_HT_NONE, -1, 0, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_IGNORED, 0, CR_HT_NONE, -1, 0, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_OUT_HANDLE, CR_PF_CREATE, CR_HT_CUlinkState, -1, 8, CR_EXTENT_NONE, 0, -1, -1},
};
static const cr_fn_desc_t desc_link_create = {"cuLinkCreate_v2", 0, 0, 4, params_link_create};

/* No driver function takes a signed 1-, 2- or 8-byte integer or a double by value; the
 * marshallers handle them by size, as api.h promises. */
static const cr_param_desc_t params_widths[] = {
    {CR_P_VAL, CR_PF_SIGNED, CR_HT_NONE, -1, 1, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_VAL, CR_PF_SIGNED, CR_HT_NONE, -1, 2, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_VAL, CR_PF_SIGNED, CR_HT_NONE, -1, 4, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_VAL, CR_PF_SIGNED, CR_HT_NONE, -1, 8, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_VAL, CR_PF_SIGNED, CR_HT_NONE, -1, 1, CR_EXTENT_NONE, 0, -1, -1},
    {CR_P_FLOAT, 0, CR_HT_NONE, -1, 8, CR_EXTENT_NONE, 0, -1, -1},
};
static const cr_fn_desc_t desc_widths = {"signed widths and a double", 0, 0, 6, params_widths};

/* --- the server's session, played by the test ---------------------------------------- */

/* Objects behind the handles it holds: only their addresses matter. */
static char obj_func, obj_mod, obj_event_a, obj_event_b, obj_texref, obj_graph, obj_stream,
    obj_legacy, obj_made;

static const struct {
    uint64_t id;
    uint8_t type;
    void *obj;
} held[] = {
    {0x11, CR_HT_CUfunc, &obj_func},     {0x12, CR_HT_CUmod, &obj_mod},
    {0x13, CR_HT_CUevent, &obj_event_a}, {0x14, CR_HT_CUevent, &obj_event_b},
    {0x15, CR_HT_CUtexref, &obj_texref}, {0x16, CR_HT_CUgraph, &obj_graph},
};
#define STREAM_ID 0x21
#define ALLOC_BASE 0x7f0000000000ULL /* its one allocation */
#define ALLOC_SIZE ((uint64_t)1 << 20)
#define FIRST_NEW_ID 0x500 /* ids it gives the handles calls return */

/* What it was asked: streams readied for work, handles recorded for a reply. */
static struct {
    int prepared;
    int added;
    const cr_param_desc_t *pd;
    void *obj, *parent;
} seen;

static void *fake_handle(void *ctx, uint8_t type, uint64_t id)
{
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++)
        if (held[i].id == id && held[i].type == type)
            return held[i].obj;
    return NULL;
}

static int fake_stream(void *ctx, uint64_t id, int enqueues, void **obj)
{
    if (id != 0 && id != STREAM_ID)
        return -1;
    seen.prepared += enqueues;
    *obj = id ? &obj_stream : &obj_legacy;
    return 0;
}

static int fake_owns(void *ctx, uint64_t p, uint64_t len)
{
    return p >= ALLOC_BASE && len <= ALLOC_SIZE && p - ALLOC_BASE <= ALLOC_SIZE - len;
}

static uint64_t fake_add_handle(void *ctx, const cr_param_desc_t *pd, void *obj, void *parent)
{
    seen.pd = pd;
    seen.obj = obj;
    seen.parent = parent;
    return FIRST_NEW_ID + seen.added++;
}

static const cr_generic_session_t fake = {NULL, fake_handle, fake_stream, fake_owns,
                                          fake_add_handle};

/* --- the way between them ------------------------------------------------------------ */

/* A call the client packed, decoded by msgpack as the server's request holds it. */
typedef struct {
    cr_buf_t buf;
    msgpack_unpacked msg;
    const msgpack_object *args;
} body_t;

/* CUDA_SUCCESS with b decoded, or what the client refused the call with. */
static CUresult pack_body(body_t *b, const cr_fn_desc_t *d, cr_arg_t *a, const uint64_t *streams)
{
    msgpack_packer pk;
    b->buf = (cr_buf_t)CR_BUF_INIT;
    b->args = NULL;
    msgpack_unpacked_init(&b->msg);
    msgpack_packer_init(&pk, &b->buf, cr_buf_msgpack_write);
    CUresult r = cr_marshal_pack_args(&pk, d, a, streams);
    if (r != CUDA_SUCCESS)
        return r;
    size_t off = 0;
    CHECK(msgpack_unpack_next(&b->msg, (const char *)b->buf.data, b->buf.len, &off) ==
          MSGPACK_UNPACK_SUCCESS);
    CHECK_EQ_U64(off, b->buf.len);
    CHECK(b->msg.data.type == MSGPACK_OBJECT_ARRAY);
    CHECK_EQ_INT(b->msg.data.via.array.size, d->param_count);
    b->args = b->msg.data.via.array.ptr;
    return CUDA_SUCCESS;
}

static void body_free(body_t *b)
{
    msgpack_unpacked_destroy(&b->msg);
    cr_buf_free(&b->buf);
}

/* The call packed by the client and unpacked by the server into u: what the server says. The
 * body is gone when it returns, so u holds nothing of it. */
static int send_call(const cr_fn_desc_t *d, cr_arg_t *a, const uint64_t *streams, int waits,
                     cr_generic_args_t *u)
{
    body_t b;
    int r = -2;
    memset(u, 0, sizeof *u);
    CUresult packed = pack_body(&b, d, a, streams);
    CHECK_EQ_INT(packed, CUDA_SUCCESS);
    if (packed == CUDA_SUCCESS)
        r = cr_generic_unpack(d, b.args, d->param_count, waits, &fake, u);
    body_free(&b);
    return r;
}

/* The reply [r, outputs] the server packs from its arguments sa, unpacked by the client
 * into the caller's arguments a: what cr_marshal_unpack_reply says. */
static int reply_call(const cr_fn_desc_t *d, const cr_arg_t *sa, int r, cr_arg_t *a)
{
    cr_buf_t buf = CR_BUF_INIT;
    msgpack_packer pk;
    msgpack_unpacked msg;
    size_t off = 0;
    msgpack_packer_init(&pk, &buf, cr_buf_msgpack_write);
    msgpack_pack_array(&pk, 1 + cr_generic_output_count(d));
    msgpack_pack_int(&pk, r);
    cr_generic_pack_outputs(&pk, d, sa, r, &fake);
    msgpack_unpacked_init(&msg);
    int ret = CR_EPROTO;
    if (msgpack_unpack_next(&msg, (const char *)buf.data, buf.len, &off) ==
            MSGPACK_UNPACK_SUCCESS &&
        off == buf.len && msg.data.type == MSGPACK_OBJECT_ARRAY)
        ret = cr_marshal_unpack_reply(d, a, &msg.data.via.array);
    else
        CHECK(!"the server's reply does not decode");
    msgpack_unpacked_destroy(&msg);
    cr_buf_free(&buf);
    return ret;
}

/* A buffer the server allocated for an output: size zeroed bytes of its own. */
static int fresh_buffer(const void *p, size_t size)
{
    if (!p || malloc_usable_size((void *)p) < size)
        return 0;
    for (size_t i = 0; i < size; i++)
        if (((const uint8_t *)p)[i])
            return 0;
    return 1;
}

/* msgpack objects for bodies and replies written by hand. */
static msgpack_object mp_nil(void)
{
    return (msgpack_object){.type = MSGPACK_OBJECT_NIL};
}

static msgpack_object mp_true(void)
{
    return (msgpack_object){.type = MSGPACK_OBJECT_BOOLEAN, .via.boolean = true};
}

static msgpack_object mp_uint(uint64_t v)
{
    return (msgpack_object){.type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = v};
}

static msgpack_object mp_int(int64_t v)
{
    return (msgpack_object){.type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = v};
}

static msgpack_object mp_double(double v)
{
    return (msgpack_object){.type = MSGPACK_OBJECT_FLOAT64, .via.f64 = v};
}

static msgpack_object mp_str(const char *p, uint32_t n)
{
    return (msgpack_object){.type = MSGPACK_OBJECT_STR, .via.str = {n, p}};
}

static msgpack_object mp_bin(const void *p, uint32_t n)
{
    return (msgpack_object){.type = MSGPACK_OBJECT_BIN, .via.bin = {n, p}};
}

/* What the server says of the client's body for the call with element i replaced by o. */
static int unpack_changed(const cr_fn_desc_t *d, cr_arg_t *a, const uint64_t *streams, int waits,
                          int i, msgpack_object o)
{
    body_t b;
    cr_generic_args_t u;
    msgpack_object args[CR_MAX_PARAMS];
    int r = -2;
    CHECK_EQ_INT(pack_body(&b, d, a, streams), CUDA_SUCCESS);
    if (b.args) {
        memcpy(args, b.args, d->param_count * sizeof args[0]);
        args[i] = o;
        r = cr_generic_unpack(d, args, d->param_count, waits, &fake, &u);
        cr_generic_args_free(&u);
    }
    body_free(&b);
    return r;
}

/* What the client says of a reply [CUDA_SUCCESS, outputs...] written by hand. */
static int unpack_reply(const cr_fn_desc_t *d, cr_arg_t *a, const msgpack_object *outputs,
                        uint32_t n)
{
    msgpack_object elems[CR_MAX_PARAMS + 1];
    elems[0] = mp_uint(CUDA_SUCCESS);
    memcpy(elems + 1, outputs, n * sizeof elems[0]);
    msgpack_object_array reply = {1 + n, elems};
    return cr_marshal_unpack_reply(d, a, &reply);
}

/* --- values in ----------------------------------------------------------------------- */

/* Unsigned 1, 2 and 4 bytes, 8-byte counts, a device pointer and a stream of an
 * asynchronous call: bits above a value's width are not its own. */
static void test_unsigned_values(void)
{
    const struct {
        const cr_fn_desc_t *d;
        uint64_t value, elem;
    } cases[] = {
        {&cr_desc_cuMemsetD8Async, 0xab, 1},
        {&cr_desc_cuMemsetD16Async, 0xbeef, 2},
        {&cr_desc_cuMemsetD32Async, 0xdeadbeef, 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t streams[4] = {0, 0, 0, STREAM_ID};
        cr_arg_t a[4];
        cr_generic_args_t u;
        a[0].u = ALLOC_BASE + 64;
        a[1].u = 0xffffff0000000000ULL | cases[c].value;
        a[2].u = 100;
        a[3].p = (void *)0x5eed; /* the caller's stream: its wire id goes */
        seen.prepared = 0;
        CHECK_EQ_INT(send_call(cases[c].d, a, streams, 0, &u), CUDA_SUCCESS);
        CHECK_EQ_U64(u.a[0].u, ALLOC_BASE + 64);
        CHECK_EQ_U64(u.a[1].u, cases[c].value);
        CHECK_EQ_U64(u.a[2].u, 100);
        CHECK(u.a[3].p == &obj_stream);
        CHECK_EQ_INT(seen.prepared, 1); /* it enqueues work there */
        cr_generic_args_free(&u);

        /* the memset must lie in the caller's memory, to its last byte */
        a[2].u = (ALLOC_SIZE - 64) / cases[c].elem;
        CHECK_EQ_INT(send_call(cases[c].d, a, streams, 0, &u), CUDA_SUCCESS);
        cr_generic_args_free(&u);
        a[2].u++;
        CHECK_EQ_INT(send_call(cases[c].d, a, streams, 0, &u), CUDA_ERROR_INVALID_VALUE);
        cr_generic_args_free(&u);
    }
}

/* Signed 4-byte values and enums, an unsigned 8-byte value, a function handle. */
static void test_signed_values(void)
{
    cr_arg_t a[3];
    cr_generic_args_t u;
    a[0].u = 0x11;
    a[1].i = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    a[2].i = INT32_MIN;
    CHECK_EQ_INT(send_call(&cr_desc_cuFuncSetAttribute, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[0].p == &obj_func);
    CHECK_EQ_INT(u.a[1].i, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
    CHECK_EQ_INT(u.a[2].i, INT32_MIN);
    cr_generic_args_free(&u);

    a[0].i = 5;
    a[1].u = 0xfedcba9876543210ULL;
    CHECK_EQ_INT(send_call(&cr_desc_cuCtxSetLimit, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK_EQ_INT(u.a[0].i, 5);
    CHECK_EQ_U64(u.a[1].u, 0xfedcba9876543210ULL);
    cr_generic_args_free(&u);
}

/* An enum by value passes only as one of its values: NVIDIA's driver crashed on a function
 * attribute of -1, which the server must never hand it. */
static void test_enum_values(void)
{
    cr_arg_t a[3];
    cr_generic_args_t u;
    a[0].u = 0x11;
    a[2].i = 1;
    for (int attr = 0; attr < CU_FUNC_ATTRIBUTE_MAX; attr++) {
        a[1].i = attr;
        CHECK_EQ_INT(send_call(&cr_desc_cuFuncSetAttribute, a, NULL, 1, &u), CUDA_SUCCESS);
        CHECK_EQ_INT(u.a[1].i, attr);
        cr_generic_args_free(&u);
    }
    const int64_t bad[] = {-1, CU_FUNC_ATTRIBUTE_MAX, 9999, INT32_MIN, INT32_MAX};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        a[1].i = bad[k];
        CHECK_EQ_INT(send_call(&cr_desc_cuFuncSetAttribute, a, NULL, 1, &u),
                     CUDA_ERROR_INVALID_VALUE);
        cr_generic_args_free(&u);
    }
    a[0].i = CU_LIMIT_MAX; /* the sentinel is no limit */
    a[1].u = 1;
    CHECK_EQ_INT(send_call(&cr_desc_cuCtxSetLimit, a, NULL, 1, &u), CUDA_ERROR_INVALID_VALUE);
    cr_generic_args_free(&u);
    a[0].i = CU_LIMIT_STACK_SIZE;
    CHECK_EQ_INT(send_call(&cr_desc_cuCtxSetLimit, a, NULL, 1, &u), CUDA_SUCCESS);
    cr_generic_args_free(&u);
}

/* The wire format of common/api.h, element by element. */
static void test_wire_format(void)
{
    int least = 0;
    uint32_t caps[2];
    const uint32_t ops[2] = {7, 8};
    cr_arg_t a[4];
    body_t b;
    a[0].u = 0x11;
    a[1].i = -3;
    a[2].u = 9;
    CHECK_EQ_INT(pack_body(&b, &cr_desc_cuFuncSetAttribute, a, NULL), CUDA_SUCCESS);
    CHECK(b.args[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && b.args[0].via.u64 == 0x11);
    CHECK(b.args[1].type == MSGPACK_OBJECT_NEGATIVE_INTEGER && b.args[1].via.i64 == -3);
    CHECK(b.args[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER && b.args[2].via.u64 == 9);
    body_free(&b);

    a[0].p = &least; /* present: true; NULL: nil */
    a[1].p = NULL;
    CHECK_EQ_INT(pack_body(&b, &cr_desc_cuCtxGetStreamPriorityRange, a, NULL), CUDA_SUCCESS);
    CHECK(b.args[0].type == MSGPACK_OBJECT_BOOLEAN && b.args[0].via.boolean);
    CHECK(b.args[1].type == MSGPACK_OBJECT_NIL);
    body_free(&b);

    a[0].p = caps; /* an output array: its capacity; an input one: its bytes */
    a[1].p = (void *)ops;
    a[2].u = 2;
    a[3].i = 0;
    CHECK_EQ_INT(pack_body(&b, &desc_atomics, a, NULL), CUDA_SUCCESS);
    CHECK(b.args[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && b.args[0].via.u64 == 2);
    CHECK(b.args[1].type == MSGPACK_OBJECT_BIN && b.args[1].via.bin.size == sizeof ops);
    body_free(&b);
}

/* Signed 1-, 2-, 4- and 8-byte values, in slots widened either way, and a double. */
static void test_widths(void)
{
    cr_arg_t a[6];
    cr_generic_args_t u;
    a[0].i = -128;
    a[1].i = -2;
    a[2].u = 0xffffffff; /* -1, zero-extended */
    a[3].i = INT64_MIN;
    a[4].i = 127;
    a[5].d = -1.5e300;
    CHECK_EQ_INT(send_call(&desc_widths, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK_EQ_INT(u.a[0].i, -128);
    CHECK_EQ_INT(u.a[1].i, -2);
    CHECK_EQ_INT(u.a[2].i, -1);
    CHECK_EQ_INT(u.a[3].i, INT64_MIN);
    CHECK_EQ_INT(u.a[4].i, 127);
    CHECK(u.a[5].d == -1.5e300);
    cr_generic_args_free(&u);
}

static void test_floats(void)
{
    cr_arg_t a[3];
    cr_generic_args_t u;
    a[0].u = 0x15;
    a[1].f = 0.25f;
    a[2].f = -3.5f;
    CHECK_EQ_INT(send_call(&desc_clamp, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[0].p == &obj_texref);
    CHECK(u.a[1].f == 0.25f);
    CHECK(u.a[2].f == -3.5f);
    cr_generic_args_free(&u);
}

/* A struct and arrays: copies of the caller's bytes; NULL stays NULL. */
static void test_inputs(void)
{
    CUDA_ARRAY_DESCRIPTOR desc = {640, 480, CU_AD_FORMAT_FLOAT, 4};
    const uint32_t ops[3] = {1, 2, 3};
    CUmemAccessDesc access[2] = {
        {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READ},
        {{CU_MEM_LOCATION_TYPE_DEVICE, 1}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE}};
    CUarray arr = NULL;
    cr_arg_t a[4];
    cr_generic_args_t u;
    CHECK_EQ_INT(sizeof desc, params_array_create[1].size);
    CHECK_EQ_INT(sizeof access[0], params_set_access[2].size);

    a[0].p = &arr;
    a[1].p = &desc;
    CHECK_EQ_INT(send_call(&desc_array_create, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[1].p && u.a[1].p != &desc);
    CHECK_EQ_MEM(u.a[1].p, &desc, sizeof desc);
    cr_generic_args_free(&u);
    a[1].p = NULL;
    CHECK_EQ_INT(send_call(&desc_array_create, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[1].p == NULL);
    cr_generic_args_free(&u);

    a[0].p = NULL;
    a[1].p = (void *)ops;
    a[2].u = 3;
    a[3].i = -1;
    CHECK_EQ_INT(send_call(&desc_atomics, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[0].p == NULL);
    CHECK_EQ_MEM(u.a[1].p, ops, sizeof ops);
    CHECK_EQ_U64(u.a[2].u, 3);
    CHECK_EQ_INT(u.a[3].i, -1);
    cr_generic_args_free(&u);

    a[0].u = ALLOC_BASE + 4096;
    a[1].u = 8192;
    a[2].p = access;
    a[3].u = 2;
    CHECK_EQ_INT(send_call(&desc_set_access, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK_EQ_U64(u.a[0].u, ALLOC_BASE + 4096);
    CHECK_EQ_MEM(u.a[2].p, access, sizeof access);
    cr_generic_args_free(&u);
}

/* Strings arrive NUL-terminated; an empty one is not NULL. */
static void test_strings(void)
{
    CUfunction f = NULL;
    cr_arg_t a[3];
    cr_generic_args_t u;
    const char *names[] = {"saxpy_kernel", "", NULL};
    for (int k = 0; k < 3; k++) {
        a[0].p = &f;
        a[1].u = 0x12;
        a[2].p = (void *)names[k];
        CHECK_EQ_INT(send_call(&cr_desc_cuModuleGetFunction, a, NULL, 1, &u), CUDA_SUCCESS);
        CHECK(u.a[1].p == &obj_mod);
        if (names[k])
            CHECK_EQ_STR(u.a[2].p, names[k]);
        else
            CHECK(u.a[2].p == NULL);
        cr_generic_args_free(&u);
    }
}

static void test_ignored(void)
{
    size_t n = 5;
    CUgraphNode nodes[1];
    CUlinkState state = NULL;
    CUjit_option options[2] = {CU_JIT_MAX_REGISTERS, CU_JIT_OPTIMIZATION_LEVEL};
    void *values[2] = {NULL, NULL};
    cr_arg_t a[4];
    cr_generic_args_t u;
    a[0].u = 0x16;
    a[1].p = nodes;
    a[2].p = &n;
    CHECK_EQ_INT(send_call(&desc_graph_nodes, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[0].p == &obj_graph);
    CHECK_EQ_U64(u.a[1].u, 0);
    CHECK(u.a[2].p && *(const uint64_t *)u.a[2].p == 5);
    cr_generic_args_free(&u);

    a[0].u = 2;
    a[1].p = options;
    a[2].p = values;
    a[3].p = &state;
    CHECK_EQ_INT(send_call(&desc_link_create, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK_EQ_U64(u.a[0].u, 2);
    CHECK_EQ_U64(u.a[1].u, 0);
    CHECK_EQ_U64(u.a[2].u, 0);
    CHECK(fresh_buffer(u.a[3].p, 8));
    cr_generic_args_free(&u);
}

/* Handles and streams only the session holds; device memory only the caller owns. */
static void test_session_refusals(void)
{
    uint64_t streams[6] = {0, 0, 0, 0x99, 0, 0};
    float ms = 0;
    cr_arg_t a[6];
    cr_generic_args_t u;
    a[0].p = &ms;
    a[1].u = 0x13;
    a[2].u = 0; /* NULL */
    CHECK_EQ_INT(send_call(&cr_desc_cuEventElapsedTime_v2, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[1].p == &obj_event_a && u.a[2].p == NULL);
    cr_generic_args_free(&u);
    a[2].u = 0x98; /* unknown */
    CHECK_EQ_INT(send_call(&cr_desc_cuEventElapsedTime_v2, a, NULL, 1, &u),
                 CUDA_ERROR_INVALID_HANDLE);
    cr_generic_args_free(&u);
    a[2].u = 0x11; /* a function, not an event */
    CHECK_EQ_INT(send_call(&cr_desc_cuEventElapsedTime_v2, a, NULL, 1, &u),
                 CUDA_ERROR_INVALID_HANDLE);
    cr_generic_args_free(&u);

    a[0].u = ALLOC_BASE;
    a[1].u = 1;
    a[2].u = 1;
    CHECK_EQ_INT(send_call(&cr_desc_cuMemsetD8Async, a, streams, 0, &u), CUDA_ERROR_INVALID_HANDLE);
    cr_generic_args_free(&u);

    /* rows: the last ends at pitch * (height - 1) + width */
    a[0].u = ALLOC_BASE;
    a[1].u = 1024; /* pitch */
    a[2].u = 7;
    a[3].u = 256; /* width, in 4-byte elements */
    a[4].u = ALLOC_SIZE / 1024;
    CHECK_EQ_INT(send_call(&cr_desc_cuMemsetD2D32Async, a, streams, 0, &u), CUDA_SUCCESS);
    cr_generic_args_free(&u);
    a[4].u++;
    CHECK_EQ_INT(send_call(&cr_desc_cuMemsetD2D32Async, a, streams, 0, &u),
                 CUDA_ERROR_INVALID_VALUE);
    cr_generic_args_free(&u);
    a[1].u = UINT64_MAX / 2; /* an extent that overflows */
    a[4].u = 3;
    CHECK_EQ_INT(send_call(&cr_desc_cuMemsetD2D32Async, a, streams, 0, &u),
                 CUDA_ERROR_INVALID_VALUE);
    cr_generic_args_free(&u);
}

/* --- outputs, there and back --------------------------------------------------------- */

/* Integer outputs: a NULL one stays NULL both ways, signed ones keep their sign, and the
 * caller's value gets its own width, no more. */
static void test_out_integers(void)
{
    int least = 99, greatest = 99;
    uint32_t flags[2] = {0, 0x5a5a5a5a};
    size_t limit = 0;
    cr_arg_t a[2];
    cr_generic_args_t u;
    a[0].p = &least;
    a[1].p = NULL;
    CHECK_EQ_INT(send_call(&cr_desc_cuCtxGetStreamPriorityRange, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(fresh_buffer(u.a[0].p, 4));
    CHECK(u.a[1].p == NULL);
    *(int32_t *)u.a[0].p = -5;
    CHECK_EQ_INT(reply_call(&cr_desc_cuCtxGetStreamPriorityRange, u.a, CUDA_SUCCESS, a), 0);
    CHECK_EQ_INT(least, -5);
    CHECK_EQ_INT(greatest, 99);
    cr_generic_args_free(&u);

    uint64_t streams[2] = {0, 0};
    a[0].p = NULL; /* the legacy stream, of a call that enqueues nothing */
    a[1].p = flags;
    seen.prepared = 0;
    CHECK_EQ_INT(send_call(&cr_desc_cuStreamGetFlags, a, streams, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[0].p == &obj_legacy);
    CHECK_EQ_INT(seen.prepared, 0);
    CHECK(fresh_buffer(u.a[1].p, 4));
    *(uint32_t *)u.a[1].p = 0x80000001;
    CHECK_EQ_INT(reply_call(&cr_desc_cuStreamGetFlags, u.a, CUDA_SUCCESS, a), 0);
    CHECK_EQ_U64(flags[0], 0x80000001);
    CHECK_EQ_U64(flags[1], 0x5a5a5a5a);
    cr_generic_args_free(&u);

    a[0].p = &limit;
    a[1].i = 2;
    CHECK_EQ_INT(send_call(&cr_desc_cuCtxGetLimit, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(fresh_buffer(u.a[0].p, 8));
    *(uint64_t *)u.a[0].p = UINT64_MAX;
    CHECK_EQ_INT(reply_call(&cr_desc_cuCtxGetLimit, u.a, CUDA_SUCCESS, a), 0);
    CHECK_EQ_U64(limit, UINT64_MAX);

    /* a failed call's outputs are nil: the caller's values stay */
    limit = 42;
    CHECK_EQ_INT(reply_call(&cr_desc_cuCtxGetLimit, u.a, CUDA_ERROR_INVALID_VALUE, a), 0);
    CHECK_EQ_U64(limit, 42);
    cr_generic_args_free(&u);
}

static void test_out_float_and_bytes(void)
{
    float ms = 0;
    CUuuid uuid;
    cr_arg_t a[3];
    cr_generic_args_t u;
    a[0].p = &ms;
    a[1].u = 0x13;
    a[2].u = 0x14;
    CHECK_EQ_INT(send_call(&cr_desc_cuEventElapsedTime_v2, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[1].p == &obj_event_a && u.a[2].p == &obj_event_b);
    CHECK(fresh_buffer(u.a[0].p, sizeof ms));
    *(float *)u.a[0].p = 1.75f;
    CHECK_EQ_INT(reply_call(&cr_desc_cuEventElapsedTime_v2, u.a, CUDA_SUCCESS, a), 0);
    CHECK(ms == 1.75f);
    cr_generic_args_free(&u);

    memset(&uuid, 0, sizeof uuid);
    a[0].p = &uuid;
    a[1].i = 0;
    CHECK_EQ_INT(send_call(&desc_uuid, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(fresh_buffer(u.a[0].p, sizeof uuid));
    for (int i = 0; i < 16; i++)
        ((uint8_t *)u.a[0].p)[i] = (uint8_t)(0xf0 + i);
    CHECK_EQ_INT(reply_call(&desc_uuid, u.a, CUDA_SUCCESS, a), 0);
    CHECK_EQ_MEM(uuid.bytes, u.a[0].p, sizeof uuid);
    cr_generic_args_free(&u);
}

/* A handle the call returns: the session records it (a module's function as its part) and
 * the caller gets its id, which the client then knows as a live handle of that type. */
static void test_out_handles(void)
{
    CUmodule mod = NULL;
    CUfunction f = NULL;
    CUarray arr = NULL;
    CUDA_ARRAY_DESCRIPTOR desc = {16, 16, CU_AD_FORMAT_UNSIGNED_INT8, 1};
    cr_arg_t a[3];
    cr_generic_args_t u;
    a[0].p = &mod;
    a[1].u = 0x11;
    CHECK_EQ_INT(send_call(&cr_desc_cuFuncGetModule, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(fresh_buffer(u.a[0].p, 8));
    *(void **)u.a[0].p = &obj_mod;
    int added = seen.added;
    CHECK_EQ_INT(reply_call(&cr_desc_cuFuncGetModule, u.a, CUDA_SUCCESS, a), 0);
    CHECK(seen.pd == &cr_desc_cuFuncGetModule.params[0]);
    CHECK(seen.obj == &obj_mod && seen.parent == &obj_func);
    CHECK_EQ_U64((uintptr_t)mod, FIRST_NEW_ID + added);
    CHECK(cr_handles_valid((uintptr_t)mod, CR_HT_CUmod));
    *(void **)u.a[0].p = NULL; /* no handle: id 0, nothing recorded */
    CHECK_EQ_INT(reply_call(&cr_desc_cuFuncGetModule, u.a, CUDA_SUCCESS, a), 0);
    CHECK(mod == NULL);
    CHECK_EQ_INT(seen.added, added + 1);
    cr_generic_args_free(&u);

    a[0].p = &f;
    a[1].u = 0x12;
    a[2].p = "saxpy";
    CHECK_EQ_INT(send_call(&cr_desc_cuModuleGetFunction, a, NULL, 1, &u), CUDA_SUCCESS);
    *(void **)u.a[0].p = &obj_func;
    CHECK_EQ_INT(reply_call(&cr_desc_cuModuleGetFunction, u.a, CUDA_SUCCESS, a), 0);
    CHECK(seen.obj == &obj_func && seen.parent == &obj_mod);
    CHECK(cr_handles_valid((uintptr_t)f, CR_HT_CUfunc));
    cr_generic_args_free(&u);

    a[0].p = &arr;
    a[1].p = &desc;
    CHECK_EQ_INT(send_call(&desc_array_create, a, NULL, 1, &u), CUDA_SUCCESS);
    *(void **)u.a[0].p = &obj_made;
    CHECK_EQ_INT(reply_call(&desc_array_create, u.a, CUDA_SUCCESS, a), 0);
    CHECK(seen.pd == &params_array_create[0] && seen.obj == &obj_made && seen.parent == NULL);
    CHECK(cr_handles_valid((uintptr_t)arr, CR_HT_CUarray));
    cr_generic_args_free(&u);
}

/* A handle an asynchronous call creates goes under an id the client chooses. */
static void test_new_handle_ids(void)
{
    CUstream st = NULL;
    cr_arg_t a[3];
    cr_generic_args_t u;
    a[0].p = &st;
    a[1].u = 1;
    a[2].i = -1;
    CHECK_EQ_INT(send_call(&cr_desc_cuStreamCreateWithPriority, a, NULL, 0, &u), CUDA_SUCCESS);
    CHECK((uintptr_t)st >= CR_CLIENT_ID_BASE);
    CHECK_EQ_U64(u.client_id[0], (uintptr_t)st);
    CHECK(fresh_buffer(u.a[0].p, 8));
    CHECK_EQ_U64(u.a[1].u, 1);
    CHECK_EQ_INT(u.a[2].i, -1);
    cr_generic_args_free(&u);

    a[0].p = NULL; /* no id to send */
    body_t b;
    CHECK_EQ_INT(pack_body(&b, &cr_desc_cuStreamCreateWithPriority, a, NULL),
                 CUDA_ERROR_INVALID_VALUE);
    body_free(&b);

    /* ids outside the client's range, or no id, are refused */
    a[0].p = &st;
    const msgpack_object bad[] = {mp_nil(), mp_true(), mp_uint(CR_CLIENT_ID_BASE - 1),
                                  mp_uint(UINT64_MAX)};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        CHECK_EQ_INT(unpack_changed(&cr_desc_cuStreamCreateWithPriority, a, NULL, 0, 0, bad[k]),
                     -1);
}

static void test_out_arrays(void)
{
    uint32_t caps[4] = {0, 0, 0, 0x5a5a5a5a};
    const uint32_t ops[3] = {1, 2, 3}, want[3] = {10, 20, 30};
    char name[16];
    cr_arg_t a[4];
    cr_generic_args_t u;
    a[0].p = caps;
    a[1].p = (void *)ops;
    a[2].u = 3;
    a[3].i = 0;
    CHECK_EQ_INT(send_call(&desc_atomics, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(fresh_buffer(u.a[0].p, sizeof want));
    memcpy(u.a[0].p, want, sizeof want);
    CHECK_EQ_INT(reply_call(&desc_atomics, u.a, CUDA_SUCCESS, a), 0);
    CHECK_EQ_MEM(caps, want, sizeof want);
    CHECK_EQ_U64(caps[3], 0x5a5a5a5a);
    cr_generic_args_free(&u);

    a[2].u = 0; /* empty arrays are present, and empty */
    CHECK_EQ_INT(send_call(&desc_atomics, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[0].p && u.a[1].p);
    CHECK_EQ_INT(reply_call(&desc_atomics, u.a, CUDA_SUCCESS, a), 0);
    CHECK_EQ_MEM(caps, want, sizeof want);
    cr_generic_args_free(&u);

    memset(name, 'x', sizeof name);
    a[0].p = name;
    a[1].i = sizeof name;
    a[2].i = 0;
    CHECK_EQ_INT(send_call(&desc_name, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(fresh_buffer(u.a[0].p, sizeof name));
    strcpy(u.a[0].p, "Emulated GPU");
    CHECK_EQ_INT(reply_call(&desc_name, u.a, CUDA_SUCCESS, a), 0);
    CHECK_EQ_STR(name, "Emulated GPU");
    memset(u.a[0].p, 'y', sizeof name); /* no NUL: the client gets what fits with one */
    CHECK_EQ_INT(reply_call(&desc_name, u.a, CUDA_SUCCESS, a), 0);
    CHECK_EQ_U64(strlen(name), sizeof name - 1);
    ((char *)u.a[0].p)[0] = '\0';
    CHECK_EQ_INT(reply_call(&desc_name, u.a, CUDA_SUCCESS, a), 0);
    CHECK_EQ_STR(name, "");
    cr_generic_args_free(&u);
}

static void test_inout(void)
{
    size_t n = 5;
    cr_arg_t a[3];
    cr_generic_args_t u;
    a[0].u = 0x16;
    a[1].p = NULL;
    a[2].p = &n;
    CHECK_EQ_INT(send_call(&desc_graph_nodes, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[2].p != &n && *(const uint64_t *)u.a[2].p == 5);
    *(uint64_t *)u.a[2].p = 9;
    CHECK_EQ_INT(reply_call(&desc_graph_nodes, u.a, CUDA_SUCCESS, a), 0);
    CHECK_EQ_U64(n, 9);
    cr_generic_args_free(&u);
    a[2].p = NULL;
    CHECK_EQ_INT(send_call(&desc_graph_nodes, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[2].p == NULL);
    cr_generic_args_free(&u);
}

/* --- what is refused ----------------------------------------------------------------- */

/* Bodies with the wrong number of elements, or an element of the wrong msgpack type for
 * its kind, are malformed (-1), whatever the rest holds. */
static void test_refused_bodies(void)
{
    uint64_t streams[4] = {0, 0, 0, STREAM_ID};
    cr_arg_t a[4];
    body_t b;
    cr_generic_args_t u;
    msgpack_object args[CR_MAX_PARAMS + 1];
    a[0].u = ALLOC_BASE;
    a[1].u = 1;
    a[2].u = 1;
    CHECK_EQ_INT(pack_body(&b, &cr_desc_cuMemsetD8Async, a, streams), CUDA_SUCCESS);
    memcpy(args, b.args, 4 * sizeof args[0]);
    args[4] = mp_nil();
    for (uint32_t argc = 0; argc <= 5; argc++) {
        int r = cr_generic_unpack(&cr_desc_cuMemsetD8Async, args, argc, 0, &fake, &u);
        CHECK_EQ_INT(r, argc == 4 ? CUDA_SUCCESS : -1);
        cr_generic_args_free(&u);
    }
    body_free(&b);

    /* VAL, DPTR, STREAM */
    CHECK_EQ_INT(unpack_changed(&cr_desc_cuMemsetD8Async, a, streams, 0, 0, mp_int(-16)), -1);
    CHECK_EQ_INT(unpack_changed(&cr_desc_cuMemsetD8Async, a, streams, 0, 2, mp_int(-1)), -1);
    CHECK_EQ_INT(unpack_changed(&cr_desc_cuMemsetD8Async, a, streams, 0, 2, mp_double(1)), -1);
    CHECK_EQ_INT(unpack_changed(&cr_desc_cuMemsetD8Async, a, streams, 0, 3, mp_nil()), -1);
    CHECK_EQ_INT(unpack_changed(&cr_desc_cuMemsetD8Async, a, streams, 0, 3, mp_int(-1)), -1);

    /* HANDLE, signed VAL */
    a[0].u = 0x11;
    a[1].i = 1;
    a[2].i = 2;
    CHECK_EQ_INT(unpack_changed(&cr_desc_cuFuncSetAttribute, a, NULL, 1, 0, mp_nil()), -1);
    CHECK_EQ_INT(unpack_changed(&cr_desc_cuFuncSetAttribute, a, NULL, 1, 0, mp_bin("", 0)), -1);
    CHECK_EQ_INT(unpack_changed(&cr_desc_cuFuncSetAttribute, a, NULL, 1, 1, mp_str("1", 1)), -1);
    CHECK_EQ_INT(unpack_changed(&cr_desc_cuFuncSetAttribute, a, NULL, 1, 2, mp_true()), -1);

    /* FLOAT */
    a[0].u = 0x15;
    a[1].f = 1;
    a[2].f = 2;
    CHECK_EQ_INT(unpack_changed(&desc_clamp, a, NULL, 1, 1, mp_uint(1)), -1);
    CHECK_EQ_INT(unpack_changed(&desc_clamp, a, NULL, 1, 2, mp_nil()), -1);
}

static void test_refused_pointers(void)
{
    int least = 0, greatest = 0;
    CUarray arr;
    CUDA_ARRAY_DESCRIPTOR desc = {1, 1, CU_AD_FORMAT_FLOAT, 1};
    size_t n = 1;
    char name[8];
    cr_arg_t a[4];
    /* OUT: true or nil */
    a[0].p = &least;
    a[1].p = &greatest;
    const cr_fn_desc_t *range = &cr_desc_cuCtxGetStreamPriorityRange;
    CHECK_EQ_INT(unpack_changed(range, a, NULL, 1, 0, mp_uint(1)), -1);
    CHECK_EQ_INT(unpack_changed(range, a, NULL, 1, 1, mp_bin(&least, 4)), -1);

    /* IN, INOUT: a bin of exactly their size */
    a[0].p = &arr;
    a[1].p = &desc;
    CHECK_EQ_INT(unpack_changed(&desc_array_create, a, NULL, 1, 1, mp_bin(&desc, 23)), -1);
    CHECK_EQ_INT(unpack_changed(&desc_array_create, a, NULL, 1, 1, mp_str((void *)&desc, 24)), -1);
    CHECK_EQ_INT(unpack_changed(&desc_array_create, a, NULL, 1, 0, mp_uint(8)), -1);
    a[0].u = 0x16;
    a[1].p = NULL;
    a[2].p = &n;
    CHECK_EQ_INT(unpack_changed(&desc_graph_nodes, a, NULL, 1, 2, mp_uint(5)), -1);
    CHECK_EQ_INT(unpack_changed(&desc_graph_nodes, a, NULL, 1, 2, mp_bin(&n, 4)), -1);

    /* STR: a str; OUT_STR: its capacity, which must be its count */
    a[0].p = &arr;
    a[1].u = 0x12;
    a[2].p = "k";
    CHECK_EQ_INT(unpack_changed(&cr_desc_cuModuleGetFunction, a, NULL, 1, 2, mp_bin("k", 1)), -1);
    a[0].p = name;
    a[1].i = sizeof name;
    a[2].i = 0;
    CHECK_EQ_INT(unpack_changed(&desc_name, a, NULL, 1, 0, mp_str("12345678", 8)), -1);
    CHECK_EQ_INT(unpack_changed(&desc_name, a, NULL, 1, 0, mp_uint(sizeof name - 1)), -1);
    CHECK_EQ_INT(unpack_changed(&desc_name, a, NULL, 1, 0, mp_true()), -1);
}

/* Arrays and strings are bounded by CR_MAX_ARRAY_BYTES on both sides, and their sizes must
 * agree with their counts. */
static void test_bounds(void)
{
    const uint32_t max = CR_MAX_ARRAY_BYTES / 4; /* elements of 4 bytes */
    uint32_t caps[3], ops[3] = {1, 2, 3};
    cr_arg_t a[4];
    body_t b;
    cr_generic_args_t u;
    a[0].p = caps;
    a[1].p = ops;
    a[2].u = 3;
    a[3].i = 0;
    CHECK_EQ_INT(unpack_changed(&desc_atomics, a, NULL, 1, 0, mp_uint(4)), -1);
    CHECK_EQ_INT(unpack_changed(&desc_atomics, a, NULL, 1, 0, mp_bin(caps, 12)), -1);
    CHECK_EQ_INT(unpack_changed(&desc_atomics, a, NULL, 1, 1, mp_bin(ops, 8)), -1);
    CHECK_EQ_INT(unpack_changed(&desc_atomics, a, NULL, 1, 1, mp_str((void *)ops, 12)), -1);

    /* a count past the bound: the client does not send it, the server does not take it */
    a[2].u = max + 1;
    CHECK_EQ_INT(pack_body(&b, &desc_atomics, a, NULL), CUDA_ERROR_INVALID_VALUE);
    body_free(&b);
    a[2].u = 3;
    CHECK_EQ_INT(pack_body(&b, &desc_atomics, a, NULL), CUDA_SUCCESS);
    msgpack_object args[4];
    memcpy(args, b.args, sizeof args);
    args[2] = mp_uint(max + 1);
    args[0] = mp_uint(max + 1);
    args[1] = mp_nil();
    CHECK_EQ_INT(cr_generic_unpack(&desc_atomics, args, 4, 1, &fake, &u), -1);
    cr_generic_args_free(&u);
    uint8_t *big = calloc(max + 1, 4); /* bytes that match the count, past the bound */
    args[0] = mp_nil();
    args[1] = mp_bin(big, (max + 1) * 4);
    CHECK_EQ_INT(cr_generic_unpack(&desc_atomics, args, 4, 1, &fake, &u), -1);
    cr_generic_args_free(&u);
    free(big);
    args[2] = mp_uint(max); /* at the bound: taken */
    args[0] = mp_uint(max);
    args[1] = mp_nil();
    CHECK_EQ_INT(cr_generic_unpack(&desc_atomics, args, 4, 1, &fake, &u), CUDA_SUCCESS);
    CHECK(fresh_buffer(u.a[0].p, (size_t)max * 4));
    cr_generic_args_free(&u);
    body_free(&b);

    /* a negative count is no count */
    char name[8];
    a[0].p = name;
    a[1].i = -1;
    a[2].i = 0;
    CHECK_EQ_INT(pack_body(&b, &desc_name, a, NULL), CUDA_ERROR_INVALID_VALUE);
    body_free(&b);
    a[1].i = sizeof name;
    CHECK_EQ_INT(pack_body(&b, &desc_name, a, NULL), CUDA_SUCCESS);
    memcpy(args, b.args, 3 * sizeof args[0]);
    args[0] = mp_uint(UINT64_MAX);
    args[1] = mp_int(-1);
    CHECK_EQ_INT(cr_generic_unpack(&desc_name, args, 3, 1, &fake, &u), -1);
    cr_generic_args_free(&u);
    body_free(&b);
}

/* A string needs room for its NUL within CR_MAX_ARRAY_BYTES. */
static void test_string_room(void)
{
    char *s = malloc(CR_MAX_ARRAY_BYTES + 1);
    CUfunction f;
    cr_arg_t a[3];
    body_t b;
    cr_generic_args_t u;
    memset(s, 'n', CR_MAX_ARRAY_BYTES);
    s[CR_MAX_ARRAY_BYTES] = '\0';
    a[0].p = &f;
    a[1].u = 0x12;
    a[2].p = s;
    CHECK_EQ_INT(pack_body(&b, &cr_desc_cuModuleGetFunction, a, NULL), CUDA_ERROR_INVALID_VALUE);
    body_free(&b);
    a[2].p = "k"; /* a body the client sends, with the string put in after */
    CHECK_EQ_INT(
        unpack_changed(&cr_desc_cuModuleGetFunction, a, NULL, 1, 2, mp_str(s, CR_MAX_ARRAY_BYTES)),
        -1);
    a[2].p = s;

    s[CR_MAX_ARRAY_BYTES - 1] = '\0'; /* the longest there is room for */
    CHECK_EQ_INT(send_call(&cr_desc_cuModuleGetFunction, a, NULL, 1, &u), CUDA_SUCCESS);
    CHECK(u.a[2].p && strlen(u.a[2].p) == CR_MAX_ARRAY_BYTES - 1);
    cr_generic_args_free(&u);
    free(s);
}

/* Replies the descriptor does not describe: the client refuses them (CR_EPROTO). */
static void test_refused_replies(void)
{
    int least = 1, greatest = 2;
    size_t limit = 7, n = 3;
    float ms = 0;
    CUuuid uuid;
    CUmodule mod;
    uint32_t caps[3] = {0, 0, 0}, ops[3] = {0, 0, 0};
    char name[8];
    cr_arg_t a[4];
    msgpack_object out[2];

    a[0].p = &least;
    a[1].p = &greatest;
    out[0] = mp_int(-5);
    out[1] = mp_uint(3);
    const cr_fn_desc_t *range = &cr_desc_cuCtxGetStreamPriorityRange;
    CHECK_EQ_INT(unpack_reply(range, a, out, 1), CR_EPROTO); /* an output short */
    CHECK_EQ_INT(least, -5);                                 /* those before it are written */
    CHECK_EQ_INT(greatest, 2);
    CHECK_EQ_INT(unpack_reply(range, a, out, 2), 0);
    CHECK_EQ_INT(greatest, 3);

    a[0].p = &limit;
    a[1].i = 0;
    out[0] = mp_str("7", 1);
    CHECK_EQ_INT(unpack_reply(&cr_desc_cuCtxGetLimit, a, out, 1), CR_EPROTO);
    out[0] = mp_nil(); /* nothing to write */
    CHECK_EQ_INT(unpack_reply(&cr_desc_cuCtxGetLimit, a, out, 1), 0);
    CHECK_EQ_U64(limit, 7);

    a[0].p = &ms;
    a[1].u = 0x13;
    a[2].u = 0x14;
    out[0] = mp_uint(1);
    CHECK_EQ_INT(unpack_reply(&cr_desc_cuEventElapsedTime_v2, a, out, 1), CR_EPROTO);

    a[0].p = &uuid;
    a[1].i = 0;
    out[0] = mp_bin(caps, 12);
    CHECK_EQ_INT(unpack_reply(&desc_uuid, a, out, 1), CR_EPROTO);

    a[0].p = &mod;
    a[1].u = 0x11;
    out[0] = mp_int(-1);
    CHECK_EQ_INT(unpack_reply(&cr_desc_cuFuncGetModule, a, out, 1), CR_EPROTO);

    a[0].u = 0x16;
    a[1].p = NULL;
    a[2].p = &n;
    out[0] = mp_bin(caps, 4);
    CHECK_EQ_INT(unpack_reply(&desc_graph_nodes, a, out, 1), CR_EPROTO);

    /* an array: at most its capacity; a string: with room for its NUL */
    const uint32_t more[4] = {1, 2, 3, 4};
    a[0].p = caps;
    a[1].p = ops;
    a[2].u = 3;
    a[3].i = 0;
    out[0] = mp_bin(more, 16);
    CHECK_EQ_INT(unpack_reply(&desc_atomics, a, out, 1), CR_EPROTO);
    out[0] = mp_bin(more, 8);
    CHECK_EQ_INT(unpack_reply(&desc_atomics, a, out, 1), 0);
    CHECK(caps[0] == 1 && caps[1] == 2 && caps[2] == 0);

    a[0].p = name;
    a[1].i = sizeof name;
    a[2].i = 0;
    out[0] = mp_str("12345678", 8);
    CHECK_EQ_INT(unpack_reply(&desc_name, a, out, 1), CR_EPROTO);
    out[0] = mp_str("1234567", 7);
    CHECK_EQ_INT(unpack_reply(&desc_name, a, out, 1), 0);
    CHECK_EQ_STR(name, "1234567");
    out[0] = mp_bin("1234567", 7);
    CHECK_EQ_INT(unpack_reply(&desc_name, a, out, 1), CR_EPROTO);
}

int main(void)
{
    test_unsigned_values();
    test_signed_values();
    test_enum_values();
    test_wire_format();
    test_widths();
    test_floats();
    test_inputs();
    test_strings();
    test_ignored();
    test_session_refusals();
    test_out_integers();
    test_out_float_and_bytes();
    test_out_handles();
    test_new_handle_ids();
    test_out_arrays();
    test_inout();
    test_refused_bodies();
    test_refused_pointers();
    test_bounds();
    test_string_room();
    test_refused_replies();
    CHECK_DONE();
}

/* --- never reached --------------------------------------------------------------------- */

/* What the marshallers' files call only to send a call (the client's connection) or to run
 * one in a session (the server's): linked in with them, never called by this test. */
#define NEVER(ret, name, params)                                                                   \
    ret name params                                                                                \
    {                                                                                              \
        abort();                                                                                   \
    }

NEVER(cr_client_t *, cr_client, (void))
NEVER(int, cr_msg_begin, (cr_conn_t * c, cr_msg_t *m, uint16_t opcode))
NEVER(void, cr_msg_cancel, (cr_msg_t * m))
NEVER(int, cr_msg_send, (cr_msg_t * m))
NEVER(CUresult, cr_call, (cr_msg_t * m, cr_pending_t *p, msgpack_unpacked *u))
NEVER(void, cr_reply_done, (cr_pending_t * p, msgpack_unpacked *u))
NEVER(CUresult, cr_transport_error, (int err))
NEVER(const cr_backend_t *, cr_session_backend, (const cr_session_t *s))
NEVER(uint64_t, cr_session_id, (const cr_session_t *s))
NEVER(void, cr_session_finish_on_waiter, (cr_session_t * s, void (*fn)(void *), void *arg))
NEVER(int, cr_session_add_handle,
      (cr_session_t * s, uint8_t type, void *obj, int owned, uint64_t *id))
NEVER(int, cr_session_add_handle_as, (cr_session_t * s, uint8_t type, void *obj, uint64_t id))
NEVER(int, cr_session_add_child_handle,
      (cr_session_t * s, uint8_t type, void *obj, void *parent_obj, uint64_t *id))
NEVER(void *, cr_session_handle, (cr_session_t * s, uint8_t type, uint64_t id))
NEVER(void, cr_session_remove_handle, (cr_session_t * s, uint64_t id))
NEVER(cr_handle_t *, cr_session_stream, (cr_session_t * s, uint64_t id))
NEVER(void, cr_session_stream_prepare, (cr_session_t * s, cr_handle_t *stream))
NEVER(void, cr_session_defer_error, (cr_session_t * s, CUresult r))
NEVER(int, cr_session_owns, (cr_session_t * s, CUdeviceptr p, uint64_t len))
NEVER(void, cr_request_free, (cr_request_t * req))
NEVER(void, cr_request_finish, (cr_request_t * req, CUresult r))
NEVER(int, cr_reply_begin, (cr_request_t * req, cr_reply_t *r, CUresult result, uint32_t extra))
NEVER(void, cr_reply_send, (cr_request_t * req, cr_reply_t *r, uint32_t flags))
NEVER(CUresult, cr_handle_destroy, (const cr_driver_t *d, unsigned handle_type, void *obj))
