// vmm: the virtual-memory API as PyTorch's expandable segments use it, through the driver
// entry points cudart hands out: reserve 1 GiB of addresses, map 2 MiB pieces of physical
// memory as the segment grows (device memory in use rising by exactly each piece), a kernel
// and copies across the pieces, the same memory mapped twice (one write seen at both
// addresses), access flags and properties read back, the handle behind a mapped address
// retained and released, the refusals a GPU gives (a map outside
// any reservation, half a mapping unmapped, an unknown handle), then everything unmapped and
// released with the memory in use back where it was. The pieces are exportable as file
// descriptors, as PyTorch asks for every piece; exporting one is refused (not remoted).
//
//   vmm               the checks above (exit 0 when all hold)
//   vmm QUOTA_BYTES   then, for a tenant with that quota: pieces created until the quota is
//                     reached exactly, the next one refused with CUDA_ERROR_OUT_OF_MEMORY
#include <cuda.h>
#include <cudaTypedefs.h>

#include <vector>

#include "cr_test.h"

// The driver's functions as cudart hands them out (as PyTorch gets them).
static struct {
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemAddressFree_v10020 address_free;
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemSetAccess_v10020 set_access;
    PFN_cuMemGetAccess_v10020 get_access;
    PFN_cuMemGetAllocationPropertiesFromHandle_v10020 properties;
    PFN_cuMemRetainAllocationHandle_v11000 retain;
    PFN_cuMemExportToShareableHandle_v10020 export_handle;
} drv;

static void *entry(const char *name)
{
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    CHECK_CUDA(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found));
    CHECK(found == cudaDriverEntryPointSuccess && fn, "no driver entry point %s", name);
    return fn;
}

static size_t used_now()
{
    size_t free_bytes, total;
    CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
    return total - free_bytes;
}

__global__ void fill(unsigned *p, size_t n, unsigned salt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned)i * 2654435761u + salt;
}

static CUmemAllocationProp device_prop()
{
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; // as PyTorch asks
    return prop;
}

static void set_rw(CUdeviceptr p, size_t size)
{
    CUmemAccessDesc access = {};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK_CU(drv.set_access(p, size, &access, 1));
}

static void check_quota(size_t quota, size_t piece)
{
    CUmemAllocationProp prop = device_prop();
    std::vector<CUmemGenericAllocationHandle> held;
    size_t used = used_now();
    CHECK(used <= quota, "in use %zu before the test, over the quota %zu", used, quota);
    size_t fits = (quota - used) / piece;
    for (size_t i = 0; i < fits; i++) {
        CUmemGenericAllocationHandle h;
        CHECK_CU(drv.create(&h, piece, &prop, 0));
        held.push_back(h);
        CHECK(used_now() == used + (i + 1) * piece, "in use %zu after %zu pieces", used_now(),
              i + 1);
    }
    CUmemGenericAllocationHandle h;
    EXPECT_CU(drv.create(&h, piece, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(used_now() == used + fits * piece, "in use %zu after the refusal", used_now());
    for (CUmemGenericAllocationHandle x : held)
        CHECK_CU(drv.release(x));
    CHECK(used_now() == used, "in use %zu after releasing, was %zu", used_now(), used);
    printf("quota of %zu bytes: %zu pieces of %zu created, the next refused\n", quota, fits,
           piece);
}

int main(int argc, char **argv)
{
    CHECK_CUDA(cudaFree(0));
    drv.granularity = (PFN_cuMemGetAllocationGranularity_v10020)entry(
        "cuMemGetAllocationGranularity");
    drv.reserve = (PFN_cuMemAddressReserve_v10020)entry("cuMemAddressReserve");
    drv.address_free = (PFN_cuMemAddressFree_v10020)entry("cuMemAddressFree");
    drv.create = (PFN_cuMemCreate_v10020)entry("cuMemCreate");
    drv.release = (PFN_cuMemRelease_v10020)entry("cuMemRelease");
    drv.map = (PFN_cuMemMap_v10020)entry("cuMemMap");
    drv.unmap = (PFN_cuMemUnmap_v10020)entry("cuMemUnmap");
    drv.set_access = (PFN_cuMemSetAccess_v10020)entry("cuMemSetAccess");
    drv.get_access = (PFN_cuMemGetAccess_v10020)entry("cuMemGetAccess");
    drv.properties = (PFN_cuMemGetAllocationPropertiesFromHandle_v10020)entry(
        "cuMemGetAllocationPropertiesFromHandle");
    drv.retain = (PFN_cuMemRetainAllocationHandle_v11000)entry("cuMemRetainAllocationHandle");
    drv.export_handle =
        (PFN_cuMemExportToShareableHandle_v10020)entry("cuMemExportToShareableHandle");

    CUmemAllocationProp prop = device_prop();
    size_t piece = 0;
    CHECK_CU(drv.granularity(&piece, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    CHECK(piece && (piece & (piece - 1)) == 0, "granularity %zu", piece);

    size_t used0 = used_now();
    const size_t reserved = 1ull << 30;
    CUdeviceptr base = 0;
    CHECK_CU(drv.reserve(&base, reserved, 0, 0, 0));
    CHECK(base % piece == 0, "reservation at %#llx", (unsigned long long)base);
    CHECK(used_now() == used0, "a reservation took memory: %zu -> %zu", used0, used_now());

    // the segment grows a piece at a time; memory in use rises by exactly each piece
    const int pieces = 6;
    std::vector<CUmemGenericAllocationHandle> handles(pieces);
    for (int i = 0; i < pieces; i++) {
        CHECK_CU(drv.create(&handles[i], piece, &prop, 0));
        CHECK_CU(drv.map(base + i * piece, piece, 0, handles[i], 0));
        set_rw(base + i * piece, piece);
        CHECK(used_now() == used0 + (i + 1) * piece, "in use %zu after %d pieces, expected %zu",
              used_now(), i + 1, used0 + (i + 1) * piece);
    }
    size_t bytes = pieces * piece, n = bytes / sizeof(unsigned);

    // a kernel over the whole mapped range, read back in one copy across every piece
    unsigned *dev = (unsigned *)base;
    fill<<<64, 256>>>(dev, n, 7);
    CHECK_CUDA(cudaGetLastError());
    std::vector<unsigned> host(n);
    CHECK_CUDA(cudaMemcpy(host.data(), dev, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        CHECK(host[i] == (unsigned)i * 2654435761u + 7, "word %zu is %u", i, host[i]);

    // a copy and a memset that straddle the boundary between two pieces
    unsigned char pattern[300], back[300];
    for (int i = 0; i < 300; i++)
        pattern[i] = (unsigned char)(i * 7 + 1);
    char *edge = (char *)base + piece - 150;
    CHECK_CUDA(cudaMemcpy(edge, pattern, sizeof pattern, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(back, edge, sizeof back, cudaMemcpyDeviceToHost));
    CHECK(memcmp(back, pattern, sizeof back) == 0, "copy across pieces differs");
    CHECK_CUDA(cudaMemset(edge + 10, 0xab, 280));
    CHECK_CUDA(cudaMemcpy(back, edge, sizeof back, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 300; i++)
        CHECK(back[i] == (i >= 10 && i < 290 ? 0xab : pattern[i]), "byte %d is %#x", i, back[i]);
    // cudaMemcpyDefault must see mapped memory as device memory
    CHECK_CUDA(cudaMemcpy(back, edge, sizeof back, cudaMemcpyDefault));
    CHECK(back[100] == 0xab, "cudaMemcpyDefault read %#x", back[100]);

    // the same physical memory at a second address: one write, seen at both
    CUdeviceptr alias = 0;
    CHECK_CU(drv.reserve(&alias, piece, 0, 0, 0));
    CHECK_CU(drv.map(alias, piece, 0, handles[1], 0));
    set_rw(alias, piece);
    unsigned word = 0xfeedf00d, seen = 0;
    CHECK_CUDA(cudaMemcpy((void *)(alias + 64), &word, 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(&seen, (void *)(base + piece + 64), 4, cudaMemcpyDeviceToHost));
    CHECK(seen == word, "a write through the alias reads back %#x at the first mapping", seen);
    CHECK(used_now() == used0 + bytes, "a second mapping took memory: %zu", used_now());

    // what the driver says of it
    unsigned long long flags = 0;
    CUmemLocation where = {};
    where.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CHECK_CU(drv.get_access(&flags, &where, base + 3 * piece + 5));
    CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "access flags %llu", flags);
    CUmemAllocationProp got = {};
    CHECK_CU(drv.properties(&got, handles[2]));
    CHECK(got.type == CU_MEM_ALLOCATION_TYPE_PINNED &&
              got.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
              got.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
          "properties: type %d, location type %d, handle types %d", (int)got.type,
          (int)got.location.type, (int)got.requestedHandleTypes);
    int fd = -1; // a handle would leave the session: not remoted
    EXPECT_CU(drv.export_handle(&fd, handles[2], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              CUDA_ERROR_NOT_SUPPORTED);
    CUmemAllocationProp fabric = device_prop();
    fabric.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
    CUmemGenericAllocationHandle refused;
    EXPECT_CU(drv.create(&refused, piece, &fabric, 0), CUDA_ERROR_NOT_SUPPORTED);
    // the handle behind an address inside a mapping, as PyTorch's allocator looks it up; one
    // more release lets it go, the memory charged once
    CUmemGenericAllocationHandle again = 0;
    CHECK_CU(drv.retain(&again, (void *)(base + 2 * piece + 100)));
    CHECK(again == handles[2], "retained handle %#llx, expected %#llx",
          (unsigned long long)again, (unsigned long long)handles[2]);
    size_t used_retained = used_now();
    CHECK_CU(drv.release(again));
    CHECK(used_now() == used_retained, "a retain's release changed the memory in use");
    EXPECT_CU(drv.retain(&again, (void *)(base + 400 * piece)), CUDA_ERROR_INVALID_VALUE);

    // refusals
    CUdeviceptr plain;
    CHECK_CUDA(cudaMalloc((void **)&plain, piece));
    EXPECT_CU(drv.map(plain, piece, 0, handles[0], 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_CU(drv.unmap(base, piece / 2), CUDA_ERROR_INVALID_VALUE);
    EXPECT_CU(drv.release((CUmemGenericAllocationHandle)0x1234), CUDA_ERROR_INVALID_VALUE);
    CHECK_CUDA(cudaFree((void *)plain));

    // shrink: unmap (the alias, then the segment), release, give the addresses back
    CHECK_CU(drv.unmap(alias, piece));
    CHECK_CU(drv.address_free(alias, piece));
    CHECK_CU(drv.unmap(base + (pieces - 2) * piece, 2 * piece)); // two mappings at once
    for (int i = 0; i < pieces; i++)
        CHECK_CU(drv.release(handles[i]));
    // a piece still mapped keeps its memory until it is unmapped
    CHECK(used_now() == used0 + (pieces - 2) * piece,
          "released but mapped pieces: in use %zu, expected %zu", used_now(),
          used0 + (pieces - 2) * piece);
    CHECK_CU(drv.unmap(base, (pieces - 2) * piece));
    CHECK(used_now() == used0, "in use %zu after unmapping everything, was %zu", used_now(), used0);
    CHECK_CU(drv.address_free(base, reserved));
    printf("vmm: %d pieces of %zu bytes mapped in a 1 GiB reservation, checked\n", pieces, piece);

    if (argc > 1)
        check_quota(strtoull(argv[1], nullptr, 0), piece);
    return 0;
}
