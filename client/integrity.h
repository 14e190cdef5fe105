/* Answer to the CUDA runtime's "integrity check" (export table d4082055-bde6-704b-8d34-
 * ba123c66e1f2, slot 1). See integrity.c for the algorithm and where it is described. */
#ifndef CR_CLIENT_INTEGRITY_H
#define CR_CLIENT_INTEGRITY_H

#include <stddef.h>
#include <stdint.h>

/* Layout of the integrity export table the stub hands out (pointer-sized slots):
 *   [0] = table size in bytes, 3 * sizeof(void *) = 24
 *   [1] = CUresult check(uint32_t version, uint64_t unix_seconds, uint64_t out[2])
 *   [2] = NULL */
#define CR_INTEGRITY_TABLE_SLOTS 3

/* One device as the stub reports it to cudart: cuDeviceGetUuid(_v2) bytes and the
 * CU_DEVICE_ATTRIBUTE_PCI_{DOMAIN,BUS,DEVICE}_ID values (ints, hashed as 4 bytes each). */
typedef struct {
    uint8_t uuid[16];
    int32_t pci_domain;
    int32_t pci_bus;
    int32_t pci_device;
} cr_integrity_device_t;

/* Everything the answer depends on. The three addresses must be the exact values cudart
 * sees: the pointers cuGetExportTable returned for the runtime-interface table (6bd5fb6c-
 * 5bf4-e74a-8987-d93912fd9df9) and for the integrity table, and the value of the
 * integrity table's slot 1. */
typedef struct {
    uint32_t driver_version;              /* what cuDriverGetVersion reports, e.g. 13000 */
    uint32_t pid;                         /* getpid() */
    uint32_t thread_id;                   /* (uint32_t)pthread_self() of the calling thread */
    const void *runtime_table;            /* runtime-interface export table pointer */
    const void *integrity_table;          /* integrity export table pointer */
    const void *check_function;           /* integrity table slot 1 */
    uint64_t unix_seconds;                /* second argument of the check call */
    const cr_integrity_device_t *devices; /* device 0 .. device_count-1 */
    uint32_t device_count;                /* what cuDeviceGetCount reports */
} cr_integrity_input_t;

/* Fixed answers for version % 10 == 0 and == 1; every other version is hashed. */
#define CR_INTEGRITY_FIXED0_LO UINT64_C(0x3341181C03CB675C)
#define CR_INTEGRITY_FIXED0_HI UINT64_C(0x8ED383AA1F4CD1E8)
#define CR_INTEGRITY_FIXED1_LO UINT64_C(0x1841181C03CB675C)
#define CR_INTEGRITY_FIXED1_HI UINT64_C(0x8ED383AA1F4CD1E8)

/* Computes the answer for the check call with `version_arg` (cudart passes 13000, 13001,
 * 13002). Returns 0, or -1 when in/out is NULL or devices is NULL with device_count > 0.
 * Pure: reads only its arguments. */
int cr_integrity_compute(const cr_integrity_input_t *in, uint32_t version_arg, uint64_t out[2]);

/* The message that is authenticated: 48 header bytes then 28 bytes per device, all
 * little-endian. Writes it to buf when cap is large enough; returns the full size. */
#define CR_INTEGRITY_HEADER_SIZE 48
#define CR_INTEGRITY_DEVICE_SIZE 28
size_t cr_integrity_message(const cr_integrity_input_t *in, uint32_t version_arg, uint8_t *buf,
                            size_t cap);

/* MD2 (RFC 1319), the hash under the HMAC; exposed for the known-answer tests. The 66-byte
 * state is laid out as ZLUDA's description has it: x[0..16) is the chaining state,
 * x[16..32) the input block, x[32..48) their XOR, then the running checksum, the number
 * of bytes in the current block and the last checksum byte. */
typedef struct {
    uint8_t x[48];
    uint8_t checksum[16];
    uint8_t count;
    uint8_t last;
} cr_md2_t;

void cr_md2_init(cr_md2_t *md);
void cr_md2_update(cr_md2_t *md, const void *data, size_t len);
void cr_md2_final(cr_md2_t *md, uint8_t digest[16]);

#endif
