/* Module IR -> executable programs, one per kernel.
 *
 * A program is the kernel and every function it can call, laid out in one instruction array.
 * Register slots: the fixed slots (special registers, frame base, carry), then each
 * function's registers at its own base, then constants (immediates), then the addresses of
 * module variables (filled at launch). Variables get their places here: shared ones an offset
 * in the block's shared memory (dynamic shared memory after the static), local ones and the
 * parameters of functions an offset in the frame of their function, kernel parameters an
 * offset in the parameter buffer. Frames live in per-thread local memory: a callee's frame
 * starts where its caller's ends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "error.h"

#define RECURSION_STACK (16u << 10) /* extra local memory per thread for recursive calls */

static int grow(cr__dc_t *dc, void **arr, uint32_t *cap, uint32_t need, size_t size)
{
    if (cr__grow(arr, cap, need, size) != 0) {
        dc->failed = 1;
        return -1;
    }
    return 0;
}

uint32_t cr__dc_emit(cr__dc_t *dc, const cr__insn_t *in)
{
    cr__prog_t *p = dc->p;
    if (p->ncode == dc->cap_code) {
        uint32_t ncap = dc->cap_code ? dc->cap_code * 2 : 256;
        cr__insn_t *code = realloc(p->code, ncap * sizeof *code);
        if (code)
            p->code = code;
        uint32_t *src = code ? realloc(p->src, ncap * sizeof *src) : NULL;
        if (src)
            p->src = src;
        if (!code || !src) {
            dc->failed = 1;
            return 0;
        }
        dc->cap_code = ncap;
    }
    p->code[p->ncode] = *in;
    p->src[p->ncode] = UINT32_MAX;
    return p->ncode++;
}

void cr__dc_unsupported(cr__dc_t *dc, const cr__ir_insn_t *src, uint32_t ir_index, const char *why)
{
    (void)src;
    (void)ir_index;
    if (grow(dc, (void **)&dc->why, &dc->cap_why, dc->nwhy + 1, sizeof *dc->why))
        return;
    dc->why[dc->nwhy] = why;
    cr__insn_t in = {.op = CR__OP_UNSUPPORTED};
    in.r[0] = dc->nwhy++;
    cr__dc_emit(dc, &in);
}

uint32_t cr__dc_add_call(cr__dc_t *dc, const cr__call_t *c)
{
    cr__prog_t *p = dc->p;
    if (grow(dc, (void **)&p->calls, &dc->cap_calls, p->ncalls + 1, sizeof *p->calls))
        return UINT32_MAX;
    p->calls[p->ncalls] = *c;
    return p->ncalls++;
}

uint32_t cr__dc_add_copy(cr__dc_t *dc, const cr__copy_t *c)
{
    cr__prog_t *p = dc->p;
    if (grow(dc, (void **)&p->copies, &dc->cap_copies, p->ncopies + 1, sizeof *p->copies))
        return UINT32_MAX;
    p->copies[p->ncopies] = *c;
    return p->ncopies++;
}

uint32_t cr__dc_const(cr__dc_t *dc, uint64_t value)
{
    cr__prog_t *p = dc->p;
    for (uint32_t i = 0; i < p->nconsts; i++)
        if (p->consts[i] == value)
            return CR__CONST_REF | i;
    if (grow(dc, (void **)&p->consts, &dc->cap_consts, p->nconsts + 1, sizeof *p->consts))
        return CR__SLOT_ZERO;
    p->consts[p->nconsts] = value;
    return CR__CONST_REF | p->nconsts++;
}

/* The address slot of module variable v. */
static uint32_t sym_slot(cr__dc_t *dc, uint32_t v)
{
    cr__loc_t *loc = &dc->var_loc[v];
    if (loc->kind == CR__LOC_SYM)
        return loc->slot;
    cr__prog_t *p = dc->p;
    if (grow(dc, (void **)&p->sym_vars, &dc->cap_syms, p->nsyms + 1, sizeof *p->sym_vars))
        return CR__SLOT_ZERO;
    p->sym_vars[p->nsyms] = v;
    loc->kind = CR__LOC_SYM;
    loc->slot = CR__SYM_REF | p->nsyms++;
    return loc->slot;
}

uint32_t cr__dc_reg_slot(cr__dc_t *dc, uint32_t reg)
{
    const cr__pfunc_t *pf = &dc->p->funcs[dc->pf];
    const cr__ir_func_t *f = &dc->ir->funcs[pf->ir_func];
    if (reg < f->reg_first || reg >= f->reg_first + f->reg_count)
        return CR__SLOT_SINK;
    return pf->reg_base + (reg - f->reg_first);
}

cr__type_t cr__dc_reg_type(cr__dc_t *dc, uint32_t reg)
{
    return reg < dc->ir->nregs ? (cr__type_t)dc->ir->regs[reg].type : CR__T_NONE;
}

/* The bits of a literal as an operand of type t. */
static uint64_t literal_bits(const cr__opd_t *o, cr__type_t t)
{
    uint64_t v = (uint64_t)o->value;
    int fsize = o->kind == CR__O_FLT ? (o->reserved ? o->reserved : 8) : 0;
    double d = 0;
    if (fsize == 4) {
        float f;
        uint32_t b = (uint32_t)v;
        memcpy(&f, &b, 4);
        d = f;
    } else if (fsize == 8) {
        memcpy(&d, &v, 8);
    }
    switch (t) {
    case CR__T_F32:
    case CR__T_TF32: {
        if (fsize == 4)
            return (uint32_t)v;
        float f = fsize ? (float)d : (float)(int64_t)v;
        uint32_t b;
        memcpy(&b, &f, 4);
        return b;
    }
    case CR__T_F64: {
        if (fsize == 8)
            return v;
        double x = fsize ? d : (double)(int64_t)v;
        uint64_t b;
        memcpy(&b, &x, 8);
        return b;
    }
    case CR__T_F16:
        return fsize ? cr__f64_to_f16(d, CR__RND_RN) : v & 0xffff;
    case CR__T_BF16:
        return fsize ? cr__f64_to_bf16(d, CR__RND_RN) : v & 0xffff;
    case CR__T_PRED:
        return v != 0;
    default: {
        unsigned size = cr__type_size(t);
        if (size && size < 8)
            v &= (1ull << (size * 8)) - 1;
        return v;
    }
    }
}

uint32_t cr__dc_value(cr__dc_t *dc, const cr__opd_t *o, cr__type_t t)
{
    switch (o->kind) {
    case CR__O_REG:
        return cr__dc_reg_slot(dc, o->id);
    case CR__O_IMM:
    case CR__O_FLT:
        return cr__dc_const(dc, literal_bits(o, t));
    case CR__O_SINK:
        return CR__SLOT_SINK;
    case CR__O_SREG:
        switch (o->id) {
        case CR__SR_TID_X:
            return CR__SLOT_TID_X;
        case CR__SR_TID_Y:
            return CR__SLOT_TID_Y;
        case CR__SR_TID_Z:
            return CR__SLOT_TID_Z;
        case CR__SR_NTID_X:
            return CR__SLOT_NTID_X;
        case CR__SR_NTID_Y:
            return CR__SLOT_NTID_Y;
        case CR__SR_NTID_Z:
            return CR__SLOT_NTID_Z;
        case CR__SR_CTAID_X:
        case CR__SR_CLUSTERID_X:
            return CR__SLOT_CTAID_X;
        case CR__SR_CTAID_Y:
        case CR__SR_CLUSTERID_Y:
            return CR__SLOT_CTAID_Y;
        case CR__SR_CTAID_Z:
        case CR__SR_CLUSTERID_Z:
            return CR__SLOT_CTAID_Z;
        case CR__SR_NCTAID_X:
        case CR__SR_NCLUSTERID_X:
            return CR__SLOT_NCTAID_X;
        case CR__SR_NCTAID_Y:
        case CR__SR_NCLUSTERID_Y:
            return CR__SLOT_NCTAID_Y;
        case CR__SR_NCTAID_Z:
        case CR__SR_NCLUSTERID_Z:
            return CR__SLOT_NCTAID_Z;
        case CR__SR_LANEID:
            return CR__SLOT_LANEID;
        case CR__SR_WARPID:
            return CR__SLOT_WARPID;
        case CR__SR_NWARPID:
            return CR__SLOT_NWARPID;
        case CR__SR_LANEMASK_EQ:
            return CR__SLOT_LANEMASK_EQ;
        case CR__SR_LANEMASK_LE:
            return CR__SLOT_LANEMASK_LE;
        case CR__SR_LANEMASK_LT:
            return CR__SLOT_LANEMASK_LT;
        case CR__SR_LANEMASK_GE:
            return CR__SLOT_LANEMASK_GE;
        case CR__SR_LANEMASK_GT:
            return CR__SLOT_LANEMASK_GT;
        case CR__SR_DYN_SMEM:
            return CR__SLOT_DYN_SMEM;
        case CR__SR_TOTAL_SMEM:
        case CR__SR_AGGR_SMEM:
            return CR__SLOT_TOTAL_SMEM;
        case CR__SR_SMID:
        case CR__SR_CLUSTER_CTAID_X:
        case CR__SR_CLUSTER_CTAID_Y:
        case CR__SR_CLUSTER_CTAID_Z:
        case CR__SR_CLUSTER_CTARANK:
        case CR__SR_IS_EXPLICIT_CLUSTER:
            return CR__SLOT_ZERO;
        case CR__SR_NSMID:
            return cr__dc_const(dc, 132);
        case CR__SR_GRIDID:
            return cr__dc_const(dc, 1);
        case CR__SR_CLUSTER_NCTAID_X:
        case CR__SR_CLUSTER_NCTAID_Y:
        case CR__SR_CLUSTER_NCTAID_Z:
        case CR__SR_CLUSTER_NCTARANK:
            return cr__dc_const(dc, 1);
        default:
            return UINT32_MAX; /* clocks: their own instructions */
        }
    case CR__O_VAR: {
        const cr__loc_t *loc = &dc->var_loc[o->id];
        switch (loc->kind) {
        case CR__LOC_SYM:
        case CR__LOC_NONE:
            if (o->value)
                return UINT32_MAX;
            return sym_slot(dc, o->id);
        case CR__LOC_SHARED:
        case CR__LOC_KPARAM:
            return cr__dc_const(dc, loc->offset + (uint64_t)o->value);
        default:
            return UINT32_MAX;
        }
    }
    case CR__O_FUNC: { /* a function's address: its tag (the definition's index) */
        int f = cr__ir_find_func(dc->ir, cr__ir_str(dc->ir, dc->ir->funcs[o->id].name));
        return f < 0 ? UINT32_MAX : cr__dc_const(dc, CR__FUNC_TAG | (uint64_t)f);
    }
    default:
        return UINT32_MAX;
    }
}

/* ---- program layout ---- */

/* Adds IR function f to the program (once). */
static int add_func(cr__dc_t *dc, uint32_t f)
{
    if (dc->func_map[f])
        return 0;
    cr__prog_t *p = dc->p;
    uint32_t cap = p->nfuncs;
    void *n = realloc(p->funcs, (cap + 1) * sizeof *p->funcs);
    if (!n)
        return dc->failed = 1, -1;
    p->funcs = n;
    memset(&p->funcs[p->nfuncs], 0, sizeof *p->funcs);
    p->funcs[p->nfuncs].ir_func = f;
    dc->func_map[f] = ++p->nfuncs;
    return 0;
}

/* The function an operand names (its definition when there is one), or -1. */
static int opd_func(const cr__ir_t *ir, const cr__opd_t *o)
{
    if (o->kind != CR__O_FUNC)
        return -1;
    return cr__ir_find_func(ir, cr__ir_str(ir, ir->funcs[o->id].name));
}

/* Calls f makes: callees (IR functions with a body) into out (up to max); returns the count. */
static uint32_t callees(const cr__ir_t *ir, uint32_t f, uint32_t *out, uint32_t max)
{
    const cr__ir_func_t *fn = &ir->funcs[f];
    uint32_t n = 0;
    for (uint32_t i = 0; i < fn->insn_count; i++) {
        const cr__ir_insn_t *in = &ir->insns[fn->insn_first + i];
        for (uint32_t k = 0; k < in->npool; k++) {
            int g = opd_func(ir, &ir->opds[in->opd + k]);
            if (g < 0 || !ir->funcs[g].has_body)
                continue;
            int seen = 0;
            for (uint32_t j = 0; j < n; j++)
                seen |= out[j] == (uint32_t)g;
            if (!seen && n < max)
                out[n++] = (uint32_t)g;
        }
    }
    return n;
}

/* 1 when function f calls through a register (function pointers, virtual calls). */
static int has_indirect_call(const cr__ir_t *ir, uint32_t f)
{
    const cr__ir_func_t *fn = &ir->funcs[f];
    for (uint32_t i = 0; i < fn->insn_count; i++) {
        const cr__ir_insn_t *in = &ir->insns[fn->insn_first + i];
        if (in->base != CR__B_call)
            continue;
        for (uint32_t k = 0; k < in->npool; k++) {
            const cr__opd_t *o = &ir->opds[in->opd + k];
            if (o->kind == CR__O_VEC) {
                k += o->id;
                continue;
            }
            if (o->kind == CR__O_REG)
                return 1;
            if (o->kind == CR__O_FUNC)
                break;
        }
    }
    return 0;
}

/* 1 when `from` can reach `target` through calls (depth-first, visited marks). */
static int reaches(const cr__ir_t *ir, uint32_t from, uint32_t target, uint8_t *visited,
                   uint32_t *scratch, uint32_t scratch_len)
{
    if (visited[from])
        return 0;
    visited[from] = 1;
    uint32_t n = callees(ir, from, scratch, scratch_len);
    uint32_t *mine = malloc((n ? n : 1) * sizeof *mine);
    if (!mine)
        return 0;
    memcpy(mine, scratch, n * sizeof *mine);
    int found = 0;
    for (uint32_t i = 0; i < n && !found; i++)
        found = mine[i] == target || reaches(ir, mine[i], target, visited, scratch, scratch_len);
    free(mine);
    return found;
}

/* Frame layout of program function pf: parameters, return values, locals, call parameters. */
static void layout_frame(cr__dc_t *dc, uint32_t pfi)
{
    cr__pfunc_t *pf = &dc->p->funcs[pfi];
    const cr__ir_t *ir = dc->ir;
    const cr__ir_func_t *f = &ir->funcs[pf->ir_func];
    uint64_t off = 0;
    for (uint32_t v = 0; v < ir->nvars; v++) {
        const cr__ir_var_t *var = &ir->vars[v];
        if (var->func != (int32_t)pf->ir_func)
            continue;
        cr__loc_t *loc = &dc->var_loc[v];
        if (var->space == CR__SP_PARAM && f->is_entry && var->is_param) {
            loc->kind = CR__LOC_KPARAM;
            loc->offset = var->param_offset;
        } else if (var->space == CR__SP_PARAM || var->space == CR__SP_LOCAL) {
            uint64_t a = var->align ? var->align : 1;
            off = (off + a - 1) / a * a;
            loc->kind = CR__LOC_FRAME;
            loc->offset = off;
            off += var->size;
        }
    }
    pf->frame_size = (uint32_t)((off + 15) / 16 * 16);
}

/* Offsets of the shared variables of the program: static ones first, then the dynamic
 * (extern, unsized) ones all at the same aligned offset. */
static void layout_shared(cr__dc_t *dc)
{
    const cr__ir_t *ir = dc->ir;
    cr__prog_t *p = dc->p;
    uint64_t off = 0, dyn_align = 16;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t v = 0; v < ir->nvars; v++) {
            const cr__ir_var_t *var = &ir->vars[v];
            if (var->space != CR__SP_SHARED)
                continue;
            if (var->func >= 0 && !dc->func_map[var->func])
                continue;
            int dynamic = var->is_extern || var->is_unsized;
            if (pass == 0 && !dynamic) {
                uint64_t a = var->align ? var->align : 1;
                off = (off + a - 1) / a * a;
                dc->var_loc[v].kind = CR__LOC_SHARED;
                dc->var_loc[v].offset = off;
                off += var->size;
            } else if (pass == 1 && dynamic) {
                dc->var_loc[v].kind = CR__LOC_SHARED;
                dc->var_loc[v].offset = (off + dyn_align - 1) / dyn_align * dyn_align;
            } else if (pass == 0 && dynamic && var->align > dyn_align) {
                dyn_align = var->align;
            }
        }
    }
    p->shared_static = off > UINT32_MAX ? UINT32_MAX : (uint32_t)off; /* refused at launch */
    p->shared_dyn_offset_align = (uint32_t)dyn_align;
}

/* Local memory per thread: the deepest chain of frames (cycles counted once, plus a fixed
 * budget when there is recursion). */
static uint32_t chain_bytes(cr__dc_t *dc, uint32_t pfi, uint8_t *onpath, int depth)
{
    cr__prog_t *p = dc->p;
    if (onpath[pfi] || depth > 256)
        return 0;
    onpath[pfi] = 1;
    uint32_t list[64];
    uint32_t n = callees(dc->ir, p->funcs[pfi].ir_func, list, 64), best = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t c = dc->func_map[list[i]];
        if (!c)
            continue;
        uint32_t b = chain_bytes(dc, c - 1, onpath, depth + 1);
        if (b > best)
            best = b;
    }
    onpath[pfi] = 0;
    return p->funcs[pfi].frame_size + best;
}

/* Replaces constant and symbol references by their slots. */
static void fix_slots(cr__prog_t *p)
{
    /* wmma fragment lists hold register slots only: nothing to fix there */
    for (uint32_t pc = 0; pc < p->ncode; pc++) {
        cr__insn_t *in = &p->code[pc];
        for (int k = 0; k < 6; k++) {
            if (in->r[k] & CR__SYM_REF)
                in->r[k] = p->sym_base + (in->r[k] & ~CR__SYM_REF);
            else if (in->r[k] & CR__CONST_REF)
                in->r[k] = p->const_base + (in->r[k] & ~CR__CONST_REF);
        }
    }
}

static int build(cr__dc_t *dc, uint32_t kernel)
{
    cr__ir_t *ir = dc->ir;
    cr__prog_t *p = dc->p;
    if (add_func(dc, kernel))
        return -1;
    /* reachable functions, breadth first; with calls through pointers, every function whose
     * address the module takes (in code or in a variable's initialiser) too */
    int indirect = 0;
    for (uint32_t i = 0; i < p->nfuncs; i++) {
        uint32_t list[256];
        uint32_t n = callees(ir, p->funcs[i].ir_func, list, 256);
        for (uint32_t k = 0; k < n; k++)
            if (add_func(dc, list[k]))
                return -1;
        if (!indirect && has_indirect_call(ir, p->funcs[i].ir_func)) {
            indirect = 1;
            for (uint32_t r = 0; r < ir->nrelocs; r++) {
                int f = cr__ir_find_func(ir, cr__ir_str(ir, ir->relocs[r].name));
                if (f >= 0 && ir->funcs[f].has_body && add_func(dc, (uint32_t)f))
                    return -1;
            }
        }
    }
    uint8_t *visited = calloc(ir->nfuncs ? ir->nfuncs : 1, 1);
    uint32_t *scratch = malloc(256 * sizeof *scratch);
    if (!visited || !scratch) {
        free(visited);
        free(scratch);
        return dc->failed = 1, -1;
    }
    int any_recursion = 0;
    uint32_t reg_base = CR__SLOT_FIXED;
    for (uint32_t i = 0; i < p->nfuncs; i++) {
        cr__pfunc_t *pf = &p->funcs[i];
        memset(visited, 0, ir->nfuncs);
        pf->recursive = indirect || reaches(ir, pf->ir_func, pf->ir_func, visited, scratch, 256);
        any_recursion |= pf->recursive;
        pf->reg_base = reg_base;
        pf->reg_count = ir->funcs[pf->ir_func].reg_count;
        reg_base += pf->reg_count;
        layout_frame(dc, i);
    }
    free(visited);
    free(scratch);
    layout_shared(dc);
    if (!(p->func_of_ir = malloc(ir->nfuncs * sizeof *p->func_of_ir)))
        return dc->failed = 1, -1;
    for (uint32_t f = 0; f < ir->nfuncs; f++)
        p->func_of_ir[f] = dc->func_map[f] ? (int32_t)dc->func_map[f] - 1 : -1;
    for (uint32_t i = 0; i < p->nfuncs; i++) {
        const cr__ir_func_t *f = &ir->funcs[p->funcs[i].ir_func];
        p->funcs[i].param_first = p->ncopies;
        for (uint32_t k = 0; k < f->param_count; k++) {
            const cr__ir_var_t *v = &ir->vars[f->param_first + k];
            cr__copy_t c = {0, (uint32_t)dc->var_loc[f->param_first + k].offset, (uint32_t)v->size};
            if (cr__dc_add_copy(dc, &c) == UINT32_MAX)
                return -1;
        }
        p->funcs[i].param_count = f->param_count;
        p->funcs[i].ret_first = p->ncopies;
        for (uint32_t k = 0; k < f->ret_count; k++) {
            const cr__ir_var_t *v = &ir->vars[f->ret_first + k];
            cr__copy_t c = {(uint32_t)dc->var_loc[f->ret_first + k].offset, 0, (uint32_t)v->size};
            if (cr__dc_add_copy(dc, &c) == UINT32_MAX)
                return -1;
        }
        p->funcs[i].ret_count = f->ret_count;
    }
    uint8_t *onpath = calloc(p->nfuncs, 1);
    if (!onpath)
        return dc->failed = 1, -1;
    uint64_t local =
        chain_bytes(dc, 0, onpath, 0) + (any_recursion && p->nfuncs > 1 ? RECURSION_STACK : 0);
    free(onpath);
    if (local > UINT32_MAX - 15)
        local = UINT32_MAX - 15; /* refused at launch (module.c) */
    p->local_bytes = (uint32_t)((local + 15) / 16 * 16);
    p->param_size = ir->funcs[kernel].param_size;
    memcpy(p->reqntid, ir->funcs[kernel].reqntid, sizeof p->reqntid);

    /* code */
    for (uint32_t i = 0; i < p->nfuncs && !dc->failed; i++) {
        const cr__ir_func_t *f = &ir->funcs[p->funcs[i].ir_func];
        dc->pf = i;
        p->funcs[i].entry = p->ncode;
        free(dc->insn_pc);
        dc->insn_pc = malloc((f->insn_count + 1) * sizeof *dc->insn_pc);
        if (!dc->insn_pc)
            return dc->failed = 1, -1;
        for (uint32_t k = 0; k < f->insn_count && !dc->failed; k++) {
            dc->insn_pc[k] = p->ncode;
            uint32_t first = p->ncode;
            cr__dc_insn(dc, &ir->insns[f->insn_first + k], f->insn_first + k);
            for (uint32_t pc = first; pc < p->ncode; pc++)
                p->src[pc] = f->insn_first + k;
        }
        dc->insn_pc[f->insn_count] = p->ncode;
        cr__insn_t end = {.op = i == 0 ? CR__OP_EXIT : CR__OP_RET};
        cr__dc_emit(dc, &end);
        p->funcs[i].end = p->ncode;
        /* branch targets: labels were left as instruction indexes of the function */
        for (uint32_t pc = p->funcs[i].entry; pc < p->funcs[i].end && !dc->failed; pc++)
            if (p->code[pc].op == CR__OP_BRA) {
                int64_t k = p->code[pc].imm;
                p->code[pc].imm = k >= 0 && k <= f->insn_count ? dc->insn_pc[k] : p->ncode - 1;
            }
    }
    if (dc->failed)
        return -1;
    p->const_base = reg_base;
    p->sym_base = p->const_base + p->nconsts;
    p->nslots = p->sym_base + p->nsyms;
    fix_slots(p);
    p->why = dc->why;
    p->nwhy = dc->nwhy;
    dc->why = NULL;
    dc->nwhy = dc->cap_why = 0;
    p->unsupported = -1;
    p->has_effects = 0;
    for (uint32_t pc = 0; pc < p->ncode; pc++) {
        unsigned op = p->code[pc].op;
        if (op == CR__OP_UNSUPPORTED && p->unsupported < 0)
            p->unsupported = pc;
        if ((op >= CR__OP_LD_GLOBAL && op <= CR__OP_CP_ASYNC) || op == CR__OP_CALL ||
            op == CR__OP_WMMA || op == CR__OP_TRAP || op == CR__OP_VPRINTF ||
            op == CR__OP_ASSERTFAIL || op == CR__OP_SETCOND || op == CR__OP_UNSUPPORTED)
            p->has_effects = 1;
    }
    return 0;
}

void cr__prog_free(cr__prog_t *p)
{
    if (!p)
        return;
    free(p->name);
    free(p->code);
    free(p->src);
    free(p->why);
    free(p->consts);
    free(p->sym_vars);
    free(p->funcs);
    free(p->func_of_ir);
    free(p->calls);
    free(p->copies);
    free(p->lists);
    memset(p, 0, sizeof *p);
}

int cr__decode(cr__ir_t *ir, cr__prog_t **progs, uint32_t *nprogs, char *err, size_t err_len)
{
    uint32_t nk = 0;
    for (uint32_t f = 0; f < ir->nfuncs; f++)
        nk += ir->funcs[f].is_entry && ir->funcs[f].has_body;
    *progs = NULL;
    *nprogs = 0;
    cr__prog_t *out = calloc(nk ? nk : 1, sizeof *out);
    if (!out)
        return CR_ENOMEM;
    uint32_t n = 0;
    int rc = 0;
    for (uint32_t f = 0; f < ir->nfuncs && rc == 0; f++) {
        if (!ir->funcs[f].is_entry || !ir->funcs[f].has_body)
            continue;
        cr__dc_t dc = {0};
        dc.ir = ir;
        dc.p = &out[n];
        dc.var_loc = calloc(ir->nvars ? ir->nvars : 1, sizeof *dc.var_loc);
        dc.func_map = calloc(ir->nfuncs, sizeof *dc.func_map);
        out[n].name = strdup(cr__ir_str(ir, ir->funcs[f].name));
        if (!dc.var_loc || !dc.func_map || !out[n].name || build(&dc, f) != 0)
            rc = CR_ENOMEM;
        n++;
        free(dc.var_loc);
        free(dc.func_map);
        free(dc.insn_pc);
        free(dc.why);
    }
    if (rc != 0) {
        for (uint32_t i = 0; i < n; i++)
            cr__prog_free(&out[i]);
        free(out);
        if (err && err_len)
            snprintf(err, err_len, "out of memory decoding PTX");
        return rc;
    }
    *progs = out;
    *nprogs = n;
    return 0;
}
