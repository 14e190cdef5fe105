/* PTX text -> module IR.
 *
 * Handles what nvcc (ISA 9.x) emits and what people write by hand: module directives,
 * .global/.const/.shared/.local variables with alignment, array sizes and initialisers
 * (numbers, float literals, addresses of symbols), .entry/.func with parameters and return
 * values, .reg declarations with %r<N> ranges, nested { } scopes (inner declarations shadow
 * outer ones), labels, and instructions with guards (@%p, @!%p), vector operands {a, b},
 * address operands [reg+off] / [sym+off], d|p destination pairs and call argument lists.
 * Names are resolved while parsing (registers and variables by scope); labels are left to the
 * decoder. Every error names its line. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "internal.h"

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
    cr__lex_t lx;
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
    if (ps->rc) return ps->rc;
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
    if (!ps->rc) ps->rc = CR_ENOMEM;
    if (ps->err && ps->err_len) snprintf(ps->err, ps->err_len, "out of memory");
    return ps->rc;
}

static void next(parser_t *ps)
{
    cr__lex_next(&ps->lx);
}

static const cr__tok_t *tok(parser_t *ps)
{
    return &ps->lx.tok;
}

static int is(parser_t *ps, const char *w)
{
    return cr__tok_is(&ps->lx.tok, w);
}

static int punct(parser_t *ps, char c)
{
    return cr__tok_punct(&ps->lx.tok, c);
}

static int expect(parser_t *ps, char c)
{
    if (!punct(ps, c)) {
        const cr__tok_t *t = tok(ps);
        return fail(ps, "expected '%c', found '%.*s'", c, t->kind == CR__TK_EOF ? 3 : (int)t->len,
                    t->kind == CR__TK_EOF ? "EOF" : t->s);
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
    if (CR__PUSH(ps->scopes, ps->nscopes, ps->scopes_cap, ps->nnames) != 0) return nomem(ps);
    return 0;
}

static void pop_scope(parser_t *ps)
{
    if (ps->nscopes) ps->nnames = ps->scopes[--ps->nscopes];
}

static int add_name(parser_t *ps, const char *s, uint32_t len, int kind, uint32_t id,
                    uint32_t count)
{
    name_t n = {s, 0, len, (uint8_t)kind, id, count};
    if (CR__PUSH(ps->names, ps->nnames, ps->names_cap, n) != 0) return nomem(ps);
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
    if (has_index && digits > 1 && s[len - digits] == '0') has_index = 0; /* %r01 is a name */
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
        if (var->func >= 0) continue;
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
            if (found < 0 || ir->funcs[i].has_body) found = (int)i;
        }
    return found;
}

static int find_func_tok(parser_t *ps, const char *s, uint32_t len)
{
    int found = -1;
    for (uint32_t i = 0; i < ps->ir->nfuncs; i++) {
        const char *name = cr__ir_str(ps->ir, ps->ir->funcs[i].name);
        if (strlen(name) == len && memcmp(name, s, len) == 0) found = (int)i;
    }
    return found;
}

/* ---- numbers ---- */

/* Parses an integer or float literal word (after an optional '-' the caller consumed).
 * Returns 0 with *kind CR__O_IMM (value) or CR__O_FLT (bits, *fsize 4/8), or -1. */
static int parse_number(const char *s, uint32_t len, int neg, int *kind, int64_t *value, int *fsize)
{
    char buf[80];
    if (len == 0 || len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    if (len > 2 && buf[0] == '0' &&
        (buf[1] == 'f' || buf[1] == 'F' || buf[1] == 'd' || buf[1] == 'D')) {
        int is_f = buf[1] == 'f' || buf[1] == 'F';
        size_t want = is_f ? 8 : 16;
        if (len - 2 != want) return -1;
        uint64_t bits = 0;
        for (size_t i = 2; i < len; i++) {
            char c = buf[i];
            int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (d < 0) return -1;
            bits = bits << 4 | (uint64_t)d;
        }
        if (neg) bits ^= is_f ? 0x80000000ull : 0x8000000000000000ull;
        *kind = CR__O_FLT;
        *value = (int64_t)bits;
        *fsize = is_f ? 4 : 8;
        return 0;
    }
    int is_float = 0;
    int hex = len > 2 && buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X');
    for (size_t i = 0; i < len && !hex; i++)
        if (buf[i] == '.' || buf[i] == 'e' || buf[i] == 'E') is_float = 1;
    if (is_float) {
        char *end;
        errno = 0;
        double d = strtod(buf, &end);
        if (*end) return -1;
        if (neg) d = -d;
        uint64_t bits;
        memcpy(&bits, &d, 8);
        *kind = CR__O_FLT;
        *value = (int64_t)bits;
        *fsize = 8;
        return 0;
    }
    /* integers: decimal, 0x hex, 0b binary, leading-0 octal, optional U suffix */
    if (buf[len - 1] == 'U' || buf[len - 1] == 'u') buf[--len] = 0;
    if (len == 0) return -1;
    uint64_t v = 0;
    int base = 10;
    size_t i = 0;
    if (len > 2 && buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')) {
        base = 16;
        i = 2;
    } else if (len > 2 && buf[0] == '0' && (buf[1] == 'b' || buf[1] == 'B')) {
        base = 2;
        i = 2;
    } else if (len > 1 && buf[0] == '0') {
        base = 8;
        i = 1;
    }
    for (; i < len; i++) {
        char c = buf[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : 99;
        if (d >= base) return -1;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return -1;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    *kind = CR__O_IMM;
    *value = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* ---- declarations ---- */

typedef struct {
    cr__type_t type;
    unsigned vec;
    uint32_t align;
    int opaque; /* .texref, .samplerref, .surfref */
    int ptr_attr;
} decl_type_t;

/* Reads the words after a state space up to the declared name: .align N, .vN, the type,
 * .ptr attributes. */
static int parse_decl_type(parser_t *ps, decl_type_t *d)
{
    memset(d, 0, sizeof *d);
    d->vec = 1;
    while (tok(ps)->kind == CR__TK_WORD && tok(ps)->s[0] == '.') {
        const cr__tok_t *t = tok(ps);
        if (is(ps, ".align")) {
            next(ps);
            int kind, fs;
            int64_t v;
            if (tok(ps)->kind != CR__TK_WORD ||
                parse_number(tok(ps)->s, tok(ps)->len, 0, &kind, &v, &fs) != 0 ||
                kind != CR__O_IMM || v <= 0 || v > 4096 || (v & (v - 1)))
                return fail(ps, "bad .align value");
            if (!d->ptr_attr) d->align = (uint32_t)v;
            next(ps);
            continue;
        }
        if (is(ps, ".ptr")) {
            d->ptr_attr = 1;
        } else if (is(ps, ".v2")) {
            d->vec = 2;
        } else if (is(ps, ".v4")) {
            d->vec = 4;
        } else if (is(ps, ".v8")) {
            d->vec = 8;
        } else if (is(ps, ".texref") || is(ps, ".samplerref") || is(ps, ".surfref")) {
            d->opaque = 1;
        } else {
            cr__type_t ty = cr__type_from(t->s + 1, t->len - 1);
            if (ty != CR__T_NONE) {
                d->type = ty;
            } else if (!d->ptr_attr && !is(ps, ".global") && !is(ps, ".shared") &&
                       !is(ps, ".local") && !is(ps, ".const") && !is(ps, ".param") &&
                       !is(ps, ".attribute") && !is(ps, ".unified")) {
                return fail(ps, "unexpected '%.*s' in a declaration", (int)t->len, t->s);
            }
        }
        next(ps);
    }
    if (d->type == CR__T_NONE && !d->opaque) return fail(ps, "declaration without a type");
    return 0;
}

static uint32_t decl_elem_size(const decl_type_t *d)
{
    return d->opaque ? 8 : cr__type_size(d->type) * d->vec;
}

/* Array dimensions after a name: [N][M]... or [] (unsized). */
static int parse_dims(parser_t *ps, uint64_t *count, int *unsized)
{
    *count = 1;
    *unsized = 0;
    while (punct(ps, '[')) {
        next(ps);
        if (punct(ps, ']')) {
            *unsized = 1;
            next(ps);
            continue;
        }
        int kind, fs;
        int64_t v;
        if (tok(ps)->kind != CR__TK_WORD ||
            parse_number(tok(ps)->s, tok(ps)->len, 0, &kind, &v, &fs) != 0 || kind != CR__O_IMM ||
            v < 0)
            return fail(ps, "bad array size");
        next(ps);
        if (expect(ps, ']')) return ps->rc;
        if ((uint64_t)v > MAX_ARRAY_BYTES || *count * (uint64_t)v > MAX_ARRAY_BYTES)
            return fail(ps, "array too large");
        *count *= (uint64_t)v;
    }
    return 0;
}

/* Stores one initialiser element at byte `off` of var. */
static int init_elem(parser_t *ps, cr__ir_var_t *v, uint32_t esize, cr__type_t ety, uint64_t off,
                     int kind, int64_t value, int fsize)
{
    if (off + esize > v->size) return fail(ps, "too many initialisers");
    if (!v->init && !(v->init = calloc(1, v->size ? v->size : 1))) return nomem(ps);
    uint64_t bits = (uint64_t)value;
    if (cr__type_float(ety) && ety != CR__T_F16 && ety != CR__T_BF16) {
        double d;
        if (kind == CR__O_IMM) {
            d = (double)value;
        } else if (fsize == 4) {
            float f;
            uint32_t b = (uint32_t)bits;
            memcpy(&f, &b, 4);
            d = f;
        } else {
            memcpy(&d, &bits, 8);
        }
        if (esize == 4) {
            float f = (float)d;
            uint32_t b;
            memcpy(&b, &f, 4);
            bits = b;
        } else {
            memcpy(&bits, &d, 8);
        }
    } else if (kind == CR__O_FLT && fsize == 4 && esize == 8) {
        bits = (uint32_t)bits;
    }
    memcpy(v->init + off, &bits, esize > 8 ? 8 : esize); /* little-endian */
    return 0;
}

/* One initialiser element: a number, a symbol (address), generic(sym), sym+off. */
static int parse_init_elem(parser_t *ps, uint32_t var, uint32_t esize, cr__type_t ety, uint64_t off)
{
    int neg = 0;
    if (punct(ps, '-')) {
        neg = 1;
        next(ps);
    }
    const cr__tok_t *t = tok(ps);
    if (t->kind != CR__TK_WORD) return fail(ps, "bad initialiser");
    int kind, fs = 0;
    int64_t value;
    if (parse_number(t->s, t->len, neg, &kind, &value, &fs) == 0) {
        next(ps);
        return init_elem(ps, &ps->ir->vars[var], esize, ety, off, kind, value, fs);
    }
    /* an address: generic(sym) or sym, then an optional +N */
    int generic = 0;
    if (is(ps, "generic")) {
        next(ps);
        if (expect(ps, '(')) return ps->rc;
        generic = 1;
    }
    t = tok(ps);
    if (t->kind != CR__TK_WORD) return fail(ps, "bad address initialiser");
    cr__ir_reloc_t r = {off, esize, add_str(ps->ir, t->s, t->len), 0, generic};
    if (r.name == UINT32_MAX) return nomem(ps);
    next(ps);
    if (generic && expect(ps, ')')) return ps->rc;
    if (punct(ps, '+') || punct(ps, '-')) {
        int minus = punct(ps, '-');
        next(ps);
        if (tok(ps)->kind != CR__TK_WORD ||
            parse_number(tok(ps)->s, tok(ps)->len, minus, &kind, &value, &fs) != 0 ||
            kind != CR__O_IMM)
            return fail(ps, "bad address offset in an initialiser");
        r.addend = value;
        next(ps);
    }
    if (esize != 4 && esize != 8) return fail(ps, "an address initialiser needs 4 or 8 bytes");
    cr__ir_var_t *v = &ps->ir->vars[var];
    if (off + esize > v->size) return fail(ps, "too many initialisers");
    if (v->reloc_count == 0) v->reloc_first = ps->ir->nrelocs;
    if (CR__PUSH(ps->ir->relocs, ps->ir->nrelocs, ps->ir->relocs_cap, r) != 0) return nomem(ps);
    v->reloc_count++;
    return 0;
}

/* = value or = { ... } (nested braces flatten in order). */
static int parse_initialiser(parser_t *ps, uint32_t var, uint32_t esize, cr__type_t ety)
{
    uint64_t off = 0;
    int depth = 0;
    if (!punct(ps, '{')) return parse_init_elem(ps, var, esize, ety, 0);
    for (;;) {
        if (punct(ps, '{')) {
            depth++;
            next(ps);
            continue;
        }
        if (punct(ps, '}')) {
            next(ps);
            if (--depth == 0) return 0;
            if (punct(ps, ',')) next(ps);
            continue;
        }
        if (parse_init_elem(ps, var, esize, ety, off)) return ps->rc;
        off += esize;
        if (punct(ps, ',')) {
            next(ps);
        } else if (!punct(ps, '}')) {
            return fail(ps, "expected ',' or '}' in an initialiser");
        }
    }
}

/* A variable declaration after its state space word(s): type, names, sizes, initialisers.
 * Registers declare names in the current scope. */
static int parse_var_decl(parser_t *ps, cr__space_t space, int is_extern)
{
    decl_type_t d;
    if (parse_decl_type(ps, &d)) return ps->rc;
    for (;;) {
        const cr__tok_t *t = tok(ps);
        if (t->kind != CR__TK_WORD) return fail(ps, "expected a name");
        const char *name = t->s;
        uint32_t len = t->len;
        next(ps);
        if (space == CR__SP_REG) {
            uint32_t first = ps->ir->nregs, count = 1;
            int range = 0;
            if (punct(ps, '<')) {
                next(ps);
                int kind, fs;
                int64_t v;
                if (tok(ps)->kind != CR__TK_WORD ||
                    parse_number(tok(ps)->s, tok(ps)->len, 0, &kind, &v, &fs) != 0 ||
                    kind != CR__O_IMM || v < 0 || v > 1000000)
                    return fail(ps, "bad register count");
                next(ps);
                if (expect(ps, '>')) return ps->rc;
                count = (uint32_t)v;
                range = 1;
            }
            uint32_t noff = add_str(ps->ir, name, len);
            if (noff == UINT32_MAX) return nomem(ps);
            for (uint32_t i = 0; i < count; i++) {
                cr__ir_reg_t r = {noff, (uint8_t)d.type, (uint8_t)(d.vec > 1)};
                if (CR__PUSH(ps->ir->regs, ps->ir->nregs, ps->ir->regs_cap, r) != 0)
                    return nomem(ps);
            }
            if (add_name(ps, name, len, range ? 2 : 1, first, count)) return ps->rc;
        } else {
            uint64_t count;
            int unsized;
            if (parse_dims(ps, &count, &unsized)) return ps->rc;
            cr__ir_var_t v = {0};
            v.name = add_str(ps->ir, name, len);
            if (v.name == UINT32_MAX) return nomem(ps);
            v.space = (uint8_t)space;
            v.type = (uint8_t)d.type;
            v.is_extern = (uint8_t)is_extern;
            v.is_unsized = (uint8_t)unsized;
            uint32_t es = decl_elem_size(&d);
            v.align = d.align ? d.align : es ? es : 1;
            v.size = unsized ? 0 : count * es;
            v.func = ps->func;
            uint32_t id = ps->ir->nvars;
            if (CR__PUSH(ps->ir->vars, ps->ir->nvars, ps->ir->vars_cap, v) != 0) return nomem(ps);
            if (ps->func >= 0 && add_name(ps, name, len, 3, id, 0)) return ps->rc;
            if (punct(ps, '=')) {
                next(ps);
                if (unsized) return fail(ps, "initialiser for an unsized array");
                if (parse_initialiser(ps, id, cr__type_size(d.type) ? cr__type_size(d.type) : 1,
                                      d.type))
                    return ps->rc;
            }
        }
        if (!punct(ps, ',')) break;
        next(ps);
    }
    return expect(ps, ';');
}

/* Skips a directive that ends with its line (.version, .target, .file, .loc, ...). */
static void skip_line(parser_t *ps)
{
    uint32_t line = tok(ps)->line;
    while (tok(ps)->kind != CR__TK_EOF && tok(ps)->line == line)
        next(ps);
}

/* Skips to the ';' that ends a statement (directives we ignore). */
static int skip_statement(parser_t *ps)
{
    while (tok(ps)->kind != CR__TK_EOF && !punct(ps, ';'))
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
            if (len == 15 && memcmp(s, "shared::cluster", 15) == 0) return CR__M_shared;
            len = i;
            break;
        }
    cr__type_t t = cr__type_from(s, len);
    if (t != CR__T_NONE) return CR__M_TYPE + t;
    for (unsigned i = 1; i < sizeof mod_names / sizeof mod_names[0]; i++)
        if (strlen(mod_names[i]) == len && memcmp(mod_names[i], s, len) == 0) return i;
    return CR__M_UNKNOWN;
}

static int push_opd(parser_t *ps, cr__opd_t o)
{
    if (CR__PUSH(ps->ir->opds, ps->ir->nopds, ps->ir->opds_cap, o) != 0) return nomem(ps);
    return 0;
}

/* A name in an operand: register, special register, variable, function or label. */
static int name_operand(parser_t *ps, const cr__tok_t *t, cr__opd_t *o)
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
    if (t->s[0] == '%') return fail(ps, "unknown register '%.*s'", (int)t->len, t->s);
    o->kind = CR__O_LABEL;
    o->id = add_str(ps->ir, t->s, t->len);
    if (o->id == UINT32_MAX) return nomem(ps);
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
    const cr__tok_t *t = tok(ps);
    if (t->kind != CR__TK_WORD) return fail(ps, "bad operand");
    if (t->len == 1 && t->s[0] == '_') {
        o->kind = CR__O_SINK;
        next(ps);
        return 0;
    }
    int kind, fs = 0;
    int64_t value;
    char c = t->s[0];
    if (c >= '0' && c <= '9') {
        if (parse_number(t->s, t->len, neg, &kind, &value, &fs) != 0)
            return fail(ps, "bad number '%.*s'", (int)t->len, t->s);
        o->kind = (uint8_t)kind;
        o->value = value;
        o->reserved = (uint16_t)fs;
        next(ps);
        return 0;
    }
    cr__tok_t copy = *t;
    if (name_operand(ps, &copy, o)) return ps->rc;
    if (neg) o->flags |= CR__OF_NEG;
    next(ps);
    /* sym+4 as a value (mov.u64 %rd1, arr+8) */
    if (o->kind == CR__O_VAR && (punct(ps, '+')) && tok(ps)->glued) {
        next(ps);
        if (tok(ps)->kind != CR__TK_WORD ||
            parse_number(tok(ps)->s, tok(ps)->len, 0, &kind, &value, &fs) != 0 || kind != CR__O_IMM)
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
    const cr__tok_t *t = tok(ps);
    if (t->kind == CR__TK_WORD && !(t->s[0] >= '0' && t->s[0] <= '9')) {
        cr__tok_t copy = *t;
        if (name_operand(ps, &copy, &base)) return ps->rc;
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
        int kind, fs;
        int64_t v;
        if (tok(ps)->kind != CR__TK_WORD ||
            parse_number(tok(ps)->s, tok(ps)->len, 0, &kind, &v, &fs) != 0 || kind != CR__O_IMM)
            return fail(ps, "bad address offset");
        a.value = sign * v;
        next(ps);
    }
    if (expect(ps, ']')) return ps->rc;
    if (push_opd(ps, a)) return ps->rc;
    if (a.id && push_opd(ps, base)) return ps->rc;
    return 0;
}

/* {a, b, ...} or (a, b, ...): pushes VEC with the count, then the elements. */
static int list_operand(parser_t *ps, char close)
{
    uint32_t at = ps->ir->nopds;
    cr__opd_t v = {0};
    v.kind = CR__O_VEC;
    if (close == ')') v.flags = 0x80; /* a parenthesised call list */
    if (push_opd(ps, v)) return ps->rc;
    next(ps);
    uint32_t n = 0;
    while (!punct(ps, close)) {
        cr__opd_t e;
        if (scalar_operand(ps, &e)) return ps->rc;
        if (push_opd(ps, e)) return ps->rc;
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
        if (tok(ps)->kind != CR__TK_WORD || lookup(ps, tok(ps)->s, tok(ps)->len, &id) != 1)
            return fail(ps, "bad guard predicate");
        in.guard_reg = id;
        next(ps);
    }
    const cr__tok_t *t = tok(ps);
    if (t->kind != CR__TK_WORD) return fail(ps, "expected an instruction");
    in.text = add_str(ps->ir, t->s, t->len);
    if (in.text == UINT32_MAX) return nomem(ps);
    /* base and modifiers */
    const char *s = t->s, *end = t->s + t->len;
    const char *dot = memchr(s, '.', t->len);
    size_t blen = dot ? (size_t)(dot - s) : t->len;
    for (unsigned i = 1; i < CR__B_COUNT; i++)
        if (strlen(base_names[i]) == blen && memcmp(base_names[i], s, blen) == 0) in.base = i;
    while (dot && dot < end) {
        const char *m = dot + 1, *e = m;
        while (e < end && *e != '.')
            e++;
        if (in.nmods == sizeof in.mods) return fail(ps, "too many modifiers");
        in.mods[in.nmods++] = (uint8_t)mod_from(m, (size_t)(e - m));
        dot = e;
    }
    next(ps);
    in.opd = ps->ir->nopds;
    while (!punct(ps, ';')) {
        if (tok(ps)->kind == CR__TK_EOF) return fail(ps, "unterminated instruction");
        if (punct(ps, '[')) {
            if (address_operand(ps)) return ps->rc;
        } else if (punct(ps, '{')) {
            if (list_operand(ps, '}')) return ps->rc;
        } else if (punct(ps, '(')) {
            if (list_operand(ps, ')')) return ps->rc;
        } else {
            cr__opd_t o;
            if (scalar_operand(ps, &o)) return ps->rc;
            if (punct(ps, '|')) { /* d|p */
                o.flags |= CR__OF_PAIR;
                if (push_opd(ps, o)) return ps->rc;
                in.nopd++;
                next(ps);
                if (scalar_operand(ps, &o)) return ps->rc;
            }
            if (push_opd(ps, o)) return ps->rc;
        }
        in.nopd++;
        if (in.nopd > 64) return fail(ps, "too many operands");
        if (punct(ps, ',')) {
            next(ps);
            if (punct(ps, ';')) return fail(ps, "missing operand");
        } else if (!punct(ps, ';') && !punct(ps, '(')) {
            /* call lists may follow without a comma in old PTX */
            return fail(ps, "expected ',' or ';' after an operand");
        }
    }
    next(ps);
    in.npool = (uint16_t)(ps->ir->nopds - in.opd);
    if (CR__PUSH(ps->ir->insns, ps->ir->ninsns, ps->ir->insns_cap, in) != 0) return nomem(ps);
    ps->ir->funcs[ps->func].insn_count++;
    return 0;
}

/* ---- functions ---- */

/* A parameter list: ( .param ..., .param ... ). Variables get consecutive ids. */
static int parse_params(parser_t *ps, uint32_t *first, uint32_t *count, int is_ret, int kernel)
{
    uint64_t offset = 0;
    *first = ps->ir->nvars;
    *count = 0;
    if (expect(ps, '(')) return ps->rc;
    while (!punct(ps, ')')) {
        if (!is(ps, ".param") && !is(ps, ".reg"))
            return fail(ps, "expected .param in a parameter list");
        if (is(ps, ".reg")) return fail(ps, ".reg parameters are not supported");
        next(ps);
        decl_type_t d;
        if (parse_decl_type(ps, &d)) return ps->rc;
        const cr__tok_t *t = tok(ps);
        if (t->kind != CR__TK_WORD) return fail(ps, "expected a parameter name");
        cr__ir_var_t v = {0};
        v.name = add_str(ps->ir, t->s, t->len);
        if (v.name == UINT32_MAX) return nomem(ps);
        next(ps);
        uint64_t n;
        int unsized;
        if (parse_dims(ps, &n, &unsized)) return ps->rc;
        uint32_t es = decl_elem_size(&d);
        v.space = CR__SP_PARAM;
        v.type = (uint8_t)d.type;
        v.align = d.align ? d.align : es ? es : 1;
        v.size = n * es;
        v.func = ps->func;
        v.is_param = 1;
        v.is_ret = (uint8_t)is_ret;
        offset = (offset + v.align - 1) / v.align * v.align;
        v.param_offset = (uint32_t)offset;
        offset += v.size;
        if (offset > UINT32_MAX) return fail(ps, "parameters too large");
        if (CR__PUSH(ps->ir->vars, ps->ir->nvars, ps->ir->vars_cap, v) != 0) return nomem(ps);
        (*count)++;
        if (punct(ps, ',')) next(ps);
    }
    next(ps);
    if (kernel) ps->ir->funcs[ps->func].param_size = (uint32_t)offset;
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

static int parse_dims3(parser_t *ps, uint32_t out[3])
{
    next(ps);
    out[0] = out[1] = out[2] = 1;
    for (int i = 0; i < 3; i++) {
        int kind, fs;
        int64_t v;
        if (tok(ps)->kind != CR__TK_WORD ||
            parse_number(tok(ps)->s, tok(ps)->len, 0, &kind, &v, &fs) != 0 || kind != CR__O_IMM)
            return fail(ps, "bad dimension");
        out[i] = (uint32_t)v;
        next(ps);
        if (!punct(ps, ',')) break;
        next(ps);
    }
    return 0;
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
    if (push_scope(ps)) return ps->rc;
    while (depth > 0) {
        const cr__tok_t *t = tok(ps);
        if (t->kind == CR__TK_EOF) return fail(ps, "unterminated function body");
        if (punct(ps, '{')) {
            depth++;
            if (push_scope(ps)) return ps->rc;
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
        if (t->kind == CR__TK_WORD && t->s[0] == '.') {
            if (is(ps, ".reg")) {
                next(ps);
                if (parse_var_decl(ps, CR__SP_REG, 0)) return ps->rc;
            } else if (is(ps, ".local") || is(ps, ".shared") || is(ps, ".param") ||
                       is(ps, ".const") || is(ps, ".global")) {
                cr__space_t sp = is(ps, ".local")    ? CR__SP_LOCAL
                                 : is(ps, ".shared") ? CR__SP_SHARED
                                 : is(ps, ".param")  ? CR__SP_PARAM
                                 : is(ps, ".const")  ? CR__SP_CONST
                                                     : CR__SP_GLOBAL;
                next(ps);
                if (parse_var_decl(ps, sp, 0)) return ps->rc;
            } else if (is(ps, ".extern")) {
                next(ps);
                if (!is(ps, ".shared")) return fail(ps, "unsupported .extern in a function");
                next(ps);
                if (parse_var_decl(ps, CR__SP_SHARED, 1)) return ps->rc;
            } else if (is(ps, ".loc") || is(ps, ".file")) {
                skip_line(ps);
            } else if (is(ps, ".pragma") || is(ps, ".callprototype")) {
                /* a prototype only describes indirect calls: their callee says it all */
                if (skip_statement(ps)) return ps->rc;
            } else {
                return fail(ps, "unsupported directive '%.*s' in a function", (int)t->len, t->s);
            }
            continue;
        }
        /* a label */
        if (t->kind == CR__TK_WORD && !(t->s[0] == '%')) {
            cr__lex_t save = ps->lx;
            cr__tok_t word = *t;
            next(ps);
            if (punct(ps, ':')) {
                cr__ir_label_t l = {add_str(ps->ir, word.s, word.len),
                                    ps->ir->ninsns - f->insn_first};
                if (l.name == UINT32_MAX) return nomem(ps);
                if (CR__PUSH(ps->ir->labels, ps->ir->nlabels, ps->ir->labels_cap, l) != 0)
                    return nomem(ps);
                f = &ps->ir->funcs[ps->func];
                f->label_count++;
                next(ps);
                continue;
            }
            ps->lx = save;
        }
        if (parse_instruction(ps)) return ps->rc;
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
    if (CR__PUSH(ps->ir->funcs, ps->ir->nfuncs, ps->ir->funcs_cap, fn) != 0) return nomem(ps);
    cr__ir_func_t *f = &ps->ir->funcs[ps->func];
    if (!entry && punct(ps, '(')) {
        uint32_t first, count;
        if (parse_params(ps, &first, &count, 1, 0)) return ps->rc;
        f = &ps->ir->funcs[ps->func];
        f->ret_first = first;
        f->ret_count = count;
    }
    const cr__tok_t *t = tok(ps);
    if (t->kind != CR__TK_WORD) return fail(ps, "expected a function name");
    f->name = add_str(ps->ir, t->s, t->len);
    if (f->name == UINT32_MAX) return nomem(ps);
    next(ps);
    if (punct(ps, '(')) {
        uint32_t first, count;
        if (parse_params(ps, &first, &count, 0, entry)) return ps->rc;
        f = &ps->ir->funcs[ps->func];
        f->param_first = first;
        f->param_count = count;
    }
    /* performance directives and attributes */
    for (;;) {
        f = &ps->ir->funcs[ps->func];
        if (is(ps, ".maxntid")) {
            if (parse_dims3(ps, f->maxntid)) return ps->rc;
        } else if (is(ps, ".reqntid")) {
            if (parse_dims3(ps, f->reqntid)) return ps->rc;
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
            if (skip_statement(ps)) return ps->rc;
        } else {
            break;
        }
    }
    if (punct(ps, ';')) { /* a declaration */
        next(ps);
        ps->func = -1;
        return 0;
    }
    if (!punct(ps, '{')) return fail(ps, "expected '{' or ';' after a function header");
    f = &ps->ir->funcs[ps->func];
    f->has_body = 1;
    ps->nnames = 0;
    ps->nscopes = 0;
    if (push_scope(ps)) return ps->rc;
    if (name_params(ps, f->ret_first, f->ret_count)) return ps->rc;
    f = &ps->ir->funcs[ps->func];
    if (name_params(ps, f->param_first, f->param_count)) return ps->rc;
    if (parse_body(ps)) return ps->rc;
    ps->nnames = 0;
    ps->nscopes = 0;
    ps->func = -1;
    return 0;
}

/* Skips a .section block: the name, then { ... }. */
static int skip_section(parser_t *ps)
{
    next(ps);
    while (tok(ps)->kind != CR__TK_EOF && !punct(ps, '{'))
        next(ps);
    int depth = 0;
    while (tok(ps)->kind != CR__TK_EOF) {
        if (punct(ps, '{')) depth++;
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
    while (tok(ps)->kind != CR__TK_EOF && !ps->rc) {
        const cr__tok_t *t = tok(ps);
        if (t->kind != CR__TK_WORD || t->s[0] != '.') {
            if (punct(ps, ';')) {
                next(ps);
                continue;
            }
            return fail(ps, "unexpected '%.*s' at module scope", (int)t->len, t->s);
        }
        if (is(ps, ".version")) {
            next(ps);
            if (tok(ps)->kind == CR__TK_WORD) {
                ps->ir->version_major = (unsigned)strtoul(tok(ps)->s, NULL, 10);
                const char *d = memchr(tok(ps)->s, '.', tok(ps)->len);
                if (d) ps->ir->version_minor = (unsigned)strtoul(d + 1, NULL, 10);
            }
            skip_line(ps);
        } else if (is(ps, ".target")) {
            next(ps);
            if (tok(ps)->kind == CR__TK_WORD && tok(ps)->len > 3 && !memcmp(tok(ps)->s, "sm_", 3))
                ps->ir->target_sm = (unsigned)strtoul(tok(ps)->s + 3, NULL, 10);
            skip_line(ps);
        } else if (is(ps, ".address_size")) {
            next(ps);
            if (!is(ps, "64")) return fail(ps, "only .address_size 64 is supported");
            next(ps);
        } else if (is(ps, ".file") || is(ps, ".loc")) {
            skip_line(ps);
        } else if (is(ps, ".section")) {
            if (skip_section(ps)) return ps->rc;
        } else if (is(ps, ".pragma")) {
            if (skip_statement(ps)) return ps->rc;
        } else if (is(ps, ".visible") || is(ps, ".weak") || is(ps, ".common")) {
            next(ps);
            continue;
        } else if (is(ps, ".extern")) {
            is_extern = 1;
            next(ps);
            continue;
        } else if (is(ps, ".entry") || is(ps, ".func")) {
            if (parse_function(ps, is(ps, ".entry"), is_extern)) return ps->rc;
        } else if (is(ps, ".global") || is(ps, ".const") || is(ps, ".shared") || is(ps, ".local")) {
            cr__space_t sp = is(ps, ".global")   ? CR__SP_GLOBAL
                             : is(ps, ".const")  ? CR__SP_CONST
                             : is(ps, ".shared") ? CR__SP_SHARED
                                                 : CR__SP_LOCAL;
            next(ps);
            if (parse_var_decl(ps, sp, is_extern)) return ps->rc;
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
    if (err && err_len) err[0] = 0;
    if (add_str(ir, "", 0) == UINT32_MAX) return CR_ENOMEM; /* offset 0: the empty string */
    cr__lex_init(&ps.lx, text, len);
    int rc = parse_module(&ps);
    free(ps.names);
    free(ps.scopes);
    return rc;
}

void cr__ir_free(cr__ir_t *ir)
{
    if (!ir) return;
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
