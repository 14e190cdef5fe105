/* Tensor maps (cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col): the 128-byte descriptor a
 * Hopper kernel takes as a parameter to drive its TMA unit (wire formats in
 * common/protocol.h).
 *
 * The descriptor holds the tensor's device address, so it is encoded by the server's
 * driver, which first checks that the whole tensor lies in this session's own memory. What
 * the driver refuses without looking at the device (NULL arrays, a rank out of range, a
 * misaligned destination) is refused here, so such a call costs no round trip and no
 * arrays of unknown length are read. Everything else (alignment, strides, box sizes) is the
 * driver's to judge: its answer comes back with the descriptor.
 *
 * Threads: any application thread; an encoding waits for its reply. */
#include <stdint.h>
#include <string.h>

#include "client.h"
#include "context.h"
#include "protocol.h"
#include "request.h"

#define MAX_RANK 5 /* the driver's largest tensor rank */

/* What both encoders check the same way. */
static CUresult check_common(const CUtensorMap *map, cuuint32_t rank, cuuint32_t min_rank,
                             const cuuint64_t *dims, const cuuint64_t *strides,
                             const cuuint32_t *element_strides)
{
    if (!map || !dims || !element_strides)
        return CUDA_ERROR_INVALID_VALUE;
    /* the driver requires the descriptor's own 64-byte alignment (CUtensorMap is declared
     * with more; a cast buffer may not have it) */
    if ((uintptr_t)map % 64)
        return CUDA_ERROR_INVALID_VALUE;
    if (rank < min_rank || rank > MAX_RANK)
        return CUDA_ERROR_INVALID_VALUE;
    /* rank 1 has no strides: the pointer may then be anything, as for the driver */
    if (rank > 1 && !strides)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Packs the leading fields: [data type, rank, address, dims, strides]. */
static void pack_tensor(msgpack_packer *pk, CUtensorMapDataType type, cuuint32_t rank,
                        const void *address, const cuuint64_t *dims, const cuuint64_t *strides)
{
    msgpack_pack_uint32(pk, (uint32_t)type);
    msgpack_pack_uint32(pk, rank);
    msgpack_pack_uint64(pk, (uint64_t)(uintptr_t)address);
    /* the arrays travel as raw little-endian bins, as every host of the project is */
    msgpack_pack_bin(pk, rank * sizeof(cuuint64_t));
    msgpack_pack_bin_body(pk, dims, rank * sizeof(cuuint64_t));
    msgpack_pack_bin(pk, (rank - 1) * sizeof(cuuint64_t));
    msgpack_pack_bin_body(pk, strides ? (const void *)strides : "",
                          (rank - 1) * sizeof(cuuint64_t));
}

/* Packs the trailing fields: [element strides, interleave, swizzle, l2 promotion, oob fill]. */
static void pack_modes(msgpack_packer *pk, cuuint32_t rank, const cuuint32_t *element_strides,
                       CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                       CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    msgpack_pack_bin(pk, rank * sizeof(cuuint32_t));
    msgpack_pack_bin_body(pk, element_strides, rank * sizeof(cuuint32_t));
    msgpack_pack_uint32(pk, (uint32_t)interleave);
    msgpack_pack_uint32(pk, (uint32_t)swizzle);
    msgpack_pack_uint32(pk, (uint32_t)l2);
    msgpack_pack_uint32(pk, (uint32_t)oob);
}

/* Sends the message begun in m and copies the reply's descriptor into *map. */
static CUresult encode_call(cr_msg_t *m, CUtensorMap *map)
{
    cr_pending_t p = {0};
    msgpack_unpacked u;
    CUresult r = cr_call(m, &p, &u);
    if (r == CUDA_SUCCESS) {
        const msgpack_object_array *a = &u.data.via.array;
        if (a->size < 2 || a->ptr[1].type != MSGPACK_OBJECT_BIN ||
            a->ptr[1].via.bin.size != sizeof *map)
            r = CUDA_ERROR_UNKNOWN;
        else
            memcpy(map, a->ptr[1].via.bin.ptr, sizeof *map);
    }
    cr_reply_done(&p, &u);
    return r;
}

CUresult cr_hand_cuTensorMapEncodeTiled(
    CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
    const cuuint32_t *boxDim, const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
    CUresult r = cr_ctx_require();
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = check_common(tensorMap, tensorRank, 1, globalDim, globalStrides, elementStrides)) !=
        CUDA_SUCCESS)
        return r;
    if (!boxDim)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cr_client()->conn, &m, CR_OP_cuTensorMapEncodeTiled);
    if (err)
        return cr_transport_error(err);
    msgpack_pack_array(&m.pk, 11);
    pack_tensor(&m.pk, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides);
    msgpack_pack_bin(&m.pk, tensorRank * sizeof(cuuint32_t));
    msgpack_pack_bin_body(&m.pk, boxDim, tensorRank * sizeof(cuuint32_t));
    pack_modes(&m.pk, tensorRank, elementStrides, interleave, swizzle, l2Promotion, oobFill);
    return encode_call(&m, tensorMap);
}

CUresult cr_hand_cuTensorMapEncodeIm2col(
    CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
    const int *pixelBoxLowerCorner, const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
    cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
    CUresult r = cr_ctx_require();
    if (r != CUDA_SUCCESS)
        return r;
    /* im2col needs a channel dimension, a batch dimension and 1 to 3 spatial ones */
    if ((r = check_common(tensorMap, tensorRank, 3, globalDim, globalStrides, elementStrides)) !=
        CUDA_SUCCESS)
        return r;
    if (!pixelBoxLowerCorner || !pixelBoxUpperCorner)
        return CUDA_ERROR_INVALID_VALUE;
    cr_msg_t m;
    int err = cr_msg_begin(cr_client()->conn, &m, CR_OP_cuTensorMapEncodeIm2col);
    if (err)
        return cr_transport_error(err);
    size_t corner = (tensorRank - 2) * sizeof(int); /* one offset per spatial dimension */
    msgpack_pack_array(&m.pk, 14);
    pack_tensor(&m.pk, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides);
    msgpack_pack_bin(&m.pk, corner);
    msgpack_pack_bin_body(&m.pk, pixelBoxLowerCorner, corner);
    msgpack_pack_bin(&m.pk, corner);
    msgpack_pack_bin_body(&m.pk, pixelBoxUpperCorner, corner);
    msgpack_pack_uint32(&m.pk, channelsPerPixel);
    msgpack_pack_uint32(&m.pk, pixelsPerColumn);
    pack_modes(&m.pk, tensorRank, elementStrides, interleave, swizzle, l2Promotion, oobFill);
    return encode_call(&m, tensorMap);
}
