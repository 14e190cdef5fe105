/* Tensor maps of the emulated device: cuTensorMapEncodeTiled and cuTensorMapEncodeIm2col.
 *
 * The arguments are checked as cuda.h documents the driver's requirements (CUDA 13), each
 * violation CUDA_ERROR_INVALID_VALUE. The PTX interpreter does not run TMA instructions
 * (cp.async.bulk.tensor), so the descriptor only has to be deterministic and hold the
 * fields; its layout is the emulated device's own, every value little-endian:
 *
 *   offset  size  field
 *        0     4  magic "CRTM" (0x4d545243)
 *        4     1  layout version (1)
 *        5     1  kind: 1 tiled, 2 im2col
 *        6     1  data type (CUtensorMapDataType)
 *        7     1  rank (1 to 5)
 *        8     4  interleave, swizzle, l2 promotion, oob fill (one byte each)
 *       12     2  im2col: channels per pixel (at most 256); tiled: 0
 *       14     2  im2col: pixels per column (at most 1024); tiled: 0
 *       16     8  global address
 *       24    20  global dims minus one, u32 each (dims are 1 to 2^32), rank of them
 *       48    32  global strides in bytes, u64 each, rank - 1 of them
 *       80    10  tiled: box dims, u16 each, rank of them
 *       90     6  im2col: lower pixel box corner, i16 each, rank - 2 of them
 *       96     6  im2col: upper pixel box corner, i16 each, rank - 2 of them
 *      102     5  element strides, one byte each, rank of them
 *
 * Every other byte (unused slots of a lower rank included) is zero. */
#include "emu.h"
#include "le.h"

#include <string.h>

#define MAX_RANK 5
#define LAYOUT_MAGIC 0x4d545243u
#define LAYOUT_VERSION 1
enum { KIND_TILED = 1, KIND_IM2COL = 2 };

/* Bits an element takes: the packed 16U4_ALIGN8B type two values a byte, the 16-byte-aligned
 * packed types one byte a value (16 values padded to 16 bytes); 0 for an unknown type. */
static unsigned element_bits(CUtensorMapDataType type)
{
    switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8:
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B:
    case CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B:
        return 8;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B:
        return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
        return 16;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
        return 32;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
        return 64;
    }
    return 0;
}

static int is_float(CUtensorMapDataType type)
{
    switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
        return 1;
    default:
        return 0;
    }
}

/* The two packed types whose values sit in 16-byte units: 32-byte alignment, 128-value
 * rows and boxes. */
static int is_align16_packed(CUtensorMapDataType type)
{
    return type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B ||
           type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

/* The span a swizzle pattern shuffles within, in bytes (0: none). */
static unsigned swizzle_span(CUtensorMapSwizzle swizzle)
{
    switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_32B:
        return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B:
        return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B:
        return 128;
    default:
        return 0;
    }
}

/* What both encoders require of the tensor and the modes. `inner` is the number of elements
 * of the box's inner dimension (boxDim[0], or channelsPerPixel for im2col), whose bytes the
 * swizzle span bounds. */
static CUresult check_tensor(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank,
                             cuuint32_t min_rank, const void *address, const cuuint64_t *dims,
                             const cuuint64_t *strides, const cuuint32_t *element_strides,
                             uint64_t inner, CUtensorMapInterleave interleave,
                             CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                             CUtensorMapFloatOOBfill oob)
{
    if (!map || (uintptr_t)map % 64 || !dims || !element_strides || (rank > 1 && !strides))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned bits = element_bits(type);
    if (!bits)
        return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned)interleave > CU_TENSOR_MAP_INTERLEAVE_32B ||
        (unsigned)swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
        (unsigned)l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
        (unsigned)oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
        return CUDA_ERROR_INVALID_VALUE;
    if (rank < min_rank || rank > MAX_RANK ||
        (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3))
        return CUDA_ERROR_INVALID_VALUE;

    /* 32-byte units where the layout is in 32-byte units, else 16 */
    uint64_t unit = interleave == CU_TENSOR_MAP_INTERLEAVE_32B || is_align16_packed(type) ? 32 : 16;
    if ((uintptr_t)address % unit)
        return CUDA_ERROR_INVALID_VALUE;
    for (cuuint32_t i = 0; i < rank; i++)
        if (dims[i] == 0 || dims[i] > ((uint64_t)1 << 32))
            return CUDA_ERROR_INVALID_VALUE;
    if ((is_align16_packed(type) && dims[0] % 128) ||
        (type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && dims[0] % 2))
        return CUDA_ERROR_INVALID_VALUE;
    for (cuuint32_t i = 0; i + 1 < rank; i++)
        if (strides[i] % unit || strides[i] >= ((uint64_t)1 << 40))
            return CUDA_ERROR_INVALID_VALUE;
    /* with no interleave dimension 0 has no stride: its element stride is ignored */
    for (cuuint32_t i = interleave == CU_TENSOR_MAP_INTERLEAVE_NONE; i < rank; i++)
        if (element_strides[i] == 0 || element_strides[i] > 8)
            return CUDA_ERROR_INVALID_VALUE;

    /* the modes that go together */
    if (interleave == CU_TENSOR_MAP_INTERLEAVE_32B && swizzle != CU_TENSOR_MAP_SWIZZLE_32B)
        return CUDA_ERROR_INVALID_VALUE;
    if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && swizzle != CU_TENSOR_MAP_SWIZZLE_NONE &&
        inner * bits > (uint64_t)swizzle_span(swizzle) * 8)
        return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B &&
        (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE ||
         !(swizzle == CU_TENSOR_MAP_SWIZZLE_NONE || swizzle == CU_TENSOR_MAP_SWIZZLE_128B ||
           swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B ||
           swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B)))
        return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B &&
        !(swizzle == CU_TENSOR_MAP_SWIZZLE_NONE || swizzle == CU_TENSOR_MAP_SWIZZLE_128B ||
          swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B))
        return CUDA_ERROR_INVALID_VALUE;
    if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float(type))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Writes the fields both kinds share into a zeroed descriptor (layout above). */
static void encode_tensor(uint8_t *b, int kind, CUtensorMapDataType type, cuuint32_t rank,
                          const void *address, const cuuint64_t *dims, const cuuint64_t *strides,
                          const cuuint32_t *element_strides, CUtensorMapInterleave interleave,
                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                          CUtensorMapFloatOOBfill oob)
{
    cr_le_put32(b, LAYOUT_MAGIC);
    b[4] = LAYOUT_VERSION;
    b[5] = (uint8_t)kind;
    b[6] = (uint8_t)type;
    b[7] = (uint8_t)rank;
    b[8] = (uint8_t)interleave;
    b[9] = (uint8_t)swizzle;
    b[10] = (uint8_t)l2;
    b[11] = (uint8_t)oob;
    cr_le_put64(b + 16, (uint64_t)(uintptr_t)address);
    for (cuuint32_t i = 0; i < rank; i++) {
        cr_le_put32(b + 24 + 4 * i, (uint32_t)(dims[i] - 1));
        b[102 + i] = (uint8_t)element_strides[i];
    }
    for (cuuint32_t i = 0; i + 1 < rank; i++)
        cr_le_put64(b + 48 + 8 * i, strides[i]);
}

CUresult cr_emu_cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                       cuuint32_t tensorRank, void *globalAddress,
                                       const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                       const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                                       CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                       CUtensorMapL2promotion l2Promotion,
                                       CUtensorMapFloatOOBfill oobFill)
{
    CR__ENTER();
    if (!boxDim || tensorRank == 0 || tensorRank > MAX_RANK)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_tensor(tensorMap, tensorDataType, tensorRank, 1, globalAddress, globalDim,
                              globalStrides, elementStrides, boxDim[0], interleave, swizzle,
                              l2Promotion, oobFill);
    if (r != CUDA_SUCCESS)
        return r;
    for (cuuint32_t i = 0; i < tensorRank; i++)
        if (boxDim[i] == 0 || boxDim[i] > 256)
            return CUDA_ERROR_INVALID_VALUE;
    /* a box row is whole 16-byte units, and the 16-byte packed types move 128 values */
    if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE &&
        (uint64_t)boxDim[0] * element_bits(tensorDataType) % 128)
        return CUDA_ERROR_INVALID_VALUE;
    if (is_align16_packed(tensorDataType) && boxDim[0] != 128)
        return CUDA_ERROR_INVALID_VALUE;

    uint8_t b[sizeof(CUtensorMap)] = {0};
    encode_tensor(b, KIND_TILED, tensorDataType, tensorRank, globalAddress, globalDim,
                  globalStrides, elementStrides, interleave, swizzle, l2Promotion, oobFill);
    for (cuuint32_t i = 0; i < tensorRank; i++)
        cr_le_put16(b + 80 + 2 * i, (uint16_t)boxDim[i]);
    memcpy(tensorMap, b, sizeof b);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuTensorMapEncodeIm2col(
    CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
    const int *pixelBoxLowerCorner, const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
    cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
    CR__ENTER();
    if (!pixelBoxLowerCorner || !pixelBoxUpperCorner)
        return CUDA_ERROR_INVALID_VALUE;
    /* channels: dimension 0, batch: the last one; 1 to 3 spatial ones between */
    CUresult r = check_tensor(tensorMap, tensorDataType, tensorRank, 3, globalAddress, globalDim,
                              globalStrides, elementStrides, channelsPerPixel, interleave, swizzle,
                              l2Promotion, oobFill);
    if (r != CUDA_SUCCESS)
        return r;
    /* the corner offsets get fewer bits the more spatial dimensions share them */
    int limit = tensorRank == 3 ? 32768 : tensorRank == 4 ? 128 : 16;
    for (cuuint32_t i = 0; i + 2 < tensorRank; i++) {
        int lo = pixelBoxLowerCorner[i], hi = pixelBoxUpperCorner[i];
        if (lo < -limit || lo >= limit || hi < -limit || hi >= limit)
            return CUDA_ERROR_INVALID_VALUE;
        /* the box's start positions run from lo to dim + hi (exclusive): none is no area */
        if ((int64_t)globalDim[i + 1] + hi - lo <= 0)
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (channelsPerPixel == 0 || channelsPerPixel > 256 ||
        (is_align16_packed(tensorDataType) && channelsPerPixel != 128) || pixelsPerColumn == 0 ||
        pixelsPerColumn > 1024)
        return CUDA_ERROR_INVALID_VALUE;

    uint8_t b[sizeof(CUtensorMap)] = {0};
    encode_tensor(b, KIND_IM2COL, tensorDataType, tensorRank, globalAddress, globalDim,
                  globalStrides, elementStrides, interleave, swizzle, l2Promotion, oobFill);
    cr_le_put16(b + 12, (uint16_t)channelsPerPixel);
    cr_le_put16(b + 14, (uint16_t)pixelsPerColumn);
    for (cuuint32_t i = 0; i + 2 < tensorRank; i++) {
        cr_le_put16(b + 90 + 2 * i, (uint16_t)(int16_t)pixelBoxLowerCorner[i]);
        cr_le_put16(b + 96 + 2 * i, (uint16_t)(int16_t)pixelBoxUpperCorner[i]);
    }
    memcpy(tensorMap, b, sizeof b);
    return CUDA_SUCCESS;
}
