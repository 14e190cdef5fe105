/* Memsets: asynchronous (nothing to wait for), but like the driver they reject a range
 * outside every device allocation at once, from the client's map of device ranges.
 *
 * Threads: any application thread; nothing here waits. */
#include "client.h"
#include "memory.h"

/* The bytes [p, p + (height - 1) * pitch + width * elem) must lie in one allocation. */
static CUresult check_range(CUdeviceptr p, size_t pitch, size_t width, size_t height, size_t elem)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (width == 0 || height == 0)
        return CUDA_SUCCESS;
    if (width > SIZE_MAX / elem || (height > 1 && pitch < width * elem) ||
        (height - 1) > (SIZE_MAX - width * elem) / (pitch ? pitch : 1))
        return CUDA_ERROR_INVALID_VALUE;
    size_t extent = (height - 1) * pitch + width * elem;
    return cr_devmap_contains(p, extent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#define MEMSET_1D(name, type, elem)                                                                \
    CUresult cr_hand_##name(CUdeviceptr p, type value, size_t n)                                   \
    {                                                                                              \
        CUresult r = check_range(p, 0, n, 1, elem);                                                \
        return r != CUDA_SUCCESS ? r : cr_remote_##name(p, value, n);                              \
    }
#define MEMSET_1D_ASYNC(name, type, elem)                                                          \
    CUresult cr_hand_##name(CUdeviceptr p, type value, size_t n, CUstream s)                       \
    {                                                                                              \
        CUresult r = check_range(p, 0, n, 1, elem);                                                \
        return r != CUDA_SUCCESS ? r : cr_remote_##name(p, value, n, s);                           \
    }
#define MEMSET_2D(name, type, elem)                                                                \
    CUresult cr_hand_##name(CUdeviceptr p, size_t pitch, type value, size_t w, size_t h)           \
    {                                                                                              \
        CUresult r = check_range(p, pitch, w, h, elem);                                            \
        return r != CUDA_SUCCESS ? r : cr_remote_##name(p, pitch, value, w, h);                    \
    }
#define MEMSET_2D_ASYNC(name, type, elem)                                                          \
    CUresult cr_hand_##name(CUdeviceptr p, size_t pitch, type value, size_t w, size_t h,           \
                            CUstream s)                                                            \
    {                                                                                              \
        CUresult r = check_range(p, pitch, w, h, elem);                                            \
        return r != CUDA_SUCCESS ? r : cr_remote_##name(p, pitch, value, w, h, s);                 \
    }

MEMSET_1D(cuMemsetD8_v2, unsigned char, 1)
MEMSET_1D(cuMemsetD16_v2, unsigned short, 2)
MEMSET_1D(cuMemsetD32_v2, unsigned int, 4)
MEMSET_1D_ASYNC(cuMemsetD8Async, unsigned char, 1)
MEMSET_1D_ASYNC(cuMemsetD16Async, unsigned short, 2)
MEMSET_1D_ASYNC(cuMemsetD32Async, unsigned int, 4)
MEMSET_2D(cuMemsetD2D8_v2, unsigned char, 1)
MEMSET_2D(cuMemsetD2D16_v2, unsigned short, 2)
MEMSET_2D(cuMemsetD2D32_v2, unsigned int, 4)
MEMSET_2D_ASYNC(cuMemsetD2D8Async, unsigned char, 1)
MEMSET_2D_ASYNC(cuMemsetD2D16Async, unsigned short, 2)
MEMSET_2D_ASYNC(cuMemsetD2D32Async, unsigned int, 4)
