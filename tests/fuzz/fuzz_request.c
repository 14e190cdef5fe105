/* libFuzzer target: what a client can send the server, run through the server's own code
 * (the executor and hello, dispatch.c's request decoding and generic unmarshaller
 * over the generated descriptors, the hand-written handlers' argument parsing, shm.c,
 * status.c) on the emulated device, in-process. This file stands in for server.c's loop:
 * it creates each session as the loop does for a new connection, passes frames in through
 * cr_executor_submit as the loop does once a frame is complete, and receives what the
 * server sends through its own cr_server_send.
 *
 * Feeds: one connection per input. The input is one byte of session options (bit 0: the
 * client is tenant "small", with a 1 MiB quota, else tenant "big") and then frames, each
 *   u8 flags     bits 0-2: the frame's flags (CR_FRAME_REPLY, CR_FRAME_ASYNC and
 *                CR_FRAME_PARTIAL; the loop refuses the first and the last), bit 3: an
 *                @shm_attach passes a memfd that is not sealed against shrinking, bit 4:
 *                it passes no descriptor at all
 *   u16 opcode, u16 body length, u32 bulk length (little-endian; cut to what is left),
 *   then the body and the bulk bytes.
 * The call id of a frame is its position (the hello is 1). A hello is sent first unless the
 * first frame is one. Each frame passes the loop's own checks (cr_frame_decode, the bulk
 * limit of its opcode, no reply flags), and a frame the loop would refuse ends the
 * connection as it would. An @host_func_done is answered on the loop (cr_dispatch_on_loop)
 * as by the server, with its body length field as the call id it answers and no body. Every @host_func
 * the server asks for is answered, as a live client does. After the last frame a @status
 * request follows; once it is answered (or the server asked to close the connection) the
 * connection closes (cr_session_close) and the harness waits until the session's executor
 * has released everything. tests/fuzz/make_corpus.py writes the seeds in this format.
 *
 * Checks: every message the server sends is a frame a client can read: its header decodes
 * and states the lengths sent, its body passes cr_mpcheck and is a msgpack array, replies
 * and @d2h_data begin with a CUresult, bulk bytes are readable to their stated length; a
 * reply answers a request that was sent, with that request's opcode, and nothing follows
 * its final frame; a successful reply of a generically marshalled call carries one element
 * per output parameter of its descriptor; @host_func for a call sent, or for a graph's host
 * node under a call id of the server's; @d2h_data only for asynchronous device-to-host
 * copies; nothing is sent once the session has ended. Unless the connection was closed
 * early, every request that waits got exactly one final reply. Once the session has ended,
 * its tenant is charged nothing and holds no session, and the device has exactly the free
 * memory it had before the input: whatever a client does, the server keeps nothing of it.
 *
 * FUZZ_REQUEST_VERBOSE=1 prints every frame in and message out (to write seeds with). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "dispatch.h"
#include "error.h"
#include "fuzz_check.h"
#include "guard.h"
#include "handlers.h"
#include "log.h"
#include "loop.h"
#include "mpcheck.h"
#include "protocol.h"
#include "scheduler.h"
#include "session.h"
#include "status.h"
#include "tenants.h"
#include "waiter.h"

#define MAX_FRAMES 128
#define MAX_CALLS (MAX_FRAMES + 2) /* the frames, a hello made here and the @status */
#define SHM_REGION_BYTES (64u << 10)
#define STATUS_WAIT_SECONDS 5
#define SHM_UNSEALED 0x08 /* input frame flags beside the frame's own */
#define SHM_NO_FD 0x10
#define TOKEN_BIG "fuzz-token-big-tenant"
#define TOKEN_SMALL "fuzz-token-small-tenant"

typedef struct {
    uint16_t opcode;
    uint8_t waits;  /* the client waits: exactly one final reply is due */
    uint8_t finals; /* final (not CR_FRAME_PARTIAL) replies or @d2h_data frames seen */
} call_t;

/* The connection of the input being run. The lock orders the loop's view (this thread)
 * against the server's threads that send. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    cr_session_t *session;
    call_t calls[MAX_CALLS + 1]; /* by call id */
    uint32_t ncalls;
    uint64_t asks[MAX_CALLS]; /* @host_func call ids not answered yet */
    unsigned nasks;
    uint32_t status_call; /* the closing @status request */
    int status_answered;
    int admitted;        /* its hello named a tenant: it has an executor */
    int close_requested; /* the server asked to close the connection */
    int restart_requested;
} conn = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static cr_backend_t backend;
static size_t baseline_free; /* device memory free with no session */
static int verbose;

/* --- the server's side of the loop (server.c's interface, as the session code uses it) --- */

/* Output count of a generically marshalled call, -1 for other opcodes. */
static int generic_outputs(unsigned op)
{
    const cr_dispatch_entry_t *e = op < CR_OP_COUNT ? &cr_dispatch_table[op] : NULL;
    if (!e || e->hand || !e->desc)
        return -1;
    int n = 0;
    for (int i = 0; i < e->desc->param_count; i++) {
        uint8_t k = e->desc->params[i].kind;
        n += k == CR_P_OUT || k == CR_P_OUT_HANDLE || k == CR_P_INOUT || k == CR_P_OUT_ARRAY ||
             k == CR_P_OUT_STR;
    }
    return n;
}

static void show(const char *dir, const cr_frame_header_t *h, const msgpack_object *body)
{
    fprintf(stderr, "%s %s (%u) call %llu flags %x bulk %llu: ", dir, cr_opcode_name(h->opcode),
            h->opcode, (unsigned long long)h->call_id, h->flags, (unsigned long long)h->bulk_len);
    if (body)
        msgpack_object_print(stderr, *body);
    fputc('\n', stderr);
}

static volatile uint8_t sink;

/* Every message is checked as the client would read it. Called with conn.lock held. */
static void check_message(cr_session_t *s, const cr_outmsg_t *m)
{
    FUZZ_CHECK(s != NULL && s == conn.session);
    FUZZ_CHECK(m->head.len >= CR_FRAME_HEADER_SIZE);
    cr_frame_header_t h;
    FUZZ_CHECK_EQ(cr_frame_decode(m->head.data, &h), 0);
    FUZZ_CHECK_EQ(h.body_len, m->head.len - CR_FRAME_HEADER_SIZE);
    FUZZ_CHECK_EQ(h.bulk_len, m->bulk_len);
    FUZZ_CHECK(m->bulk_len == 0 || m->bulk != NULL);
    uint8_t x = 0;
    for (size_t i = 0; i < m->bulk_len; i++) /* still there: ASan says if not */
        x ^= ((const uint8_t *)m->bulk)[i];
    sink ^= x;

    const uint8_t *body = m->head.data + CR_FRAME_HEADER_SIZE;
    FUZZ_CHECK_EQ(cr_mpcheck(body, h.body_len), 0);
    msgpack_zone zone;
    msgpack_zone_init(&zone, 1024);
    msgpack_object root;
    size_t off = 0;
    FUZZ_CHECK_EQ(msgpack_unpack((const char *)body, h.body_len, &off, &zone, &root),
                  MSGPACK_UNPACK_SUCCESS);
    FUZZ_CHECK_EQ(off, h.body_len);
    FUZZ_CHECK_EQ(root.type, MSGPACK_OBJECT_ARRAY);
    if (verbose)
        show("<-", &h, &root);
    const msgpack_object_array *a = &root.via.array;
    int has_result = a->size > 0 && (a->ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
                                     a->ptr[0].type == MSGPACK_OBJECT_NEGATIVE_INTEGER);
    int final = !(h.flags & CR_FRAME_PARTIAL);
    call_t *c = h.call_id >= 1 && h.call_id <= conn.ncalls ? &conn.calls[h.call_id] : NULL;

    if (h.flags & CR_FRAME_REPLY) {
        /* (some handlers answer a request sent as asynchronous too: harmless, the client
         * never sends those so) */
        FUZZ_CHECK(c != NULL);
        FUZZ_CHECK_EQ(h.opcode, c->opcode);
        FUZZ_CHECK_EQ(c->finals, 0);
        FUZZ_CHECK(has_result);
        c->finals += final;
        int outputs = generic_outputs(h.opcode);
        if (final && outputs >= 0 && a->ptr[0].via.u64 == CUDA_SUCCESS)
            FUZZ_CHECK_EQ(a->size, 1 + (unsigned)outputs);
        if (c == &conn.calls[conn.status_call])
            conn.status_answered = 1;
        pthread_cond_broadcast(&conn.cond);
    } else {
        switch (h.opcode) {
        case CR_OP_D2H_DATA:
            /* a device-to-host copy sent without waiting, whichever of the two opcodes */
            FUZZ_CHECK(c != NULL && !c->waits);
            FUZZ_CHECK(c->opcode == CR_OP_cuMemcpyDtoH_v2 ||
                       c->opcode == CR_OP_cuMemcpyDtoHAsync_v2 ||
                       c->opcode == CR_OP_cuMemcpy3D_v2 || c->opcode == CR_OP_cuMemcpy3DAsync_v2);
            FUZZ_CHECK_EQ(c->finals, 0);
            FUZZ_CHECK(has_result);
            c->finals += final;
            break;
        case CR_OP_HOST_FUNC:
            /* for a call the client made, or for a graph's host node [host id] under a
             * call id of the server's own */
            FUZZ_CHECK(a->size == 0 || a->size == 1);
            FUZZ_CHECK(a->size == 0 ? c != NULL : h.call_id >= (1ull << 62));
            FUZZ_CHECK(conn.nasks < MAX_CALLS);
            conn.asks[conn.nasks++] = h.call_id;
            pthread_cond_broadcast(&conn.cond);
            break;
        case CR_OP_CONTEXT_ERROR:
            FUZZ_CHECK(has_result);
            break;
        case CR_OP_DEVICE_OUTPUT:
            break;
        default:
            FUZZ_CHECK(!"a message the client does not know");
        }
    }
    msgpack_zone_destroy(&zone);
}

void cr_server_send(cr_session_t *s, cr_outmsg_t *m)
{
    if (m->head.len) {
        pthread_mutex_lock(&conn.lock);
        check_message(s, m);
        pthread_mutex_unlock(&conn.lock);
    }
    /* written: the sender's release runs outside our lock, as after a socket write */
    if (m->release)
        m->release(m->release_arg);
    cr_buf_free(&m->head);
    free(m);
}

void cr_outbox_free(cr_session_t *s)
{
    (void)s; /* this connection has no TLS and writes nothing it must keep */
}

void cr_server_wake(cr_session_t *s)
{
    /* output is written at once here: a wake-up only matters to a paused connection */
    pthread_mutex_lock(&conn.lock);
    FUZZ_CHECK(s == conn.session);
    pthread_cond_broadcast(&conn.cond);
    pthread_mutex_unlock(&conn.lock);
}

void cr_server_close_connection(cr_session_t *s)
{
    pthread_mutex_lock(&conn.lock);
    FUZZ_CHECK(s == conn.session);
    if (verbose)
        fprintf(stderr, "the server closes the connection\n");
    conn.close_requested = 1;
    pthread_cond_broadcast(&conn.cond);
    pthread_mutex_unlock(&conn.lock);
}

static void on_context_lost(void)
{
    /* only a lost device context restarts the server, and the emulated device here
     * confines a kernel fault to its session */
    pthread_mutex_lock(&conn.lock);
    conn.restart_requested = 1;
    pthread_mutex_unlock(&conn.lock);
}

/* --- the loop's side ------------------------------------------------------------------- */

/* Answers the host functions the server asked the client to run (conn.lock held). */
static void answer_host_functions(void)
{
    while (conn.nasks) {
        uint64_t id = conn.asks[--conn.nasks];
        cr_session_t *s = conn.session;
        pthread_mutex_unlock(&conn.lock);
        cr_host_func_done(s, id);
        pthread_mutex_lock(&conn.lock);
    }
}

/* A client's memfd for @shm_attach, sealed as the client seals it unless told otherwise. */
static int shm_fd(unsigned flags)
{
    if (flags & SHM_NO_FD)
        return -1;
    int fd = memfd_create("fuzz-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, SHM_REGION_BYTES) != 0 ||
        (!(flags & SHM_UNSEALED) && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Waits, as the loop does for a paused connection, until the executor asks for more input
 * (resume_reading, then cr_server_wake), answering host functions meanwhile. Returns 0, or
 * -1 when the server asked to close instead or never resumed. */
static int wait_for_resume(cr_session_t *s)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += STATUS_WAIT_SECONDS;
    pthread_mutex_lock(&conn.lock);
    for (;;) {
        answer_host_functions();
        int resume = cr_unsent_take_resume(s); /* as the loop's flush does */
        if (resume || conn.close_requested ||
            pthread_cond_timedwait(&conn.cond, &conn.lock, &until) != 0) {
            pthread_mutex_unlock(&conn.lock);
            return resume ? 0 : -1;
        }
    }
}

/* One received frame, as server.c's start_request and complete() treat it; `answers` is
 * the call id an @host_func_done names. Returns 0, or -1 when the loop would close the
 * connection or stop reading it. */
static int receive(cr_session_t *s, unsigned flags, uint16_t opcode, const uint8_t *body,
                   uint32_t body_len, const uint8_t *bulk, uint32_t bulk_len, uint64_t answers)
{
    uint64_t call_id;
    pthread_mutex_lock(&conn.lock);
    if (conn.ncalls == MAX_CALLS) {
        pthread_mutex_unlock(&conn.lock);
        return -1;
    }
    call_id = ++conn.ncalls;
    int admitted = conn.admitted;
    /* the hello that asks for admission is answered even when sent as asynchronous;
     * @host_func_done never is */
    int waits = (!admitted && opcode == CR_OP_HELLO) ||
                (!(flags & CR_FRAME_ASYNC) && opcode != CR_OP_HOST_FUNC_DONE);
    conn.calls[call_id] = (call_t){opcode, (uint8_t)waits, 0};
    pthread_mutex_unlock(&conn.lock);

    cr_frame_header_t h = {CR_PROTOCOL_VERSION,
                           opcode,
                           flags & CR_FRAME_KNOWN_FLAGS,
                           body_len,
                           opcode == CR_OP_HOST_FUNC_DONE ? answers : call_id,
                           bulk_len};
    uint8_t raw[CR_FRAME_HEADER_SIZE];
    cr_frame_encode(&h, raw);
    if (cr_frame_decode(raw, &h) != 0)
        return -1;
    if (cr_frame_admissible(&h, admitted) != 0 || (h.flags & (CR_FRAME_REPLY | CR_FRAME_PARTIAL)))
        return -1;
    cr_request_t *req = cr_request_new(s, &h);
    FUZZ_CHECK(req != NULL);
    memcpy(req->body, body, body_len);
    if (bulk_len)
        memcpy(req->bulk, bulk, bulk_len);
    if (cr_dispatch_on_loop(req)) /* @host_func_done: answered in the loop, never submitted */
        return 0;
    if (verbose)
        show("->", &h, NULL);
    if (!admitted) {
        char why[256];
        if (cr_session_admit(s, req, why, sizeof why) != 0) { /* the refusal is sent */
            if (verbose)
                fprintf(stderr, "refused: %s\n", why);
            cr_request_free(req);
            return -1;
        }
        pthread_mutex_lock(&conn.lock);
        conn.admitted = 1;
        pthread_mutex_unlock(&conn.lock);
    }
    if (h.opcode == CR_OP_SHM_ATTACH)
        req->fd = shm_fd(flags);
    if (cr_executor_submit(s, req)) { /* paused: the loop reads on once the executor asks */
        if (verbose)
            fprintf(stderr, "reading paused\n");
        return wait_for_resume(s);
    }
    return 0;
}

static void pack_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* The hello a client sends first. */
static void send_hello(cr_session_t *s, int small)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 7);
    pack_str(&pk, "protocol");
    msgpack_pack_int(&pk, CR_PROTOCOL_VERSION);
    pack_str(&pk, "cuda_version");
    msgpack_pack_int(&pk, 13000);
    pack_str(&pk, "client");
    pack_str(&pk, "fuzz_request");
    pack_str(&pk, "pid");
    msgpack_pack_int(&pk, 1);
    pack_str(&pk, "host");
    pack_str(&pk, "fuzz");
    pack_str(&pk, "program");
    pack_str(&pk, "/fuzz/request");
    pack_str(&pk, "token");
    pack_str(&pk, small ? TOKEN_SMALL : TOKEN_BIG);
    receive(s, 0, CR_OP_HELLO, (const uint8_t *)sb.data, (uint32_t)sb.size, NULL, 0, 0);
    msgpack_sbuffer_destroy(&sb);
}

static uint32_t le(const uint8_t *p, int n)
{
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Closes the connection as the loop does (cr_session_close, then the loop's reference
 * goes) once the executor of an admitted session has finished: it ends after every task of
 * the session, releasing what the session held, and says so by leaving its tenant's count
 * of sessions. Other references may outlive it: the emulated device keeps a stream, and
 * with it the session's output capture, for as long as a recorded event still names that
 * stream (sched.c keeps its timing events for reuse), so the session itself may be freed
 * later, by whoever lets go of it last. */
static void close_connection(cr_session_t *s, int admitted)
{
    cr_session_close(s, "end of the fuzz input");
    while (admitted && __atomic_load_n(&cr_session_tenant(s)->sessions, __ATOMIC_ACQUIRE) != 0) {
        struct timespec pause = {0, 20000};
        nanosleep(&pause, NULL);
    }
    cr_session_unref(s);
}

static void tenant_idle(const cr_tenant_t *t, void *arg)
{
    (void)arg;
    FUZZ_CHECK_EQ(__atomic_load_n(&t->used, __ATOMIC_RELAXED), 0);
    FUZZ_CHECK_EQ(__atomic_load_n(&t->sessions, __ATOMIC_RELAXED), 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t status_body[] = {0x90}; /* [] */
    static uint64_t next_session;
    if (size < 1)
        return 0;
    int small = data[0] & 1;
    const uint8_t *p = data + 1, *end = data + size;

    pthread_mutex_lock(&conn.lock);
    memset(conn.calls, 0, sizeof conn.calls);
    conn.ncalls = conn.nasks = conn.status_call = 0;
    conn.status_answered = conn.close_requested = conn.restart_requested = 0;
    conn.admitted = 0;
    cr_session_t *s = conn.session = cr_session_new(NULL, &backend, ++next_session, "fuzz");
    pthread_mutex_unlock(&conn.lock);
    FUZZ_CHECK(s != NULL);

    int refused = 0;
    if (end - p < 3 || le(p + 1, 2) != CR_OP_HELLO)
        send_hello(s, small);
    for (unsigned n = 0; n < MAX_FRAMES && end - p >= 9 && !refused; n++) {
        unsigned flags = p[0];
        uint16_t opcode = (uint16_t)le(p + 1, 2);
        uint32_t body_len = le(p + 3, 2), bulk_len = le(p + 5, 4);
        uint64_t answers = 0;
        p += 9;
        if (opcode == CR_OP_HOST_FUNC_DONE) { /* the length field names a call instead */
            answers = body_len;
            body_len = 0;
        }
        if (body_len > (size_t)(end - p))
            body_len = (uint32_t)(end - p);
        const uint8_t *body = p;
        p += body_len;
        if (bulk_len > (size_t)(end - p))
            bulk_len = (uint32_t)(end - p);
        const uint8_t *bulk = p;
        p += bulk_len;
        refused = receive(s, flags, opcode, body, body_len, bulk, bulk_len, answers) != 0;
        pthread_mutex_lock(&conn.lock);
        refused |= conn.close_requested; /* the loop stops reading a closing connection */
        answer_host_functions();
        pthread_mutex_unlock(&conn.lock);
    }
    if (!refused) {
        pthread_mutex_lock(&conn.lock);
        conn.status_call = conn.ncalls + 1;
        pthread_mutex_unlock(&conn.lock);
        receive(s, 0, CR_OP_STATUS, status_body, sizeof status_body, NULL, 0, 0);
    }

    /* the client waits for its last answer, running host functions meanwhile; a kernel
     * that never ends is libFuzzer's -timeout to catch */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += STATUS_WAIT_SECONDS;
    pthread_mutex_lock(&conn.lock);
    while (!refused && !conn.status_answered && !conn.close_requested) {
        answer_host_functions();
        if (pthread_cond_timedwait(&conn.cond, &conn.lock, &until) != 0)
            break;
    }
    int complete = !refused && conn.status_answered && !conn.close_requested;
    int admitted = conn.admitted;
    pthread_mutex_unlock(&conn.lock);
    close_connection(s, admitted);

    pthread_mutex_lock(&conn.lock);
    conn.session = NULL;
    if (complete) /* every call the client waits for was answered */
        for (uint32_t id = 1; id <= conn.ncalls; id++)
            if (conn.calls[id].waits && conn.calls[id].finals != 1) {
                fprintf(stderr, "call %u (%s) got %u final replies\n", id,
                        cr_opcode_name(conn.calls[id].opcode), conn.calls[id].finals);
                FUZZ_CHECK(!"a waiting call without exactly one final reply");
            }
    FUZZ_CHECK(!conn.restart_requested);
    pthread_mutex_unlock(&conn.lock);

    /* nothing of the session is left: its tenant's charges and the device's memory (which
     * the emulated device frees behind the work queued before, on a thread of its own) */
    cr_tenants_foreach(tenant_idle, NULL);
    size_t free_bytes = 0, total = 0;
    for (int tries = 0;; tries++) {
        FUZZ_CHECK_EQ(backend.d.cuMemGetInfo_v2(&free_bytes, &total), CUDA_SUCCESS);
        if (free_bytes == baseline_free || tries == 1000)
            break;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    FUZZ_CHECK_EQ(free_bytes, baseline_free);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    verbose = getenv("FUZZ_REQUEST_VERBOSE") != NULL;
    cr_log_init("fuzz_request", verbose ? CR_LOG_DEBUG : CR_LOG_OFF, 0);

    /* two tenants: one with the whole device, one with a small quota that fills fast */
    char path[] = "/tmp/fuzz_request_tenants_XXXXXX";
    int fd = mkstemp(path);
    FUZZ_CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    FUZZ_CHECK(f != NULL);
    fprintf(f,
            "{\"tenants\": [{\"name\": \"big\", \"token\": \"%s\", \"admin\": true},"
            " {\"name\": \"small\", \"token\": \"%s\", \"memory\": \"1MiB\", \"weight\": 2,"
            " \"priority\": \"high\"}]}\n",
            TOKEN_BIG, TOKEN_SMALL);
    fclose(f);
    char err[512];
    int rc = cr_tenants_load(path, err, sizeof err);
    unlink(path);
    if (rc != 0) {
        fprintf(stderr, "fuzz_request: tenants: %s\n", err);
        abort();
    }

    /* a small emulated device: what inputs allocate is real host memory */
    cr_backend_options_t opt = {.kind = "emu", .emu_memory = (uint64_t)64 << 20};
    if (cr_backend_open(&opt, &backend, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_request: backend: %s\n", err);
        abort();
    }
    /* small bounds on what a session may have queued either way, so that inputs reach the
     * code that pauses reading and holds an executor back for unread output */
    cr_guard_limits_t limits = *cr_guard_limits();
    limits.unsent = 256u << 10;
    limits.tenant_queued = 256u << 10;
    cr_guard_configure(&limits);
    cr_session_set_input_limit(128u << 10);
    cr_status_start();
    cr_waiter_init(&backend);
    cr_context_loss_on_lost(on_context_lost);
    FUZZ_CHECK_EQ(cr_sched_start(&backend), 0);
    cr_backend_bind_thread(&backend); /* this thread plays the loop, which is bound too */
    size_t total;
    FUZZ_CHECK_EQ(backend.d.cuMemGetInfo_v2(&baseline_free, &total), CUDA_SUCCESS);
    return 0;
}
