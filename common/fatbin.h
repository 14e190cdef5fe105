/* CUDA code images: fatbin containers, cubin ELF files and PTX text.
 *
 * Both sides use this module. The client measures an image that cudart hands to
 * cuLibraryLoadData (it has no size) and reads each kernel's parameter layout from it; the
 * emulated device reads the kernels and the global variables it must create. Every offset
 * and length inside an image is checked against the image's size: images reach the server
 * from the network and must never make it read out of bounds. */
#ifndef CR_FATBIN_H
#define CR_FATBIN_H

#include <stddef.h>
#include <stdint.h>

#define CR_FATBIN_WRAPPER_MAGIC 0x466243B1u /* __fatBinC_Wrapper_t from nvcc's host stub */
#define CR_FATBIN_MAGIC 0xBA55ED50u         /* fatbin container */
#define CR_ELF_MAGIC 0x464C457Fu            /* "\x7fELF" read as little-endian u32 */

/* Upper bound on any image we accept (also after decompression of one entry). */
#define CR_IMAGE_MAX_SIZE ((size_t)1 << 31)

typedef enum {
    CR_IMAGE_FATBIN = 1, /* fatbin container (magic 0xBA55ED50) */
    CR_IMAGE_ELF = 2,    /* one cubin */
    CR_IMAGE_PTX = 3,    /* PTX text, NUL-terminated */
} cr_image_kind_t;

/* Measures the image that `code` points at, as cuLibraryLoadData/cuModuleLoadData receive
 * it: a fatbin wrapper (follows its data pointer), a fatbin container, a cubin ELF (size from
 * its section and program headers) or PTX text (up to and including the NUL).
 * On success sets *start to the first byte to ship, *size to the number of bytes and *kind.
 * `code` is trusted local memory here (the client's own process), but a wrapper whose data
 * pointer is NULL or a header with an absurd size is rejected with CR_ECORRUPT. */
int cr_image_measure(const void *code, const void **start, size_t *size, cr_image_kind_t *kind);

/* The same measurement for untrusted bytes (a server receiving an image): every header
 * read stays within `avail` bytes. Returns 0 with the image's size (which may exceed avail:
 * the caller compares), or CR_ECORRUPT. */
int cr_image_measure_bounded(const void *data, size_t avail, size_t *size);

/* One entry of a fatbin: a cubin for one SM architecture or PTX for one virtual one. */
typedef struct {
    cr_image_kind_t kind; /* CR_IMAGE_ELF or CR_IMAGE_PTX */
    unsigned arch;        /* SM version, e.g. 75 for sm_75 / compute_75 */
    const uint8_t *data;  /* decompressed payload, owned by the cr_image_t; a NUL byte
                              follows it (data[size] == 0), so PTX can go to the JIT as is */
    size_t size;          /* payload bytes (PTX: the text, without a trailing NUL; ELF: the
                              size from its headers, without the container's padding) */
    /* Added: 'a' for an arch-specific target (sm_90a, compute_100a: loads only on exactly
     * `arch`), 'f' for a family-specific one (sm_100f: only on the same major version),
     * 0 otherwise or unknown (a bare cubin does not say). From the fatbin entry flags
     * (0x100000 'a', 0x200000 'f') or the PTX .target. cr_image_select honours it. */
    char arch_suffix;
} cr_image_entry_t;

/* A kernel parameter: its byte offset and size in the parameter buffer. */
typedef struct {
    uint32_t offset;
    uint32_t size;
} cr_param_t;

typedef struct {
    char *name; /* mangled entry name */
    uint32_t param_count;
    cr_param_t *params;  /* in declaration order */
    uint32_t param_size; /* total size of the parameter buffer */
    /* Attributes for cuFuncGetAttribute where the image says them (0 if unknown). They
     * come from the first entry that defines the kernel; they can differ between SM
     * versions, so for those of one entry parse that entry's data on its own. PTX gives
     * only static_shared_bytes and max_threads_per_block. */
    uint32_t num_regs;              /* EIATTR_REGCOUNT */
    uint32_t static_shared_bytes;   /* .nv.shared.<kernel> without the 1 KiB that sm_90+
                                      cubins reserve in it; PTX: its .shared variables */
    uint32_t local_bytes;           /* EIATTR_FRAME_SIZE (stack frame) */
    uint32_t const_bytes;           /* size of the module's __constant__ bank (.nv.constant3) */
    uint32_t max_threads_per_block; /* from .maxntid / EIATTR_MAX_THREADS, 0 if none */
} cr_kernel_info_t;

typedef struct {
    char *name;          /* mangled symbol name */
    uint64_t size;       /* bytes */
    const uint8_t *init; /* initial contents (size bytes), NULL when zero-initialised;
                              address initialisers (PTX generic(x), ELF relocations) are
                              left as zero bytes for the loader */
    int is_const;        /* 1 for __constant__ (.nv.constant3 / .const), 0 for __device__ */
} cr_global_info_t;

/* A parsed image. All strings and buffers belong to it. */
typedef struct cr_image_s {
    cr_image_kind_t kind;
    uint32_t entry_count;
    cr_image_entry_t *entries; /* for CR_IMAGE_ELF/PTX: one entry, the image itself */
    uint32_t kernel_count;
    cr_kernel_info_t *kernels; /* union over the entries, one per distinct name, sorted by
                                    name (strcmp) */
    uint32_t global_count;
    cr_global_info_t *globals; /* likewise */
} cr_image_t;

/* Parses an image of `size` bytes (what cr_image_measure found; on the server, untrusted
 * bytes from the network). Decompresses zstd and LZ4 entries. Kernels and their parameter
 * layouts come from a cubin's .nv.info sections; when the image has no cubin, from the PTX
 * .entry declarations. Globals likewise from the cubin's symbols, else from PTX.
 * `data` must stay valid only during the call: the result copies what it keeps.
 * A fatbin image may also be several containers back to back, with zero padding between
 * them (a whole .nv_fatbin section); entries of kinds other than PTX and ELF are skipped.
 * Returns 0, CR_ECORRUPT for a malformed image, CR_ENOMEM, CR_ETOOBIG (CR_EINVAL for NULL
 * arguments or size 0). */
int cr_image_parse(const void *data, size_t size, cr_image_t **out);
void cr_image_free(cr_image_t *image);

/* Lookups by mangled name; NULL when absent. */
const cr_kernel_info_t *cr_image_kernel(const cr_image_t *image, const char *name);
const cr_global_info_t *cr_image_global(const cr_image_t *image, const char *name);

/* The entry a device of compute capability `sm` (e.g. 90) would load: the cubin of the
 * highest arch <= sm with the same major version, else PTX of the highest arch <= sm
 * (arch-specific entries only for exactly their arch, family-specific ones only within
 * their major version). NULL when none fits (CUDA_ERROR_NO_BINARY_FOR_GPU). */
const cr_image_entry_t *cr_image_select(const cr_image_t *image, unsigned sm);

#endif
