/* A client's stream to the server, plaintext or TLS (see transport.h). */
#include "transport.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"

#ifndef IOV_MAX
#define IOV_MAX 1024 /* Linux's UIO_MAXIOV */
#endif

#define TLS_INPUT (256u << 10) /* ciphertext read at once */

static int plain_writev(int fd, struct iovec *iov, int n, int pass_fd)
{
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    while (n > 0) {
        /* sendmsg, not writev: MSG_NOSIGNAL keeps a closed connection from raising SIGPIPE
         * in the program */
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)(n > IOV_MAX ? IOV_MAX : n)};
        if (pass_fd >= 0) {
            memset(&control, 0, sizeof control);
            msg.msg_control = control.space;
            msg.msg_controllen = sizeof control.space;
            struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
        }
        ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return CR_EIO;
        }
        pass_fd = -1; /* sent with the first bytes */
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

static int send_all(int fd, const uint8_t *p, size_t n)
{
    struct iovec iov = {(void *)p, n};
    return n ? plain_writev(fd, &iov, 1, -1) : 0;
}

/* The handshake, within the deadline; the bytes after it stay in t->in. */
static int handshake(cr_transport_t *t, int64_t deadline_ns, char *err, size_t err_len)
{
    size_t pos = 0, len = 0;
    for (;;) {
        size_t used = 0;
        int rc = cr_tls_handshake(t->tls, t->in + pos, len - pos, &used);
        pos += used;
        t->sealed.len = 0;
        if (cr_tls_take(t->tls, &t->sealed) < 0 || send_all(t->fd, t->sealed.data, t->sealed.len)) {
            snprintf(err, err_len, "TLS: the server closed the connection during the handshake");
            return CR_EIO;
        }
        if (rc == 1)
            break;
        if (rc < 0) {
            snprintf(err, err_len, "TLS: %s", cr_tls_why(t->tls));
            return rc;
        }
        int64_t left_ms = (deadline_ns - cr_now_ns()) / 1000000;
        struct pollfd p = {t->fd, POLLIN, 0};
        int ready = left_ms > 0 ? poll(&p, 1, (int)left_ms) : 0;
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready == 0) {
            snprintf(err, err_len,
                     "TLS: no handshake within the time allowed (is the server a TLS listener?)");
            return CR_ETIMEDOUT;
        }
        ssize_t r = recv(t->fd, t->in, TLS_INPUT, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(err, err_len,
                     "TLS: the server closed the connection during the handshake; it may not "
                     "speak TLS (a plaintext listener is reached without tls://)");
            return CR_ECLOSED;
        }
        pos = 0;
        len = (size_t)r;
    }
    t->in_pos = pos;
    t->in_len = len;
    return 0;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int cr_transport_connect(cr_transport_t *t, const cr_address_t *addr, int timeout_ms, char *err,
                         size_t err_len)
{
    memset(t, 0, sizeof *t);
    int64_t deadline = cr_now_ns() + (int64_t)timeout_ms * 1000000;
    t->fd = cr_address_connect(addr, timeout_ms, err, (int)err_len);
    if (t->fd < 0)
        return t->fd;
    if (!addr->tls)
        return 0;
    const char *name = env("CUDA_REMOTE_TLS_SERVER_NAME");
    cr_tls_context_t *ctx =
        cr_tls_client_context(env("CUDA_REMOTE_TLS_CA"), env("CUDA_REMOTE_TLS_CERT"),
                              env("CUDA_REMOTE_TLS_KEY"), t->why, sizeof t->why);
    int rc = CR_EINVAL;
    if (!ctx) {
        snprintf(err, err_len, "TLS settings (CUDA_REMOTE_TLS_*): %s", t->why);
        goto fail;
    }
    t->tls = cr_tls_new(ctx, 0, name ? name : addr->host);
    cr_tls_context_free(ctx); /* the connection holds its own reference */
    t->in = malloc(TLS_INPUT);
    if (!t->tls || !t->in) {
        snprintf(err, err_len, "out of memory");
        rc = CR_ENOMEM;
        goto fail;
    }
    if ((rc = handshake(t, deadline, err, err_len)) == 0)
        return 0;
fail:
    cr_transport_close(t);
    return rc;
}

int cr_transport_writev(cr_transport_t *t, struct iovec *iov, int n, int pass_fd)
{
    if (!t->tls)
        return plain_writev(t->fd, iov, n, pass_fd);
    size_t total = 0, done = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    do { /* a bounded piece at a time: the server decrypts one while we encrypt the next */
        t->sealed.len = 0;
        ssize_t k = cr_tls_seal(t->tls, iov, n, done, CR_TLS_SEAL_CHUNK, &t->sealed);
        if (k < 0) {
            snprintf(t->why, sizeof t->why, "TLS: %s", cr_tls_why(t->tls));
            return CR_EIO;
        }
        if (send_all(t->fd, t->sealed.data, t->sealed.len) != 0)
            return CR_EIO;
        done += (size_t)k;
        if (k == 0)
            break;
    } while (done < total);
    if (t->sealed.cap > 4 * CR_TLS_SEAL_CHUNK) /* keep a piece's worth, not a whole payload */
        cr_buf_free(&t->sealed);
    return 0;
}

ssize_t cr_transport_recv(cr_transport_t *t, void *dst, size_t n, int dontwait)
{
    for (;;) {
        if (t->tls && !t->drained) { /* a caller polling an idle connection skips this */
            size_t used = 0;
            ssize_t got =
                cr_tls_read(t->tls, t->in + t->in_pos, t->in_len - t->in_pos, &used, dst, n);
            t->in_pos += used;
            if (got > 0 || got == CR_ECLOSED)
                return got;
            if (got < 0) {
                snprintf(t->why, sizeof t->why, "TLS: %s", cr_tls_why(t->tls));
                return got;
            }
            t->in_pos = t->in_len = 0; /* all of it went in, and nothing is left inside */
            t->drained = 1;
        }
        void *into = t->tls ? t->in : dst;
        size_t cap = t->tls ? TLS_INPUT : n;
        ssize_t r = recv(t->fd, into, cap, dontwait ? MSG_DONTWAIT : 0);
        if (r > 0) {
            if (!t->tls)
                return r;
            t->in_len = (size_t)r;
            t->drained = 0;
            continue;
        }
        if (r == 0)
            return CR_ECLOSED;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : CR_EIO;
    }
}

int cr_transport_buffered(cr_transport_t *t)
{
    return t->tls && !t->drained && (t->in_pos < t->in_len || cr_tls_has_plaintext(t->tls));
}

void cr_transport_close(cr_transport_t *t)
{
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
    cr_tls_free(t->tls);
    t->tls = NULL;
    free(t->in);
    t->in = NULL;
    cr_buf_free(&t->sealed);
}
