/* NVML's lifecycle, the view it answers from, its error strings, and the answer for what
 * is not supported (nvml_lib.h).
 *
 * nvmlInit connects through the stub (cuInit's connection: one per process) and reads the
 * device's identity; every later nvmlInit only counts, as NVML does, and nvmlShutdown
 * undoes one. The connection stays with the process: a later nvmlInit reuses it. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "log.h"
#include "nvml_lib.h"

/* Lets cuda-remoted refuse to load this library as NVIDIA's NVML. */
CR_NVML_API const char cr_remote_nvml_version[] = "cuda-remote";

const int cr_nvml_device_tag = 0x4e564d4c;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned inits;         /* nvmlInit calls not yet shut down */
static cr_nvml_view_t view;    /* under lock */
static struct timespec sensed; /* when the sensors were read */
static int sensors_read;       /* once they were */

static nvmlReturn_t from_cuda(int r)
{
    switch (r) {
    case CUDA_SUCCESS:
        return NVML_SUCCESS;
    case CUDA_ERROR_NO_DEVICE: /* no server, or it refused us: said on stderr by the stub */
    case CUDA_ERROR_NOT_INITIALIZED:
        return NVML_ERROR_DRIVER_NOT_LOADED;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return NVML_ERROR_MEMORY;
    case CUDA_ERROR_INVALID_VALUE:
        return NVML_ERROR_INVALID_ARGUMENT;
    default: /* the connection broke, or the server's context is gone */
        return NVML_ERROR_GPU_IS_LOST;
    }
}

static nvmlReturn_t init(void)
{
    pthread_mutex_lock(&lock);
    nvmlReturn_t r = NVML_SUCCESS;
    if (inits == 0) {
        cr_log_init("cuda-remote", CR_LOG_WARN, 0);
        r = from_cuda(cr_remote_nvml_view(CR_NVML_IDENTITY, &view, sizeof view));
    }
    if (r == NVML_SUCCESS)
        inits++;
    pthread_mutex_unlock(&lock);
    return r;
}

CR_NVML_API nvmlReturn_t nvmlInit_v2(void)
{
    return init();
}

CR_NVML_API nvmlReturn_t nvmlInit(void)
{
    return init();
}

CR_NVML_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags; /* NO_GPUS and NO_ATTACH change nothing: the device is the server's */
    return init();
}

CR_NVML_API nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&lock);
    nvmlReturn_t r = inits ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (inits)
        inits--;
    pthread_mutex_unlock(&lock);
    return r;
}

static int initialized(void)
{
    pthread_mutex_lock(&lock);
    int yes = inits > 0;
    pthread_mutex_unlock(&lock);
    return yes;
}

nvmlReturn_t cr_nvml_check(nvmlDevice_t device)
{
    if (!initialized())
        return NVML_ERROR_UNINITIALIZED;
    return device == CR_NVML_DEVICE ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

/* Asks the server for parts into the view (under lock). */
static nvmlReturn_t refresh(unsigned parts)
{
    if (!inits)
        return NVML_ERROR_UNINITIALIZED;
    return parts ? from_cuda(cr_remote_nvml_view(parts, &view, sizeof view)) : NVML_SUCCESS;
}

nvmlReturn_t cr_nvml_identity(cr_nvml_identity_t *out)
{
    pthread_mutex_lock(&lock);
    nvmlReturn_t r = refresh(0);
    if (r == NVML_SUCCESS)
        *out = view.id;
    pthread_mutex_unlock(&lock);
    return r;
}

nvmlReturn_t cr_nvml_usage(cr_nvml_usage_t *out)
{
    pthread_mutex_lock(&lock);
    nvmlReturn_t r = refresh(CR_NVML_USAGE);
    if (r == NVML_SUCCESS)
        *out = view.usage;
    pthread_mutex_unlock(&lock);
    return r;
}

nvmlReturn_t cr_nvml_text(char *dst, unsigned length, const char *text)
{
    if (!dst)
        return NVML_ERROR_INVALID_ARGUMENT;
    size_t n = strlen(text);
    if (n + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, text, n + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t cr_nvml_sensor(nvmlDevice_t device, cr_nvml_sensor_t s, long long *value)
{
    nvmlReturn_t r = cr_nvml_check(device);
    if (r != NVML_SUCCESS)
        return r;
    if (!value)
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&lock);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t age_ns =
        (int64_t)(now.tv_sec - sensed.tv_sec) * 1000000000 + (now.tv_nsec - sensed.tv_nsec);
    int stale = !sensors_read || age_ns >= 1000000000;
    r = refresh(stale ? CR_NVML_SENSORS : 0);
    if (r == NVML_SUCCESS && stale) {
        sensed = now;
        sensors_read = 1;
    }
    if (r == NVML_SUCCESS && !(view.sensors.read & (1u << s)))
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS)
        *value = view.sensors.value[s];
    pthread_mutex_unlock(&lock);
    return r;
}

int cr_nvml_unsupported(const char *name, int *said)
{
    if (!__atomic_exchange_n(said, 1, __ATOMIC_RELAXED))
        CR_INFO("%s is not supported through cuda-remote: NVML_ERROR_NOT_SUPPORTED", name);
    return NVML_ERROR_NOT_SUPPORTED;
}

CR_NVML_API const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
        return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
        return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded (cuda-remoted cannot be reached or refused the connection)";
    case NVML_ERROR_TIMEOUT:
        return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
        return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
        return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost (the connection to cuda-remoted broke)";
    case NVML_ERROR_RESET_REQUIRED:
        return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM:
        return "The operating system has blocked the request";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_IN_USE:
        return "In use by another client";
    case NVML_ERROR_MEMORY:
        return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
        return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
        return "ECC is not supported on vGPU";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
        return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return "Argument version mismatch";
    default:
        return "Unknown Error";
    }
}
