/* PTX declarations: the kernels (.entry parameter lists, .maxntid/.reqntid, static .shared
 * declared in their bodies) and the module-scope variables (.global, .const, with sizes and
 * initialisers) of a PTX text. This is the only source of kernel layouts for PTX-only builds,
 * so the parameter offsets follow the same rules ptxas uses for the cubin: each parameter is
 * aligned to its .align (arrays of .b8) or its natural size, with no padding after the last.
 *
 * The text is untrusted: a small tokenizer never reads past `len` or a NUL, every number is
 * range-checked, and sizes are computed with overflow checks. Instructions are not parsed;
 * only declarations at the places they can appear are. */
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "image_internal.h"

#define MAX_DIMS 8
/* Bound for a declared variable: larger is more likely a hostile number than a real array. */
#define MAX_VAR_BYTES ((uint64_t)1 << 40)
#define MAX_ALIGN 4096u

typedef enum { TK_EOF, TK_WORD, TK_NUM, TK_PUNCT, TK_STR } tk_kind_t;

typedef struct {
    tk_kind_t kind;
    const char *s;
    size_t len;
} tok_t;

typedef struct {
    const char *p, *end;
    tok_t tok; /* the current token */
} lex_t;

/* A variable or parameter declaration. */
typedef struct {
    unsigned elem;     /* bytes of one scalar */
    char fclass;       /* 'f' float, 'i' integer/bits */
    unsigned vec;      /* .v2/.v4/.v8, else 1 */
    uint64_t align;    /* .align, 0 when not given */
    int opaque;        /* .texref/.samplerref/.surfref: no memory of its own */
    uint64_t dims[MAX_DIMS];
    unsigned ndims;
    int unsized;       /* first dimension written [] */
    tok_t name;
} decl_t;

/* ---- tokens ---- */

static int is_word_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' ||
           c == '%' || c == '.';
}

static int is_word_char(char c)
{
    return is_word_start(c) || (c >= '0' && c <= '9');
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Skips blanks and comments; an unterminated block comment runs to the end. */
static void skip_blank(lex_t *lx)
{
    while (lx->p < lx->end) {
        if (is_space(*lx->p)) {
            lx->p++;
        } else if (lx->end - lx->p >= 2 && lx->p[0] == '/' && lx->p[1] == '/') {
            while (lx->p < lx->end && *lx->p != '\n')
                lx->p++;
        } else if (lx->end - lx->p >= 2 && lx->p[0] == '/' && lx->p[1] == '*') {
            lx->p += 2;
            while (lx->p < lx->end && !(lx->end - lx->p >= 2 && lx->p[0] == '*' && lx->p[1] == '/'))
                lx->p++;
            lx->p = lx->end - lx->p >= 2 ? lx->p + 2 : lx->end;
        } else {
            return;
        }
    }
}

/* Numbers run over letters and digits (0x1F, 0f3F800000, 7U); a decimal one may also carry a
 * signed exponent (1.5e-3). */
static const char *number_end(const char *p, const char *end)
{
    const char *start = p;
    int hexlike = end - p >= 2 && p[0] == '0' && p[1] && strchr("xXfFdDbB", p[1]);

    while (p < end) {
        char c = *p;
        if (is_word_char(c) && c != '%' && c != '$')
            p++;
        else if ((c == '+' || c == '-') && !hexlike && p > start && (p[-1] == 'e' || p[-1] == 'E'))
            p++;
        else
            break;
    }
    return p;
}

static const char *string_end(const char *p, const char *end)
{
    for (p++; p < end && *p != '"'; p++)
        if (*p == '\\' && p + 1 < end)
            p++;
    return p < end ? p + 1 : end;
}

/* Moves to the next token; the text ends at `end` or at a NUL. */
static void next(lex_t *lx)
{
    const char *s, *e;
    tk_kind_t kind;

    skip_blank(lx);
    s = lx->p;
    if (s >= lx->end || *s == 0) {
        lx->tok = (tok_t){TK_EOF, s, 0};
        return;
    }
    if (*s >= '0' && *s <= '9') {
        kind = TK_NUM;
        e = number_end(s, lx->end);
    } else if (is_word_start(*s)) {
        /* A directive ends at the next dot: ".ptr.global.align" is three qualifiers. An
         * instruction ("ld.param.u32") stays one word; nothing here looks inside it. */
        kind = TK_WORD;
        for (e = s + 1; e < lx->end && is_word_char(*e) && !(*s == '.' && *e == '.'); e++)
            ;
    } else if (*s == '"') {
        kind = TK_STR;
        e = string_end(s, lx->end);
    } else {
        kind = TK_PUNCT;
        e = s + 1;
    }
    lx->tok = (tok_t){kind, s, (size_t)(e - s)};
    lx->p = e;
}

static int tok_is(const tok_t *t, const char *word)
{
    size_t n = strlen(word);
    return t->len == n && memcmp(t->s, word, n) == 0;
}

static int tok_punct(const tok_t *t, char c)
{
    return t->kind == TK_PUNCT && t->s[0] == c;
}

/* A name: a word that is not a directive. */
static int tok_is_name(const tok_t *t)
{
    return t->kind == TK_WORD && t->s[0] != '.';
}

/* Consumes the punctuation c or fails. */
static int expect(lex_t *lx, char c)
{
    if (!tok_punct(&lx->tok, c))
        return CR_ECORRUPT;
    next(lx);
    return 0;
}

/* ---- numbers ---- */

static int digit_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return 99;
}

/* Digits of s[0..len) in base; PTX literals are 64-bit, so more is an error. */
static int parse_digits(const char *s, size_t len, unsigned base, uint64_t *v)
{
    *v = 0;
    if (len == 0)
        return CR_ECORRUPT;
    for (size_t i = 0; i < len; i++) {
        int d = digit_value(s[i]);
        if (d >= (int)base || *v > (UINT64_MAX - (unsigned)d) / base)
            return CR_ECORRUPT;
        *v = *v * base + (unsigned)d;
    }
    return 0;
}

/* Integer literal: decimal, 0x hex, 0b binary, leading-0 octal, optional U suffix. */
static int parse_int(const tok_t *t, uint64_t *v)
{
    const char *s = t->s;
    size_t n = t->len;

    if (t->kind != TK_NUM)
        return CR_ECORRUPT;
    if (n > 1 && (s[n - 1] == 'U' || s[n - 1] == 'u'))
        n--;
    if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        return parse_digits(s + 2, n - 2, 16, v);
    if (n > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B'))
        return parse_digits(s + 2, n - 2, 2, v);
    if (n > 1 && s[0] == '0')
        return parse_digits(s + 1, n - 1, 8, v);
    return parse_digits(s, n, 10, v);
}

/* A small count (array dimension, alignment, thread count). */
static int parse_count(lex_t *lx, uint64_t max, uint64_t *v)
{
    int rc = parse_int(&lx->tok, v);

    if (rc == 0 && *v > max)
        rc = CR_ETOOBIG;
    if (rc == 0)
        next(lx);
    return rc;
}

typedef struct {
    int is_float; /* 1: f holds the value; 0: u holds the bits */
    double f;
    uint64_t u;
} num_t;

/* Decimal floating-point literal (1.5, 2e3), through strtod on a bounded copy. The copy
 * uses the locale's decimal point: the client runs inside applications that set one. */
static int parse_decimal_float(const tok_t *t, double *f)
{
    char buf[64], *endp, *dot;

    if (t->len >= sizeof buf)
        return CR_ECORRUPT;
    memcpy(buf, t->s, t->len);
    buf[t->len] = 0;
    dot = strchr(buf, '.');
    if (dot && localeconv()->decimal_point[0])
        *dot = localeconv()->decimal_point[0];
    *f = strtod(buf, &endp);
    return *endp ? CR_ECORRUPT : 0;
}

/* Any PTX numeric literal: integers, 0fXXXXXXXX (f32 bits), 0dXXXXXXXXXXXXXXXX (f64 bits),
 * decimal floats. */
static int parse_number(const tok_t *t, num_t *n)
{
    const char *s = t->s;
    uint64_t bits;

    memset(n, 0, sizeof *n);
    if (t->len == 10 && s[0] == '0' && (s[1] == 'f' || s[1] == 'F')) {
        float f;
        uint32_t b32;
        if (parse_digits(s + 2, 8, 16, &bits))
            return CR_ECORRUPT;
        b32 = (uint32_t)bits;
        memcpy(&f, &b32, sizeof f);
        *n = (num_t){1, f, 0};
        return 0;
    }
    if (t->len == 18 && s[0] == '0' && (s[1] == 'd' || s[1] == 'D')) {
        double d;
        if (parse_digits(s + 2, 16, 16, &bits))
            return CR_ECORRUPT;
        memcpy(&d, &bits, sizeof d);
        *n = (num_t){1, d, 0};
        return 0;
    }
    if (memchr(s, '.', t->len) ||
        (!(t->len > 1 && (s[1] == 'x' || s[1] == 'X')) &&
         (memchr(s, 'e', t->len) || memchr(s, 'E', t->len)))) {
        n->is_float = 1;
        return parse_decimal_float(t, &n->f);
    }
    return parse_int(t, &n->u);
}

/* double -> float without the undefined behaviour of converting an out-of-range value. */
static float to_float(double v)
{
    if (v > FLT_MAX)
        return INFINITY;
    if (v < -FLT_MAX)
        return -INFINITY;
    return (float)v;
}

/* The bytes a scalar of this declaration holds for the literal. */
static uint64_t scalar_bits(const decl_t *d, const num_t *n, int neg)
{
    if (d->fclass == 'f' && d->elem == 4) {
        float f = n->is_float ? to_float(n->f) : (float)n->u;
        uint32_t b;
        f = neg ? -f : f;
        memcpy(&b, &f, sizeof b);
        return b;
    }
    if (d->fclass == 'f' && d->elem == 8) {
        double f = n->is_float ? n->f : (double)n->u;
        uint64_t b;
        f = neg ? -f : f;
        memcpy(&b, &f, sizeof b);
        return b;
    }
    if (n->is_float) /* a float literal for bits: its own encoding */
        return d->elem == 4 ? (uint64_t)scalar_bits(&(decl_t){.elem = 4, .fclass = 'f'}, n, neg)
                            : scalar_bits(&(decl_t){.elem = 8, .fclass = 'f'}, n, neg);
    return neg ? (uint64_t)0 - n->u : n->u;
}

/* ---- types ---- */

typedef struct {
    const char *name;
    unsigned size;
    char fclass;
} type_t;

static const type_t types[] = {
    {".b8", 1, 'i'},     {".u8", 1, 'i'},      {".s8", 1, 'i'},     {".b16", 2, 'i'},
    {".u16", 2, 'i'},    {".s16", 2, 'i'},     {".f16", 2, 'i'},    {".bf16", 2, 'i'},
    {".e4m3x2", 2, 'i'}, {".e5m2x2", 2, 'i'},  {".b32", 4, 'i'},    {".u32", 4, 'i'},
    {".s32", 4, 'i'},    {".f32", 4, 'f'},     {".f16x2", 4, 'i'},  {".bf16x2", 4, 'i'},
    {".tf32", 4, 'i'},   {".b64", 8, 'i'},     {".u64", 8, 'i'},    {".s64", 8, 'i'},
    {".f64", 8, 'f'},    {".b128", 16, 'i'},   {".pred", 1, 'i'},
};

static const type_t *find_type(const tok_t *t)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (tok_is(t, types[i].name))
            return &types[i];
    return NULL;
}

static int is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

/* Skips a balanced ( ... ) group, e.g. .attribute(.managed). */
static int skip_parens(lex_t *lx)
{
    unsigned depth = 0;

    do {
        if (lx->tok.kind == TK_EOF)
            return CR_ECORRUPT;
        if (tok_punct(&lx->tok, '('))
            depth++;
        else if (tok_punct(&lx->tok, ')'))
            depth--;
        next(lx);
    } while (depth);
    return 0;
}

/* One qualifier of a declaration (.align N, .vN, a type, .ptr, ...). `ptr` tells whether
 * .ptr was seen: the .align after it is the pointee's, not the parameter's. */
static int parse_qualifier(lex_t *lx, decl_t *d, int *ptr)
{
    const type_t *ty = find_type(&lx->tok);
    uint64_t v;
    int rc = 0;

    if (ty) {
        d->elem = ty->size;
        d->fclass = ty->fclass;
    } else if (tok_is(&lx->tok, ".align")) {
        next(lx);
        rc = parse_count(lx, UINT32_MAX, &v);
        if (rc == 0 && !is_pow2(v))
            rc = CR_ECORRUPT;
        if (rc == 0 && !*ptr)
            d->align = v;
        return rc;
    } else if (tok_is(&lx->tok, ".v2") || tok_is(&lx->tok, ".v4") || tok_is(&lx->tok, ".v8")) {
        d->vec = (unsigned)(lx->tok.s[2] - '0');
    } else if (tok_is(&lx->tok, ".ptr")) {
        *ptr = 1;
    } else if (tok_is(&lx->tok, ".texref") || tok_is(&lx->tok, ".samplerref") ||
               tok_is(&lx->tok, ".surfref")) {
        d->opaque = 1;
    } else if (tok_is(&lx->tok, ".attribute")) {
        next(lx);
        return tok_punct(&lx->tok, '(') ? skip_parens(lx) : CR_ECORRUPT;
    }
    next(lx); /* other qualifiers (.global after .ptr, .visible...) say nothing of size */
    return 0;
}

/* Qualifiers up to and including the name, then the [dims]. */
static int parse_declarator(lex_t *lx, decl_t *d, int ptr)
{
    int rc = 0;

    while (rc == 0 && lx->tok.kind == TK_WORD && lx->tok.s[0] == '.')
        rc = parse_qualifier(lx, d, &ptr);
    if (rc)
        return rc;
    if (!tok_is_name(&lx->tok) || (!d->elem && !d->opaque))
        return CR_ECORRUPT;
    d->name = lx->tok;
    d->ndims = 0;
    d->unsized = 0;
    next(lx);
    while (tok_punct(&lx->tok, '[')) {
        next(lx);
        if (d->ndims == MAX_DIMS)
            return CR_ECORRUPT;
        if (tok_punct(&lx->tok, ']') && d->ndims == 0) {
            d->unsized = 1;
            d->dims[d->ndims++] = 0;
        } else if ((rc = parse_count(lx, MAX_VAR_BYTES, &d->dims[d->ndims++])) != 0) {
            return rc;
        }
        if ((rc = expect(lx, ']')) != 0)
            return rc;
    }
    return 0;
}

/* Scalars spanned by one element of dimension `from` and everything inside it. */
static int span_from(const decl_t *d, unsigned from, uint64_t *n)
{
    uint64_t v = d->vec;

    for (unsigned i = from; i < d->ndims; i++) {
        if (d->dims[i] && v > MAX_VAR_BYTES / d->dims[i])
            return CR_ETOOBIG;
        v *= d->dims[i];
    }
    *n = v;
    return 0;
}

/* Total bytes of the declaration (0 for an unsized array). */
static int decl_bytes(const decl_t *d, uint64_t *bytes)
{
    uint64_t n;
    int rc = span_from(d, 0, &n);

    if (rc)
        return rc;
    if (n > MAX_VAR_BYTES / (d->elem ? d->elem : 1))
        return CR_ETOOBIG;
    *bytes = n * d->elem;
    return 0;
}

static uint64_t decl_align(const decl_t *d)
{
    return d->align ? d->align : (uint64_t)d->elem * d->vec;
}

/* ---- initialisers ---- */

typedef struct {
    const decl_t *d;
    uint8_t *buf;
    uint64_t cap;   /* bytes allocated */
    uint64_t limit; /* scalars the object holds (UINT64_MAX while unsized) */
    uint64_t index; /* next scalar */
    uint64_t used;  /* scalars written or skipped so far (high-water mark) */
} init_t;

static int init_reserve(init_t *in, uint64_t scalars)
{
    uint64_t need = scalars * in->d->elem, ncap;
    uint8_t *n;

    if (need <= in->cap)
        return 0;
    if (need > CR_IMAGE_MAX_SIZE)
        return CR_ETOOBIG;
    ncap = in->cap ? in->cap : 64;
    while (ncap < need)
        ncap *= 2;
    n = realloc(in->buf, ncap);
    if (!n)
        return CR_ENOMEM;
    memset(n + in->cap, 0, ncap - in->cap);
    in->buf = n;
    in->cap = ncap;
    return 0;
}

static int init_store(init_t *in, uint64_t bits, uint64_t end)
{
    int rc;

    if (in->index >= end || in->index >= in->limit)
        return CR_ECORRUPT; /* more initialisers than elements */
    rc = init_reserve(in, in->index + 1);
    if (rc)
        return rc;
    for (unsigned i = 0; i < in->d->elem && i < 8; i++)
        in->buf[in->index * in->d->elem + i] = (uint8_t)(bits >> (8 * i));
    in->index++;
    if (in->index > in->used)
        in->used = in->index;
    return 0;
}

/* One scalar: a number, or an address expression (symbol, generic(symbol), symbol+N) that
 * only the loader can resolve: those keep zero bytes. */
static int init_scalar(lex_t *lx, init_t *in, uint64_t end)
{
    int neg = 0;
    num_t n = {0};

    if (tok_punct(&lx->tok, '-')) {
        neg = 1;
        next(lx);
    }
    if (lx->tok.kind == TK_NUM) {
        if (parse_number(&lx->tok, &n))
            return CR_ECORRUPT;
        next(lx);
        return init_store(in, scalar_bits(in->d, &n, neg), end);
    }
    if (lx->tok.kind != TK_WORD || neg)
        return CR_ECORRUPT;
    next(lx);
    if (tok_punct(&lx->tok, '(')) {
        int rc = skip_parens(lx);
        if (rc)
            return rc;
    }
    while (tok_punct(&lx->tok, '+') || tok_punct(&lx->tok, '-')) {
        next(lx);
        if (lx->tok.kind != TK_NUM)
            return CR_ECORRUPT;
        next(lx);
    }
    return init_store(in, 0, end);
}

/* { item, item, ... } at brace level `level` (1: the whole object). An inner list fills
 * one element of dimension level-2 and the rest of that element stays zero. */
static int init_list(lex_t *lx, init_t *in, unsigned level)
{
    uint64_t start = in->index, span, end;
    int rc;

    if (level > in->d->ndims + 1 || (rc = span_from(in->d, level - 1, &span)) != 0)
        return CR_ECORRUPT;
    end = level == 1 && in->d->unsized ? UINT64_MAX : start + span;
    next(lx); /* '{' */
    for (;;) {
        if (tok_punct(&lx->tok, '{'))
            rc = init_list(lx, in, level + 1);
        else
            rc = init_scalar(lx, in, end);
        if (rc)
            return rc;
        if (!tok_punct(&lx->tok, ','))
            break;
        next(lx);
    }
    rc = expect(lx, '}');
    if (rc == 0 && end != UINT64_MAX)
        in->index = end;
    return rc;
}

/* Parses "= value" or "= { ... }" into g->init and, for unsized arrays, g->size. */
static int parse_init(lex_t *lx, const decl_t *d, cr_global_info_t *g)
{
    init_t in = {d, NULL, 0, UINT64_MAX, 0, 0};
    uint64_t row;
    int rc;

    if (d->elem == 0 || d->opaque)
        return CR_ECORRUPT;
    if (!d->unsized)
        in.limit = g->size / d->elem;
    next(lx); /* '=' */
    if (tok_punct(&lx->tok, '{'))
        rc = init_list(lx, &in, 1);
    else
        rc = init_scalar(lx, &in, 1);
    if (rc == 0 && d->unsized) {
        /* The first dimension is as long as the initialiser needs, in whole rows. */
        rc = span_from(d, 1, &row);
        if (rc == 0)
            g->size = (in.used + row - 1) / row * row * d->elem;
    }
    if (rc == 0)
        rc = init_reserve(&in, g->size / d->elem);
    if (rc)
        goto fail;
    g->init = in.buf;
    return 0;
fail:
    free(in.buf);
    return rc;
}

/* Drops an all-zero initialiser: zero-initialised globals have init == NULL. */
static void drop_zero_init(cr_global_info_t *g)
{
    for (uint64_t i = 0; i < g->size; i++)
        if (g->init[i])
            return;
    free((void *)(uintptr_t)g->init);
    g->init = NULL;
}

/* ---- module-scope variables ---- */

/* Parses the rest of one declarator (its initialiser) and keeps the variable if asked. */
static int add_variable(cr__builder_t *b, lex_t *lx, const decl_t *d, int is_const, int keep)
{
    cr_global_info_t g = {0};
    int rc = decl_bytes(d, &g.size);

    if (rc == 0 && tok_punct(&lx->tok, '='))
        rc = parse_init(lx, d, &g);
    if (rc || !keep || d->opaque)
        goto out;
    if (g.init)
        drop_zero_init(&g);
    g.is_const = is_const;
    g.name = strndup(d->name.s, d->name.len);
    if (!g.name) {
        rc = CR_ENOMEM;
        goto out;
    }
    return cr__builder_add_global(b, &g);
out:
    cr__global_clear(&g);
    return rc;
}

/* .global/.const at module scope (the state-space word is the current token). `keep` is 0
 * for .extern declarations, whose storage is elsewhere. */
static int parse_module_var(cr__builder_t *b, lex_t *lx, int keep)
{
    int is_const = tok_is(&lx->tok, ".const");
    decl_t d = {.vec = 1};
    int rc;

    next(lx);
    do {
        if (tok_punct(&lx->tok, ','))
            next(lx);
        rc = parse_declarator(lx, &d, 0);
        if (rc == 0)
            rc = add_variable(b, lx, &d, is_const, keep);
    } while (rc == 0 && tok_punct(&lx->tok, ','));
    return rc ? rc : expect(lx, ';');
}

/* ---- kernels ---- */

static int add_param(cr_kernel_info_t *k, uint32_t *cap, uint64_t *off, const decl_t *d)
{
    uint64_t size, align = decl_align(d);
    int rc = decl_bytes(d, &size);

    if (rc)
        return rc;
    if (d->opaque || d->unsized || !is_pow2(align) || align > MAX_ALIGN)
        return CR_ECORRUPT;
    *off = (*off + align - 1) & ~(align - 1);
    if (size > UINT32_MAX || *off > UINT32_MAX - size)
        return CR_ECORRUPT;
    if (k->param_count == *cap) {
        uint32_t ncap = *cap ? *cap * 2 : 8;
        cr_param_t *n = ncap > *cap ? realloc(k->params, ncap * sizeof *n) : NULL;
        if (!n)
            return CR_ENOMEM;
        k->params = n;
        *cap = ncap;
    }
    k->params[k->param_count++] = (cr_param_t){(uint32_t)*off, (uint32_t)size};
    *off += size;
    return 0;
}

/* ( .param ..., .param ... ) after the entry name. */
static int parse_params(lex_t *lx, cr_kernel_info_t *k)
{
    uint32_t cap = 0;
    uint64_t off = 0;
    int rc = 0;

    next(lx); /* '(' */
    while (rc == 0 && !tok_punct(&lx->tok, ')')) {
        decl_t d = {.vec = 1};
        if (!tok_is(&lx->tok, ".param"))
            return CR_ECORRUPT;
        next(lx);
        rc = parse_declarator(lx, &d, 0);
        if (rc == 0)
            rc = add_param(k, &cap, &off, &d);
        if (rc == 0 && tok_punct(&lx->tok, ','))
            next(lx);
        else if (rc == 0 && !tok_punct(&lx->tok, ')'))
            rc = CR_ECORRUPT;
    }
    if (rc == 0)
        next(lx);
    k->param_size = (uint32_t)off;
    return rc;
}

/* .maxntid x[, y[, z]] or .reqntid: the product is the block size limit. */
static int parse_ntid(lex_t *lx, cr_kernel_info_t *k)
{
    uint64_t n = 1, v;
    int rc;

    next(lx);
    for (int i = 0; i < 3; i++) {
        if (i && !tok_punct(&lx->tok, ','))
            break;
        if (i)
            next(lx);
        rc = parse_count(lx, UINT32_MAX, &v);
        if (rc)
            return rc;
        n = n * v > UINT32_MAX ? UINT32_MAX : n * v;
    }
    k->max_threads_per_block = (uint32_t)n;
    return 0;
}

/* .pragma "..."; — its ';' does not end the entry header. */
static void skip_pragma(lex_t *lx)
{
    while (lx->tok.kind != TK_EOF && !tok_punct(&lx->tok, ';') && !tok_punct(&lx->tok, '{'))
        next(lx);
    if (tok_punct(&lx->tok, ';'))
        next(lx);
}

/* After the parameters: performance directives up to '{' (a body) or ';' (a prototype). */
static int parse_entry_directives(lex_t *lx, cr_kernel_info_t *k)
{
    for (;;) {
        int rc = 0;
        if (lx->tok.kind == TK_EOF)
            return CR_ECORRUPT;
        if (tok_punct(&lx->tok, '{') || tok_punct(&lx->tok, ';'))
            return 0;
        if (tok_is(&lx->tok, ".maxntid") || tok_is(&lx->tok, ".reqntid"))
            rc = parse_ntid(lx, k);
        else if (tok_is(&lx->tok, ".pragma"))
            skip_pragma(lx);
        else
            next(lx);
        if (rc)
            return rc;
    }
}

/* ".entry name (params) directives" with the current token on .entry. Leaves the token on
 * '{' or ';'. */
static int parse_entry_header(lex_t *lx, cr_kernel_info_t *k)
{
    int rc = 0;

    next(lx);
    if (!tok_is_name(&lx->tok))
        return CR_ECORRUPT;
    k->name = strndup(lx->tok.s, lx->tok.len);
    if (!k->name)
        return CR_ENOMEM;
    next(lx);
    if (tok_punct(&lx->tok, '('))
        rc = parse_params(lx, k);
    return rc ? rc : parse_entry_directives(lx, k);
}

/* ---- static shared memory ---- */

/* ptxas gives a kernel the .shared variables declared in its body plus the module-scope ones
 * (where nvcc hoists the `static __shared__` variables of device functions) that its body,
 * or any function it calls, names. So the module keeps a table of module-scope .shared
 * variables and of functions, records which of them each body names, and sizes each
 * kernel's static shared memory once the whole text has been read. */

typedef struct {
    uint32_t *v;
    uint32_t n, cap;
} refs_t;

typedef struct {
    const char *name;
    uint32_t len;
    int is_func;
    uint64_t size, align; /* a .shared variable */
    refs_t refs;          /* a function: the symbols its body names */
    uint32_t named_by;    /* the body that last named it, so each body lists it once */
    uint32_t reached_by;  /* the kernel whose closure last reached it */
} sym_t;

typedef struct {
    cr_kernel_info_t k;
    refs_t refs;
} pending_t;

enum { BODY_NONE, BODY_KERNEL, BODY_FUNC };

/* Work bound for the closures: far above real modules, below what hurts a server. */
#define CLOSURE_WORK_MAX ((uint64_t)1 << 26)

typedef struct {
    cr__builder_t *b;
    lex_t lx;
    unsigned braces, parens;
    int is_extern; /* .extern seen in the current statement */
    sym_t *syms;
    uint32_t nsyms, capsyms;
    uint32_t *slots; /* hash table of sym index + 1; 0 is empty */
    uint32_t nslots;
    pending_t *kernels;
    uint32_t nkernels, capkernels;
    int body_kind; /* the body being read: BODY_* and the index of its owner */
    uint32_t body_index, body_id;
    uint64_t dyn_align; /* largest alignment of a module-scope .extern .shared */
} module_t;

/* Room for one more element in an array of `count` used out of *cap. */
static int grow_array(void **arr, uint32_t count, uint32_t *cap, size_t elsize)
{
    uint32_t ncap;
    void *n;

    if (count < *cap)
        return 0;
    if (*cap >= UINT32_MAX / 4)
        return CR_ETOOBIG;
    ncap = *cap ? *cap * 2 : 16;
    n = realloc(*arr, (size_t)ncap * elsize);
    if (!n)
        return CR_ENOMEM;
    *arr = n;
    *cap = ncap;
    return 0;
}

static int refs_add(refs_t *r, uint32_t v)
{
    void *arr = r->v;
    int rc = grow_array(&arr, r->n, &r->cap, sizeof *r->v);

    r->v = arr;
    if (rc == 0)
        r->v[r->n++] = v;
    return rc;
}

static uint32_t name_hash(const char *s, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* The slot that holds `name`, or the empty slot where it would go. */
static uint32_t *sym_slot(const module_t *m, const char *name, size_t len)
{
    uint32_t mask = m->nslots - 1, i = name_hash(name, len) & mask;

    for (;; i = (i + 1) & mask) {
        uint32_t *slot = &m->slots[i];
        const sym_t *s = *slot ? &m->syms[*slot - 1] : NULL;
        if (!s || (s->len == len && memcmp(s->name, name, len) == 0))
            return slot;
    }
}

static int rehash(module_t *m)
{
    uint32_t n = m->nslots ? m->nslots * 2 : 64;
    uint32_t *old = m->slots;

    if (n > UINT32_MAX / 8)
        return CR_ETOOBIG;
    m->slots = calloc(n, sizeof *m->slots);
    if (!m->slots) {
        m->slots = old;
        return CR_ENOMEM;
    }
    m->nslots = n;
    for (uint32_t i = 0; i < m->nsyms; i++)
        *sym_slot(m, m->syms[i].name, m->syms[i].len) = i + 1;
    free(old);
    return 0;
}

static sym_t *sym_find(module_t *m, const tok_t *name)
{
    uint32_t slot;

    if (!m->nslots)
        return NULL;
    slot = *sym_slot(m, name->s, name->len);
    return slot ? &m->syms[slot - 1] : NULL;
}

/* Adds a symbol, or finds it when declared before (a prototype, then the definition). */
static int sym_add(module_t *m, const tok_t *name, int is_func, uint32_t *index)
{
    void *arr = m->syms;
    uint32_t *slot;
    int rc = 0;

    if (name->len > UINT32_MAX)
        return CR_ETOOBIG;
    if (m->nslots == 0 || (m->nsyms + 1) * 2 > m->nslots)
        rc = rehash(m);
    if (rc == 0)
        rc = grow_array(&arr, m->nsyms, &m->capsyms, sizeof *m->syms);
    m->syms = arr;
    if (rc)
        return rc;
    slot = sym_slot(m, name->s, name->len);
    if (!*slot) {
        m->syms[m->nsyms] = (sym_t){.name = name->s, .len = (uint32_t)name->len};
        m->syms[m->nsyms].is_func = is_func;
        *slot = ++m->nsyms;
    }
    *index = *slot - 1;
    return 0;
}

/* The reference list of the body being read. */
static refs_t *body_refs(module_t *m)
{
    if (m->body_kind == BODY_KERNEL)
        return &m->kernels[m->body_index].refs;
    if (m->body_kind == BODY_FUNC)
        return &m->syms[m->body_index].refs;
    return NULL;
}

/* A name in a body: remember it when it is a module-scope .shared variable or a function. */
static int note_name(module_t *m, const tok_t *t)
{
    sym_t *s = sym_find(m, t);
    refs_t *r = body_refs(m);

    if (!s || !r || s->named_by == m->body_id)
        return 0;
    s->named_by = m->body_id;
    return refs_add(r, (uint32_t)(s - m->syms));
}

static void enter_body(module_t *m, int kind, uint32_t index)
{
    m->body_kind = kind;
    m->body_index = index;
    m->body_id++;
}

/* Puts a .shared variable at the next offset its alignment allows. */
static int place_shared(cr_kernel_info_t *k, uint64_t size, uint64_t align)
{
    uint64_t off = k->static_shared_bytes;

    if (!is_pow2(align) || align > MAX_ALIGN)
        return CR_ECORRUPT;
    off = (off + align - 1) & ~(align - 1);
    if (size > UINT32_MAX - off)
        return CR_ETOOBIG;
    k->static_shared_bytes = (uint32_t)(off + size);
    return 0;
}

/* One .shared declaration (the current token is .shared): in a kernel body it takes its
 * place at once; at module scope it goes into the table. Dynamic ones (.extern, []) are
 * sized at launch and count for nothing here. */
static int on_shared(module_t *m)
{
    decl_t d = {.vec = 1};
    uint64_t size;
    uint32_t index;
    int rc;

    next(&m->lx);
    rc = parse_declarator(&m->lx, &d, 0);
    if (rc == 0)
        rc = decl_bytes(&d, &size);
    if (rc == 0 && m->braces == 0 && m->is_extern && !d.opaque && decl_align(&d) > m->dyn_align)
        m->dyn_align = decl_align(&d);
    if (rc || m->is_extern || d.unsized || d.opaque)
        return rc;
    if (m->braces == 0) {
        rc = sym_add(m, &d.name, 0, &index);
        if (rc == 0 && !m->syms[index].is_func) {
            m->syms[index].size = size;
            m->syms[index].align = decl_align(&d);
        }
        return rc;
    }
    if (m->body_kind != BODY_KERNEL)
        return 0;
    return place_shared(&m->kernels[m->body_index].k, size, decl_align(&d));
}

static int by_index(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Everything the kernel reaches through the functions it names; the .shared variables of
 * that go after its own, in declaration order. `stack` and `found` hold nsyms entries. */
static int size_kernel_shared(module_t *m, uint32_t ki, uint32_t *stack, uint32_t *found,
                              uint64_t *work)
{
    pending_t *p = &m->kernels[ki];
    uint32_t top = 0, nfound = 0;
    int rc = 0;

    for (uint32_t i = 0; i < p->refs.n; i++) {
        sym_t *s = &m->syms[p->refs.v[i]];
        if (s->reached_by != ki + 1) {
            s->reached_by = ki + 1;
            stack[top++] = p->refs.v[i];
        }
    }
    while (top) {
        sym_t *s = &m->syms[stack[--top]];
        if (++*work > CLOSURE_WORK_MAX)
            return CR_ETOOBIG;
        if (!s->is_func) {
            found[nfound++] = (uint32_t)(s - m->syms);
            continue;
        }
        for (uint32_t i = 0; i < s->refs.n; i++) {
            sym_t *t = &m->syms[s->refs.v[i]];
            *work += 1;
            if (t->reached_by != ki + 1) {
                t->reached_by = ki + 1;
                stack[top++] = s->refs.v[i];
            }
        }
    }
    qsort(found, nfound, sizeof *found, by_index);
    for (uint32_t i = 0; i < nfound && rc == 0; i++)
        rc = place_shared(&p->k, m->syms[found[i]].size, m->syms[found[i]].align);
    /* ptxas ends the static part where dynamic shared memory may start: at the alignment
     * of the module's .extern .shared arrays (measured: 264 bytes become 272 with align 16). */
    if (rc == 0 && p->k.static_shared_bytes && m->dyn_align > 1)
        rc = place_shared(&p->k, 0, m->dyn_align);
    return rc;
}

/* Completes every kernel's shared memory and hands the kernels to the builder. */
static int finish_kernels(module_t *m)
{
    uint32_t *stack = malloc(((size_t)m->nsyms + 1) * 2 * sizeof *stack);
    uint64_t work = 0;
    int rc = 0;

    if (!stack)
        return CR_ENOMEM;
    for (uint32_t i = 0; i < m->nkernels && rc == 0; i++)
        rc = size_kernel_shared(m, i, stack, stack + m->nsyms + 1, &work);
    for (uint32_t i = 0; i < m->nkernels && rc == 0; i++) {
        rc = cr__builder_add_kernel(m->b, &m->kernels[i].k);
        memset(&m->kernels[i].k, 0, sizeof m->kernels[i].k); /* the builder owns it now */
    }
    free(stack);
    return rc;
}

static void module_free(module_t *m)
{
    for (uint32_t i = 0; i < m->nkernels; i++) {
        cr__kernel_clear(&m->kernels[i].k);
        free(m->kernels[i].refs.v);
    }
    for (uint32_t i = 0; i < m->nsyms; i++)
        free(m->syms[i].refs.v);
    free(m->kernels);
    free(m->syms);
    free(m->slots);
}

/* ---- the module ---- */

/* .entry: the kernel waits in m->kernels until the end of the text (see finish_kernels). */
static int on_entry(module_t *m)
{
    cr_kernel_info_t k = {0};
    void *arr = m->kernels;
    int rc = parse_entry_header(&m->lx, &k);

    if (rc || !tok_punct(&m->lx.tok, '{'))
        goto out; /* an error, or a prototype */
    rc = grow_array(&arr, m->nkernels, &m->capkernels, sizeof *m->kernels);
    m->kernels = arr;
    if (rc)
        goto out;
    m->kernels[m->nkernels] = (pending_t){k, {0}};
    enter_body(m, BODY_KERNEL, m->nkernels++);
    return 0;
out:
    cr__kernel_clear(&k);
    return rc;
}

/* .func [(returns)] name [(params)] [directives] then '{' or ';'. */
static int on_func(module_t *m)
{
    lex_t *lx = &m->lx;
    uint32_t index;
    tok_t name;
    int rc = 0;

    next(lx);
    if (tok_punct(&lx->tok, '(') && (rc = skip_parens(lx)) != 0)
        return rc;
    if (!tok_is_name(&lx->tok))
        return CR_ECORRUPT;
    name = lx->tok;
    next(lx);
    if (tok_punct(&lx->tok, '(') && (rc = skip_parens(lx)) != 0)
        return rc;
    while (lx->tok.kind != TK_EOF && !tok_punct(&lx->tok, '{') && !tok_punct(&lx->tok, ';')) {
        if (tok_is(&lx->tok, ".pragma"))
            skip_pragma(lx);
        else
            next(lx);
    }
    rc = sym_add(m, &name, 1, &index);
    if (rc == 0 && tok_punct(&lx->tok, '{') && m->syms[index].is_func)
        enter_body(m, BODY_FUNC, index);
    return rc;
}

/* Brackets and statement ends. */
static int on_punct(module_t *m)
{
    char c = m->lx.tok.s[0];

    if (c == ';' || c == '{' || c == '}')
        m->is_extern = 0;
    if ((c == '}' && m->braces == 0) || (c == ')' && m->parens == 0))
        return CR_ECORRUPT;
    if (c == '{')
        m->braces++;
    else if (c == '(')
        m->parens++;
    else if (c == ')')
        m->parens--;
    else if (c == '}' && --m->braces == 0)
        m->body_kind = BODY_NONE;
    return 0;
}

/* A directive word at module scope (outside braces and parentheses). */
static int on_top_directive(module_t *m)
{
    const tok_t *t = &m->lx.tok;
    int rc;

    if (tok_is(t, ".entry"))
        return on_entry(m);
    if (tok_is(t, ".func"))
        return on_func(m);
    if (tok_is(t, ".global") || tok_is(t, ".const")) {
        rc = parse_module_var(m->b, &m->lx, !m->is_extern);
        m->is_extern = 0;
        return rc;
    }
    next(&m->lx);
    return 0;
}

/* One step: handles the current token and moves past what it consumed. */
static int step(module_t *m)
{
    tok_t *t = &m->lx.tok;
    int rc = 0;

    if (t->kind == TK_PUNCT) {
        rc = on_punct(m);
        next(&m->lx);
        return rc;
    }
    if (t->kind != TK_WORD || m->parens) {
        next(&m->lx);
        return 0;
    }
    if (tok_is(t, ".extern")) {
        m->is_extern = 1;
    } else if (tok_is(t, ".shared")) {
        return on_shared(m);
    } else if (m->braces == 0 && t->s[0] == '.') {
        return on_top_directive(m);
    } else if (m->braces && t->s[0] != '.') {
        rc = note_name(m, t);
    }
    next(&m->lx);
    return rc;
}

int cr__ptx_collect(cr__builder_t *b, const char *text, size_t len)
{
    module_t m = {.b = b, .lx = {text, text + len, {TK_EOF, text, 0}}};
    int rc = 0;

    next(&m.lx);
    /* Every PTX module starts with .version: anything else is not PTX. */
    if (!tok_is(&m.lx.tok, ".version"))
        return CR_ECORRUPT;
    while (rc == 0 && m.lx.tok.kind != TK_EOF)
        rc = step(&m);
    if (rc == 0 && (m.braces || m.parens))
        rc = CR_ECORRUPT; /* truncated */
    if (rc == 0)
        rc = finish_kernels(&m);
    module_free(&m);
    return rc;
}

unsigned cr__ptx_arch(const char *text, size_t len, char *suffix)
{
    lex_t lx = {text, text + len, {TK_EOF, text, 0}};
    unsigned arch = 0;
    size_t i;

    *suffix = 0;
    for (next(&lx); lx.tok.kind != TK_EOF; next(&lx)) {
        if (!tok_is(&lx.tok, ".target"))
            continue;
        next(&lx);
        if (lx.tok.kind != TK_WORD || lx.tok.len < 4 || memcmp(lx.tok.s, "sm_", 3) != 0)
            return 0;
        for (i = 3; i < lx.tok.len && i < 8 && lx.tok.s[i] >= '0' && lx.tok.s[i] <= '9'; i++)
            arch = arch * 10 + (unsigned)(lx.tok.s[i] - '0');
        if (i + 1 == lx.tok.len && (lx.tok.s[i] == 'a' || lx.tok.s[i] == 'f'))
            *suffix = lx.tok.s[i];
        return arch;
    }
    return 0;
}
