/* Tests for code-image measuring and parsing (common/fatbin.h) against images that nvcc built
 * from fixtures/kernels.cu at build time: parameter layouts from cubins and from PTX must be
 * identical and exact, globals carry their sizes and initial bytes, compressed entries (zstd,
 * LZ4) decode, cr_image_select picks what a device would load, and hostile or mutated images
 * are rejected without crashing.
 *
 * Usage: test_fatbin <fixture-dir> <group>; groups: measure elf ptx compressed select
 * executable hostile mutate. */
#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <zstd.h>

#include "check.h"
#include "error.h"
#include "fatbin.h"

static const char *fix_dir;

/* ---- helpers ---- */

typedef struct {
    uint8_t *data;
    size_t size;
} blob_t;

/* Reads a fixture; the buffer has a NUL after the contents (for PTX). Exits when missing:
 * that is a broken build, not a failed check. */
static blob_t load(const char *name)
{
    char path[4096];
    blob_t b = {0};
    FILE *f;
    long n;

    snprintf(path, sizeof path, "%s/%s", fix_dir, name);
    f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "cannot read fixture %s\n", path);
        exit(2);
    }
    b.size = (size_t)n;
    b.data = calloc(1, b.size + 1);
    if (!b.data || fread(b.data, 1, b.size, f) != b.size) {
        fprintf(stderr, "cannot read fixture %s\n", path);
        exit(2);
    }
    fclose(f);
    return b;
}

static cr_image_t *parse_or_null(const void *p, size_t n, const char *what)
{
    cr_image_t *img = NULL;
    int rc = cr_image_parse(p, n, &img);

    if (rc)
        fprintf(stderr, "parse %s: %s\n", what, cr_strerror(rc));
    CHECK_EQ_INT(rc, 0);
    return rc ? NULL : img;
}

static cr_image_t *parse_fixture(const char *name)
{
    blob_t b = load(name);
    cr_image_t *img = parse_or_null(b.data, b.size, name);

    free(b.data);
    return img;
}

/* A raw look at a container's entries (the test's own reading, independent of fatbin.c). */
typedef struct {
    uint16_t kind;
    uint32_t arch;
    uint64_t flags;
} raw_entry_t;

static int raw_entries(const uint8_t *p, raw_entry_t *out, int max)
{
    uint64_t end, off;
    int n = 0;

    memcpy(&end, p + 8, 8);
    end += 16;
    for (off = 16; off < end && n < max; n++) {
        uint32_t hsize;
        uint64_t psize;
        memcpy(&out[n].kind, p + off, 2);
        memcpy(&hsize, p + off + 4, 4);
        memcpy(&psize, p + off + 8, 8);
        memcpy(&out[n].arch, p + off + 0x1c, 4);
        memcpy(&out[n].flags, p + off + 0x28, 8);
        off += hsize + psize;
    }
    return n;
}

/* Offset and size of a named section of a (trusted) ELF64 file; 0 when absent. */
static int find_section(const uint8_t *p, size_t size, const char *name, size_t *off, size_t *len)
{
    Elf64_Ehdr eh;
    Elf64_Shdr sh, names;

    memcpy(&eh, p, sizeof eh);
    if (eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize > size)
        return 0;
    memcpy(&names, p + eh.e_shoff + (uint64_t)eh.e_shstrndx * eh.e_shentsize, sizeof names);
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        memcpy(&sh, p + eh.e_shoff + (uint64_t)i * eh.e_shentsize, sizeof sh);
        if (strcmp((const char *)p + names.sh_offset + sh.sh_name, name) == 0) {
            *off = sh.sh_offset;
            *len = sh.sh_size;
            return 1;
        }
    }
    return 0;
}

/* ---- what fixtures/kernels.cu must give ---- */

typedef struct {
    const char *name;
    uint32_t count, size;
    uint32_t off[6], sz[6];
} layout_t;

static const layout_t layouts[] = {
    {"vecAdd", 5, 32, {0, 8, 16, 24, 28}, {8, 8, 8, 4, 4}},
    {"mixed", 6, 80, {0, 2, 8, 56, 64, 72}, {1, 2, 48, 8, 8, 8}},
    {"tail", 2, 17, {0, 16}, {16, 1}},
    {"_Z5scaleIfEvPT_S0_", 2, 12, {0, 8}, {8, 4}},
    {"noparams", 0, 0, {0}, {0}},
    {"transpose", 1, 8, {0}, {8}},
    {"big", 3, 4372, {0, 4360, 4368}, {4360, 8, 4}},
};
#define KERNEL_COUNT (sizeof layouts / sizeof layouts[0])

static void check_layouts(const cr_image_t *img)
{
    CHECK_EQ_INT(img->kernel_count, KERNEL_COUNT);
    for (size_t i = 0; i < KERNEL_COUNT; i++) {
        const layout_t *l = &layouts[i];
        const cr_kernel_info_t *k = cr_image_kernel(img, l->name);
        CHECK(k != NULL);
        if (!k)
            continue;
        CHECK_EQ_STR(k->name, l->name);
        CHECK_EQ_INT(k->param_count, l->count);
        CHECK_EQ_INT(k->param_size, l->size);
        CHECK(l->count == 0 || k->params != NULL);
        for (uint32_t j = 0; j < l->count && j < k->param_count; j++) {
            CHECK_EQ_INT(k->params[j].offset, l->off[j]);
            CHECK_EQ_INT(k->params[j].size, l->sz[j]);
        }
    }
    CHECK(cr_image_kernel(img, "scale") == NULL); /* names stay mangled */
}

static void check_globals(const cr_image_t *img)
{
    static const float coef[4] = {1, 2, 3, 4};
    static const uint8_t seven[4] = {7, 0, 0, 0};
    const cr_global_info_t *g;

    CHECK_EQ_INT(img->global_count, 3);
    g = cr_image_global(img, "arr");
    CHECK(g && g->size == 400 && g->init == NULL && g->is_const == 0);
    g = cr_image_global(img, "counter");
    CHECK(g && g->size == 4 && g->init && g->is_const == 0);
    if (g && g->init)
        CHECK_EQ_MEM(g->init, seven, 4);
    g = cr_image_global(img, "coef");
    CHECK(g && g->size == 16 && g->init && g->is_const == 1);
    if (g && g->init)
        CHECK_EQ_MEM(g->init, coef, 16);
    CHECK(cr_image_global(img, "nonexistent") == NULL);
}

/* Attributes: from a cubin all of them, from PTX only what PTX declares. */
static void check_attributes(const cr_image_t *img, int from_elf)
{
    const cr_kernel_info_t *t = cr_image_kernel(img, "transpose");
    const cr_kernel_info_t *v = cr_image_kernel(img, "vecAdd");

    CHECK(t && v);
    if (!t || !v)
        return;
    CHECK_EQ_INT(t->static_shared_bytes, 1024);
    CHECK_EQ_INT(t->max_threads_per_block, 256);
    CHECK_EQ_INT(v->static_shared_bytes, 0);
    CHECK_EQ_INT(v->max_threads_per_block, 0);
    if (from_elf) {
        CHECK(t->num_regs > 0 && v->num_regs > 0);
        CHECK_EQ_INT(v->const_bytes, 16);
        CHECK_EQ_INT(v->local_bytes, 0);
    } else {
        CHECK_EQ_INT(v->num_regs, 0);
    }
}

/* Everything kernels.cu declares; `what` names the image in failure output. */
static void check_all(const cr_image_t *img, int from_elf, const char *what)
{
    int before = check_failures;

    if (!img)
        return;
    check_layouts(img);
    check_globals(img);
    check_attributes(img, from_elf);
    if (check_failures != before)
        fprintf(stderr, "  (the failures above are for %s)\n", what);
}

static void check_fixture(const char *name, int from_elf)
{
    cr_image_t *img = parse_fixture(name);

    check_all(img, from_elf, name);
    cr_image_free(img);
}

/* ---- measure ---- */

typedef struct {
    uint32_t magic;
    uint32_t version;
    const void *data;
    const void *unused;
} wrapper_t;

static void test_measure(void)
{
    blob_t fb = load("default.fatbin"), cubin = load("sm90.cubin"), ptx = load("default.ptx");
    wrapper_t w = {CR_FATBIN_WRAPPER_MAGIC, 1, fb.data, NULL};
    const void *start = NULL;
    size_t size = 0;
    cr_image_kind_t kind = 0;
    uint8_t *padded, bad[16] = {0};

    CHECK_EQ_INT(cr_image_measure(&w, &start, &size, &kind), 0);
    CHECK(start == fb.data);
    CHECK_EQ_INT(size, fb.size);
    CHECK_EQ_INT(kind, CR_IMAGE_FATBIN);

    CHECK_EQ_INT(cr_image_measure(fb.data, &start, &size, &kind), 0);
    CHECK(start == fb.data);
    CHECK_EQ_INT(size, fb.size);

    /* A cubin is measured from its headers, not from what follows it in memory. */
    padded = malloc(cubin.size + 4096);
    memcpy(padded, cubin.data, cubin.size);
    memset(padded + cubin.size, 0xAA, 4096);
    CHECK_EQ_INT(cr_image_measure(padded, &start, &size, &kind), 0);
    CHECK(start == padded);
    CHECK_EQ_INT(size, cubin.size);
    CHECK_EQ_INT(kind, CR_IMAGE_ELF);

    CHECK_EQ_INT(cr_image_measure(ptx.data, &start, &size, &kind), 0);
    CHECK(start == ptx.data);
    CHECK_EQ_INT(size, strlen((const char *)ptx.data) + 1);
    CHECK_EQ_INT(kind, CR_IMAGE_PTX);

    /* What was measured parses. */
    cr_image_t *img = NULL;
    CHECK_EQ_INT(cr_image_measure(&w, &start, &size, &kind), 0);
    CHECK_EQ_INT(cr_image_parse(start, size, &img), 0);
    check_all(img, 1, "measured wrapper");
    cr_image_free(img);

    w.data = NULL;
    CHECK_EQ_INT(cr_image_measure(&w, &start, &size, &kind), CR_ECORRUPT);
    w.data = bad; /* not a container */
    CHECK_EQ_INT(cr_image_measure(&w, &start, &size, &kind), CR_ECORRUPT);
    uint32_t magic = CR_FATBIN_MAGIC;
    uint64_t huge = UINT64_MAX - 8;
    memcpy(bad, &magic, 4);
    bad[6] = 16;
    memcpy(bad + 8, &huge, 8);
    CHECK_EQ_INT(cr_image_measure(bad, &start, &size, &kind), CR_ECORRUPT);
    CHECK_EQ_INT(cr_image_measure("\x01\x02", &start, &size, &kind), CR_ECORRUPT);
    CHECK_EQ_INT(cr_image_measure(NULL, &start, &size, &kind), CR_EINVAL);

    free(padded);
    free(fb.data);
    free(cubin.data);
    free(ptx.data);
}

/* ---- cubins ---- */

static void test_elf(void)
{
    blob_t b = load("sm90.cubin");
    cr_image_t *img = parse_or_null(b.data, b.size, "sm90.cubin");

    if (img) {
        CHECK_EQ_INT(img->kind, CR_IMAGE_ELF);
        CHECK_EQ_INT(img->entry_count, 1);
        CHECK_EQ_INT(img->entries[0].kind, CR_IMAGE_ELF);
        CHECK_EQ_INT(img->entries[0].arch, 90);
        CHECK_EQ_INT(img->entries[0].size, b.size);
        CHECK_EQ_MEM(img->entries[0].data, b.data, b.size);
        CHECK(img->entries[0].data != b.data); /* a copy: the input may go away */
    }
    /* sm_90's .nv.shared.transpose is 2048 bytes: 1 KiB reserved + the 1024-byte tile. */
    check_all(img, 1, "sm90.cubin");
    cr_image_free(img);
    free(b.data);

    img = parse_fixture("sm75.cubin");
    if (img)
        CHECK_EQ_INT(img->entries[0].arch, 75);
    check_all(img, 1, "sm75.cubin");
    cr_image_free(img);

    check_fixture("default.fatbin", 1);
    check_fixture("plain.fatbin", 1);
    check_fixture("sm90.fatbin", 1);
    /* Relocatable (-rdc): section and symbol types of its own; no reserved shared window. */
    check_fixture("rdc.cubin", 1);
}

/* ---- PTX ---- */

/* Declarations nvcc does not emit for kernels.cu but PTX allows. */
static const char ptx_syntax[] =
    "// comment\n.version 8.0\n.target sm_80\n.address_size 64\n"
    "/* block\n comment */\n"
    ".global .u32 x = 5;\n"
    ".global .align 8 .f64 d[2] = {0d3FF0000000000000, -2.5};\n"
    ".const .align 4 .f32 c[4] = {1.0, 0f40000000, 3.0, -4.0};\n"
    ".global .align 4 .b8 unsized[] = {1, 2, 3};\n"
    ".global .align 4 .u32 m[2][2] = {{1}, {3, 4}};\n"
    ".global .v2 .u16 v = {0x102, 0x304};\n"
    ".global .u32 a1 = 1, a2 = 2;\n"
    ".global .u64 addr = generic(x);\n"
    ".extern .global .align 4 .b8 ext[];\n"
    ".global .texref tex;\n"
    ".global .attribute(.managed) .align 4 .u32 man = 3;\n"
    ".global .align 4 .b8 zeros[8] = {0, 0};\n"
    ".extern .func (.param .b32 r) proto (.param .b64 p);\n"
    ".extern .shared .align 16 .b8 dyn[];\n"
    ".func (.param .b32 r) f(.param .b32 a)\n{\n ret;\n}\n"
    ".visible .entry k(.param .u64 .ptr .global .align 16 p, .param .align 4 .b8 s[12],\n"
    "    .param .u16 h, .param .u64 .ptr.global.align 16 q)\n"
    ".reqntid 32, 2\n.pragma \"nounroll\";\n{\n"
    "  .reg .b32 %r<2>;\n  .shared .align 8 .b8 a[10];\n  .shared .align 16 .b8 b[4];\n"
    "  .pragma \"nounroll\";\n"
    "  { st.local.v4.f32 [%r1], {%r1, %r1, %r1, %r1}; }\n  ret;\n}\n";

static void check_global_bytes(const cr_image_t *img, const char *name, uint64_t size,
                               const void *init, int is_const)
{
    const cr_global_info_t *g = cr_image_global(img, name);

    CHECK(g != NULL);
    if (!g)
        return;
    CHECK_EQ_U64(g->size, size);
    CHECK_EQ_INT(g->is_const, is_const);
    CHECK((g->init == NULL) == (init == NULL));
    if (g->init && init)
        CHECK_EQ_MEM(g->init, init, size);
}

static void test_ptx_syntax(void)
{
    static const double d[2] = {1.0, -2.5};
    static const float c[4] = {1, 2, 3, -4};
    static const uint32_t m[4] = {1, 0, 3, 4}, x = 5, a1 = 1, a2 = 2, man = 3;
    static const uint8_t unsized[3] = {1, 2, 3}, v[4] = {2, 1, 4, 3};
    cr_image_t *img = parse_or_null(ptx_syntax, sizeof ptx_syntax, "ptx_syntax");
    const cr_kernel_info_t *k;

    if (!img)
        return;
    CHECK_EQ_INT(img->entries[0].arch, 80);
    CHECK_EQ_INT(img->entries[0].size, strlen(ptx_syntax));
    check_global_bytes(img, "x", 4, &x, 0);
    check_global_bytes(img, "d", 16, d, 0);
    check_global_bytes(img, "c", 16, c, 1);
    check_global_bytes(img, "unsized", 3, unsized, 0);
    check_global_bytes(img, "m", 16, m, 0);
    check_global_bytes(img, "v", 4, v, 0);
    check_global_bytes(img, "a1", 4, &a1, 0);
    check_global_bytes(img, "a2", 4, &a2, 0);
    check_global_bytes(img, "addr", 8, NULL, 0); /* an address: the loader's business */
    check_global_bytes(img, "man", 4, &man, 0);
    check_global_bytes(img, "zeros", 8, NULL, 0);
    CHECK(cr_image_global(img, "ext") == NULL);
    CHECK(cr_image_global(img, "tex") == NULL);
    CHECK_EQ_INT(img->global_count, 11);

    CHECK_EQ_INT(img->kernel_count, 1);
    k = cr_image_kernel(img, "k");
    CHECK(k != NULL);
    if (k) {
        /* .align after .ptr is the pointee's: p stays 8-aligned. */
        CHECK_EQ_INT(k->param_count, 4);
        CHECK(k->param_count == 4 && k->params[0].offset == 0 && k->params[0].size == 8);
        CHECK(k->param_count == 4 && k->params[1].offset == 8 && k->params[1].size == 12);
        CHECK(k->param_count == 4 && k->params[2].offset == 20 && k->params[2].size == 2);
        CHECK(k->param_count == 4 && k->params[3].offset == 24 && k->params[3].size == 8);
        CHECK_EQ_INT(k->param_size, 32);
        CHECK_EQ_INT(k->max_threads_per_block, 64);
        /* a at 0 (10), b at 16 (4): 20, padded to 32 for dyn's alignment */
        CHECK_EQ_INT(k->static_shared_bytes, 32);
    }
    cr_image_free(img);
}

/* PTX from nvcc must give exactly the cubin's layouts. */
static void test_ptx_matches_elf(void)
{
    cr_image_t *elf = parse_fixture("sm90.cubin"), *ptx = parse_fixture("default.ptx");

    if (!elf || !ptx)
        goto out;
    CHECK_EQ_INT(elf->kernel_count, ptx->kernel_count);
    for (uint32_t i = 0; i < elf->kernel_count; i++) {
        const cr_kernel_info_t *e = &elf->kernels[i];
        const cr_kernel_info_t *p = cr_image_kernel(ptx, e->name);
        CHECK(p != NULL);
        if (!p)
            continue;
        CHECK_EQ_INT(p->param_count, e->param_count);
        CHECK_EQ_INT(p->param_size, e->param_size);
        CHECK_EQ_INT(p->static_shared_bytes, e->static_shared_bytes);
        CHECK_EQ_INT(p->max_threads_per_block, e->max_threads_per_block);
        if (p->param_count == e->param_count && e->param_count)
            CHECK_EQ_MEM(p->params, e->params, e->param_count * sizeof *e->params);
    }
out:
    cr_image_free(elf);
    cr_image_free(ptx);
}

/* fixtures/handwritten.ptx against the cubin ptxas made of it: the PTX reader must agree
 * with ptxas on .ptr alignment, .maxntid, and shared memory reached through functions and
 * padded for dynamic shared memory. */
static void test_ptx_handwritten(void)
{
    static const layout_t params = {"params", 5, 38, {0, 8, 16, 32, 36}, {1, 8, 1, 4, 2}};
    static const struct {
        const char *name;
        uint32_t shared;
    } shared[] = {{"shared_all", 64}, {"shared_direct", 16}, {"shared_none", 0}};
    static const char *const files[] = {"handwritten.ptx", "handwritten.cubin"};

    for (int f = 0; f < 2; f++) {
        cr_image_t *img = parse_fixture(files[f]);
        const cr_kernel_info_t *k;
        int before = check_failures;
        if (!img)
            continue;
        CHECK_EQ_INT(img->kernel_count, 4);
        k = cr_image_kernel(img, params.name);
        CHECK(k && k->param_count == params.count && k->param_size == params.size);
        for (uint32_t j = 0; k && j < params.count && j < k->param_count; j++) {
            CHECK_EQ_INT(k->params[j].offset, params.off[j]);
            CHECK_EQ_INT(k->params[j].size, params.sz[j]);
        }
        CHECK(k && k->max_threads_per_block == 128);
        for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) {
            k = cr_image_kernel(img, shared[i].name);
            CHECK(k != NULL);
            if (k)
                CHECK_EQ_INT(k->static_shared_bytes, shared[i].shared);
        }
        if (check_failures != before)
            fprintf(stderr, "  (the failures above are for %s)\n", files[f]);
        cr_image_free(img);
    }
}

static void test_ptx(void)
{
    cr_image_t *img = parse_fixture("default.ptx");
    const char *bad_ptx[] = {
        "hello",
        ".version 8.0\n.entry k(.param .u32 a) {",
        ".version 8.0\n.entry k(.param .u32 a {}",
        ".version 8.0\n}",
        ".version 8.0\n.global .u32 x = ;",
        ".version 8.0\n.global .u32 x[2] = {1, 2, 3};",
        ".version 8.0\n.global .u32 x[2] = {{{{{{{{{{{{1}}}}}}}}}}}};",
        ".version 8.0\n.global .b8 x[99999999999999999999999];",
        ".version 8.0\n.entry k(.param .align 3 .b8 a[4]) {}",
        ".version 8.0\n.entry k(.param a) {}",
        /* an unsized array of empty rows: no initialiser fits (and nothing divides by 0) */
        ".version 8.0\n.global .u32 x[][0] = {1};",
        ".version 8.0\n.global .u32 x[][0] = 1;",
        ".version 8.0\n.global .u32 x[][1099511627776][1099511627776] = {1};",
    };

    if (img) {
        CHECK_EQ_INT(img->kind, CR_IMAGE_PTX);
        CHECK_EQ_INT(img->entry_count, 1);
        CHECK_EQ_INT(img->entries[0].arch, 75);
        CHECK_EQ_INT(img->entries[0].data[img->entries[0].size], 0);
    }
    check_all(img, 0, "default.ptx");
    cr_image_free(img);

    img = parse_fixture("ptxonly75.fatbin");
    if (img) {
        CHECK_EQ_INT(img->entry_count, 1);
        CHECK_EQ_INT(img->entries[0].kind, CR_IMAGE_PTX);
        CHECK_EQ_INT(img->entries[0].arch, 75);
    }
    check_all(img, 0, "ptxonly75.fatbin");
    cr_image_free(img);

    img = parse_fixture("ptxonly90.fatbin");
    if (img) {
        CHECK_EQ_INT(img->entry_count, 1);
        CHECK_EQ_INT(img->entries[0].kind, CR_IMAGE_PTX);
        CHECK_EQ_INT(img->entries[0].arch, 90);
    }
    check_all(img, 0, "ptxonly90.fatbin");
    cr_image_free(img);

    test_ptx_matches_elf();
    test_ptx_syntax();
    test_ptx_handwritten();

    for (size_t i = 0; i < sizeof bad_ptx / sizeof bad_ptx[0]; i++) {
        cr_image_t *bad = NULL;
        int rc = cr_image_parse(bad_ptx[i], strlen(bad_ptx[i]) + 1, &bad);
        if (rc != CR_ECORRUPT && rc != CR_ETOOBIG)
            fprintf(stderr, "bad PTX #%zu gave %d\n", i, rc);
        CHECK(rc == CR_ECORRUPT || rc == CR_ETOOBIG);
        CHECK(bad == NULL);
    }
}

/* ---- compressed entries ---- */

/* Builds a one-entry container around a payload (stored, or compressed with flags). */
static size_t build_container(uint8_t *out, uint16_t kind, uint32_t arch, uint64_t flags,
                              const void *payload, uint32_t clen, uint64_t ulen)
{
    uint32_t magic = CR_FATBIN_MAGIC, hsize = 0x40;
    uint64_t psize = (clen + 7u) & ~7u, body = hsize + psize;
    uint8_t *e = out + 16;

    memset(out, 0, 16 + body);
    memcpy(out, &magic, 4);
    out[4] = 1;
    out[6] = 16;
    memcpy(out + 8, &body, 8);
    memcpy(e, &kind, 2);
    memcpy(e + 4, &hsize, 4);
    memcpy(e + 8, &psize, 8);
    if (flags & 0xa000)
        memcpy(e + 0x10, &clen, 4);
    memcpy(e + 0x1c, &arch, 4);
    memcpy(e + 0x28, &flags, 8);
    if (flags & 0xa000)
        memcpy(e + 0x38, &ulen, 8);
    memcpy(e + hsize, payload, clen);
    return 16 + body;
}

static int parse_rc(const void *p, size_t n)
{
    cr_image_t *img = NULL;
    int rc = cr_image_parse(p, n, &img);

    cr_image_free(img);
    return rc;
}

/* LZ4 and zstd payloads compressed here, plus lies about their sizes. */
static void test_handmade_containers(void)
{
    blob_t ptx = load("small.ptx"), cubin = load("small.cubin");
    size_t cap = 16 + 0x40 + LZ4_compressBound((int)ptx.size) + ZSTD_compressBound(cubin.size) +
                 ptx.size + cubin.size + 64;
    uint8_t *z = malloc(cap), *c = malloc(cap);
    int zlen = LZ4_compress_default((const char *)ptx.data, (char *)z, (int)ptx.size, (int)cap);
    size_t n;
    cr_image_t *img = NULL;

    CHECK(zlen > 0);
    n = build_container(c, 1, 75, 0x2011, z, (uint32_t)zlen, ptx.size);
    CHECK_EQ_INT(cr_image_parse(c, n, &img), 0);
    if (img) {
        CHECK_EQ_INT(img->entry_count, 1);
        CHECK_EQ_INT(img->entries[0].size, ptx.size);
        CHECK_EQ_MEM(img->entries[0].data, ptx.data, ptx.size);
        CHECK(cr_image_kernel(img, "small_kernel") != NULL);
        CHECK(cr_image_global(img, "small_init") != NULL);
    }
    cr_image_free(img);
    n = build_container(c, 1, 75, 0x2011, z, (uint32_t)zlen, ptx.size + 1);
    CHECK_EQ_INT(parse_rc(c, n), CR_ECORRUPT);
    n = build_container(c, 1, 75, 0x2011, z, (uint32_t)zlen, ptx.size - 1);
    CHECK_EQ_INT(parse_rc(c, n), CR_ECORRUPT);
    n = build_container(c, 1, 75, 0xa011, z, (uint32_t)zlen, ptx.size);
    CHECK_EQ_INT(parse_rc(c, n), CR_ECORRUPT); /* both compressions */

    size_t zl = ZSTD_compress(z, cap, cubin.data, cubin.size, 3);
    CHECK(!ZSTD_isError(zl));
    n = build_container(c, 2, 75, 0x8011, z, (uint32_t)zl, cubin.size);
    img = NULL;
    CHECK_EQ_INT(cr_image_parse(c, n, &img), 0);
    if (img) {
        CHECK_EQ_INT(img->entries[0].size, cubin.size);
        CHECK_EQ_MEM(img->entries[0].data, cubin.data, cubin.size);
        CHECK(cr_image_kernel(img, "small_kernel") != NULL);
    }
    cr_image_free(img);
    n = build_container(c, 2, 75, 0x8011, z, (uint32_t)zl, cubin.size + 8);
    CHECK_EQ_INT(parse_rc(c, n), CR_ECORRUPT);
    n = build_container(c, 2, 75, 0x8011, z, (uint32_t)zl, (uint64_t)CR_IMAGE_MAX_SIZE + 1);
    CHECK_EQ_INT(parse_rc(c, n), CR_ETOOBIG);
    n = build_container(c, 2, 75, 0x8011, cubin.data, 256, cubin.size); /* not zstd */
    CHECK_EQ_INT(parse_rc(c, n), CR_ECORRUPT);
    n = build_container(c, 2, 75, 0x2011, cubin.data, 256, 1 << 20); /* LZ4 ratio lie */
    CHECK_EQ_INT(parse_rc(c, n), CR_ECORRUPT);

    /* Entries of other kinds are skipped. */
    n = build_container(c, 4, 75, 0x11, cubin.data, 64, 0);
    img = NULL;
    CHECK_EQ_INT(cr_image_parse(c, n, &img), 0);
    if (img)
        CHECK_EQ_INT(img->entry_count, 0);
    cr_image_free(img);

    free(z);
    free(c);
    free(ptx.data);
    free(cubin.data);
}

/* Checks that every entry of a fixture's container has the compression flag. */
static void check_entry_flags(const char *name, uint64_t flag, int all)
{
    blob_t b = load(name);
    raw_entry_t e[16];
    int n = raw_entries(b.data, e, 16), with = 0;

    for (int i = 0; i < n; i++)
        with += (e[i].flags & flag) != 0;
    CHECK(n > 0);
    CHECK(all ? with == n : with > 0);
    if (all ? with != n : with == 0)
        fprintf(stderr, "%s: %d of %d entries with flag 0x%llx\n", name, with, n,
                (unsigned long long)flag);
    free(b.data);
}

/* The entry of this kind and arch, or NULL. */
static const cr_image_entry_t *find_entry(const cr_image_t *img, cr_image_kind_t kind,
                                          unsigned arch)
{
    for (uint32_t i = 0; i < img->entry_count; i++)
        if (img->entries[i].kind == kind && img->entries[i].arch == arch)
            return &img->entries[i];
    return NULL;
}

/* Decompressed entries equal the stored ones of the same compile (in any order: fatbinary
 * puts compressed PTX first). */
static void check_same_entries(const char *a_name, const char *b_name)
{
    cr_image_t *a = parse_fixture(a_name), *b = parse_fixture(b_name);

    if (a && b) {
        CHECK_EQ_INT(a->entry_count, b->entry_count);
        for (uint32_t i = 0; i < a->entry_count; i++) {
            const cr_image_entry_t *x = &a->entries[i];
            const cr_image_entry_t *y = find_entry(b, x->kind, x->arch);
            CHECK(y != NULL);
            if (!y)
                continue;
            CHECK_EQ_INT(x->size, y->size);
            if (x->size == y->size)
                CHECK_EQ_MEM(x->data, y->data, x->size);
        }
    }
    cr_image_free(a);
    cr_image_free(b);
}

static void test_compressed(void)
{
    cr_image_t *img;

    /* nvcc's default: the cubin stored, the PTX zstd-compressed. */
    check_entry_flags("default.fatbin", 0x8000, 0);
    check_entry_flags("zstd.fatbin", 0x8000, 1);
    check_entry_flags("lz4.fatbin", 0x2000, 1);
    check_entry_flags("small_lz4.fatbin", 0x2000, 1);

    img = parse_fixture("default.fatbin");
    if (img) {
        CHECK_EQ_INT(img->entry_count, 2);
        for (uint32_t i = 0; i < img->entry_count; i++) {
            const cr_image_entry_t *e = &img->entries[i];
            CHECK_EQ_INT(e->arch, 75);
            if (e->kind == CR_IMAGE_PTX) {
                CHECK(strstr((const char *)e->data, ".version") != NULL);
                CHECK_EQ_INT(strlen((const char *)e->data), e->size);
            } else {
                CHECK(e->size >= 4 && memcmp(e->data, "\177ELF", 4) == 0);
            }
        }
    }
    cr_image_free(img);

    img = parse_fixture("zstd.fatbin");
    if (img)
        CHECK_EQ_INT(img->entry_count, 4);
    check_all(img, 1, "zstd.fatbin");
    cr_image_free(img);

    check_fixture("lz4.fatbin", 1);
    check_same_entries("lz4.fatbin", "plain.fatbin");
    check_same_entries("default.fatbin", "plain.fatbin");
    test_handmade_containers();
}

/* ---- select ---- */

static void check_select(const cr_image_t *img, unsigned sm, cr_image_kind_t kind, unsigned arch)
{
    const cr_image_entry_t *e = cr_image_select(img, sm);

    if (!arch) {
        CHECK(e == NULL);
        return;
    }
    CHECK(e != NULL);
    if (!e)
        return;
    if (e->kind != kind || e->arch != arch)
        fprintf(stderr, "select(%u) gave kind %d arch %u, expected kind %d arch %u\n", sm, e->kind,
                e->arch, kind, arch);
    CHECK(e->kind == kind && e->arch == arch);
}

/* sm_90a runs only on sm_90; compute_100f JITs only within major version 10. */
static void test_select_specific(void)
{
    static const char ptx90a[] = ".version 8.0\n.target sm_90a\n.address_size 64\n";
    cr_image_t *img = parse_fixture("archspecific.fatbin");
    const cr_image_entry_t *e;

    if (img) {
        check_select(img, 90, CR_IMAGE_ELF, 90);
        e = cr_image_select(img, 90);
        CHECK(e && e->arch_suffix == 'a');
        check_select(img, 100, CR_IMAGE_PTX, 100);
        e = cr_image_select(img, 103);
        CHECK(e && e->kind == CR_IMAGE_PTX && e->arch == 100 && e->arch_suffix == 'f');
        check_select(img, 120, CR_IMAGE_PTX, 90);
        e = cr_image_select(img, 120);
        CHECK(e && e->arch_suffix == 0);
        check_select(img, 89, 0, 0);
    }
    check_all(img, 1, "archspecific.fatbin");
    cr_image_free(img);

    img = parse_or_null(ptx90a, sizeof ptx90a, "ptx90a");
    if (img) {
        CHECK(img->entries[0].arch == 90 && img->entries[0].arch_suffix == 'a');
        check_select(img, 90, CR_IMAGE_PTX, 90);
        check_select(img, 100, 0, 0);
    }
    cr_image_free(img);
}

static void test_select(void)
{
    cr_image_t *img = parse_fixture("default.fatbin");

    if (img) {
        check_select(img, 75, CR_IMAGE_ELF, 75);
        check_select(img, 80, CR_IMAGE_PTX, 75); /* sm_75 SASS does not run on sm_80 */
        check_select(img, 90, CR_IMAGE_PTX, 75); /* ... nor on sm_90: PTX is JIT-compiled */
        check_select(img, 70, 0, 0);
    }
    cr_image_free(img);

    img = parse_fixture("zstd.fatbin"); /* sm_75, sm_80, sm_86 SASS + compute_80 PTX */
    if (img) {
        check_select(img, 75, CR_IMAGE_ELF, 75);
        check_select(img, 80, CR_IMAGE_ELF, 80);
        check_select(img, 86, CR_IMAGE_ELF, 86);
        check_select(img, 89, CR_IMAGE_ELF, 86);
        check_select(img, 90, CR_IMAGE_PTX, 80);
        check_select(img, 120, CR_IMAGE_PTX, 80);
        check_select(img, 70, 0, 0);
    }
    cr_image_free(img);

    img = parse_fixture("sm90.fatbin");
    if (img) {
        check_select(img, 90, CR_IMAGE_ELF, 90);
        check_select(img, 100, CR_IMAGE_PTX, 90);
        check_select(img, 89, 0, 0);
    }
    cr_image_free(img);

    img = parse_fixture("sm75.cubin");
    if (img) {
        check_select(img, 75, CR_IMAGE_ELF, 75);
        check_select(img, 90, 0, 0);
    }
    cr_image_free(img);
    CHECK(cr_image_select(NULL, 90) == NULL);
    test_select_specific();
}

/* ---- the fatbin embedded in a host executable ---- */

static void test_executable(void)
{
    blob_t app = load("app");
    size_t off = 0, len = 0, pos = 0, seg_len = 0, starts[8];
    int count = 0;
    uint32_t magic = 0;
    cr_image_t *img;

    /* The host stub registers wrappers (.nvFatBinSegment) that point into .nv_fatbin. */
    CHECK(find_section(app.data, app.size, ".nvFatBinSegment", &pos, &seg_len) && seg_len >= 4);
    if (seg_len >= 4)
        memcpy(&magic, app.data + pos, 4);
    CHECK_EQ_U64(magic, CR_FATBIN_WRAPPER_MAGIC);
    CHECK(find_section(app.data, app.size, ".nv_fatbin", &off, &len));
    if (!len)
        goto out;

    /* Containers back to back, possibly with zero padding between them. */
    for (pos = 0; pos + 16 <= len && count < 8;) {
        uint64_t body;
        memcpy(&magic, app.data + off + pos, 4);
        if (magic != CR_FATBIN_MAGIC) {
            pos += 8;
            continue;
        }
        memcpy(&body, app.data + off + pos + 8, 8);
        starts[count++] = pos;
        pos += 16 + body;
    }
    CHECK_EQ_INT(count, 2);
    if (count != 2)
        goto out;

    /* The first is the link stub: a cubin without kernels. */
    img = parse_or_null(app.data + off, starts[1], "container 1");
    if (img) {
        CHECK_EQ_INT(img->kernel_count, 0);
        CHECK(img->entry_count >= 1);
    }
    cr_image_free(img);

    /* The second has the sm_75 cubin and the zstd-compressed PTX. */
    raw_entry_t e[8];
    int n = raw_entries(app.data + off + starts[1], e, 8), ptx_zstd = 0;
    for (int i = 0; i < n; i++)
        ptx_zstd += e[i].kind == 1 && (e[i].flags & 0x8000);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(ptx_zstd, 1);
    img = parse_or_null(app.data + off + starts[1], len - starts[1], "container 2");
    if (img) {
        CHECK_EQ_INT(img->entry_count, 2);
        check_select(img, 75, CR_IMAGE_ELF, 75);
        check_select(img, 90, CR_IMAGE_PTX, 75);
    }
    check_all(img, 1, "the executable's second container");
    cr_image_free(img);

    /* The whole section at once: the union of both. */
    img = parse_or_null(app.data + off, len, ".nv_fatbin");
    check_all(img, 1, "the executable's .nv_fatbin");
    cr_image_free(img);
out:
    free(app.data);
}

/* ---- hostile input ---- */

static int sane_rc(int rc)
{
    return rc == 0 || rc == CR_ECORRUPT || rc == CR_ETOOBIG || rc == CR_ENOMEM;
}

/* Offset of the first attribute with this code in .nv.info.<kernel> of a cubin. */
static size_t find_attr(const blob_t *b, const char *section, uint8_t code, int nth)
{
    size_t off, len, pos;

    if (!find_section(b->data, b->size, section, &off, &len))
        return 0;
    for (pos = off; pos + 4 <= off + len;) {
        uint16_t v;
        memcpy(&v, b->data + pos + 2, 2);
        if (b->data[pos + 1] == code && nth-- == 0)
            return pos;
        pos += 4 + (b->data[pos] == 4 ? v : 0);
    }
    return 0;
}

static void test_hostile_elf(void)
{
    blob_t b = load("sm90.cubin");
    uint8_t *m = malloc(b.size);
    size_t a0 = find_attr(&b, ".nv.info.vecAdd", 0x17, 0);
    size_t a1 = find_attr(&b, ".nv.info.vecAdd", 0x17, 1);
    Elf64_Ehdr eh;
    cr_image_t *img = NULL;

    CHECK(a0 && a1);
    memcpy(&eh, b.data, sizeof eh);

    memcpy(m, b.data, b.size); /* attribute size past the section */
    m[a0 + 2] = 0xff;
    m[a0 + 3] = 0xff;
    CHECK_EQ_INT(parse_rc(m, b.size), CR_ECORRUPT);

    memcpy(m, b.data, b.size); /* two parameters with the same ordinal */
    memcpy(m + a1 + 8, m + a0 + 8, 2);
    CHECK_EQ_INT(parse_rc(m, b.size), CR_ECORRUPT);

    memcpy(m, b.data, b.size); /* parameter beyond the declared buffer size */
    m[a0 + 10] = 0xff;
    CHECK_EQ_INT(parse_rc(m, b.size), CR_ECORRUPT);

    memcpy(m, b.data, b.size); /* section header table beyond the image */
    uint64_t far = b.size;
    memcpy(m + offsetof(Elf64_Ehdr, e_shoff), &far, 8);
    CHECK_EQ_INT(parse_rc(m, b.size), CR_ECORRUPT);

    memcpy(m, b.data, b.size); /* a section beyond the image */
    uint64_t huge = UINT64_MAX - 4;
    memcpy(m + eh.e_shoff + 2 * eh.e_shentsize + offsetof(Elf64_Shdr, sh_offset), &huge, 8);
    CHECK_EQ_INT(parse_rc(m, b.size), CR_ECORRUPT);

    memcpy(m, b.data, b.size); /* names unreadable: no kernel attributes, but no crash */
    uint16_t bad = 0xfff0;
    memcpy(m + offsetof(Elf64_Ehdr, e_shstrndx), &bad, 2);
    CHECK(sane_rc(cr_image_parse(m, b.size, &img)));
    cr_image_free(img);

    CHECK_EQ_INT(parse_rc(b.data, 63), CR_ECORRUPT);
    free(m);
    free(b.data);
}

static void test_hostile(void)
{
    uint8_t c[256] = {0};
    uint32_t magic = CR_FATBIN_MAGIC, wmagic = CR_FATBIN_WRAPPER_MAGIC;
    uint64_t body = 0x40;
    cr_image_t *img = (cr_image_t *)1;

    CHECK_EQ_INT(cr_image_parse(NULL, 10, &img), CR_EINVAL);
    CHECK_EQ_INT(cr_image_parse(c, 0, &img), CR_EINVAL);
    memcpy(c, &wmagic, 4);
    CHECK_EQ_INT(cr_image_parse(c, sizeof c, &img), CR_ECORRUPT);
    CHECK(img == NULL);

    memcpy(c, &magic, 4); /* an entry whose header size is 0: must not loop */
    c[6] = 16;
    memcpy(c + 8, &body, 8);
    CHECK_EQ_INT(parse_rc(c, 16 + 0x40), CR_ECORRUPT);
    body = 1000; /* container larger than the buffer */
    memcpy(c + 8, &body, 8);
    CHECK_EQ_INT(parse_rc(c, sizeof c), CR_ECORRUPT);
    body = 0; /* empty container, then garbage */
    memcpy(c + 8, &body, 8);
    CHECK_EQ_INT(parse_rc(c, 16), 0);
    c[20] = 1;
    CHECK_EQ_INT(parse_rc(c, 24), CR_ECORRUPT);

    const char *huge = ".version 8.0\n.global .b8 x[3000000000] = {1};";
    CHECK_EQ_INT(parse_rc(huge, strlen(huge)), CR_ETOOBIG);
    huge = ".version 8.0\n.global .b8 x[1000000000000000];";
    CHECK_EQ_INT(parse_rc(huge, strlen(huge)), CR_ETOOBIG);

    /* Deep nesting is plain counting, not recursion. */
    size_t deep = 200000;
    char *d = malloc(deep * 2 + 32);
    strcpy(d, ".version 8.0\n");
    size_t l = strlen(d);
    memset(d + l, '{', deep);
    memset(d + l + deep, '}', deep);
    d[l + 2 * deep] = 0;
    CHECK_EQ_INT(parse_rc(d, strlen(d)), 0);
    d[l + 2 * deep - 1] = ' ';
    CHECK_EQ_INT(parse_rc(d, strlen(d)), CR_ECORRUPT);
    free(d);

    test_hostile_elf();
}

/* ---- mutation ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Touches everything a successful parse returned, so that ASan sees any bad pointer, and
 * checks the invariants a consumer relies on. */
static void check_result(const cr_image_t *img)
{
    unsigned sum = 0;

    for (uint32_t i = 0; i < img->entry_count; i++) {
        const cr_image_entry_t *e = &img->entries[i];
        for (size_t j = 0; j < e->size; j++)
            sum += e->data[j];
        CHECK(e->kind == CR_IMAGE_ELF || e->kind == CR_IMAGE_PTX);
    }
    for (uint32_t i = 0; i < img->kernel_count; i++) {
        const cr_kernel_info_t *k = &img->kernels[i];
        CHECK(k->name && cr_image_kernel(img, k->name) == k);
        for (uint32_t j = 0; j < k->param_count; j++)
            CHECK((uint64_t)k->params[j].offset + k->params[j].size <= k->param_size);
    }
    for (uint32_t i = 0; i < img->global_count; i++) {
        const cr_global_info_t *g = &img->globals[i];
        CHECK(g->name && cr_image_global(img, g->name) == g);
        for (uint64_t j = 0; g->init && j < g->size; j++)
            sum += g->init[j];
    }
    (void)sum;
}

typedef struct {
    unsigned ok, corrupt, other;
} tally_t;

static void parse_mutant(const uint8_t *p, size_t n, tally_t *t)
{
    uint8_t *copy = malloc(n ? n : 1); /* exactly n bytes: ASan flags any over-read */
    cr_image_t *img = NULL;
    int rc;

    memcpy(copy, p, n);
    rc = cr_image_parse(copy, n, &img);
    CHECK(sane_rc(rc) || (rc == CR_EINVAL && n == 0));
    CHECK((rc == 0) == (img != NULL));
    if (img)
        check_result(img);
    t->ok += rc == 0;
    t->corrupt += rc == CR_ECORRUPT;
    t->other += rc != 0 && rc != CR_ECORRUPT;
    cr_image_free(img);
    free(copy);
}

/* Every prefix of the image. Binary images must reject each one. */
static void truncations(const char *name, int binary)
{
    blob_t b = load(name);
    tally_t t = {0};

    for (size_t n = 0; n < b.size; n++) {
        unsigned before = t.ok;
        parse_mutant(b.data, n, &t);
        if (binary && t.ok != before) {
            fprintf(stderr, "%s truncated to %zu bytes parsed\n", name, n);
            CHECK(0);
        }
    }
    fprintf(stderr, "%s: %zu truncations, %u parsed, %u corrupt, %u other\n", name, b.size, t.ok,
            t.corrupt, t.other);
    free(b.data);
}

/* Where to flip: anywhere, the first bytes (headers), or the last quarter (ELF section
 * headers live at the end). */
static size_t pick_offset(size_t size)
{
    switch (rng() % 4) {
    case 0:
        return rng() % (size < 256 ? size : 256);
    case 1:
        return size - 1 - rng() % (size / 4 + 1);
    default:
        return rng() % size;
    }
}

/* New byte: extremes, a nearby value, PTX punctuation and digits, or anything. */
static uint8_t pick_byte(uint8_t old)
{
    static const char punct[] = "{}()[];,=.-+0123456789 \n\"/*";

    switch (rng() % 5) {
    case 0:
        return 0;
    case 1:
        return 0xff;
    case 2:
        return (uint8_t)(old + 1 + rng() % 3);
    case 3:
        return (uint8_t)punct[rng() % (sizeof punct - 1)];
    default:
        return (uint8_t)rng();
    }
}

static void mutations(const char *name, unsigned rounds)
{
    blob_t b = load(name);
    uint8_t *m = malloc(b.size);
    tally_t t = {0};

    for (unsigned r = 0; r < rounds; r++) {
        unsigned flips = 1 + rng() % 4;
        memcpy(m, b.data, b.size);
        for (unsigned f = 0; f < flips; f++) {
            size_t at = pick_offset(b.size);
            m[at] = pick_byte(m[at]);
        }
        parse_mutant(m, b.size, &t);
    }
    fprintf(stderr, "%s: %u mutants, %u parsed, %u corrupt, %u other\n", name, rounds, t.ok,
            t.corrupt, t.other);
    free(m);
    free(b.data);
}

/* Deterministic by default; CR_MUTATE_SEED and CR_MUTATE_ROUNDS allow longer runs by hand. */
static void test_mutate(void)
{
    static const char *const images[] = {
        "small.cubin",    "small.fatbin", "small_lz4.fatbin", "small.ptx",       "sm90.cubin",
        "default.fatbin", "zstd.fatbin",  "default.ptx",      "handwritten.ptx", "rdc.cubin"};
    const char *seed = getenv("CR_MUTATE_SEED"), *rounds = getenv("CR_MUTATE_ROUNDS");
    unsigned n = rounds ? (unsigned)strtoul(rounds, NULL, 0) : 3000;

    if (seed)
        rng_state = strtoull(seed, NULL, 0) | 1;

    truncations("small.cubin", 1);
    truncations("small.fatbin", 1);
    truncations("small_lz4.fatbin", 1);
    truncations("small.ptx", 0);
    for (size_t i = 0; i < sizeof images / sizeof images[0]; i++)
        mutations(images[i], n);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } groups[] = {
        {"measure", test_measure},       {"elf", test_elf},       {"ptx", test_ptx},
        {"compressed", test_compressed}, {"select", test_select}, {"executable", test_executable},
        {"hostile", test_hostile},       {"mutate", test_mutate},
    };
    int ran = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s <fixture-dir> [group]\n", argv[0]);
        return 2;
    }
    fix_dir = argv[1];
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        if (argc > 2 && strcmp(argv[2], groups[i].name) != 0)
            continue;
        groups[i].fn();
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "no group %s\n", argv[2]);
        return 2;
    }
    CHECK_DONE();
}
