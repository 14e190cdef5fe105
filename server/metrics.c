/* Prometheus metrics at http://ADDR/metrics (--metrics ADDR), served on the loop.
 *
 * Requests are parsed with http-parser; each connection answers one GET and closes. A
 * connection that sends more than a request's worth of bytes, or nothing complete within a
 * few seconds, is closed: the endpoint must not be a way to hold the server's memory. */
#include <http_parser.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "error.h"
#include "guard.h"
#include "listen.h"
#include "log.h"
#include "loop.h"
#include "status.h"
#include "tenants.h"
#include "version.h"

#define REQUEST_MAX 8192 /* bytes of one request, headers included */
#define URL_MAX 1024
#define IDLE_MS 5000       /* a request must be complete by then */
#define CONNECTIONS_MAX 64 /* at once */

typedef struct {
    const cr_backend_t *backend;
    int connections;
} metrics_t;

typedef struct {
    uv_tcp_t tcp; /* first: the handle's address is the connection's */
    uv_timer_t timer;
    uv_write_t write;
    metrics_t *m;
    http_parser parser;
    char url[URL_MAX];
    size_t url_len, received;
    int answered, closing, handles_open;
    cr_buf_t reply;
    char in[1024];
} conn_t;

/* ---- the text ---- */

static void put(cr_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(cr_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || cr_buf_reserve(b, (size_t)n + 1) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* A label value with \ " and newlines escaped, as the text format wants. */
static void put_label(cr_buf_t *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            put(b, "\\%c", *s);
        else if (*s == '\n')
            put(b, "\\n");
        else
            put(b, "%c", *s);
    }
}

static void family(cr_buf_t *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Per-tenant families: one line per tenant for each. */
#define TENANT_METRICS(X)                                                                          \
    X("cuda_remote_tenant_memory_used_bytes", "gauge", "device memory charged to the tenant",      \
      t->used)                                                                                     \
    X("cuda_remote_tenant_memory_quota_bytes", "gauge",                                            \
      "the tenant's device-memory quota (the device's memory when it has none)",                   \
      t->quota ? t->quota : total)                                                                 \
    X("cuda_remote_tenant_sessions", "gauge", "clients connected now", t->sessions)                \
    X("cuda_remote_tenant_sessions_total", "counter", "clients that connected", t->sessions_total) \
    X("cuda_remote_tenant_launches_total", "counter", "kernel launches", t->usage.launches)        \
    X("cuda_remote_tenant_errors_total", "counter", "calls that failed", t->usage.errors)          \
    X("cuda_remote_tenant_queued_requests", "gauge",                                               \
      "requests received from the tenant's clients and not yet run", t->queued)                    \
    X("cuda_remote_tenant_inflight_launches", "gauge",                                             \
      "launches admitted to the device and not finished", t->inflight)

static void render(cr_buf_t *b, const cr_backend_t *backend)
{
    size_t free_mem = 0, total_mem = 0;
    if (backend->d.cuMemGetInfo_v2)
        backend->d.cuMemGetInfo_v2(&free_mem, &total_mem);
    uint64_t total = total_mem ? total_mem : backend->desc.total_mem;
    size_t count = 0;
    cr_tenant_info_t *tenants = cr_status_tenants(&count);

    family(b, "cuda_remote_info", "gauge", "the server: version, backend, device");
    put(b, "cuda_remote_info{version=\"" CR_VERSION "\",backend=\"%s\",device=\"", backend->kind);
    put_label(b, backend->desc.name);
    put(b, "\"} 1\n");
    family(b, "cuda_remote_uptime_seconds", "gauge", "seconds since the server started");
    put(b, "cuda_remote_uptime_seconds %.3f\n", cr_status_uptime());
    family(b, "cuda_remote_server_restarts_total", "counter",
           "server processes started afresh after the device context was lost");
    put(b, "cuda_remote_server_restarts_total %d\n", cr_status_restarts());
    family(b, "cuda_remote_connections_open", "gauge", "client connections open now");
    put(b, "cuda_remote_connections_open %d\n", cr_guard_open_connections());
    family(b, "cuda_remote_connections_refused_total", "counter",
           "client connections refused (at accept or hello) or dropped, by reason");
    for (int reason = 0; reason < CR_GUARD_REASON_COUNT; reason++) {
        const char *name;
        uint64_t n = cr_guard_refused(reason, &name);
        put(b, "cuda_remote_connections_refused_total{reason=\"%s\"} %llu\n", name,
            (unsigned long long)n);
    }
    family(b, "cuda_remote_device_memory_total_bytes", "gauge", "the device's memory");
    put(b, "cuda_remote_device_memory_total_bytes %llu\n", (unsigned long long)total);
    family(b, "cuda_remote_device_memory_used_bytes", "gauge", "device memory in use");
    put(b, "cuda_remote_device_memory_used_bytes %llu\n",
        (unsigned long long)(total_mem - free_mem));

#define TENANT_FAMILY(metric, type, help, value)                                                   \
    family(b, metric, type, help);                                                                 \
    for (size_t i = 0; i < count; i++) {                                                           \
        const cr_tenant_info_t *t = &tenants[i];                                                   \
        put(b, "%s{tenant=\"%s\"} %llu\n", metric, t->name, (unsigned long long)(value));          \
    }
    TENANT_METRICS(TENANT_FAMILY)
#undef TENANT_FAMILY

    family(b, "cuda_remote_tenant_copy_bytes_total", "counter",
           "bytes copied between host and device");
    for (size_t i = 0; i < count; i++) {
        const cr_tenant_info_t *t = &tenants[i];
        put(b, "cuda_remote_tenant_copy_bytes_total{tenant=\"%s\",direction=\"h2d\"} %llu\n",
            t->name, (unsigned long long)t->usage.bytes_h2d);
        put(b, "cuda_remote_tenant_copy_bytes_total{tenant=\"%s\",direction=\"d2h\"} %llu\n",
            t->name, (unsigned long long)t->usage.bytes_d2h);
    }
    family(b, "cuda_remote_tenant_device_seconds_total", "counter",
           "device time of the tenant's kernels");
    for (size_t i = 0; i < count; i++)
        put(b, "cuda_remote_tenant_device_seconds_total{tenant=\"%s\"} %.9f\n", tenants[i].name,
            (double)tenants[i].usage.device_ns / 1e9);
    family(b, "cuda_remote_tenant_device_share", "gauge",
           "the tenant's part of the device time all tenants used lately (decaying over seconds)");
    for (size_t i = 0; i < count; i++)
        put(b, "cuda_remote_tenant_device_share{tenant=\"%s\"} %.4f\n", tenants[i].name,
            tenants[i].share);
    family(b, "cuda_remote_tenant_compute_limit", "gauge",
           "the most of the device time the tenant may use, even on an idle device (1: no limit)");
    for (size_t i = 0; i < count; i++)
        put(b, "cuda_remote_tenant_compute_limit{tenant=\"%s\"} %g\n", tenants[i].name,
            tenants[i].compute_limit > 0 ? tenants[i].compute_limit : 1.0);
    family(b, "cuda_remote_tenant_weight", "gauge", "the tenant's share under contention");
    for (size_t i = 0; i < count; i++)
        put(b, "cuda_remote_tenant_weight{tenant=\"%s\",priority=\"%s\"} %g\n", tenants[i].name,
            cr_priority_name(tenants[i].priority), tenants[i].weight);
    free(tenants);
}

/* ---- HTTP ---- */

static void on_handle_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    if (--c->handles_open == 0) {
        c->m->connections--;
        cr_buf_free(&c->reply);
        free(c);
    }
}

static void conn_close(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
}

static void on_written(uv_write_t *w, int status)
{
    (void)status;
    conn_close(w->data);
}

static void respond(conn_t *c, int code, const char *reason, const char *type, const cr_buf_t *body)
{
    c->answered = 1;
    put(&c->reply,
        "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
        code, reason, type, body ? body->len : 0);
    if (body && body->len)
        cr_buf_append(&c->reply, body->data, body->len);
    uv_buf_t buf = uv_buf_init((char *)c->reply.data, (unsigned)c->reply.len);
    c->write.data = c;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &buf, 1, on_written) != 0)
        conn_close(c);
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    conn_t *c = p->data;
    if (c->url_len + len >= sizeof c->url)
        return 1; /* too long: fails the parse */
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    c->url[c->url_len] = '\0';
    return 0;
}

static int on_message_complete(http_parser *p)
{
    conn_t *c = p->data;
    struct http_parser_url u;
    http_parser_url_init(&u);
    int is_metrics = http_parser_parse_url(c->url, c->url_len, 0, &u) == 0 &&
                     (u.field_set & (1 << UF_PATH)) && u.field_data[UF_PATH].len == 8 &&
                     memcmp(c->url + u.field_data[UF_PATH].off, "/metrics", 8) == 0;
    cr_buf_t body = CR_BUF_INIT;
    if (p->method != HTTP_GET && p->method != HTTP_HEAD) {
        put(&body, "only GET\n");
        respond(c, 405, "Method Not Allowed", "text/plain", &body);
    } else if (!is_metrics) {
        put(&body, "not found: the metrics are at /metrics\n");
        respond(c, 404, "Not Found", "text/plain", &body);
    } else {
        render(&body, c->m->backend);
        if (p->method == HTTP_HEAD)
            body.len = 0; /* Content-Length 0 then; good enough for a probe */
        respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", &body);
    }
    cr_buf_free(&body);
    return 1; /* one request per connection: stop parsing */
}

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_message_complete = on_message_complete,
};

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn_t *c = h->data;
    *buf = uv_buf_init(c->in, sizeof c->in);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    if (n < 0) {
        conn_close(c);
        return;
    }
    if (n == 0 || c->answered)
        return;
    c->received += (size_t)n;
    size_t used = http_parser_execute(&c->parser, &settings, buf->base, (size_t)n);
    if (c->answered)
        return;
    if (used != (size_t)n || HTTP_PARSER_ERRNO(&c->parser) != HPE_OK || c->received > REQUEST_MAX) {
        cr_buf_t body = CR_BUF_INIT;
        put(&body, "bad request\n");
        respond(c, 400, "Bad Request", "text/plain", &body);
        cr_buf_free(&body);
    }
}

static void on_timeout(uv_timer_t *t)
{
    conn_t *c = t->data;
    if (!c->answered)
        conn_close(c);
}

static void on_connection(uv_stream_t *listener, int status)
{
    metrics_t *m = listener->data;
    if (status != 0)
        return;
    conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->m = m;
    uv_tcp_init(listener->loop, &c->tcp);
    uv_timer_init(listener->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles_open = 2;
    m->connections++;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0 || m->connections > CONNECTIONS_MAX) {
        conn_close(c);
        return;
    }
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    uv_timer_start(&c->timer, on_timeout, IDLE_MS, 0);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
        conn_close(c);
}

int cr_metrics_listen(uv_loop_t *loop, const cr_backend_t *b, const cr_listener_t *l)
{
    static metrics_t m;
    m.backend = b;
    return cr_listen_adopt(loop, l, on_connection, &m) ? 0 : CR_EIO;
}
