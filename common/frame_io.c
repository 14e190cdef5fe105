/* Frames over a blocking socket (see frame_io.h). */
#include "frame_io.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "error.h"

#ifndef IOV_MAX
#define IOV_MAX 1024 /* Linux's UIO_MAXIOV */
#endif

int cr_frame_writev(int fd, struct iovec *iov, int n, int pass_fd)
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

int cr_frame_send(int fd, const cr_frame_header_t *h, const void *body)
{
    uint8_t raw[CR_FRAME_HEADER_SIZE];
    cr_frame_encode(h, raw);
    struct iovec iov[2] = {{raw, sizeof raw}, {(void *)body, h->body_len}};
    return cr_frame_writev(fd, iov, h->body_len ? 2 : 1, -1);
}

/* Reads exactly n bytes; dst NULL drops them. */
static int read_exact(int fd, void *dst, size_t n)
{
    char drop[4096];
    char *d = dst;
    while (n > 0) {
        size_t want = d ? n : (n < sizeof drop ? n : sizeof drop);
        ssize_t r = read(fd, d ? d : drop, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r == 0 ? CR_ECLOSED : CR_EIO;
        if (d)
            d += r;
        n -= (size_t)r;
    }
    return 0;
}

int cr_frame_recv(int fd, cr_frame_header_t *h, cr_buf_t *body)
{
    uint8_t raw[CR_FRAME_HEADER_SIZE];
    int err = read_exact(fd, raw, sizeof raw);
    if (err || (err = cr_frame_decode(raw, h)) != 0)
        return err;
    cr_buf_reset(body);
    if (h->body_len && !cr_buf_grow(body, h->body_len))
        return CR_ENOMEM;
    if ((err = read_exact(fd, body->data, h->body_len)) != 0)
        return err;
    return read_exact(fd, NULL, (size_t)h->bulk_len); /* at most CR_FRAME_MAX_BULK */
}
