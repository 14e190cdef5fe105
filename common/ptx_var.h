/* One PTX variable or parameter declaration: its qualifiers, name and array dimensions, its
 * size and alignment, its initialiser, and the layout of a parameter list. The image
 * parser's declaration reader (ptx_decl.c) and the PTX interpreter's parser
 * (server/emu/ptx/parse.c) both read declarations with these functions, so a kernel's
 * parameter offsets, a variable's size and its initial bytes are computed in one place.
 *
 * The parameter layout follows ptxas (what a cubin's .nv.info says): each parameter is
 * aligned to its .align, else to its element size (a .v4 .u32 is 16-aligned), with no
 * padding after the last one.
 *
 * Input is untrusted: dimensions, alignments and sizes are range- and overflow-checked, and
 * an initialiser's bytes are bounded by CR_IMAGE_MAX_SIZE. On failure lx->error says why. */
#ifndef CR_PTX_VAR_H
#define CR_PTX_VAR_H

#include <stdint.h>

#include "fatbin.h"
#include "ptx_lex.h"

#define CR__PTX_MAX_DIMS 8
#define CR__PTX_MAX_ALIGN 4096u
/* Bound for a declared variable: larger is more likely a hostile number than a real array. */
#define CR__PTX_MAX_VAR_BYTES ((uint64_t)1 << 40)

typedef struct {
    cr__ptx_tok_t type; /* the type word (.u32), kind EOF when none */
    unsigned elem;      /* bytes of one scalar; 0 without a type */
    int is_float;       /* .f32 or .f64: initialisers convert values, not bits */
    unsigned vec;       /* .v2/.v4/.v8, else 1 */
    uint64_t align;     /* .align, 0 when not given (after .ptr it is the pointee's: ignored) */
    int opaque;         /* .texref/.samplerref/.surfref: a handle, no memory in the image */
    /* The first qualifier this parser does not know, kind EOF when none: the image parser
     * passes over it, the interpreter refuses it. */
    cr__ptx_tok_t unknown;
    cr__ptx_tok_t name;
    uint64_t dims[CR__PTX_MAX_DIMS];
    unsigned ndims;
    int unsized; /* the first dimension written [] */
} cr__ptx_decl_t;

/* The qualifiers of a declaration after its state space, up to the name: .align N, .vN, the
 * type, .ptr and what follows it, opaque types, .attribute(...). Keeps what *d holds for
 * qualifiers not repeated (the second name of ".u32 a, b"). Returns 0 or CR_ECORRUPT. */
int cr__ptx_decl_quals(cr__ptx_lex_t *lx, cr__ptx_decl_t *d);
/* The name and its [dims] after the qualifiers. Returns 0, CR_ECORRUPT or CR_ETOOBIG. */
int cr__ptx_decl_name(cr__ptx_lex_t *lx, cr__ptx_decl_t *d);
/* Both: one whole declarator. *d starts zeroed for a new declaration. */
int cr__ptx_declarator(cr__ptx_lex_t *lx, cr__ptx_decl_t *d);

/* Bytes of the declaration (0 for an unsized array or an opaque handle). Returns 0 or
 * CR_ETOOBIG (over CR__PTX_MAX_VAR_BYTES). */
int cr__ptx_decl_bytes(const cr__ptx_decl_t *d, uint64_t *bytes);
/* Its alignment: .align, else the element's size (0 for an opaque handle). */
uint64_t cr__ptx_decl_align(const cr__ptx_decl_t *d);

/* An address in an initialiser (sym, generic(sym), sym+N), which only a loader resolves: the
 * initialiser's bytes keep zeros there. */
typedef struct {
    uint64_t offset; /* byte of the variable it fills */
    unsigned size;   /* bytes: the element's */
    cr__ptx_tok_t symbol;
    int generic; /* generic(sym) */
    int64_t addend;
} cr__ptx_addr_t;

/* Called for each address; nonzero fails the initialiser with that code. */
typedef int (*cr__ptx_addr_fn)(void *user, const cr__ptx_addr_t *addr);

/* "= value" or "= { ... }" (the current token is '='). An inner list fills one element of
 * its dimension and the rest of that element stays zero; an unsized first dimension gets as
 * many whole rows as the list needs (*size is updated). On success *init is a malloc'd
 * buffer of *size bytes, or NULL when every byte is zero. `on_addr` may be NULL.
 * Returns 0, CR_ECORRUPT, CR_ETOOBIG, CR_ENOMEM or what on_addr returned. */
int cr__ptx_init(cr__ptx_lex_t *lx, const cr__ptx_decl_t *d, uint64_t *size, uint8_t **init,
                 cr__ptx_addr_fn on_addr, void *user);

/* Called for each parameter with its declaration and its place in the parameter buffer;
 * nonzero stops the list with that code. */
typedef int (*cr__ptx_param_fn)(void *user, const cr__ptx_decl_t *d, const cr_param_t *p);

/* "( .param decl, ... )" of an .entry or .func (the current token is '('), consumed with
 * the ')'. *size gets the end of the last parameter. Returns 0, CR_ECORRUPT, CR_ETOOBIG
 * or what on_param returned. */
int cr__ptx_params(cr__ptx_lex_t *lx, cr__ptx_param_fn on_param, void *user, uint32_t *size);

/* ".maxntid x[, y[, z]]" and the like (the current token is the directive): the numbers,
 * 1 for those not given. Returns 0, CR_ECORRUPT or CR_ETOOBIG. */
int cr__ptx_dims3(cr__ptx_lex_t *lx, uint32_t out[3]);

#endif
