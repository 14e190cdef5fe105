/* Frame header encoding and validation (see frame.h for the layout). */
#include "frame.h"

#include "error.h"

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void cr_frame_encode(const cr_frame_header_t *h, uint8_t out[CR_FRAME_HEADER_SIZE])
{
    put32(out, CR_FRAME_MAGIC);
    put16(out + 4, h->version ? h->version : CR_PROTOCOL_VERSION);
    put16(out + 6, h->opcode);
    put32(out + 8, h->flags);
    put32(out + 12, h->body_len);
    put64(out + 16, h->call_id);
    put64(out + 24, h->bulk_len);
}

int cr_frame_decode(const uint8_t in[CR_FRAME_HEADER_SIZE], cr_frame_header_t *h)
{
    if (get32(in) != CR_FRAME_MAGIC)
        return CR_EPROTO;
    h->version = get16(in + 4);
    h->opcode = get16(in + 6);
    h->flags = get32(in + 8);
    h->body_len = get32(in + 12);
    h->call_id = get64(in + 16);
    h->bulk_len = get64(in + 24);
    if (h->version != CR_PROTOCOL_VERSION)
        return CR_EVERSION;
    if (h->flags & ~(uint32_t)CR_FRAME_KNOWN_FLAGS)
        return CR_EPROTO;
    if (h->body_len > CR_FRAME_MAX_BODY || h->bulk_len > CR_FRAME_MAX_BULK)
        return CR_ETOOBIG;
    return 0;
}
