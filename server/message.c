/* Frames to the client: replies and messages are built here into one buffer, header
 * first, and queued with cr_server_send (outbox.c). */
#include <stdlib.h>

#include "loop.h"
#include "protocol.h"

cr_outmsg_t *cr_message_new(uint16_t opcode, uint64_t call_id, uint32_t flags, msgpack_packer *pk)
{
    cr_outmsg_t *m = calloc(1, sizeof *m);
    if (!m || !cr_buf_grow(&m->head, CR_FRAME_HEADER_SIZE)) {
        free(m);
        return NULL;
    }
    msgpack_packer_init(pk, &m->head, cr_buf_msgpack_write);
    return m;
}

void cr_message_finish(cr_outmsg_t *m, uint16_t opcode, uint64_t call_id, uint32_t flags)
{
    cr_frame_header_t h = {
        CR_PROTOCOL_VERSION, opcode, flags, (uint32_t)(m->head.len - CR_FRAME_HEADER_SIZE), call_id,
        m->bulk_len};
    cr_frame_encode(&h, m->head.data);
}
