/* Whole frames over a client's transport (see frame_io.h). */
#include "frame_io.h"

#include <string.h>

#include "error.h"

int cr_frame_send(cr_transport_t *t, const cr_frame_header_t *h, const void *body)
{
    uint8_t raw[CR_FRAME_HEADER_SIZE];
    cr_frame_encode(h, raw);
    struct iovec iov[2] = {{raw, sizeof raw}, {(void *)body, h->body_len}};
    return cr_transport_writev(t, iov, h->body_len ? 2 : 1, -1);
}

/* Reads exactly n bytes; dst NULL drops them. */
static int read_exact(cr_transport_t *t, void *dst, size_t n)
{
    char drop[4096];
    char *d = dst;
    while (n > 0) {
        size_t want = d ? n : (n < sizeof drop ? n : sizeof drop);
        ssize_t r = cr_transport_recv(t, d ? d : drop, want, 0);
        if (r < 0)
            return (int)r;
        if (d)
            d += r;
        n -= (size_t)r;
    }
    return 0;
}

int cr_frame_recv(cr_transport_t *t, cr_frame_header_t *h, cr_buf_t *body)
{
    uint8_t raw[CR_FRAME_HEADER_SIZE];
    int err = read_exact(t, raw, sizeof raw);
    if (err || (err = cr_frame_decode(raw, h)) != 0)
        return err;
    cr_buf_reset(body);
    if (h->body_len && !cr_buf_grow(body, h->body_len))
        return CR_ENOMEM;
    if ((err = read_exact(t, body->data, h->body_len)) != 0)
        return err;
    return read_exact(t, NULL, (size_t)h->bulk_len); /* at most CR_FRAME_MAX_BULK */
}
