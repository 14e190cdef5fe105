/* Frame header encoding and validation (see frame.h for the layout). */
#include "frame.h"

#include "cr_opcodes.h"
#include "error.h"
#include "le.h"
#include "protocol.h"

void cr_frame_encode(const cr_frame_header_t *h, uint8_t out[CR_FRAME_HEADER_SIZE])
{
    cr_le_put32(out, CR_FRAME_MAGIC);
    cr_le_put16(out + 4, h->version ? h->version : CR_PROTOCOL_VERSION);
    cr_le_put16(out + 6, h->opcode);
    cr_le_put32(out + 8, h->flags);
    cr_le_put32(out + 12, h->body_len);
    cr_le_put64(out + 16, h->call_id);
    cr_le_put64(out + 24, h->bulk_len);
}

int cr_frame_decode(const uint8_t in[CR_FRAME_HEADER_SIZE], cr_frame_header_t *h)
{
    if (cr_le_get32(in) != CR_FRAME_MAGIC)
        return CR_EPROTO;
    h->version = cr_le_get16(in + 4);
    h->opcode = cr_le_get16(in + 6);
    h->flags = cr_le_get32(in + 8);
    h->body_len = cr_le_get32(in + 12);
    h->call_id = cr_le_get64(in + 16);
    h->bulk_len = cr_le_get64(in + 24);
    if (h->version != CR_PROTOCOL_VERSION)
        return CR_EVERSION;
    if (h->flags & ~(uint32_t)CR_FRAME_KNOWN_FLAGS)
        return CR_EPROTO;
    if (h->body_len > CR_FRAME_MAX_BODY || h->bulk_len > CR_FRAME_MAX_BULK)
        return CR_ETOOBIG;
    return 0;
}

int cr_frame_admissible(const cr_frame_header_t *h, int admitted)
{
    const cr_opcode_rule_t *rule = cr_opcode_rule(h->opcode);
    if (!admitted &&
        (!(rule->flags & CR_OPR_FIRST) || h->bulk_len || h->body_len > CR_HELLO_MAX_BODY))
        return CR_EPERM;
    return h->bulk_len > rule->bulk_limit ? CR_ETOOBIG : 0;
}
