/* Device queries, answered from what the server described at connect.
 *
 * Threads: any; nothing here waits. */
#include <stdio.h>
#include <string.h>

#include "client.h"

static CUresult device(CUdevice dev, cr_device_t **out)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= cl->device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *out = &cl->devices[dev];
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuDeviceGetCount(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = cl->device_count;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    cr_device_t *d;
    CUresult r = device(ordinal, &d);
    if (r == CUDA_SUCCESS)
        *dev = ordinal;
    return r;
}

CUresult cr_hand_cuDeviceGetName(char *name, int len, CUdevice dev)
{
    cr_device_t *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", d->name);
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    cr_device_t *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = d->total_mem;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuDeviceGetAttribute(int *value, CUdevice_attribute attr, CUdevice dev)
{
    cr_device_t *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value || (int)attr <= 0 || attr >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *value = d->attrs[attr];
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    cr_device_t *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    *uuid = d->uuid;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return cr_hand_cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cr_hand_cuDeviceGetLuid(char *luid, unsigned int *mask, CUdevice dev)
{
    cr_device_t *d;
    CUresult r = device(dev, &d);
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_NOT_SUPPORTED; /* LUIDs exist on Windows only */
}

CUresult cr_hand_cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    cr_device_t *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    *major = d->attrs[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR];
    *minor = d->attrs[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuDeviceGetProperties(CUdevprop *prop, CUdevice dev)
{
    cr_device_t *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    const int *a = d->attrs;
    *prop = (CUdevprop){
        .maxThreadsPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK],
        .maxThreadsDim = {a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X],
                          a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y],
                          a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z]},
        .maxGridSize = {a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X],
                        a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y],
                        a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z]},
        .sharedMemPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK],
        .totalConstantMemory = a[CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY],
        .SIMDWidth = a[CU_DEVICE_ATTRIBUTE_WARP_SIZE],
        .memPitch = a[CU_DEVICE_ATTRIBUTE_MAX_PITCH],
        .regsPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK],
        .clockRate = a[CU_DEVICE_ATTRIBUTE_CLOCK_RATE],
        .textureAlign = a[CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT],
    };
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuDeviceGetPCIBusId(char *bus_id, int len, CUdevice dev)
{
    cr_device_t *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!bus_id || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(bus_id, (size_t)len, "%08x:%02x:%02x.0", d->attrs[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID],
             d->attrs[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID], d->attrs[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID]);
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuDeviceGetByPCIBusId(CUdevice *dev, const char *bus_id)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!dev || !bus_id)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned domain = 0, bus, slot;
    if (sscanf(bus_id, "%x:%x:%x", &domain, &bus, &slot) != 3) {
        domain = 0;
        if (sscanf(bus_id, "%x:%x", &bus, &slot) != 2)
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (int i = 0; i < cl->device_count; i++) {
        const int *a = cl->devices[i].attrs;
        if ((unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] == domain &&
            (unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] == bus &&
            (unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID] == slot) {
            *dev = i;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

CUresult cr_hand_cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer)
{
    cr_device_t *d;
    CUresult r = device(dev, &d);
    if (r == CUDA_SUCCESS)
        r = device(peer, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!can)
        return CUDA_ERROR_INVALID_VALUE;
    *can = 0; /* each server is one GPU: no peer access between them */
    return CUDA_SUCCESS;
}
