/* Validation of msgpack bytes before msgpack-c unpacks them.
 *
 * msgpack-c's C unpacker allocates an array's or map's elements as soon as it reads the
 * header, trusting the declared count: five bytes claiming four billion elements make it
 * reserve 100 GiB. This walk checks, without allocating, that the bytes form exactly one
 * complete object, that every declared count and length fits in the bytes left, and that
 * nesting stays shallow; after it, unpacking allocates at most in proportion to the
 * input. */
#include "mpcheck.h"

#include <stdint.h>

#include "error.h"

#define MAX_DEPTH 32

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* Decodes the header at p: *skip is the bytes of header plus inline payload, *children the
 * number of objects that follow inside it, *container 1 for an array or a map (empty ones
 * too). Returns 0 or CR_ECORRUPT. */
static int header(const uint8_t *p, size_t left, size_t *skip, uint64_t *children, int *container)
{
    uint8_t t = p[0];
    size_t h = 1;         /* header bytes */
    uint64_t payload = 0; /* raw bytes after the header */
    *children = 0;
    *container = (t & 0xe0) == 0x80 || (t >= 0xdc && t <= 0xdf); /* fixmap, fixarray, 16/32 */
    if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) {
        /* fixint, nil, bool */
    } else if ((t & 0xe0) == 0xa0) { /* fixstr */
        payload = t & 0x1f;
    } else if ((t & 0xf0) == 0x90) { /* fixarray */
        *children = t & 0x0f;
    } else if ((t & 0xf0) == 0x80) { /* fixmap */
        *children = 2ULL * (t & 0x0f);
    } else {
        static const struct {
            uint8_t type, len_bytes, fixed, kind; /* kind: 0 raw, 1 array, 2 map, 3 ext */
        } forms[] = {
            {0xc4, 1, 0, 0},  {0xc5, 2, 0, 0}, {0xc6, 4, 0, 0}, /* bin */
            {0xc7, 1, 1, 3},  {0xc8, 2, 1, 3}, {0xc9, 4, 1, 3}, /* ext: + type byte */
            {0xca, 0, 4, 0},  {0xcb, 0, 8, 0},                  /* float */
            {0xcc, 0, 1, 0},  {0xcd, 0, 2, 0}, {0xce, 0, 4, 0}, {0xcf, 0, 8, 0}, /* uint */
            {0xd0, 0, 1, 0},  {0xd1, 0, 2, 0}, {0xd2, 0, 4, 0}, {0xd3, 0, 8, 0}, /* int */
            {0xd4, 0, 2, 0},  {0xd5, 0, 3, 0}, {0xd6, 0, 5, 0}, {0xd7, 0, 9, 0}, /* fixext */
            {0xd8, 0, 17, 0}, {0xd9, 1, 0, 0}, {0xda, 2, 0, 0}, {0xdb, 4, 0, 0}, /* str */
            {0xdc, 2, 0, 1},  {0xdd, 4, 0, 1},                                   /* array */
            {0xde, 2, 0, 2},  {0xdf, 4, 0, 2},                                   /* map */
        };
        size_t i = 0, n = sizeof forms / sizeof forms[0];
        while (i < n && forms[i].type != t)
            i++;
        if (i == n) /* 0xc1 is never used */
            return CR_ECORRUPT;
        if (left < 1u + forms[i].len_bytes)
            return CR_ECORRUPT;
        uint64_t len = be(p + 1, forms[i].len_bytes);
        h = 1u + forms[i].len_bytes;
        switch (forms[i].kind) {
        case 0:
            payload = forms[i].len_bytes ? len : forms[i].fixed;
            break;
        case 1:
            *children = len;
            break;
        case 2:
            *children = 2 * len;
            break;
        default:
            payload = len + forms[i].fixed;
        }
    }
    if (h > left || payload > left - h)
        return CR_ECORRUPT;
    /* every child needs at least one byte: a count beyond what is left is a lie */
    if (*children > left - h - payload)
        return CR_ECORRUPT;
    *skip = h + (size_t)payload;
    return 0;
}

int cr_mpcheck(const void *data, size_t size)
{
    const uint8_t *p = data;
    size_t pos = 0;
    uint64_t pending[MAX_DEPTH + 1]; /* objects still expected at each open level */
    int depth = 0;
    pending[0] = 1;
    while (depth >= 0) {
        if (pending[depth] == 0) {
            depth--;
            continue;
        }
        if (pos >= size)
            return CR_ECORRUPT;
        size_t skip;
        uint64_t children;
        int container;
        if (header(p + pos, size - pos, &skip, &children, &container) != 0)
            return CR_ECORRUPT;
        pos += skip;
        pending[depth]--;
        /* msgpack-c counts every container against its depth, empty ones too */
        if (container && depth == MAX_DEPTH)
            return CR_ECORRUPT;
        if (children)
            pending[++depth] = children;
    }
    return pos == size ? 0 : CR_ECORRUPT;
}
