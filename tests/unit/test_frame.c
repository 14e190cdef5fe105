/* Frame headers: round trip, and every validation the receiver relies on. */
#include "check.h"
#include "error.h"
#include "frame.h"

static void test_round_trip(void)
{
    cr_frame_header_t h = {
        CR_PROTOCOL_VERSION,   0x1234,       CR_FRAME_REPLY | CR_FRAME_PARTIAL, 77,
        0x0102030405060708ULL, 0x11223344ULL};
    uint8_t raw[CR_FRAME_HEADER_SIZE];
    cr_frame_encode(&h, raw);
    /* the layout is fixed: magic "CRMT", version, opcode, flags, lengths, little-endian */
    static const uint8_t expected[CR_FRAME_HEADER_SIZE] = {
        0x43, 0x52, 0x4d, 0x54, 0x01, 0x00, 0x34, 0x12, 0x05, 0x00, 0x00,
        0x00, 0x4d, 0x00, 0x00, 0x00, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03,
        0x02, 0x01, 0x44, 0x33, 0x22, 0x11, 0x00, 0x00, 0x00, 0x00};
    CHECK_EQ_MEM(raw, expected, sizeof raw);
    cr_frame_header_t d;
    CHECK_EQ_INT(cr_frame_decode(raw, &d), 0);
    CHECK_EQ_INT(d.version, CR_PROTOCOL_VERSION);
    CHECK_EQ_INT(d.opcode, 0x1234);
    CHECK_EQ_INT(d.flags, CR_FRAME_REPLY | CR_FRAME_PARTIAL);
    CHECK_EQ_INT(d.body_len, 77);
    CHECK_EQ_U64(d.call_id, 0x0102030405060708ULL);
    CHECK_EQ_U64(d.bulk_len, 0x11223344ULL);
}

static void test_rejections(void)
{
    cr_frame_header_t h = {CR_PROTOCOL_VERSION, 1, 0, 10, 1, 0}, d;
    uint8_t raw[CR_FRAME_HEADER_SIZE];

    cr_frame_encode(&h, raw);
    raw[0] ^= 1;
    CHECK_EQ_INT(cr_frame_decode(raw, &d), CR_EPROTO); /* magic */

    cr_frame_encode(&h, raw);
    raw[4] = 2;
    CHECK_EQ_INT(cr_frame_decode(raw, &d), CR_EVERSION);

    h.flags = 1u << 7; /* unknown flag */
    cr_frame_encode(&h, raw);
    CHECK_EQ_INT(cr_frame_decode(raw, &d), CR_EPROTO);
    h.flags = 0;

    h.body_len = CR_FRAME_MAX_BODY; /* exactly the limit is fine */
    cr_frame_encode(&h, raw);
    CHECK_EQ_INT(cr_frame_decode(raw, &d), 0);
    h.body_len = CR_FRAME_MAX_BODY + 1;
    cr_frame_encode(&h, raw);
    CHECK_EQ_INT(cr_frame_decode(raw, &d), CR_ETOOBIG);
    h.body_len = 0;

    h.bulk_len = CR_FRAME_MAX_BULK + 1;
    cr_frame_encode(&h, raw);
    CHECK_EQ_INT(cr_frame_decode(raw, &d), CR_ETOOBIG);
    h.bulk_len = UINT64_MAX;
    cr_frame_encode(&h, raw);
    CHECK_EQ_INT(cr_frame_decode(raw, &d), CR_ETOOBIG);
}

int main(void)
{
    test_round_trip();
    test_rejections();
    CHECK_DONE();
}
