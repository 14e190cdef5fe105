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
 * all of it again, and the memory is the session's. On a capturing stream the batch
 * becomes a node of batch memory operations (server/graph.c); graph.c adds such nodes by
 * hand too, with what is here.
 *
 * Threads: any application thread; nothing here waits. */
#include "memops.h"

#include "capture.h"
#include "cr_opcodes.h"
#include "memory.h"
#include "request.h"
#include "stream.h"

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

CUresult cr_memops_check(const CUstreamBatchMemOpParams *ops, unsigned count)
{
    if (!count || count > CR_MEMOPS_MAX || !ops)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) {
        CUresult r = check_op(&ops[i]);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
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

void cr_memops_pack(msgpack_packer *pk, const CUstreamBatchMemOpParams *ops, unsigned count)
{
    msgpack_pack_array(pk, count);
    for (unsigned i = 0; i < count; i++)
        pack_op(pk, &ops[i]);
}

int cr_memops_unpack(const msgpack_object *o, CUstreamBatchMemOpParams *ops)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > CR_MEMOPS_MAX)
        return -1;
    for (uint32_t i = 0; i < o->via.array.size; i++) {
        const msgpack_object *e = &o->via.array.ptr[i];
        uint64_t v[4];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 4)
            return -1;
        for (int k = 0; k < 4; k++) {
            if (e->via.array.ptr[k].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                return -1;
            v[k] = e->via.array.ptr[k].via.u64;
        }
        CUstreamBatchMemOpParams *op = &ops[i];
        *op = (CUstreamBatchMemOpParams){.operation = (CUstreamBatchMemOpType)v[0]};
        if (v[0] == CU_STREAM_MEM_OP_BARRIER || v[0] == CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES) {
            op->memoryBarrier.flags = (unsigned)v[3];
        } else { /* a write's fields lie where a wait's do */
            op->waitValue.address = v[1];
            op->waitValue.value64 = v[2];
            op->waitValue.flags = (unsigned)v[3];
        }
    }
    return (int)o->via.array.size;
}

CUresult cr_hand_cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
                                       CUstreamBatchMemOpParams *ops, unsigned int flags)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = flags ? CUDA_ERROR_INVALID_VALUE : cr_memops_check(ops, count);
    uint64_t sid;
    if (r == CUDA_SUCCESS)
        r = cr_stream_wire_id(stream, &sid);
    if (r == CUDA_SUCCESS)
        r = cr_capture_check(sid, 1); /* captured as a node */
    if (r != CUDA_SUCCESS)
        return r;
    cr_msg_t m;
    int err = cr_msg_begin(cl->conn, &m, CR_OP_cuStreamBatchMemOp_v2);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_uint64(&m.pk, sid);
    cr_memops_pack(&m.pk, ops, count);
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
