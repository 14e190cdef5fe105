/* The one PTX tokenizer and literal reader, shared by the image parser's declaration reader
 * (ptx_decl.c, ptx_var.c) and the PTX interpreter's parser (server/emu/ptx/parse.c), so
 * that both split a text into the same tokens and read the same numbers.
 *
 * Tokens: a word is a run of [A-Za-z0-9_$%.] with "::" allowed inside (an opcode with its
 * modifiers, a register such as %tid.x, ld.global.L1::no_allocate), except that a directive
 * ends at its next dot: ".ptr.global.align" is three words. A word that starts with a digit
 * is a number (0x1F, 0f3F800000, 7U, 1.5e-3, with the exponent's sign). A string is "..." on
 * one line. Anything else is one punctuation character. Blanks and comments separate tokens.
 *
 * The text is untrusted: nothing reads past its end, and it also ends at a NUL byte (as the
 * driver reads PTX: a C string). Texts past 4 GiB are read up to there, so every token's
 * length fits 32 bits. Literals are range-checked: an integer of more than 64 bits is an
 * error, never a wrapped value. */
#ifndef CR_PTX_LEX_H
#define CR_PTX_LEX_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    CR__PTX_EOF = 0,
    CR__PTX_WORD,  /* names, directives, opcodes */
    CR__PTX_NUM,   /* a word starting with a digit */
    CR__PTX_PUNCT, /* one character: , ; : { } [ ] ( ) + - @ ! < > = | ... */
    CR__PTX_STR,   /* "..."; s/len exclude the quotes */
} cr__ptx_kind_t;

typedef struct {
    cr__ptx_kind_t kind;
    const char *s;
    uint32_t len;
    uint32_t line; /* 1-based */
    int glued;     /* no blank or comment before it */
} cr__ptx_tok_t;

typedef struct {
    const char *p, *end;
    uint32_t line;
    cr__ptx_tok_t tok; /* the current token */
    /* What a failed parse step found wrong (a static string), for callers that report
     * errors with the token's line; NULL when nothing said. */
    const char *error;
} cr__ptx_lex_t;

/* Starts at the first token of `len` bytes of text. */
void cr__ptx_lex_init(cr__ptx_lex_t *lx, const char *text, size_t len);
/* Moves to the next token (EOF stays EOF). */
void cr__ptx_next(cr__ptx_lex_t *lx);

/* 1 when the token is the word or number `word`. */
int cr__ptx_is(const cr__ptx_tok_t *t, const char *word);
/* 1 when the token is the punctuation c. */
int cr__ptx_punct(const cr__ptx_tok_t *t, char c);
/* 1 when the token is a name: a word that is not a directive. */
int cr__ptx_is_name(const cr__ptx_tok_t *t);
/* Consumes the punctuation c, or fails with CR_ECORRUPT. */
int cr__ptx_expect(cr__ptx_lex_t *lx, char c);
/* Skips a balanced ( ... ) group starting at the current '('; CR_ECORRUPT when unclosed. */
int cr__ptx_skip_parens(cr__ptx_lex_t *lx);
/* Records why parsing failed; returns rc, so `return cr__ptx_fail(lx, rc, "...")`. */
int cr__ptx_fail(cr__ptx_lex_t *lx, int rc, const char *why);

/* ---- literals ---- */

typedef enum {
    CR__PTX_INT = 1, /* bits: the value */
    CR__PTX_F32,     /* 0fXXXXXXXX; bits: the float's 32 bits */
    CR__PTX_F64,     /* 0dXXXXXXXXXXXXXXXX or decimal (1.5, 2e3); bits: the double's 64 */
} cr__ptx_num_kind_t;

typedef struct {
    cr__ptx_num_kind_t kind;
    uint64_t bits;
} cr__ptx_num_t;

/* Any numeric literal: decimal, 0x hex, 0b binary, leading-0 octal (optional U suffix),
 * 0f/0d float bits, decimal floats. Returns 0 or CR_ECORRUPT. */
int cr__ptx_number(const cr__ptx_tok_t *t, cr__ptx_num_t *n);
/* An integer literal only. Returns 0 or CR_ECORRUPT. */
int cr__ptx_int(const cr__ptx_tok_t *t, uint64_t *v);
/* An integer of at most `max` as the current token, consumed on success (an array size, an
 * alignment, a thread count). Returns 0, CR_ECORRUPT or CR_ETOOBIG; says nothing in
 * lx->error, as only the caller knows what the number was for. */
int cr__ptx_count(cr__ptx_lex_t *lx, uint64_t max, uint64_t *v);

#endif
