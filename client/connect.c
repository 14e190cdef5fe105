/* Connecting (connect.h): the address, the connection, and the hello exchange, whose reply
 * describes the server (its driver version, backend, devices, export tables and device
 * address windows) into the client record.
 *
 * Threads: the thread in cuInit, under cuInit's lock. Waits for the connection (10 s at
 * most) and for the hello's reply. */
#include "connect.h"

#include <stdio.h>
#include <string.h>

#include "error.h"
#include "hello.h"
#include "log.h"
#include "mpfield.h"
#include "request.h"
#include "version.h"

/* Lets the server refuse to load this stub as its "real" driver; the hello names it. */
__attribute__((visibility("default"))) const char cr_remote_stub_version[] =
    "cuda-remote " CR_VERSION;

static int parse_device(const msgpack_object *o, cr_device_t *d)
{
    const msgpack_object *name = cr_mp_field(o, "name"), *uuid = cr_mp_field(o, "uuid");
    const msgpack_object *mem = cr_mp_field(o, "total_mem");
    const msgpack_object *attrs = cr_mp_field(o, "attributes");
    if (!name || !uuid || uuid->type != MSGPACK_OBJECT_BIN || uuid->via.bin.size != 16 || !mem ||
        mem->type != MSGPACK_OBJECT_POSITIVE_INTEGER || !attrs ||
        attrs->type != MSGPACK_OBJECT_ARRAY)
        return CR_EPROTO;
    cr_mp_copy_str(d->name, sizeof d->name, name);
    memcpy(d->uuid.bytes, uuid->via.bin.ptr, 16);
    d->total_mem = mem->via.u64;
    memset(d->attrs, 0, sizeof d->attrs);
    for (uint32_t i = 0; i < attrs->via.array.size && i < CU_DEVICE_ATTRIBUTE_MAX; i++) {
        const msgpack_object *a = &attrs->via.array.ptr[i];
        if (a->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
            a->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
            d->attrs[i] = (int)a->via.i64;
    }
    return 0;
}

/* [[uuid, size]...]: the export tables the server's driver has; the others it lacks. */
static void parse_export_tables(cr_client_t *cl, const msgpack_object *list)
{
    for (int i = 0; i < CR_EXPORT_TABLE_COUNT; i++)
        cl->export_table_size[i] = -1;
    if (!list || list->type != MSGPACK_OBJECT_ARRAY)
        return;
    for (uint32_t k = 0; k < list->via.array.size; k++) {
        const msgpack_object *e = &list->via.array.ptr[k];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 2 ||
            e->via.array.ptr[0].type != MSGPACK_OBJECT_BIN ||
            e->via.array.ptr[0].via.bin.size != 16 ||
            e->via.array.ptr[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
            e->via.array.ptr[1].via.u64 > INT32_MAX) /* a table past our slots is clamped */
            continue;
        for (int i = 0; i < CR_EXPORT_TABLE_COUNT; i++)
            if (memcmp(cr_export_table_desc(i)->uuid, e->via.array.ptr[0].via.bin.ptr, 16) == 0)
                cl->export_table_size[i] = (int32_t)e->via.array.ptr[1].via.u64;
    }
}

/* One [base, size] of the hello, size not 0; 0 when w is not such. */
static int parse_window(const msgpack_object *w, cr_device_window_t *out)
{
    if (!w || w->type != MSGPACK_OBJECT_ARRAY || w->via.array.size != 2 ||
        w->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        w->via.array.ptr[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        w->via.array.ptr[1].via.u64 == 0)
        return 0;
    *out = (cr_device_window_t){w->via.array.ptr[0].via.u64, w->via.array.ptr[1].via.u64};
    return 1;
}

/* [[base, size]...]: where the server's device addresses lie; empty windows say nothing. */
static void parse_windows(cr_client_t *cl, const msgpack_object *list)
{
    cl->window_count = 0;
    if (!list || list->type != MSGPACK_OBJECT_ARRAY)
        return;
    for (uint32_t i = 0; i < list->via.array.size && cl->window_count < CR_MAX_DEVICE_WINDOWS; i++)
        cl->window_count += parse_window(&list->via.array.ptr[i], &cl->windows[cl->window_count]);
}

/* Says hello and reads the server's description. Returns a CUresult; *message explains a
 * refusal. */
static CUresult hello(cr_client_t *cl, char *message, size_t message_len)
{
    cr_msg_t m;
    cr_pending_t p = {0};
    msgpack_unpacked u;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_HELLO);
    if (err) { /* e.g. TLS: the server refused our certificate right after the handshake */
        const char *lost = cr_conn_why(cl->conn);
        snprintf(message, message_len, "%s", lost ? lost : cr_strerror(err));
        return cr_transport_error(err);
    }
    cr_hello_pack(&m.pk, CR_CUDA_VERSION, cr_remote_stub_version, NULL);

    CUresult r = cr_call(&m, &p, &u);
    if (r != CUDA_SUCCESS) {
        cr_hello_refusal(&u.data, message, message_len);
        const char *lost = cr_conn_why(cl->conn); /* e.g. TLS: the server refused our certificate */
        if (!message[0] && lost) /* no refusal came: what ended the connection says why */
            snprintf(message, message_len, "%s", lost);
        cr_reply_done(&p, &u);
        return r;
    }
    const msgpack_object *info = u.data.via.array.size >= 2 ? &u.data.via.array.ptr[1] : NULL;
    const msgpack_object *ver = info ? cr_mp_field(info, "driver_version") : NULL;
    const msgpack_object *devs = info ? cr_mp_field(info, "devices") : NULL;
    if (!ver || ver->type != MSGPACK_OBJECT_POSITIVE_INTEGER || !devs ||
        devs->type != MSGPACK_OBJECT_ARRAY) {
        cr_reply_done(&p, &u);
        snprintf(message, message_len, "malformed hello reply");
        return CUDA_ERROR_UNKNOWN;
    }
    cl->server_driver_version = (int)ver->via.u64;
    cr_mp_copy_str(cl->backend, sizeof cl->backend, cr_mp_field(info, "backend"));
    cl->device_count = 0;
    for (uint32_t i = 0; i < devs->via.array.size && i < CR_MAX_DEVICES; i++) {
        if (parse_device(&devs->via.array.ptr[i], &cl->devices[i]) != 0) {
            cr_reply_done(&p, &u);
            snprintf(message, message_len, "malformed device description");
            return CUDA_ERROR_UNKNOWN;
        }
        cl->device_count++;
    }
    parse_export_tables(cl, cr_mp_field(info, "export_tables"));
    parse_windows(cl, cr_mp_field(info, "device_windows"));
    if (!parse_window(cr_mp_field(info, "host_window"), &cl->host_window))
        cl->host_window = (cr_device_window_t){0, 0};
    cr_reply_done(&p, &u);
    return cl->device_count > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult cr_connect(cr_client_t *cl, const char *address)
{
    cr_address_t addr;
    char reason[256] = "";
    CUresult r;
    if (cr_address_parse(address, &addr) != 0) {
        CR_ERROR("CUDA_REMOTE_ADDR=%s is not an address (host:port, host, tls://host:port, or "
                 "unix:/path)",
                 address);
        return CUDA_ERROR_NO_DEVICE;
    }
    if (cr_conn_open(&addr, &cl->conn, reason, sizeof reason) != 0) {
        CR_ERROR("cannot reach cuda-remoted at %s: %s%s", address, reason,
                 strncmp(reason, "TLS", 3) ? " (set CUDA_REMOTE_ADDR)" : "");
        return CUDA_ERROR_NO_DEVICE;
    }
    cl->is_unix = addr.is_unix;
    if ((r = hello(cl, reason, sizeof reason)) != CUDA_SUCCESS) {
        if (r == CUDA_ERROR_NO_DEVICE && !reason[0])
            CR_ERROR("cuda-remoted at %s has no devices", address);
        else
            CR_ERROR("cuda-remoted at %s refused the connection: %s", address,
                     reason[0] ? reason : cr_cuda_error_name(r));
        return CUDA_ERROR_NO_DEVICE;
    }
    cr_conn_established(cl->conn);
    return CUDA_SUCCESS;
}
