/* Internal header of the PTX interpreter: the parsed module (IR), the decoded programs and the
 * execution state shared by the parser, decoder and executor.
 *
 * Pipeline: parse.c (with the tokenizer and declaration reader of common/ptx_lex.c and
 * ptx_var.c) turns PTX text into a cr__ir_t (functions, registers, variables,
 * instructions with their opcode split into a base and modifiers); decode.c turns each kernel
 * with the functions it can call into a cr__prog_t (one flat array of fixed-size
 * instructions whose operands are register slots); exec.c runs a warp of a program;
 * grid.c runs blocks on the thread pool. */
#ifndef CR_PTX_INTERNAL_H
#define CR_PTX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ptx.h"

/* CUresult values we produce (this library does not include cuda.h). */
#define CR__CU_SUCCESS 0
#define CR__CU_OUT_OF_MEMORY 2
#define CR__CU_NOT_FOUND 500
#define CR__CU_ILLEGAL_ADDRESS 700
#define CR__CU_ASSERT 710
#define CR__CU_ILLEGAL_INSTRUCTION 715
#define CR__CU_MISALIGNED_ADDRESS 716
#define CR__CU_LAUNCH_FAILED 719
#define CR__CU_NOT_SUPPORTED 801

/* Local memory a thread may have, as on the devices the interpreter stands in for (ptxas
 * refuses more): it bounds what a hostile kernel can make the server allocate per block. */
#define CR__LOCAL_PER_THREAD_MAX (512u << 10)
/* Shared memory a block may have, static and dynamic together (a compute capability 9.0
 * device's opt-in maximum): the same bound for shared memory. */
#define CR__SHARED_PER_BLOCK_MAX 232448u
/* Register memory a block may take (8 bytes per register slot per thread): PTX registers
 * are virtual and unbounded, so a bound is ours to set, far above what compilers emit. */
#define CR__REGISTERS_PER_BLOCK_MAX ((uint64_t)512 << 20)

#define CR__WARP_SIZE 32
#define CR__FULL_MASK 0xffffffffu

/* Device-memory accesses of kernels may race by design (as on a GPU): ThreadSanitizer is told
 * to ignore them, as the emulated device does for its copies (server/emu/emu.h). */
#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define CR__DEVICE_BEGIN()                                                                         \
    (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define CR__DEVICE_END()                                                                           \
    (AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define CR__DEVICE_BEGIN() ((void)0)
#define CR__DEVICE_END() ((void)0)
#endif

#define CR__LIKELY(x) __builtin_expect(!!(x), 1)
#define CR__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- growable arrays ---- */

/* Grows *arr (element size `size`) so that index `need` fits; 0 or CR_ENOMEM. */
int cr__grow(void **arr, uint32_t *cap, uint32_t need, size_t size);
#define CR__PUSH(arr, count, cap, value)                                                           \
    (cr__grow((void **)&(arr), &(cap), (count) + 1, sizeof *(arr)) == 0                            \
         ? ((arr)[(count)++] = (value), 0)                                                         \
         : CR_ENOMEM)

/* ---- types and modifiers ---- */

/* Scalar types of registers, variables and instructions. */
// clang-format off
#define CR__TYPES(X)                                                                               \
    X(NONE, "", 0) X(PRED, "pred", 1) X(B8, "b8", 1) X(B16, "b16", 2) X(B32, "b32", 4)            \
    X(B64, "b64", 8) X(B128, "b128", 16) X(U8, "u8", 1) X(U16, "u16", 2) X(U32, "u32", 4)         \
    X(U64, "u64", 8) X(S8, "s8", 1) X(S16, "s16", 2) X(S32, "s32", 4) X(S64, "s64", 8)            \
    X(F16, "f16", 2) X(F16X2, "f16x2", 4) X(BF16, "bf16", 2) X(BF16X2, "bf16x2", 4)               \
    X(F32, "f32", 4) X(F64, "f64", 8) X(TF32, "tf32", 4) X(U16X2, "u16x2", 4) X(S16X2, "s16x2", 4)
// clang-format on

typedef enum {
#define CR__TYPE_ENUM(name, str, size) CR__T_##name,
    CR__TYPES(CR__TYPE_ENUM)
#undef CR__TYPE_ENUM
        CR__T_COUNT
} cr__type_t;

unsigned cr__type_size(cr__type_t t);
int cr__type_signed(cr__type_t t);
int cr__type_float(cr__type_t t); /* f16, bf16 (and x2), f32, f64, tf32 */
cr__type_t cr__type_from(const char *s, size_t len);

/* State spaces. */
typedef enum {
    CR__SP_NONE = 0, /* generic */
    CR__SP_REG,
    CR__SP_GLOBAL,
    CR__SP_CONST,
    CR__SP_SHARED,
    CR__SP_LOCAL,
    CR__SP_PARAM,
} cr__space_t;

/* Instruction base names (the opcode up to its first dot). */
// clang-format off
#define CR__BASES(X)                                                                               \
    X(abs) X(activemask) X(add) X(addc) X(and) X(atom) X(bar) X(barrier) X(bfe) X(bfi) X(bfind)   \
    X(bmsk) X(bra) X(brev) X(brkpt) X(call) X(clz) X(cnot) X(copysign) X(cos) X(cvt) X(cvta)      \
    X(discard) X(div) X(elect) X(ex2) X(exit) X(fence) X(fma) X(isspacep) X(ld) X(ldu) X(lg2)     \
    X(lop3) X(mad) X(madc) X(mad24) X(match) X(max) X(membar) X(min) X(mov) X(mul) X(mul24)       \
    X(nanosleep) X(neg) X(not) X(or) X(pmevent) X(popc) X(prefetch) X(prefetchu) X(prmt) X(rcp)   \
    X(red) X(redux) X(rem) X(ret) X(rsqrt) X(sad) X(selp) X(set) X(setp) X(shf) X(shfl) X(shl)    \
    X(shr) X(sin) X(slct) X(sqrt) X(st) X(sub) X(subc) X(tanh) X(testp) X(trap) X(vote) X(xor)    \
    X(applypriority) X(createpolicy) X(griddepcontrol) X(szext) X(dp4a) X(dp2a) X(cp) X(vadd2)    \
    X(vadd4) X(vsub2) X(vsub4) X(vavrg2) X(vavrg4) X(vabsdiff2) X(vabsdiff4) X(vmin2) X(vmin4)   \
    X(vmax2) X(vmax4) X(wmma)
// clang-format on

typedef enum {
    CR__B_UNKNOWN = 0,
#define CR__BASE_ENUM(name) CR__B_##name,
    CR__BASES(CR__BASE_ENUM)
#undef CR__BASE_ENUM
        CR__B_COUNT
} cr__base_t;

/* Modifier words (after the base). A word's meaning depends on the instruction: .lo is the low
 * half for mul and "lower" for setp. Types are modifiers too (CR__M_TYPE + cr__type_t). */
// clang-format off
#define CR__MODS(X)                                                                                \
    X(global) X(shared) X(local) X(param) X(const) X(generic) X(to) X(v2) X(v4) X(v8) X(rn)       \
    X(rz) X(rm) X(rp) X(rna) X(rni) X(rzi) X(rmi) X(rpi) X(ftz) X(sat) X(approx) X(full) X(hi)    \
    X(lo) X(wide) X(cc) X(uni) X(sync) X(aligned) X(eq) X(ne) X(lt) X(le) X(gt) X(ge) X(ls)       \
    X(hs) X(equ) X(neu) X(ltu) X(leu) X(gtu) X(geu) X(num) X(nan) X(and) X(or) X(xor) X(add)      \
    X(inc) X(dec) X(exch) X(cas) X(min) X(max) X(up) X(down) X(bfly) X(idx) X(all) X(any)         \
    X(ballot) X(ca) X(cg) X(cs) X(cv) X(wb) X(wt) X(nc) X(volatile) X(relaxed) X(acquire)         \
    X(release) X(acq_rel) X(sc) X(weak) X(mmio) X(cta) X(gpu) X(sys) X(cluster) X(shiftamt)      \
    X(clamp) X(wrap) X(l) X(r) X(f4e) X(b4e) X(rc8) X(ecl) X(ecr) X(rc16) X(arrive) X(red)        \
    X(popc) X(warp) X(finite) X(infinite) X(number) X(notanumber) X(normal) X(subnormal) X(noftz) \
    X(relu) X(abs) X(xorsign) X(NaN) X(oob) X(satfinite) X(unified) X(L1) X(L2) X(level)          \
    X(nourf) X(ecc) X(exclusive) X(shared_cta) X(shared_cluster) X(sem) X(mask) X(proxy)          \
    X(async) X(alias) X(tensormap) X(release_sync) X(sx) X(zx) X(gl) X(commit_group)         \
    X(wait_group) X(wait_all) X(bulk) X(load) X(store) X(mma) X(a) X(b) X(c)    \
    X(d) X(row) X(col) X(m16n16k16) X(m8n32k16) X(m32n8k16) X(m16n16k8) X(wait)                \
    X(launch_dependents)
// clang-format on

typedef enum {
    CR__M_UNKNOWN = 0,
#define CR__MOD_ENUM(name) CR__M_##name,
    CR__MODS(CR__MOD_ENUM)
#undef CR__MOD_ENUM
        CR__M_TYPE, /* CR__M_TYPE + t for a type word */
} cr__mod_t;

/* ---- the parsed module (parse.c) ---- */

typedef enum {
    CR__O_REG = 1, /* id: register */
    CR__O_IMM,     /* value: integer literal */
    CR__O_FLT,     /* value: bits of a float literal; flags: 4 or 8 (0f / 0d / decimal = 8) */
    CR__O_VAR,     /* id: variable (its address); value: offset added with + */
    CR__O_FUNC,    /* id: function */
    CR__O_LABEL,   /* id: label name (resolved by the decoder within the function) */
    CR__O_ADDR,    /* [base + value]: base is the next operand in the pool when `id` is 1 */
    CR__O_VEC,     /* { elements }: `id` elements follow in the pool */
    CR__O_SINK,    /* _ */
    CR__O_SREG,    /* id: special register (CR__SR_*) */
} cr__opd_kind_t;

#define CR__OF_NOT 1  /* !%p */
#define CR__OF_NEG 2  /* -%r (negated source, e.g. in setp-free forms) */
#define CR__OF_PAIR 4 /* d|p: this destination has a predicate partner next */

typedef struct {
    uint8_t kind; /* cr__opd_kind_t */
    uint8_t flags;
    uint16_t reserved;
    uint32_t id;
    int64_t value;
} cr__opd_t;

typedef struct {
    uint32_t line;
    uint32_t text; /* offset of the opcode text in the string pool */
    uint16_t base; /* cr__base_t */
    uint8_t nmods;
    uint8_t guard; /* 0, 1: @%p, 2: @!%p */
    uint8_t mods[16];
    uint32_t guard_reg;
    uint32_t opd;   /* first operand in the pool */
    uint16_t nopd;  /* top-level operands */
    uint16_t npool; /* pool entries used (vectors and addresses take more) */
} cr__ir_insn_t;

typedef struct {
    uint32_t name; /* string pool */
    uint8_t type;  /* cr__type_t */
    uint8_t vec;   /* .v2/.v4 register declarations: 1 */
} cr__ir_reg_t;

/* An address inside a variable's initialiser: {sym}, {generic(sym)}, {sym+4}. */
typedef struct {
    uint64_t offset; /* byte in the variable */
    uint32_t size;   /* 4 or 8 */
    uint32_t name;   /* string pool: the symbol */
    int64_t addend;
    int generic;
} cr__ir_reloc_t;

typedef struct {
    uint32_t name; /* string pool */
    uint8_t space; /* cr__space_t */
    uint8_t type;  /* element type */
    uint8_t is_extern, is_unsized;
    uint32_t align;
    uint64_t size; /* bytes */
    int32_t func;  /* owning function, -1 at module scope */
    uint8_t *init; /* size bytes, NULL when zero */
    uint32_t reloc_first, reloc_count;
    uint8_t is_param; /* a function's parameter or return value */
    uint8_t is_ret;
    uint32_t param_offset; /* kernel params: offset in the parameter buffer */
} cr__ir_var_t;

typedef struct {
    uint32_t name; /* string pool */
    uint32_t insn; /* index of the instruction it labels (in the function) */
} cr__ir_label_t;

typedef struct {
    uint32_t name;
    uint8_t is_entry, has_body, is_extern;
    uint32_t line;
    uint32_t ret_first, ret_count;     /* return variables (consecutive ids) */
    uint32_t param_first, param_count; /* parameter variables */
    uint32_t reg_first, reg_count;     /* registers declared in the body */
    uint32_t insn_first, insn_count;
    uint32_t label_first, label_count;
    uint32_t param_size; /* kernels: size of the parameter buffer */
    uint32_t maxntid[3], reqntid[3];
} cr__ir_func_t;

typedef struct {
    char *strings; /* string pool: NUL-terminated names, opcode texts */
    uint32_t strings_len, strings_cap;
    cr__ir_func_t *funcs;
    uint32_t nfuncs, funcs_cap;
    cr__ir_var_t *vars;
    uint32_t nvars, vars_cap;
    cr__ir_reg_t *regs;
    uint32_t nregs, regs_cap;
    cr__ir_insn_t *insns;
    uint32_t ninsns, insns_cap;
    cr__opd_t *opds;
    uint32_t nopds, opds_cap;
    cr__ir_label_t *labels;
    uint32_t nlabels, labels_cap;
    cr__ir_reloc_t *relocs;
    uint32_t nrelocs, relocs_cap;
    unsigned version_major, version_minor, target_sm;
} cr__ir_t;

/* Parses PTX text into *ir (zeroed by the caller; freed with cr__ir_free even on failure).
 * Returns 0, CR_ECORRUPT with "line N: ..." in err, or CR_ENOMEM. */
int cr__parse(const char *text, size_t len, cr__ir_t *ir, char *err, size_t err_len);
void cr__ir_free(cr__ir_t *ir);
static inline const char *cr__ir_str(const cr__ir_t *ir, uint32_t off)
{
    return ir->strings + off;
}
/* The function named `name`, or -1. */
int cr__ir_find_func(const cr__ir_t *ir, const char *name);

/* Special registers. Those materialised per warp have slots (see cr__slot_t). */
// clang-format off
#define CR__SREGS(X)                                                                               \
    X(TID_X, "%tid.x") X(TID_Y, "%tid.y") X(TID_Z, "%tid.z") X(NTID_X, "%ntid.x")                  \
    X(NTID_Y, "%ntid.y") X(NTID_Z, "%ntid.z") X(CTAID_X, "%ctaid.x") X(CTAID_Y, "%ctaid.y")        \
    X(CTAID_Z, "%ctaid.z") X(NCTAID_X, "%nctaid.x") X(NCTAID_Y, "%nctaid.y")                       \
    X(NCTAID_Z, "%nctaid.z") X(LANEID, "%laneid") X(WARPID, "%warpid") X(NWARPID, "%nwarpid")      \
    X(SMID, "%smid") X(NSMID, "%nsmid") X(GRIDID, "%gridid") X(LANEMASK_EQ, "%lanemask_eq")        \
    X(LANEMASK_LE, "%lanemask_le") X(LANEMASK_LT, "%lanemask_lt") X(LANEMASK_GE, "%lanemask_ge")   \
    X(LANEMASK_GT, "%lanemask_gt") X(DYN_SMEM, "%dynamic_smem_size")                               \
    X(TOTAL_SMEM, "%total_smem_size") X(AGGR_SMEM, "%aggr_smem_size") X(CLOCK, "%clock")           \
    X(CLOCK_HI, "%clock_hi") X(CLOCK64, "%clock64") X(GLOBALTIMER, "%globaltimer")                 \
    X(GLOBALTIMER_LO, "%globaltimer_lo") X(GLOBALTIMER_HI, "%globaltimer_hi")                      \
    X(CLUSTERID_X, "%clusterid.x") X(CLUSTERID_Y, "%clusterid.y") X(CLUSTERID_Z, "%clusterid.z")   \
    X(NCLUSTERID_X, "%nclusterid.x") X(NCLUSTERID_Y, "%nclusterid.y")                              \
    X(NCLUSTERID_Z, "%nclusterid.z") X(CLUSTER_CTAID_X, "%cluster_ctaid.x")                        \
    X(CLUSTER_CTAID_Y, "%cluster_ctaid.y") X(CLUSTER_CTAID_Z, "%cluster_ctaid.z")                  \
    X(CLUSTER_NCTAID_X, "%cluster_nctaid.x") X(CLUSTER_NCTAID_Y, "%cluster_nctaid.y")              \
    X(CLUSTER_NCTAID_Z, "%cluster_nctaid.z") X(CLUSTER_CTARANK, "%cluster_ctarank")                \
    X(CLUSTER_NCTARANK, "%cluster_nctarank") X(IS_EXPLICIT_CLUSTER, "%is_explicit_cluster")
// clang-format on

typedef enum {
#define CR__SREG_ENUM(name, str) CR__SR_##name,
    CR__SREGS(CR__SREG_ENUM)
#undef CR__SREG_ENUM
        CR__SR_COUNT
} cr__sreg_t;

int cr__sreg_from(const char *s, size_t len); /* CR__SR_* or -1 */

/* ---- the decoded program (decode.c) ---- */

/* Fixed register slots of every program, below the function registers. */
enum {
    CR__SLOT_ZERO = 0, /* always 0 */
    CR__SLOT_SINK,     /* written by `_` destinations, never read */
    CR__SLOT_TID_X,
    CR__SLOT_TID_Y,
    CR__SLOT_TID_Z,
    CR__SLOT_NTID_X,
    CR__SLOT_NTID_Y,
    CR__SLOT_NTID_Z,
    CR__SLOT_CTAID_X,
    CR__SLOT_CTAID_Y,
    CR__SLOT_CTAID_Z,
    CR__SLOT_NCTAID_X,
    CR__SLOT_NCTAID_Y,
    CR__SLOT_NCTAID_Z,
    CR__SLOT_LANEID,
    CR__SLOT_WARPID,
    CR__SLOT_NWARPID,
    CR__SLOT_LANEMASK_EQ,
    CR__SLOT_LANEMASK_LE,
    CR__SLOT_LANEMASK_LT,
    CR__SLOT_LANEMASK_GE,
    CR__SLOT_LANEMASK_GT,
    CR__SLOT_DYN_SMEM,
    CR__SLOT_TOTAL_SMEM,
    CR__SLOT_FRAME, /* local-memory address of the running function's frame */
    CR__SLOT_CC,    /* carry flag of add.cc/addc */
    CR__SLOT_FIXED  /* first function register */
};

/* Generic-address windows of the state spaces that are not device memory. Device addresses
 * are user-space host addresses (below 2^47), so these tags never collide with them. */
#define CR__WIN_SHIFT 56
#define CR__WIN_SHARED 0xfeull
#define CR__WIN_LOCAL 0xfdull
#define CR__WIN_PARAM 0xfcull
#define CR__WIN_MASK ((1ull << CR__WIN_SHIFT) - 1)

#include "ops.h"

typedef struct {
    uint16_t op;   /* cr__op_t */
    uint8_t guard; /* 0: none, 1: @%p, 2: @!%p */
    uint8_t sub;   /* variant (rounding, comparison, mode, access size...) */
    uint16_t sub2; /* more variant bits */
    uint16_t n;    /* vector length, operand count */
    uint32_t pred; /* guard predicate slot */
    uint32_t r[6]; /* operand slots; r[0] is the destination where there is one */
    int64_t imm;   /* address offset, branch target, call index... */
} cr__insn_t;

/* A call site: arguments copied from the caller's frame into the callee's at the call, the
 * return value copied back at the return. An indirect call (func CR__CALL_INDIRECT) has only
 * the caller's side of each copy: the callee's comes from its parameter list (pfunc). */
#define CR__CALL_INDIRECT UINT32_MAX
typedef struct {
    uint32_t func;      /* callee: index into prog->funcs, or CR__CALL_INDIRECT */
    uint32_t caller;    /* caller: index into prog->funcs */
    uint32_t arg_first; /* into prog->copies */
    uint32_t arg_count;
    uint32_t ret_first;
    uint32_t ret_count;
} cr__call_t;

/* Frame offsets: caller's/callee's for arguments, swapped for returns. */
typedef struct {
    uint32_t from, to, size;
} cr__copy_t;

typedef struct {
    uint32_t ir_func;
    uint32_t entry; /* first instruction */
    uint32_t end;
    uint32_t frame_size; /* local memory of its frame: parameters, locals, call parameters */
    uint32_t reg_base, reg_count;
    int recursive; /* on a call cycle: registers are saved across calls to it */
    /* its parameters and return values in its frame, for indirect calls (prog->copies: `to`
     * and `size` of parameters, `from` and `size` of return values) */
    uint32_t param_first, param_count, ret_first, ret_count;
} cr__pfunc_t;

/* Function addresses (function pointers) are this tag and the IR function's index. */
#define CR__FUNC_TAG (0xfbull << CR__WIN_SHIFT)

typedef struct {
    char *name;
    cr__insn_t *code;
    uint32_t ncode;
    uint32_t *src;    /* IR instruction of each instruction (UINT32_MAX: added by the decoder) */
    const char **why; /* reasons of UNSUPPORTED instructions (their r[0] indexes it) */
    uint32_t nwhy;
    uint32_t nslots;
    uint64_t *consts; /* values of slots [const_base, const_base + nconsts) */
    uint32_t const_base, nconsts;
    uint32_t *sym_vars; /* module variable of each address slot [sym_base, sym_base + nsyms) */
    uint32_t sym_base, nsyms;
    cr__pfunc_t *funcs; /* funcs[0] is the kernel */
    uint32_t nfuncs;
    cr__call_t *calls;
    uint32_t ncalls;
    int32_t *func_of_ir; /* IR function -> index into funcs, -1 when not in the program */
    cr__copy_t *copies;
    uint32_t ncopies;
    uint32_t *lists; /* register lists of wmma fragments (slots) */
    uint32_t nlists;
    uint32_t shared_static;           /* bytes of static shared memory */
    uint32_t shared_dyn_offset_align; /* alignment of dynamic shared memory */
    uint32_t local_bytes;             /* local memory per thread (frames, the call stack) */
    uint32_t param_size;              /* bytes of the kernel's parameters */
    int64_t unsupported;              /* an instruction the interpreter cannot run, or -1 */
    int has_effects; /* 0: no memory access, call, trap or printf: nothing to run */
    uint32_t reqntid[3];
} cr__prog_t;

/* A module-scope .global/.const variable: where it lives during launches. */
typedef struct {
    uint32_t var; /* IR variable */
    uint64_t size;
    uint8_t *own; /* the interpreter's own copy when the embedder holds none (inside m->own) */
} cr__gvar_t;

struct cr_ptx_module_s {
    cr__ir_t ir;
    cr__prog_t *progs;
    uint32_t nprogs;
    /* Variables the embedder did not place: resolved at the first launch (under `lock`). */
    void *lock; /* pthread_mutex_t * */
    int resolved;
    uint8_t *own; /* one block for all of them */
    uint64_t own_size;
    uint64_t *var_address; /* per IR variable: device address of module-scope variables */
};

int cr__decode(cr__ir_t *ir, cr__prog_t **progs, uint32_t *nprogs, char *err, size_t err_len);
void cr__prog_free(cr__prog_t *p);

/* ---- execution (exec.c, warp.c, grid.c) ---- */

typedef struct cr__job_s cr__job_t;

#define CR__MAX_CALL_DEPTH 64

typedef struct {
    uint32_t mask; /* lanes that made the call */
    uint32_t ret_pc;
    uint32_t call;            /* index into prog->calls */
    uint32_t callee;          /* index into prog->funcs */
    uint32_t caller_returned; /* the caller frame's `returned` lanes, restored at the pop */
    int64_t saved;            /* recursive callee: where its saved registers are in the warp's save
                                 stack, else -1 */
} cr__frame_t;

typedef struct {
    uint64_t *R;      /* slots x 32 lanes: R[slot * 32 + lane] */
    uint32_t pc;      /* where the active lanes are */
    uint32_t active;  /* lanes at pc that run now */
    uint32_t next_pc; /* smallest pc of the other runnable lanes, UINT32_MAX if none */
    uint32_t valid;   /* lanes that exist (a partial last warp has fewer) */
    uint32_t exited;
    uint32_t waiting;  /* at a barrier */
    uint32_t returned; /* executed ret in the current call frame */
    uint32_t lane_pc[CR__WARP_SIZE];
    uint8_t bar_id[CR__WARP_SIZE];
    uint32_t index; /* warp in the block */
    int depth;
    cr__frame_t frames[CR__MAX_CALL_DEPTH];
    uint64_t *save_stack; /* registers saved for recursive calls */
    size_t save_used, save_cap;
} cr__warp_t;

/* Allocation-range cache of one worker for one launch. */
#define CR__RANGE_CACHE 8
typedef struct {
    uint64_t lo, hi;
} cr__range_t;

/* What one host thread needs to run blocks of a launch. */
typedef struct {
    cr__job_t *job;
    const cr__prog_t *prog;
    cr__warp_t *warps;
    uint32_t nwarps, warps_cap;
    uint64_t *regs; /* all warps' slots */
    size_t regs_cap;
    uint8_t *shared;
    size_t shared_cap;
    uint8_t *local; /* per-thread local memory, local_bytes per thread */
    size_t local_cap;
    uint32_t local_stride;
    int primed;           /* the warps' launch-wide slots are filled (grid.c) */
    uint32_t shared_size; /* of this launch: static + dynamic */
    cr__range_t ranges[CR__RANGE_CACHE];
    uint32_t nranges;
    uint32_t ctaid[3];
    /* barriers of the running block */
    uint32_t bar_arrived[16];
    uint32_t bar_expected[16];
    uint32_t bar_red[16][3]; /* popc, and, or accumulators of bar.red */
    uint32_t live;           /* threads of the block not exited */
    /* device printf output of the running block */
    char *out;
    size_t out_len, out_cap;
    /* the fault of this worker (first one wins) */
    int fault;
    char fault_msg[256];
} cr__worker_t;

struct cr__job_s {
    cr_ptx_module_t *module;
    const cr__prog_t *prog;
    cr_ptx_launch_t launch;
    const uint8_t *params; /* padded to prog->param_size */
    const cr_ptx_env_t *env;
    uint64_t nblocks;
    _Atomic uint64_t next_block;
    _Atomic uint64_t done_blocks;
    _Atomic int failed;
    int fault;
    char fault_msg[256];
    void *lock;      /* pthread_mutex_t: faults, printf output */
    cr__job_t *next; /* in the pool's list */
    int refs;        /* workers inside, under the pool lock */
};

/* Runs warp w until it blocks at a barrier, exits, faults or used `budget` instructions.
 * Returns 0 or the CUresult of a fault (message in the worker). */
int cr__warp_run(cr__worker_t *wk, cr__warp_t *w, uint32_t budget);
/* Recomputes which lanes run next (after divergence, merges, call returns). Returns 1 when a
 * lane can run, 0 when the warp is blocked or finished. */
int cr__warp_schedule(cr__worker_t *wk, cr__warp_t *w);
/* Records a fault (first one wins). Returns code. */
int cr__fault(cr__worker_t *wk, const cr__warp_t *w, uint32_t lane, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Global memory: the host address of [addr, addr + size) after checking that it lies in a live
 * allocation, or NULL (fault recorded). */
void *cr__global_ptr(cr__worker_t *wk, const cr__warp_t *w, uint32_t lane, uint64_t addr,
                     uint32_t size, int write);

/* Warp-wide operations (warp.c). */
void cr__exec_shfl(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m);
void cr__exec_vote(cr__warp_t *w, const cr__insn_t *in, uint32_t m);
void cr__exec_match(cr__warp_t *w, const cr__insn_t *in, uint32_t m);
void cr__exec_redux(cr__warp_t *w, const cr__insn_t *in, uint32_t m);
/* A barrier: the lanes m of w arrive at barrier `id` (expecting `expected` threads, 0 = all).
 * Returns 1 when they must wait. */
int cr__barrier_arrive(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m);
/* Releases barriers whose count is complete (after arrivals or exits). */
void cr__barrier_check(cr__worker_t *wk);

/* Device printf and assertions (printf.c). */
int cr__vprintf(cr__worker_t *wk, cr__warp_t *w, uint32_t lane, uint64_t fmt, uint64_t args);
int cr__assertfail(cr__worker_t *wk, cr__warp_t *w, uint32_t lane, uint64_t msg, uint64_t file,
                   uint32_t line, uint64_t func);
/* Reads a NUL-terminated device string at a generic address into buf; 0 or a fault code. */
int cr__read_string(cr__worker_t *wk, const cr__warp_t *w, uint32_t lane, uint64_t addr, char *buf,
                    size_t cap);
/* Generic-address load of size bytes for printf/assert (no alignment requirement). */
int cr__generic_read(cr__worker_t *wk, const cr__warp_t *w, uint32_t lane, uint64_t addr, void *dst,
                     uint32_t size);
void cr__out_append(cr__worker_t *wk, const char *text, size_t len);

/* Conversions and math (math.c). */
#define CR__RND_RN 0
#define CR__RND_RZ 1
#define CR__RND_RM 2
#define CR__RND_RP 3
#define CR__RND_RNA 4
uint64_t cr__cvt(uint64_t v, cr__type_t dt, cr__type_t st, int rnd, int integer_round, int sat,
                 int ftz);
uint16_t cr__f32_to_f16(float f, int rnd);
float cr__f16_to_f32(uint16_t h);
uint16_t cr__f64_to_f16(double d, int rnd);
uint16_t cr__f32_to_bf16(float f, int rnd);
float cr__bf16_to_f32(uint16_t h);
uint16_t cr__f64_to_bf16(double d, int rnd);
float cr__ftz32(float f);
/* f32/f64 arithmetic with an explicit rounding mode (fesetround). */
float cr__f32_op(int op, float a, float b, float c, int rnd);
double cr__f64_op(int op, double a, double b, double c, int rnd);
float cr__fmin32(float a, float b);
float cr__fmax32(float a, float b);
double cr__fmin64(double a, double b);
double cr__fmax64(double a, double b);
/* Half-precision arithmetic (scalar and x2) on the bits of one operand slot. */
uint64_t cr__half_op(int op, int bf, int x2, uint64_t a, uint64_t b, uint64_t c, int flags);
int cr__half_cmp(int cmp, int bf, uint16_t a, uint16_t b);

/* Pool and launches (grid.c). */
int cr__pool_run(cr__job_t *job);

#endif
