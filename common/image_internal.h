/* Internals shared by fatbin.c (containers, decompression, the result), cubin.c (ELF) and
 * ptx_decl.c (PTX text): bounds-checked little-endian readers and the builder that collects
 * kernels and globals from every entry of an image before they are deduplicated by name.
 * Not part of the public API. */
#ifndef CR_IMAGE_INTERNAL_H
#define CR_IMAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fatbin.h"
#include "le.h"

/* 1 when [off, off + len) lies inside a buffer of `size` bytes, without overflowing. */
static inline int cr__in_bounds(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

/* Collects the kernels and globals of all entries; cr__builder_finish dedupes them. */
typedef struct {
    cr_image_t *img;
    uint32_t entry_cap;
    uint32_t kernel_cap;
    uint32_t global_cap;
} cr__builder_t;

/* Both take ownership of what the struct points at, also on failure (CR_ENOMEM). */
int cr__builder_add_kernel(cr__builder_t *b, cr_kernel_info_t *k);
int cr__builder_add_global(cr__builder_t *b, cr_global_info_t *g);

/* Frees what one record points at. */
void cr__kernel_clear(cr_kernel_info_t *k);
void cr__global_clear(cr_global_info_t *g);

/* Size of the ELF image at `p` from its headers. `limit` bounds every header read (the
 * buffer size when parsing; CR_IMAGE_MAX_SIZE for trusted memory when measuring).
 * Returns 0, CR_ECORRUPT or CR_ETOOBIG. */
int cr__elf_measure(const uint8_t *p, size_t limit, size_t *size);

/* SM version the cubin was built for, from e_flags (0 when it cannot tell). */
unsigned cr__elf_arch(const uint8_t *p, size_t size);

/* Adds the kernels and globals of one cubin. Returns 0, CR_ECORRUPT or CR_ENOMEM. */
int cr__elf_collect(cr__builder_t *b, const uint8_t *p, size_t size);

/* Adds the kernels and globals of one PTX text of `len` bytes (no NUL needed). Each
 * declaration is read by ptx_var.c, as the PTX interpreter reads it.
 * Returns 0, CR_ECORRUPT, CR_ETOOBIG or CR_ENOMEM. */
int cr__ptx_collect(cr__builder_t *b, const char *text, size_t len);

/* Target SM from the PTX ".target sm_NN[a|f]" directive (0 when absent); *suffix gets the
 * 'a' or 'f' after the number, else 0. */
unsigned cr__ptx_arch(const char *text, size_t len, char *suffix);

#endif
