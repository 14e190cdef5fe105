/* Wire framing.
 *
 * Every message is a 32-byte header, a msgpack body of body_len bytes, then bulk_len raw
 * bytes (copy payloads, code images) that never pass through msgpack, so they can be read
 * straight into their destination and written straight from their source.
 *
 *   u32 magic  "CRMT"     u16 version   u16 opcode
 *   u32 flags             u32 body_len
 *   u64 call_id
 *   u64 bulk_len
 *
 * All fields little-endian. Opcodes are stable and append-only (codegen/opcodes.txt). */
#ifndef CR_FRAME_H
#define CR_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define CR_FRAME_MAGIC 0x544D5243u /* "CRMT" */
#define CR_PROTOCOL_VERSION 1
#define CR_FRAME_HEADER_SIZE 32

/* Limits checked on every received header, before anything is allocated. A bulk payload
 * of a given opcode may be further limited by the receiver (cr_frame_bulk_limit). */
#define CR_FRAME_MAX_BODY ((uint32_t)4 << 20)
#define CR_FRAME_MAX_BULK ((uint64_t)2 << 30)

enum {
    CR_FRAME_REPLY = 1u << 0,   /* answers the request with the same call_id */
    CR_FRAME_ASYNC = 1u << 1,   /* request: the sender does not wait for a reply */
    CR_FRAME_PARTIAL = 1u << 2, /* reply: more frames for this call_id follow */
};
#define CR_FRAME_KNOWN_FLAGS (CR_FRAME_REPLY | CR_FRAME_ASYNC | CR_FRAME_PARTIAL)

typedef struct {
    uint16_t version;
    uint16_t opcode;
    uint32_t flags;
    uint32_t body_len;
    uint64_t call_id;
    uint64_t bulk_len;
} cr_frame_header_t;

void cr_frame_encode(const cr_frame_header_t *h, uint8_t out[CR_FRAME_HEADER_SIZE]);

/* Decodes and validates a header: magic, version, known flags, body and bulk limits.
 * Returns 0, CR_EPROTO (bad magic, flags), CR_EVERSION or CR_ETOOBIG. */
int cr_frame_decode(const uint8_t in[CR_FRAME_HEADER_SIZE], cr_frame_header_t *h);

/* Whether a server reads a frame with this (decoded) header at all, before it allocates
 * anything for it: the opcode's rules (cr_opcode_rule) bound its bulk, and before its hello
 * is admitted a connection may send only a small hello. 0, CR_EPERM or CR_ETOOBIG. */
int cr_frame_admissible(const cr_frame_header_t *h, int admitted);

#endif
