/* The warp interpreter: runs one warp of a decoded program, 32 lanes in lockstep.
 *
 * Registers are slots of 32 lanes (R[slot * 32 + lane]), so each instruction is one dispatch
 * and a tight loop over its lanes. Lanes that diverge keep their own pc; the warp always runs
 * the lanes at the smallest pc among those that can run, which reconverges structured code at
 * the first instruction both paths reach. A call pushes a frame holding the calling lanes:
 * only they run until all of them have returned, then the others resume. Lanes that reach a
 * barrier wait there until the block's barrier completes (grid.c runs the other warps). */
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "exec.h"

int cr__fault(cr__worker_t *wk, const cr__warp_t *w, uint32_t lane, int code, const char *fmt, ...)
{
    if (wk->fault)
        return wk->fault;
    wk->fault = code;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const cr__prog_t *p = wk->prog;
    if (!w) {
        snprintf(wk->fault_msg, sizeof wk->fault_msg, "kernel %s: %s", p->name, what);
        return code;
    }
    const uint64_t *R = w->R;
    uint32_t line = 0;
    const cr__ir_t *ir = &wk->job->module->ir;
    const char *text = "?";
    if (w->pc < p->ncode && p->src[w->pc] < ir->ninsns) {
        line = ir->insns[p->src[w->pc]].line;
        text = cr__ir_str(ir, ir->insns[p->src[w->pc]].text);
    }
    snprintf(wk->fault_msg, sizeof wk->fault_msg,
             "kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s (PTX line %u: %s)", p->name,
             wk->ctaid[0], wk->ctaid[1], wk->ctaid[2],
             (unsigned)R[CR__SLOT_TID_X * CR__WARP_SIZE + lane],
             (unsigned)R[CR__SLOT_TID_Y * CR__WARP_SIZE + lane],
             (unsigned)R[CR__SLOT_TID_Z * CR__WARP_SIZE + lane], what, line, text);
    return code;
}

/* ---- scheduling ---- */

static uint32_t frame_mask(const cr__warp_t *w)
{
    return w->depth ? w->frames[w->depth - 1].mask : w->valid;
}

/* Returns from the top call frame: copies the results into the caller's frame, restores the
 * frame base and (recursion) the callee's registers. */
static void pop_frame(cr__worker_t *wk, cr__warp_t *w)
{
    const cr__prog_t *p = wk->prog;
    cr__frame_t *f = &w->frames[w->depth - 1];
    const cr__call_t *c = &p->calls[f->call];
    const cr__pfunc_t *callee = &p->funcs[f->callee];
    uint32_t caller_size = p->funcs[c->caller].frame_size;
    uint64_t *frame = w->R + CR__SLOT_FRAME * CR__WARP_SIZE;
    uint32_t lanes = f->mask & ~w->exited;
    for (uint32_t mm = lanes; mm; mm &= mm - 1) {
        uint32_t l = (uint32_t)__builtin_ctz(mm);
        uint8_t *local = wk->local + (size_t)(w->index * CR__WARP_SIZE + l) * wk->local_stride;
        uint64_t base = frame[l];
        for (uint32_t k = 0; k < c->ret_count; k++) {
            const cr__copy_t *cp = &p->copies[c->ret_first + k];
            uint32_t from = cp->from, size = cp->size;
            if (c->func == CR__CALL_INDIRECT) { /* the callee's side from its own list */
                if (k >= callee->ret_count)
                    break;
                const cr__copy_t *ret = &p->copies[callee->ret_first + k];
                from = ret->from;
                size = size < ret->size ? size : ret->size;
            }
            memmove(local + base - caller_size + cp->to, local + base + from, size);
        }
        frame[l] = base - caller_size;
        w->lane_pc[l] = f->ret_pc;
    }
    if (f->saved >= 0) {
        size_t n = (size_t)callee->reg_count * CR__WARP_SIZE;
        memcpy(w->R + (size_t)callee->reg_base * CR__WARP_SIZE, w->save_stack + f->saved,
               n * sizeof(uint64_t));
        w->save_used = (size_t)f->saved;
    }
    w->returned = f->caller_returned;
    w->depth--;
}

int cr__warp_schedule(cr__worker_t *wk, cr__warp_t *w)
{
    for (uint32_t mm = w->active; mm; mm &= mm - 1)
        w->lane_pc[__builtin_ctz(mm)] = w->pc;
    for (;;) {
        uint32_t fm = frame_mask(w);
        uint32_t run = fm & ~w->exited & ~w->waiting & ~w->returned;
        if (!run) {
            if (w->depth && !(fm & w->waiting & ~w->exited)) {
                pop_frame(wk, w);
                continue;
            }
            w->active = 0;
            w->next_pc = UINT32_MAX;
            return 0;
        }
        uint32_t best = UINT32_MAX, act = 0, next = UINT32_MAX;
        for (uint32_t mm = run; mm; mm &= mm - 1) {
            uint32_t l = (uint32_t)__builtin_ctz(mm), pc = w->lane_pc[l];
            if (pc < best) {
                if (best != UINT32_MAX)
                    next = best;
                best = pc;
                act = 1u << l;
            } else if (pc == best) {
                act |= 1u << l;
            } else if (pc < next) {
                next = pc;
            }
        }
        w->pc = best;
        w->active = act;
        w->next_pc = next;
        return 1;
    }
}

/* ---- helpers ---- */

static inline uint32_t guard_mask(const uint64_t *P, uint32_t m, int negate)
{
    uint32_t g = 0;
    for (uint32_t l = 0; l < CR__WARP_SIZE; l++)
        g |= (uint32_t)(P[l] != 0) << l;
    return (negate ? ~g : g) & m;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t sx(uint64_t v, unsigned bits)
{
    if (bits >= 64)
        return v;
    uint64_t m = 1ull << (bits - 1);
    v &= (m << 1) - 1;
    return (v ^ m) - m;
}

static inline uint64_t mask_bytes(unsigned bytes)
{
    return bytes >= 8 ? ~0ull : (1ull << (bytes * 8)) - 1;
}

static uint32_t bfind(uint64_t a, cr__type_t t, int shiftamt)
{
    unsigned bits = t == CR__T_U64 || t == CR__T_S64 ? 64 : 32;
    if (bits == 32)
        a &= 0xffffffffull;
    if ((t == CR__T_S32 || t == CR__T_S64) && (a >> (bits - 1)) & 1)
        a = ~a & (bits == 64 ? ~0ull : 0xffffffffull);
    if (!a)
        return 0xffffffffu;
    uint32_t pos = 63 - (uint32_t)__builtin_clzll(a);
    return shiftamt ? bits - 1 - pos : pos;
}

static uint64_t bfe(uint64_t a, uint32_t pos, uint32_t len, cr__type_t t)
{
    unsigned bits = t == CR__T_U64 || t == CR__T_S64 ? 64 : 32;
    int sgn = t == CR__T_S32 || t == CR__T_S64;
    uint32_t msb = bits - 1;
    pos &= 0xff;
    len &= 0xff;
    if (bits == 32)
        a &= 0xffffffffull;
    uint64_t sbit = 0;
    if (sgn && len) {
        uint32_t top = pos + len - 1 > msb ? msb : pos + len - 1;
        sbit = (a >> top) & 1;
    }
    uint64_t d = 0;
    for (uint32_t i = 0; i <= msb; i++) {
        uint64_t bit = (i < len && pos + i <= msb) ? (a >> (pos + i)) & 1 : sbit;
        d |= bit << i;
    }
    return d;
}

static uint64_t bfi(uint64_t a, uint64_t b, uint32_t pos, uint32_t len, unsigned bits)
{
    pos &= 0xff;
    len &= 0xff;
    uint64_t f = b;
    for (uint32_t i = 0; i < len && pos + i < bits; i++)
        f = (f & ~(1ull << (pos + i))) | (((a >> i) & 1) << (pos + i));
    return bits == 32 ? (uint32_t)f : f;
}

static uint32_t prmt(uint32_t a, uint32_t b, uint32_t c, int mode)
{
    uint64_t x = (uint64_t)b << 32 | a;
    uint8_t byte[8];
    for (int i = 0; i < 8; i++)
        byte[i] = (uint8_t)(x >> (8 * i));
    uint32_t d = 0;
    if (mode == 0) {
        for (int i = 0; i < 4; i++) {
            uint32_t sel = (c >> (4 * i)) & 0xf;
            uint8_t v = byte[sel & 7];
            if (sel & 8)
                v = (v & 0x80) ? 0xff : 0;
            d |= (uint32_t)v << (8 * i);
        }
        return d;
    }
    static const uint8_t table[6][4][4] = {
        /* f4e */ {{0, 1, 2, 3}, {1, 2, 3, 4}, {2, 3, 4, 5}, {3, 4, 5, 6}},
        /* b4e */ {{0, 7, 6, 5}, {1, 0, 7, 6}, {2, 1, 0, 7}, {3, 2, 1, 0}},
        /* rc8 */ {{0, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}},
        /* ecl */ {{0, 1, 2, 3}, {1, 1, 2, 3}, {2, 2, 2, 3}, {3, 3, 3, 3}},
        /* ecr */ {{0, 0, 0, 0}, {0, 1, 1, 1}, {0, 1, 2, 2}, {0, 1, 2, 3}},
        /* rc16 */ {{0, 1, 0, 1}, {2, 3, 2, 3}, {0, 1, 0, 1}, {2, 3, 2, 3}},
    };
    const uint8_t *sel = table[mode - 1][c & 3];
    for (int i = 0; i < 4; i++)
        d |= (uint32_t)byte[sel[i]] << (8 * i);
    return d;
}

static uint32_t lop3(uint32_t a, uint32_t b, uint32_t c, uint32_t lut)
{
    uint32_t r = 0;
    for (int k = 0; k < 8; k++)
        if (lut >> k & 1)
            r |= ((k & 4) ? a : ~a) & ((k & 2) ? b : ~b) & ((k & 1) ? c : ~c);
    return r;
}

static uint32_t dp4a(uint32_t a, uint32_t b, uint32_t c, int sa, int sb)
{
    int64_t sum = (int32_t)c;
    for (int i = 0; i < 4; i++) {
        int64_t x = sa ? (int8_t)(a >> (8 * i)) : (uint8_t)(a >> (8 * i));
        int64_t y = sb ? (int8_t)(b >> (8 * i)) : (uint8_t)(b >> (8 * i));
        sum += x * y;
    }
    return (uint32_t)sum;
}

static uint32_t dp2a(uint32_t a, uint32_t b, uint32_t c, int sa, int sb, int hi)
{
    int64_t sum = (int32_t)c;
    for (int i = 0; i < 2; i++) {
        int64_t x = sa ? (int16_t)(a >> (16 * i)) : (uint16_t)(a >> (16 * i));
        int64_t y = sb ? (int8_t)(b >> (8 * (i + 2 * hi))) : (uint8_t)(b >> (8 * (i + 2 * hi)));
        sum += x * y;
    }
    return (uint32_t)sum;
}

/* SIMD video instructions (vadd4, vabsdiff2, ...): per byte or halfword lane, with saturation,
 * merged with c (all lanes selected) or summed into c (.add). */
static uint32_t vsimd(const cr__insn_t *in, uint32_t a, uint32_t b, uint32_t c)
{
    unsigned f = in->sub2, bits = (f & CR__V_HALVES) ? 16 : 8, n = 32 / bits;
    uint32_t mask = (1u << bits) - 1, d = 0;
    int64_t sum = 0;
    int64_t lo = (f & CR__V_SIGNED_D) ? -(1ll << (bits - 1)) : 0;
    int64_t hi = (f & CR__V_SIGNED_D) ? (1ll << (bits - 1)) - 1 : (1ll << bits) - 1;
    for (unsigned i = 0; i < n; i++) {
        uint32_t ua = (a >> (i * bits)) & mask, ub = (b >> (i * bits)) & mask;
        int64_t x = (f & CR__V_SIGNED_A) ? (int64_t)sx(ua, bits) : (int64_t)ua;
        int64_t y = (f & CR__V_SIGNED_B) ? (int64_t)sx(ub, bits) : (int64_t)ub, t;
        switch (in->sub) {
        case CR__ATOM_ADD:
            t = x + y;
            break;
        case CR__V_SUB:
            t = x - y;
            break;
        case CR__V_AVRG:
            t = (x + y + 1) >> 1;
            break;
        case CR__V_ABSDIFF:
            t = x > y ? x - y : y - x;
            break;
        case CR__ATOM_MIN:
            t = x < y ? x : y;
            break;
        default:
            t = x > y ? x : y;
            break;
        }
        if (f & CR__V_SAT)
            t = t < lo ? lo : t > hi ? hi : t;
        if ((f & CR__V_RELU) && t < 0)
            t = 0;
        sum += t;
        d |= ((uint32_t)t & mask) << (i * bits);
    }
    return (f & CR__V_ADD) ? (uint32_t)((int64_t)(int32_t)c + sum) : d;
}

static uint64_t carry_op(const cr__insn_t *in, uint64_t a, uint64_t b, uint64_t c, uint64_t *cc)
{
    int wide = in->sub2 & CR__CARRY_64;
    uint64_t cin = (in->sub2 & CR__CARRY_IN) ? *cc & 1 : 0;
    unsigned __int128 r;
    uint64_t m = wide ? ~0ull : 0xffffffffull;
    a &= m;
    b &= m;
    c &= m;
    switch (in->sub) {
    case CR__CARRY_SUB: {
        /* the flag is the borrow */
        unsigned __int128 sub = (unsigned __int128)b + cin;
        uint64_t res = (uint64_t)((unsigned __int128)a - sub) & m;
        if (in->sub2 & CR__CARRY_OUT)
            *cc = (unsigned __int128)a < sub;
        return res;
    }
    case CR__CARRY_MADLO:
    case CR__CARRY_MADHI: {
        uint64_t prod;
        if (in->sub2 & CR__CARRY_SIGNED)
            prod = (uint64_t)((int64_t)(int32_t)a * (int64_t)(int32_t)b);
        else
            prod = a * b;
        uint64_t part =
            in->sub == CR__CARRY_MADLO ? prod & 0xffffffffull : prod >> 32 & 0xffffffffull;
        r = (unsigned __int128)part + c + cin;
        break;
    }
    default:
        r = (unsigned __int128)a + b + cin;
        break;
    }
    if (in->sub2 & CR__CARRY_OUT)
        *cc = (uint64_t)(r >> (wide ? 64 : 32)) & 1;
    return (uint64_t)r & m;
}

/* testp on the value's own format (a float subnormal is a normal double). */
#define TESTP(x, op)                                                                               \
    ((op) == 0   ? isfinite(x)                                                                     \
     : (op) == 1 ? isinf(x)                                                                        \
     : (op) == 2 ? !isnan(x)                                                                       \
     : (op) == 3 ? isnan(x)                                                                        \
     : (op) == 4 ? (isnormal(x) || (x) == 0)                                                       \
                 : fpclassify(x) == FP_SUBNORMAL)

/* Float compare (ordered and unordered forms). */
static inline int fcmp(int cmp, double a, double b)
{
    int un = isnan(a) || isnan(b);
    switch (cmp) {
    case CR__CMP_EQ:
        return !un && a == b;
    case CR__CMP_NE:
        return !un && a != b;
    case CR__CMP_LT:
        return !un && a < b;
    case CR__CMP_LE:
        return !un && a <= b;
    case CR__CMP_GT:
        return !un && a > b;
    case CR__CMP_GE:
        return !un && a >= b;
    case CR__CMP_EQU:
        return un || a == b;
    case CR__CMP_NEU:
        return un || a != b;
    case CR__CMP_LTU:
        return un || a < b;
    case CR__CMP_LEU:
        return un || a <= b;
    case CR__CMP_GTU:
        return un || a > b;
    case CR__CMP_GEU:
        return un || a >= b;
    case CR__CMP_NUM:
        return !un;
    default:
        return un;
    }
}

#define ICMP(cmp, x, y)                                                                            \
    ((cmp) == CR__CMP_EQ   ? (x) == (y)                                                            \
     : (cmp) == CR__CMP_NE ? (x) != (y)                                                            \
     : (cmp) == CR__CMP_LT ? (x) < (y)                                                             \
     : (cmp) == CR__CMP_LE ? (x) <= (y)                                                            \
     : (cmp) == CR__CMP_GT ? (x) > (y)                                                             \
                           : (x) >= (y))

/* The raw comparison of setp/set for one lane, by the setp opcode. */
static int compare(unsigned op, int cmp, uint64_t a, uint64_t b, unsigned flags)
{
    switch (op) {
    case CR__OP_SETP_U16:
        return ICMP(cmp, (uint16_t)a, (uint16_t)b);
    case CR__OP_SETP_S16:
        return ICMP(cmp, (int16_t)a, (int16_t)b);
    case CR__OP_SETP_U32:
        return ICMP(cmp, (uint32_t)a, (uint32_t)b);
    case CR__OP_SETP_S32:
        return ICMP(cmp, (int32_t)a, (int32_t)b);
    case CR__OP_SETP_U64:
        return ICMP(cmp, a, b);
    case CR__OP_SETP_S64:
        return ICMP(cmp, (int64_t)a, (int64_t)b);
    case CR__OP_SETP_F32: {
        float x = F32(a), y = F32(b);
        if (flags & CR__SETP_FTZ) {
            x = cr__ftz32(x);
            y = cr__ftz32(y);
        }
        return fcmp(cmp, x, y);
    }
    case CR__OP_SETP_F64:
        return fcmp(cmp, F64(a), F64(b));
    default:
        return cr__half_cmp(cmp, (flags & CR__SETP_BF) != 0, (uint16_t)a, (uint16_t)b);
    }
}

static void exec_setp(uint64_t *R, const cr__insn_t *in, uint32_t m)
{
    uint64_t *d = SLOT(in->r[0]);
    const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]);
    unsigned op = in->op == CR__OP_SET ? in->n : in->op, f = in->sub2;
    int cmp = in->sub;
    if (!(f & (CR__SETP_COMBINE_MASK | CR__SETP_PAIR)) && in->op != CR__OP_SET) {
        switch (op) {
        case CR__OP_SETP_S32:
            LANES(d[l] = (uint64_t)ICMP(cmp, (int32_t)a[l], (int32_t)b[l]));
            return;
        case CR__OP_SETP_U32:
            LANES(d[l] = (uint64_t)ICMP(cmp, (uint32_t)a[l], (uint32_t)b[l]));
            return;
        case CR__OP_SETP_S64:
            LANES(d[l] = (uint64_t)ICMP(cmp, (int64_t)a[l], (int64_t)b[l]));
            return;
        case CR__OP_SETP_U64:
            LANES(d[l] = (uint64_t)ICMP(cmp, a[l], b[l]));
            return;
        case CR__OP_SETP_F32:
            if (!(f & CR__SETP_FTZ)) {
                LANES(d[l] = (uint64_t)fcmp(cmp, F32(a[l]), F32(b[l])));
                return;
            }
            break;
        default:
            break;
        }
    }
    const uint64_t *c = SLOT(in->r[3]);
    uint64_t *q = (f & CR__SETP_PAIR) ? SLOT(in->r[4]) : NULL;
    unsigned comb = f & CR__SETP_COMBINE_MASK;
    LANES({
        int t = compare(op, cmp, a[l], b[l], f);
        int nt = !t;
        if (comb) {
            int cv = (c[l] != 0) ^ ((f & CR__SETP_NOT_C) != 0);
            t = comb == 1 ? (t & cv) : comb == 2 ? (t | cv) : (t ^ cv);
            nt = comb == 1 ? (nt & cv) : comb == 2 ? (nt | cv) : (nt ^ cv);
        }
        if (in->op == CR__OP_SET)
            d[l] = t ? ((f & CR__SET_FLOAT_DEST) ? 0x3f800000u : 0xffffffffu) : 0;
        else
            d[l] = (uint64_t)t;
        if (q)
            q[l] = (uint64_t)nt;
    });
}

static void exec_cvt(uint64_t *R, const cr__insn_t *in, uint32_t m)
{
    uint64_t *d = SLOT(in->r[0]);
    const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]);
    cr__type_t dt = (cr__type_t)(in->sub2 & 0xff), st = (cr__type_t)(in->sub2 >> 8);
    int rnd = in->sub & 7, irnd = (in->sub >> 3) & 1, sat = (in->sub >> 4) & 1,
        ftz = (in->sub >> 5) & 1, relu = (in->sub >> 6) & 1, pack = (in->sub >> 7) & 1;
    unsigned reg = in->n, dsize = cr__type_size(dt);
    uint64_t regmask = mask_bytes(reg);
    LANES({
        uint64_t v;
        if (pack) {
            cr__type_t half = dt == CR__T_F16X2 ? CR__T_F16 : CR__T_BF16;
            uint64_t hi = cr__cvt(a[l], half, st, rnd, 0, sat, ftz);
            uint64_t lo = cr__cvt(b[l], half, st, rnd, 0, sat, ftz);
            if (relu) {
                if (hi & 0x8000)
                    hi = (hi & 0x7fff) > (half == CR__T_F16 ? 0x7c00u : 0x7f80u) ? hi : 0;
                if (lo & 0x8000)
                    lo = (lo & 0x7fff) > (half == CR__T_F16 ? 0x7c00u : 0x7f80u) ? lo : 0;
            }
            v = (hi & 0xffff) << 16 | (lo & 0xffff);
        } else {
            v = cr__cvt(a[l], dt, st, rnd, irnd, sat, ftz);
            if (relu && (dt == CR__T_F16 || dt == CR__T_BF16) && (v & 0x8000) &&
                (v & 0x7fff) <= (dt == CR__T_F16 ? 0x7c00u : 0x7f80u))
                v = 0;
            if (reg > dsize && cr__type_signed(dt))
                v = sx(v, dsize * 8);
        }
        d[l] = v & regmask;
    });
}

/* ---- the interpreter loop ---- */

int cr__warp_run(cr__worker_t *wk, cr__warp_t *w, uint32_t budget)
{
    const cr__prog_t *p = wk->prog;
    const cr__insn_t *code = p->code;
    uint64_t *R = w->R;
    uint32_t pc = w->pc, active = w->active, next_pc = w->next_pc;
    int rc = 0;

/* Leaves the loop state in w, runs `stmt`, takes the state back. */
#define SYNC_OUT() (w->pc = pc, w->active = active, w->next_pc = next_pc)
#define SYNC_IN() (pc = w->pc, active = w->active, next_pc = w->next_pc)
/* Reschedules after control flow; returns from the run when nothing can run. */
#define RESCHEDULE()                                                                               \
    do {                                                                                           \
        SYNC_OUT();                                                                                \
        if (!cr__warp_schedule(wk, w))                                                             \
            return 0;                                                                              \
        SYNC_IN();                                                                                 \
    } while (0)

    if (!active) {
        if (!cr__warp_schedule(wk, w))
            return 0;
        SYNC_IN();
    }
    while (budget--) {
        const cr__insn_t *in = &code[pc];
        uint32_t m = active;
        if (in->guard)
            m = guard_mask(SLOT(in->pred), m, in->guard == 2);
        switch ((cr__op_t)in->op) {
        case CR__OP_NOP:
        case CR__OP_BAR_WARP:
            break;
#include "exec_arith.inc"
        case CR__OP_SETP_U16:
        case CR__OP_SETP_S16:
        case CR__OP_SETP_U32:
        case CR__OP_SETP_S32:
        case CR__OP_SETP_U64:
        case CR__OP_SETP_S64:
        case CR__OP_SETP_F32:
        case CR__OP_SETP_F64:
        case CR__OP_SETP_H:
        case CR__OP_SET:
            exec_setp(R, in, m);
            break;
        case CR__OP_CVT:
            exec_cvt(R, in, m);
            break;
        case CR__OP_CARRY: {
            uint64_t *d = SLOT(in->r[0]), *cc = SLOT(CR__SLOT_CC);
            const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]), *c = SLOT(in->r[3]);
            LANES(d[l] = carry_op(in, a[l], b[l], c[l], &cc[l]));
            break;
        }
        case CR__OP_VSIMD: {
            uint64_t *d = SLOT(in->r[0]);
            const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]), *c = SLOT(in->r[3]);
            LANES(d[l] = vsimd(in, (uint32_t)a[l], (uint32_t)b[l], (uint32_t)c[l]));
            break;
        }
        case CR__OP_BFIND: {
            uint64_t *d = SLOT(in->r[0]);
            const uint64_t *a = SLOT(in->r[1]);
            LANES(d[l] = bfind(a[l], (cr__type_t)in->sub2, in->sub));
            break;
        }
        case CR__OP_BFE: {
            uint64_t *d = SLOT(in->r[0]);
            const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]), *c = SLOT(in->r[3]);
            LANES(d[l] = bfe(a[l], (uint32_t)b[l], (uint32_t)c[l], (cr__type_t)in->sub2));
            break;
        }
        case CR__OP_BFI: {
            uint64_t *d = SLOT(in->r[0]);
            const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]), *c = SLOT(in->r[3]),
                           *e = SLOT(in->r[4]);
            unsigned bits = in->sub2 == CR__T_B64 ? 64 : 32;
            LANES(d[l] = bfi(a[l], b[l], (uint32_t)c[l], (uint32_t)e[l], bits));
            break;
        }
        case CR__OP_PRMT: {
            uint64_t *d = SLOT(in->r[0]);
            const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]), *c = SLOT(in->r[3]);
            LANES(d[l] = prmt((uint32_t)a[l], (uint32_t)b[l], (uint32_t)c[l], in->sub));
            break;
        }
        case CR__OP_LOP3: {
            uint64_t *d = SLOT(in->r[0]);
            const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]), *c = SLOT(in->r[3]);
            LANES(d[l] = lop3((uint32_t)a[l], (uint32_t)b[l], (uint32_t)c[l], (uint32_t)in->imm));
            break;
        }
        case CR__OP_DP4A:
        case CR__OP_DP2A: {
            uint64_t *d = SLOT(in->r[0]);
            const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]), *c = SLOT(in->r[3]);
            int sa = in->sub & 1, sb = (in->sub >> 1) & 1, hi = (in->sub >> 2) & 1;
            if (in->op == CR__OP_DP4A)
                LANES(d[l] = dp4a((uint32_t)a[l], (uint32_t)b[l], (uint32_t)c[l], sa, sb));
            else
                LANES(d[l] = dp2a((uint32_t)a[l], (uint32_t)b[l], (uint32_t)c[l], sa, sb, hi));
            break;
        }
        case CR__OP_TESTP_F32:
        case CR__OP_TESTP_F64: {
            uint64_t *d = SLOT(in->r[0]);
            const uint64_t *a = SLOT(in->r[1]);
            if (in->op == CR__OP_TESTP_F32)
                LANES(d[l] = (uint64_t)TESTP(F32(a[l]), in->sub));
            else
                LANES(d[l] = (uint64_t)TESTP(F64(a[l]), in->sub));
            break;
        }
        case CR__OP_F32_X: {
            uint64_t *d = SLOT(in->r[0]);
            const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]), *c = SLOT(in->r[3]);
            LANES(d[l] = cr__exec_f32x(in, a[l], b[l], c[l]));
            break;
        }
        case CR__OP_F64_X: {
            uint64_t *d = SLOT(in->r[0]);
            const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]), *c = SLOT(in->r[3]);
            LANES(d[l] = cr__exec_f64x(in, a[l], b[l], c[l]));
            break;
        }
        case CR__OP_HALF: {
            uint64_t *d = SLOT(in->r[0]);
            const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]), *c = SLOT(in->r[3]);
            int bf = (in->sub2 & CR__FF_BF) != 0, x2 = (in->sub2 & CR__FF_X2) != 0;
            LANES(d[l] = cr__half_op(in->sub, bf, x2, a[l], b[l], c[l], in->sub2));
            break;
        }
        case CR__OP_MOV_PACK: {
            uint64_t *d = SLOT(in->r[0]);
            unsigned eb = in->sub * 8u;
            uint64_t em = mask_bytes(in->sub);
            LANES({
                uint64_t v = 0;
                for (unsigned k = 0; k < in->n; k++)
                    v |= (R[(size_t)in->r[k + 1] * CR__WARP_SIZE + l] & em) << (k * eb);
                d[l] = v;
            });
            break;
        }
        case CR__OP_MOV_UNPACK: {
            const uint64_t *a = SLOT(in->r[4]);
            unsigned eb = in->sub * 8u;
            uint64_t em = mask_bytes(in->sub);
            LANES({
                uint64_t v = a[l];
                for (unsigned k = 0; k < in->n; k++)
                    R[(size_t)in->r[k] * CR__WARP_SIZE + l] = (v >> (k * eb)) & em;
            });
            break;
        }
        case CR__OP_CLOCK:
        case CR__OP_CLOCK64:
        case CR__OP_GLOBALTIMER: {
            uint64_t *d = SLOT(in->r[0]);
            uint64_t t = now_ns();
            if (in->op == CR__OP_CLOCK)
                t = in->sub ? t >> 32 : (uint32_t)t;
            if (in->op == CR__OP_GLOBALTIMER && in->sub)
                t = in->sub == 1 ? (uint32_t)t : t >> 32;
            LANES(d[l] = t);
            break;
        }
        case CR__OP_LD_GLOBAL:
        case CR__OP_LD_SHARED:
        case CR__OP_LD_LOCAL:
        case CR__OP_LD_PARAM:
        case CR__OP_LD_GENERIC:
            if (!m)
                break;
            SYNC_OUT();
            if ((rc = cr__exec_ld(wk, w, in, m)))
                return rc;
            break;
        case CR__OP_ST_GLOBAL:
        case CR__OP_ST_SHARED:
        case CR__OP_ST_LOCAL:
        case CR__OP_ST_GENERIC:
            if (!m)
                break;
            SYNC_OUT();
            if ((rc = cr__exec_st(wk, w, in, m)))
                return rc;
            break;
        case CR__OP_ATOM_GLOBAL:
        case CR__OP_ATOM_SHARED:
        case CR__OP_ATOM_GENERIC:
            if (!m)
                break;
            SYNC_OUT();
            if ((rc = cr__exec_atom(wk, w, in, m)))
                return rc;
            break;
        case CR__OP_CP_ASYNC:
            if (!m)
                break;
            SYNC_OUT();
            if ((rc = cr__exec_cp_async(wk, w, in, m)))
                return rc;
            break;
        case CR__OP_WMMA:
            SYNC_OUT();
            if ((rc = cr__exec_wmma(wk, w, in, m)))
                return rc;
            break;
        case CR__OP_SHFL:
            SYNC_OUT();
            cr__exec_shfl(wk, w, in, m);
            break;
        case CR__OP_VOTE:
            cr__exec_vote(w, in, m);
            break;
        case CR__OP_MATCH:
            cr__exec_match(w, in, m);
            break;
        case CR__OP_REDUX:
            cr__exec_redux(w, in, m);
            break;
        case CR__OP_ACTIVEMASK: {
            uint64_t *d = SLOT(in->r[0]);
            LANES(d[l] = active);
            break;
        }
        case CR__OP_ELECT: {
            uint64_t *d = SLOT(in->r[0]), *q = SLOT(in->r[1]);
            const uint64_t *mk = SLOT(in->r[2]);
            uint32_t sel = m ? m & (uint32_t)mk[__builtin_ctz(m)] : 0;
            uint32_t leader = sel ? (uint32_t)__builtin_ctz(sel) : CR__WARP_SIZE;
            LANES({
                d[l] = leader;
                q[l] = l == leader;
            });
            break;
        }
        case CR__OP_FENCE:
            if (m)
                atomic_thread_fence(memory_order_seq_cst);
            break;
        case CR__OP_BRA: {
            uint32_t target = (uint32_t)in->imm;
            if (m == active) {
                pc = target;
                if (pc >= next_pc)
                    RESCHEDULE();
                goto next;
            }
            if (m) {
                for (uint32_t mm = m; mm; mm &= mm - 1)
                    w->lane_pc[__builtin_ctz(mm)] = target;
                active &= ~m;
                pc++;
                RESCHEDULE();
                goto next;
            }
            break;
        }
        case CR__OP_CALL:
            if (!m)
                break;
            SYNC_OUT();
            if ((rc = cr__exec_call(wk, w, in, m)))
                return rc;
            if (!cr__warp_schedule(wk, w))
                return 0;
            SYNC_IN();
            goto next;
        case CR__OP_RET:
            if (!m)
                break;
            w->returned |= m;
            active &= ~m;
            if (!active) {
                pc++;
                RESCHEDULE();
                goto next;
            }
            break;
        case CR__OP_EXIT:
            if (!m)
                break;
            w->exited |= m;
            wk->live -= (uint32_t)__builtin_popcount(m);
            active &= ~m;
            cr__barrier_check(wk); /* may release lanes of this warp too */
            pc++;
            RESCHEDULE();
            goto next;
        case CR__OP_BAR: {
            if (!m)
                break;
            SYNC_OUT();
            for (uint32_t mm = m; mm; mm &= mm - 1)
                w->lane_pc[__builtin_ctz(mm)] = pc + 1;
            if (cr__barrier_arrive(wk, w, in, m))
                active &= ~m;
            if (wk->fault)
                return wk->fault;
            pc++;
            RESCHEDULE();
            goto next;
        }
        case CR__OP_TRAP:
            if (!m)
                break;
            SYNC_OUT();
            return cr__fault(wk, w, (uint32_t)__builtin_ctz(m), CR__CU_ILLEGAL_INSTRUCTION,
                             in->sub ? "breakpoint (brkpt)" : "trap");
        case CR__OP_VPRINTF:
        case CR__OP_ASSERTFAIL:
        case CR__OP_SETCOND:
            if (!m)
                break;
            SYNC_OUT();
            if ((rc = cr__exec_builtin(wk, w, in, m)))
                return rc;
            break;
        case CR__OP_UNSUPPORTED:
            SYNC_OUT();
            return cr__fault(wk, w, m ? (uint32_t)__builtin_ctz(m) : 0, CR__CU_NOT_SUPPORTED,
                             "unsupported instruction: %s",
                             in->r[0] < p->nwhy ? p->why[in->r[0]] : "?");
        default:
            SYNC_OUT();
            return cr__fault(wk, w, 0, CR__CU_NOT_SUPPORTED, "opcode %s not implemented",
                             cr__op_name(in->op));
        }
        pc++;
        if (CR__UNLIKELY(pc >= next_pc))
            RESCHEDULE();
    next:;
    }
    SYNC_OUT();
    return 0;
#undef SYNC_OUT
#undef SYNC_IN
#undef RESCHEDULE
}
