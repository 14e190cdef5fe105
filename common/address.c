/* Address parsing and a blocking connect with a timeout (see address.h). */
#include "address.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "error.h"

int cr_address_parse(const char *text, cr_address_t *out)
{
    memset(out, 0, sizeof *out);
    if (!text || !*text)
        return CR_EINVAL;
    if (strncmp(text, "tls://", 6) == 0) {
        out->tls = 1;
        text += 6;
    }
    if (strncmp(text, "unix:", 5) == 0) {
        if (out->tls)
            return CR_EINVAL; /* a local socket needs no TLS */
        const char *path = text + 5;
        if (!*path || strlen(path) >= sizeof out->path)
            return CR_EINVAL;
        out->is_unix = 1;
        strcpy(out->path, path);
        return 0;
    }
    const char *host = text, *port = NULL;
    size_t host_len;
    if (text[0] == '[') { /* [v6]:port */
        const char *end = strchr(text, ']');
        if (!end)
            return CR_EINVAL;
        host = text + 1;
        host_len = (size_t)(end - host);
        if (end[1] == ':')
            port = end + 2;
        else if (end[1] != '\0')
            return CR_EINVAL;
    } else {
        const char *colon = strrchr(text, ':');
        if (colon && strchr(text, ':') != colon) /* bare IPv6 without port */
            colon = NULL;
        host_len = colon ? (size_t)(colon - text) : strlen(text);
        port = colon ? colon + 1 : NULL;
    }
    if (host_len == 0 || host_len >= sizeof out->host)
        return CR_EINVAL;
    memcpy(out->host, host, host_len);
    out->port = CR_DEFAULT_PORT;
    if (port) {
        char *end;
        long p = strtol(port, &end, 10);
        if (!*port || *end || p < 0 || p > 65535) /* 0: any port, for listeners */
            return CR_EINVAL;
        out->port = (int)p;
    }
    return 0;
}

static int connect_with_timeout(int fd, const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
    int flags = fcntl(fd, F_GETFL);
    if (fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return -1;
    int rc = connect(fd, sa, len);
    if (rc < 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        rc = poll(&p, 1, timeout_ms);
        if (rc == 0) {
            errno = ETIMEDOUT;
            rc = -1;
        } else if (rc > 0) {
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            errno = soerr;
            rc = soerr ? -1 : 0;
        }
    }
    int saved = errno;
    fcntl(fd, F_SETFL, flags);
    errno = saved;
    return rc;
}

int cr_address_connect(const cr_address_t *addr, int timeout_ms, char *err, int err_len)
{
    int fd = -1;
    if (addr->is_unix) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        strcpy(sun.sun_path, addr->path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 &&
            connect_with_timeout(fd, (struct sockaddr *)&sun, sizeof sun, timeout_ms) == 0)
            return fd;
        if (err)
            snprintf(err, (size_t)err_len, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return CR_ECONNREFUSED;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", addr->port);
    int gai = getaddrinfo(addr->host, port, &hints, &res);
    if (gai != 0) {
        if (err)
            snprintf(err, (size_t)err_len, "%s", gai_strerror(gai));
        return CR_ENOTFOUND;
    }
    int saved = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        if (connect_with_timeout(fd, ai->ai_addr, ai->ai_addrlen, timeout_ms) == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            freeaddrinfo(res);
            return fd;
        }
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (err)
        snprintf(err, (size_t)err_len, "%s", strerror(saved));
    return CR_ECONNREFUSED;
}
