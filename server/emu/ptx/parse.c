/* PTX text -> module IR.
 *
 * Handles what nvcc (ISA 9.x) emits and what people write by hand: module directives,
 * .global/.const/.shared/.local variables with alignment, array sizes and initialisers
 * (numbers, float literals, addresses of symbols), .entry/.func with parameters and return
 * values, .reg declarations with %r<N> ranges, nested { } scopes (inner declarations shadow
 * outer ones), labels, and instructions with guards (@%p, @!%p), vector operands {a, b},
 * address operands [reg+off] / [sym+off], d|p destination pairs and call argument lists.
 * Names are resolved while parsing (registers and variables by scope); labels are left to the
 * decoder. Every error names its line.
 *
 * The tokens, literals and declarations (parameter offsets, variable sizes, initialisers)
 * come from the image parser's PTX reader in common/ (ptx_lex.c, ptx_var.c), so the kernel
 * layouts the client packs and the ones the interpreter reads cannot differ. The text is
 * untrusted: those readers check every bound, and this file adds the interpreter's own
 * limits on what it allocates. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "internal.h"
#include "ptx_var.h"

/* Bound on one variable the interpreter allocates (the image parser allows larger). */
#define MAX_ARRAY_BYTES ((uint64_t)1 << 32)

/* A name visible in a scope: a register, a register range (%r<N>) or a variable. */
typedef struct {
    const char *s; /* in the source text, or NULL: the string pool at `off` */
    uint32_t off;
    uint32_t len;
    uint8_t kind; /* 1 register, 2 register range, 3 variable */
    uint32_t id;
    uint32_t count; /* range */
} name_t;

typedef struct {
    cr__ptx_lex_t lx;
    cr__ir_t *ir;
    char *err;
    size_t err_len;
    int rc;
    name_t *names; /* function scopes, innermost last */
    uint32_t nnames, names_cap;
    uint32_t *scopes; /* start of each open scope in names */
    uint32_t nscopes, scopes_cap;
    int32_t func; /* the function being parsed, -1 at module scope */
    uint32_t insn_count_at_label;
} parser_t;

static int fail(parser_t *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parser_t *ps, const char *fmt, ...)
{
    if (ps->rc)
        return ps->rc;
    ps->rc = CR_ECORRUPT;
    if (ps->err && ps->err_len) {
        int n = snprintf(ps->err, ps->err_len, "line %u: ", ps->lx.tok.line);
        if (n >= 0 && (size_t)n < ps->err_len) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(ps->err + n, ps->err_len - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return ps->rc;
}

static int nomem(parser_t *ps)
{
    if (!ps->rc)
        ps->rc = CR_ENOMEM;
    if (ps->err && ps->err_len)
        snprintf(ps->err, ps->err_len, "out of memory");
    return ps->rc;
}

static void next(parser_t *ps)
{
    cr__ptx_next(&ps->lx);
}

static const cr__ptx_tok_t *tok(parser_t *ps)
{
    return &ps->lx.tok;
}

static int is(parser_t *ps, const char *w)
{
    return cr__ptx_is(&ps->lx.tok, w);
}

static int punct(parser_t *ps, char c)
{
    return cr__ptx_punct(&ps->lx.tok, c);
}

static int expect(parser_t *ps, char c)
{
    if (!punct(ps, c)) {
        const cr__ptx_tok_t *t = tok(ps);
        return fail(ps, "expected '%c', found '%.*s'", c, t->kind == CR__PTX_EOF ? 3 : (int)t->len,
                    t->kind == CR__PTX_EOF ? "EOF" : t->s);
    }
    next(ps);
    return 0;
}

/* Adds a string to the pool; returns its offset or UINT32_MAX when out of memory. */
static uint32_t add_str(cr__ir_t *ir, const char *s, size_t len)
{
    if (len > UINT32_MAX / 2 || cr__grow((void **)&ir->strings, &ir->strings_cap,
                                         (uint32_t)(ir->strings_len + len + 1), 1) != 0)
        return UINT32_MAX;
    uint32_t off = ir->strings_len;
    memcpy(ir->strings + off, s, len);
    ir->strings[off + len] = 0;
    ir->strings_len += (uint32_t)len + 1;
    return off;
}

/* ---- names ---- */

static int push_scope(parser_t *ps)
{
    if (CR__PUSH(ps->scopes, ps->nscopes, ps->scopes_cap, ps->nnames) != 0)
        return nomem(ps);
    return 0;
}

static void pop_scope(parser_t *ps)
{
    if (ps->nscopes)
        ps->nnames = ps->scopes[--ps->nscopes];
}

static int add_name(parser_t *ps, const char *s, uint32_t len, int kind, uint32_t id,
                    uint32_t count)
{
    name_t n = {s, 0, len, (uint8_t)kind, id, count};
    if (CR__PUSH(ps->names, ps->nnames, ps->names_cap, n) != 0)
        return nomem(ps);
    return 0;
}

/* Looks a name up in the open scopes, innermost first. Returns the kind (1 register, 3
 * variable) with *id, or 0. */
static int lookup(parser_t *ps, const char *s, uint32_t len, uint32_t *id)
{
    /* a trailing number for %r<N> ranges */
    uint32_t digits = 0;
    while (digits < len && s[len - 1 - digits] >= '0' && s[len - 1 - digits] <= '9')
        digits++;
    uint64_t index = 0;
    int has_index = digits > 0 && digits < 10 && digits < len;
    if (has_index)
        for (uint32_t i = len - digits; i < len; i++)
            index = index * 10 + (uint64_t)(s[i] - '0');
    if (has_index && digits > 1 && s[len - digits] == '0')
        has_index = 0; /* %r01 is a name */
    for (uint32_t i = ps->nnames; i-- > 0;) {
        const name_t *n = &ps->names[i];
        const char *ns = n->s ? n->s : ps->ir->strings + n->off;
        if (n->kind == 2) {
            if (has_index && n->len == len - digits && memcmp(ns, s, n->len) == 0 &&
                index < n->count) {
                *id = n->id + (uint32_t)index;
                return 1;
            }
        } else if (n->len == len && memcmp(ns, s, len) == 0) {
            *id = n->id;
            return n->kind;
        }
    }
    /* module-scope variables */
    for (uint32_t v = 0; v < ps->ir->nvars; v++) {
        const cr__ir_var_t *var = &ps->ir->vars[v];
        if (var->func >= 0)
            continue;
        const char *name = cr__ir_str(ps->ir, var->name);
        if (strlen(name) == len && memcmp(name, s, len) == 0) {
            *id = v;
            return 3;
        }
    }
    return 0;
}

int cr__ir_find_func(const cr__ir_t *ir, const char *name)
{
    /* the last definition wins over earlier declarations */
    int found = -1;
    for (uint32_t i = 0; i < ir->nfuncs; i++)
        if (strcmp(cr__ir_str(ir, ir->funcs[i].name), name) == 0) {
            if (found < 0 || ir->funcs[i].has_body)
                found = (int)i;
        }
    return found;
}

static int find_func_tok(parser_t *ps, const char *s, uint32_t len)
{
    int found = -1;
    for (uint32_t i = 0; i < ps->ir->nfuncs; i++) {
        const char *name = cr__ir_str(ps->ir, ps->ir->funcs[i].name);
        if (strlen(name) == len && memcmp(name, s, len) == 0)
            found = (int)i;
    }
    return found;
}

/* ---- numbers ---- */

/* A numeric literal (after an optional '-' the caller consumed) as an operand value:
 * CR__O_IMM with the integer, or CR__O_FLT with the float's bits and *fsize 4 (0f) or 8 (0d
 * and decimal). Returns 0 or -1. */
static int literal(const cr__ptx_tok_t *t, int neg, int *kind, int64_t *value, int *fsize)
{
    cr__ptx_num_t n;
    if (cr__ptx_number(t, &n) != 0)
        return -1;
    if (n.kind == CR__PTX_INT) {
        *kind = CR__O_IMM;
        *value = neg ? (int64_t)(0 - n.bits) : (int64_t)n.bits;
        *fsize = 0;
        return 0;
    }
    *kind = CR__O_FLT;
    *fsize = n.kind == CR__PTX_F32 ? 4 : 8;
    if (neg)
        n.bits ^= *fsize == 4 ? 0x80000000ull : 0x8000000000000000ull;
    *value = (int64_t)n.bits;
    return 0;
}

/* An integer literal (no float). Returns 0 or -1. */
static int integer(const cr__ptx_tok_t *t, int64_t *value)
{
    uint64_t v;
    if (cr__ptx_int(t, &v) != 0)
        return -1;
    *value = (int64_t)v;
    return 0;
}

/* The leading decimal digits of a token (.version 9.0, sm_90), read within the token. */
static unsigned leading_decimal(const char *s, size_t len)
{
    unsigned v = 0;
    for (size_t i = 0; i < len && i < 9 && s[i] >= '0' && s[i] <= '9'; i++)
        v = v * 10 + (unsigned)(s[i] - '0');
    return v;
}

/* ---- declarations ---- */

/* Declarations are read by common/ptx_var.c, as the image parser reads them: the kernel
 * parameter offsets here are those the client packs. What follows maps its results into the
 * IR and adds the interpreter's own limits. */

/* Fails after the shared reader failed with rc: its reason, else `what`. */
static int fail_decl(parser_t *ps, int rc, const char *what)
{
    if (ps->rc)
        return ps->rc;
    if (rc == CR_ENOMEM)
        return nomem(ps);
    return fail(ps, "%s", ps->lx.error ? ps->lx.error : what);
}

/* What the interpreter refuses in a declaration the shared reader accepted, and the IR type
 * of its type word. */
static int check_decl(parser_t *ps, const cr__ptx_decl_t *d, cr__type_t *type)
{
    *type = CR__T_NONE;
    if (d->unknown.kind != CR__PTX_EOF)
        return fail(ps, "unexpected '%.*s' in a declaration", (int)d->unknown.len, d->unknown.s);
    if (d->align > CR__PTX_MAX_ALIGN)
        return fail(ps, "bad .align value");
    if (d->type.kind == CR__PTX_EOF)
        return 0; /* opaque */
    *type = cr__type_from(d->type.s + 1, d->type.len - 1);
    if (*type == CR__T_NONE)
        return fail(ps, "unsupported type '%.*s'", (int)d->type.len, d->type.s);
    return 0;
}

/* Size and alignment of a variable; an opaque one (.texref ...) is an 8-byte handle here. */
static int var_layout(parser_t *ps, const cr__ptx_decl_t *d, uint64_t *size, uint32_t *align)
{
    cr__ptx_decl_t handle = *d;
    if (d->opaque) {
        handle.elem = 8;
        handle.vec = 1;
    }
    if (cr__ptx_decl_bytes(&handle, size) != 0 || *size > MAX_ARRAY_BYTES)
        return fail(ps, "array too large");
    uint64_t a = cr__ptx_decl_align(&handle);
    *align = a ? (uint32_t)a : 1;
    return 0;
}

/* Records an address initialiser of variable `var` (a reloc_ctx_t) for the loader. */
typedef struct {
    parser_t *ps;
    uint32_t var;
} reloc_ctx_t;

static int add_reloc(void *user, const cr__ptx_addr_t *a)
{
    reloc_ctx_t *c = user;
    parser_t *ps = c->ps;
    if (a->size != 4 && a->size != 8)
        return cr__ptx_fail(&ps->lx, CR_ECORRUPT, "an address initialiser needs 4 or 8 bytes");
    cr__ir_reloc_t r = {a->offset, a->size, add_str(ps->ir, a->symbol.s, a->symbol.len), a->addend,
                        a->generic};
    if (r.name == UINT32_MAX)
        return CR_ENOMEM;
    cr__ir_var_t *v = &ps->ir->vars[c->var];
    if (v->reloc_count == 0)
        v->reloc_first = ps->ir->nrelocs;
    if (CR__PUSH(ps->ir->relocs, ps->ir->nrelocs, ps->ir->relocs_cap, r) != 0)
        return CR_ENOMEM;
    v->reloc_count++;
    return 0;
}

/* "= ..." of variable `id`: its bytes (and size, for an unsized array) and relocations. */
static int parse_initialiser(parser_t *ps, uint32_t id, const cr__ptx_decl_t *d)
{
    reloc_ctx_t c = {ps, id};
    uint64_t size = ps->ir->vars[id].size;
    uint8_t *init;
    int rc = cr__ptx_init(&ps->lx, d, &size, &init, add_reloc, &c);
    if (rc)
        return fail_decl(ps, rc, "bad initialiser");
    if (size > MAX_ARRAY_BYTES) {
        free(init);
        return fail(ps, "array too large");
    }
    cr__ir_var_t *v = &ps->ir->vars[id];
    v->init = init;
    v->size = size;
    v->is_unsized = 0; /* sized by its initialiser */
    return 0;
}

/* One declared variable (not a register) with its initialiser. */
static int add_var(parser_t *ps, cr__space_t space, int is_extern, const cr__ptx_decl_t *d,
                   cr__type_t type)
{
    cr__ir_var_t v = {0};
    if (var_layout(ps, d, &v.size, &v.align))
        return ps->rc;
    v.name = add_str(ps->ir, d->name.s, d->name.len);
    if (v.name == UINT32_MAX)
        return nomem(ps);
    v.space = (uint8_t)space;
    v.type = (uint8_t)type;
    v.is_extern = (uint8_t)is_extern;
    v.is_unsized = (uint8_t)d->unsized;
    v.func = ps->func;
    uint32_t id = ps->ir->nvars;
    if (CR__PUSH(ps->ir->vars, ps->ir->nvars, ps->ir->vars_cap, v) != 0)
        return nomem(ps);
    if (ps->func >= 0 && add_name(ps, d->name.s, d->name.len, 3, id, 0))
        return ps->rc;
    if (punct(ps, '='))
        return parse_initialiser(ps, id, d);
    return 0;
}

/* One register name with an optional <N> range. */
static int add_regs(parser_t *ps, const cr__ptx_decl_t *d, cr__type_t type)
{
    const cr__ptx_tok_t *t = tok(ps);
    if (t->kind != CR__PTX_WORD)
        return fail(ps, "expected a name");
    const char *name = t->s;
    uint32_t len = t->len, first = ps->ir->nregs, count = 1;
    int range = 0;
    next(ps);
    if (punct(ps, '<')) {
        next(ps);
        int64_t v;
        if (integer(tok(ps), &v) != 0 || v < 0 || v > 1000000)
            return fail(ps, "bad register count");
        next(ps);
        if (expect(ps, '>'))
            return ps->rc;
        count = (uint32_t)v;
        range = 1;
    }
    uint32_t noff = add_str(ps->ir, name, len);
    if (noff == UINT32_MAX)
        return nomem(ps);
    for (uint32_t i = 0; i < count; i++) {
        cr__ir_reg_t r = {noff, (uint8_t)type, (uint8_t)(d->vec > 1)};
        if (CR__PUSH(ps->ir->regs, ps->ir->nregs, ps->ir->regs_cap, r) != 0)
            return nomem(ps);
    }
    return add_name(ps, name, len, range ? 2 : 1, first, count);
}

/* A declaration after its state space word(s): qualifiers, then names with their sizes and
 * initialisers. Registers declare names in the current scope. */
static int parse_var_decl(parser_t *ps, cr__space_t space, int is_extern)
{
    cr__ptx_decl_t d = {0};
    cr__type_t type;
    int rc = cr__ptx_decl_quals(&ps->lx, &d);
    if (rc)
        return fail_decl(ps, rc, "bad declaration");
    if (check_decl(ps, &d, &type))
        return ps->rc;
    for (;;) {
        if (space == CR__SP_REG) {
            if (add_regs(ps, &d, type))
                return ps->rc;
        } else {
            if ((rc = cr__ptx_decl_name(&ps->lx, &d)) != 0)
                return fail_decl(ps, rc, "bad declaration");
            if (add_var(ps, space, is_extern, &d, type))
                return ps->rc;
        }
        if (!punct(ps, ','))
            break;
        next(ps);
    }
    return expect(ps, ';');
}

/* Skips a directive that ends with its line (.version, .target, .file, .loc, ...). */
static void skip_line(parser_t *ps)
{
    uint32_t line = tok(ps)->line;
    while (tok(ps)->kind != CR__PTX_EOF && tok(ps)->line == line)
        next(ps);
}

/* Skips to the ';' that ends a statement (directives we ignore). */
static int skip_statement(parser_t *ps)
{
    while (tok(ps)->kind != CR__PTX_EOF && !punct(ps, ';'))
        next(ps);
    return expect(ps, ';');
}

/* ---- instructions ---- */

static const char *const mod_names[] = {"",
#define CR__MOD_ROW(name) #name,
                                        CR__MODS(CR__MOD_ROW)
#undef CR__MOD_ROW
};

static const char *const base_names[] = {"",
#define CR__BASE_ROW(name) #name,
                                         CR__BASES(CR__BASE_ROW)
#undef CR__BASE_ROW
};

static unsigned mod_from(const char *s, size_t len)
{
    /* "L1::no_allocate", "shared::cta": the part before :: */
    for (size_t i = 0; i + 1 < len; i++)
        if (s[i] == ':' && s[i + 1] == ':') {
            if (len == 15 && memcmp(s, "shared::cluster", 15) == 0)
                return CR__M_shared;
            len = i;
            break;
        }
    cr__type_t t = cr__type_from(s, len);
    if (t != CR__T_NONE)
        return CR__M_TYPE + t;
    for (unsigned i = 1; i < sizeof mod_names / sizeof mod_names[0]; i++)
        if (strlen(mod_names[i]) == len && memcmp(mod_names[i], s, len) == 0)
            return i;
    return CR__M_UNKNOWN;
}

static int push_opd(parser_t *ps, cr__opd_t o)
{
    if (CR__PUSH(ps->ir->opds, ps->ir->nopds, ps->ir->opds_cap, o) != 0)
        return nomem(ps);
    return 0;
}

/* A name in an operand: register, special register, variable, function or label. */
static int name_operand(parser_t *ps, const cr__ptx_tok_t *t, cr__opd_t *o)
{
    uint32_t id;
    int kind = lookup(ps, t->s, t->len, &id);
    if (kind == 1) {
        o->kind = CR__O_REG;
        o->id = id;
        return 0;
    }
    if (kind == 3) {
        o->kind = CR__O_VAR;
        o->id = id;
        return 0;
    }
    int sr = cr__sreg_from(t->s, t->len);
    if (sr >= 0) {
        o->kind = CR__O_SREG;
        o->id = (uint32_t)sr;
        return 0;
    }
    if (t->len == 7 && memcmp(t->s, "WARP_SZ", 7) == 0) {
        o->kind = CR__O_IMM;
        o->value = CR__WARP_SIZE;
        return 0;
    }
    int f = find_func_tok(ps, t->s, t->len);
    if (f >= 0) {
        o->kind = CR__O_FUNC;
        o->id = (uint32_t)f;
        return 0;
    }
    if (t->s[0] == '%')
        return fail(ps, "unknown register '%.*s'", (int)t->len, t->s);
    o->kind = CR__O_LABEL;
    o->id = add_str(ps->ir, t->s, t->len);
    if (o->id == UINT32_MAX)
        return nomem(ps);
    return 0;
}

/* A scalar operand: [!|-]name, number, _. */
static int scalar_operand(parser_t *ps, cr__opd_t *o)
{
    memset(o, 0, sizeof *o);
    if (punct(ps, '!')) {
        o->flags |= CR__OF_NOT;
        next(ps);
    }
    int neg = 0;
    if (punct(ps, '-')) {
        neg = 1;
        next(ps);
    }
    const cr__ptx_tok_t *t = tok(ps);
    if (t->kind != CR__PTX_WORD && t->kind != CR__PTX_NUM)
        return fail(ps, "bad operand");
    if (t->len == 1 && t->s[0] == '_') {
        o->kind = CR__O_SINK;
        next(ps);
        return 0;
    }
    int kind, fs = 0;
    int64_t value;
    if (t->kind == CR__PTX_NUM) {
        if (literal(t, neg, &kind, &value, &fs) != 0)
            return fail(ps, "bad number '%.*s'", (int)t->len, t->s);
        o->kind = (uint8_t)kind;
        o->value = value;
        o->reserved = (uint16_t)fs;
        next(ps);
        return 0;
    }
    cr__ptx_tok_t copy = *t;
    if (name_operand(ps, &copy, o))
        return ps->rc;
    if (neg)
        o->flags |= CR__OF_NEG;
    next(ps);
    /* sym+4 as a value (mov.u64 %rd1, arr+8) */
    if (o->kind == CR__O_VAR && (punct(ps, '+')) && tok(ps)->glued) {
        next(ps);
        if (integer(tok(ps), &value) != 0)
            return fail(ps, "bad offset");
        o->value = value;
        next(ps);
    }
    return 0;
}

/* [base], [base+off], [base+-off], [sym+off], [imm]. Pushes ADDR (+ base). */
static int address_operand(parser_t *ps)
{
    cr__opd_t a = {0}, base = {0};
    a.kind = CR__O_ADDR;
    next(ps); /* [ */
    const cr__ptx_tok_t *t = tok(ps);
    if (t->kind == CR__PTX_WORD) {
        cr__ptx_tok_t copy = *t;
        if (name_operand(ps, &copy, &base))
            return ps->rc;
        if (base.kind != CR__O_REG && base.kind != CR__O_VAR && base.kind != CR__O_FUNC)
            return fail(ps, "bad address base '%.*s'", (int)copy.len, copy.s);
        a.id = 1;
        next(ps);
    }
    int sign = 1, have_off = !a.id;
    if (a.id && (punct(ps, '+') || punct(ps, '-'))) {
        sign = punct(ps, '-') ? -1 : 1;
        next(ps);
        have_off = 1;
    }
    if (have_off) {
        if (punct(ps, '-')) {
            sign = -sign;
            next(ps);
        }
        int64_t v;
        if (integer(tok(ps), &v) != 0)
            return fail(ps, "bad address offset");
        a.value = sign * v;
        next(ps);
    }
    if (expect(ps, ']'))
        return ps->rc;
    if (push_opd(ps, a))
        return ps->rc;
    if (a.id && push_opd(ps, base))
        return ps->rc;
    return 0;
}

/* {a, b, ...} or (a, b, ...): pushes VEC with the count, then the elements. */
static int list_operand(parser_t *ps, char close)
{
    uint32_t at = ps->ir->nopds;
    cr__opd_t v = {0};
    v.kind = CR__O_VEC;
    if (close == ')')
        v.flags = 0x80; /* a parenthesised call list */
    if (push_opd(ps, v))
        return ps->rc;
    next(ps);
    uint32_t n = 0;
    while (!punct(ps, close)) {
        cr__opd_t e;
        if (scalar_operand(ps, &e))
            return ps->rc;
        if (push_opd(ps, e))
            return ps->rc;
        n++;
        if (punct(ps, ',')) {
            next(ps);
        } else if (!punct(ps, close)) {
            return fail(ps, "expected ',' or '%c'", close);
        }
    }
    next(ps);
    ps->ir->opds[at].id = n;
    return 0;
}

static int parse_instruction(parser_t *ps)
{
    cr__ir_insn_t in = {0};
    in.line = tok(ps)->line;
    if (punct(ps, '@')) {
        next(ps);
        if (punct(ps, '!')) {
            in.guard = 2;
            next(ps);
        } else {
            in.guard = 1;
        }
        uint32_t id;
        if (tok(ps)->kind != CR__PTX_WORD || lookup(ps, tok(ps)->s, tok(ps)->len, &id) != 1)
            return fail(ps, "bad guard predicate");
        in.guard_reg = id;
        next(ps);
    }
    const cr__ptx_tok_t *t = tok(ps);
    if (t->kind != CR__PTX_WORD)
        return fail(ps, "expected an instruction");
    in.text = add_str(ps->ir, t->s, t->len);
    if (in.text == UINT32_MAX)
        return nomem(ps);
    /* base and modifiers */
    const char *s = t->s, *end = t->s + t->len;
    const char *dot = memchr(s, '.', t->len);
    size_t blen = dot ? (size_t)(dot - s) : t->len;
    for (unsigned i = 1; i < CR__B_COUNT; i++)
        if (strlen(base_names[i]) == blen && memcmp(base_names[i], s, blen) == 0)
            in.base = i;
    while (dot && dot < end) {
        const char *m = dot + 1, *e = m;
        while (e < end && *e != '.')
            e++;
        if (in.nmods == sizeof in.mods)
            return fail(ps, "too many modifiers");
        in.mods[in.nmods++] = (uint8_t)mod_from(m, (size_t)(e - m));
        dot = e;
    }
    next(ps);
    in.opd = ps->ir->nopds;
    while (!punct(ps, ';')) {
        if (tok(ps)->kind == CR__PTX_EOF)
            return fail(ps, "unterminated instruction");
        if (punct(ps, '[')) {
            if (address_operand(ps))
                return ps->rc;
        } else if (punct(ps, '{')) {
            if (list_operand(ps, '}'))
                return ps->rc;
        } else if (punct(ps, '(')) {
            if (list_operand(ps, ')'))
                return ps->rc;
        } else {
            cr__opd_t o;
            if (scalar_operand(ps, &o))
                return ps->rc;
            if (punct(ps, '|')) { /* d|p */
                o.flags |= CR__OF_PAIR;
                if (push_opd(ps, o))
                    return ps->rc;
                in.nopd++;
                next(ps);
                if (scalar_operand(ps, &o))
                    return ps->rc;
            }
            if (push_opd(ps, o))
                return ps->rc;
        }
        in.nopd++;
        if (in.nopd > 64)
            return fail(ps, "too many operands");
        if (punct(ps, ',')) {
            next(ps);
            if (punct(ps, ';'))
                return fail(ps, "missing operand");
        } else if (!punct(ps, ';') && !punct(ps, '(')) {
            /* call lists may follow without a comma in old PTX */
            return fail(ps, "expected ',' or ';' after an operand");
        }
    }
    next(ps);
    in.npool = (uint16_t)(ps->ir->nopds - in.opd);
    if (CR__PUSH(ps->ir->insns, ps->ir->ninsns, ps->ir->insns_cap, in) != 0)
        return nomem(ps);
    ps->ir->funcs[ps->func].insn_count++;
    return 0;
}

/* ---- functions ---- */

/* A parameter list: ( .param ..., .param ... ), laid out by common/ptx_var.c. Variables get
 * consecutive ids. */
typedef struct {
    parser_t *ps;
    int is_ret;
    uint32_t count;
} params_ctx_t;

static int add_param(void *user, const cr__ptx_decl_t *d, const cr_param_t *p)
{
    params_ctx_t *c = user;
    parser_t *ps = c->ps;
    cr__type_t type;
    if (check_decl(ps, d, &type))
        return ps->rc;
    cr__ir_var_t v = {0};
    v.name = add_str(ps->ir, d->name.s, d->name.len);
    if (v.name == UINT32_MAX)
        return nomem(ps);
    uint64_t align = cr__ptx_decl_align(d);
    v.space = CR__SP_PARAM;
    v.type = (uint8_t)type;
    v.align = align ? (uint32_t)align : 1;
    v.size = p->size;
    v.func = ps->func;
    v.is_param = 1;
    v.is_ret = (uint8_t)c->is_ret;
    v.param_offset = p->offset;
    if (CR__PUSH(ps->ir->vars, ps->ir->nvars, ps->ir->vars_cap, v) != 0)
        return nomem(ps);
    c->count++;
    return 0;
}

static int parse_params(parser_t *ps, uint32_t *first, uint32_t *count, int is_ret, int kernel)
{
    params_ctx_t c = {ps, is_ret, 0};
    uint32_t size;
    *first = ps->ir->nvars;
    *count = 0;
    int rc = cr__ptx_params(&ps->lx, add_param, &c, &size);
    if (rc)
        return fail_decl(ps, rc, "bad parameter list");
    *count = c.count;
    if (kernel)
        ps->ir->funcs[ps->func].param_size = size;
    return 0;
}

/* Adds the parameters of the current function as names of its outermost scope. */
static int name_params(parser_t *ps, uint32_t first, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        uint32_t off = ps->ir->vars[first + i].name;
        if (add_name(ps, NULL, (uint32_t)strlen(ps->ir->strings + off), 3, first + i, 0))
            return ps->rc;
        ps->names[ps->nnames - 1].off = off;
    }
    return 0;
}

/* ".maxntid x, y, z" and the like, read as the image parser reads them. */
static int parse_dims3(parser_t *ps, uint32_t out[3])
{
    int rc = cr__ptx_dims3(&ps->lx, out);
    return rc ? fail_decl(ps, rc, "bad dimension") : 0;
}

/* The body of the current function: statements up to the matching '}'. */
static int parse_body(parser_t *ps)
{
    cr__ir_func_t *f = &ps->ir->funcs[ps->func];
    f->insn_first = ps->ir->ninsns;
    f->reg_first = ps->ir->nregs;
    f->label_first = ps->ir->nlabels;
    int depth = 1;
    next(ps); /* { */
    if (push_scope(ps))
        return ps->rc;
    while (depth > 0) {
        const cr__ptx_tok_t *t = tok(ps);
        if (t->kind == CR__PTX_EOF)
            return fail(ps, "unterminated function body");
        if (punct(ps, '{')) {
            depth++;
            if (push_scope(ps))
                return ps->rc;
            next(ps);
            continue;
        }
        if (punct(ps, '}')) {
            depth--;
            pop_scope(ps);
            next(ps);
            continue;
        }
        if (punct(ps, ';')) {
            next(ps);
            continue;
        }
        if (t->kind == CR__PTX_WORD && t->s[0] == '.') {
            if (is(ps, ".reg")) {
                next(ps);
                if (parse_var_decl(ps, CR__SP_REG, 0))
                    return ps->rc;
            } else if (is(ps, ".local") || is(ps, ".shared") || is(ps, ".param") ||
                       is(ps, ".const") || is(ps, ".global")) {
                cr__space_t sp = is(ps, ".local")    ? CR__SP_LOCAL
                                 : is(ps, ".shared") ? CR__SP_SHARED
                                 : is(ps, ".param")  ? CR__SP_PARAM
                                 : is(ps, ".const")  ? CR__SP_CONST
                                                     : CR__SP_GLOBAL;
                next(ps);
                if (parse_var_decl(ps, sp, 0))
                    return ps->rc;
            } else if (is(ps, ".extern")) {
                next(ps);
                if (!is(ps, ".shared"))
                    return fail(ps, "unsupported .extern in a function");
                next(ps);
                if (parse_var_decl(ps, CR__SP_SHARED, 1))
                    return ps->rc;
            } else if (is(ps, ".loc") || is(ps, ".file")) {
                skip_line(ps);
            } else if (is(ps, ".pragma") || is(ps, ".callprototype")) {
                /* a prototype only describes indirect calls: their callee says it all */
                if (skip_statement(ps))
                    return ps->rc;
            } else {
                return fail(ps, "unsupported directive '%.*s' in a function", (int)t->len, t->s);
            }
            continue;
        }
        /* a label */
        if (t->kind == CR__PTX_WORD && !(t->s[0] == '%')) {
            cr__ptx_lex_t save = ps->lx;
            cr__ptx_tok_t word = *t;
            next(ps);
            if (punct(ps, ':')) {
                cr__ir_label_t l = {add_str(ps->ir, word.s, word.len),
                                    ps->ir->ninsns - f->insn_first};
                if (l.name == UINT32_MAX)
                    return nomem(ps);
                if (CR__PUSH(ps->ir->labels, ps->ir->nlabels, ps->ir->labels_cap, l) != 0)
                    return nomem(ps);
                f = &ps->ir->funcs[ps->func];
                f->label_count++;
                next(ps);
                continue;
            }
            ps->lx = save;
        }
        if (parse_instruction(ps))
            return ps->rc;
        f = &ps->ir->funcs[ps->func];
    }
    f->reg_count = ps->ir->nregs - f->reg_first;
    return 0;
}

/* .entry / .func after the linkage words. */
static int parse_function(parser_t *ps, int entry, int is_extern)
{
    cr__ir_func_t fn = {0};
    fn.is_entry = (uint8_t)entry;
    fn.is_extern = (uint8_t)is_extern;
    fn.line = tok(ps)->line;
    next(ps); /* .entry / .func */
    ps->func = (int32_t)ps->ir->nfuncs;
    if (CR__PUSH(ps->ir->funcs, ps->ir->nfuncs, ps->ir->funcs_cap, fn) != 0)
        return nomem(ps);
    cr__ir_func_t *f = &ps->ir->funcs[ps->func];
    if (!entry && punct(ps, '(')) {
        uint32_t first, count;
        if (parse_params(ps, &first, &count, 1, 0))
            return ps->rc;
        f = &ps->ir->funcs[ps->func];
        f->ret_first = first;
        f->ret_count = count;
    }
    const cr__ptx_tok_t *t = tok(ps);
    if (t->kind != CR__PTX_WORD)
        return fail(ps, "expected a function name");
    f->name = add_str(ps->ir, t->s, t->len);
    if (f->name == UINT32_MAX)
        return nomem(ps);
    next(ps);
    if (punct(ps, '(')) {
        uint32_t first, count;
        if (parse_params(ps, &first, &count, 0, entry))
            return ps->rc;
        f = &ps->ir->funcs[ps->func];
        f->param_first = first;
        f->param_count = count;
    }
    /* performance directives and attributes */
    for (;;) {
        f = &ps->ir->funcs[ps->func];
        if (is(ps, ".maxntid")) {
            if (parse_dims3(ps, f->maxntid))
                return ps->rc;
        } else if (is(ps, ".reqntid")) {
            if (parse_dims3(ps, f->reqntid))
                return ps->rc;
        } else if (is(ps, ".minnctapersm") || is(ps, ".maxnreg") || is(ps, ".maxnctapersm") ||
                   is(ps, ".maxclusterrank") || is(ps, ".reqnctapercluster") ||
                   is(ps, ".explicitcluster") || is(ps, ".noreturn") ||
                   is(ps, ".blocksareclusters")) {
            uint32_t dummy[3];
            if (is(ps, ".explicitcluster") || is(ps, ".noreturn") || is(ps, ".blocksareclusters"))
                next(ps);
            else if (parse_dims3(ps, dummy))
                return ps->rc;
        } else if (is(ps, ".pragma")) {
            if (skip_statement(ps))
                return ps->rc;
        } else {
            break;
        }
    }
    if (punct(ps, ';')) { /* a declaration */
        next(ps);
        ps->func = -1;
        return 0;
    }
    if (!punct(ps, '{'))
        return fail(ps, "expected '{' or ';' after a function header");
    f = &ps->ir->funcs[ps->func];
    f->has_body = 1;
    ps->nnames = 0;
    ps->nscopes = 0;
    if (push_scope(ps))
        return ps->rc;
    if (name_params(ps, f->ret_first, f->ret_count))
        return ps->rc;
    f = &ps->ir->funcs[ps->func];
    if (name_params(ps, f->param_first, f->param_count))
        return ps->rc;
    if (parse_body(ps))
        return ps->rc;
    ps->nnames = 0;
    ps->nscopes = 0;
    ps->func = -1;
    return 0;
}

/* Skips a .section block: the name, then { ... }. */
static int skip_section(parser_t *ps)
{
    next(ps);
    while (tok(ps)->kind != CR__PTX_EOF && !punct(ps, '{'))
        next(ps);
    int depth = 0;
    while (tok(ps)->kind != CR__PTX_EOF) {
        if (punct(ps, '{'))
            depth++;
        if (punct(ps, '}') && --depth == 0) {
            next(ps);
            return 0;
        }
        next(ps);
    }
    return fail(ps, "unterminated .section");
}

static int parse_module(parser_t *ps)
{
    int is_extern = 0;
    while (tok(ps)->kind != CR__PTX_EOF && !ps->rc) {
        const cr__ptx_tok_t *t = tok(ps);
        if (t->kind != CR__PTX_WORD || t->s[0] != '.') {
            if (punct(ps, ';')) {
                next(ps);
                continue;
            }
            return fail(ps, "unexpected '%.*s' at module scope", (int)t->len, t->s);
        }
        if (is(ps, ".version")) {
            next(ps);
            const cr__ptx_tok_t *arg = tok(ps);
            if (arg->kind == CR__PTX_NUM) {
                ps->ir->version_major = leading_decimal(arg->s, arg->len);
                const char *d = memchr(arg->s, '.', arg->len);
                if (d)
                    ps->ir->version_minor =
                        leading_decimal(d + 1, arg->len - (size_t)(d + 1 - arg->s));
            }
            skip_line(ps);
        } else if (is(ps, ".target")) {
            next(ps);
            const cr__ptx_tok_t *arg = tok(ps);
            if (arg->kind == CR__PTX_WORD && arg->len > 3 && !memcmp(arg->s, "sm_", 3))
                ps->ir->target_sm = leading_decimal(arg->s + 3, arg->len - 3);
            skip_line(ps);
        } else if (is(ps, ".address_size")) {
            next(ps);
            if (!is(ps, "64"))
                return fail(ps, "only .address_size 64 is supported");
            next(ps);
        } else if (is(ps, ".file") || is(ps, ".loc")) {
            skip_line(ps);
        } else if (is(ps, ".section")) {
            if (skip_section(ps))
                return ps->rc;
        } else if (is(ps, ".pragma")) {
            if (skip_statement(ps))
                return ps->rc;
        } else if (is(ps, ".visible") || is(ps, ".weak") || is(ps, ".common")) {
            next(ps);
            continue;
        } else if (is(ps, ".extern")) {
            is_extern = 1;
            next(ps);
            continue;
        } else if (is(ps, ".entry") || is(ps, ".func")) {
            if (parse_function(ps, is(ps, ".entry"), is_extern))
                return ps->rc;
        } else if (is(ps, ".global") || is(ps, ".const") || is(ps, ".shared") || is(ps, ".local")) {
            cr__space_t sp = is(ps, ".global")   ? CR__SP_GLOBAL
                             : is(ps, ".const")  ? CR__SP_CONST
                             : is(ps, ".shared") ? CR__SP_SHARED
                                                 : CR__SP_LOCAL;
            next(ps);
            if (parse_var_decl(ps, sp, is_extern))
                return ps->rc;
        } else if (is(ps, ".alias")) {
            return fail(ps, ".alias is not supported");
        } else {
            return fail(ps, "unsupported directive '%.*s'", (int)t->len, t->s);
        }
        is_extern = 0;
    }
    return ps->rc;
}

int cr__parse(const char *text, size_t len, cr__ir_t *ir, char *err, size_t err_len)
{
    parser_t ps = {0};
    ps.ir = ir;
    ps.err = err;
    ps.err_len = err_len;
    ps.func = -1;
    if (err && err_len)
        err[0] = 0;
    if (add_str(ir, "", 0) == UINT32_MAX)
        return CR_ENOMEM; /* offset 0: the empty string */
    cr__ptx_lex_init(&ps.lx, text, len);
    int rc = parse_module(&ps);
    free(ps.names);
    free(ps.scopes);
    return rc;
}

void cr__ir_free(cr__ir_t *ir)
{
    if (!ir)
        return;
    for (uint32_t i = 0; i < ir->nvars; i++)
        free(ir->vars[i].init);
    free(ir->strings);
    free(ir->funcs);
    free(ir->vars);
    free(ir->regs);
    free(ir->insns);
    free(ir->opds);
    free(ir->labels);
    free(ir->relocs);
    memset(ir, 0, sizeof *ir);
}
