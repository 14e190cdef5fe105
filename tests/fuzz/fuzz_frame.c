/* libFuzzer target: frame headers as a receiver reads them off a socket (cr_frame_decode).
 *
 * Feeds: the input as a stream of 32-byte headers, each decoded in turn (trailing bytes
 * that make no whole header are ignored).
 * Checks, per header: the result is exactly what the layout in frame.h says it must be
 * (bad magic or unknown flags: CR_EPROTO; another version: CR_EVERSION; body or bulk over
 * its limit: CR_ETOOBIG; else 0), so no bad header slips through and no good one is
 * refused; an accepted header re-encodes to the very same 32 bytes; and encoding any
 * field values then decoding them gives the same values back. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "error.h"
#include "frame.h"
#include "fuzz_check.h"

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The verdict the layout dictates, computed independently of frame.c. */
static int expected(const uint8_t *p)
{
    if (le(p, 4) != CR_FRAME_MAGIC)
        return CR_EPROTO;
    if (le(p + 4, 2) != CR_PROTOCOL_VERSION)
        return CR_EVERSION;
    if (le(p + 8, 4) & ~(uint64_t)CR_FRAME_KNOWN_FLAGS)
        return CR_EPROTO;
    if (le(p + 12, 4) > CR_FRAME_MAX_BODY || le(p + 24, 8) > CR_FRAME_MAX_BULK)
        return CR_ETOOBIG;
    return 0;
}

static void one_header(const uint8_t *p)
{
    cr_frame_header_t h;
    int rc = cr_frame_decode(p, &h);
    FUZZ_CHECK_EQ(rc, expected(p));
    if (rc == 0) {
        uint8_t again[CR_FRAME_HEADER_SIZE];
        cr_frame_encode(&h, again);
        FUZZ_CHECK(memcmp(again, p, sizeof again) == 0);
        FUZZ_CHECK_EQ(h.opcode, le(p + 6, 2));
        FUZZ_CHECK_EQ(h.call_id, le(p + 16, 8));
    }

    /* the fields taken as values: whatever they are, they survive a round trip (a zero
     * version is written as the current one) */
    cr_frame_header_t in = {(uint16_t)le(p + 4, 2),  (uint16_t)le(p + 6, 2), (uint32_t)le(p + 8, 4),
                            (uint32_t)le(p + 12, 4), le(p + 16, 8),          le(p + 24, 8)};
    uint8_t raw[CR_FRAME_HEADER_SIZE];
    cr_frame_header_t out;
    cr_frame_encode(&in, raw);
    FUZZ_CHECK_EQ(le(raw, 4), CR_FRAME_MAGIC);
    rc = cr_frame_decode(raw, &out);
    FUZZ_CHECK_EQ(rc, expected(raw));
    if (rc == 0) {
        FUZZ_CHECK_EQ(out.version, in.version ? in.version : CR_PROTOCOL_VERSION);
        FUZZ_CHECK_EQ(out.opcode, in.opcode);
        FUZZ_CHECK_EQ(out.flags, in.flags);
        FUZZ_CHECK_EQ(out.body_len, in.body_len);
        FUZZ_CHECK_EQ(out.call_id, in.call_id);
        FUZZ_CHECK_EQ(out.bulk_len, in.bulk_len);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (size_t off = 0; size - off >= CR_FRAME_HEADER_SIZE; off += CR_FRAME_HEADER_SIZE)
        one_header(data + off);
    return 0;
}
