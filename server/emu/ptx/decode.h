/* Private to the decoder (decode.c, decode_insn.c): the state of building one program. */
#ifndef CR_PTX_DECODE_H
#define CR_PTX_DECODE_H

#include "internal.h"

/* Where a variable's address comes from in this program. */
typedef enum {
    CR__LOC_NONE = 0,
    CR__LOC_SYM,    /* module .global/.const: an address slot filled at launch */
    CR__LOC_SHARED, /* shared-space offset */
    CR__LOC_FRAME,  /* local-space offset from the frame of the function that declares it */
    CR__LOC_KPARAM, /* offset in the kernel's parameter buffer */
} cr__loc_kind_t;

typedef struct {
    cr__loc_kind_t kind;
    uint64_t offset; /* SHARED/FRAME/KPARAM */
    uint32_t slot;   /* SYM: the slot, as a symbol reference (CR__SYM_REF | index) */
} cr__loc_t;

#define CR__SYM_REF 0x80000000u   /* r[] values naming address slot (index) until fixed up */
#define CR__CONST_REF 0x40000000u /* r[] values naming constant slot (index) until fixed up */

typedef struct {
    cr__ir_t *ir;
    cr__prog_t *p;
    uint32_t pf; /* the function being emitted (index into p->funcs) */
    uint32_t cap_code, cap_consts, cap_syms, cap_calls, cap_copies, cap_lists;
    cr__loc_t *var_loc;   /* per IR variable */
    uint32_t *func_map;   /* IR function -> program function + 1 (0: not reachable) */
    uint32_t *insn_pc;    /* per instruction of the function being emitted: its pc */
    uint32_t *shared_off; /* scratch */
    const char **why;     /* per UNSUPPORTED instruction: the reason */
    uint32_t nwhy, cap_why;
    int failed; /* out of memory */
} cr__dc_t;

/* Operand helpers (decode.c). */
uint32_t cr__dc_const(cr__dc_t *dc, uint64_t value);
/* The slot of a value operand of type t (register, immediate, special register, address of a
 * variable that needs no arithmetic). Returns UINT32_MAX when the operand cannot be a slot. */
uint32_t cr__dc_value(cr__dc_t *dc, const cr__opd_t *o, cr__type_t t);
uint32_t cr__dc_reg_slot(cr__dc_t *dc, uint32_t reg);
cr__type_t cr__dc_reg_type(cr__dc_t *dc, uint32_t reg);
/* Emits one instruction; returns its pc. */
uint32_t cr__dc_emit(cr__dc_t *dc, const cr__insn_t *in);
/* Emits an UNSUPPORTED instruction for IR instruction `ir_index` with a reason. */
void cr__dc_unsupported(cr__dc_t *dc, const cr__ir_insn_t *src, uint32_t ir_index, const char *why);
/* Adds a call site; returns its index or UINT32_MAX. */
uint32_t cr__dc_add_call(cr__dc_t *dc, const cr__call_t *c);
uint32_t cr__dc_add_copy(cr__dc_t *dc, const cr__copy_t *c);

/* Maps one IR instruction to executable instructions (decode_insn.c). */
void cr__dc_insn(cr__dc_t *dc, const cr__ir_insn_t *src, uint32_t ir_index);

#endif
