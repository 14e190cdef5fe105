/* One PTX instruction -> executable instruction(s): picks the opcode from the base, the types
 * and the modifiers, and resolves operands to slots, constants and addresses. What the
 * interpreter cannot run becomes an UNSUPPORTED instruction with the reason, so a module still
 * loads and only launches that can reach it fail. */
#include <string.h>

#include "decode.h"

typedef struct {
    const cr__ir_insn_t *src;
    const cr__opd_t *pool; /* the instruction's operands */
    uint32_t top[24];      /* pool index of each top-level operand */
    uint32_t ntop;
    cr__type_t types[4];
    uint32_t ntypes;
    uint8_t mods[256]; /* 1 for each modifier present */
} view_t;

static int has(const view_t *v, unsigned mod)
{
    return mod < 256 && v->mods[mod];
}

static const cr__opd_t *opd(const view_t *v, uint32_t i)
{
    return &v->pool[v->top[i]];
}

/* The i-th operand as a value slot of type t (UINT32_MAX when it cannot be one). */
static uint32_t val(cr__dc_t *dc, const view_t *v, uint32_t i, cr__type_t t)
{
    if (i >= v->ntop)
        return UINT32_MAX;
    return cr__dc_value(dc, opd(v, i), t);
}

/* The i-th operand as a destination slot: a register or `_`. */
static uint32_t dst(cr__dc_t *dc, const view_t *v, uint32_t i)
{
    if (i >= v->ntop)
        return UINT32_MAX;
    const cr__opd_t *o = opd(v, i);
    if (o->kind == CR__O_REG)
        return cr__dc_reg_slot(dc, o->id);
    if (o->kind == CR__O_SINK)
        return CR__SLOT_SINK;
    return UINT32_MAX;
}

static unsigned dst_bytes(cr__dc_t *dc, const view_t *v, uint32_t i)
{
    if (i >= v->ntop || opd(v, i)->kind != CR__O_REG)
        return 8;
    unsigned b = cr__type_size(cr__dc_reg_type(dc, opd(v, i)->id));
    return b ? b : 8;
}

static int width_index(cr__type_t t)
{
    switch (cr__type_size(t)) {
    case 2:
        return 0;
    case 4:
        return 1;
    case 8:
        return 2;
    default:
        return -1;
    }
}

static int is_int(cr__type_t t)
{
    return t != CR__T_NONE && t != CR__T_PRED && !cr__type_float(t) && t != CR__T_U16X2 &&
           t != CR__T_S16X2 && t != CR__T_B128 && t != CR__T_B8 && t != CR__T_U8 && t != CR__T_S8;
}

static int is_half(cr__type_t t)
{
    return t == CR__T_F16 || t == CR__T_BF16 || t == CR__T_F16X2 || t == CR__T_BF16X2;
}

/* Rounding modifier: CR__RND_* or -1 when none. */
static int rounding(const view_t *v)
{
    if (has(v, CR__M_rn))
        return CR__RND_RN;
    if (has(v, CR__M_rz))
        return CR__RND_RZ;
    if (has(v, CR__M_rm))
        return CR__RND_RM;
    if (has(v, CR__M_rp))
        return CR__RND_RP;
    if (has(v, CR__M_rna))
        return CR__RND_RNA;
    return -1;
}

static int int_rounding(const view_t *v)
{
    if (has(v, CR__M_rni))
        return CR__RND_RN;
    if (has(v, CR__M_rzi))
        return CR__RND_RZ;
    if (has(v, CR__M_rmi))
        return CR__RND_RM;
    if (has(v, CR__M_rpi))
        return CR__RND_RP;
    return -1;
}

/* Flags of a floating-point operation (CR__FF_*). */
static unsigned float_flags(const view_t *v, cr__type_t t)
{
    int r = rounding(v);
    unsigned f = r < 0 ? (CR__FF_DEFAULT_RND | CR__RND_RN) : (unsigned)r;
    if (has(v, CR__M_ftz))
        f |= CR__FF_FTZ;
    if (has(v, CR__M_sat) || has(v, CR__M_satfinite))
        f |= CR__FF_SAT;
    if (has(v, CR__M_NaN))
        f |= CR__FF_NAN;
    if (has(v, CR__M_relu))
        f |= CR__FF_RELU;
    if (t == CR__T_BF16 || t == CR__T_BF16X2)
        f |= CR__FF_BF;
    if (t == CR__T_F16X2 || t == CR__T_BF16X2)
        f |= CR__FF_X2;
    return f;
}

/* Fills in a floating-point operation: the fast opcode when no modifier asks for more, else
 * the generic one. fast32/fast64 may be NOP when there is none. */
static const char *float_op(const view_t *v, cr__insn_t *in, cr__type_t t, int fop, unsigned fast32,
                            unsigned fast64)
{
    unsigned f = float_flags(v, t);
    unsigned plain = (f & ~(CR__FF_RND_MASK | CR__FF_DEFAULT_RND)) == 0 &&
                     ((f & CR__FF_DEFAULT_RND) || (f & CR__FF_RND_MASK) == CR__RND_RN);
    if (t == CR__T_F32) {
        in->op = plain && fast32 != CR__OP_NOP ? fast32 : CR__OP_F32_X;
    } else if (t == CR__T_F64) {
        in->op = plain && fast64 != CR__OP_NOP ? fast64 : CR__OP_F64_X;
    } else if (is_half(t)) {
        in->op = CR__OP_HALF;
    } else {
        return "unsupported type";
    }
    in->sub = (uint8_t)fop;
    in->sub2 = (uint16_t)f;
    return NULL;
}

/* d, a[, b[, c]] value operands of type t into r[0..]. */
static const char *operands(cr__dc_t *dc, const view_t *v, cr__insn_t *in, uint32_t nsrc,
                            cr__type_t t)
{
    if (v->ntop != nsrc + 1)
        return "wrong number of operands";
    if ((in->r[0] = dst(dc, v, 0)) == UINT32_MAX)
        return "bad destination";
    for (uint32_t i = 1; i <= nsrc; i++)
        if ((in->r[i] = val(dc, v, i, t)) == UINT32_MAX)
            return "bad source operand";
    return NULL;
}

/* The atomic operation modifier, or -1. */
static int atom_op(const view_t *v)
{
    static const struct {
        unsigned mod;
        int op;
    } map[] = {{CR__M_add, CR__ATOM_ADD}, {CR__M_min, CR__ATOM_MIN}, {CR__M_max, CR__ATOM_MAX},
               {CR__M_inc, CR__ATOM_INC}, {CR__M_dec, CR__ATOM_DEC}, {CR__M_exch, CR__ATOM_EXCH},
               {CR__M_cas, CR__ATOM_CAS}, {CR__M_and, CR__ATOM_AND}, {CR__M_or, CR__ATOM_OR},
               {CR__M_xor, CR__ATOM_XOR}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (has(v, map[i].mod))
            return map[i].op;
    return -1;
}

static int cmp_op(const view_t *v)
{
    static const struct {
        unsigned mod;
        int cmp;
    } map[] = {{CR__M_eq, CR__CMP_EQ},   {CR__M_ne, CR__CMP_NE},   {CR__M_lt, CR__CMP_LT},
               {CR__M_le, CR__CMP_LE},   {CR__M_gt, CR__CMP_GT},   {CR__M_ge, CR__CMP_GE},
               {CR__M_lo, CR__CMP_LT},   {CR__M_ls, CR__CMP_LE},   {CR__M_hi, CR__CMP_GT},
               {CR__M_hs, CR__CMP_GE},   {CR__M_equ, CR__CMP_EQU}, {CR__M_neu, CR__CMP_NEU},
               {CR__M_ltu, CR__CMP_LTU}, {CR__M_leu, CR__CMP_LEU}, {CR__M_gtu, CR__CMP_GTU},
               {CR__M_geu, CR__CMP_GEU}, {CR__M_num, CR__CMP_NUM}, {CR__M_nan, CR__CMP_NAN}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (has(v, map[i].mod))
            return map[i].cmp;
    return -1;
}

/* ---- memory ---- */

/* The address operand i: base slot and offset for an access to `space`. */
static const char *address(cr__dc_t *dc, const view_t *v, uint32_t i, cr__space_t space,
                           uint32_t *base, int64_t *off, cr__space_t *resolved)
{
    if (i >= v->ntop || opd(v, i)->kind != CR__O_ADDR)
        return "expected an address operand";
    const cr__opd_t *a = opd(v, i);
    *off = a->value;
    *base = CR__SLOT_ZERO;
    *resolved = space;
    if (!a->id)
        return NULL;
    const cr__opd_t *b = a + 1;
    if (b->kind == CR__O_REG) {
        *base = cr__dc_reg_slot(dc, b->id);
        if (space == CR__SP_PARAM) /* a kernel reads its parameters, a function its frame */
            *resolved = dc->pf == 0 ? CR__SP_PARAM : CR__SP_LOCAL;
        return NULL;
    }
    if (b->kind != CR__O_VAR)
        return "bad address base";
    const cr__loc_t *loc = &((const cr__loc_t *)dc->var_loc)[b->id];
    switch (loc->kind) {
    case CR__LOC_SHARED:
        *off += (int64_t)loc->offset;
        if (space == CR__SP_NONE)
            *off += (int64_t)(CR__WIN_SHARED << CR__WIN_SHIFT);
        else if (space != CR__SP_SHARED)
            return "shared variable in another state space";
        return NULL;
    case CR__LOC_FRAME:
        *base = CR__SLOT_FRAME;
        *off += (int64_t)loc->offset;
        if (space == CR__SP_NONE)
            *off += (int64_t)(CR__WIN_LOCAL << CR__WIN_SHIFT);
        else if (space == CR__SP_PARAM || space == CR__SP_LOCAL)
            *resolved = CR__SP_LOCAL;
        else
            return "local variable in another state space";
        return NULL;
    case CR__LOC_KPARAM:
        *off += (int64_t)loc->offset;
        if (space == CR__SP_NONE)
            *off += (int64_t)(CR__WIN_PARAM << CR__WIN_SHIFT);
        else if (space != CR__SP_PARAM)
            return "parameter in another state space";
        return NULL;
    default: /* module variable: device memory */
        *base = cr__dc_value(dc, b, CR__T_U64);
        if (*base == UINT32_MAX)
            return "bad variable address";
        if (space == CR__SP_SHARED || space == CR__SP_LOCAL || space == CR__SP_PARAM)
            return "device variable in another state space";
        *resolved = space == CR__SP_CONST ? CR__SP_GLOBAL : space;
        return NULL;
    }
}

static cr__space_t space_of(const view_t *v)
{
    if (has(v, CR__M_global))
        return CR__SP_GLOBAL;
    if (has(v, CR__M_shared))
        return CR__SP_SHARED;
    if (has(v, CR__M_local))
        return CR__SP_LOCAL;
    if (has(v, CR__M_param))
        return CR__SP_PARAM;
    if (has(v, CR__M_const))
        return CR__SP_CONST;
    return CR__SP_NONE;
}

static unsigned vec_count(const view_t *v)
{
    return has(v, CR__M_v4) ? 4 : has(v, CR__M_v2) ? 2 : has(v, CR__M_v8) ? 8 : 1;
}

/* Element slots of a vector or scalar operand i (destinations when dest). */
static const char *elements(cr__dc_t *dc, const view_t *v, uint32_t i, unsigned n, int dest,
                            cr__type_t t, cr__insn_t *in, unsigned *dbytes)
{
    const cr__opd_t *o = opd(v, i);
    if (n == 1) {
        if (o->kind == CR__O_VEC)
            return "unexpected vector operand";
        in->r[0] = dest ? dst(dc, v, i) : val(dc, v, i, t);
        if (dbytes)
            *dbytes = dst_bytes(dc, v, i);
        return in->r[0] == UINT32_MAX ? "bad data operand" : NULL;
    }
    if (o->kind != CR__O_VEC || o->id != n)
        return "vector operand of the wrong length";
    if (dbytes)
        *dbytes = 8;
    for (unsigned k = 0; k < n; k++) {
        const cr__opd_t *e = o + 1 + k;
        if (dest) {
            in->r[k] = e->kind == CR__O_REG    ? cr__dc_reg_slot(dc, e->id)
                       : e->kind == CR__O_SINK ? CR__SLOT_SINK
                                               : UINT32_MAX;
            if (dbytes && e->kind == CR__O_REG && k == 0) {
                unsigned b = cr__type_size(cr__dc_reg_type(dc, e->id));
                *dbytes = b ? b : 8;
            }
        } else {
            in->r[k] = cr__dc_value(dc, e, t);
        }
        if (in->r[k] == UINT32_MAX)
            return "bad vector element";
    }
    return NULL;
}

static const char *decode_ldst(cr__dc_t *dc, const view_t *v, cr__insn_t *in, int store)
{
    cr__type_t t = v->ntypes ? v->types[v->ntypes - 1] : CR__T_NONE;
    unsigned size = cr__type_size(t), n = vec_count(v);
    if (!size || size > 8 || t == CR__T_PRED)
        return "unsupported type";
    if (n > 4)
        return "vectors over 4 elements are not supported";
    if (v->ntop < 2)
        return "wrong number of operands";
    cr__space_t space = space_of(v), resolved;
    uint32_t base;
    int64_t off;
    const char *why = address(dc, v, store ? 0 : 1, space, &base, &off, &resolved);
    if (why)
        return why;
    unsigned dbytes = 8;
    why = elements(dc, v, store ? 1 : 0, n, !store, t, in, store ? NULL : &dbytes);
    if (why)
        return why;
    in->r[4] = base;
    in->imm = off;
    in->n = (uint16_t)n;
    in->sub2 = (uint16_t)(size | (cr__type_signed(t) ? CR__MEM_SIGNED : 0) |
                          (dbytes << CR__MEM_DEST_SHIFT));
    static const uint16_t lds[] = {
        [CR__SP_NONE] = CR__OP_LD_GENERIC, [CR__SP_GLOBAL] = CR__OP_LD_GLOBAL,
        [CR__SP_CONST] = CR__OP_LD_GLOBAL, [CR__SP_SHARED] = CR__OP_LD_SHARED,
        [CR__SP_LOCAL] = CR__OP_LD_LOCAL,  [CR__SP_PARAM] = CR__OP_LD_PARAM};
    static const uint16_t sts[] = {
        [CR__SP_NONE] = CR__OP_ST_GENERIC, [CR__SP_GLOBAL] = CR__OP_ST_GLOBAL,
        [CR__SP_CONST] = CR__OP_NOP,       [CR__SP_SHARED] = CR__OP_ST_SHARED,
        [CR__SP_LOCAL] = CR__OP_ST_LOCAL,  [CR__SP_PARAM] = CR__OP_NOP};
    if (resolved > CR__SP_PARAM || resolved == CR__SP_REG)
        return "bad state space";
    in->op = store ? sts[resolved] : lds[resolved];
    if (in->op == CR__OP_NOP)
        return "store to a read-only state space";
    return NULL;
}

static const char *decode_atom(cr__dc_t *dc, const view_t *v, cr__insn_t *in, int red)
{
    cr__type_t t = v->ntypes ? v->types[v->ntypes - 1] : CR__T_NONE;
    int op = atom_op(v);
    if (op < 0)
        return "unknown atomic operation";
    if (has(v, CR__M_v2) || has(v, CR__M_v4) || has(v, CR__M_v8))
        return "vector atomics";
    unsigned size = cr__type_size(t);
    if (size != 4 && size != 8)
        return "unsupported atomic type";
    if ((t == CR__T_F32 || t == CR__T_F64) && op != CR__ATOM_ADD && op != CR__ATOM_EXCH &&
        op != CR__ATOM_MIN && op != CR__ATOM_MAX)
        return "unsupported floating-point atomic";
    if ((op == CR__ATOM_INC || op == CR__ATOM_DEC) && t != CR__T_U32)
        return "atom.inc/dec need .u32";
    uint32_t a = red ? 0 : 1;
    uint32_t need = a + 2 + (op == CR__ATOM_CAS);
    if (v->ntop != need && v->ntop != need + 1)
        return "wrong number of operands"; /* + policy */
    cr__space_t space = space_of(v), resolved;
    if (space != CR__SP_NONE && space != CR__SP_GLOBAL && space != CR__SP_SHARED)
        return "atomics on this state space";
    uint32_t base;
    int64_t off;
    const char *why = address(dc, v, a, space, &base, &off, &resolved);
    if (why)
        return why;
    in->r[0] = red ? CR__SLOT_SINK : dst(dc, v, 0);
    in->r[1] = val(dc, v, a + 1, t);
    in->r[2] = op == CR__ATOM_CAS ? val(dc, v, a + 2, t) : CR__SLOT_ZERO;
    if (in->r[0] == UINT32_MAX || in->r[1] == UINT32_MAX || in->r[2] == UINT32_MAX)
        return "bad operand";
    in->r[4] = base;
    in->imm = off;
    in->sub = (uint8_t)op;
    in->sub2 = (uint16_t)t;
    in->op = resolved == CR__SP_GLOBAL   ? CR__OP_ATOM_GLOBAL
             : resolved == CR__SP_SHARED ? CR__OP_ATOM_SHARED
                                         : CR__OP_ATOM_GENERIC;
    return NULL;
}

/* cp.async.ca/cg.shared.global [dst], [src], size{, src-size}: done at once (the copy is
 * complete before any later instruction, which satisfies every wait_group). */
static const char *decode_cp(cr__dc_t *dc, const view_t *v, cr__insn_t *in)
{
    if (!has(v, CR__M_async) || has(v, CR__M_bulk) || has(v, CR__M_tensormap))
        return "only cp.async (not bulk or tensor copies) is supported";
    if (has(v, CR__M_commit_group) || has(v, CR__M_wait_group) || has(v, CR__M_wait_all)) {
        in->op = CR__OP_NOP;
        return NULL;
    }
    if (!has(v, CR__M_shared) || !has(v, CR__M_global))
        return "unsupported cp.async form";
    if (v->ntop < 3 || v->ntop > 5 || opd(v, 2)->kind != CR__O_IMM)
        return "bad cp.async operands";
    int64_t size = opd(v, 2)->value;
    if (size != 4 && size != 8 && size != 16)
        return "bad cp.async size";
    cr__space_t resolved;
    uint32_t dbase, sbase;
    int64_t doff, soff;
    const char *why = address(dc, v, 0, CR__SP_SHARED, &dbase, &doff, &resolved);
    if (!why)
        why = address(dc, v, 1, CR__SP_GLOBAL, &sbase, &soff, &resolved);
    if (why)
        return why;
    in->op = CR__OP_CP_ASYNC;
    in->r[4] = dbase;
    in->imm = doff;
    in->r[1] = sbase;
    in->r[2] = cr__dc_const(dc, (uint64_t)soff);
    /* then a source size (the rest is zero-filled) or an ignore-source predicate, and a
     * cache policy (64 bits, ignored) */
    in->r[3] = cr__dc_const(dc, (uint64_t)size);
    if (v->ntop >= 4) {
        const cr__opd_t *o = opd(v, 3);
        cr__type_t rt = o->kind == CR__O_REG ? cr__dc_reg_type(dc, o->id) : CR__T_U32;
        if (rt == CR__T_PRED) {
            in->sub = 1;
            in->r[3] = cr__dc_reg_slot(dc, o->id);
        } else if (cr__type_size(rt) != 8) {
            in->r[3] = val(dc, v, 3, CR__T_U32);
        }
    }
    in->n = (uint16_t)size;
    return NULL;
}

/* wmma: fragments are register lists kept in prog->lists as [count, slots...]. */
static uint32_t add_list(cr__dc_t *dc, const cr__opd_t *vec, int dest)
{
    cr__prog_t *p = dc->p;
    uint32_t n = vec->id, at = p->nlists;
    for (uint32_t k = 0; k <= n; k++) {
        uint32_t slot = k == 0                     ? n
                        : vec[k].kind == CR__O_REG ? cr__dc_reg_slot(dc, vec[k].id)
                                                   : UINT32_MAX;
        if (dest && k && vec[k].kind == CR__O_SINK)
            slot = CR__SLOT_SINK;
        if (slot == UINT32_MAX)
            return UINT32_MAX;
        if (cr__grow((void **)&p->lists, &dc->cap_lists, p->nlists + 1, sizeof *p->lists) != 0) {
            dc->failed = 1;
            return UINT32_MAX;
        }
        p->lists[p->nlists++] = slot;
    }
    return at;
}

static const char *decode_wmma(cr__dc_t *dc, const view_t *v, cr__insn_t *in)
{
    unsigned shape = has(v, CR__M_m16n16k16)  ? 0
                     : has(v, CR__M_m8n32k16) ? 1
                     : has(v, CR__M_m32n8k16) ? 2
                     : has(v, CR__M_m16n16k8) ? 3
                                              : 99;
    if (shape == 99)
        return "unsupported wmma shape";
    for (uint32_t i = 0; i < v->ntypes; i++)
        if (v->types[i] != CR__T_F16 && v->types[i] != CR__T_BF16 && v->types[i] != CR__T_F32 &&
            v->types[i] != CR__T_TF32)
            return "unsupported wmma type (floating-point fragments only)";
    in->op = CR__OP_WMMA;
    if (has(v, CR__M_mma)) {
        if (v->ntop != 4 || v->ntypes < 2)
            return "bad wmma.mma operands";
        cr__type_t dt = v->types[0], ct = v->types[v->ntypes - 1];
        cr__type_t at = v->ntypes == 4 ? v->types[1] : shape == 3 ? CR__T_TF32 : CR__T_F16;
        uint32_t lists[4];
        for (uint32_t i = 0; i < 4; i++) {
            if (opd(v, i)->kind != CR__O_VEC)
                return "wmma fragments are register lists";
            if ((lists[i] = add_list(dc, opd(v, i), i == 0)) == UINT32_MAX)
                return "bad fragment";
        }
        in->sub = CR__WMMA_MMA;
        in->sub2 = (uint16_t)(shape << 1 | at << 8);
        in->n = (uint16_t)(dt | ct << 8);
        in->imm = lists[0];
        in->r[0] = lists[1];
        in->r[1] = lists[2];
        in->r[2] = lists[3];
        return NULL;
    }
    int store = has(v, CR__M_store);
    if (!store && !has(v, CR__M_load))
        return "unsupported wmma operation";
    in->sub = store             ? CR__WMMA_D
              : has(v, CR__M_a) ? CR__WMMA_A
              : has(v, CR__M_b) ? CR__WMMA_B
                                : CR__WMMA_C;
    if (v->ntop < 2 || v->ntop > 3 || v->ntypes != 1)
        return "bad wmma operands";
    const cr__opd_t *frag = opd(v, store ? 1 : 0);
    if (frag->kind != CR__O_VEC)
        return "wmma fragments are register lists";
    cr__space_t sp = space_of(v), resolved;
    uint32_t base;
    int64_t off;
    const char *why = address(dc, v, store ? 0 : 1, sp, &base, &off, &resolved);
    if (why)
        return why;
    uint32_t list = add_list(dc, frag, !store);
    if (list == UINT32_MAX)
        return "bad fragment";
    in->imm = list;
    in->r[4] = base;
    in->r[2] = cr__dc_const(dc, (uint64_t)off);
    in->r[3] = v->ntop == 3 ? val(dc, v, 2, CR__T_U32) : CR__SLOT_ZERO;
    in->sub2 = (uint16_t)(has(v, CR__M_col) | shape << 1 | v->types[0] << 8);
    in->n = (uint16_t)resolved;
    return NULL;
}

/* ---- moves and conversions ---- */

static const char *decode_mov(cr__dc_t *dc, const view_t *v, cr__insn_t *in)
{
    cr__type_t t = v->ntypes ? v->types[0] : CR__T_NONE;
    unsigned size = cr__type_size(t);
    if (v->ntop != 2)
        return "wrong number of operands";
    const cr__opd_t *d = opd(v, 0), *s = opd(v, 1);
    if (d->kind == CR__O_VEC || s->kind == CR__O_VEC) {
        int unpack = d->kind == CR__O_VEC;
        const cr__opd_t *vec = unpack ? d : s;
        unsigned n = vec->id;
        if (n < 2 || n > 4 || size % n)
            return "bad vector move";
        in->op = unpack ? CR__OP_MOV_UNPACK : CR__OP_MOV_PACK;
        in->sub = (uint8_t)(size / n);
        in->n = (uint16_t)n;
        cr__type_t et = size / n == 2 ? CR__T_B16 : size / n == 4 ? CR__T_B32 : CR__T_B8;
        for (unsigned k = 0; k < n; k++) {
            const cr__opd_t *e = vec + 1 + k;
            uint32_t slot;
            if (unpack)
                slot = e->kind == CR__O_REG    ? cr__dc_reg_slot(dc, e->id)
                       : e->kind == CR__O_SINK ? CR__SLOT_SINK
                                               : UINT32_MAX;
            else
                slot = cr__dc_value(dc, e, et);
            if (slot == UINT32_MAX)
                return "bad vector element";
            in->r[unpack ? k : k + 1] = slot;
        }
        if (unpack) {
            if ((in->r[4] = val(dc, v, 1, t)) == UINT32_MAX)
                return "bad source";
        } else if ((in->r[0] = dst(dc, v, 0)) == UINT32_MAX) {
            return "bad destination";
        }
        return NULL;
    }
    if ((in->r[0] = dst(dc, v, 0)) == UINT32_MAX)
        return "bad destination";
    if (s->kind == CR__O_SREG) {
        switch (s->id) {
        case CR__SR_CLOCK:
        case CR__SR_CLOCK_HI:
            in->op = CR__OP_CLOCK;
            in->sub = s->id == CR__SR_CLOCK_HI;
            return NULL;
        case CR__SR_CLOCK64:
            in->op = CR__OP_CLOCK64;
            return NULL;
        case CR__SR_GLOBALTIMER:
        case CR__SR_GLOBALTIMER_LO:
        case CR__SR_GLOBALTIMER_HI:
            in->op = CR__OP_GLOBALTIMER;
            in->sub = s->id == CR__SR_GLOBALTIMER ? 0 : s->id == CR__SR_GLOBALTIMER_LO ? 1 : 2;
            return NULL;
        default:
            break;
        }
    }
    if (s->kind == CR__O_VAR) {
        const cr__loc_t *loc = &dc->var_loc[s->id];
        if (loc->kind == CR__LOC_FRAME) { /* mov %SPL, __local_depot: frame + offset */
            in->op = CR__OP_ADD64;
            in->r[1] = CR__SLOT_FRAME;
            in->r[2] = cr__dc_const(dc, loc->offset + (uint64_t)s->value);
            return NULL;
        }
        if ((loc->kind == CR__LOC_SYM || loc->kind == CR__LOC_NONE) && s->value) {
            cr__opd_t plain = *s;
            plain.value = 0;
            in->op = CR__OP_ADD64;
            in->r[1] = cr__dc_value(dc, &plain, CR__T_U64);
            in->r[2] = cr__dc_const(dc, (uint64_t)s->value);
            return NULL;
        }
    }
    if ((in->r[1] = val(dc, v, 1, t)) == UINT32_MAX)
        return "bad source";
    in->op = CR__OP_MOV;
    in->sub = (uint8_t)(size ? size : 8);
    return NULL;
}

static const char *decode_cvt(cr__dc_t *dc, const view_t *v, cr__insn_t *in)
{
    if (v->ntypes != 2)
        return "cvt needs two types";
    cr__type_t dt = v->types[0], st = v->types[1];
    unsigned dsize = cr__type_size(dt), ssize = cr__type_size(st);
    int pack = dt == CR__T_F16X2 || dt == CR__T_BF16X2;
    if (!dsize || !ssize || dt == CR__T_PRED || st == CR__T_PRED || dt == CR__T_B128)
        return "unsupported conversion";
    if ((cr__type_float(dt) && dt != CR__T_F16 && dt != CR__T_BF16 && dt != CR__T_F32 &&
         dt != CR__T_F64 && !pack && dt != CR__T_TF32) ||
        (cr__type_float(st) && st != CR__T_F16 && st != CR__T_BF16 && st != CR__T_F32 &&
         st != CR__T_F64))
        return "unsupported conversion";
    if (v->ntop != (uint32_t)(2 + pack))
        return "wrong number of operands";
    in->r[0] = dst(dc, v, 0);
    in->r[1] = val(dc, v, 1, st);
    in->r[2] = pack ? val(dc, v, 2, st) : CR__SLOT_ZERO;
    if (in->r[0] == UINT32_MAX || in->r[1] == UINT32_MAX || in->r[2] == UINT32_MAX)
        return "bad operand";
    unsigned reg = dst_bytes(dc, v, 0);
    int sat = has(v, CR__M_sat) || has(v, CR__M_satfinite);
    if (!cr__type_float(dt) && !cr__type_float(st) && !sat) {
        in->op = CR__OP_CVT_SX;
        in->sub = (uint8_t)(ssize * 8 | (cr__type_signed(st) ? 0x80 : 0));
        in->sub2 = (uint16_t)(dsize * 8 | (cr__type_signed(dt) ? 0x80 : 0) | reg << 8);
        return NULL;
    }
    int irnd = int_rounding(v), frnd = rounding(v);
    in->op = CR__OP_CVT;
    in->sub = (uint8_t)((irnd >= 0   ? irnd
                         : frnd >= 0 ? frnd
                                     : CR__RND_RN) |
                        (irnd >= 0) << 3 | sat << 4 | has(v, CR__M_ftz) << 5 |
                        has(v, CR__M_relu) << 6 | pack << 7);
    in->sub2 = (uint16_t)(dt | st << 8);
    in->n = (uint16_t)reg;
    /* cvt.f32.f16 and the like need no rounding; a float-to-float conversion that narrows
     * without a rounding mode is malformed PTX but harmless: round to nearest */
    return NULL;
}

static const char *decode_cvta(cr__dc_t *dc, const view_t *v, cr__insn_t *in)
{
    cr__space_t sp = space_of(v);
    cr__type_t t = v->ntypes ? v->types[0] : CR__T_U64;
    int to = has(v, CR__M_to);
    if (v->ntop != 2)
        return "wrong number of operands";
    if ((in->r[0] = dst(dc, v, 0)) == UINT32_MAX)
        return "bad destination";
    const cr__opd_t *s = opd(v, 1);
    in->sub = (uint8_t)cr__type_size(t);
    if (s->kind == CR__O_VAR && dc->var_loc[s->id].kind == CR__LOC_FRAME && !to) {
        cr__insn_t add = *in;
        add.op = CR__OP_ADD64;
        add.r[1] = CR__SLOT_FRAME;
        add.r[2] = cr__dc_const(dc, dc->var_loc[s->id].offset + (uint64_t)s->value);
        cr__dc_emit(dc, &add);
        in->r[1] = in->r[0];
    } else if ((in->r[1] = val(dc, v, 1, CR__T_U64)) == UINT32_MAX) {
        return "bad source";
    }
    switch (sp) {
    case CR__SP_GLOBAL:
    case CR__SP_CONST:
        in->op = CR__OP_MOV;
        in->sub = (uint8_t)cr__type_size(t);
        return NULL;
    case CR__SP_SHARED:
        in->op = to ? CR__OP_CVTA_TO : CR__OP_CVTA_SHARED;
        return NULL;
    case CR__SP_LOCAL:
        in->op = to ? CR__OP_CVTA_TO : CR__OP_CVTA_LOCAL;
        return NULL;
    case CR__SP_PARAM:
        in->op = to ? CR__OP_CVTA_TO : CR__OP_CVTA_PARAM;
        return NULL;
    default:
        return "cvta needs a state space";
    }
}

/* ---- comparisons ---- */

static const char *decode_setp(cr__dc_t *dc, const view_t *v, cr__insn_t *in, int set)
{
    cr__type_t t = v->ntypes ? v->types[v->ntypes - 1] : CR__T_NONE;
    int cmp = cmp_op(v);
    if (cmp < 0)
        return "missing comparison";
    unsigned combine = has(v, CR__M_and) ? 1 : has(v, CR__M_or) ? 2 : has(v, CR__M_xor) ? 3 : 0;
    uint32_t i = 0;
    in->r[0] = dst(dc, v, i);
    if (in->r[0] == UINT32_MAX)
        return "bad destination";
    int pair = opd(v, 0)->flags & CR__OF_PAIR;
    if (pair) {
        if (set)
            return "bad destination";
        in->r[4] = dst(dc, v, ++i);
        if (in->r[4] == UINT32_MAX)
            return "bad destination";
        in->sub2 |= CR__SETP_PAIR;
    }
    if (v->ntop != i + 3 + (combine ? 1 : 0))
        return "wrong number of operands";
    in->r[1] = val(dc, v, i + 1, t);
    in->r[2] = val(dc, v, i + 2, t);
    if (in->r[1] == UINT32_MAX || in->r[2] == UINT32_MAX)
        return "bad operand";
    if (combine) {
        in->r[3] = val(dc, v, i + 3, CR__T_PRED);
        if (in->r[3] == UINT32_MAX)
            return "bad predicate operand";
        if (opd(v, i + 3)->flags & CR__OF_NOT)
            in->sub2 |= CR__SETP_NOT_C;
        in->sub2 |= (uint16_t)combine;
    }
    if (has(v, CR__M_ftz))
        in->sub2 |= CR__SETP_FTZ;
    in->sub = (uint8_t)cmp;
    static const uint16_t ops[] = {[CR__T_U16] = CR__OP_SETP_U16, [CR__T_B16] = CR__OP_SETP_U16,
                                   [CR__T_S16] = CR__OP_SETP_S16, [CR__T_U32] = CR__OP_SETP_U32,
                                   [CR__T_B32] = CR__OP_SETP_U32, [CR__T_S32] = CR__OP_SETP_S32,
                                   [CR__T_U64] = CR__OP_SETP_U64, [CR__T_B64] = CR__OP_SETP_U64,
                                   [CR__T_S64] = CR__OP_SETP_S64, [CR__T_F32] = CR__OP_SETP_F32,
                                   [CR__T_F64] = CR__OP_SETP_F64, [CR__T_F16] = CR__OP_SETP_H,
                                   [CR__T_BF16] = CR__OP_SETP_H,  [CR__T_COUNT] = 0};
    if (t >= CR__T_COUNT || !ops[t])
        return "unsupported comparison type";
    if (t == CR__T_BF16)
        in->sub2 |= CR__SETP_BF;
    if (set) {
        cr__type_t dt = v->types[0];
        if (v->ntypes != 2 || (dt != CR__T_U32 && dt != CR__T_S32 && dt != CR__T_F32))
            return "unsupported set types";
        in->op = CR__OP_SET;
        in->n = ops[t];
        if (dt == CR__T_F32)
            in->sub2 |= CR__SET_FLOAT_DEST;
        return NULL;
    }
    in->op = ops[t];
    return NULL;
}

/* ---- warp-wide ---- */

static const char *decode_shfl(cr__dc_t *dc, const view_t *v, cr__insn_t *in)
{
    int mode = has(v, CR__M_up)     ? CR__SHFL_UP
               : has(v, CR__M_down) ? CR__SHFL_DOWN
               : has(v, CR__M_bfly) ? CR__SHFL_BFLY
               : has(v, CR__M_idx)  ? CR__SHFL_IDX
                                    : -1;
    if (mode < 0)
        return "missing shfl mode";
    uint32_t i = 0;
    in->r[0] = dst(dc, v, 0);
    in->r[5] = CR__SLOT_SINK;
    if (opd(v, 0)->flags & CR__OF_PAIR)
        in->r[5] = dst(dc, v, ++i);
    uint32_t need = i + 4 + (uint32_t)has(v, CR__M_sync);
    if (v->ntop != need)
        return "wrong number of operands";
    in->r[1] = val(dc, v, i + 1, CR__T_B32);
    in->r[2] = val(dc, v, i + 2, CR__T_B32);
    in->r[3] = val(dc, v, i + 3, CR__T_B32);
    in->r[4] = has(v, CR__M_sync) ? val(dc, v, i + 4, CR__T_B32) : cr__dc_const(dc, CR__FULL_MASK);
    for (int k = 0; k < 6; k++)
        if (in->r[k] == UINT32_MAX)
            return "bad operand";
    in->op = CR__OP_SHFL;
    in->sub = (uint8_t)mode;
    return NULL;
}

static const char *decode_vote(cr__dc_t *dc, const view_t *v, cr__insn_t *in)
{
    int mode = has(v, CR__M_all)      ? CR__VOTE_ALL
               : has(v, CR__M_any)    ? CR__VOTE_ANY
               : has(v, CR__M_uni)    ? CR__VOTE_UNI
               : has(v, CR__M_ballot) ? CR__VOTE_BALLOT
                                      : -1;
    if (mode < 0)
        return "missing vote mode";
    if (v->ntop != 2u + (uint32_t)has(v, CR__M_sync))
        return "wrong number of operands";
    in->r[0] = dst(dc, v, 0);
    in->r[1] = val(dc, v, 1, CR__T_PRED);
    in->r[2] = has(v, CR__M_sync) ? val(dc, v, 2, CR__T_B32) : cr__dc_const(dc, CR__FULL_MASK);
    if (in->r[0] == UINT32_MAX || in->r[1] == UINT32_MAX || in->r[2] == UINT32_MAX)
        return "bad operand";
    if (opd(v, 1)->flags & CR__OF_NOT)
        in->sub2 = CR__VOTE_NOT;
    in->op = CR__OP_VOTE;
    in->sub = (uint8_t)mode;
    return NULL;
}

/* ---- barriers ---- */

static const char *decode_bar(cr__dc_t *dc, const view_t *v, cr__insn_t *in)
{
    if (has(v, CR__M_warp)) {
        in->op = CR__OP_BAR_WARP;
        return NULL;
    }
    if (has(v, CR__M_cluster))
        return "cluster barriers are not supported";
    uint32_t i = 0;
    in->op = CR__OP_BAR;
    in->r[0] = CR__SLOT_SINK;
    if (has(v, CR__M_red)) {
        in->sub = has(v, CR__M_popc)  ? CR__BAR_RED_POPC
                  : has(v, CR__M_and) ? CR__BAR_RED_AND
                  : has(v, CR__M_or)  ? CR__BAR_RED_OR
                                      : 0xff;
        if (in->sub == 0xff)
            return "unknown barrier reduction";
        in->r[0] = dst(dc, v, i++);
        if (v->ntop != 3 && v->ntop != 4)
            return "wrong number of operands";
        uint32_t c = v->ntop - 1;
        in->r[3] = val(dc, v, c, CR__T_PRED);
        if (opd(v, c)->flags & CR__OF_NOT)
            in->sub2 = 1;
    } else {
        in->sub = has(v, CR__M_arrive) ? CR__BAR_ARRIVE : CR__BAR_SYNC;
        if (v->ntop < 1 || v->ntop > 2)
            return "wrong number of operands";
    }
    in->r[1] = val(dc, v, i, CR__T_U32);
    uint32_t has_count = in->sub >= CR__BAR_RED_POPC ? v->ntop == 4 : v->ntop == 2;
    in->r[2] = has_count ? val(dc, v, i + 1, CR__T_U32) : CR__SLOT_ZERO;
    for (int k = 0; k < 4; k++)
        if (in->r[k] == UINT32_MAX)
            return "bad operand";
    if (in->sub == CR__BAR_ARRIVE && !has_count)
        return "bar.arrive needs a thread count";
    return NULL;
}

/* ---- calls ---- */

/* The frame offset of a call argument (a .param variable of the caller). */
static int arg_offset(cr__dc_t *dc, const cr__opd_t *e, uint32_t *off, uint64_t *size)
{
    if (e->kind != CR__O_VAR || dc->var_loc[e->id].kind != CR__LOC_FRAME)
        return -1;
    *off = (uint32_t)(dc->var_loc[e->id].offset + (uint64_t)e->value);
    *size = dc->ir->vars[e->id].size;
    return 0;
}

static const char *decode_call(cr__dc_t *dc, const view_t *v, cr__insn_t *in)
{
    const cr__opd_t *rets = NULL, *args = NULL, *target = NULL;
    for (uint32_t i = 0; i < v->ntop; i++) {
        const cr__opd_t *o = opd(v, i);
        if (o->kind == CR__O_VEC && !target)
            rets = o;
        else if (o->kind == CR__O_VEC)
            args = o;
        else if (!target)
            target = o;
    }
    if (!target)
        return "call without a target";
    const cr__ir_t *ir = dc->ir;
    uint32_t nargs = args ? args->id : 0, nrets = rets ? rets->id : 0;
    if (target->kind == CR__O_REG) { /* through a function pointer: the callee at run time */
        cr__call_t c = {.func = CR__CALL_INDIRECT, .caller = dc->pf};
        c.arg_first = dc->p->ncopies;
        for (uint32_t k = 0; k < nargs; k++) {
            uint32_t from;
            uint64_t size;
            if (arg_offset(dc, args + 1 + k, &from, &size))
                return "call arguments must be .param variables";
            cr__copy_t cp = {from, 0, (uint32_t)size};
            if (cr__dc_add_copy(dc, &cp) == UINT32_MAX)
                return "out of memory";
            c.arg_count++;
        }
        c.ret_first = dc->p->ncopies;
        for (uint32_t k = 0; k < nrets; k++) {
            uint32_t to;
            uint64_t size;
            if (arg_offset(dc, rets + 1 + k, &to, &size))
                return "call results must be .param variables";
            cr__copy_t cp = {0, to, (uint32_t)size};
            if (cr__dc_add_copy(dc, &cp) == UINT32_MAX)
                return "out of memory";
            c.ret_count++;
        }
        uint32_t idx = cr__dc_add_call(dc, &c);
        if (idx == UINT32_MAX)
            return "out of memory";
        in->op = CR__OP_CALL;
        in->sub = 1;
        in->r[1] = cr__dc_reg_slot(dc, target->id);
        in->imm = idx;
        return NULL;
    }
    if (target->kind != CR__O_FUNC)
        return "bad call target";
    const char *name = cr__ir_str(ir, ir->funcs[target->id].name);
    if (strcmp(name, "vprintf") == 0 || strcmp(name, "__assertfail") == 0) {
        int printf_call = name[0] == 'v';
        if (nargs != (printf_call ? 2u : 5u) || nrets > 1)
            return "bad builtin call";
        for (uint32_t k = 0; k < nargs; k++) {
            uint64_t size;
            if (arg_offset(dc, args + 1 + k, &in->r[1 + k], &size))
                return "bad call argument";
        }
        if (nrets) {
            uint64_t size;
            if (arg_offset(dc, rets + 1, &in->r[0], &size))
                return "bad call return";
            in->n = 1;
        }
        in->op = printf_call ? CR__OP_VPRINTF : CR__OP_ASSERTFAIL;
        return NULL;
    }
    /* cudaGraphSetConditional(handle, value): a conditional node's handle is the device
     * address of its value (server/emu/graph.c), so this is a checked 32-bit global store */
    if (strcmp(name, "cudaGraphSetConditional") == 0) {
        if (nargs != 2 || nrets)
            return "bad builtin call";
        for (uint32_t k = 0; k < nargs; k++) {
            uint64_t size;
            if (arg_offset(dc, args + 1 + k, &in->r[1 + k], &size))
                return "bad call argument";
        }
        in->op = CR__OP_SETCOND;
        return NULL;
    }
    int f = cr__ir_find_func(ir, name);
    if (f < 0 || !ir->funcs[f].has_body || !dc->func_map[f]) {
        static const char *const known[] = {"malloc", "free", "__nv_aligned_device_malloc",
                                            "cudaGetParameterBufferV2", "cudaLaunchDeviceV2"};
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (strcmp(name, known[k]) == 0)
                return "calls to device-runtime functions are not supported";
        return "call to a function without a body";
    }
    const cr__ir_func_t *callee = &ir->funcs[f];
    if (nargs != callee->param_count || nrets > callee->ret_count)
        return "argument count mismatch";
    cr__call_t c = {.func = dc->func_map[f] - 1, .caller = dc->pf};
    c.arg_first = dc->p->ncopies;
    for (uint32_t k = 0; k < nargs; k++) {
        uint32_t from;
        uint64_t size;
        if (arg_offset(dc, args + 1 + k, &from, &size))
            return "call arguments must be .param variables";
        const cr__loc_t *to = &dc->var_loc[callee->param_first + k];
        uint64_t psize = ir->vars[callee->param_first + k].size;
        cr__copy_t cp = {from, (uint32_t)to->offset, (uint32_t)(size < psize ? size : psize)};
        if (cr__dc_add_copy(dc, &cp) == UINT32_MAX)
            return "out of memory";
        c.arg_count++;
    }
    c.ret_first = dc->p->ncopies;
    for (uint32_t k = 0; k < nrets; k++) {
        uint32_t to;
        uint64_t size;
        if (arg_offset(dc, rets + 1 + k, &to, &size))
            return "call results must be .param variables";
        const cr__loc_t *from = &dc->var_loc[callee->ret_first + k];
        uint64_t rsize = ir->vars[callee->ret_first + k].size;
        cr__copy_t cp = {(uint32_t)from->offset, to, (uint32_t)(size < rsize ? size : rsize)};
        if (cr__dc_add_copy(dc, &cp) == UINT32_MAX)
            return "out of memory";
        c.ret_count++;
    }
    uint32_t idx = cr__dc_add_call(dc, &c);
    if (idx == UINT32_MAX)
        return "out of memory";
    in->op = CR__OP_CALL;
    in->imm = idx;
    return NULL;
}

/* ---- the instruction ---- */

/* add/sub/min/max on .u16x2/.s16x2: two 16-bit lanes, as the SIMD video instructions. */
static const char *decode_x2(cr__dc_t *dc, const view_t *v, cr__insn_t *in, cr__type_t t)
{
    unsigned b = v->src->base;
    in->op = CR__OP_VSIMD;
    in->sub = b == CR__B_add   ? CR__ATOM_ADD
              : b == CR__B_sub ? CR__V_SUB
              : b == CR__B_min ? CR__ATOM_MIN
                               : CR__ATOM_MAX;
    unsigned sg = t == CR__T_S16X2 ? CR__V_SIGNED_A | CR__V_SIGNED_B | CR__V_SIGNED_D : 0;
    in->sub2 = (uint16_t)(CR__V_HALVES | sg | has(v, CR__M_relu) * CR__V_RELU);
    if (has(v, CR__M_sat))
        return "saturating 16x2 arithmetic is not supported";
    const char *why = operands(dc, v, in, 2, CR__T_B32);
    in->r[3] = CR__SLOT_ZERO;
    return why;
}

static const char *decode(cr__dc_t *dc, const view_t *v, cr__insn_t *in)
{
    cr__type_t t = v->ntypes ? v->types[0] : CR__T_NONE;
    int w = width_index(t);
    int sgn = cr__type_signed(t);
    const char *why;
    if ((t == CR__T_U16X2 || t == CR__T_S16X2) &&
        (v->src->base == CR__B_add || v->src->base == CR__B_sub || v->src->base == CR__B_min ||
         v->src->base == CR__B_max))
        return decode_x2(dc, v, in, t);
    switch (v->src->base) {
    case CR__B_add:
    case CR__B_sub: {
        int sub = v->src->base == CR__B_sub;
        if (has(v, CR__M_cc)) {
            if (w < 1 || !is_int(t))
                return "unsupported carry type";
            in->op = CR__OP_CARRY;
            in->sub = sub ? CR__CARRY_SUB : CR__CARRY_ADD;
            in->sub2 = CR__CARRY_OUT | (w == 2 ? CR__CARRY_64 : 0);
            return operands(dc, v, in, 2, t);
        }
        if (is_int(t) && w >= 0) {
            if (has(v, CR__M_sat)) {
                if (t != CR__T_S32)
                    return "saturation needs .s32";
                in->op = sub ? CR__OP_SUBSAT : CR__OP_ADDSAT;
            } else {
                in->op = (sub ? CR__OP_SUB16 : CR__OP_ADD16) + w;
            }
            return operands(dc, v, in, 2, t);
        }
        if ((why = float_op(v, in, t, sub ? CR__FOP_SUB : CR__FOP_ADD,
                            sub ? CR__OP_SUB_F32 : CR__OP_ADD_F32,
                            sub ? CR__OP_SUB_F64 : CR__OP_ADD_F64)))
            return why;
        return operands(dc, v, in, 2, t);
    }
    case CR__B_addc:
    case CR__B_subc:
        if (w < 1 || !is_int(t))
            return "unsupported carry type";
        in->op = CR__OP_CARRY;
        in->sub = v->src->base == CR__B_subc ? CR__CARRY_SUB : CR__CARRY_ADD;
        in->sub2 =
            CR__CARRY_IN | (has(v, CR__M_cc) ? CR__CARRY_OUT : 0) | (w == 2 ? CR__CARRY_64 : 0);
        return operands(dc, v, in, 2, t);
    case CR__B_mul:
    case CR__B_mad: {
        int mad = v->src->base == CR__B_mad;
        if (is_int(t) && w >= 0) {
            if (has(v, CR__M_cc)) {
                if (w != 1)
                    return "unsupported carry type";
                in->op = CR__OP_CARRY;
                in->sub = has(v, CR__M_hi) ? CR__CARRY_MADHI : CR__CARRY_MADLO;
                in->sub2 = CR__CARRY_OUT | (sgn ? CR__CARRY_SIGNED : 0);
                return operands(dc, v, in, 3, t);
            }
            if (has(v, CR__M_sat))
                return "mad.hi.sat is not supported";
            if (has(v, CR__M_wide)) {
                if (w == 2)
                    return "wide multiply of 64-bit operands";
                in->op = (mad ? CR__OP_MADWIDE_U16 : CR__OP_MULWIDE_U16) + (sgn ? 2 : 0) + w;
                if ((why = operands(dc, v, in, mad ? 3 : 2, t)))
                    return why;
                /* the addend of mad.wide is twice as wide */
                if (mad && (in->r[3] = val(dc, v, 3, w == 0 ? CR__T_U32 : CR__T_U64)) == UINT32_MAX)
                    return "bad operand";
                return NULL;
            }
            if (has(v, CR__M_hi))
                in->op = (mad ? CR__OP_MADHI_U16 : CR__OP_MULHI_U16) + (sgn ? 3 : 0) + w;
            else
                in->op = (mad ? CR__OP_MADLO16 : CR__OP_MULLO16) + w;
            return operands(dc, v, in, mad ? 3 : 2, t);
        }
        if ((why = float_op(v, in, t, mad ? CR__FOP_FMA : CR__FOP_MUL,
                            mad ? CR__OP_FMA_F32 : CR__OP_MUL_F32,
                            mad ? CR__OP_FMA_F64 : CR__OP_MUL_F64)))
            return why;
        return operands(dc, v, in, mad ? 3 : 2, t);
    }
    case CR__B_madc:
        if (w != 1 || !is_int(t))
            return "unsupported carry type";
        in->op = CR__OP_CARRY;
        in->sub = has(v, CR__M_hi) ? CR__CARRY_MADHI : CR__CARRY_MADLO;
        in->sub2 =
            CR__CARRY_IN | (has(v, CR__M_cc) ? CR__CARRY_OUT : 0) | (sgn ? CR__CARRY_SIGNED : 0);
        return operands(dc, v, in, 3, t);
    case CR__B_mul24:
    case CR__B_mad24:
        if (t != CR__T_U32 && t != CR__T_S32)
            return "unsupported type";
        if (has(v, CR__M_sat))
            return "mad24.sat is not supported";
        in->op = v->src->base == CR__B_mul24 ? CR__OP_MUL24 : CR__OP_MAD24;
        in->sub = (uint8_t)has(v, CR__M_hi);
        in->sub2 = (uint16_t)sgn;
        return operands(dc, v, in, in->op == CR__OP_MUL24 ? 2 : 3, t);
    case CR__B_sad:
        if (w != 1)
            return "unsupported type";
        in->op = CR__OP_SAD;
        in->sub2 = (uint16_t)sgn;
        return operands(dc, v, in, 3, t);
    case CR__B_fma:
        if ((why = float_op(v, in, t, CR__FOP_FMA, CR__OP_FMA_F32, CR__OP_FMA_F64)))
            return why;
        return operands(dc, v, in, 3, t);
    case CR__B_div:
    case CR__B_rem: {
        int rem = v->src->base == CR__B_rem;
        if (is_int(t) && w >= 0) {
            in->op = (rem ? CR__OP_REM_U16 : CR__OP_DIV_U16) + (sgn ? 3 : 0) + w;
            return operands(dc, v, in, 2, t);
        }
        if (rem)
            return "unsupported type";
        if ((why = float_op(v, in, t, CR__FOP_DIV, CR__OP_DIV_F32, CR__OP_DIV_F64)))
            return why;
        return operands(dc, v, in, 2, t);
    }
    case CR__B_abs:
    case CR__B_neg: {
        int neg = v->src->base == CR__B_neg;
        if (is_int(t) && w >= 0) {
            in->op = (neg ? CR__OP_NEG16 : CR__OP_ABS16) + w;
            return operands(dc, v, in, 1, t);
        }
        if ((why = float_op(v, in, t, neg ? CR__FOP_NEG : CR__FOP_ABS,
                            neg ? CR__OP_NEG_F32 : CR__OP_ABS_F32,
                            neg ? CR__OP_NEG_F64 : CR__OP_ABS_F64)))
            return why;
        return operands(dc, v, in, 1, t);
    }
    case CR__B_min:
    case CR__B_max: {
        int max = v->src->base == CR__B_max;
        if (is_int(t) && w >= 0) {
            if (has(v, CR__M_relu))
                return "min/max.relu is not supported";
            in->op = (max ? CR__OP_MAX_U16 : CR__OP_MIN_U16) + (sgn ? 3 : 0) + w;
            return operands(dc, v, in, 2, t);
        }
        if (has(v, CR__M_xorsign) || has(v, CR__M_abs))
            return "min/max.xorsign.abs is not supported";
        if ((why = float_op(v, in, t, max ? CR__FOP_MAX : CR__FOP_MIN,
                            max ? CR__OP_MAX_F32 : CR__OP_MIN_F32,
                            max ? CR__OP_MAX_F64 : CR__OP_MIN_F64)))
            return why;
        return operands(dc, v, in, 2, t);
    }
    case CR__B_and:
    case CR__B_or:
    case CR__B_xor:
        if (t == CR__T_NONE || cr__type_float(t))
            return "unsupported type";
        in->op = v->src->base == CR__B_and  ? CR__OP_AND
                 : v->src->base == CR__B_or ? CR__OP_OR
                                            : CR__OP_XOR;
        return operands(dc, v, in, 2, t);
    case CR__B_not:
        if (t == CR__T_PRED) {
            in->op = CR__OP_CNOT;
        } else {
            if (w < 0)
                return "unsupported type";
            in->op = CR__OP_NOT16 + w;
        }
        return operands(dc, v, in, 1, t);
    case CR__B_cnot:
        in->op = CR__OP_CNOT;
        return operands(dc, v, in, 1, t);
    case CR__B_shl:
        if (w < 0)
            return "unsupported type";
        in->op = CR__OP_SHL16 + w;
        if ((why = operands(dc, v, in, 2, t)))
            return why;
        in->r[2] = val(dc, v, 2, CR__T_U32);
        return NULL;
    case CR__B_shr:
        if (w < 0)
            return "unsupported type";
        in->op = CR__OP_SHR_U16 + (sgn ? 3 : 0) + w;
        if ((why = operands(dc, v, in, 2, t)))
            return why;
        in->r[2] = val(dc, v, 2, CR__T_U32);
        return NULL;
    case CR__B_popc:
    case CR__B_clz:
    case CR__B_brev:
        if (w < 1)
            return "unsupported type";
        in->op = (v->src->base == CR__B_popc  ? CR__OP_POPC32
                  : v->src->base == CR__B_clz ? CR__OP_CLZ32
                                              : CR__OP_BREV32) +
                 (w == 2);
        return operands(dc, v, in, 1, t);
    case CR__B_bfind:
        if (w < 1)
            return "unsupported type";
        in->op = CR__OP_BFIND;
        in->sub = (uint8_t)has(v, CR__M_shiftamt);
        in->sub2 = (uint16_t)t;
        return operands(dc, v, in, 1, t);
    case CR__B_bfe:
        if (w < 1)
            return "unsupported type";
        in->op = CR__OP_BFE;
        in->sub2 = (uint16_t)t;
        if ((why = operands(dc, v, in, 3, t)))
            return why;
        in->r[2] = val(dc, v, 2, CR__T_U32);
        in->r[3] = val(dc, v, 3, CR__T_U32);
        return NULL;
    case CR__B_bfi:
        if (w < 1)
            return "unsupported type";
        in->op = CR__OP_BFI;
        in->sub2 = (uint16_t)t;
        if ((why = operands(dc, v, in, 4, t)))
            return why;
        in->r[3] = val(dc, v, 3, CR__T_U32);
        in->r[4] = val(dc, v, 4, CR__T_U32);
        return NULL;
    case CR__B_prmt:
        in->op = CR__OP_PRMT;
        in->sub = has(v, CR__M_f4e)    ? 1
                  : has(v, CR__M_b4e)  ? 2
                  : has(v, CR__M_rc8)  ? 3
                  : has(v, CR__M_ecl)  ? 4
                  : has(v, CR__M_ecr)  ? 5
                  : has(v, CR__M_rc16) ? 6
                                       : 0;
        return operands(dc, v, in, 3, CR__T_B32);
    case CR__B_shf:
        in->op = CR__OP_SHF;
        in->sub = (uint8_t)(has(v, CR__M_r) | has(v, CR__M_clamp) << 1);
        return operands(dc, v, in, 3, CR__T_B32);
    case CR__B_lop3:
        if (v->ntop != 5 || opd(v, 4)->kind != CR__O_IMM)
            return "unsupported lop3 form";
        in->op = CR__OP_LOP3;
        in->imm = opd(v, 4)->value & 0xff;
        if (v->ntop != 5)
            return "wrong number of operands";
        in->r[0] = dst(dc, v, 0);
        for (uint32_t k = 1; k < 4; k++)
            if ((in->r[k] = val(dc, v, k, CR__T_B32)) == UINT32_MAX)
                return "bad operand";
        return in->r[0] == UINT32_MAX ? "bad destination" : NULL;
    case CR__B_bmsk:
        in->op = CR__OP_BMSK;
        in->sub = (uint8_t)has(v, CR__M_clamp);
        return operands(dc, v, in, 2, CR__T_B32);
    case CR__B_szext:
        in->op = CR__OP_SZEXT;
        in->sub = (uint8_t)has(v, CR__M_clamp);
        in->sub2 = (uint16_t)sgn;
        return operands(dc, v, in, 2, CR__T_U32);
    case CR__B_dp4a:
    case CR__B_dp2a:
        if (v->ntypes != 2)
            return "unsupported type";
        in->op = v->src->base == CR__B_dp4a ? CR__OP_DP4A : CR__OP_DP2A;
        in->sub = (uint8_t)(cr__type_signed(v->types[0]) | cr__type_signed(v->types[1]) << 1 |
                            has(v, CR__M_hi) << 2);
        return operands(dc, v, in, 3, CR__T_B32);
    case CR__B_vadd2:
    case CR__B_vadd4:
    case CR__B_vsub2:
    case CR__B_vsub4:
    case CR__B_vavrg2:
    case CR__B_vavrg4:
    case CR__B_vabsdiff2:
    case CR__B_vabsdiff4:
    case CR__B_vmin2:
    case CR__B_vmin4:
    case CR__B_vmax2:
    case CR__B_vmax4: {
        static const struct {
            uint8_t op, halves;
        } map[] = {[CR__B_vadd2] = {CR__ATOM_ADD, 1},      [CR__B_vadd4] = {CR__ATOM_ADD, 0},
                   [CR__B_vsub2] = {CR__V_SUB, 1},         [CR__B_vsub4] = {CR__V_SUB, 0},
                   [CR__B_vavrg2] = {CR__V_AVRG, 1},       [CR__B_vavrg4] = {CR__V_AVRG, 0},
                   [CR__B_vabsdiff2] = {CR__V_ABSDIFF, 1}, [CR__B_vabsdiff4] = {CR__V_ABSDIFF, 0},
                   [CR__B_vmin2] = {CR__ATOM_MIN, 1},      [CR__B_vmin4] = {CR__ATOM_MIN, 0},
                   [CR__B_vmax2] = {CR__ATOM_MAX, 1},      [CR__B_vmax4] = {CR__ATOM_MAX, 0}};
        if (v->ntypes != 3)
            return "SIMD video instructions need three types";
        in->op = CR__OP_VSIMD;
        in->sub = map[v->src->base].op;
        in->sub2 = (uint16_t)(map[v->src->base].halves * CR__V_HALVES |
                              cr__type_signed(v->types[1]) * CR__V_SIGNED_A |
                              cr__type_signed(v->types[2]) * CR__V_SIGNED_B |
                              cr__type_signed(v->types[0]) * CR__V_SIGNED_D |
                              has(v, CR__M_sat) * CR__V_SAT | has(v, CR__M_add) * CR__V_ADD);
        return operands(dc, v, in, 3, CR__T_B32);
    }
    case CR__B_testp: {
        int op = has(v, CR__M_finite)       ? 0
                 : has(v, CR__M_infinite)   ? 1
                 : has(v, CR__M_number)     ? 2
                 : has(v, CR__M_notanumber) ? 3
                 : has(v, CR__M_normal)     ? 4
                 : has(v, CR__M_subnormal)  ? 5
                                            : -1;
        if (op < 0 || (t != CR__T_F32 && t != CR__T_F64))
            return "unsupported testp";
        in->op = t == CR__T_F32 ? CR__OP_TESTP_F32 : CR__OP_TESTP_F64;
        in->sub = (uint8_t)op;
        return operands(dc, v, in, 1, t);
    }
    case CR__B_copysign:
        if (t != CR__T_F32 && t != CR__T_F64)
            return "unsupported type";
        in->op = t == CR__T_F32 ? CR__OP_COPYSIGN_F32 : CR__OP_COPYSIGN_F64;
        return operands(dc, v, in, 2, t);
    case CR__B_sqrt:
    case CR__B_rsqrt:
    case CR__B_rcp:
    case CR__B_ex2:
    case CR__B_lg2:
    case CR__B_sin:
    case CR__B_cos:
    case CR__B_tanh: {
        static const struct {
            int fop;
            uint16_t f32, f64;
        } map[] = {[CR__B_sqrt] = {CR__FOP_SQRT, CR__OP_SQRT_F32, CR__OP_SQRT_F64},
                   [CR__B_rsqrt] = {CR__FOP_RSQRT, CR__OP_RSQRT_F32, CR__OP_RSQRT_F64},
                   [CR__B_rcp] = {CR__FOP_RCP, CR__OP_RCP_F32, CR__OP_RCP_F64},
                   [CR__B_ex2] = {CR__FOP_EX2, CR__OP_EX2_F32, CR__OP_NOP},
                   [CR__B_lg2] = {CR__FOP_LG2, CR__OP_LG2_F32, CR__OP_NOP},
                   [CR__B_sin] = {CR__FOP_SIN, CR__OP_SIN_F32, CR__OP_NOP},
                   [CR__B_cos] = {CR__FOP_COS, CR__OP_COS_F32, CR__OP_NOP},
                   [CR__B_tanh] = {CR__FOP_TANH, CR__OP_TANH_F32, CR__OP_NOP}};
        unsigned b = v->src->base;
        if (t == CR__T_F64 && map[b].f64 == CR__OP_NOP && b != CR__B_ex2 && b != CR__B_lg2)
            return "unsupported type";
        if ((why = float_op(v, in, t, map[b].fop, map[b].f32, map[b].f64)))
            return why;
        return operands(dc, v, in, 1, t);
    }
    case CR__B_setp:
        return decode_setp(dc, v, in, 0);
    case CR__B_set:
        return decode_setp(dc, v, in, 1);
    case CR__B_selp:
        in->op = CR__OP_SELP;
        if ((why = operands(dc, v, in, 3, t)))
            return why;
        in->r[3] = val(dc, v, 3, CR__T_PRED);
        return in->r[3] == UINT32_MAX ? "bad predicate" : NULL;
    case CR__B_slct: {
        if (v->ntypes != 2)
            return "slct needs two types";
        cr__type_t ct = v->types[1];
        if (ct != CR__T_S32 && ct != CR__T_F32)
            return "unsupported slct type";
        in->op = ct == CR__T_S32 ? CR__OP_SLCT_S32 : CR__OP_SLCT_F32;
        if ((why = operands(dc, v, in, 3, t)))
            return why;
        in->r[3] = val(dc, v, 3, ct);
        return NULL;
    }
    case CR__B_mov:
        return decode_mov(dc, v, in);
    case CR__B_cvt:
        return decode_cvt(dc, v, in);
    case CR__B_cvta:
        return decode_cvta(dc, v, in);
    case CR__B_isspacep: {
        cr__space_t sp = space_of(v);
        in->op = CR__OP_ISSPACEP;
        in->sub = (uint8_t)sp;
        if (sp == CR__SP_NONE)
            return "isspacep needs a state space";
        return operands(dc, v, in, 1, CR__T_U64);
    }
    case CR__B_ld:
    case CR__B_ldu:
        return decode_ldst(dc, v, in, 0);
    case CR__B_st:
        return decode_ldst(dc, v, in, 1);
    case CR__B_atom:
        return decode_atom(dc, v, in, 0);
    case CR__B_red:
        return decode_atom(dc, v, in, 1);
    case CR__B_cp:
        return decode_cp(dc, v, in);
    case CR__B_wmma:
        return decode_wmma(dc, v, in);
    case CR__B_bar:
    case CR__B_barrier:
        return decode_bar(dc, v, in);
    case CR__B_membar:
    case CR__B_fence:
        in->op = has(v, CR__M_proxy) ? CR__OP_NOP : CR__OP_FENCE;
        return NULL;
    case CR__B_bra: {
        if (has(v, CR__M_idx))
            return "brx.idx is not supported";
        if (v->ntop != 1 || opd(v, 0)->kind != CR__O_LABEL)
            return "bad branch target";
        const char *name = cr__ir_str(dc->ir, opd(v, 0)->id);
        const cr__ir_func_t *f = &dc->ir->funcs[dc->p->funcs[dc->pf].ir_func];
        for (uint32_t k = 0; k < f->label_count; k++) {
            const cr__ir_label_t *l = &dc->ir->labels[f->label_first + k];
            if (strcmp(cr__ir_str(dc->ir, l->name), name) == 0) {
                in->op = CR__OP_BRA;
                in->imm = l->insn;
                return NULL;
            }
        }
        return "unknown label";
    }
    case CR__B_call:
        return decode_call(dc, v, in);
    case CR__B_ret:
        in->op = dc->pf == 0 ? CR__OP_EXIT : CR__OP_RET;
        return NULL;
    case CR__B_exit:
        in->op = CR__OP_EXIT;
        return NULL;
    case CR__B_trap:
    case CR__B_brkpt:
        in->op = CR__OP_TRAP;
        in->sub = v->src->base == CR__B_brkpt;
        return NULL;
    case CR__B_shfl:
        return decode_shfl(dc, v, in);
    case CR__B_vote:
        return decode_vote(dc, v, in);
    case CR__B_activemask:
        in->op = CR__OP_ACTIVEMASK;
        if (v->ntop != 1 || (in->r[0] = dst(dc, v, 0)) == UINT32_MAX)
            return "bad destination";
        return NULL;
    case CR__B_match: {
        int all = has(v, CR__M_all);
        if (!all && !has(v, CR__M_any))
            return "missing match mode";
        uint32_t i = 0;
        in->r[0] = dst(dc, v, 0);
        in->r[3] = CR__SLOT_SINK;
        if (opd(v, 0)->flags & CR__OF_PAIR)
            in->r[3] = dst(dc, v, ++i);
        if (v->ntop != i + 3)
            return "wrong number of operands";
        in->r[1] = val(dc, v, i + 1, t);
        in->r[2] = val(dc, v, i + 2, CR__T_B32);
        for (int k = 0; k < 4; k++)
            if (in->r[k] == UINT32_MAX)
                return "bad operand";
        in->op = CR__OP_MATCH;
        in->sub = (uint8_t)all;
        in->sub2 = w == 2;
        return NULL;
    }
    case CR__B_redux: {
        int op = atom_op(v);
        if (op != CR__ATOM_ADD && op != CR__ATOM_MIN && op != CR__ATOM_MAX && op != CR__ATOM_AND &&
            op != CR__ATOM_OR && op != CR__ATOM_XOR)
            return "unsupported redux operation";
        if (w != 1 || cr__type_float(t))
            return "unsupported redux type";
        in->op = CR__OP_REDUX;
        in->sub = (uint8_t)op;
        in->sub2 = (uint16_t)sgn;
        return operands(dc, v, in, 2, t);
    }
    case CR__B_elect:
        if (v->ntop != 3 || !(opd(v, 0)->flags & CR__OF_PAIR))
            return "bad elect operands";
        in->op = CR__OP_ELECT;
        in->r[0] = dst(dc, v, 0);
        in->r[1] = dst(dc, v, 1);
        in->r[2] = val(dc, v, 2, CR__T_B32);
        for (int k = 0; k < 3; k++)
            if (in->r[k] == UINT32_MAX)
                return "bad operand";
        return NULL;
    case CR__B_createpolicy:
        in->op = CR__OP_MOV;
        in->sub = 8;
        in->r[0] = dst(dc, v, 0);
        in->r[1] = CR__SLOT_ZERO;
        return in->r[0] == UINT32_MAX ? "bad destination" : NULL;
    case CR__B_nanosleep:
    case CR__B_pmevent:
    case CR__B_prefetch:
    case CR__B_prefetchu:
    case CR__B_discard:
    case CR__B_applypriority:
    case CR__B_griddepcontrol:
        in->op = CR__OP_NOP;
        return NULL;
    default:
        return "unknown instruction";
    }
}

void cr__dc_insn(cr__dc_t *dc, const cr__ir_insn_t *src, uint32_t ir_index)
{
    view_t v;
    memset(&v, 0, sizeof v);
    v.src = src;
    v.pool = dc->ir->opds ? &dc->ir->opds[src->opd] : NULL; /* no operands at all: NULL */
    uint32_t pos = 0;
    for (uint32_t i = 0; i < src->nopd && v.ntop < 24; i++) {
        v.top[v.ntop++] = pos;
        const cr__opd_t *o = &v.pool[pos];
        pos += 1 + (o->kind == CR__O_VEC ? o->id : o->kind == CR__O_ADDR ? o->id : 0);
    }
    for (uint32_t i = 0; i < src->nmods; i++) {
        v.mods[src->mods[i]] = 1;
        if (src->mods[i] >= CR__M_TYPE && v.ntypes < 4)
            v.types[v.ntypes++] = (cr__type_t)(src->mods[i] - CR__M_TYPE);
    }
    cr__insn_t in;
    memset(&in, 0, sizeof in);
    const char *why = src->nopd > 24 ? "too many operands" : NULL;
    for (uint32_t i = 0; i < src->nmods && !why; i++)
        if (src->mods[i] == CR__M_UNKNOWN)
            why = "unknown modifier";
    if (!why)
        why = decode(dc, &v, &in);
    for (int k = 0; k < 6 && !why; k++)
        if (in.r[k] == UINT32_MAX)
            why = "bad operand";
    if (why) {
        cr__dc_unsupported(dc, src, ir_index, why);
        return;
    }
    if (src->guard) {
        in.guard = src->guard;
        in.pred = cr__dc_reg_slot(dc, src->guard_reg);
    }
    cr__dc_emit(dc, &in);
}
