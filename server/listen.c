/* Listening sockets: bound before any server process starts (so that they outlive a
 * restart of the server process, supervisor.c), then adopted by each server's loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "address.h"
#include "error.h"
#include "listen.h"
#include "log.h"

int cr_listen_bind(const char *text, int allow_unix, cr_listener_t *out)
{
    static uv_loop_t bind_loop; /* holds the bound handles for as long as the process lives */
    static int bind_loop_ready;
    cr_address_t addr;
    if (cr_address_parse(text, &addr) == 0 && addr.tls) {
        CR_ERROR("%s: listeners take host:port; --tls-cert makes every TCP listener speak TLS",
                 text);
        return CR_EINVAL;
    }
    if (cr_address_parse(text, &addr) != 0 || (addr.is_unix && !allow_unix)) {
        CR_ERROR("%s: not an address (%s)", text,
                 allow_unix ? "host:port or unix:/path" : "host:port");
        return CR_EINVAL;
    }
    if (!bind_loop_ready) {
        if (uv_loop_init(&bind_loop) != 0)
            return CR_ENOMEM;
        bind_loop_ready = 1;
    }
    int rc;
    uv_handle_t *handle;
    if (addr.is_unix) {
        uv_pipe_t *p = malloc(sizeof *p);
        if (!p)
            return CR_ENOMEM;
        uv_pipe_init(&bind_loop, p, 0);
        unlink(addr.path); /* a stale socket of an earlier run */
        rc = uv_pipe_bind(p, addr.path);
        handle = (uv_handle_t *)p;
    } else {
        uv_tcp_t *t = malloc(sizeof *t);
        if (!t)
            return CR_ENOMEM;
        struct sockaddr_storage sa;
        uv_tcp_init(&bind_loop, t);
        rc = uv_ip4_addr(addr.host, addr.port, (struct sockaddr_in *)&sa);
        if (rc != 0)
            rc = uv_ip6_addr(addr.host, addr.port, (struct sockaddr_in6 *)&sa);
        if (rc == 0)
            rc = uv_tcp_bind(t, (struct sockaddr *)&sa, 0);
        handle = (uv_handle_t *)t;
    }
    uv_os_fd_t fd = -1;
    if (rc == 0)
        rc = uv_fileno(handle, &fd);
    /* listening here, before any server process runs: clients that connect while the
     * server process restarts wait in the backlog */
    if (rc == 0 && listen(fd, 128) != 0)
        rc = uv_translate_sys_error(errno);
    if (rc != 0) {
        CR_ERROR("cannot listen on %s: %s", text, uv_strerror(rc));
        uv_close(handle, cr_free_handle);
        return CR_EIO;
    }
    out->fd = fd;
    out->is_unix = addr.is_unix;
    snprintf(out->bound, sizeof out->bound, "%s", text);
    if (!addr.is_unix) { /* the real port: tests listen on port 0 */
        struct sockaddr_storage bound;
        int len = sizeof bound;
        char host[64] = "?";
        if (uv_tcp_getsockname((uv_tcp_t *)handle, (struct sockaddr *)&bound, &len) == 0) {
            int port = 0;
            if (bound.ss_family == AF_INET) {
                const struct sockaddr_in *in = (struct sockaddr_in *)&bound;
                uv_ip4_name(in, host, sizeof host);
                port = ntohs(in->sin_port);
                out->loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
            } else {
                const struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&bound;
                uv_ip6_name(in6, host, sizeof host);
                port = ntohs(in6->sin6_port);
                out->loopback =
                    IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
                    (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127);
            }
            snprintf(out->bound, sizeof out->bound, "%s%s%s:%d",
                     bound.ss_family == AF_INET6 ? "[" : "", host,
                     bound.ss_family == AF_INET6 ? "]" : "", port);
        }
    }
    return 0;
}

uv_stream_t *cr_listen_adopt(uv_loop_t *loop, const cr_listener_t *l, uv_connection_cb on_conn,
                             void *data)
{
    uv_stream_t *stream;
    int rc;
    if (l->is_unix) {
        uv_pipe_t *p = malloc(sizeof *p);
        if (!p)
            return NULL;
        uv_pipe_init(loop, p, 0);
        rc = uv_pipe_open(p, l->fd);
        stream = (uv_stream_t *)p;
    } else {
        uv_tcp_t *t = malloc(sizeof *t);
        if (!t)
            return NULL;
        uv_tcp_init(loop, t);
        rc = uv_tcp_open(t, l->fd);
        stream = (uv_stream_t *)t;
    }
    stream->data = data;
    if (rc == 0)
        rc = uv_listen(stream, 128, on_conn);
    if (rc != 0) {
        CR_ERROR("cannot accept on %s: %s", l->bound, uv_strerror(rc));
        uv_close((uv_handle_t *)stream, cr_free_handle);
        return NULL;
    }
    return stream;
}
