/* cuda-remote: the command line for people who run programs against cuda-remoted.
 *
 *   cuda-remote status [--server ADDR] [--json]
 *
 * status connects like a CUDA program would (CUDA_REMOTE_ADDR, CUDA_REMOTE_TOKEN, and for a
 * tls:// address CUDA_REMOTE_TLS_*), asks the
 * server what it runs (@status, common/protocol.h) and prints it as tables, as nvidia-smi
 * does for processes: the server, the tenants the caller may see (its own; every one for an
 * admin tenant or a server without tenants), and their sessions. --json prints the reply as
 * JSON instead. Exit status 0, 1 when the server refuses or cannot be reached, 2 for usage. */
#include <getopt.h>
#include <inttypes.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "address.h"
#include "buf.h"
#include "cr_opcodes.h"
#include "error.h"
#include "frame_io.h"
#include "hello.h"
#include "mpcheck.h"
#include "mpfield.h"
#include "status_fields.h"

static const char *prog = "cuda-remote";

/* ---- the wire: one request at a time ---- */

/* Sends a request whose body is `body` and reads its reply's body into *reply (unpacked in
 * *u). 0, or -1 with the reason printed. */
static int call(cr_transport_t *t, uint16_t opcode, uint64_t call_id, const cr_buf_t *body,
                cr_buf_t *reply, msgpack_unpacked *u)
{
    cr_frame_header_t h = {CR_PROTOCOL_VERSION, opcode, 0, (uint32_t)body->len, call_id, 0};
    if (cr_frame_send(t, &h, body->data) != 0) {
        fprintf(stderr, "%s: the server closed the connection%s%s\n", prog, t->why[0] ? ": " : "",
                t->why);
        return -1;
    }
    do { /* skip anything that is not this call's reply */
        int err = cr_frame_recv(t, &h, reply);
        if (err) {
            fprintf(stderr, "%s: %s\n", prog,
                    err == CR_ENOMEM ? "out of memory"
                    : t->why[0]      ? t->why
                                     : "the server closed the connection or spoke nonsense");
            return -1;
        }
    } while (!(h.flags & CR_FRAME_REPLY) || h.call_id != call_id || (h.flags & CR_FRAME_PARTIAL));
    size_t off = 0;
    if (cr_mpcheck(reply->data, reply->len) != 0 ||
        msgpack_unpack_next(u, (const char *)reply->data, reply->len, &off) !=
            MSGPACK_UNPACK_SUCCESS ||
        u->data.type != MSGPACK_OBJECT_ARRAY || u->data.via.array.size < 1 ||
        u->data.via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        fprintf(stderr, "%s: malformed reply\n", prog);
        return -1;
    }
    return 0;
}

/* ---- reading the reply ---- */

static uint64_t num(const msgpack_object *map, const char *key)
{
    const msgpack_object *o = cr_mp_field(map, key);
    if (!o)
        return 0;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return o->via.u64;
    if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32)
        return o->via.f64 > 0 ? (uint64_t)o->via.f64 : 0;
    return 0;
}

static double real(const msgpack_object *map, const char *key)
{
    const msgpack_object *o = cr_mp_field(map, key);
    if (o && (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32))
        return o->via.f64;
    return (double)num(map, key);
}

static const char *str(const msgpack_object *map, const char *key, char *buf, size_t cap)
{
    cr_mp_copy_str(buf, cap, cr_mp_field(map, key));
    return buf;
}

static const char *bytes(uint64_t b, char *buf, size_t cap)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4)
        v /= 1024, u++;
    if (u == 0)
        snprintf(buf, cap, "%" PRIu64 " B", b);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

static const char *duration(double s, char *buf, size_t cap)
{
    uint64_t t = s > 0 ? (uint64_t)s : 0;
    if (t < 60)
        snprintf(buf, cap, "%" PRIu64 "s", t);
    else if (t < 3600)
        snprintf(buf, cap, "%" PRIu64 "m%02" PRIu64 "s", t / 60, t % 60);
    else if (t < 86400)
        snprintf(buf, cap, "%" PRIu64 "h%02" PRIu64 "m", t / 3600, t / 60 % 60);
    else
        snprintf(buf, cap, "%" PRIu64 "d%02" PRIu64 "h", t / 86400, t / 3600 % 24);
    return buf;
}

/* Device time: milliseconds up to a minute, then as a duration. */
static const char *device_time(uint64_t ns, char *buf, size_t cap)
{
    if (ns < 60000000000ull)
        snprintf(buf, cap, "%.1f ms", (double)ns / 1e6);
    else
        duration((double)ns / 1e9, buf, cap);
    return buf;
}

static void print_tables(const msgpack_object *st)
{
    const msgpack_object *srv = cr_mp_field(st, CR_STATUS_SERVER);
    const msgpack_object *tenants = cr_mp_field(st, CR_STATUS_TENANTS);
    const msgpack_object *sessions = cr_mp_field(st, CR_STATUS_SESSIONS);
    uint64_t self = num(st, CR_STATUS_SELF);
    char a[64], b[64], c[64], d[256], e[64];

    printf("%s  backend %s  %s\n", str(srv, CR_STATUS_SERVER_VERSION, d, sizeof d),
           str(srv, CR_STATUS_SERVER_BACKEND, a, sizeof a),
           str(srv, CR_STATUS_SERVER_DEVICE, c, sizeof c));
    printf("device memory %s used of %s  up %s%s\n\n",
           bytes(num(srv, CR_STATUS_SERVER_MEMORY_USED), a, sizeof a),
           bytes(num(srv, CR_STATUS_SERVER_MEMORY_TOTAL), b, sizeof b),
           duration(real(srv, CR_STATUS_SERVER_UPTIME_S), e, sizeof e),
           num(srv, CR_STATUS_SERVER_TENANTS_FILE)
               ? ""
               : "  (no tenants file: everyone is \"default\")");

    printf("%-16s %-8s %6s %5s %21s %8s %9s %10s %6s %10s %10s %7s %6s\n", "TENANT", "PRIORITY",
           "WEIGHT", "LIMIT", "MEMORY USED / QUOTA", "SESSIONS", "LAUNCHES", "GPU TIME", "SHARE",
           "H2D", "D2H", "ERRORS", "QUEUED");
    for (uint32_t i = 0;
         tenants && tenants->type == MSGPACK_OBJECT_ARRAY && i < tenants->via.array.size; i++) {
        const msgpack_object *t = &tenants->via.array.ptr[i];
        char name[64], prio[16], mem[48], h2d[24], d2h[24], gpu[24], share[16], limit[16];
        uint64_t quota = num(t, CR_STATUS_TENANT_QUOTA);
        snprintf(mem, sizeof mem, "%s / %s", bytes(num(t, CR_STATUS_TENANT_USED), a, sizeof a),
                 quota ? bytes(quota, b, sizeof b) : "-");
        str(t, CR_STATUS_TENANT_NAME, name, sizeof name);
        if (num(t, CR_STATUS_TENANT_REMOVED))
            strncat(name, " (gone)", sizeof name - strlen(name) - 1);
        snprintf(share, sizeof share, "%.0f%%", 100 * real(t, CR_STATUS_TENANT_SHARE));
        double cap = real(t, CR_STATUS_TENANT_COMPUTE_LIMIT); /* 0: none */
        if (cap > 0)
            snprintf(limit, sizeof limit, "%.0f%%", 100 * cap);
        else
            snprintf(limit, sizeof limit, "-");
        printf("%-16s %-8s %6g %5s %21s %8" PRIu64 " %9" PRIu64 " %10s %6s %10s %10s %7" PRIu64
               " %6" PRIu64 "\n",
               name, str(t, CR_STATUS_TENANT_PRIORITY, prio, sizeof prio),
               real(t, CR_STATUS_TENANT_WEIGHT), limit, mem, num(t, CR_STATUS_TENANT_SESSIONS),
               num(t, CR_STATUS_USAGE_LAUNCHES),
               device_time(num(t, CR_STATUS_USAGE_DEVICE_NS), gpu, sizeof gpu), share,
               bytes(num(t, CR_STATUS_USAGE_BYTES_H2D), h2d, sizeof h2d),
               bytes(num(t, CR_STATUS_USAGE_BYTES_D2H), d2h, sizeof d2h),
               num(t, CR_STATUS_USAGE_ERRORS), num(t, CR_STATUS_TENANT_QUEUED));
    }

    printf("\n%-7s %-12s %-40s %-22s %-24s %10s %9s %10s %9s %7s\n", "SESSION", "TENANT", "PROGRAM",
           "FROM", "AUTHENTICATED BY", "MEMORY", "LAUNCHES", "GPU TIME", "REQUESTS", "UP");
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    for (uint32_t i = 0;
         sessions && sessions->type == MSGPACK_OBJECT_ARRAY && i < sessions->via.array.size; i++) {
        const msgpack_object *s = &sessions->via.array.ptr[i];
        const msgpack_object *since = cr_mp_field(s, CR_STATUS_SESSION_CONNECTED_NS);
        int64_t t0 = since && (since->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
                               since->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                         ? since->via.i64
                         : now_ns;
        char tenant[64], who[320], peer[128], auth[300], id[32];
        snprintf(id, sizeof id, "%" PRIu64 "%s", num(s, CR_STATUS_SESSION_ID),
                 num(s, CR_STATUS_SESSION_ID) == self ? "*"
                 : num(s, CR_STATUS_SESSION_ENDING)   ? "-"
                                                      : "");
        printf(
            "%-7s %-12s %-40s %-22s %-24s %10s %9" PRIu64 " %10s %9" PRIu64 " %7s\n", id,
            str(s, CR_STATUS_SESSION_TENANT, tenant, sizeof tenant),
            str(s, CR_STATUS_SESSION_WHO, who, sizeof who),
            str(s, CR_STATUS_SESSION_PEER, peer, sizeof peer),
            str(s, CR_STATUS_SESSION_AUTH, auth, sizeof auth),
            bytes(num(s, CR_STATUS_SESSION_MEMORY), a, sizeof a), num(s, CR_STATUS_USAGE_LAUNCHES),
            device_time(num(s, CR_STATUS_USAGE_DEVICE_NS), b, sizeof b),
            num(s, CR_STATUS_SESSION_REQUESTS), duration((double)(now_ns - t0) / 1e9, e, sizeof e));
    }
    printf("\n* this command's own session; - ended, its resources being released\n");
}

/* The reply as JSON (strings escaped, binaries as hex). */
static void print_json(const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        printf("null");
        break;
    case MSGPACK_OBJECT_BOOLEAN:
        printf(o->via.boolean ? "true" : "false");
        break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        printf("%" PRIu64, o->via.u64);
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        printf("%" PRId64, o->via.i64);
        break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        printf("%.17g", o->via.f64);
        break;
    case MSGPACK_OBJECT_STR:
        putchar('"');
        for (uint32_t i = 0; i < o->via.str.size; i++) {
            unsigned char ch = (unsigned char)o->via.str.ptr[i];
            if (ch == '"' || ch == '\\')
                printf("\\%c", ch);
            else if (ch < 0x20)
                printf("\\u%04x", ch);
            else
                putchar(ch);
        }
        putchar('"');
        break;
    case MSGPACK_OBJECT_ARRAY:
        putchar('[');
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (i)
                putchar(',');
            print_json(&o->via.array.ptr[i]);
        }
        putchar(']');
        break;
    case MSGPACK_OBJECT_MAP:
        putchar('{');
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            if (i)
                putchar(',');
            print_json(&o->via.map.ptr[i].key);
            putchar(':');
            print_json(&o->via.map.ptr[i].val);
        }
        putchar('}');
        break;
    default:
        printf("null");
    }
}

static int status(const char *server, int json)
{
    cr_address_t addr;
    if (cr_address_parse(server, &addr) != 0) {
        fprintf(stderr, "%s: %s is not an address (host:port, host, tls://host:port, unix:/path)\n",
                prog, server);
        return 2;
    }
    char err[256] = "";
    cr_transport_t t;
    if (cr_transport_connect(&t, &addr, 5000, err, sizeof err) != 0) {
        fprintf(stderr, "%s: cannot reach cuda-remoted at %s: %s\n", prog, server, err);
        return 1;
    }
    cr_buf_t body = CR_BUF_INIT, reply = CR_BUF_INIT;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &body, cr_buf_msgpack_write);
    cr_hello_pack(&pk, 0, "cuda-remote status", "cuda-remote");

    int rc = 1;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    if (call(&t, CR_OP_HELLO, 1, &body, &reply, &u) != 0)
        goto out;
    if (u.data.via.array.ptr[0].via.u64 != 0) {
        char why[256];
        cr_hello_refusal(&u.data, why, sizeof why);
        fprintf(stderr, "%s: cuda-remoted at %s refused the connection: %s\n", prog, server,
                why[0] ? why : "refused");
        goto out;
    }
    cr_buf_reset(&body);
    msgpack_pack_array(&pk, 0);
    if (call(&t, CR_OP_STATUS, 2, &body, &reply, &u) != 0)
        goto out;
    if (u.data.via.array.ptr[0].via.u64 != 0 || u.data.via.array.size < 2) {
        fprintf(stderr, "%s: status failed (CUresult %" PRIu64 ")\n", prog,
                u.data.via.array.ptr[0].via.u64);
        goto out;
    }
    if (json) {
        print_json(&u.data.via.array.ptr[1]);
        putchar('\n');
    } else {
        print_tables(&u.data.via.array.ptr[1]);
    }
    rc = 0;
out:
    msgpack_unpacked_destroy(&u);
    cr_buf_free(&body);
    cr_buf_free(&reply);
    cr_transport_close(&t);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cuda-remote status [--server ADDR] [--json]\n"
            "  status          the server, its tenants and sessions (yours; every one\n"
            "                  for an admin tenant)\n"
            "  --server ADDR   host:port, host or unix:/path (default: $CUDA_REMOTE_ADDR,\n"
            "                  else %s); the token is $CUDA_REMOTE_TOKEN\n"
            "  --json          the reply as JSON\n",
            CR_DEFAULT_ADDR);
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"server", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2 || strcmp(argv[1], "status") != 0) {
        usage(argc >= 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
        return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    const char *server = cr_hello_address();
    int json = 0, c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "s:jh", options, NULL)) != -1) {
        switch (c) {
        case 's':
            server = optarg;
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument %s\n", prog, argv[optind]);
        return 2;
    }
    return status(server, json);
}
