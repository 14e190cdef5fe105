/* Warp matrix instructions (wmma.load, wmma.mma, wmma.store) of floating-point fragments.
 *
 * How a fragment's elements spread over the lanes' registers is the implementation's choice
 * (programs only load, multiply, store, or apply element-wise operations); here element e of
 * the matrix in row-major order is lane e / per_lane, slot e % per_lane, two 16-bit elements
 * to a 32-bit register. The operations work on the whole warp at once. */
#include <math.h>

#include "exec.h"

/* Dimensions (rows, cols) of fragment `what` of shape (M, N, K). */
static void dims(int what, unsigned shape, unsigned *rows, unsigned *cols)
{
    static const unsigned mnk[4][3] = {{16, 16, 16}, {8, 32, 16}, {32, 8, 16}, {16, 16, 8}};
    const unsigned *d = mnk[shape & 3];
    switch (what) {
    case CR__WMMA_A:
        *rows = d[0], *cols = d[2];
        break;
    case CR__WMMA_B:
        *rows = d[2], *cols = d[1];
        break;
    default:
        *rows = d[0], *cols = d[1];
        break;
    }
}

typedef struct {
    const uint32_t *slots; /* registers of the fragment */
    uint32_t nregs;
    unsigned per_reg;  /* elements in one register: 2 for 16-bit types */
    unsigned per_lane; /* elements held by one lane */
    cr__type_t type;
} frag_t;

static int frag_init(frag_t *f, const cr__prog_t *p, uint32_t list, cr__type_t t, unsigned rows,
                     unsigned cols)
{
    f->nregs = p->lists[list];
    f->slots = &p->lists[list + 1];
    f->type = t;
    f->per_reg = cr__type_size(t) == 2 ? 2 : 1;
    f->per_lane = (rows * cols + CR__WARP_SIZE - 1) / CR__WARP_SIZE;
    return f->per_lane <= f->nregs * f->per_reg ? 0 : -1;
}

static double frag_get(uint64_t *R, const frag_t *f, unsigned e)
{
    unsigned lane = e / f->per_lane, slot = e % f->per_lane;
    uint64_t v = R[(size_t)f->slots[slot / f->per_reg] * CR__WARP_SIZE + lane];
    switch (f->type) {
    case CR__T_F16:
        return cr__f16_to_f32((uint16_t)(v >> (16 * (slot % 2))));
    case CR__T_BF16:
        return cr__bf16_to_f32((uint16_t)(v >> (16 * (slot % 2))));
    default:
        return F32(v);
    }
}

static void frag_put_bits(uint64_t *R, const frag_t *f, unsigned e, uint64_t bits)
{
    unsigned lane = e / f->per_lane, slot = e % f->per_lane;
    uint64_t *r = &R[(size_t)f->slots[slot / f->per_reg] * CR__WARP_SIZE + lane];
    if (f->per_reg == 2) {
        unsigned sh = 16 * (slot % 2);
        *r = (*r & ~(0xffffull << sh)) | (bits & 0xffff) << sh;
    } else {
        *r = bits & 0xffffffffull;
    }
}

static uint64_t to_bits(double v, cr__type_t t)
{
    switch (t) {
    case CR__T_F16:
        return cr__f64_to_f16(v, CR__RND_RN);
    case CR__T_BF16:
        return cr__f64_to_bf16(v, CR__RND_RN);
    default:
        return B32((float)v);
    }
}

static void frag_clear(uint64_t *R, const frag_t *f)
{
    for (uint32_t k = 0; k < f->nregs; k++)
        memset(&R[(size_t)f->slots[k] * CR__WARP_SIZE], 0, CR__WARP_SIZE * sizeof *R);
}

int cr__exec_wmma(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    const cr__prog_t *p = wk->prog;
    uint64_t *R = w->R;
    uint32_t first = (uint32_t)__builtin_ctz(m);
    if (m != w->valid || w->valid != CR__FULL_MASK)
        return cr__fault(wk, w, first, CR__CU_ILLEGAL_INSTRUCTION,
                         "wmma needs all 32 threads of the warp");
    unsigned shape = (in->sub2 >> 1) & 3;
    if (in->sub == CR__WMMA_MMA) {
        cr__type_t at = (cr__type_t)(in->sub2 >> 8), dt = (cr__type_t)(in->n & 0xff),
                   ct = (cr__type_t)(in->n >> 8);
        unsigned M, N, K, kk;
        frag_t a, b, c, d;
        dims(CR__WMMA_A, shape, &M, &K);
        dims(CR__WMMA_B, shape, &kk, &N);
        if (frag_init(&d, p, (uint32_t)in->imm, dt, M, N) || frag_init(&a, p, in->r[0], at, M, K) ||
            frag_init(&b, p, in->r[1], at, K, N) || frag_init(&c, p, in->r[2], ct, M, N))
            return cr__fault(wk, w, first, CR__CU_ILLEGAL_INSTRUCTION, "wmma fragment too small");
        double out[256]; /* M * N is 256 for every shape */
        for (unsigned i = 0; i < M; i++)
            for (unsigned j = 0; j < N; j++) {
                /* products are exact in double; the sum is rounded once, to the type of D */
                double acc = frag_get(R, &c, i * N + j);
                for (unsigned k = 0; k < K; k++)
                    acc += frag_get(R, &a, i * K + k) * frag_get(R, &b, k * N + j);
                out[i * N + j] = acc;
            }
        frag_clear(R, &d);
        for (unsigned e = 0; e < M * N; e++)
            frag_put_bits(R, &d, e, to_bits(out[e], dt));
        return 0;
    }
    cr__type_t t = (cr__type_t)(in->sub2 >> 8);
    unsigned rows, cols, esize = cr__type_size(t), col_major = in->sub2 & 1;
    dims(in->sub, shape, &rows, &cols);
    frag_t f;
    if (frag_init(&f, p, (uint32_t)in->imm, t, rows, cols))
        return cr__fault(wk, w, first, CR__CU_ILLEGAL_INSTRUCTION, "wmma fragment too small");
    /* the address and stride are the same for the whole warp */
    uint64_t base =
        R[(size_t)in->r[4] * CR__WARP_SIZE + first] + R[(size_t)in->r[2] * CR__WARP_SIZE + first];
    uint64_t stride = R[(size_t)in->r[3] * CR__WARP_SIZE + first];
    if (!stride)
        stride = col_major ? rows : cols;
    if (base % 32) /* 256-bit aligned, as the PTX ISA requires */
        return cr__fault(wk, w, first, CR__CU_MISALIGNED_ADDRESS,
                         "misaligned wmma matrix at 0x%llx", (unsigned long long)base);
    if (in->sub != CR__WMMA_D)
        frag_clear(R, &f);
    for (unsigned r = 0; r < rows; r++)
        for (unsigned c = 0; c < cols; c++) {
            uint64_t a = base + (col_major ? c * stride + r : r * stride + c) * esize;
            uint8_t *mem;
            int rc = cr__space_ptr(wk, w, first, (int)in->n, a, esize, in->sub == CR__WMMA_D, &mem);
            if (rc)
                return rc;
            unsigned e = r * cols + c;
            uint64_t bits = 0;
            CR__DEVICE_BEGIN();
            if (in->sub == CR__WMMA_D) {
                unsigned lane = e / f.per_lane, slot = e % f.per_lane;
                uint64_t v = R[(size_t)f.slots[slot / f.per_reg] * CR__WARP_SIZE + lane];
                if (f.per_reg == 2)
                    v >>= 16 * (slot % 2);
                memcpy(mem, &v, esize);
            } else {
                memcpy(&bits, mem, esize);
            }
            CR__DEVICE_END();
            if (in->sub != CR__WMMA_D)
                frag_put_bits(R, &f, e, bits);
        }
    return 0;
}
