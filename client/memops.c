/* Stream memory operations: cuStreamWaitValue32/64, cuStreamWriteValue32/64 and
 * cuStreamBatchMemOp (their _v2 forms, which the headers name; the first forms have the
 * same ABI). Each is one asynchronous message, a batch of operations:
 *
 *   cuStreamBatchMemOp_v2  [stream, [[operation, address, value, flags]...]]
 *
 * What the driver would refuse at once is refused here too, so that the error comes back
 * from the call and not at the next one that waits: an unknown operation, a batch of 256
 * operations or more, flags the _v2 forms do not take, an address not 4- or 8-byte aligned
 * as its value or outside every allocation. So is a wait no value can satisfy (AND with 0,
 * NOR with every bit set): natively it blocks its stream for ever; the server, which
 * shares the device, does not enqueue one (CUDA_ERROR_INVALID_VALUE). The server checks
 * all of it again, and the memory is the session's. Not capturable yet: on a capturing
 * stream they fail and invalidate the capture.
 *
 * Threads: any application thread; nothing here waits. */
#include "capture.h"
#include "client.h"
#include "cr_opcodes.h"
#include "memory.h"
#include "request.h"
#include "stream.h"

#define MAX_OPS 255 /* "count ... must be less than 256" */

/* CUDA_SUCCESS when op is one the server would enqueue. */
static CUresult check_op(const CUstreamBatchMemOpParams *op)
{
    switch (op->operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
        int wide = op->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
        uint64_t v = wide ? op->waitValue.value64 : op->waitValue.value;
        uint64_t all = wide ? UINT64_MAX : UINT32_MAX;
        unsigned cond = op->waitValue.flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH;
        if (cond > CU_STREAM_WAIT_VALUE_NOR || (cond == CU_STREAM_WAIT_VALUE_AND && v == 0) ||
            (cond == CU_STREAM_WAIT_VALUE_NOR && v == all))
            return CUDA_ERROR_INVALID_VALUE;
        uint64_t size = wide ? 8 : 4;
        return op->waitValue.address % size == 0 && cr_devmap_contains(op->waitValue.address, size)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    }
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
        uint64_t size = op->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64 ? 8 : 4;
        return op->writeValue.flags == 0 && op->writeValue.address % size == 0 &&
                       cr_devmap_contains(op->writeValue.address, size)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    }
    case CU_STREAM_MEM_OP_BARRIER:
        return op->memoryBarrier.flags <= CU_STREAM_MEMORY_BARRIER_TYPE_GPU
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        return op->flushRemoteWrites.flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static void pack_op(msgpack_packer *pk, const CUstreamBatchMemOpParams *op)
{
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint32(pk, op->operation);
    switch (op->operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        msgpack_pack_uint64(pk, op->waitValue.address);
        msgpack_pack_uint64(pk, op->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64
                                    ? op->waitValue.value64
                                    : op->waitValue.value);
        msgpack_pack_uint32(pk, op->waitValue.flags);
        break;
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        msgpack_pack_uint64(pk, op->writeValue.address);
        msgpack_pack_uint64(pk, op->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64
                                    ? op->writeValue.value64
                                    : op->writeValue.value);
        msgpack_pack_uint32(pk, op->writeValue.flags);
        break;
    default: /* a barrier or a flush: flags only */
        msgpack_pack_uint64(pk, 0);
        msgpack_pack_uint64(pk, 0);
        msgpack_pack_uint32(pk, op->memoryBarrier.flags);
    }
}

CUresult cr_hand_cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
                                       CUstreamBatchMemOpParams *ops, unsigned int flags)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!count || count > MAX_OPS || !ops || flags)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) {
        CUresult r = check_op(&ops[i]);
        if (r != CUDA_SUCCESS)
            return r;
    }
    uint64_t sid;
    CUresult r = cr_stream_wire_id(stream, &sid);
    if (r == CUDA_SUCCESS)
        r = cr_capture_check(sid, 0);
    if (r != CUDA_SUCCESS)
        return r;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuStreamBatchMemOp_v2);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_uint64(&m.pk, sid);
    msgpack_pack_array(&m.pk, count);
    for (unsigned i = 0; i < count; i++)
        pack_op(&m.pk, &ops[i]);
    return cr_transport_error(cr_msg_send(&m));
}

/* One operation as a batch of one. */
static CUresult one(CUstream stream, CUstreamBatchMemOpType kind, CUdeviceptr addr, uint64_t value,
                    unsigned flags)
{
    CUstreamBatchMemOpParams op = {.operation = kind};
    if (kind == CU_STREAM_MEM_OP_WAIT_VALUE_32 || kind == CU_STREAM_MEM_OP_WAIT_VALUE_64) {
        op.waitValue.address = addr;
        op.waitValue.value64 = value; /* the 32-bit forms' value is its low half */
        op.waitValue.flags = flags;
    } else {
        op.writeValue.address = addr;
        op.writeValue.value64 = value;
        op.writeValue.flags = flags;
    }
    return cr_hand_cuStreamBatchMemOp_v2(stream, 1, &op, 0);
}

CUresult cr_hand_cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                        unsigned int flags)
{
    return one(stream, CU_STREAM_MEM_OP_WAIT_VALUE_32, addr, value, flags);
}

CUresult cr_hand_cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                        unsigned int flags)
{
    return one(stream, CU_STREAM_MEM_OP_WAIT_VALUE_64, addr, value, flags);
}

CUresult cr_hand_cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                         unsigned int flags)
{
    return one(stream, CU_STREAM_MEM_OP_WRITE_VALUE_32, addr, value, flags);
}

CUresult cr_hand_cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                         unsigned int flags)
{
    return one(stream, CU_STREAM_MEM_OP_WRITE_VALUE_64, addr, value, flags);
}
