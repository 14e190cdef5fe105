/* CUDA code images: measuring what cuLibraryLoadData/cuModuleLoadData receive, walking
 * fatbin containers and their entries, decompressing zstd and LZ4 entries, and building the
 * cr_image_t (entries, plus kernels and globals deduplicated by name and sorted for lookup).
 * The ELF and PTX readers that fill in kernels and globals live in cubin.c and ptx_decl.c.
 *
 * Fatbin container (all little-endian), as produced by nvcc/fatbinary (CUDA 13):
 *   0x00 u32 magic 0xBA55ED50   0x04 u16 version (1)   0x06 u16 header size (16)
 *   0x08 u64 size of the entries that follow the header
 * Each entry is a header followed by its payload:
 *   0x00 u16 kind (1 PTX, 2 ELF)   0x04 u32 header size (0x40, 0x50 for PTX, 0x70 sm_100+)
 *   0x08 u64 payload size (compressed bytes rounded up to 8)
 *   0x10 u32 compressed size (0 when stored)   0x14 u32 offset of a header extension (or 0)
 *   0x18 u16 minor, 0x1a u16 major code version   0x1c u32 arch (75: sm_75 / compute_75)
 *   0x28 u64 flags: 0x8000 zstd, 0x2000 LZ4 (raw block), 0x1 64-bit, 0x2 debug (-G),
 *        0x10 Linux host, 0x100000 arch-specific (sm_90a), 0x200000 family (sm_100f)
 *   0x38 u64 uncompressed size (0 when stored) */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <zstd.h>

#include "error.h"
#include "fatbin.h"
#include "image_internal.h"

#define CONTAINER_HEADER_MIN 16u
#define ENTRY_HEADER_MIN 0x40u
#define ENTRY_KIND_PTX 1u
#define ENTRY_KIND_ELF 2u
#define ENTRY_FLAG_LZ4 0x2000u
#define ENTRY_FLAG_ZSTD 0x8000u
#define ENTRY_FLAG_ARCH_SPECIFIC 0x100000u   /* sm_90a, compute_100a */
#define ENTRY_FLAG_FAMILY_SPECIFIC 0x200000u /* sm_100f */
/* Growth limit for the record arrays: far above any real image, below uint32 overflow. */
#define RECORD_MAX (1u << 28)

/* The host stub's __fatBinC_Wrapper_t; only magic and data are used. */
typedef struct {
    uint32_t magic;
    uint32_t version;
    const void *data;
    const void *filename_or_fatbins;
} fatbin_wrapper_t;

/* ---- measuring (trusted client memory) ---- */

/* Compares a magic number byte by byte: all magic bytes are non-zero, so a short PTX string
 * is never read past its NUL. */
static int has_magic(const uint8_t *p, uint32_t magic)
{
    for (int i = 0; i < 4; i++)
        if (p[i] != (uint8_t)(magic >> (8 * i)))
            return 0;
    return 1;
}

static int measure_container(const uint8_t *p, size_t *size)
{
    uint16_t hdr = cr_le_get16(p + 6);
    uint64_t body = cr_le_get64(p + 8);

    if (hdr < CONTAINER_HEADER_MIN || body > CR_IMAGE_MAX_SIZE - hdr)
        return CR_ECORRUPT;
    *size = (size_t)hdr + (size_t)body;
    return 0;
}

/* PTX is recognised by being text: cuModuleLoadData gets it NUL-terminated. */
static int measure_ptx(const char *text, size_t *size)
{
    unsigned char c = (unsigned char)text[0];
    size_t len;

    if (!(c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c < 0x7f)))
        return CR_ECORRUPT;
    len = strnlen(text, CR_IMAGE_MAX_SIZE);
    if (len >= CR_IMAGE_MAX_SIZE)
        return CR_ETOOBIG;
    *size = len + 1;
    return 0;
}

int cr_image_measure(const void *code, const void **start, size_t *size, cr_image_kind_t *kind)
{
    const uint8_t *p = code;
    int rc;

    if (!code || !start || !size || !kind)
        return CR_EINVAL;
    if (has_magic(p, CR_FATBIN_WRAPPER_MAGIC)) {
        fatbin_wrapper_t w;
        memcpy(&w, p, sizeof w);
        /* The wrapper only ever points at a container; anything else is not ours to guess. */
        if (!w.data || !has_magic(w.data, CR_FATBIN_MAGIC))
            return CR_ECORRUPT;
        p = w.data;
    }
    if (has_magic(p, CR_FATBIN_MAGIC)) {
        rc = measure_container(p, size);
        *kind = CR_IMAGE_FATBIN;
    } else if (has_magic(p, CR_ELF_MAGIC)) {
        rc = cr__elf_measure(p, CR_IMAGE_MAX_SIZE, size);
        *kind = CR_IMAGE_ELF;
    } else {
        rc = measure_ptx((const char *)p, size);
        *kind = CR_IMAGE_PTX;
    }
    if (rc == 0)
        *start = p;
    return rc;
}

/* ---- record arrays ---- */

/* Makes room for one more element in *arr (count used, *cap allocated). */
static int grow(void **arr, uint32_t count, uint32_t *cap, size_t elsize)
{
    uint32_t ncap;
    void *n;

    if (count < *cap)
        return 0;
    if (*cap >= RECORD_MAX)
        return CR_ETOOBIG;
    ncap = *cap ? *cap * 2 : 8;
    n = realloc(*arr, (size_t)ncap * elsize);
    if (!n)
        return CR_ENOMEM;
    *arr = n;
    *cap = ncap;
    return 0;
}

void cr__kernel_clear(cr_kernel_info_t *k)
{
    free(k->name);
    free(k->params);
    memset(k, 0, sizeof *k);
}

void cr__global_clear(cr_global_info_t *g)
{
    free(g->name);
    free((void *)(uintptr_t)g->init);
    memset(g, 0, sizeof *g);
}

int cr__builder_add_kernel(cr__builder_t *b, cr_kernel_info_t *k)
{
    cr_image_t *img = b->img;
    void *arr = img->kernels;
    int rc = grow(&arr, img->kernel_count, &b->kernel_cap, sizeof *k);

    img->kernels = arr;
    if (rc) {
        cr__kernel_clear(k);
        return rc;
    }
    img->kernels[img->kernel_count++] = *k;
    return 0;
}

int cr__builder_add_global(cr__builder_t *b, cr_global_info_t *g)
{
    cr_image_t *img = b->img;
    void *arr = img->globals;
    int rc = grow(&arr, img->global_count, &b->global_cap, sizeof *g);

    img->globals = arr;
    if (rc) {
        cr__global_clear(g);
        return rc;
    }
    img->globals[img->global_count++] = *g;
    return 0;
}

static int add_entry(cr__builder_t *b, cr_image_kind_t kind, unsigned arch, char suffix,
                     uint8_t *data, size_t size)
{
    cr_image_t *img = b->img;
    void *arr = img->entries;
    int rc = grow(&arr, img->entry_count, &b->entry_cap, sizeof *img->entries);

    img->entries = arr;
    if (rc) {
        free(data);
        return rc;
    }
    img->entries[img->entry_count++] = (cr_image_entry_t){
        .kind = kind, .arch = arch, .arch_suffix = suffix, .data = data, .size = size};
    return 0;
}

/* ---- dedupe and sort by name ---- */

/* Kernel and global records both start with their `char *name`. */
static const char *record_name(const void *rec)
{
    const char *name;
    memcpy(&name, rec, sizeof name);
    return name;
}

typedef struct {
    const char *name;
    uint32_t index;
} name_ref_t;

/* By name, then by order of appearance, so that the first occurrence of a name is kept. */
static int cmp_name_ref(const void *a, const void *b)
{
    const name_ref_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);

    if (c)
        return c;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Sorts the records (elsize bytes each) by name and drops later duplicates. */
static int dedupe(void *records, uint32_t *count, size_t elsize, void (*clear)(void *))
{
    uint32_t n = *count, kept = 0;
    name_ref_t *refs = NULL;
    uint8_t *sorted = NULL;
    int rc = CR_ENOMEM;

    if (n == 0)
        return 0;
    refs = malloc((size_t)n * sizeof *refs);
    sorted = malloc((size_t)n * elsize);
    if (!refs || !sorted)
        goto out;
    for (uint32_t i = 0; i < n; i++)
        refs[i] = (name_ref_t){record_name((uint8_t *)records + (size_t)i * elsize), i};
    qsort(refs, n, sizeof *refs, cmp_name_ref);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *rec = (uint8_t *)records + (size_t)refs[i].index * elsize;
        if (kept && strcmp(refs[i].name, record_name(sorted + (size_t)(kept - 1) * elsize)) == 0)
            clear(rec);
        else
            memcpy(sorted + (size_t)kept++ * elsize, rec, elsize);
    }
    memcpy(records, sorted, (size_t)kept * elsize);
    *count = kept;
    rc = 0;
out:
    free(refs);
    free(sorted);
    return rc;
}

static void clear_kernel_rec(void *k)
{
    cr__kernel_clear(k);
}

static void clear_global_rec(void *g)
{
    cr__global_clear(g);
}

/* Kernels and globals come from the cubins when there is one, else from the PTX. */
static int collect_symbols(cr__builder_t *b)
{
    cr_image_t *img = b->img;
    cr_image_kind_t want = CR_IMAGE_PTX;
    int rc = 0;

    for (uint32_t i = 0; i < img->entry_count; i++)
        if (img->entries[i].kind == CR_IMAGE_ELF)
            want = CR_IMAGE_ELF;
    for (uint32_t i = 0; i < img->entry_count && rc == 0; i++) {
        const cr_image_entry_t *e = &img->entries[i];
        if (e->kind != want)
            continue;
        if (want == CR_IMAGE_ELF)
            rc = cr__elf_collect(b, e->data, e->size);
        else
            rc = cr__ptx_collect(b, (const char *)e->data, e->size);
    }
    if (rc == 0)
        rc = dedupe(img->kernels, &img->kernel_count, sizeof *img->kernels, clear_kernel_rec);
    if (rc == 0)
        rc = dedupe(img->globals, &img->global_count, sizeof *img->globals, clear_global_rec);
    return rc;
}

/* ---- fatbin entries ---- */

/* nvcc writes one zstd frame that states its content size: a frame that disagrees with the
 * entry header is corrupt, and is caught before the output buffer is allocated. */
static int check_zstd(const uint8_t *src, size_t clen, size_t ulen)
{
    unsigned long long fcs = ZSTD_getFrameContentSize(src, clen);

    if (fcs == ZSTD_CONTENTSIZE_ERROR)
        return CR_ECORRUPT;
    return fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != ulen ? CR_ECORRUPT : 0;
}

static int inflate_zstd(const uint8_t *src, size_t clen, uint8_t *dst, size_t ulen)
{
    size_t got = ZSTD_decompress(dst, ulen, src, clen);

    return ZSTD_isError(got) || got != ulen ? CR_ECORRUPT : 0;
}

/* nvcc's LZ4 payloads are raw blocks (no frame); the header gives the output size. */
static int check_lz4(size_t clen, size_t ulen)
{
    if (clen > INT_MAX || ulen > INT_MAX)
        return CR_ETOOBIG;
    /* One input byte expands to at most 255 output bytes: reject absurd claims early. */
    return ulen / 255 > clen + 16 ? CR_ECORRUPT : 0;
}

static int inflate_lz4(const uint8_t *src, size_t clen, uint8_t *dst, size_t ulen)
{
    int got = LZ4_decompress_safe((const char *)src, (char *)dst, (int)clen, (int)ulen);

    return got < 0 || (size_t)got != ulen ? CR_ECORRUPT : 0;
}

/* Sizes for the decompressor: clen compressed bytes inside the payload, ulen to produce. */
static int entry_sizes(const uint8_t *h, uint64_t psize, uint64_t flags, size_t *clen, size_t *ulen)
{
    uint32_t csize = cr_le_get32(h + 0x10);
    uint64_t usize = cr_le_get64(h + 0x38);

    if (!(flags & (ENTRY_FLAG_ZSTD | ENTRY_FLAG_LZ4))) {
        *clen = *ulen = (size_t)psize;
        return 0;
    }
    if ((flags & ENTRY_FLAG_ZSTD) && (flags & ENTRY_FLAG_LZ4))
        return CR_ECORRUPT;
    if (csize > psize || usize == 0)
        return CR_ECORRUPT;
    if (usize > CR_IMAGE_MAX_SIZE)
        return CR_ETOOBIG;
    *clen = csize ? csize : (size_t)psize;
    *ulen = (size_t)usize;
    return 0;
}

/* Decodes one entry's payload into a fresh buffer with a NUL after it (for PTX text). */
static int decode_payload(const uint8_t *h, const uint8_t *payload, uint64_t psize, uint8_t **out,
                          size_t *outlen)
{
    uint64_t flags = cr_le_get64(h + 0x28);
    size_t clen, ulen;
    uint8_t *buf = NULL;
    int rc = entry_sizes(h, psize, flags, &clen, &ulen);

    if (rc == 0 && (flags & ENTRY_FLAG_ZSTD))
        rc = check_zstd(payload, clen, ulen);
    if (rc == 0 && (flags & ENTRY_FLAG_LZ4))
        rc = check_lz4(clen, ulen);
    if (rc)
        return rc;
    buf = malloc(ulen + 1);
    if (!buf)
        return CR_ENOMEM;
    if (flags & ENTRY_FLAG_ZSTD)
        rc = inflate_zstd(payload, clen, buf, ulen);
    else if (flags & ENTRY_FLAG_LZ4)
        rc = inflate_lz4(payload, clen, buf, ulen);
    else
        memcpy(buf, payload, ulen);
    if (rc)
        goto fail;
    buf[ulen] = 0;
    *out = buf;
    *outlen = ulen;
    return 0;
fail:
    free(buf);
    return rc;
}

/* PTX payloads end with NUL padding; cubins may be padded too: trim both to their content. */
static int trim_payload(unsigned kind, const uint8_t *buf, size_t *len)
{
    if (kind == ENTRY_KIND_PTX) {
        *len = strnlen((const char *)buf, *len);
        return 0;
    }
    if (*len < 4 || cr_le_get32(buf) != CR_ELF_MAGIC)
        return CR_ECORRUPT;
    return cr__elf_measure(buf, *len, len);
}

static char entry_suffix(uint64_t flags)
{
    if (flags & ENTRY_FLAG_ARCH_SPECIFIC)
        return 'a';
    return flags & ENTRY_FLAG_FAMILY_SPECIFIC ? 'f' : 0;
}

/* Parses the entry at p (avail bytes left in its container); *used = its total length. */
static int parse_entry(cr__builder_t *b, const uint8_t *p, size_t avail, size_t *used)
{
    uint16_t kind;
    uint32_t hsize;
    uint64_t psize;
    uint8_t *buf;
    size_t len;
    int rc;

    if (avail < ENTRY_HEADER_MIN)
        return CR_ECORRUPT;
    kind = cr_le_get16(p);
    hsize = cr_le_get32(p + 4);
    psize = cr_le_get64(p + 8);
    if (hsize < ENTRY_HEADER_MIN || !cr__in_bounds(hsize, psize, avail))
        return CR_ECORRUPT;
    *used = hsize + (size_t)psize;
    /* Other kinds (LTO IR, tool data) are nothing a device loads: skip them. */
    if (kind != ENTRY_KIND_PTX && kind != ENTRY_KIND_ELF)
        return 0;
    rc = decode_payload(p, p + hsize, psize, &buf, &len);
    if (rc)
        return rc;
    rc = trim_payload(kind, buf, &len);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[len] = 0; /* a NUL follows every entry's content (fatbin.h), a trimmed cubin's too */
    return add_entry(b, kind == ENTRY_KIND_PTX ? CR_IMAGE_PTX : CR_IMAGE_ELF, cr_le_get32(p + 0x1c),
                     entry_suffix(cr_le_get64(p + 0x28)), buf, len);
}

static int parse_container(cr__builder_t *b, const uint8_t *p, size_t avail, size_t *used)
{
    uint16_t hdr;
    uint64_t body;
    size_t off, end;

    if (avail < CONTAINER_HEADER_MIN || cr_le_get32(p) != CR_FATBIN_MAGIC)
        return CR_ECORRUPT;
    hdr = cr_le_get16(p + 6);
    body = cr_le_get64(p + 8);
    if (hdr < CONTAINER_HEADER_MIN || !cr__in_bounds(hdr, body, avail))
        return CR_ECORRUPT;
    end = hdr + (size_t)body;
    for (off = hdr; off < end;) {
        size_t n = 0;
        int rc = parse_entry(b, p + off, end - off, &n);
        if (rc)
            return rc;
        off += n;
    }
    *used = end;
    return 0;
}

/* Zero bytes after a container are padding (as between containers in .nv_fatbin). */
static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* A fatbin image is one container, or several back to back (a whole .nv_fatbin section). */
static int parse_fatbin(cr__builder_t *b, const uint8_t *p, size_t size)
{
    size_t off = 0;

    while (off < size) {
        size_t n = 0;
        int rc;
        if (size - off < 4 || cr_le_get32(p + off) != CR_FATBIN_MAGIC)
            return all_zero(p + off, size - off) ? 0 : CR_ECORRUPT;
        rc = parse_container(b, p + off, size - off, &n);
        if (rc)
            return rc;
        off += n;
    }
    return 0;
}

static int parse_elf(cr__builder_t *b, const uint8_t *p, size_t size)
{
    size_t len;
    uint8_t *buf;
    int rc = cr__elf_measure(p, size, &len);

    if (rc)
        return rc;
    buf = malloc(len + 1);
    if (!buf)
        return CR_ENOMEM;
    memcpy(buf, p, len);
    buf[len] = 0;
    return add_entry(b, CR_IMAGE_ELF, cr__elf_arch(p, len), 0, buf, len);
}

static int parse_ptx(cr__builder_t *b, const uint8_t *p, size_t size)
{
    size_t len = strnlen((const char *)p, size);
    uint8_t *buf = malloc(len + 1);
    unsigned arch;
    char suffix;

    if (!buf)
        return CR_ENOMEM;
    memcpy(buf, p, len);
    buf[len] = 0;
    arch = cr__ptx_arch((const char *)buf, len, &suffix);
    return add_entry(b, CR_IMAGE_PTX, arch, suffix, buf, len);
}

int cr_image_parse(const void *data, size_t size, cr_image_t **out)
{
    const uint8_t *p = data;
    cr__builder_t b = {0};
    uint32_t magic;
    int rc;

    if (!data || !out || size == 0)
        return CR_EINVAL;
    *out = NULL;
    if (size > CR_IMAGE_MAX_SIZE)
        return CR_ETOOBIG;
    b.img = calloc(1, sizeof *b.img);
    if (!b.img)
        return CR_ENOMEM;
    magic = size >= 4 ? cr_le_get32(p) : 0;
    if (magic == CR_FATBIN_MAGIC) {
        b.img->kind = CR_IMAGE_FATBIN;
        rc = parse_fatbin(&b, p, size);
    } else if (magic == CR_ELF_MAGIC) {
        b.img->kind = CR_IMAGE_ELF;
        rc = parse_elf(&b, p, size);
    } else if (magic == CR_FATBIN_WRAPPER_MAGIC) {
        rc = CR_ECORRUPT; /* a wrapper holds a pointer: meaningless away from its process */
    } else {
        b.img->kind = CR_IMAGE_PTX;
        rc = parse_ptx(&b, p, size);
    }
    if (rc == 0)
        rc = collect_symbols(&b);
    if (rc)
        goto fail;
    *out = b.img;
    return 0;
fail:
    cr_image_free(b.img);
    return rc;
}

void cr_image_free(cr_image_t *image)
{
    if (!image)
        return;
    for (uint32_t i = 0; i < image->entry_count; i++)
        free((void *)(uintptr_t)image->entries[i].data);
    for (uint32_t i = 0; i < image->kernel_count; i++)
        cr__kernel_clear(&image->kernels[i]);
    for (uint32_t i = 0; i < image->global_count; i++)
        cr__global_clear(&image->globals[i]);
    free(image->entries);
    free(image->kernels);
    free(image->globals);
    free(image);
}

/* ---- lookups ---- */

static int cmp_key_record(const void *key, const void *rec)
{
    return strcmp(key, record_name(rec));
}

const cr_kernel_info_t *cr_image_kernel(const cr_image_t *image, const char *name)
{
    if (!image || !name || !image->kernel_count)
        return NULL;
    return bsearch(name, image->kernels, image->kernel_count, sizeof *image->kernels,
                   cmp_key_record);
}

const cr_global_info_t *cr_image_global(const cr_image_t *image, const char *name)
{
    if (!image || !name || !image->global_count)
        return NULL;
    return bsearch(name, image->globals, image->global_count, sizeof *image->globals,
                   cmp_key_record);
}

/* Returns the better of two candidates of the same kind: the higher arch <= sm. */
static const cr_image_entry_t *better(const cr_image_entry_t *best, const cr_image_entry_t *e)
{
    return !best || e->arch > best->arch ? e : best;
}

/* Whether a device of compute capability sm can run the entry at all. SASS runs only on the
 * major version it was built for, PTX JITs forward; arch- and family-specific targets
 * narrow that to their exact arch or their major version. */
static int loadable(const cr_image_entry_t *e, unsigned sm)
{
    int same_major = e->arch / 10 == sm / 10;

    if (e->arch > sm)
        return 0;
    if (e->arch_suffix == 'a')
        return e->arch == sm;
    if (e->arch_suffix == 'f' || e->kind == CR_IMAGE_ELF)
        return same_major;
    return 1;
}

const cr_image_entry_t *cr_image_select(const cr_image_t *image, unsigned sm)
{
    const cr_image_entry_t *sass = NULL, *ptx = NULL;

    if (!image)
        return NULL;
    for (uint32_t i = 0; i < image->entry_count; i++) {
        const cr_image_entry_t *e = &image->entries[i];
        if (!loadable(e, sm))
            continue;
        if (e->kind == CR_IMAGE_ELF)
            sass = better(sass, e);
        else
            ptx = better(ptx, e);
    }
    return sass ? sass : ptx;
}
