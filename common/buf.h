/* A growable byte buffer, also usable as a msgpack-c write target. */
#ifndef CR_BUF_H
#define CR_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
    int failed; /* set when an append could not allocate; the content is then incomplete */
} cr_buf_t;

#define CR_BUF_INIT                                                                                \
    {                                                                                              \
        NULL, 0, 0, 0                                                                              \
    }

/* Ensures room for `extra` more bytes. 0 or CR_ENOMEM. */
int cr_buf_reserve(cr_buf_t *b, size_t extra);
int cr_buf_append(cr_buf_t *b, const void *data, size_t len);
/* Appends n uninitialised bytes and returns a pointer to them (NULL on failure). */
void *cr_buf_grow(cr_buf_t *b, size_t n);
void cr_buf_reset(cr_buf_t *b);
void cr_buf_free(cr_buf_t *b);
/* msgpack_packer write callback: msgpack_packer_init(&pk, buf, cr_buf_msgpack_write). */
int cr_buf_msgpack_write(void *buf, const char *data, size_t len);

#endif
