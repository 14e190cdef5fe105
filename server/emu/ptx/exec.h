/* Private to the executor (exec.c, mem.c, warp.c, grid.c): lane loops and value helpers. */
#ifndef CR_PTX_EXEC_H
#define CR_PTX_EXEC_H

#include <string.h>

#include "internal.h"

/* The lanes of slot s. */
#define SLOT(s) (R + (size_t)(s)*CR__WARP_SIZE)

/* Runs the body (the arguments) for every lane l of mask m: a plain loop when all 32 run. */
#define LANES(...)                                                                                 \
    do {                                                                                           \
        if (m == CR__FULL_MASK) {                                                                  \
            for (uint32_t l = 0; l < CR__WARP_SIZE; l++) {                                         \
                __VA_ARGS__;                                                                       \
            }                                                                                      \
        } else {                                                                                   \
            for (uint32_t mm_ = m; mm_; mm_ &= mm_ - 1) {                                          \
                uint32_t l = (uint32_t)__builtin_ctz(mm_);                                         \
                __VA_ARGS__;                                                                       \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static inline float F32(uint64_t v)
{
    uint32_t u = (uint32_t)v;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The bits of a single-precision result; NaN results are the GPU's canonical NaN. */
static inline uint64_t B32(float f)
{
    uint32_t u;
    if (f != f)
        return 0x7fffffffu;
    memcpy(&u, &f, 4);
    return u;
}

static inline double F64(uint64_t v)
{
    double d;
    memcpy(&d, &v, 8);
    return d;
}

static inline uint64_t B64(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static inline uint64_t cr__brev64(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
    v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0full) | ((v & 0x0f0f0f0f0f0f0f0full) << 4);
    return __builtin_bswap64(v);
}

/* The host memory of lane l's local memory (per-thread stack). */
static inline uint8_t *cr__lane_local(cr__worker_t *wk, const cr__warp_t *w, uint32_t l)
{
    return wk->local + (size_t)(w->index * CR__WARP_SIZE + l) * wk->local_stride;
}

int cr__exec_ld(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m);
int cr__exec_st(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m);
int cr__exec_atom(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m);
/* The host address of lane l's access of `size` bytes at a in state space `space` (CR__SP_*,
 * CR__SP_NONE generic): 0 with *out, or the fault code. */
int cr__space_ptr(cr__worker_t *wk, cr__warp_t *w, uint32_t l, int space, uint64_t a, unsigned size,
                  int write, uint8_t **out);
/* wmma.load/mma/store (wmma.c). */
int cr__exec_wmma(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m);
/* cp.async: copied at once. */
int cr__exec_cp_async(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m);
/* A call: sets w->pc/active to the callee's entry with the calling lanes. */
int cr__exec_call(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m);
/* vprintf, __assertfail and cudaGraphSetConditional. */
int cr__exec_builtin(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m);
uint64_t cr__exec_f32x(const cr__insn_t *in, uint64_t a, uint64_t b, uint64_t c);
uint64_t cr__exec_f64x(const cr__insn_t *in, uint64_t a, uint64_t b, uint64_t c);

#endif
