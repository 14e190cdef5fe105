/* The hello's answer (executor): an admitted session gets its own legacy stream, then the
 * device as its tenant sees it (its quota as the device's memory), the export tables its
 * driver has, and the device windows. admission.c decided, on the loop thread, who the
 * client is and whether it may have a session. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cr_server_hand.h"
#include "error.h"
#include "handlers.h"
#include "hello.h"
#include "host_window.h"
#include "log.h"
#include "loop.h"
#include "mpfield.h"
#include "protocol.h"
#include "request.h"
#include "session.h"
#include "session_private.h"
#include "tenants.h"
#include "version.h"

/* A field of the hello's map as text fit for the log (a number printed, control characters
 * replaced); "" when absent. */
void cr_hello_field(char *dst, size_t cap, const msgpack_object *map, const char *key)
{
    const msgpack_object *v = cr_mp_field(map, key);
    cr_mp_copy_str(dst, cap, v);
    if (v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        snprintf(dst, cap, "%llu", (unsigned long long)v->via.u64);
    for (char *c = dst; *c; c++)
        if ((unsigned char)*c < 0x20)
            *c = '?';
}

/* Answers a hello with a refusal and its reason. */
void cr_hello_refuse(cr_request_t *req, CUresult r, const char *why)
{
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 1) == 0) {
        cr_mp_pack_str(&reply.pk, why);
        cr_reply_send(req, &reply, 0);
    }
}

/* Answers the hello of an admitted session (executor): its default stream, then the
 * device as its tenant sees it. */
static int answer_hello(cr_session_t *s, cr_request_t *req)
{
    const msgpack_object *info = req->root.type == MSGPACK_OBJECT_MAP ? &req->root : NULL;
    char client[64];
    if (!info)
        return CR_EPROTO;
    cr_hello_field(client, sizeof client, info, "client");
    const cr_backend_t *b = s->backend;
    cr_tenant_t *tenant = s->tenant;
    CUresult created =
        cr_session_create_stream(s, (CUstream *)&s->legacy.obj, CU_STREAM_NON_BLOCKING, 0);
    if (created != CUDA_SUCCESS) {
        s->legacy.obj = NULL;
        cr_hello_refuse(req, created, "the server cannot create a stream for the session");
        CR_WARN("session %llu: refused %s from %s: no stream", (unsigned long long)s->id, s->who,
                s->peer);
        return CR_ENOMEM;
    }
    cr_session_capture_output(s, s->legacy.obj);
    cr_reply_t r;
    if (cr_reply_begin(req, &r, CUDA_SUCCESS, 1) != 0)
        return CR_ENOMEM;
    /* the tenant sees its own slice of the device */
    uint64_t quota = __atomic_load_n(&tenant->quota, __ATOMIC_RELAXED);
    uint64_t total_mem = quota && quota < b->desc.total_mem ? quota : b->desc.total_mem;
    msgpack_pack_map(&r.pk, 9);
    cr_mp_pack_str(&r.pk, "protocol");
    msgpack_pack_int(&r.pk, CR_PROTOCOL_VERSION);
    cr_mp_pack_str(&r.pk, "server");
    cr_mp_pack_str(&r.pk, "cuda-remoted " CR_VERSION);
    cr_mp_pack_str(&r.pk, "backend");
    cr_mp_pack_str(&r.pk, b->kind);
    cr_mp_pack_str(&r.pk, "driver_version");
    msgpack_pack_int(&r.pk, b->driver_version);
    cr_mp_pack_str(&r.pk, "session");
    msgpack_pack_uint64(&r.pk, s->id);
    cr_mp_pack_str(&r.pk, "devices");
    msgpack_pack_array(&r.pk, 1); /* one server per GPU */
    msgpack_pack_map(&r.pk, 4);
    cr_mp_pack_str(&r.pk, "name");
    cr_mp_pack_str(&r.pk, b->desc.name);
    cr_mp_pack_str(&r.pk, "uuid");
    msgpack_pack_bin(&r.pk, 16);
    msgpack_pack_bin_body(&r.pk, b->desc.uuid.bytes, 16);
    cr_mp_pack_str(&r.pk, "total_mem");
    msgpack_pack_uint64(&r.pk, total_mem);
    cr_mp_pack_str(&r.pk, "attributes");
    msgpack_pack_array(&r.pk, CU_DEVICE_ATTRIBUTE_MAX);
    for (int i = 0; i < CU_DEVICE_ATTRIBUTE_MAX; i++)
        msgpack_pack_int(&r.pk, b->desc.attrs[i]);
    cr_mp_pack_str(&r.pk, "export_tables");
    uint32_t tables = 0;
    for (int i = 0; i < CR_EXPORT_TABLE_COUNT; i++)
        tables += b->export_table_size[i] >= 0;
    msgpack_pack_array(&r.pk, tables);
    for (int i = 0; i < CR_EXPORT_TABLE_COUNT; i++) {
        if (b->export_table_size[i] < 0)
            continue;
        msgpack_pack_array(&r.pk, 2);
        msgpack_pack_bin(&r.pk, 16);
        msgpack_pack_bin_body(&r.pk, cr_export_table_desc(i)->uuid, 16);
        msgpack_pack_uint32(&r.pk, (uint32_t)b->export_table_size[i]);
    }
    cr_mp_pack_str(&r.pk, "device_windows");
    if (b->window_size) {
        msgpack_pack_array(&r.pk, 1);
        msgpack_pack_array(&r.pk, 2);
        msgpack_pack_uint64(&r.pk, b->window_base);
        msgpack_pack_uint64(&r.pk, b->window_size);
    } else {
        msgpack_pack_array(&r.pk, 0);
    }
    uint64_t host_base, host_size;
    cr_host_window_get(&host_base, &host_size);
    cr_mp_pack_str(&r.pk, "host_window"); /* where shared regions may lie at one address */
    msgpack_pack_array(&r.pk, 2);
    msgpack_pack_uint64(&r.pk, host_base);
    msgpack_pack_uint64(&r.pk, host_size);
    cr_reply_send(req, &r, 0);
    s->hello_done = 1;
    pthread_mutex_lock(&s->lock);
    s->listed = 1;
    pthread_mutex_unlock(&s->lock);
    CR_INFO("session %llu: %s connected from %s as tenant %s by %s (%s)", (unsigned long long)s->id,
            s->who, s->peer, tenant->name, s->auth, client[0] ? client : "unknown client");
    return 0;
}

/* @hello: the first answers the admitted session, which ends when that fails; a second
 * is a client's mistake. */
void cr_srv_hello(cr_request_t *req)
{
    cr_session_t *s = req->session;
    if (s->hello_done) {
        cr_request_finish(req, CUDA_ERROR_INVALID_VALUE);
        return;
    }
    if (answer_hello(s, req) != 0)
        cr_server_close_connection(s);
    cr_request_free(req);
}
