/* Client state: cuInit (connect, hello, device enumeration), the driver version, error
 * strings, the per-thread default stream, and the helpers every call path shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "frame.h"
#include "internal.h"
#include "log.h"
#include "mpcheck.h"
#include "mpfield.h"
#include "version.h"

/* Lets the server refuse to load this stub as its "real" driver. */
__attribute__((visibility("default"))) const char cr_remote_stub_version[] = "cuda-remote " CR_VERSION;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_client_t client_state;
static cr_client_t *volatile client_ready; /* set once cuInit succeeded */
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;
static int init_tried;
/* Bumped when the primary context is reset: per-thread streams must then be recreated. */
static volatile unsigned stream_generation;

cr_client_t *cr_client(void)
{
    return client_ready;
}

CUresult cr_transport_error(int err)
{
    switch (err) {
    case 0:
        return CUDA_SUCCESS;
    case CR_ENOMEM:
        return CUDA_ERROR_OUT_OF_MEMORY;
    case CR_EBROKEN: /* a kernel fault: every call now fails with what broke the context */
        return client_ready ? (CUresult)cr_conn_context_error(client_ready->conn)
                            : CUDA_ERROR_LAUNCH_FAILED;
    default:
        /* after a context error the server closes the connection: calls that were waiting
         * then fail with that error too */
        if (client_ready && cr_conn_context_error(client_ready->conn))
            return (CUresult)cr_conn_context_error(client_ready->conn);
        /* the server is gone: the device is as unreachable as a lost GPU */
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
}

CUresult cr_unsupported(const char *name)
{
    /* one message per function: a small fixed table of names already reported */
    static const char *reported[256];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    int seen = 0, i = 0;
    for (; i < 256 && reported[i]; i++)
        if (reported[i] == name) {
            seen = 1;
            break;
        }
    if (!seen && i < 256)
        reported[i] = name;
    pthread_mutex_unlock(&lock);
    if (!seen)
        CR_WARN("%s is not supported by cuda-remote yet; returning CUDA_ERROR_NOT_SUPPORTED",
                name);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* The CUresult of a completed call whose transport result was err. */
static CUresult reply_result(int err, cr_pending_t *p, msgpack_unpacked *u)
{
    if (err)
        return cr_transport_error(err);
    size_t off = 0;
    if (cr_mpcheck(p->body.data, p->body.len) != 0 ||
        msgpack_unpack_next(u, (const char *)p->body.data, p->body.len, &off) !=
            MSGPACK_UNPACK_SUCCESS ||
        u->data.type != MSGPACK_OBJECT_ARRAY || u->data.via.array.size < 1 ||
        (u->data.via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER)) {
        CR_ERROR("malformed reply from the server");
        return CUDA_ERROR_UNKNOWN;
    }
    if (p->failed) /* the reply's bulk data did not fit where it was expected */
        return CUDA_ERROR_UNKNOWN;
    return (CUresult)u->data.via.array.ptr[0].via.u64;
}

CUresult cr_call(cr_msg_t *m, cr_pending_t *p, msgpack_unpacked *u)
{
    msgpack_unpacked_init(u);
    return reply_result(cr_msg_call(m, p), p, u);
}

void cr_call_start(cr_msg_t *m, cr_pending_t *p)
{
    cr_msg_call_start(m, p);
}

CUresult cr_call_finish(cr_pending_t *p, msgpack_unpacked *u)
{
    msgpack_unpacked_init(u);
    return reply_result(cr_pending_wait(p), p, u);
}

CUresult cr_call_fd(cr_msg_t *m, cr_pending_t *p, msgpack_unpacked *u, int fd)
{
    msgpack_unpacked_init(u);
    return reply_result(cr_msg_call_fd(m, p, fd), p, u);
}

void cr_reply_done(cr_pending_t *p, msgpack_unpacked *u)
{
    msgpack_unpacked_destroy(u);
    msgpack_unpacked_init(u);
    cr_pending_release(p);
}

/* --- hello -------------------------------------------------------------------------------- */

static int parse_device(const msgpack_object *o, cr_device_t *d)
{
    const msgpack_object *name = cr_mp_field(o, "name"), *uuid = cr_mp_field(o, "uuid");
    const msgpack_object *mem = cr_mp_field(o, "total_mem"), *attrs = cr_mp_field(o, "attributes");
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
        if (a->type == MSGPACK_OBJECT_POSITIVE_INTEGER || a->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
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

/* Says hello and reads the devices. Returns a CUresult; *message explains a refusal. */
static CUresult hello(cr_client_t *cl, char *message, size_t message_len)
{
    char host[256] = "", exe[512] = "";
    gethostname(host, sizeof host - 1);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    const char *token = getenv("CUDA_REMOTE_TOKEN");

    cr_msg_t m;
    cr_pending_t p = {0};
    msgpack_unpacked u;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_HELLO);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_map(&m.pk, 7);
    cr_mp_pack_str(&m.pk, "protocol");
    msgpack_pack_uint32(&m.pk, CR_PROTOCOL_VERSION);
    cr_mp_pack_str(&m.pk, "cuda_version");
    msgpack_pack_int(&m.pk, CR_CUDA_VERSION);
    cr_mp_pack_str(&m.pk, "client");
    cr_mp_pack_str(&m.pk, cr_remote_stub_version);
    cr_mp_pack_str(&m.pk, "pid");
    msgpack_pack_int(&m.pk, (int)getpid());
    cr_mp_pack_str(&m.pk, "host");
    cr_mp_pack_str(&m.pk, host);
    cr_mp_pack_str(&m.pk, "program");
    cr_mp_pack_str(&m.pk, exe);
    cr_mp_pack_str(&m.pk, "token");
    if (token)
        cr_mp_pack_str(&m.pk, token);
    else
        msgpack_pack_nil(&m.pk);

    CUresult r = cr_call(&m, &p, &u);
    if (r != CUDA_SUCCESS) {
        /* a refusal carries its reason as the second element */
        if (u.data.type == MSGPACK_OBJECT_ARRAY && u.data.via.array.size >= 2)
            cr_mp_copy_str(message, message_len, &u.data.via.array.ptr[1]);
        cr_reply_done(&p, &u);
        return r;
    }
    const msgpack_object *info = u.data.via.array.size >= 2 ? &u.data.via.array.ptr[1] : NULL;
    const msgpack_object *ver = info ? cr_mp_field(info, "driver_version") : NULL;
    const msgpack_object *devs = info ? cr_mp_field(info, "devices") : NULL;
    const msgpack_object *windows = info ? cr_mp_field(info, "device_windows") : NULL;
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
    if (windows && windows->type == MSGPACK_OBJECT_ARRAY) {
        for (uint32_t i = 0; i < windows->via.array.size; i++) {
            const msgpack_object *w = &windows->via.array.ptr[i];
            if (w->type == MSGPACK_OBJECT_ARRAY && w->via.array.size == 2 &&
                w->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                w->via.array.ptr[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                cr_reserve_device_window(w->via.array.ptr[0].via.u64, w->via.array.ptr[1].via.u64);
        }
    }
    cr_reply_done(&p, &u);
    return cl->device_count > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult cr_hand_cuInit(unsigned int flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&init_lock);
    if (client_ready || init_tried) {
        CUresult r = client_ready ? CUDA_SUCCESS : init_result;
        pthread_mutex_unlock(&init_lock);
        return r;
    }
    init_tried = 1;
    cr_log_init("cuda-remote", CR_LOG_WARN, 0);
    const char *text = getenv("CUDA_REMOTE_ADDR");
    if (!text || !*text)
        text = CR_DEFAULT_ADDR;
    cr_address_t addr;
    char reason[256] = "";
    CUresult r;
    if (cr_address_parse(text, &addr) != 0) {
        CR_ERROR("CUDA_REMOTE_ADDR=%s is not an address (host:port, host, or unix:/path)", text);
        r = CUDA_ERROR_NO_DEVICE;
    } else if (cr_conn_open(&addr, &client_state.conn, reason, sizeof reason) != 0) {
        CR_ERROR("cannot reach cuda-remoted at %s: %s (set CUDA_REMOTE_ADDR)", text, reason);
        r = CUDA_ERROR_NO_DEVICE;
    } else if ((r = hello(&client_state, reason, sizeof reason)) != CUDA_SUCCESS) {
        if (r == CUDA_ERROR_NO_DEVICE && !reason[0])
            CR_ERROR("cuda-remoted at %s has no devices", text);
        else
            CR_ERROR("cuda-remoted at %s refused the connection: %s", text,
                     reason[0] ? reason : cr_cuda_error_name(r));
        r = CUDA_ERROR_NO_DEVICE; /* what cudart expects of a driver without a device */
    } else {
        cr_conn_established(client_state.conn);
        cr_shm_start(client_state.conn, addr.is_unix);
        client_ready = &client_state;
    }
    init_result = r;
    pthread_mutex_unlock(&init_lock);
    return r;
}

CUresult cr_hand_cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = CR_CUDA_VERSION;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuGetErrorName(CUresult error, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    *str = cr_cuda_error_name(error);
    return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuGetErrorString(CUresult error, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    *str = cr_cuda_error_string(error);
    return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuProfilerInitialize(const char *config, const char *out, CUoutput_mode mode)
{
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuProfilerStart(void)
{
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuProfilerStop(void)
{
    return CUDA_SUCCESS;
}

/* Lazy, as NVIDIA's driver is by default (CUDA_MODULE_LOADING=EAGER asks for eager): cudart
 * then loads a fatbin when its first kernel is used, not every fatbin of every library at
 * the first context use, which would ship every image of cuBLAS across the network and
 * fail on one the device cannot load but the program never uses. */
CUresult cr_hand_cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    const char *asked = getenv("CUDA_MODULE_LOADING");
    *mode = asked && strcmp(asked, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING
                                                 : CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

/* --- default streams ---------------------------------------------------------------------- */

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

int cr_ptds_active(void)
{
    return tls_ptds;
}

static void destroy_thread_stream(void *value)
{
    uint64_t id = (uint64_t)(uintptr_t)value;
    if (id && cr_client() && tls_stream_generation == stream_generation) {
        cr_arg_t a[1] = {{.u = id}};
        cr_remote_call(&cr_desc_cuStreamDestroy_v2, a);
    }
}

static void make_stream_key(void)
{
    pthread_key_create(&stream_key, destroy_thread_stream);
}

void cr_client_reset_streams(void)
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
    CUresult r = cr_remote_call(&cr_desc_cuStreamCreate, a);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_once(&stream_key_once, make_stream_key);
    tls_stream_id = (uint64_t)(uintptr_t)created;
    tls_stream_generation = stream_generation;
    pthread_setspecific(stream_key, created);
    *id = tls_stream_id;
    return CUDA_SUCCESS;
}

/* A forked child shares the parent's socket: it must never write to it (a flush at its
 * exit would inject the parent's buffered requests twice). CUDA is unusable in a child
 * forked after initialisation, with or without cuda-remote. */
static void forget_connection_in_child(void)
{
    client_ready = NULL;
    init_tried = 1;
    init_result = CUDA_ERROR_NOT_INITIALIZED;
}

__attribute__((constructor)) static void watch_forks(void)
{
    pthread_atfork(NULL, NULL, forget_connection_in_child);
}

/* Sends what is still buffered when the program exits: the connection itself stays open
 * for cudart's exit handlers and closes with the process. */
__attribute__((destructor)) static void flush_at_exit(void)
{
    if (client_ready)
        cr_conn_flush(client_ready->conn);
}
