/* libFuzzer target: code images as the server receives them in cuModuleLoadData and
 * cuLibraryLoadData bulk bytes: cr_image_measure_bounded (handlers_code.c's size check),
 * then cr_image_parse (common/fatbin.c containers and entries, cubin.c ELF, ptx_decl.c PTX
 * declarations, zstd and LZ4 inflation).
 *
 * Feeds: the input as the image itself; and the input as the compressed payload of one
 * zstd entry and of one LZ4 entry of a fatbin container built here around it, with the
 * sizes the header must state filled in, so that the decompressors and what parses their
 * output see fuzzed bytes without the fuzzer having to find a valid container first.
 * Checks: a measured image lies inside the bytes given; a parsed image has the kind its
 * magic says; each entry is ELF or PTX text followed by a NUL (what the JIT needs), PTX
 * with no NUL inside, a cubin entry re-measures to exactly its size; a cubin or PTX image
 * is a copy of the input's own bytes and parses the same from its measured extent alone;
 * kernels and globals are sorted, unique and found by lookup, every parameter lies inside
 * its kernel's parameter buffer, initial contents are readable to their full size; and
 * cr_image_select only picks an entry a device of that version may load. */
#include <lz4.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "fatbin.h"
#include "le.h"
#include "fuzz_check.h"

#define ENTRY_HEADER 0x40u
#define FLAG_LZ4 0x2000u
#define FLAG_ZSTD 0x8000u
#define FLAG_64BIT_LINUX 0x11u
/* Decoded sizes tried for a payload whose frame does not state one; enough for every
 * fixture's entries and small enough to keep runs fast. */
#define PROBE_MAX (256u << 10)

static volatile uint8_t sink; /* reads that ASan checks and the compiler keeps */

static void touch(const uint8_t *p, size_t n)
{
    uint8_t x = 0;
    for (size_t i = 0; i < n; i++)
        x ^= p[i];
    sink ^= x;
}

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void check_image(const cr_image_t *img, const uint8_t *data, size_t size)
{
    uint32_t magic = size >= 4 ? ld32(data) : 0;
    cr_image_kind_t want = magic == CR_FATBIN_MAGIC ? CR_IMAGE_FATBIN
                           : magic == CR_ELF_MAGIC  ? CR_IMAGE_ELF
                                                    : CR_IMAGE_PTX;
    FUZZ_CHECK_EQ(img->kind, want);
    for (uint32_t i = 0; i < img->entry_count; i++) {
        const cr_image_entry_t *e = &img->entries[i];
        FUZZ_CHECK(e->kind == CR_IMAGE_ELF || e->kind == CR_IMAGE_PTX);
        FUZZ_CHECK(e->data != NULL);
        FUZZ_CHECK(e->size <= CR_IMAGE_MAX_SIZE);
        touch(e->data, e->size);
        FUZZ_CHECK_EQ(e->data[e->size], 0); /* fatbin.h: a NUL follows every entry */
        if (e->kind == CR_IMAGE_PTX) {
            FUZZ_CHECK(memchr(e->data, 0, e->size) == NULL);
        } else {
            size_t n;
            FUZZ_CHECK_EQ(cr_image_measure_bounded(e->data, e->size, &n), 0);
            FUZZ_CHECK_EQ(n, e->size);
        }
        FUZZ_CHECK(e->arch_suffix == 0 || e->arch_suffix == 'a' || e->arch_suffix == 'f');
    }
    if (want != CR_IMAGE_FATBIN) { /* the image is its one entry, a copy of the input */
        FUZZ_CHECK_EQ(img->entry_count, 1);
        const cr_image_entry_t *e = &img->entries[0];
        FUZZ_CHECK_EQ(e->kind, want);
        FUZZ_CHECK(e->size <= size);
        FUZZ_CHECK(memcmp(e->data, data, e->size) == 0);
        if (want == CR_IMAGE_PTX)
            FUZZ_CHECK_EQ(e->size, strnlen((const char *)data, size));
    }
    for (uint32_t i = 0; i < img->kernel_count; i++) {
        const cr_kernel_info_t *k = &img->kernels[i];
        FUZZ_CHECK(k->name != NULL);
        if (i > 0)
            FUZZ_CHECK(strcmp(img->kernels[i - 1].name, k->name) < 0);
        FUZZ_CHECK(cr_image_kernel(img, k->name) == k);
        FUZZ_CHECK(k->param_count == 0 || k->params != NULL);
        for (uint32_t j = 0; j < k->param_count; j++)
            FUZZ_CHECK((uint64_t)k->params[j].offset + k->params[j].size <= k->param_size);
    }
    for (uint32_t i = 0; i < img->global_count; i++) {
        const cr_global_info_t *g = &img->globals[i];
        FUZZ_CHECK(g->name != NULL);
        if (i > 0)
            FUZZ_CHECK(strcmp(img->globals[i - 1].name, g->name) < 0);
        FUZZ_CHECK(cr_image_global(img, g->name) == g);
        if (g->init)
            touch(g->init, g->size);
    }
    static const unsigned sms[] = {75, 80, 86, 89, 90, 100, 120};
    for (size_t i = 0; i < sizeof sms / sizeof sms[0]; i++) {
        const cr_image_entry_t *e = cr_image_select(img, sms[i]);
        if (!e)
            continue;
        FUZZ_CHECK(e >= img->entries && e < img->entries + img->entry_count);
        FUZZ_CHECK(e->arch <= sms[i]);
        if (e->arch_suffix == 'a')
            FUZZ_CHECK_EQ(e->arch, sms[i]);
        if (e->arch_suffix == 'f' || e->kind == CR_IMAGE_ELF)
            FUZZ_CHECK_EQ(e->arch / 10, sms[i] / 10);
    }
}

/* The image as a load request's bulk: measured first, as the handler does, then parsed. */
static void one_image(const uint8_t *data, size_t size)
{
    size_t measured = 0;
    int fits = cr_image_measure_bounded(data, size, &measured) == 0 && measured <= size;
    cr_image_t *img = NULL;
    if (size == 0 || cr_image_parse(data, size, &img) != 0)
        return;
    check_image(img, data, size);
    /* a cubin or PTX text is what its own headers or NUL say, whatever follows it */
    if (fits && img->kind != CR_IMAGE_FATBIN) {
        cr_image_t *again = NULL;
        FUZZ_CHECK_EQ(cr_image_parse(data, measured, &again), 0);
        FUZZ_CHECK_EQ(again->kernel_count, img->kernel_count);
        FUZZ_CHECK_EQ(again->global_count, img->global_count);
        FUZZ_CHECK_EQ(again->entries[0].size, img->entries[0].size);
        cr_image_free(again);
    }
    cr_image_free(img);
}

/* How many bytes the payload decodes to, found by a trial into a bounded buffer (which then
 * holds its first bytes); else what a zstd frame states; else a guess from the input size,
 * for the decompressor to refuse. */
static size_t decoded_size(const uint8_t *p, size_t n, int zstd, uint8_t *probe)
{
    if (zstd) {
        size_t got = ZSTD_decompress(probe, PROBE_MAX, p, n);
        if (!ZSTD_isError(got) && got > 0)
            return got;
        /* too large to try here: state what the frame says, within reason */
        unsigned long long fcs = ZSTD_getFrameContentSize(p, n);
        if (fcs != ZSTD_CONTENTSIZE_ERROR && fcs != ZSTD_CONTENTSIZE_UNKNOWN)
            return fcs > 4 * PROBE_MAX ? 4 * PROBE_MAX : (size_t)fcs;
    } else {
        int got = LZ4_decompress_safe((const char *)p, (char *)probe, (int)n, PROBE_MAX);
        if (got > 0)
            return (size_t)got;
    }
    return 2 * n + 1;
}

/* The input as the one compressed entry of a container; parsed like any image. */
static void one_compressed(const uint8_t *data, size_t size, int zstd, uint8_t *probe)
{
    size_t ulen = decoded_size(data, size, zstd, probe);
    size_t padded = (size + 7) & ~(size_t)7;
    size_t total = 16 + ENTRY_HEADER + padded;
    uint8_t *img = calloc(1, total);
    if (!img)
        return;
    cr_le_put32(img, CR_FATBIN_MAGIC);
    cr_le_put16(img + 4, 1);
    cr_le_put16(img + 6, 16);
    cr_le_put64(img + 8, ENTRY_HEADER + padded);
    uint8_t *h = img + 16;
    /* an ELF payload goes in an ELF entry, anything else is taken as PTX text */
    int elf =
        ulen >= 4 && probe[0] == 0x7f && probe[1] == 'E' && probe[2] == 'L' && probe[3] == 'F';
    cr_le_put16(h, elf ? 2 : 1);
    cr_le_put16(h + 2, 0x0101);
    cr_le_put32(h + 4, ENTRY_HEADER);
    cr_le_put64(h + 8, padded);
    cr_le_put32(h + 0x10, (uint32_t)size);
    cr_le_put16(h + 0x18, 0);
    cr_le_put16(h + 0x1a, 8);
    cr_le_put32(h + 0x1c, 75);
    cr_le_put64(h + 0x28, FLAG_64BIT_LINUX | (zstd ? FLAG_ZSTD : FLAG_LZ4));
    cr_le_put64(h + 0x38, ulen);
    memcpy(h + ENTRY_HEADER, data, size);
    one_image(img, total);
    free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t probe[PROBE_MAX];
    one_image(data, size);
    if (size == 0 || size > UINT32_MAX)
        return 0;
    memset(probe, 0, 4);
    one_compressed(data, size, 1, probe);
    memset(probe, 0, 4);
    one_compressed(data, size, 0, probe);
    return 0;
}
