/* PTX interpreter: single instructions against values worked out from the PTX ISA semantics.
 *
 * A micro-harness wraps each instruction text in a kernel: thread i loads case i's three inputs
 * (8 bytes each) into %h1-3 (16 bits), %r1-3 (32), %rd1-3 (64), %f1-3 and %fd1-3 (the same
 * bits as floats) and %p1-3 (nonzero), runs the instruction(s), and stores the output register
 * (%h4, %r4, %rd4, %f4, %fd4 or %p4) zero-extended to 64 bits. Each result is compared with the
 * expected bits; a failure prints the instruction and its inputs.
 * Also: faults (out of bounds, misaligned, trap, unknown instructions) with the CUresult a device
 * gives, memory forms (vectors, sign extension, shared, local, generic addresses). */
#include <math.h>

#include "ptx_test.h"

#define ANY 0xa11a11a11a11a11aull /* a result that is implementation-defined: not compared */

typedef struct {
    uint64_t a, b, c, want;
} case_t;

static const char *prologue =
    ".version 9.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry t(.param .u64 in, .param .u64 out)\n{\n"
    "  .reg .pred %p<8>;\n  .reg .b16 %h<8>;\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<8>;\n"
    "  .reg .f32 %f<8>;\n  .reg .f64 %fd<8>;\n  .reg .b64 %x<6>;\n"
    "  ld.param.u64 %x1, [in];\n  ld.param.u64 %x2, [out];\n"
    "  mov.u32 %r0, %tid.x;\n  mul.wide.u32 %x3, %r0, 24;\n  add.s64 %x1, %x1, %x3;\n"
    "  ld.global.u16 %h1, [%x1];\n  ld.global.u16 %h2, [%x1+8];\n  ld.global.u16 %h3, [%x1+16];\n"
    "  ld.global.u32 %r1, [%x1];\n  ld.global.u32 %r2, [%x1+8];\n  ld.global.u32 %r3, [%x1+16];\n"
    "  ld.global.u64 %rd1, [%x1];\n  ld.global.u64 %rd2, [%x1+8];\n  ld.global.u64 %rd3, "
    "[%x1+16];\n"
    "  mov.b32 %f1, %r1;\n  mov.b32 %f2, %r2;\n  mov.b32 %f3, %r3;\n"
    "  mov.b64 %fd1, %rd1;\n  mov.b64 %fd2, %rd2;\n  mov.b64 %fd3, %rd3;\n"
    "  setp.ne.u64 %p1, %rd1, 0;\n  setp.ne.u64 %p2, %rd2, 0;\n  setp.ne.u64 %p3, %rd3, 0;\n"
    "  mov.u16 %h4, 0;\n  mov.u32 %r4, 0;\n  mov.u64 %rd4, 0;\n  mov.f32 %f4, 0f00000000;\n"
    "  mov.f64 %fd4, 0d0000000000000000;\n  setp.ne.u32 %p4, 0, 0;\n"
    "  mul.wide.u32 %x3, %r0, 8;\n  add.s64 %x2, %x2, %x3;\n";

static const char *store(char kind)
{
    switch (kind) {
    case 'h':
        return "  cvt.u64.u16 %x4, %h4;\n  st.global.u64 [%x2], %x4;\n";
    case 'r':
        return "  cvt.u64.u32 %x4, %r4;\n  st.global.u64 [%x2], %x4;\n";
    case 'd':
        return "  st.global.u64 [%x2], %rd4;\n";
    case 'f':
        return "  mov.b32 %r7, %f4;\n  cvt.u64.u32 %x4, %r7;\n  st.global.u64 [%x2], %x4;\n";
    case 'D':
        return "  mov.b64 %x4, %fd4;\n  st.global.u64 [%x2], %x4;\n";
    default:
        return "  selp.u64 %x4, 1, 0, %p4;\n  st.global.u64 [%x2], %x4;\n";
    }
}

/* Runs `insn` for every case; `kind` names the output register. */
static void run_cases_at(const char *insn, char kind, const case_t *cases, int n, int line)
{
    char text[8192];
    snprintf(text, sizeof text, "%s  %s\n%s  ret;\n}\n", prologue, insn, store(kind));
    cr_ptx_module_t *m = load_text(text);
    CHECK(m != NULL);
    if (!m) {
        fprintf(stderr, "line %d: %s\n", line, insn);
        return;
    }
    uint64_t *in = dev_alloc((size_t)n * 24), *out = dev_alloc((size_t)n * 8);
    for (int i = 0; i < n; i++) {
        in[3 * i] = cases[i].a;
        in[3 * i + 1] = cases[i].b;
        in[3 * i + 2] = cases[i].c;
    }
    params_t p = {0};
    PARAM(&p, in);
    PARAM(&p, out);
    cr_ptx_fault_t f;
    int rc = launch(m, "t", 1, 1, (uint32_t)n, 1, 0, &p, &f);
    CHECK_EQ_INT(rc, 0);
    if (rc)
        fprintf(stderr, "line %d: %s: %s\n", line, insn, f.message);
    for (int i = 0; i < n && !rc; i++) {
        check_count++;
        if (cases[i].want != ANY && out[i] != cases[i].want) {
            check_failures++;
            fprintf(stderr,
                    "line %d: %s (a=0x%llx b=0x%llx c=0x%llx) gave 0x%llx, expected 0x%llx\n", line,
                    insn, (unsigned long long)cases[i].a, (unsigned long long)cases[i].b,
                    (unsigned long long)cases[i].c, (unsigned long long)out[i],
                    (unsigned long long)cases[i].want);
        }
    }
    dev_free(in);
    dev_free(out);
    cr_ptx_module_free(m);
}

#define RUN(insn, kind, ...)                                                                       \
    do {                                                                                           \
        const case_t cases_[] = {__VA_ARGS__};                                                     \
        run_cases_at(insn, kind, cases_, (int)(sizeof cases_ / sizeof cases_[0]), __LINE__);       \
    } while (0)

#define F(x) ((uint64_t)fbits(x))
#define D(x) (dbits(x))
#define S32(x) ((uint64_t)(uint32_t)(int32_t)(x))
#define S64(x) ((uint64_t)(int64_t)(x))

static void test_integer(void)
{
    RUN("add.s32 %r4, %r1, %r2;", 'r', {0x7fffffff, 1, 0, 0x80000000}, {5, S32(-7), 0, S32(-2)});
    RUN("sub.u32 %r4, %r1, %r2;", 'r', {0, 1, 0, 0xffffffff});
    RUN("add.s64 %rd4, %rd1, %rd2;", 'd', {~0ull, 2, 0, 1});
    RUN("add.u16 %h4, %h1, %h2;", 'h', {0xffff, 2, 0, 1});
    RUN("mul.lo.s32 %r4, %r1, %r2;", 'r', {S32(-3), 7, 0, S32(-21)});
    RUN("mul.hi.u32 %r4, %r1, %r2;", 'r', {0xffffffff, 0xffffffff, 0, 0xfffffffe});
    RUN("mul.hi.s32 %r4, %r1, %r2;", 'r', {0xffffffff, 0xffffffff, 0, 0},
        {0x80000000, 0x80000000, 0, 0x40000000});
    RUN("mul.hi.u64 %rd4, %rd1, %rd2;", 'd', {~0ull, ~0ull, 0, ~0ull - 1});
    RUN("mul.hi.s64 %rd4, %rd1, %rd2;", 'd', {S64(-1), 5, 0, ~0ull});
    RUN("mul.wide.s32 %rd4, %r1, %r2;", 'd', {S32(-2), 3, 0, S64(-6)});
    RUN("mul.wide.u32 %rd4, %r1, %r2;", 'd', {0xffffffff, 2, 0, 0x1fffffffeull});
    RUN("mul.wide.u16 %r4, %h1, %h2;", 'r', {0xffff, 0xffff, 0, 0xfffe0001});
    RUN("mul.wide.s16 %r4, %h1, %h2;", 'r', {0xffff, 0x7fff, 0, S32(-32767)});
    RUN("mad.lo.s32 %r4, %r1, %r2, %r3;", 'r', {3, 4, 5, 17}, {S32(-3), 4, 5, S32(-7)});
    RUN("mad.hi.u32 %r4, %r1, %r2, %r3;", 'r', {0xffffffff, 2, 1, 2});
    RUN("mad.wide.s32 %rd4, %r1, %r2, %rd3;", 'd', {S32(-2), 3, 10, 4});
    RUN("mad.wide.u32 %rd4, %r1, %r2, %rd3;", 'd',
        {0xffffffff, 0xffffffff, 1, 0xfffffffe00000002ull});
    RUN("add.sat.s32 %r4, %r1, %r2;", 'r', {0x7fffffff, 1, 0, 0x7fffffff},
        {0x80000000, S32(-1), 0, 0x80000000}, {5, 6, 0, 11});
    RUN("sub.sat.s32 %r4, %r1, %r2;", 'r', {0x80000000, 1, 0, 0x80000000});
    /* programmatic dependent launch: with one grid at a time there is nothing to wait for
     * and nobody to let start early (cuBLASLt's sm_90+ kernels open and close with these) */
    RUN("griddepcontrol.wait; add.s32 %r4, %r1, %r2; griddepcontrol.launch_dependents;", 'r',
        {2, 3, 0, 5});
    RUN("sad.u32 %r4, %r1, %r2, %r3;", 'r', {3, 10, 100, 107});
    RUN("sad.s32 %r4, %r1, %r2, %r3;", 'r', {S32(-3), 4, 1, 8});
    RUN("mul24.lo.u32 %r4, %r1, %r2;", 'r', {0x1000001, 2, 0, 2});
    RUN("mul24.hi.u32 %r4, %r1, %r2;", 'r', {0xffffff, 0xffffff, 0, 0xfffffe00});
    RUN("mul24.lo.s32 %r4, %r1, %r2;", 'r', {0xffffff, 5, 0, S32(-5)});
    RUN("mad24.lo.u32 %r4, %r1, %r2, %r3;", 'r', {3, 4, 5, 17});
    RUN("neg.s32 %r4, %r1;", 'r', {5, 0, 0, S32(-5)});
    RUN("abs.s32 %r4, %r1;", 'r', {0x80000000, 0, 0, 0x80000000}, {S32(-7), 0, 0, 7});
    RUN("abs.s64 %rd4, %rd1;", 'd', {S64(-9), 0, 0, 9});
    RUN("min.s32 %r4, %r1, %r2;", 'r', {S32(-1), 1, 0, S32(-1)});
    RUN("min.u32 %r4, %r1, %r2;", 'r', {0xffffffff, 1, 0, 1});
    RUN("max.s64 %rd4, %rd1, %rd2;", 'd', {S64(-1), 1, 0, 1});
    RUN("max.u16 %h4, %h1, %h2;", 'h', {0xffff, 1, 0, 0xffff});
    RUN("min.s16 %h4, %h1, %h2;", 'h', {0xffff, 1, 0, 0xffff});
    /* division and remainder: C semantics, truncating toward zero */
    RUN("div.s32 %r4, %r1, %r2;", 'r', {7, S32(-2), 0, S32(-3)}, {S32(-7), 2, 0, S32(-3)});
    RUN("rem.s32 %r4, %r1, %r2;", 'r', {S32(-7), 2, 0, S32(-1)}, {7, S32(-2), 0, 1});
    RUN("div.u32 %r4, %r1, %r2;", 'r', {7, 2, 0, 3}, {0xffffffff, 16, 0, 0x0fffffff});
    RUN("rem.u64 %rd4, %rd1, %rd2;", 'd', {~0ull, 10, 0, 5});
    RUN("div.s64 %rd4, %rd1, %rd2;", 'd', {S64(-100), 7, 0, S64(-14)});
    /* by zero (and INT_MIN / -1): implementation-defined, must not crash */
    RUN("div.u32 %r4, %r1, %r2;", 'r', {7, 0, 0, ANY});
    RUN("div.s32 %r4, %r1, %r2;", 'r', {7, 0, 0, ANY}, {0x80000000, S32(-1), 0, ANY});
    RUN("rem.s32 %r4, %r1, %r2;", 'r', {7, 0, 0, ANY}, {0x80000000, S32(-1), 0, ANY});
    RUN("div.s64 %rd4, %rd1, %rd2;", 'd', {7, 0, 0, ANY}, {1ull << 63, ~0ull, 0, ANY});
    RUN("rem.u64 %rd4, %rd1, %rd2;", 'd', {7, 0, 0, ANY});
    /* extended precision: add.cc/addc, sub.cc/subc, mad.cc/madc */
    RUN("add.cc.u32 %r4, %r1, %r2; addc.u32 %r5, %r3, 0; mov.b64 %rd4, {%r4, %r5};", 'd',
        {0xffffffff, 1, 5, 0x600000000ull}, {1, 1, 5, 0x500000002ull});
    RUN("sub.cc.u32 %r4, %r1, %r2; subc.u32 %r5, %r3, 0; mov.b64 %rd4, {%r4, %r5};", 'd',
        {0, 1, 5, 0x4ffffffffull}, {3, 1, 5, 0x500000002ull});
    RUN("add.cc.u64 %rd5, %rd1, %rd2; addc.u64 %rd4, %rd3, 0;", 'd', {~0ull, 1, 7, 8});
    RUN("mad.lo.cc.u32 %r4, %r1, %r2, %r3; madc.hi.u32 %r5, %r1, %r2, 0; mov.b64 %rd4, {%r4, %r5};",
        'd', {0xffffffff, 0xffffffff, 1, 0xfffffffe00000002ull},
        {0xffffffff, 1, 1, 0x100000000ull});
}

static void test_bits(void)
{
    RUN("and.b32 %r4, %r1, %r2;", 'r', {0xf0f0, 0xff00, 0, 0xf000});
    RUN("or.b64 %rd4, %rd1, %rd2;", 'd', {1ull << 40, 1, 0, (1ull << 40) | 1});
    RUN("xor.b16 %h4, %h1, %h2;", 'h', {0xffff, 0x0f0f, 0, 0xf0f0});
    RUN("not.b32 %r4, %r1;", 'r', {0, 0, 0, 0xffffffff});
    RUN("not.b16 %h4, %h1;", 'h', {0x00ff, 0, 0, 0xff00});
    RUN("cnot.b32 %r4, %r1;", 'r', {0, 0, 0, 1}, {5, 0, 0, 0});
    RUN("and.pred %p4, %p1, %p2;", 'p', {1, 1, 0, 1}, {1, 0, 0, 0});
    RUN("xor.pred %p4, %p1, %p2;", 'p', {1, 1, 0, 0}, {1, 0, 0, 1});
    RUN("not.pred %p4, %p1;", 'p', {0, 0, 0, 1});
    RUN("shl.b32 %r4, %r1, %r2;", 'r', {1, 31, 0, 0x80000000}, {1, 32, 0, 0}, {1, 100, 0, 0});
    RUN("shl.b64 %rd4, %rd1, %r2;", 'd', {1, 63, 0, 1ull << 63}, {1, 64, 0, 0});
    RUN("shr.s32 %r4, %r1, %r2;", 'r', {0x80000000, 31, 0, 0xffffffff},
        {0x80000000, 40, 0, 0xffffffff}, {0x40000000, 40, 0, 0});
    RUN("shr.u32 %r4, %r1, %r2;", 'r', {0x80000000, 31, 0, 1}, {0x80000000, 32, 0, 0});
    RUN("shr.s16 %h4, %h1, %r2;", 'h', {0x8000, 20, 0, 0xffff});
    RUN("shr.s64 %rd4, %rd1, %r2;", 'd', {1ull << 63, 70, 0, ~0ull});
    RUN("popc.b32 %r4, %r1;", 'r', {0xf0f0, 0, 0, 8});
    RUN("popc.b64 %r4, %rd1;", 'r', {~0ull, 0, 0, 64});
    RUN("clz.b32 %r4, %r1;", 'r', {0, 0, 0, 32}, {1, 0, 0, 31}, {0x80000000, 0, 0, 0});
    RUN("clz.b64 %r4, %rd1;", 'r', {1, 0, 0, 63}, {0, 0, 0, 64});
    RUN("brev.b32 %r4, %r1;", 'r', {1, 0, 0, 0x80000000}, {0x0000f00d, 0, 0, 0xb00f0000});
    RUN("brev.b64 %rd4, %rd1;", 'd', {1, 0, 0, 1ull << 63});
    RUN("bfind.u32 %r4, %r1;", 'r', {0, 0, 0, 0xffffffff}, {0x10, 0, 0, 4}, {~0u, 0, 0, 31});
    RUN("bfind.s32 %r4, %r1;", 'r', {0xffffffff, 0, 0, 0xffffffff}, {0xfffffffe, 0, 0, 0},
        {0x7fffffff, 0, 0, 30});
    RUN("bfind.shiftamt.u32 %r4, %r1;", 'r', {0x10, 0, 0, 27}, {0, 0, 0, 0xffffffff});
    RUN("bfind.u64 %r4, %rd1;", 'r', {1ull << 50, 0, 0, 50});
    /* bfe: field at pos of len bits; sign from the field's top bit (within the msb) */
    RUN("bfe.u32 %r4, %r1, %r2, %r3;", 'r', {0xf0f0f0f0, 4, 8, 0x0f}, {0x80000000, 31, 1, 1},
        {0x80000000, 31, 8, 1}, {0xffffffff, 0, 0, 0}, {0xffffffff, 40, 4, 0},
        {0xabcd, 0x104, 0x208, 0xbc} /* pos/len use 8 bits */);
    RUN("bfe.s32 %r4, %r1, %r2, %r3;", 'r', {0x000000f0, 4, 4, 0xffffffff}, {0x00000070, 4, 4, 7},
        {0x80000000, 31, 8, 0xffffffff}, {0x40000000, 32, 4, 0}, {0x80000000, 40, 4, 0xffffffff},
        {0xffffffff, 3, 0, 0});
    RUN("bfe.u64 %rd4, %rd1, %r2, %r3;", 'd', {0xabcdef0000000000ull, 40, 24, 0xabcdef});
    RUN("bfe.s64 %rd4, %rd1, %r2, %r3;", 'd',
        {0xabcdef0000000000ull, 40, 24, 0xffffffffffabcdefull});
    /* bfi: the low len bits of a into b at pos */
    RUN("bfi.b32 %r4, %r1, %r2, %r3, 8;", 'r', {0xab, 0xffffffff, 4, 0xfffffabf},
        {0xab, 0, 28, 0xb0000000}, {0xab, 0x1234, 32, 0x1234}, {0xab, 0x1234, 255, 0x1234});
    RUN("bfi.b32 %r4, %r1, %r2, 4, %r3;", 'r', {0xab, 0x1234, 0, 0x1234});
    RUN("bfi.b64 %rd4, %rd1, %rd2, %r3, 16;", 'd', {0xbeef, 0, 48, 0xbeef000000000000ull});
    /* prmt: bytes of {b, a} = b7..b4 a3..a0 */
    RUN("prmt.b32 %r4, %r1, %r2, %r3;", 'r', {0x03020100, 0x07060504, 0x5140, 0x05010400},
        {0x03020100, 0x07060504, 0x3210, 0x03020100}, {0x00000080, 0, 0x0008, 0x808080ff},
        {0x00007f00, 0, 0x9999, 0x00000000});
    RUN("prmt.b32.f4e %r4, %r1, %r2, %r3;", 'r', {0x03020100, 0x07060504, 1, 0x04030201},
        {0x03020100, 0x07060504, 3, 0x06050403});
    RUN("prmt.b32.b4e %r4, %r1, %r2, %r3;", 'r', {0x03020100, 0x07060504, 0, 0x05060700},
        {0x03020100, 0x07060504, 1, 0x06070001});
    RUN("prmt.b32.rc8 %r4, %r1, %r2, %r3;", 'r', {0x03020100, 0x07060504, 2, 0x02020202});
    RUN("prmt.b32.ecl %r4, %r1, %r2, %r3;", 'r', {0x03020100, 0x07060504, 1, 0x03020101});
    RUN("prmt.b32.ecr %r4, %r1, %r2, %r3;", 'r', {0x03020100, 0x07060504, 2, 0x02020100});
    RUN("prmt.b32.rc16 %r4, %r1, %r2, %r3;", 'r', {0x03020100, 0x07060504, 1, 0x03020302});
    /* funnel shifts over {b, a} */
    RUN("shf.l.wrap.b32 %r4, %r1, %r2, %r3;", 'r', {0x80000000, 1, 1, 3}, {5, 6, 32, 6});
    RUN("shf.r.clamp.b32 %r4, %r1, %r2, %r3;", 'r', {1, 0x80000000, 40, 0x80000000});
    RUN("shf.l.clamp.b32 %r4, %r1, %r2, %r3;", 'r', {1, 2, 40, 1});
    RUN("shf.r.wrap.b32 %r4, %r1, %r2, %r3;", 'r', {2, 1, 33, 0x80000001});
    RUN("lop3.b32 %r4, %r1, %r2, %r3, 0x96;", 'r',
        {0xff00ff00, 0xf0f0f0f0, 0xcccccccc, 0xff00ff00 ^ 0xf0f0f0f0 ^ 0xcccccccc});
    RUN("lop3.b32 %r4, %r1, %r2, %r3, 0xe8;", 'r',
        {0xff00ff00, 0xf0f0f0f0, 0xcccccccc, 0xfcc0fcc0});
    RUN("lop3.b32 %r4, %r1, %r2, %r3, 0x80;", 'r',
        {0xff00ff00, 0xf0f0f0f0, 0xcccccccc, 0xc000c000});
}

static void test_simd(void)
{
    /* SIMD video instructions: bytes or halfwords in parallel; merged, saturated or summed */
    RUN("vabsdiff4.u32.u32.u32 %r4, %r1, %r2, %r3;", 'r',
        {0x10ff0050, 0x20000a60, 0x12345678, 0x10ff0a10});
    RUN("vabsdiff4.u32.u32.u32.add %r4, %r1, %r2, %r3;", 'r', {0x10ff0050, 0x20000a60, 5, 0x12e});
    RUN("vadd4.u32.u32.u32.sat %r4, %r1, %r2, %r3;", 'r', {0xff010203, 0x02020202, 0, 0xff030405});
    RUN("vadd4.s32.s32.s32.sat %r4, %r1, %r2, %r3;", 'r', {0x0000807f, 0x0000ff01, 0, 0x0000807f});
    RUN("vadd4.u32.u32.u32 %r4, %r1, %r2, %r3;", 'r', {0xff010203, 0x02020202, 0, 0x01030405});
    RUN("vsub2.s32.s32.s32 %r4, %r1, %r2, %r3;", 'r', {0x00050001, 0x00010003, 0, 0x0004fffe});
    RUN("vmax2.s32.s32.s32 %r4, %r1, %r2, %r3;", 'r', {0x80000001, 0x00010002, 0, 0x00010002});
    RUN("vmin4.u32.u32.u32 %r4, %r1, %r2, %r3;", 'r', {0x10203040, 0x40302010, 0, 0x10202010});
    RUN("vavrg4.u32.u32.u32 %r4, %r1, %r2, %r3;", 'r', {0x01020304, 0x02020202, 0, 0x02020303});
    RUN("add.s16x2 %r4, %r1, %r2;", 'r', {0x7fff0001, 0x00010001, 0, 0x80000002});
    RUN("min.s16x2 %r4, %r1, %r2;", 'r', {0xffff0005, 0x00010003, 0, 0xffff0003});
    RUN("min.relu.s16x2 %r4, %r1, %r2;", 'r', {0xffff0005, 0x00010003, 0, 0x00000003});
    RUN("max.u16x2 %r4, %r1, %r2;", 'r', {0xffff0005, 0x00010003, 0, 0xffff0005});
}

static void test_float(void)
{
    /* fma rounds once: (1 + 2^-12)^2 - (1 + 2^-11) is 2^-24, mul then add gives 0 */
    float a = 1.0f + ldexpf(1, -12), c = -(1.0f + ldexpf(1, -11));
    RUN("fma.rn.f32 %f4, %f1, %f2, %f3;", 'f', {F(a), F(a), F(c), F(ldexpf(1, -24))});
    RUN("mad.rn.f32 %f4, %f1, %f2, %f3;", 'f', {F(a), F(a), F(c), F(ldexpf(1, -24))});
    RUN("mul.rn.f32 %f5, %f1, %f2; add.rn.f32 %f4, %f5, %f3;", 'f', {F(a), F(a), F(c), 0});
    double da = 1.0 + ldexp(1, -27), dc = -(1.0 + ldexp(1, -26));
    RUN("fma.rn.f64 %fd4, %fd1, %fd2, %fd3;", 'D', {D(da), D(da), D(dc), D(ldexp(1, -54))});
    RUN("mul.rn.f64 %fd5, %fd1, %fd2; add.rn.f64 %fd4, %fd5, %fd3;", 'D', {D(da), D(da), D(dc), 0});
    /* rounding modes: 1 + 0.75 ulp */
    float b = 3 * ldexpf(1, -25);
    RUN("add.rn.f32 %f4, %f1, %f2;", 'f', {F(1), F(b), 0, 0x3f800001},
        {F(-1), F(-b), 0, 0xbf800001});
    RUN("add.rz.f32 %f4, %f1, %f2;", 'f', {F(1), F(b), 0, 0x3f800000},
        {F(-1), F(-b), 0, 0xbf800000});
    RUN("add.rm.f32 %f4, %f1, %f2;", 'f', {F(1), F(b), 0, 0x3f800000},
        {F(-1), F(-b), 0, 0xbf800001});
    RUN("add.rp.f32 %f4, %f1, %f2;", 'f', {F(1), F(b), 0, 0x3f800001},
        {F(-1), F(-b), 0, 0xbf800000});
    RUN("div.rn.f32 %f4, %f1, %f2;", 'f', {F(1), F(3), 0, 0x3eaaaaab});
    RUN("div.rz.f32 %f4, %f1, %f2;", 'f', {F(1), F(3), 0, 0x3eaaaaaa});
    RUN("div.full.f32 %f4, %f1, %f2;", 'f', {F(6), F(3), 0, F(2)});
    RUN("div.rn.f64 %fd4, %fd1, %fd2;", 'D', {D(1), D(3), 0, D(1.0 / 3.0)});
    RUN("sqrt.rn.f32 %f4, %f1;", 'f', {F(2), 0, 0, 0x3fb504f3}, {F(-1), 0, 0, 0x7fffffff});
    RUN("sqrt.rp.f32 %f4, %f1;", 'f', {F(2), 0, 0, 0x3fb504f4});
    RUN("sqrt.rn.f64 %fd4, %fd1;", 'D', {D(2), 0, 0, D(sqrt(2.0))});
    RUN("rcp.rn.f32 %f4, %f1;", 'f', {F(3), 0, 0, 0x3eaaaaab});
    RUN("rcp.rn.f64 %fd4, %fd1;", 'D', {D(4), 0, 0, D(0.25)});
    RUN("mul.rz.f64 %fd4, %fd1, %fd2;", 'D', {D(1.0 / 3.0), D(3), 0, D(1.0 - ldexp(1, -53))});
    /* min/max: NaN gives the other operand, -0 < +0; .NaN propagates */
    RUN("min.f32 %f4, %f1, %f2;", 'f', {0x7fc00000, F(1), 0, F(1)}, {F(-0.0f), 0, 0, 0x80000000},
        {0, F(-0.0f), 0, 0x80000000}, {F(2), F(-3), 0, F(-3)});
    RUN("max.f32 %f4, %f1, %f2;", 'f', {F(-0.0f), 0, 0, 0}, {F(1), 0x7fc00000, 0, F(1)});
    RUN("min.NaN.f32 %f4, %f1, %f2;", 'f', {0x7fc00000, F(1), 0, 0x7fffffff});
    RUN("max.f64 %fd4, %fd1, %fd2;", 'D', {D(NAN), D(2), 0, D(2)}, {D(-1), D(-2), 0, D(-1)});
    RUN("abs.f32 %f4, %f1;", 'f', {F(-0.0f), 0, 0, 0}, {F(-2.5f), 0, 0, F(2.5f)});
    RUN("neg.f32 %f4, %f1;", 'f', {0, 0, 0, 0x80000000});
    RUN("neg.f64 %fd4, %fd1;", 'D', {D(1.5), 0, 0, D(-1.5)});
    RUN("copysign.f32 %f4, %f1, %f2;", 'f', {F(-1), F(2), 0, F(-2)}, {F(1), F(-2), 0, F(2)});
    RUN("add.sat.f32 %f4, %f1, %f2;", 'f', {F(0.7f), F(0.6f), 0, F(1)}, {F(-1), F(0.5f), 0, 0});
    RUN("mul.sat.f32 %f4, %f1, %f2;", 'f', {F(-1), F(2), 0, 0});
    RUN("add.ftz.f32 %f4, %f1, %f2;", 'f', {1, 0, 0, 0} /* a subnormal input flushes */);
    RUN("add.f32 %f4, %f1, %f2;", 'f', {1, 0, 0, 1} /* without .ftz it does not */);
    RUN("testp.notanumber.f32 %p4, %f1;", 'p', {0x7fc00000, 0, 0, 1}, {F(1), 0, 0, 0});
    RUN("testp.finite.f64 %p4, %fd1;", 'p', {D(INFINITY), 0, 0, 0}, {D(1), 0, 0, 1});
    RUN("testp.subnormal.f32 %p4, %f1;", 'p', {1, 0, 0, 1}, {F(1), 0, 0, 0});
    /* comparisons: ordered ones are false with a NaN, unordered ones true */
    RUN("setp.lt.f32 %p4, %f1, %f2;", 'p', {F(1), F(2), 0, 1}, {0x7fc00000, F(2), 0, 0});
    RUN("setp.ltu.f32 %p4, %f1, %f2;", 'p', {0x7fc00000, F(2), 0, 1}, {F(3), F(2), 0, 0});
    RUN("setp.ne.f32 %p4, %f1, %f2;", 'p', {0x7fc00000, F(2), 0, 0}, {F(1), F(2), 0, 1});
    RUN("setp.neu.f32 %p4, %f1, %f2;", 'p', {0x7fc00000, F(2), 0, 1});
    RUN("setp.num.f64 %p4, %fd1, %fd2;", 'p', {D(1), D(NAN), 0, 0}, {D(1), D(2), 0, 1});
    RUN("setp.nan.f32 %p4, %f1, %f2;", 'p', {F(1), 0x7fc00000, 0, 1});
    RUN("setp.equ.f32 %p4, %f1, %f2;", 'p', {F(0.0f), F(-0.0f), 0, 1});
    RUN("setp.lt.s32 %p4, %r1, %r2;", 'p', {S32(-1), 0, 0, 1});
    RUN("setp.lo.u32 %p4, %r1, %r2;", 'p', {S32(-1), 0, 0, 0});
    RUN("setp.hs.u64 %p4, %rd1, %rd2;", 'p', {~0ull, 1, 0, 1});
    RUN("setp.gt.and.u32 %p4, %r1, %r2, %p3;", 'p', {2, 1, 1, 1}, {2, 1, 0, 0});
    RUN("setp.gt.or.u32 %p4, %r1, %r2, !%p3;", 'p', {1, 2, 0, 1}, {1, 2, 1, 0});
    RUN("setp.lt.s32 %p5|%p4, %r1, %r2;", 'p', {1, 2, 0, 0}, {3, 2, 0, 1});
    RUN("set.lt.u32.s32 %r4, %r1, %r2;", 'r', {S32(-1), 0, 0, 0xffffffff}, {1, 0, 0, 0});
    RUN("set.ge.f32.f32 %f4, %f1, %f2;", 'f', {F(1), F(1), 0, F(1)});
    RUN("selp.b32 %r4, %r1, %r2, %p3;", 'r', {10, 20, 1, 10}, {10, 20, 0, 20});
    RUN("slct.u32.s32 %r4, %r1, %r2, %r3;", 'r', {10, 20, S32(-1), 20}, {10, 20, 0, 10});
    RUN("slct.f32.f32 %f4, %f1, %f2, %f3;", 'f', {F(1), F(2), F(-0.0f), F(1)},
        {F(1), F(2), F(-1), F(2)});
    /* half precision arithmetic */
    RUN("add.f16 %h4, %h1, %h2;", 'h', {0x3c00, 0x3c00, 0, 0x4000});
    RUN("mul.f16 %h4, %h1, %h2;", 'h', {0x4000, 0xc200, 0, 0xc600});
    RUN("fma.rn.f16x2 %r4, %r1, %r2, %r3;", 'r', {0x3c004000, 0x40004000, 0x3c003c00, 0x42004500});
    RUN("neg.bf16 %h4, %h1;", 'h', {0x3f80, 0, 0, 0xbf80});
    RUN("setp.lt.f16 %p4, %h1, %h2;", 'p', {0x3c00, 0x4000, 0, 1});
}

static void test_cvt(void)
{
    /* float to integer: the rounding the modifier names, then saturation to the type */
    RUN("cvt.rni.s32.f32 %r4, %f1;", 'r', {F(2.5f), 0, 0, 2}, {F(3.5f), 0, 0, 4},
        {F(-2.5f), 0, 0, S32(-2)}, {0x7fc00000, 0, 0, 0}, {F(3e9f), 0, 0, 0x7fffffff},
        {F(-3e9f), 0, 0, 0x80000000});
    RUN("cvt.rzi.s32.f32 %r4, %f1;", 'r', {F(-2.7f), 0, 0, S32(-2)});
    RUN("cvt.rmi.s32.f32 %r4, %f1;", 'r', {F(-2.1f), 0, 0, S32(-3)});
    RUN("cvt.rpi.s32.f32 %r4, %f1;", 'r', {F(2.1f), 0, 0, 3});
    RUN("cvt.rzi.u32.f32 %r4, %f1;", 'r', {F(-1), 0, 0, 0}, {F(5e9f), 0, 0, 0xffffffff});
    RUN("cvt.rni.u8.f32 %h4, %f1;", 'h', {F(300), 0, 0, 255}, {F(-3), 0, 0, 0});
    RUN("cvt.rzi.sat.s8.f32 %h4, %f1;", 'h', {F(-300), 0, 0, 0xff80}, {F(100.9f), 0, 0, 100});
    RUN("cvt.rzi.s64.f64 %rd4, %fd1;", 'd', {D(-1e19), 0, 0, 1ull << 63}, {D(-7.9), 0, 0, S64(-7)});
    RUN("cvt.rni.u64.f64 %rd4, %fd1;", 'd', {D(1e20), 0, 0, ~0ull}, {D(4.5), 0, 0, 4});
    /* integer to float, rounded once in each mode */
    RUN("cvt.rn.f32.s32 %f4, %r1;", 'f', {16777217, 0, 0, 0x4b800000});
    RUN("cvt.rz.f32.s32 %f4, %r1;", 'f', {16777219, 0, 0, 0x4b800001});
    RUN("cvt.rp.f32.s32 %f4, %r1;", 'f', {16777217, 0, 0, 0x4b800001});
    RUN("cvt.rm.f32.s32 %f4, %r1;", 'f', {S32(-16777217), 0, 0, 0xcb800001});
    RUN("cvt.rn.f32.u64 %f4, %rd1;", 'f', {~0ull, 0, 0, 0x5f800000});
    RUN("cvt.rz.f32.u64 %f4, %rd1;", 'f', {~0ull, 0, 0, 0x5f7fffff});
    RUN("cvt.rn.f64.s64 %fd4, %rd1;", 'D', {S64(-3), 0, 0, D(-3)});
    /* float to float */
    double d = 1.0 + 3 * ldexp(1, -25);
    RUN("cvt.rn.f32.f64 %f4, %fd1;", 'f', {D(d), 0, 0, 0x3f800001});
    RUN("cvt.rz.f32.f64 %f4, %fd1;", 'f', {D(d), 0, 0, 0x3f800000});
    RUN("cvt.rm.f32.f64 %f4, %fd1;", 'f', {D(-d), 0, 0, 0xbf800001});
    RUN("cvt.rp.f32.f64 %f4, %fd1;", 'f', {D(d), 0, 0, 0x3f800001}, {D(1e300), 0, 0, 0x7f800000});
    RUN("cvt.f64.f32 %fd4, %f1;", 'D', {F(0.1f), 0, 0, D((double)0.1f)});
    RUN("cvt.rni.f32.f32 %f4, %f1;", 'f', {F(2.5f), 0, 0, F(2)}, {F(-3.5f), 0, 0, F(-4)});
    RUN("cvt.rzi.f32.f32 %f4, %f1;", 'f', {F(-2.7f), 0, 0, F(-2)});
    RUN("cvt.rmi.f32.f32 %f4, %f1;", 'f', {F(-2.1f), 0, 0, F(-3)});
    RUN("cvt.rpi.f64.f64 %fd4, %fd1;", 'D', {D(2.1), 0, 0, D(3)});
    RUN("cvt.sat.f32.f32 %f4, %f1;", 'f', {F(1.5f), 0, 0, F(1)}, {F(-0.5f), 0, 0, 0},
        {0x7fc00000, 0, 0, 0}, {F(0.25f), 0, 0, F(0.25f)});
    RUN("cvt.ftz.f32.f32 %f4, %f1;", 'f', {0x80000001, 0, 0, 0x80000000});
    /* integer to integer: truncation, extension, saturation */
    RUN("cvt.sat.u8.s32 %h4, %r1;", 'h', {300, 0, 0, 255}, {S32(-5), 0, 0, 0}, {100, 0, 0, 100});
    RUN("cvt.sat.s8.s32 %h4, %r1;", 'h', {200, 0, 0, 0x7f}, {S32(-200), 0, 0, 0xff80});
    RUN("cvt.sat.s16.s32 %h4, %r1;", 'h', {40000, 0, 0, 0x7fff});
    RUN("cvt.sat.u16.s32 %h4, %r1;", 'h', {S32(-1), 0, 0, 0});
    RUN("cvt.sat.s32.u32 %r4, %r1;", 'r', {0x80000000, 0, 0, 0x7fffffff});
    RUN("cvt.sat.u32.s64 %r4, %rd1;", 'r', {S64(-1), 0, 0, 0}, {1ull << 40, 0, 0, 0xffffffff});
    RUN("cvt.u8.u32 %h4, %r1;", 'h', {0x1ff, 0, 0, 0xff});
    RUN("cvt.s8.s32 %h4, %r1;", 'h', {0x1ff, 0, 0, 0xffff});
    RUN("cvt.s32.s8 %r4, %h1;", 'r', {0x80, 0, 0, 0xffffff80});
    RUN("cvt.u32.u16 %r4, %h1;", 'r', {0xffff, 0, 0, 0xffff});
    RUN("cvt.s32.s16 %r4, %h1;", 'r', {0xffff, 0, 0, 0xffffffff});
    RUN("cvt.s64.s32 %rd4, %r1;", 'd', {0xffffffff, 0, 0, ~0ull});
    RUN("cvt.u64.s32 %rd4, %r1;", 'd', {0xffffffff, 0, 0, ~0ull});
    RUN("cvt.s64.u32 %rd4, %r1;", 'd', {0xffffffff, 0, 0, 0xffffffff});
    RUN("cvt.u32.u64 %r4, %rd1;", 'r', {0x100000005ull, 0, 0, 5});
    RUN("cvt.s16.s64 %h4, %rd1;", 'h', {0x12345678ull, 0, 0, 0x5678});
}

static void test_half_conversions(void)
{
    RUN("cvt.rn.f16.f32 %h4, %f1;", 'h', {F(1), 0, 0, 0x3c00}, {F(65504), 0, 0, 0x7bff},
        {F(65520), 0, 0, 0x7c00} /* the tie rounds to even: infinity */, {F(65519), 0, 0, 0x7bff},
        {F(ldexpf(1, -24)), 0, 0, 0x0001}, {F(ldexpf(1, -25)), 0, 0, 0x0000} /* tie to even */,
        {F(3 * ldexpf(1, -26)), 0, 0, 0x0001}, {F(1.0f / 3), 0, 0, 0x3555},
        {F(-2.5f), 0, 0, 0xc100}, {0x7fc00000, 0, 0, 0x7fff}, {F(INFINITY), 0, 0, 0x7c00},
        {F(1 + ldexpf(1, -11)), 0, 0, 0x3c00}, {F(1 + 3 * ldexpf(1, -12)), 0, 0, 0x3c01});
    RUN("cvt.rz.f16.f32 %h4, %f1;", 'h', {F(65520), 0, 0, 0x7bff}, {F(1.0f / 3), 0, 0, 0x3555},
        {F(1e10f), 0, 0, 0x7bff});
    RUN("cvt.rp.f16.f32 %h4, %f1;", 'h', {F(1.0f / 3), 0, 0, 0x3556}, {F(-1e10f), 0, 0, 0xfbff});
    RUN("cvt.rm.f16.f32 %h4, %f1;", 'h', {F(-1.0f / 3), 0, 0, 0xb556},
        {F(ldexpf(1, -30)), 0, 0, 0});
    RUN("cvt.rn.f16.f64 %h4, %fd1;", 'h', {D(0.1), 0, 0, 0x2e66});
    RUN("cvt.f32.f16 %f4, %h1;", 'f', {0x3c00, 0, 0, F(1)}, {0x0001, 0, 0, 0x33800000},
        {0x7bff, 0, 0, F(65504)}, {0xfc00, 0, 0, F(-INFINITY)}, {0x8000, 0, 0, 0x80000000});
    RUN("cvt.f64.f16 %fd4, %h1;", 'D', {0x3555, 0, 0, D(0.333251953125)});
    RUN("cvt.rn.bf16.f32 %h4, %f1;", 'h', {F(1), 0, 0, 0x3f80},
        {F(1 + ldexpf(1, -8)), 0, 0, 0x3f80}, {F(1 + 3 * ldexpf(1, -9)), 0, 0, 0x3f81},
        {F(3.4e38f), 0, 0, 0x7f80}, {F(-5), 0, 0, 0xc0a0}, {0x7fc00000, 0, 0, 0x7fff});
    RUN("cvt.rz.bf16.f32 %h4, %f1;", 'h', {F(3.4e38f), 0, 0, 0x7f7f});
    RUN("cvt.f32.bf16 %f4, %h1;", 'f', {0x3f80, 0, 0, F(1)}, {0xc0a0, 0, 0, F(-5)});
    RUN("cvt.rn.f16x2.f32 %r4, %f1, %f2;", 'r', {F(1), F(2), 0, 0x3c004000});
    RUN("cvt.rn.bf16x2.f32 %r4, %f1, %f2;", 'r', {F(-1), F(1), 0, 0xbf803f80});
    RUN("cvt.rna.tf32.f32 %r4, %f1;", 'r', {0x3f801000, 0, 0, 0x3f802000},
        {0x3f800fff, 0, 0, 0x3f800000});
}

/* ---- memory forms ---- */

static void test_memory(void)
{
    /* sign extension of narrow loads, vector loads and stores, a vector with a sink */
    RUN("ld.global.s8 %r4, [%x1+1];", 'r', {0x8000, 0, 0, 0xffffff80});
    RUN("ld.global.u8 %r4, [%x1+1];", 'r', {0x8000, 0, 0, 0x80});
    RUN("ld.global.s16 %rd4, [%x1];", 'd', {0x8000, 0, 0, 0xffffffffffff8000ull});
    RUN("ld.global.v2.u32 {%r4, %r5}, [%x1+8]; sub.u32 %r4, %r5, %r4;", 'r',
        {0, 5 | 7ull << 32, 0, 2});
    RUN("ld.global.v4.u32 {%r4, _, %r5, _}, [%x1]; add.u32 %r4, %r4, %r5;", 'r', {1, 2, 0, 3});
    RUN("st.global.v2.u32 [%x1], {%r2, %r3}; ld.global.u64 %rd4, [%x1];", 'd',
        {0, 1, 2, 0x200000001ull});
    RUN("st.global.u8 [%x1+2], %r2; ld.global.u32 %r4, [%x1];", 'r',
        {0x11223344, 0xff, 0, 0x11ff3344});
    /* shared memory: static, through generic addresses, and local memory */
    RUN("{ .shared .align 8 .b8 buf[64]; mov.u32 %r5, buf; st.shared.u32 [%r5+12], %r1;"
        " ld.shared.u32 %r4, [buf+12]; }",
        'r', {77, 0, 0, 77});
    RUN("{ .shared .align 8 .b8 buf[64]; mov.u64 %rd5, buf; cvta.shared.u64 %rd6, %rd5;"
        " st.u32 [%rd6+4], %r1; ld.shared.u32 %r4, [buf+4]; }",
        'r', {99, 0, 0, 99});
    RUN("{ .shared .align 8 .b8 buf[64]; mov.u64 %rd5, buf; cvta.shared.u64 %rd6, %rd5;"
        " isspacep.shared %p4, %rd6; }",
        'p', {0, 0, 0, 1});
    RUN("isspacep.global %p4, %x1;", 'p', {0, 0, 0, 1});
    RUN("{ .local .align 8 .b8 loc[16]; mov.u64 %rd5, loc; cvta.local.u64 %rd6, %rd5;"
        " st.u64 [%rd6+8], %rd1; ld.local.u64 %rd4, [loc+8]; }",
        'd', {0x1234567890ull, 0, 0, 0x1234567890ull});
    RUN("{ .local .align 4 .b8 loc[8]; st.local.u32 [loc], %r1; cvta.to.local.u64 %rd5, %rd5;"
        " mov.u64 %rd5, loc; cvta.local.u64 %rd6, %rd5; cvta.to.local.u64 %rd7, %rd6;"
        " ld.local.u32 %r4, [%rd7]; }",
        'r', {5, 0, 0, 5});
    /* the most local memory a thread may have (512 KiB), to its last word */
    RUN("{ .local .align 4 .b8 big[524288]; st.local.u32 [big+524284], %r1;"
        " ld.local.u32 %r4, [big+524284]; }",
        'r', {31337, 0, 0, 31337});
    /* cp.async copies at once; a source size zero-fills the rest, an ignore-source predicate all */
    RUN("{ .shared .align 16 .b8 buf[32]; mov.u32 %r5, buf; cp.async.ca.shared.global [%r5], "
        "[%x1], 16, 12;"
        " cp.async.commit_group; cp.async.wait_group 0; ld.shared.u64 %rd4, [buf+8]; }",
        'd', {1, 0x1122334455667788ull, 0, 0x55667788});
#define CP_IGNORE                                                                                  \
    "{ .shared .align 16 .b8 buf[32]; st.shared.u64 [buf], %rd3;"                                  \
    " cp.async.ca.shared.global [buf], [%x1], 8, %p2; cp.async.wait_all; ld.shared.u64 %rd4, "     \
    "[buf]; }"
    RUN(CP_IGNORE, 'd', {5, 1, 9, 0}); /* one case per block: the threads share `buf` */
    RUN(CP_IGNORE, 'd', {5, 0, 9, 5});
    /* kernel parameters by address */
    RUN("mov.u64 %rd5, out; ld.param.u64 %rd6, [%rd5]; sub.u64 %rd4, %x2, %rd6; shr.u64 %rd4, "
        "%rd4, 3;",
        'd', {0, 0, 0, 0});
    /* atomics in the harness: single thread forms */
    RUN("atom.global.add.u32 %r5, [%x1], %r2; ld.global.u32 %r4, [%x1];", 'r', {5, 7, 0, 12});
    RUN("atom.global.cas.b32 %r4, [%x1], %r2, %r3;", 'r', {5, 5, 9, 5});
    RUN("atom.global.cas.b32 %r5, [%x1], %r2, %r3; ld.global.u32 %r4, [%x1];", 'r', {5, 5, 9, 9},
        {5, 6, 9, 5});
    RUN("atom.global.inc.u32 %r5, [%x1], %r2; ld.global.u32 %r4, [%x1];", 'r', {5, 5, 0, 0},
        {4, 5, 0, 5});
    RUN("atom.global.dec.u32 %r5, [%x1], %r2; ld.global.u32 %r4, [%x1];", 'r', {0, 5, 0, 5},
        {9, 5, 0, 5}, {3, 5, 0, 2});
    RUN("atom.global.min.s32 %r5, [%x1], %r2; ld.global.u32 %r4, [%x1];", 'r',
        {5, S32(-1), 0, S32(-1)});
    RUN("atom.global.max.u64 %rd5, [%x1], %rd2; ld.global.u64 %rd4, [%x1];", 'd',
        {5, ~0ull, 0, ~0ull});
    RUN("atom.global.add.f32 %f5, [%x1], %f2; ld.global.f32 %f4, [%x1];", 'f',
        {F(1.5f), F(2), 0, F(3.5f)});
    RUN("atom.global.exch.b64 %rd4, [%x1], %rd2;", 'd', {5, 6, 0, 5});
    RUN("red.global.xor.b32 [%x1], %r2; ld.global.u32 %r4, [%x1];", 'r', {0xf0, 0xff, 0, 0x0f});
}

/* ---- faults ---- */

static void expect_fault(const char *insn, int code, const char *in_message, int line)
{
    char text[4096];
    snprintf(text, sizeof text, "%s  %s\n  ret;\n}\n", prologue, insn);
    cr_ptx_module_t *m = load_text(text);
    CHECK(m != NULL);
    if (!m)
        return;
    uint64_t *in = dev_alloc(64), *out = dev_alloc(64);
    params_t p = {0};
    PARAM(&p, in);
    PARAM(&p, out);
    cr_ptx_fault_t f;
    int rc = launch(m, "t", 1, 1, 1, 1, 0, &p, &f);
    check_count++;
    if (rc != code || f.code != code || (in_message && !strstr(f.message, in_message))) {
        check_failures++;
        fprintf(stderr, "line %d: %s gave %d (\"%s\"), expected %d with \"%s\"\n", line, insn, rc,
                f.message, code, in_message ? in_message : "");
    }
    dev_free(in);
    dev_free(out);
    cr_ptx_module_free(m);
}
#define FAULT(insn, code, msg) expect_fault(insn, code, msg, __LINE__)

static void test_faults(void)
{
    /* (well away from both allocations: an allocator may place `out` right after `in`) */
    FAULT("ld.global.u32 %r4, [%x1+4096];", 700, "out-of-bounds global load");
    FAULT("st.global.u32 [%x1+-4096], %r1;", 700, "out-of-bounds global store");
    FAULT("mov.u64 %rd5, 0; ld.u32 %r4, [%rd5];", 700, "0x0");
    FAULT("ld.global.u32 %r4, [%x1+2];", 716, "misaligned load of 4 bytes");
    FAULT("ld.global.v2.u32 {%r4, %r5}, [%x1+4];", 716, "misaligned");
    FAULT("atom.global.add.u64 %rd4, [%x1+4], 1;", 716, "misaligned");
    FAULT("{ .shared .align 4 .b8 s[16]; ld.shared.u32 %r4, [s+16]; }", 700, "shared-memory load");
    FAULT("{ .local .align 4 .b8 l[16]; st.local.u32 [l+4096], %r1; }", 700, "local-memory store");
    FAULT("trap;", 715, "trap");
    /* more local memory per thread than a device has (512 KiB): refused, nothing allocated */
    FAULT("{ .local .align 4 .b8 l[600000]; st.local.u32 [l+599996], %r1; }", 2,
          "local memory per thread");
    FAULT("{ .shared .align 4 .b8 s[300000]; st.shared.u32 [s+299996], %r1; }", 2,
          "shared memory per block");
    FAULT("frobnicate.b32 %r4, %r1;", 801, "frobnicate.b32");
    FAULT("add.wobbly.s32 %r4, %r1, %r2;", 801, "add.wobbly.s32");
    FAULT("@%p1 bra NOWHERE;", 801, "unknown label");
    /* more register memory than a block may take: refused before anything is allocated */
    {
        cr_ptx_module_t *m =
            load_text(".version 9.0\n.target sm_90\n.address_size 64\n"
                      ".visible .entry regs(.param .u64 out)\n{\n  .reg .b64 %big<1000000>;\n"
                      "  .reg .b64 %o;\n  ld.param.u64 %o, [out];\n  mov.u64 %big999999, 7;\n"
                      "  st.global.u64 [%o], %big999999;\n  ret;\n}\n");
        uint64_t *o = dev_alloc(8);
        params_t p = {0};
        PARAM(&p, o);
        cr_ptx_fault_t f;
        CHECK_EQ_INT(launch(m, "regs", 1, 1, 1024, 1, 0, &p, &f), 2);
        CHECK(strstr(f.message, "registers") != NULL);
        cr_ptx_module_free(m);
    }
    /* a fault stops the kernel: the store after it never happens */
    uint64_t *in = dev_alloc(64), *out = dev_alloc(64);
    char text[4096];
    snprintf(text, sizeof text,
             "%s  st.global.u32 [%%x2], 1;\n  trap;\n  st.global.u32 [%%x2+4], 1;\n  ret;\n}\n",
             prologue);
    cr_ptx_module_t *m = load_text(text);
    params_t p = {0};
    PARAM(&p, in);
    PARAM(&p, out);
    CHECK_EQ_INT(launch(m, "t", 1, 1, 1, 1, 0, &p, (cr_ptx_fault_t[1]){{0}}), 715);
    CHECK_EQ_INT(((uint32_t *)out)[0], 1);
    CHECK_EQ_INT(((uint32_t *)out)[1], 0);
    cr_ptx_module_free(m);
    dev_free(in);
    dev_free(out);
}

int main(void)
{
    test_integer();
    test_bits();
    test_simd();
    test_float();
    test_cvt();
    test_half_conversions();
    test_memory();
    test_faults();
    CHECK_DONE();
}
