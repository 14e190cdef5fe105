/* Tensor maps: cuTensorMapEncodeTiled and cuTensorMapEncodeIm2col (wire formats in
 * common/protocol.h).
 *
 * A tensor map is a 128-byte descriptor that names a tensor's device address; a kernel's
 * TMA unit reads and writes through it anywhere within the tensor's dims and strides,
 * without any further check. So before the backend encodes one, the whole extent the
 * descriptor can reach, [address, address + extent), must lie in one allocation (or code
 * global) of the calling session: another tenant's memory never gets into a descriptor the
 * server made. Every size comes from the wire and is checked against the rank before use;
 * the extent is computed with overflow checks. What the driver judges (alignment, stride
 * multiples, box limits, mode combinations) is left to the backend.
 *
 * This does not stop a client from forging the 128 bytes itself and passing them to a
 * kernel: that is a kernel computing a wrong pointer, which the README's isolation section
 * already leaves to separate devices. */
#include <string.h>

#include "cr_server_hand.h"
#include "dispatch.h"
#include "error.h"
#include "protocol.h"
#include "session.h"

#define MAX_RANK 5

/* Bits one element occupies in global memory, by CUtensorMapDataType (CUDA 13's cuda.h);
 * 0: not a known type. The two 16-byte-aligned sub-byte types pad every 16 values to 16
 * bytes (16 x U4 + 8 bytes of gap, 16 x U6 + 4 bytes), so they count a byte per value;
 * 16U4_ALIGN8B packs two values to a byte. The row is then rounded up to whole bytes. */
static unsigned element_bits(uint64_t type)
{
    static const unsigned bits[] = {
        [CU_TENSOR_MAP_DATA_TYPE_UINT8] = 8,         [CU_TENSOR_MAP_DATA_TYPE_UINT16] = 16,
        [CU_TENSOR_MAP_DATA_TYPE_UINT32] = 32,       [CU_TENSOR_MAP_DATA_TYPE_INT32] = 32,
        [CU_TENSOR_MAP_DATA_TYPE_UINT64] = 64,       [CU_TENSOR_MAP_DATA_TYPE_INT64] = 64,
        [CU_TENSOR_MAP_DATA_TYPE_FLOAT16] = 16,      [CU_TENSOR_MAP_DATA_TYPE_FLOAT32] = 32,
        [CU_TENSOR_MAP_DATA_TYPE_FLOAT64] = 64,      [CU_TENSOR_MAP_DATA_TYPE_BFLOAT16] = 16,
        [CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ] = 32,  [CU_TENSOR_MAP_DATA_TYPE_TFLOAT32] = 32,
        [CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ] = 32, [CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B] = 4,
        [CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B] = 8, [CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B] = 8,
    };
    return type < sizeof bits / sizeof bits[0] ? bits[type] : 0;
}

/* The bytes from the tensor's first element to the end of its last one:
 * ceil(dim[0] * bits / 8), at least min_row (an interleaved layout moves whole 16- or
 * 32-byte chunks), + sum over i >= 1 of (dim[i] - 1) * stride[i - 1]. Every index the
 * descriptor allows stays below it, whatever the strides (padding, even overlap). 0 when
 * a dim is zero or a step overflows (the call is then refused). */
static uint64_t tensor_extent(unsigned bits, uint32_t rank, const cuuint64_t *dims,
                              const cuuint64_t *strides, uint64_t min_row)
{
    uint64_t row_bits, extent, step;
    for (uint32_t i = 0; i < rank; i++)
        if (dims[i] == 0)
            return 0;
    if (__builtin_mul_overflow(dims[0], (uint64_t)bits, &row_bits))
        return 0;
    extent = row_bits / 8 + (row_bits % 8 != 0);
    if (extent < min_row)
        extent = min_row;
    for (uint32_t i = 1; i < rank; i++)
        if (__builtin_mul_overflow(dims[i] - 1, strides[i - 1], &step) ||
            __builtin_add_overflow(extent, step, &extent))
            return 0;
    return extent;
}

/* An enum or a 32-bit count from the wire. */
static int arg_u32(const cr_request_t *req, uint32_t i, uint32_t *v)
{
    uint64_t x;
    if (cr_arg_u64(req, i, &x) || x > UINT32_MAX)
        return CR_EPROTO;
    *v = (uint32_t)x;
    return 0;
}

/* A bin argument of exactly len bytes, copied into out (the bin may be unaligned). */
static int arg_array(const cr_request_t *req, uint32_t i, void *out, size_t len)
{
    const void *p;
    size_t n;
    if (cr_arg_bin(req, i, &p, &n) || n != len)
        return CR_EPROTO;
    if (len)
        memcpy(out, p, len);
    return 0;
}

/* The fields both encoders share, parsed and checked. */
typedef struct {
    uint32_t type, rank;
    uint64_t address;
    cuuint64_t dims[MAX_RANK], strides[MAX_RANK - 1];
    cuuint32_t element_strides[MAX_RANK];
    uint32_t interleave, swizzle, l2, oob;
} tensor_args_t;

/* [type, rank, address, dims, strides] at 0..4; [element strides, interleave, swizzle, l2
 * promotion, oob fill] from `modes` on. The rank is checked before any array is read, so
 * every array has its rank's exact length. */
static CUresult parse_tensor(const cr_request_t *req, uint32_t min_rank, uint32_t modes,
                             tensor_args_t *t)
{
    if (arg_u32(req, 0, &t->type) || arg_u32(req, 1, &t->rank) || cr_arg_u64(req, 2, &t->address))
        return CUDA_ERROR_INVALID_VALUE;
    if (t->rank < min_rank || t->rank > MAX_RANK)
        return CUDA_ERROR_INVALID_VALUE;
    if (arg_array(req, 3, t->dims, t->rank * sizeof(cuuint64_t)) ||
        arg_array(req, 4, t->strides, (t->rank - 1) * sizeof(cuuint64_t)) ||
        arg_array(req, modes, t->element_strides, t->rank * sizeof(cuuint32_t)) ||
        arg_u32(req, modes + 1, &t->interleave) || arg_u32(req, modes + 2, &t->swizzle) ||
        arg_u32(req, modes + 3, &t->l2) || arg_u32(req, modes + 4, &t->oob))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* The isolation point: the whole tensor in the session's own memory. */
static CUresult check_owned(cr_session_t *s, const tensor_args_t *t)
{
    unsigned bits = element_bits(t->type);
    if (!bits)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t min_row = t->interleave == CU_TENSOR_MAP_INTERLEAVE_16B   ? 16
                       : t->interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32
                                                                       : 0;
    uint64_t extent = tensor_extent(bits, t->rank, t->dims, t->strides, min_row);
    if (!extent || !cr_session_owns(s, t->address, extent))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Replies [r, bin 128] on success, [r] otherwise; owns req. */
static void reply_map(cr_request_t *req, CUresult r, const CUtensorMap *map)
{
    if (r != CUDA_SUCCESS) {
        cr_request_finish(req, r);
        return;
    }
    cr_reply_t reply;
    if (cr_reply_begin(req, &reply, r, 1) == 0) {
        msgpack_pack_bin(&reply.pk, sizeof *map);
        msgpack_pack_bin_body(&reply.pk, map, sizeof *map);
        cr_reply_send(req, &reply, 0);
    }
    cr_request_free(req);
}

void cr_srv_cuTensorMapEncodeTiled(cr_request_t *req)
{
    const cr_driver_t *d = &cr_session_backend(req->session)->d;
    tensor_args_t t;
    cuuint32_t box[MAX_RANK];
    CUtensorMap map; /* CUtensorMap's own alignment is what the driver requires */
    memset(&map, 0, sizeof map);
    CUresult r = req->argc == 11 ? parse_tensor(req, 1, 6, &t) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && arg_array(req, 5, box, t.rank * sizeof(cuuint32_t)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = check_owned(req->session, &t);
    if (r == CUDA_SUCCESS)
        r = d->cuTensorMapEncodeTiled
                ? d->cuTensorMapEncodeTiled(
                      &map, (CUtensorMapDataType)t.type, t.rank, (void *)(uintptr_t)t.address,
                      t.dims, t.strides, box, t.element_strides,
                      (CUtensorMapInterleave)t.interleave, (CUtensorMapSwizzle)t.swizzle,
                      (CUtensorMapL2promotion)t.l2, (CUtensorMapFloatOOBfill)t.oob)
                : CUDA_ERROR_NOT_SUPPORTED;
    reply_map(req, r, &map);
}

void cr_srv_cuTensorMapEncodeIm2col(cr_request_t *req)
{
    const cr_driver_t *d = &cr_session_backend(req->session)->d;
    tensor_args_t t;
    int lower[MAX_RANK - 2], upper[MAX_RANK - 2];
    uint32_t channels, pixels;
    CUtensorMap map;
    memset(&map, 0, sizeof map);
    /* im2col needs channels, a batch and 1 to 3 spatial dimensions: rank 3 to 5 */
    CUresult r = req->argc == 14 ? parse_tensor(req, 3, 9, &t) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && (arg_array(req, 5, lower, (t.rank - 2) * sizeof(int)) ||
                              arg_array(req, 6, upper, (t.rank - 2) * sizeof(int)) ||
                              arg_u32(req, 7, &channels) || arg_u32(req, 8, &pixels)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = check_owned(req->session, &t);
    if (r == CUDA_SUCCESS)
        r = d->cuTensorMapEncodeIm2col
                ? d->cuTensorMapEncodeIm2col(
                      &map, (CUtensorMapDataType)t.type, t.rank, (void *)(uintptr_t)t.address,
                      t.dims, t.strides, lower, upper, channels, pixels, t.element_strides,
                      (CUtensorMapInterleave)t.interleave, (CUtensorMapSwizzle)t.swizzle,
                      (CUtensorMapL2promotion)t.l2, (CUtensorMapFloatOOBfill)t.oob)
                : CUDA_ERROR_NOT_SUPPORTED;
    reply_map(req, r, &map);
}
