/* What the stub answers about itself as a driver, without the server: its version, error
 * names and strings, the profiler switches (no-ops), the module loading mode, and the one
 * message for each function cuda-remote does not support.
 *
 * Threads: any. Nothing here waits but for the short lock of the reported names. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "error.h"
#include "log.h"

CUresult cr_unsupported(const char *name)
{
    /* one message per function: a small fixed table of names already reported */
    static const char *reported[256];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    int seen = 0, i = 0;
    for (; i < 256 && reported[i]; i++)
        if (reported[i] == name) {
            seen = 1;
            break;
        }
    if (!seen && i < 256)
        reported[i] = name;
    pthread_mutex_unlock(&lock);
    if (!seen)
        CR_WARN("%s is not supported by cuda-remote yet; returning CUDA_ERROR_NOT_SUPPORTED", name);
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cr_hand_cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = CR_CUDA_VERSION;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuGetErrorName(CUresult error, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    *str = cr_cuda_error_name(error);
    return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuGetErrorString(CUresult error, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    *str = cr_cuda_error_string(error);
    return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cr_hand_cuProfilerInitialize(const char *config, const char *out, CUoutput_mode mode)
{
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuProfilerStart(void)
{
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuProfilerStop(void)
{
    return CUDA_SUCCESS;
}

/* Lazy, as NVIDIA's driver is by default (CUDA_MODULE_LOADING=EAGER asks for eager): cudart
 * then loads a fatbin when its first kernel is used, not every fatbin of every library at
 * the first context use, which would ship every image of cuBLAS across the network and
 * fail on one the device cannot load but the program never uses. */
CUresult cr_hand_cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    const char *asked = getenv("CUDA_MODULE_LOADING");
    *mode = asked && strcmp(asked, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}
