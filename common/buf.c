/* Growable byte buffer (see buf.h). */
#include "buf.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

int cr_buf_reserve(cr_buf_t *b, size_t extra)
{
    if (extra <= b->cap - b->len)
        return 0;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return CR_ENOMEM;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return CR_ENOMEM;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

int cr_buf_append(cr_buf_t *b, const void *data, size_t len)
{
    if (cr_buf_reserve(b, len) != 0)
        return CR_ENOMEM;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

void *cr_buf_grow(cr_buf_t *b, size_t n)
{
    if (cr_buf_reserve(b, n) != 0)
        return NULL;
    void *p = b->data + b->len;
    b->len += n;
    return p;
}

void cr_buf_reset(cr_buf_t *b)
{
    b->len = 0;
    b->failed = 0;
}

void cr_buf_free(cr_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

int cr_buf_msgpack_write(void *buf, const char *data, size_t len)
{
    return cr_buf_append(buf, data, len) == 0 ? 0 : -1;
}
