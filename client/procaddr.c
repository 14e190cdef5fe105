/* cuGetProcAddress: resolves (name, version, flags) exactly as the driver does, from the
 * generated table. cudart asks for ~440 symbols at start-up, each at the ABI version it was
 * built against; several names have different signatures at different versions.
 *
 * Threads: any; nothing here waits. */
#include <string.h>

#include "cr_client_hand.h"
#include "procaddr.h"

/* Index of the first entry named `name`, or cr_proc_table_size. */
static unsigned first_named(const char *name)
{
    unsigned lo = 0, hi = cr_proc_table_size;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (strcmp(cr_proc_table[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < cr_proc_table_size && strcmp(cr_proc_table[lo].name, name) == 0
               ? lo
               : cr_proc_table_size;
}

/* The newest entry of a variant whose version is <= the requested one. */
static const cr_proc_entry_t *pick(unsigned first, const char *name, int version, int ptds,
                                   int *too_old)
{
    const cr_proc_entry_t *best = NULL;
    for (unsigned i = first; i < cr_proc_table_size && !strcmp(cr_proc_table[i].name, name); i++) {
        const cr_proc_entry_t *e = &cr_proc_table[i];
        if ((e->variant != CR_PROC_PLAIN) != ptds)
            continue;
        if (e->version > version) {
            *too_old = 1;
            continue;
        }
        if (!best || e->version > best->version)
            best = e;
    }
    return best;
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!symbol || !pfn) {
        if (status)
            *status = st;
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
        *pfn = NULL;
        if (status)
            *status = st;
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pfn = NULL;
    unsigned first = first_named(symbol);
    if (first < cr_proc_table_size) {
        int too_old = 0;
        const cr_proc_entry_t *e = NULL;
        if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
            e = pick(first, symbol, version, 1, &too_old);
        if (!e) /* no per-thread variant: the plain function serves both */
            e = pick(first, symbol, version, 0, &too_old);
        if (e) {
            *pfn = e->fn;
            st = CU_GET_PROC_ADDRESS_SUCCESS;
        } else if (too_old) {
            st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        }
    }
    if (status)
        *status = st;
    return st == CU_GET_PROC_ADDRESS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cr_hand_cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *status)
{
    return lookup(symbol, pfn, version, flags, status);
}

CUresult cr_hand_cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return lookup(symbol, pfn, version, flags, NULL);
}
