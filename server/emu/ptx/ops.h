/* The decoded opcodes of the PTX interpreter: one value per instruction and operand width (and
 * per common modifier combination), so the executor dispatches once per warp instruction.
 * Rarer variants share an opcode and read `sub`/`sub2` (see decode.c for each encoding). */
#ifndef CR_PTX_OPS_H
#define CR_PTX_OPS_H

// clang-format off
#define CR__INT_WIDTHS(X, name) X(name##16) X(name##32) X(name##64)
#define CR__INT_SIGNED(X, name)                                                                    \
    X(name##_U16) X(name##_U32) X(name##_U64) X(name##_S16) X(name##_S32) X(name##_S64)

#define CR__OPS(X)                                                                                 \
    X(NOP) X(UNSUPPORTED)                                                                          \
    /* integer arithmetic */                                                                       \
    CR__INT_WIDTHS(X, ADD) CR__INT_WIDTHS(X, SUB) CR__INT_WIDTHS(X, MULLO)                         \
    CR__INT_SIGNED(X, MULHI) X(MULWIDE_U16) X(MULWIDE_U32) X(MULWIDE_S16) X(MULWIDE_S32)           \
    CR__INT_WIDTHS(X, MADLO) CR__INT_SIGNED(X, MADHI) X(MADWIDE_U16) X(MADWIDE_U32)                \
    X(MADWIDE_S16) X(MADWIDE_S32) X(MUL24) X(MAD24) X(SAD) CR__INT_SIGNED(X, DIV)                  \
    CR__INT_SIGNED(X, REM) CR__INT_SIGNED(X, MIN) CR__INT_SIGNED(X, MAX) X(ADDSAT) X(SUBSAT)       \
    X(AND) X(OR) X(XOR) CR__INT_WIDTHS(X, NOT) X(CNOT) CR__INT_WIDTHS(X, SHL)                      \
    CR__INT_SIGNED(X, SHR) CR__INT_WIDTHS(X, NEG) CR__INT_WIDTHS(X, ABS) X(POPC32) X(POPC64)       \
    X(CLZ32) X(CLZ64) X(BREV32) X(BREV64) X(BFIND) X(BFE) X(BFI) X(PRMT) X(SHF) X(LOP3) X(BMSK)   \
    X(SZEXT) X(DP4A) X(DP2A) X(CARRY) X(VSIMD)                                                              \
    /* single precision */                                                                         \
    X(ADD_F32) X(SUB_F32) X(MUL_F32) X(FMA_F32) X(DIV_F32) X(MIN_F32) X(MAX_F32) X(NEG_F32)        \
    X(ABS_F32) X(SQRT_F32) X(RSQRT_F32) X(RCP_F32) X(EX2_F32) X(LG2_F32) X(SIN_F32) X(COS_F32)     \
    X(TANH_F32) X(COPYSIGN_F32) X(TESTP_F32) X(F32_X)                                              \
    /* double precision */                                                                         \
    X(ADD_F64) X(SUB_F64) X(MUL_F64) X(FMA_F64) X(DIV_F64) X(MIN_F64) X(MAX_F64) X(NEG_F64)        \
    X(ABS_F64) X(SQRT_F64) X(RSQRT_F64) X(RCP_F64) X(COPYSIGN_F64) X(TESTP_F64) X(F64_X)           \
    /* half precision (f16, bf16, x2) */                                                           \
    X(HALF)                                                                                        \
    /* comparison and selection */                                                                 \
    X(SETP_U16) X(SETP_S16) X(SETP_U32) X(SETP_S32) X(SETP_U64) X(SETP_S64) X(SETP_F32)           \
    X(SETP_F64) X(SETP_H) X(SET) X(SELP) X(SLCT_S32) X(SLCT_F32)                                   \
    /* moves and conversions */                                                                    \
    X(MOV) X(MOV_PACK) X(MOV_UNPACK) X(CLOCK) X(CLOCK64) X(GLOBALTIMER) X(CVT) X(CVT_ZX)           \
    X(CVT_SX) X(CVTA_SHARED) X(CVTA_LOCAL) X(CVTA_PARAM) X(CVTA_TO) X(ISSPACEP)                    \
    /* memory */                                                                                   \
    X(LD_GLOBAL) X(LD_SHARED) X(LD_LOCAL) X(LD_PARAM) X(LD_GENERIC) X(ST_GLOBAL) X(ST_SHARED)     \
    X(ST_LOCAL) X(ST_GENERIC) X(ATOM_GLOBAL) X(ATOM_SHARED) X(ATOM_GENERIC) X(CP_ASYNC)                        \
    /* control */                                                                                  \
    X(BRA) X(CALL) X(RET) X(EXIT) X(TRAP) X(BAR) X(BAR_WARP) X(FENCE) X(VPRINTF) X(ASSERTFAIL)    \
    X(SETCOND)                                                                                     \
    /* warp-wide */                                                                                \
    X(SHFL) X(VOTE) X(ACTIVEMASK) X(MATCH) X(REDUX) X(ELECT) X(WMMA)

// clang-format on

typedef enum {
#define CR__OP_ENUM(name) CR__OP_##name,
    CR__OPS(CR__OP_ENUM)
#undef CR__OP_ENUM
        CR__OP_COUNT
} cr__op_t;

const char *cr__op_name(unsigned op);

/* sub of F32_X / F64_X / HALF / CARRY: the operation */
enum {
    CR__FOP_ADD,
    CR__FOP_SUB,
    CR__FOP_MUL,
    CR__FOP_FMA,
    CR__FOP_DIV,
    CR__FOP_SQRT,
    CR__FOP_RCP,
    CR__FOP_MIN,
    CR__FOP_MAX,
    CR__FOP_NEG,
    CR__FOP_ABS,
    CR__FOP_RSQRT,
    CR__FOP_EX2,
    CR__FOP_TANH,
    CR__FOP_LG2,
    CR__FOP_SIN,
    CR__FOP_COS,
};
/* sub2 flags of F32_X/F64_X/HALF */
#define CR__FF_RND_MASK 0x7 /* CR__RND_* */
#define CR__FF_FTZ 0x8
#define CR__FF_SAT 0x10
#define CR__FF_NAN 0x20          /* min/max .NaN */
#define CR__FF_RELU 0x40         /* max.relu / fma.relu */
#define CR__FF_BF 0x100          /* HALF: bf16 */
#define CR__FF_X2 0x200          /* HALF: packed pair */
#define CR__FF_DEFAULT_RND 0x400 /* no rounding modifier given (fast path allowed) */

/* sub of SETP/SET: the comparison */
enum {
    CR__CMP_EQ,
    CR__CMP_NE,
    CR__CMP_LT,
    CR__CMP_LE,
    CR__CMP_GT,
    CR__CMP_GE,
    CR__CMP_EQU,
    CR__CMP_NEU,
    CR__CMP_LTU,
    CR__CMP_LEU,
    CR__CMP_GTU,
    CR__CMP_GEU,
    CR__CMP_NUM,
    CR__CMP_NAN,
};
/* sub2 of SETP/SET: combination with a predicate (r[2] of the two-source form is r[3] here) */
#define CR__SETP_COMBINE_MASK 0x3 /* 0 none, 1 and, 2 or, 3 xor */
#define CR__SETP_NOT_C 0x4        /* the combining predicate is negated */
#define CR__SETP_PAIR 0x8         /* a second destination (r[4]) gets the complement */
#define CR__SETP_FTZ 0x10
#define CR__SETP_BF 0x20        /* SETP_H: bf16 */
#define CR__SET_FLOAT_DEST 0x40 /* SET: 1.0f instead of 0xffffffff */

/* sub of CARRY */
enum {
    CR__CARRY_ADD,
    CR__CARRY_SUB,
    CR__CARRY_MADLO,
    CR__CARRY_MADHI,
};
#define CR__CARRY_IN 0x1  /* sub2: uses the carry flag (addc, subc, madc) */
#define CR__CARRY_OUT 0x2 /* sub2: sets it (.cc) */
#define CR__CARRY_64 0x4  /* sub2: 64-bit operands */
#define CR__CARRY_SIGNED 0x8

/* sub2 of loads and stores */
#define CR__MEM_SIZE_MASK 0x1f /* bytes of one element: 1 2 4 8 16 */
#define CR__MEM_SIGNED 0x20    /* sign-extend into the register */
#define CR__MEM_DEST_SHIFT 8   /* bits 8-11: destination register bytes (for the extension) */

/* sub of ATOM: the operation; sub2: the type (cr__type_t) */
enum {
    CR__ATOM_ADD,
    CR__ATOM_MIN,
    CR__ATOM_MAX,
    CR__ATOM_INC,
    CR__ATOM_DEC,
    CR__ATOM_EXCH,
    CR__ATOM_CAS,
    CR__ATOM_AND,
    CR__ATOM_OR,
    CR__ATOM_XOR,
};

/* VSIMD: sub = CR__ATOM_ADD/MIN/MAX or one of these; sub2 = the flags below */
enum { CR__V_SUB = 16, CR__V_AVRG, CR__V_ABSDIFF };
#define CR__V_HALVES 0x1 /* 2 lanes of 16 bits (vop2), else 4 of 8 */
#define CR__V_SIGNED_A 0x2
#define CR__V_SIGNED_B 0x4
#define CR__V_SIGNED_D 0x8
#define CR__V_SAT 0x10
#define CR__V_ADD 0x20  /* secondary .add: d = c + the sum of the lane results */
#define CR__V_RELU 0x40 /* negative lane results become 0 (min/max.relu.s16x2) */

/* WMMA: sub = what (load of a/b/c, store of d, mma); see wmma.c for the rest */
enum { CR__WMMA_A, CR__WMMA_B, CR__WMMA_C, CR__WMMA_D, CR__WMMA_MMA };

/* sub of SHFL */
enum { CR__SHFL_UP, CR__SHFL_DOWN, CR__SHFL_BFLY, CR__SHFL_IDX };
/* sub of VOTE */
enum { CR__VOTE_ALL, CR__VOTE_ANY, CR__VOTE_UNI, CR__VOTE_BALLOT };
#define CR__VOTE_NOT 0x1 /* sub2: the source predicate is negated */
/* sub of BAR */
enum { CR__BAR_SYNC, CR__BAR_ARRIVE, CR__BAR_RED_POPC, CR__BAR_RED_AND, CR__BAR_RED_OR };
/* sub of MATCH: 0 any, 1 all; sub2: 1 for 64-bit */
/* sub of REDUX: CR__ATOM_ADD/MIN/MAX/AND/OR/XOR; sub2: 1 signed */

#endif
