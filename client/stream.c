/* Default streams (stream.h): the per-thread-default-stream flag that _ptds/_ptsz stubs set
 * for their call, and each thread's per-thread default stream, a blocking stream made on
 * its first use and destroyed when the thread exits. Also streams' attributes, which the
 * server checks (a priority its tenant allows, an access window on its own memory):
 *   cuStreamSetAttribute [stream, attribute, value (bin: CUstreamAttrValue)]
 *   cuStreamGetAttribute [stream, attribute] -> value (bin)
 *
 * Threads: any application thread, each for its own streams. Making a stream does not
 * wait (its id is chosen here); destroying one at thread exit waits for the reply. */
#include "stream.h"

#include <pthread.h>

#include <string.h>

#include "client.h"
#include "handles.h"
#include "marshal.h"
#include "request.h"

/* Bumped when the primary context is reset: per-thread streams must then be recreated. */
static volatile unsigned stream_generation;

static __thread int tls_ptds;
static __thread uint64_t tls_stream_id;
static __thread unsigned tls_stream_generation;
static pthread_key_t stream_key;
static pthread_once_t stream_key_once = PTHREAD_ONCE_INIT;

void cr_ptds_enter(int *saved)
{
    *saved = tls_ptds;
    tls_ptds = 1;
}

void cr_ptds_leave(int *saved)
{
    tls_ptds = *saved;
}

static void destroy_thread_stream(void *value)
{
    uint64_t id = (uint64_t)(uintptr_t)value;
    if (id && cr_client() && tls_stream_generation == stream_generation) {
        cr_arg_t a[1] = {{.u = id}};
        cr_marshal_call(&cr_desc_cuStreamDestroy_v2, a, NULL);
    }
}

static void make_stream_key(void)
{
    pthread_key_create(&stream_key, destroy_thread_stream);
}

void cr_stream_forget_per_thread(void)
{
    __atomic_add_fetch(&stream_generation, 1, __ATOMIC_SEQ_CST);
}

CUresult cr_stream_wire_id(CUstream s, uint64_t *id)
{
    uintptr_t v = (uintptr_t)s;
    int per_thread = v == (uintptr_t)CU_STREAM_PER_THREAD || (v == 0 && tls_ptds);
    if (!per_thread) {
        if (v == 0 || v == (uintptr_t)CU_STREAM_LEGACY) {
            *id = 0;
            return CUDA_SUCCESS;
        }
        if (!cr_handles_valid(v, CR_HT_CUstream))
            return CUDA_ERROR_INVALID_HANDLE;
        *id = v;
        return CUDA_SUCCESS;
    }
    if (tls_stream_id && tls_stream_generation == stream_generation) {
        *id = tls_stream_id;
        return CUDA_SUCCESS;
    }
    /* the per-thread default stream: a blocking stream of this thread, made on first use */
    CUstream created = NULL;
    cr_arg_t a[2] = {{.p = &created}, {.u = CU_STREAM_DEFAULT}};
    CUresult r = cr_marshal_call(&cr_desc_cuStreamCreate, a, NULL);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_once(&stream_key_once, make_stream_key);
    tls_stream_id = (uint64_t)(uintptr_t)created;
    tls_stream_generation = stream_generation;
    pthread_setspecific(stream_key, created);
    *id = tls_stream_id;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuStreamSetAttribute(CUstream stream, CUstreamAttrID attr,
                                      const CUstreamAttrValue *value)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    uint64_t sid;
    CUresult r = value ? cr_stream_wire_id(stream, &sid) : CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        return r;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuStreamSetAttribute);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 3);
    msgpack_pack_uint64(&m.pk, sid);
    msgpack_pack_uint32(&m.pk, (uint32_t)attr);
    msgpack_pack_bin(&m.pk, sizeof *value);
    msgpack_pack_bin_body(&m.pk, value, sizeof *value);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    r = cr_call(&m, &p, &u);
    cr_reply_done(&p, &u);
    return r;
}

CUresult cr_hand_cuStreamGetAttribute(CUstream stream, CUstreamAttrID attr, CUstreamAttrValue *out)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    uint64_t sid;
    CUresult r = out ? cr_stream_wire_id(stream, &sid) : CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        return r;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuStreamGetAttribute);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_uint64(&m.pk, sid);
    msgpack_pack_uint32(&m.pk, (uint32_t)attr);
    cr_pending_t p = {0};
    msgpack_unpacked u;
    r = cr_call(&m, &p, &u);
    const msgpack_object *v =
        r == CUDA_SUCCESS && u.data.via.array.size == 2 ? &u.data.via.array.ptr[1] : NULL;
    if (r == CUDA_SUCCESS &&
        (!v || v->type != MSGPACK_OBJECT_BIN || v->via.bin.size != sizeof *out))
        r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS)
        memcpy(out, v->via.bin.ptr, sizeof *out);
    cr_reply_done(&p, &u);
    return r;
}
