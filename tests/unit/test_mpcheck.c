/* The msgpack pre-check: accepts what msgpack-c produces, rejects lies about sizes, and
 * never accepts what msgpack-c would not unpack completely. */
#include <msgpack.h>
#include <stdlib.h>

#include "buf.h"
#include "check.h"
#include "error.h"
#include "mpcheck.h"

static void pack_sample(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 9);
    msgpack_pack_uint64(pk, 0xfedcba9876543210ULL);
    msgpack_pack_int64(pk, -5);
    msgpack_pack_double(pk, 1.5);
    msgpack_pack_float(pk, 2.5f);
    msgpack_pack_nil(pk);
    msgpack_pack_true(pk);
    msgpack_pack_str(pk, 300);
    for (int i = 0; i < 300; i++)
        msgpack_pack_str_body(pk, "x", 1);
    msgpack_pack_map(pk, 2);
    msgpack_pack_str(pk, 1);
    msgpack_pack_str_body(pk, "k", 1);
    msgpack_pack_bin(pk, 70000);
    for (int i = 0; i < 70000; i++)
        msgpack_pack_bin_body(pk, "\x01", 1);
    msgpack_pack_int(pk, 7);
    msgpack_pack_array(pk, 20);
    for (int i = 0; i < 20; i++)
        msgpack_pack_array(pk, 0);
    msgpack_pack_ext(pk, 3, 7);
    msgpack_pack_ext_body(pk, "abc", 3);
}

/* Does msgpack-c unpack exactly these bytes as one object? */
static int msgpack_accepts(const uint8_t *p, size_t n)
{
    msgpack_unpacked u;
    size_t off = 0;
    msgpack_unpacked_init(&u);
    int ok =
        msgpack_unpack_next(&u, (const char *)p, n, &off) == MSGPACK_UNPACK_SUCCESS && off == n;
    msgpack_unpacked_destroy(&u);
    return ok;
}

int main(void)
{
    cr_buf_t b = CR_BUF_INIT;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &b, cr_buf_msgpack_write);
    pack_sample(&pk);
    CHECK_EQ_INT(cr_mpcheck(b.data, b.len), 0);
    CHECK(msgpack_accepts(b.data, b.len));

    /* every truncation and one extra byte are refused */
    int refused = 0;
    for (size_t n = 0; n < b.len; n++)
        refused += cr_mpcheck(b.data, n) == CR_ECORRUPT;
    CHECK_EQ_INT(refused, b.len);
    uint8_t *longer = malloc(b.len + 1);
    memcpy(longer, b.data, b.len);
    longer[b.len] = 0xc0;
    CHECK_EQ_INT(cr_mpcheck(longer, b.len + 1), CR_ECORRUPT);
    free(longer);

    /* five bytes claiming four billion elements: refused before anything is allocated */
    static const uint8_t huge_array[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t huge_map[] = {0xdf, 0x10, 0x00, 0x00, 0x00, 0xc0, 0xc0};
    static const uint8_t huge_bin[] = {0xc6, 0x7f, 0xff, 0xff, 0xff, 0x00};
    static const uint8_t never_used[] = {0xc1};
    CHECK_EQ_INT(cr_mpcheck(huge_array, sizeof huge_array), CR_ECORRUPT);
    CHECK_EQ_INT(cr_mpcheck(huge_map, sizeof huge_map), CR_ECORRUPT);
    CHECK_EQ_INT(cr_mpcheck(huge_bin, sizeof huge_bin), CR_ECORRUPT);
    CHECK_EQ_INT(cr_mpcheck(never_used, 1), CR_ECORRUPT);
    CHECK_EQ_INT(cr_mpcheck(NULL, 0), CR_ECORRUPT);

    /* nesting: 32 levels are fine, 33 are not */
    uint8_t nest[40];
    for (int d = 0; d < 33; d++)
        nest[d] = 0x91; /* fixarray of one */
    nest[32] = 0xc0;
    CHECK_EQ_INT(cr_mpcheck(nest, 33), 0);
    nest[32] = 0x91;
    nest[33] = 0xc0;
    CHECK_EQ_INT(cr_mpcheck(nest, 34), CR_ECORRUPT);

    /* random mutations: whatever the check accepts, msgpack-c unpacks exactly */
    uint8_t *m = malloc(b.len);
    unsigned seed = 99;
    int accepted = 0, disagreements = 0;
    for (int round = 0; round < 20000; round++) {
        memcpy(m, b.data, b.len);
        size_t n = b.len;
        for (int k = 0; k < 3; k++) {
            seed = seed * 1103515245 + 12345;
            size_t at = (seed >> 8) % 400; /* the headers live near the start */
            m[at] ^= (uint8_t)(1u << ((seed >> 4) % 8));
        }
        seed = seed * 1103515245 + 12345;
        if (seed % 4 == 0)
            n = (seed >> 8) % b.len;
        if (cr_mpcheck(m, n) == 0) {
            accepted++;
            disagreements += !msgpack_accepts(m, n);
        }
    }
    CHECK_EQ_INT(disagreements, 0);
    CHECK(accepted > 100); /* the mutations do not only produce garbage */
    free(m);
    cr_buf_free(&b);
    CHECK_DONE();
}
