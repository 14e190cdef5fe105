/* libFuzzer target: what a client sends to a TLS listener, through the loop's own connection
 * code. This file includes server/connection.c itself, so that what runs is the server's
 * on_alloc, on_read, tls_input, tls_failed, feed and complete as they are; it stands in for
 * libuv's reads (each read lands in the buffer on_alloc gives, at most its size), for the
 * outbox (what the connection's cr_tls_t has to send is taken as cr_outbox_flush takes it)
 * and for the session (every hello is admitted, each complete request is dropped as its
 * executor would run it). The certificates are made here at start-up (P-256 keys, a CA, the
 * server's certificate for "fuzz.server" and a client's), and handed to
 * cr_tls_server_context and cr_tls_client_context as memory files (memfd): nothing is read
 * from or written to the disk.
 *
 * Feeds: one TCP connection per input.
 *   u8 options   bit 0: 0: the rest of the input is what the client sends, from its first
 *                byte (the handshake: ClientHello parsing, HelloRetryRequest, a plaintext
 *                client on a TLS port); 1: a real handshake with a client cr_tls_t comes
 *                first, and the rest of the input says what the client sends after it (below)
 *                bit 1: the server requires client certificates (--tls-client-ca); the client
 *                presents its certificate, or none (bit 2), or one another CA signed (bit 3)
 *                bit 4: the client trusts only that other CA: it refuses the server's
 *                certificate, and its alert is all it sends
 *   u8 reads     how the bytes are cut into reads: 0: each as large as the loop's read buffer;
 *                n in 1..127: sizes 1..n, n in 128..255: sizes 1..(n - 127) * 128, in an
 *                order that n seeds
 * After a real handshake (bit 0), the client's last handshake flight goes first (so that it
 * shares reads with what follows), then ops, each
 *   u8 op        bits 0-2: what to do with the bytes, bits 3-7: its argument a
 *   u16 length   (little-endian; cut to what is left), then that many bytes, which are
 *     0 SEAL    application data the client seals (cr_tls_seal), a bytes per record
 *               (a = 0: all at once; 16..31: (a - 15) KiB)
 *     1 RAW     bytes on the wire as they are
 *     2 FLIP    sealed, then one bit flipped (a < 5: in the record header; a < 21: in the
 *               tag; else in the ciphertext)
 *     3 REPLAY  sealed and sent twice
 *     4 DROP    sealed and never sent
 *     5 CUT     sealed, and only the first a/32 of it sent
 *     6 RECORD  a record of content type 20 + (a & 3) (change_cipher_spec, alert,
 *               handshake, application_data) around the bytes, unencrypted
 *     7 SWAP    sealed as two records, sent in the opposite order
 * tests/fuzz/make_corpus.py writes the seeds, among them a ClientHello of a client cr_tls_t
 * (FUZZ_TLS_HELLO=FILE fuzz_tls -runs=0 writes one to FILE). FUZZ_TLS_VERBOSE=1 says how each
 * connection went (to write seeds with).
 *
 * Checks, on every call the connection code makes into tls.h: `used` never exceeds the
 * input; cr_tls_handshake returns 1, 0 or a CR_E* code, takes all its input when it returns
 * 0, and never returns 1 to bytes alone (only a client that holds the keys finishes a
 * handshake); cr_tls_read returns at most cap bytes, or 0 having taken all its input with no
 * plaintext left inside, or a CR_E* code; cr_tls_why is one non-empty line after a failure;
 * and every read's buffer is taken whole while the connection stays open. The plaintext the
 * server reads is always a prefix of what the client sealed, in order: flipped, replayed,
 * dropped, reordered, cut or forged records never yield a byte. A stream of nothing but
 * sealed records is read whole, without a TLS failure, unless the frame code closed the
 * connection. After the handshake the server names the client's certificate (or none) and
 * TLS 1.3. What the server sends (cr_tls_take) is whole, well-formed records, at most
 * OUTPUT_MAX bytes for a whole connection, nothing after the handshake when the stream was
 * clean and at most one alert otherwise. A handshake without the required certificate, or
 * with one of another CA, or that the client refused, is refused as such. ASan and UBSan
 * watch it all, LeakSanitizer that each connection leaves nothing behind. */
#define _GNU_SOURCE /* as connection.c: memfd_create */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "buf.h"
#include "error.h"
#include "fuzz_check.h"
#include "loop_private.h" /* CR_READ_BUFFER */
#include "tls.h"

#define SERVER_NAME "fuzz.server"
#define CLIENT_CN "fuzz-client"
#define CLIENT_URI "spiffe://fuzz/client"
/* All a connection's server may send: a HelloRetryRequest, its flight (a certificate of a few
 * hundred bytes) and an alert come to about 1.5 KiB. */
#define OUTPUT_MAX 4096
/* An encrypted alert: header, two bytes, content type, tag, and room for padding. */
#define ALERT_MAX 64
#define TLS_RECORD_MAX (16384 + 256) /* ciphertext */

enum {
    OPT_AFTER_HANDSHAKE = 1,
    OPT_VERIFY = 2,
    OPT_NO_CERT = 4,
    OPT_ROGUE_CERT = 8,
    OPT_DISTRUST = 16,
};
/* The client: it presents no certificate, one the server's CA signed, one another CA signed;
 * or it trusts only that other CA (and refuses the server). */
enum { NO_CERT, GOOD_CERT, ROGUE_CERT, DISTRUST };
enum { SEAL, RAW, FLIP, REPLAY, DROP, CUT, RECORD, SWAP };

/* What the input being run expects, and what the checks have seen of it. */
static struct {
    int after_handshake;   /* a real handshake came first */
    int verify;            /* the server requires client certificates */
    int client;            /* NO_CERT, GOOD_CERT, ROGUE_CERT or DISTRUST */
    const uint8_t *sealed; /* the plaintext the client sealed, in order */
    size_t sealed_len;
    size_t received;   /* plaintext the server read so far: a prefix of sealed */
    size_t consumed;   /* ciphertext the calls took during the current read */
    size_t max_plain;  /* bytes the connection receives in all: no plaintext can exceed it */
    int ready;         /* the server's handshake finished */
    size_t sent;       /* ciphertext the server sent, in all */
    size_t sent_ready; /* ... of it after its handshake finished */
    int records_ready; /* records after its handshake finished */
    int tls_refused;   /* cr_guard_refuse(CR_GUARD_TLS, ...) */
    char refusal[400]; /* its detail */
    char closed[400];  /* why the session was closed ("" while open) */
    int session_freed; /* the session's last reference went */
    int direct_reads;  /* plaintext went straight into a request's bulk */
} run;

static cr_tls_context_t *server_ctx[2]; /* [verify] */
static cr_tls_context_t *client_ctx[4]; /* [client] */
static int verbose;                     /* FUZZ_TLS_VERBOSE */

/* --- what OpenSSL did, as coverage ------------------------------------------------------------ */

/* OpenSSL is not built with coverage, so libFuzzer sees little of how far an input got into
 * it. These counters, which libFuzzer reads beside its own, say it: each reason a call
 * failed for (cr_tls_why) and each kind of answer the server gave (the types of its
 * records, its alert, the cipher suite and group of its ServerHello or HelloRetryRequest)
 * counts as coverage, so that inputs that reach new ones are kept. */
__attribute__((used, section("__libfuzzer_extra_counters"))) static uint8_t outcomes[1 << 12];

static void outcome(const char *what, const void *p, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *c = what; *c; c++)
        h = (h ^ (uint8_t)*c) * 16777619u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const uint8_t *)p)[i]) * 16777619u;
    uint8_t *counter = &outcomes[h % sizeof outcomes];
    if (*counter < 255)
        (*counter)++;
}

/* The server's records, seen in the clear where they are: their types, an alert, and what
 * a ServerHello (or HelloRetryRequest) chose. */
static void outcome_records(const uint8_t *p, size_t n)
{
    uint8_t types[16];
    size_t count = 0;
    while (n >= 5) {
        size_t len = (size_t)p[3] << 8 | p[4];
        if (len > n - 5)
            break;
        const uint8_t *body = p + 5;
        if (count < sizeof types)
            types[count++] = p[0];
        if (p[0] == 21 && len == 2)
            outcome("alert", body, 2);
        if (p[0] == 22 && len >= 4 + 2 + 32 + 1 && body[0] == 2) { /* ServerHello */
            size_t at = 4 + 2 + 32, sid = body[at];
            if (len >= at + 1 + sid + 2 + 1 + 2) {
                const uint8_t *rest = body + at + 1 + sid;
                uint8_t chose[2 + 1 + 4];
                memcpy(chose, rest, 2);                        /* cipher suite */
                chose[2] = body[6] == 0xcf && body[7] == 0x21; /* HelloRetryRequest's random */
                size_t ext = at + 1 + sid + 3 + 2, end = len;
                memset(chose + 3, 0, 4);
                while (ext + 4 <= end) { /* key_share: the group */
                    size_t elen = (size_t)body[ext + 2] << 8 | body[ext + 3];
                    if (body[ext] == 0 && body[ext + 1] == 51 && elen >= 2 && ext + 6 <= end)
                        memcpy(chose + 3, body + ext + 4, 2);
                    ext += 4 + elen;
                }
                outcome("hello", chose, sizeof chose);
            }
        }
        p += 5 + len;
        n -= 5 + len;
    }
    outcome("records", types, count);
}

/* --- checked tls.h calls: connection.c's, through these names --------------------------------- */

static void check_why(cr_tls_t *t)
{
    const char *why = cr_tls_why(t);
    FUZZ_CHECK(why != NULL);
    size_t len = strlen(why);
    FUZZ_CHECK(len > 0 && len < 320);
    FUZZ_CHECK(strchr(why, '\n') == NULL);
}

/* A CR_E* code of error.h. */
static int is_error_code(long rc)
{
    return rc < 0 && rc >= INT32_MIN && strcmp(cr_strerror((int)rc), "unknown error") != 0;
}

static int checked_handshake(cr_tls_t *t, const uint8_t *in, size_t in_len, size_t *used)
{
    *used = (size_t)-1;
    int rc = cr_tls_handshake(t, in, in_len, used);
    FUZZ_CHECK(*used <= in_len);
    run.consumed += *used;
    FUZZ_CHECK(rc == 1 || rc == 0 || is_error_code(rc));
    if (rc == 0)
        FUZZ_CHECK_EQ(*used, in_len); /* all of it unless it finished */
    if (rc < 0) {
        check_why(t);
        outcome("handshake", cr_tls_why(t), strlen(cr_tls_why(t)));
    }
    if (rc == 1) {
        /* only a client that holds the keys gets here: the fuzzer's bytes alone never do */
        FUZZ_CHECK(run.after_handshake);
        FUZZ_CHECK(run.client != DISTRUST && (!run.verify || run.client == GOOD_CERT));
        run.ready = 1;
    }
    return rc;
}

static ssize_t checked_read(cr_tls_t *t, const uint8_t *in, size_t in_len, size_t *used, void *dst,
                            size_t cap)
{
    FUZZ_CHECK(run.ready);
    FUZZ_CHECK(cap > 0);
    *used = (size_t)-1;
    ssize_t got = cr_tls_read(t, in, in_len, used, dst, cap);
    FUZZ_CHECK(*used <= in_len);
    run.consumed += *used;
    if (got > 0) {
        FUZZ_CHECK((size_t)got <= cap);
        /* authentic plaintext, in order, or nothing */
        FUZZ_CHECK(run.received + (size_t)got <= run.sealed_len);
        FUZZ_CHECK(memcmp(dst, run.sealed + run.received, (size_t)got) == 0);
        run.received += (size_t)got;
        run.direct_reads += cap != CR_READ_BUFFER;
    } else if (got == 0) {
        FUZZ_CHECK_EQ(*used, in_len); /* all of in was taken, nothing is left inside */
        FUZZ_CHECK(!cr_tls_has_plaintext(t));
    } else {
        FUZZ_CHECK(is_error_code(got));
        if (got != CR_ECLOSED) {
            check_why(t);
            outcome("read", cr_tls_why(t), strlen(cr_tls_why(t)));
        }
    }
    return got;
}

static const char *checked_why(cr_tls_t *t)
{
    check_why(t);
    return cr_tls_why(t);
}

static void checked_describe(cr_tls_t *t, char *out, size_t len)
{
    cr_tls_describe(t, out, len);
    FUZZ_CHECK(strncmp(out, "TLSv1.3 TLS_", 12) == 0);
}

static int note_name(const char *name, void *arg)
{
    int *seen = arg;
    if (strcmp(name, "CN=" CLIENT_CN) == 0)
        seen[0]++;
    else if (strcmp(name, "URI:" CLIENT_URI) == 0)
        seen[1]++;
    else
        FUZZ_CHECK(!"a name the client's certificate does not have");
    return 0;
}

static void checked_peer_subject(cr_tls_t *t, char *out, size_t len)
{
    cr_tls_peer_subject(t, out, len);
    int seen[2] = {0, 0};
    int count = cr_tls_peer_names(t, note_name, seen);
    if (run.verify) {
        FUZZ_CHECK(strcmp(out, "CN=" CLIENT_CN) == 0);
        FUZZ_CHECK(count == 2 && seen[0] == 1 && seen[1] == 1);
    } else {
        FUZZ_CHECK(out[0] == 0);
        FUZZ_CHECK_EQ(count, 0);
    }
}

#define cr_tls_handshake checked_handshake
#define cr_tls_read checked_read
#define cr_tls_why checked_why
#define cr_tls_describe checked_describe
#define cr_tls_peer_subject checked_peer_subject
#include "connection.c"
#undef cr_tls_handshake
#undef cr_tls_read
#undef cr_tls_why
#undef cr_tls_describe
#undef cr_tls_peer_subject

/* --- what the connection code calls: the session, the outbox, the guard ----------------------- */

/* Stand-ins for the rest of the server: a function connection.c starts to call needs one
 * here (the link says which). */

struct cr_session_s {
    int refs;
    cr_tls_t *tls; /* the outbox's (the session owns it) */
    uv_stream_t *stream;
    int close_asked; /* cr_server_close_connection */
    int woken;       /* on the list cr_outbox_take hands over */
    cr_buf_t wire;   /* what was sent, not yet read by the client */
};

static cr_server_t server;
static uv_loop_t loop;
static cr_session_t *woken; /* the one session this target runs, once it rang */

/* Whole, well-formed TLS records. Returns how many. */
static int check_records(const uint8_t *p, size_t n)
{
    int count = 0;
    while (n > 0) {
        FUZZ_CHECK(n >= 5);
        FUZZ_CHECK(p[0] >= 20 && p[0] <= 23); /* change_cipher_spec .. application_data */
        /* TLS 1.2's number, as TLS 1.3 has it; but an alert refusing a ClientHello carries
         * what the client put in its hello's or its record's version field, as it is */
        FUZZ_CHECK(p[0] == 21 || (p[1] == 3 && p[2] == 3));
        size_t len = (size_t)p[3] << 8 | p[4];
        FUZZ_CHECK(len > 0 && len <= TLS_RECORD_MAX);
        FUZZ_CHECK(5 + len <= n);
        p += 5 + len;
        n -= 5 + len;
        count++;
    }
    return count;
}

/* What the session's cr_tls_t has to send goes on the wire, as the outbox takes it. */
static void take_output(cr_session_t *s)
{
    if (!s->tls)
        return;
    size_t before = s->wire.len;
    ssize_t n = cr_tls_take(s->tls, &s->wire);
    FUZZ_CHECK(n >= 0);
    FUZZ_CHECK_EQ(s->wire.len - before, n);
    FUZZ_CHECK(!cr_tls_has_output(s->tls));
    int records = n > 0 ? check_records(s->wire.data + before, (size_t)n) : 0;
    if (n > 0)
        outcome_records(s->wire.data + before, (size_t)n);
    run.sent += (size_t)n;
    FUZZ_CHECK(run.sent <= OUTPUT_MAX);
    if (run.ready) { /* an alert at most */
        run.sent_ready += (size_t)n;
        run.records_ready += records;
        FUZZ_CHECK(run.records_ready <= 1 && run.sent_ready <= ALERT_MAX);
    }
}

void cr_outbox_attach(cr_session_t *s, uv_stream_t *stream, int fd, cr_tls_t *tls)
{
    s->stream = stream;
    s->tls = tls;
}

/* As outbox.c's: what the old one had to send (an alert) is dropped with it. */
void cr_outbox_set_tls(cr_session_t *s, cr_tls_t *tls)
{
    FUZZ_CHECK_EQ(run.sent, 0); /* before anything was sent */
    cr_tls_free(s->tls);
    s->tls = tls;
}

cr_session_t *cr_outbox_take(void)
{
    cr_session_t *s = woken;
    woken = NULL;
    if (s)
        s->woken = 0;
    return s;
}

cr_session_t *cr_outbox_next(const cr_session_t *s)
{
    return NULL;
}

unsigned cr_outbox_flush(cr_session_t *s, uv_stream_t **stream)
{
    *stream = s->stream;
    if (!s->stream) /* the connection closed */
        return 0;
    take_output(s);
    return s->close_asked ? CR_OUTBOX_CLOSE : 0;
}

void cr_server_wake(cr_session_t *s)
{
    if (s->woken)
        return;
    s->woken = 1;
    s->refs++; /* the list's (cr_conn_on_output drops it) */
    woken = s;
}

void cr_server_close_connection(cr_session_t *s)
{
    s->close_asked = 1;
    cr_server_wake(s);
}

void cr_session_unref(cr_session_t *s)
{
    FUZZ_CHECK(s->refs > 0);
    if (--s->refs > 0)
        return;
    take_output(s); /* what was never sent is bounded too */
    cr_tls_free(s->tls);
    cr_buf_free(&s->wire);
    free(s);
    run.session_freed = 1;
}

void cr_session_close(cr_session_t *s, const char *why)
{
    FUZZ_CHECK(why && why[0]);
    FUZZ_CHECK(run.closed[0] == 0); /* once */
    snprintf(run.closed, sizeof run.closed, "%s", why);
    s->stream = NULL;
}

uint64_t cr_session_id(const cr_session_t *s)
{
    return 1;
}

const char *cr_session_peer(const cr_session_t *s)
{
    return "192.0.2.1:40000";
}

cr_session_t *cr_session_new(cr_server_t *srv, const cr_backend_t *b, uint64_t id, const char *peer)
{
    return NULL; /* cr_conn_accept only: open_connection stands in for it */
}

/* The session's decision is not this target's subject: every hello is admitted. */
int cr_session_admit(cr_session_t *s, cr_request_t *req, char *why, size_t why_len)
{
    return 0;
}

/* The executor runs it (and this target has nothing to run it on). */
int cr_executor_submit(cr_session_t *s, cr_request_t *req)
{
    cr_request_free(req);
    return 0;
}

/* The refusal would go out in plaintext; the caller frees req. */
void cr_hello_refuse(cr_request_t *req, CUresult r, const char *why)
{
    FUZZ_CHECK(req != NULL && why && why[0]);
}

int cr_dispatch_on_loop(cr_request_t *req)
{
    if (!(cr_opcode_rule(req->hdr.opcode)->flags & CR_OPR_ON_LOOP))
        return 0;
    cr_request_free(req);
    return 1;
}

/* As request.c's, but the body and the bulk get only as many bytes as the connection can
 * still bring (a bulk may be announced at 2 GiB): the loop writes no further, since no
 * plaintext outgrows its ciphertext. */
cr_request_t *cr_request_new(cr_session_t *s, const cr_frame_header_t *h)
{
    cr_request_t *req = calloc(1, sizeof *req);
    FUZZ_CHECK(req != NULL);
    req->session = s;
    req->fd = -1;
    req->hdr = *h;
    size_t body = h->body_len < run.max_plain ? h->body_len : run.max_plain;
    size_t bulk = h->bulk_len < run.max_plain ? (size_t)h->bulk_len : run.max_plain;
    req->body = malloc(body ? body : 1);
    req->bulk = h->bulk_len ? malloc(bulk ? bulk : 1) : NULL;
    FUZZ_CHECK(req->body && (req->bulk || !h->bulk_len));
    return req;
}

void cr_request_free(cr_request_t *req)
{
    if (!req)
        return;
    free(req->body);
    free(req->bulk);
    free(req);
}

int cr_guard_accept(const char *address, uint64_t *key)
{
    *key = 0;
    return -1;
}

void cr_guard_release(uint64_t key)
{
}

const cr_guard_limits_t *cr_guard_limits(void)
{
    static const cr_guard_limits_t limits;
    return &limits;
}

void cr_guard_refuse(int reason, const char *peer, const char *detail)
{
    FUZZ_CHECK(reason >= 0 && reason < CR_GUARD_REASON_COUNT);
    FUZZ_CHECK(peer && peer[0]);
    FUZZ_CHECK(!detail || detail[0]);
    if (reason == CR_GUARD_TLS && detail && strncmp(detail, "TLS: ", 5) == 0) {
        FUZZ_CHECK(!run.tls_refused);
        run.tls_refused = 1;
        snprintf(run.refusal, sizeof run.refusal, "%s", detail);
    }
}

int cr_tls_config_enabled(void)
{
    return 1;
}

cr_tls_t *cr_tls_config_connection(void)
{
    return NULL; /* cr_conn_accept only */
}

/* --- the client's side ------------------------------------------------------------------------ */

/* A TCP client connects: what cr_conn_accept does once it has accepted one, TLS on. */
static conn_t *open_connection(cr_tls_t *tls)
{
    conn_t *c = calloc(1, sizeof *c);
    cr_session_t *s = calloc(1, sizeof *s);
    FUZZ_CHECK(c && s);
    s->refs = 2; /* the connection's, and this file's until it has looked at what was sent */
    c->server = &server;
    server.connections++;
    FUZZ_CHECK_EQ(uv_tcp_init(server.loop, &c->h.tcp), 0);
    c->h.handle.data = c;
    c->session = s;
    c->tls = tls;
    cr_outbox_attach(c->session, &c->h.stream, -1, c->tls);
    c->accepted_ns = cr_now_ns();
    c->next_waiting = server.waiting;
    if (server.waiting)
        server.waiting->prev_waiting = c;
    server.waiting = c;
    return c;
}

/* One read of n bytes from p, as libuv delivers it, and then the loop's wake-up. Returns the
 * bytes read; 0 once the connection is no longer read (closed, or its hello refused). */
static size_t deliver(conn_t *c, const uint8_t *p, size_t n)
{
    if (c->closing || c->refused)
        return 0;
    uv_buf_t buf;
    on_alloc(&c->h.handle, CR_READ_BUFFER, &buf);
    size_t k = n < buf.len ? n : buf.len;
    memcpy(buf.base, p, k);
    int tls = c->tls != NULL;
    run.consumed = 0;
    on_read(&c->h.stream, (ssize_t)k, &buf);
    if (tls && c->tls && !c->closing && !c->refused)
        FUZZ_CHECK_EQ(run.consumed, k); /* the loop's one buffer is taken whole */
    cr_conn_on_output(&server.wakeup);
    return k;
}

/* The client goes away (if the server has not closed first), and the loop closes. */
static void disconnect(conn_t *c)
{
    if (!c->closing) {
        uv_buf_t none = uv_buf_init(NULL, 0);
        on_read(&c->h.stream, UV_EOF, &none);
    }
    cr_conn_on_output(&server.wakeup);
    FUZZ_CHECK(c->closing);
    uv_run(server.loop, UV_RUN_DEFAULT); /* on_closed */
    FUZZ_CHECK_EQ(server.connections, 0);
    FUZZ_CHECK(server.waiting == NULL);
}

/* The bytes in reads of the sizes `scheme` says (options byte 1). */
static void deliver_all(conn_t *c, const uint8_t *p, size_t n, unsigned scheme)
{
    uint32_t state = 0x9e3779b9u ^ scheme;
    size_t limit = scheme < 128 ? scheme : (scheme - 127) * 128u;
    while (n > 0) {
        size_t want = CR_READ_BUFFER;
        if (scheme) {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            want = 1 + state % limit;
        }
        size_t k = deliver(c, p, n < want ? n : want);
        if (k == 0)
            return;
        p += k;
        n -= k;
    }
}

/* The client seals len bytes, at most piece per cr_tls_seal call, onto out. */
static void seal(cr_tls_t *client, const uint8_t *data, size_t len, size_t piece, cr_buf_t *out)
{
    struct iovec iov = {(void *)data, len};
    for (size_t done = 0; done < len;) {
        size_t want = len - done < piece ? len - done : piece;
        size_t before = out->len;
        ssize_t k = cr_tls_seal(client, &iov, 1, done, piece, out);
        FUZZ_CHECK_EQ(k, want);
        FUZZ_CHECK(!out->failed);
        FUZZ_CHECK(out->len - before >= want + 22); /* a header, the content type, a tag */
        done += want;
    }
}

static void append(cr_buf_t *b, const void *p, size_t n)
{
    FUZZ_CHECK_EQ(cr_buf_append(b, p, n), 0);
}

/* The ops onto wire, the plaintext they seal onto plain. Returns 1 when the stream is
 * nothing but sealed records, in order. */
static int build(cr_tls_t *client, const uint8_t *p, size_t n, cr_buf_t *wire, cr_buf_t *plain)
{
    int clean = 1;
    while (n >= 3) {
        unsigned kind = p[0] & 7, arg = p[0] >> 3;
        size_t len = (size_t)p[1] | (size_t)p[2] << 8;
        p += 3;
        n -= 3;
        len = len < n ? len : n;
        const uint8_t *data = p;
        p += len;
        n -= len;
        if (kind == RAW || kind == RECORD) {
            if (kind == RECORD) {
                uint8_t h[5] = {(uint8_t)(20 + (arg & 3)), 3, 3, (uint8_t)(len >> 8), (uint8_t)len};
                append(wire, h, sizeof h);
            }
            append(wire, data, len);
            clean &= kind == RAW && len == 0;
            continue;
        }
        clean &= kind == SEAL;
        append(plain, data, len);
        cr_buf_t rec = CR_BUF_INIT;
        if (kind == SWAP && len >= 2) {
            cr_buf_t first = CR_BUF_INIT; /* goes out second */
            seal(client, data, len / 2, len, &first);
            seal(client, data + len / 2, len - len / 2, len, &rec);
            append(&rec, first.data, first.len);
            cr_buf_free(&first);
        } else {
            size_t piece = kind == SEAL && arg ? (arg < 16 ? arg : (arg - 15) * 1024u) : len;
            seal(client, data, len, piece ? piece : 1, &rec);
        }
        if (kind == FLIP && rec.len) {
            size_t at = arg < 5 ? arg : arg < 21 ? rec.len - 1 - (arg - 5) : 5 + (arg - 21);
            rec.data[at] ^= (uint8_t)(1u << (len & 7));
        }
        size_t send = kind == DROP ? 0 : kind == CUT ? rec.len * arg / 32 : rec.len;
        if (send)
            append(wire, rec.data, send);
        if (kind == REPLAY && rec.len)
            append(wire, rec.data, rec.len);
        cr_buf_free(&rec);
    }
    return clean;
}

/* Options bit 0 clear: the bytes are what the client sends from the start. */
static void run_raw(const uint8_t *p, size_t n, unsigned scheme)
{
    cr_tls_t *tls = cr_tls_new(server_ctx[run.verify], 1, NULL);
    FUZZ_CHECK(tls != NULL);
    run.max_plain = n;
    conn_t *c = open_connection(tls);
    cr_session_t *s = c->session;
    deliver_all(c, p, n, scheme);
    disconnect(c);
    cr_session_unref(s); /* and what it never sent is looked at */
    FUZZ_CHECK(!run.ready);
    FUZZ_CHECK_EQ(run.received, 0);
}

/* Options bit 0 set: a real handshake, then the ops. */
static void run_after_handshake(const uint8_t *p, size_t n, unsigned scheme)
{
    cr_tls_t *tls = cr_tls_new(server_ctx[run.verify], 1, NULL);
    cr_tls_t *client = cr_tls_new(client_ctx[run.client], 0, SERVER_NAME);
    FUZZ_CHECK(tls && client);

    size_t used;
    cr_buf_t hello = CR_BUF_INIT, wire = CR_BUF_INIT, plain = CR_BUF_INIT;
    FUZZ_CHECK_EQ(cr_tls_handshake(client, NULL, 0, &used), 0);
    FUZZ_CHECK(cr_tls_take(client, &hello) > 0);
    /* the client's last flight, then the ops */
    run.max_plain = hello.len;
    conn_t *c = open_connection(tls);
    cr_session_t *s = c->session;
    FUZZ_CHECK_EQ(deliver(c, hello.data, hello.len), hello.len);
    FUZZ_CHECK(!c->closing && !c->refused && s->wire.len > 0);
    int rc = cr_tls_handshake(client, s->wire.data, s->wire.len, &used);
    if (run.client == DISTRUST) { /* its alert goes to the server, and nothing else */
        FUZZ_CHECK_EQ(rc, CR_EPROTO);
        FUZZ_CHECK(strstr(cr_tls_why(client), "signed by an unknown CA") != NULL);
    } else {
        FUZZ_CHECK_EQ(rc, 1);
        FUZZ_CHECK_EQ(used, s->wire.len);
    }
    s->wire.len = 0;
    FUZZ_CHECK(cr_tls_take(client, &wire) > 0);
    int clean = run.client != DISTRUST && build(client, p, n, &wire, &plain);
    run.sealed = plain.data;
    run.sealed_len = plain.len;
    run.max_plain += wire.len;

    deliver_all(c, wire.data, wire.len, scheme);
    int open = !c->closing && !c->refused;
    disconnect(c);
    cr_session_unref(s); /* and what it never sent is looked at */
    const char *refused = run.client == DISTRUST     ? "does not trust our certificate"
                          : !run.verify              ? NULL
                          : run.client == NO_CERT    ? "no client certificate"
                          : run.client == ROGUE_CERT ? "signed by an unknown CA"
                                                     : NULL;
    if (refused) { /* saying why */
        FUZZ_CHECK(!run.ready && run.tls_refused);
        FUZZ_CHECK(strstr(run.refusal, refused) != NULL);
    } else {
        FUZZ_CHECK(run.ready); /* the client's flight came whole, first */
    }
    if (clean && run.ready) {
        FUZZ_CHECK_EQ(run.sent_ready, 0);
        FUZZ_CHECK(strncmp(run.closed, "TLS: ", 5) != 0);
        if (open) /* nothing closed it: all of it was read */
            FUZZ_CHECK_EQ(run.received, run.sealed_len);
    }
    cr_tls_free(client);
    cr_buf_free(&hello);
    cr_buf_free(&wire);
    cr_buf_free(&plain);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    memset(&run, 0, sizeof run);
    run.after_handshake = data[0] & OPT_AFTER_HANDSHAKE;
    run.verify = (data[0] & OPT_VERIFY) != 0;
    run.client = data[0] & OPT_DISTRUST                   ? DISTRUST
                 : !run.verify || (data[0] & OPT_NO_CERT) ? NO_CERT
                 : data[0] & OPT_ROGUE_CERT               ? ROGUE_CERT
                                                          : GOOD_CERT;
    if (run.after_handshake)
        run_after_handshake(data + 2, size - 2, data[1]);
    else
        run_raw(data + 2, size - 2, data[1]);
    FUZZ_CHECK(run.session_freed);
    if (verbose)
        fprintf(
            stderr,
            "fuzz_tls: handshake %s, %zu of %zu sealed bytes read, %zu bytes sent (%zu after "
            "the handshake); %s%s%s\n",
            run.ready ? "done" : "not done", run.received, run.sealed_len, run.sent, run.sent_ready,
            run.refusal[0] ? "refused: " : "closed: ", run.refusal[0] ? run.refusal : run.closed,
            run.direct_reads ? ", bulk read straight into its buffer" : "");
    return 0;
}

/* --- certificates, made once ------------------------------------------------------------------ */

static void add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    FUZZ_CHECK(e != NULL && X509_add_ext(cert, e, -1) == 1);
    X509_EXTENSION_free(e);
}

/* A certificate for key, signed by issuer (NULL: itself, a CA). */
static X509 *make_cert(const char *cn, EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key,
                       long serial, const char *usage, const char *san)
{
    X509 *cert = X509_new();
    X509_NAME *name = X509_NAME_new();
    FUZZ_CHECK(cert && name);
    FUZZ_CHECK(X509_set_version(cert, X509_VERSION_3) == 1);
    FUZZ_CHECK(ASN1_INTEGER_set(X509_get_serialNumber(cert), serial) == 1);
    FUZZ_CHECK(X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != NULL);
    FUZZ_CHECK(X509_gmtime_adj(X509_getm_notAfter(cert), 3650L * 24 * 3600) != NULL);
    FUZZ_CHECK(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1,
                                          -1, 0) == 1);
    FUZZ_CHECK(X509_set_subject_name(cert, name) == 1);
    FUZZ_CHECK(X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name) == 1);
    FUZZ_CHECK(X509_set_pubkey(cert, key) == 1);
    X509 *signer = issuer ? issuer : cert;
    add_ext(cert, signer, NID_subject_key_identifier, "hash");
    if (issuer) {
        add_ext(cert, signer, NID_authority_key_identifier, "keyid");
        add_ext(cert, signer, NID_basic_constraints, "critical,CA:FALSE");
        add_ext(cert, signer, NID_key_usage, "critical,digitalSignature");
        add_ext(cert, signer, NID_ext_key_usage, usage);
        add_ext(cert, signer, NID_subject_alt_name, san);
    } else {
        add_ext(cert, signer, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(cert, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
    }
    FUZZ_CHECK(X509_sign(cert, issuer ? issuer_key : key, EVP_sha256()) > 0);
    X509_NAME_free(name);
    return cert;
}

/* A memory file holding cert and/or key as PEM; its name (/proc/self/fd/N) into path. */
static int pem_file(X509 *cert, EVP_PKEY *key, char *path, size_t path_len)
{
    BIO *b = BIO_new(BIO_s_mem());
    FUZZ_CHECK(b != NULL);
    if (cert)
        FUZZ_CHECK(PEM_write_bio_X509(b, cert) == 1);
    if (key)
        FUZZ_CHECK(PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL) == 1);
    char *pem;
    long len = BIO_get_mem_data(b, &pem);
    int fd = memfd_create("fuzz_tls.pem", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0 && len > 0);
    FUZZ_CHECK(write(fd, pem, (size_t)len) == len);
    BIO_free(b);
    snprintf(path, path_len, "/proc/self/fd/%d", fd);
    return fd;
}

/* FUZZ_TLS_HELLO=FILE: the first flight of a client cr_tls_t into FILE (a seed). */
static void write_hello(const char *file)
{
    cr_tls_t *client = cr_tls_new(client_ctx[NO_CERT], 0, SERVER_NAME);
    cr_buf_t hello = CR_BUF_INIT;
    size_t used;
    FUZZ_CHECK(client != NULL);
    FUZZ_CHECK_EQ(cr_tls_handshake(client, NULL, 0, &used), 0);
    FUZZ_CHECK(cr_tls_take(client, &hello) > 0);
    FILE *f = fopen(file, "wb");
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK_EQ(fwrite(hello.data, 1, hello.len, f), hello.len);
    FUZZ_CHECK(fclose(f) == 0);
    cr_buf_free(&hello);
    cr_tls_free(client);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    EVP_PKEY *ca_key = EVP_EC_gen("P-256"), *server_key = EVP_EC_gen("P-256"),
             *client_key = EVP_EC_gen("P-256"), *rogue_ca_key = EVP_EC_gen("P-256");
    FUZZ_CHECK(ca_key && server_key && client_key && rogue_ca_key);
    X509 *ca = make_cert("fuzz CA", ca_key, NULL, NULL, 1, NULL, NULL);
    X509 *server_cert =
        make_cert(SERVER_NAME, server_key, ca, ca_key, 2, "serverAuth", "DNS:" SERVER_NAME);
    X509 *client_cert =
        make_cert(CLIENT_CN, client_key, ca, ca_key, 3, "clientAuth", "URI:" CLIENT_URI);
    /* the same client, vouched for by a CA the server does not know */
    X509 *rogue_ca = make_cert("rogue CA", rogue_ca_key, NULL, NULL, 1, NULL, NULL);
    X509 *rogue_cert = make_cert(CLIENT_CN, client_key, rogue_ca, rogue_ca_key, 3, "clientAuth",
                                 "URI:" CLIENT_URI);

    char ca_pem[64], server_pem[64], client_pem[64], rogue_pem[64], rogue_ca_pem[64], err[600] = "";
    int fds[] = {pem_file(ca, NULL, ca_pem, sizeof ca_pem),
                 pem_file(rogue_ca, NULL, rogue_ca_pem, sizeof rogue_ca_pem),
                 pem_file(server_cert, server_key, server_pem, sizeof server_pem),
                 pem_file(client_cert, client_key, client_pem, sizeof client_pem),
                 pem_file(rogue_cert, client_key, rogue_pem, sizeof rogue_pem)};
    server_ctx[0] = cr_tls_server_context(server_pem, server_pem, NULL, err, sizeof err);
    server_ctx[1] = cr_tls_server_context(server_pem, server_pem, ca_pem, err, sizeof err);
    client_ctx[NO_CERT] = cr_tls_client_context(ca_pem, NULL, NULL, err, sizeof err);
    client_ctx[GOOD_CERT] = cr_tls_client_context(ca_pem, client_pem, client_pem, err, sizeof err);
    client_ctx[ROGUE_CERT] = cr_tls_client_context(ca_pem, rogue_pem, rogue_pem, err, sizeof err);
    client_ctx[DISTRUST] = cr_tls_client_context(rogue_ca_pem, NULL, NULL, err, sizeof err);
    if (!server_ctx[0] || !server_ctx[1] || !client_ctx[NO_CERT] || !client_ctx[GOOD_CERT] ||
        !client_ctx[ROGUE_CERT] || !client_ctx[DISTRUST]) {
        fprintf(stderr, "fuzz_tls: %s\n", err);
        abort();
    }
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        close(fds[i]);
    X509 *certs[] = {ca, server_cert, client_cert, rogue_ca, rogue_cert};
    EVP_PKEY *keys[] = {ca_key, server_key, client_key, rogue_ca_key};
    for (size_t i = 0; i < sizeof certs / sizeof certs[0]; i++)
        X509_free(certs[i]);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        EVP_PKEY_free(keys[i]);

    FUZZ_CHECK_EQ(uv_loop_init(&loop), 0);
    server.loop = &loop;

    verbose = getenv("FUZZ_TLS_VERBOSE") && atoi(getenv("FUZZ_TLS_VERBOSE"));
    const char *hello = getenv("FUZZ_TLS_HELLO");
    if (hello && *hello) {
        write_hello(hello);
        exit(0);
    }
    return 0;
}
