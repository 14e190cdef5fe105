/* One layout for both PTX readers. The image parser (cr_image_parse: the parameter offsets
 * the client packs, the variables the emulated device creates) and the PTX interpreter
 * (cr__parse: the offsets a kernel reads its parameters at, the variables it falls back on)
 * must see the same kernels and variables in a PTX text. Checked on kernels/layout.ptx, whose
 * awkward alignments are also checked against hand-computed values, against the cubin ptxas
 * made of it, and by a launch that echoes its parameters; on declarations ptxas would not
 * take as written; on every nvcc-built fixture; and both must refuse the same bad ones.
 *
 * usage: test_ptx_layout <fixture dir> <kernels source dir> [more PTX files...] */
#include "error.h"
#include "fatbin.h"
#include "internal.h"
#include "ptx_test.h"

/* One comparison of a value as two readers see it: counted, and printed with where it is
 * when they differ. */
static void agree(const char *what, const char *name, const char *field, uint64_t a, uint64_t b)
{
    check_count++;
    if (a != b) {
        check_failures++;
        fprintf(stderr, "%s: %s: %s is %llu, and %llu for the other reader\n", what, name, field,
                (unsigned long long)a, (unsigned long long)b);
    }
}

static cr_image_t *image_of(const char *what, const void *data, size_t size)
{
    cr_image_t *img = NULL;
    int rc = cr_image_parse(data, size, &img);
    if (rc)
        fprintf(stderr, "%s: cr_image_parse failed (%d)\n", what, rc);
    CHECK_EQ_INT(rc, 0);
    return rc ? NULL : img;
}

static int ir_of(const char *what, const char *text, size_t len, cr__ir_t *ir)
{
    char err[256];
    memset(ir, 0, sizeof *ir);
    int rc = cr__parse(text, len, ir, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s: cr__parse failed (%d): %s\n", what, rc, err);
    CHECK_EQ_INT(rc, 0);
    return rc;
}

static void agree_kernel(const char *what, const cr_kernel_info_t *k, const cr__ir_t *ir)
{
    int f = cr__ir_find_func(ir, k->name);
    check_count++;
    if (f < 0 || !ir->funcs[f].is_entry || !ir->funcs[f].has_body) {
        check_failures++;
        fprintf(stderr, "%s: kernel %s is not one for the interpreter\n", what, k->name);
        return;
    }
    const cr__ir_func_t *fn = &ir->funcs[f];
    agree(what, k->name, "param_count", k->param_count, fn->param_count);
    agree(what, k->name, "param_size", k->param_size, fn->param_size);
    for (uint32_t i = 0; i < k->param_count && i < fn->param_count; i++) {
        const cr__ir_var_t *v = &ir->vars[fn->param_first + i];
        agree(what, k->name, "a parameter's offset", k->params[i].offset, v->param_offset);
        agree(what, k->name, "a parameter's size", k->params[i].size, v->size);
    }
}

static const cr__ir_var_t *module_var(const cr__ir_t *ir, const char *name)
{
    for (uint32_t i = 0; i < ir->nvars; i++) {
        const cr__ir_var_t *v = &ir->vars[i];
        if (v->func < 0 && !v->is_extern &&
            (v->space == CR__SP_GLOBAL || v->space == CR__SP_CONST) &&
            strcmp(cr__ir_str(ir, v->name), name) == 0)
            return v;
    }
    return NULL;
}

/* Initial bytes, where NULL means zeros for both. */
static int same_bytes(const uint8_t *a, const uint8_t *b, uint64_t size)
{
    for (uint64_t i = 0; i < size; i++)
        if ((a ? a[i] : 0) != (b ? b[i] : 0))
            return 0;
    return 1;
}

static void agree_global(const char *what, const cr_global_info_t *g, const cr__ir_t *ir)
{
    const cr__ir_var_t *v = module_var(ir, g->name);
    check_count++;
    if (!v) {
        check_failures++;
        fprintf(stderr, "%s: variable %s is not one for the interpreter\n", what, g->name);
        return;
    }
    agree(what, g->name, "size", g->size, v->size);
    agree(what, g->name, "is_const", (uint64_t)g->is_const, v->space == CR__SP_CONST);
    if (g->size == v->size)
        agree(what, g->name, "initial bytes equal", 1,
              (uint64_t)same_bytes(g->init, v->init, g->size));
}

/* Every kernel and variable of the text, as both readers see it. */
static void check_text(const char *what, const char *text, size_t len)
{
    cr__ir_t ir;
    cr_image_t *img = image_of(what, text, len + 1); /* a PTX image ends with its NUL */
    if (!img)
        return;
    if (ir_of(what, text, len, &ir) == 0) {
        uint32_t entries = 0;
        for (uint32_t i = 0; i < ir.nfuncs; i++)
            entries += ir.funcs[i].is_entry && ir.funcs[i].has_body;
        agree(what, "the module", "kernel count", img->kernel_count, entries);
        for (uint32_t i = 0; i < img->kernel_count; i++)
            agree_kernel(what, &img->kernels[i], &ir);
        for (uint32_t i = 0; i < img->global_count; i++)
            agree_global(what, &img->globals[i], &ir);
    }
    cr__ir_free(&ir);
    cr_image_free(img);
}

/* ---- kernels/layout.ptx against values computed by hand ---- */

typedef struct {
    const char *name;
    uint32_t count, size;
    uint32_t offset[12], bytes[12];
} layout_t;

static const layout_t layouts[] = {
    {"awkward",
     11,
     81,
     {0, 8, 16, 36, 38, 40, 48, 52, 56, 64, 80},
     {1, 8, 20, 2, 1, 8, 3, 4, 6, 16, 1}},
    {"echo", 8, 57, {0, 8, 16, 36, 40, 48, 52, 56}, {8, 1, 20, 2, 8, 3, 4, 1}},
    {"none", 0, 0, {0}, {0}},
    {"one", 1, 1, {0}, {1}},
};

static void check_layouts(const char *what, const cr_image_t *img, const layout_t *wants, size_t n)
{
    for (size_t l = 0; l < n; l++) {
        const layout_t *want = &wants[l];
        const cr_kernel_info_t *k = cr_image_kernel(img, want->name);
        CHECK(k != NULL);
        if (!k)
            continue;
        CHECK_EQ_INT(k->param_count, want->count);
        CHECK_EQ_INT(k->param_size, want->size);
        for (uint32_t i = 0; i < k->param_count && i < want->count; i++) {
            check_count++;
            if (k->params[i].offset != want->offset[i] || k->params[i].size != want->bytes[i]) {
                check_failures++;
                fprintf(stderr, "%s: %s parameter %u at %u (%u bytes), by hand %u (%u)\n", what,
                        want->name, i, k->params[i].offset, k->params[i].size, want->offset[i],
                        want->bytes[i]);
            }
        }
    }
}

static void check_global(const cr_image_t *img, const char *name, uint64_t size, const void *init)
{
    const cr_global_info_t *g = cr_image_global(img, name);
    CHECK(g != NULL);
    if (!g)
        return;
    CHECK_EQ_U64(g->size, size);
    CHECK((g->init == NULL) == (init == NULL));
    if (g->init && init)
        CHECK(memcmp(g->init, init, size) == 0);
}

static void check_globals(const cr_image_t *img, const cr__ir_t *ir)
{
    static const uint32_t scalar = 7, rows[6] = {1, 0, 0, 2, 3, 0};
    static const uint8_t bytes[10] = {1, 2, 3};
    static const float vec[8] = {1, 2, 0, 0, 3, 4, 5, 6};
    static const uint16_t neg[2] = {0xffff, 0x7fff};
    static const double dbl = 1.5;
    static const float flt = 1.5f;
    check_global(img, "g_scalar", 4, &scalar);
    check_global(img, "g_bytes", 10, bytes);
    check_global(img, "g_vec", 32, vec);
    check_global(img, "g_rows", 24, rows);
    check_global(img, "g_neg", 4, neg);
    check_global(img, "g_dbl", 8, &dbl);
    check_global(img, "g_flt", 4, &flt);
    check_global(img, "g_ptr", 16, NULL); /* addresses: the loader's */
    /* the interpreter keeps the addresses for itself */
    const cr__ir_var_t *v = module_var(ir, "g_ptr");
    CHECK(v && v->reloc_count == 2);
    if (v && v->reloc_count == 2) {
        const cr__ir_reloc_t *r = &ir->relocs[v->reloc_first];
        CHECK(r[0].offset == 0 && r[0].size == 8 && !r[0].generic && r[0].addend == 0 &&
              strcmp(cr__ir_str(ir, r[0].name), "g_scalar") == 0);
        CHECK(r[1].offset == 8 && r[1].size == 8 && r[1].generic && r[1].addend == 4 &&
              strcmp(cr__ir_str(ir, r[1].name), "g_bytes") == 0);
    }
}

/* Launches echo with a buffer packed at the image parser's offsets; the kernel's copies show
 * where the interpreter read each parameter. */
static void check_echo(const cr_image_t *img, const char *text, size_t len)
{
    const cr_kernel_info_t *k = cr_image_kernel(img, "echo");
    CHECK(k && k->param_count == 8);
    if (!k || k->param_count != 8)
        return;
    uint8_t *out = dev_alloc(64);
    uint64_t out_addr = (uint64_t)(uintptr_t)out, h = 0x1122334455667788ull;
    uint8_t a = 0xa5, c[20], i[3] = {7, 8, 9}, n = 0x5a;
    uint16_t d = 0xbeef;
    float j = -2.5f;
    for (int b = 0; b < 20; b++)
        c[b] = (uint8_t)(0x40 + b);
    const void *values[8] = {&out_addr, &a, c, &d, &h, i, &j, &n};
    uint8_t buf[128] = {0};
    for (uint32_t p = 0; p < 8; p++)
        memcpy(buf + k->params[p].offset, values[p], k->params[p].size);

    cr_ptx_module_t *m = NULL;
    char err[256];
    CHECK_EQ_INT(cr_ptx_module_load(text, len, &m, err, sizeof err), 0);
    if (m) {
        cr_ptx_launch_t l = {{1, 1, 1}, {1, 1, 1}, 0, buf, k->param_size};
        cr_ptx_fault_t fault;
        CHECK_EQ_INT(cr_ptx_launch(m, "echo", &l, &dev_env, &fault), 0);
        uint32_t c16, c_out;
        uint16_t d_out;
        uint64_t h_out;
        float j_out;
        memcpy(&c16, c + 16, 4);
        CHECK_EQ_INT(out[0], a);
        memcpy(&c_out, out + 4, 4);
        CHECK_EQ_U64(c_out, c16);
        memcpy(&d_out, out + 8, 2);
        CHECK_EQ_INT(d_out, d);
        memcpy(&h_out, out + 16, 8);
        CHECK_EQ_U64(h_out, h);
        CHECK_EQ_INT(out[24], i[2]);
        memcpy(&j_out, out + 28, 4);
        CHECK(j_out == j);
        CHECK_EQ_INT(out[32], n);
        cr_ptx_module_free(m);
    }
    dev_free(out);
}

static void test_layout_ptx(const char *fixtures, const char *kernels)
{
    char path[1024];
    size_t len, cubin_len;
    snprintf(path, sizeof path, "%s/layout.ptx", kernels);
    char *text = read_text(path, &len);
    snprintf(path, sizeof path, "%s/layout.cubin", fixtures);
    char *cubin = read_text(path, &cubin_len);

    check_text("layout.ptx", text, len);
    cr_image_t *img = image_of("layout.ptx", text, len + 1);
    cr_image_t *elf = image_of("layout.cubin", cubin, cubin_len);
    cr__ir_t ir;
    memset(&ir, 0, sizeof ir);
    if (img && ir_of("layout.ptx", text, len, &ir) == 0) {
        check_layouts("layout.ptx", img, layouts, sizeof layouts / sizeof layouts[0]);
        check_globals(img, &ir);
        check_echo(img, text, len);
        const cr_kernel_info_t *k = cr_image_kernel(img, "awkward");
        CHECK(k && k->max_threads_per_block == 128);
    }
    cr__ir_free(&ir);
    if (elf) {
        /* ptxas agrees with the hand */
        check_layouts("layout.cubin", elf, layouts, sizeof layouts / sizeof layouts[0]);
        /* and lays the variables out, initialisers included, as the PTX readers do */
        for (uint32_t i = 0; img && i < elf->global_count; i++) {
            const cr_global_info_t *e = &elf->globals[i], *p = cr_image_global(img, e->name);
            CHECK(p && p->size == e->size);
            if (p && p->size == e->size)
                agree("layout.cubin", e->name, "initial bytes equal", 1,
                      (uint64_t)same_bytes(e->init, p->init, e->size));
        }
    }
    cr_image_free(elf);
    cr_image_free(img);
    free(cubin);
    free(text);
}

/* ---- what ptxas refuses or reads otherwise ---- */

/* Both readers must agree on declarations ptxas would not assemble as they stand (vector
 * kernel parameters, integers for floats, a flat list for a 2-D array) or lays out otherwise
 * (ptxas packs a short inner list's elements back to back, and widens 0f bits for a 64-bit
 * scalar): the image parser's reading is the one both use. */
static const char odd_ptx[] =
    ".version 8.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".global .align 8 .f64 d[2] = {1.0, -2.5};\n"
    ".const .align 4 .f32 c[4] = {1, 2, 3.0, -0f40800000};\n"
    ".global .align 4 .b8 unsized[] = {1, 2, 3};\n"
    ".global .align 4 .u32 m[2][2] = {{1}, {3, 4}};\n"
    ".global .align 4 .u32 flat[2][2] = {1, 2, 3};\n"
    ".global .align 4 .u32 rows[][3] = {{1}, {2, 3}};\n"
    ".global .v2 .u16 v = {0x102, 0x304};\n"
    ".global .u32 a1 = 1, a2 = 2;\n"
    ".global .u64 addr = generic(d)+8;\n"
    ".global .texref tex;\n"
    ".global .attribute(.managed) .align 4 .u32 man = 3;\n"
    ".global .align 4 .b8 zeros[8] = {0, 0};\n"
    ".global .align 8 .b64 fbits = 0f3F800000;\n"
    ".global .align 8 .f64 fwide = 0f3F800000;\n"
    ".global .align 4 .b32 dbits = 1.5;\n"
    ".extern .global .align 4 .b8 ext[];\n"
    ".extern .shared .align 16 .b8 dyn[];\n"
    ".func (.param .b32 r) f(.param .b32 a)\n{\n\tret;\n}\n"
    ".visible .entry k(.param .u64 .ptr .global .align 16 p, .param .align 4 .b8 s[12],\n"
    "    .param .u16 h, .param .u64 .ptr.global.align 16 q, .param .u8 b,\n"
    "    .param .v4 .u32 vec, .param .u8 b2, .param .v2 .f64 w)\n"
    ".reqntid 32, 2\n"
    "{\n\tret;\n}\n";

static void test_odd(void)
{
    /* p 0, s 8 (12), h 20, q 24, b 32, vec 48 (16), b2 64, w 80 (16): 96 bytes */
    static const layout_t k = {
        "k", 8, 96, {0, 8, 20, 24, 32, 48, 64, 80}, {8, 12, 2, 8, 1, 16, 1, 16}};
    cr_image_t *img = image_of("odd", odd_ptx, sizeof odd_ptx);
    check_text("odd", odd_ptx, sizeof odd_ptx - 1);
    if (img)
        check_layouts("odd", img, &k, 1);
    cr_image_free(img);
}

/* Declarations that neither reader takes (and that must not crash either). */
static void test_both_refuse(void)
{
    static const char *const bad[] = {
        ".global .u32 x[][0] = {1};",
        ".global .u32 x[][1099511627776][1099511627776] = {1};",
        ".global .u32 x[2] = {1, 2, 3};",
        ".global .u32 x[2][2] = {{{{1}}}};",
        ".global .u64 x = generic(a)+0x;",
        ".global .u64 x = -a;",
        ".visible .entry k(.param .texref t) { ret; }",
        ".visible .entry k(.param .u32 a[]) { ret; }",
        ".visible .entry k(.param .align 3 .b8 a[4]) { ret; }",
        ".visible .entry k(.param .align 8192 .b8 a[4]) { ret; }",
        ".visible .entry k(.param .b8 a[4294967296]) { ret; }",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512], err[256];
        int n = snprintf(text, sizeof text, ".version 8.0\n.target sm_80\n.address_size 64\n%s\n",
                         bad[i]);
        cr_image_t *img = NULL;
        cr_ptx_module_t *m = NULL;
        int image_rc = cr_image_parse(text, (size_t)n + 1, &img);
        int interp_rc = cr_ptx_module_load(text, (size_t)n, &m, err, sizeof err);
        check_count++;
        if (image_rc == 0 || interp_rc == 0) {
            check_failures++;
            fprintf(stderr, "\"%s\": image parser %d, interpreter %d\n", bad[i], image_rc,
                    interp_rc);
        }
        cr_image_free(img);
        cr_ptx_module_free(m);
    }
}

/* ---- nvcc-built PTX ---- */

static void test_file(const char *path)
{
    size_t len;
    char *text = read_text(path, &len);
    check_text(path, text, len);
    free(text);
}

int main(int argc, char **argv)
{
    static const char *const fixtures[] = {"basic.ptx", "atomics.ptx", "warp.ptx",
                                           "math.ptx",  "printf.ptx",  "faults.ptx",
                                           "calls.ptx", "tensor.ptx",  "warp_sm90.ptx"};
    char path[1024];
    if (argc < 3) {
        fprintf(stderr, "usage: %s <fixture dir> <kernels source dir> [PTX files...]\n", argv[0]);
        return 2;
    }
    test_layout_ptx(argv[1], argv[2]);
    test_odd();
    test_both_refuse();
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", argv[1], fixtures[i]);
        test_file(path);
    }
    for (int i = 3; i < argc; i++)
        test_file(argv[i]);
    CHECK_DONE();
}
