/* PTX variable and parameter declarations (see ptx_var.h): declarators, sizes and
 * alignments, initialisers, parameter lists. Trusts nothing in the text: every number is
 * range-checked and every size is computed with overflow checks. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "ptx_var.h"

/* ---- qualifiers ---- */

typedef struct {
    const char *name;
    unsigned size;
    int is_float;
} type_t;

static const type_t types[] = {
    {".b8", 1, 0},     {".u8", 1, 0},    {".s8", 1, 0},    {".b16", 2, 0},    {".u16", 2, 0},
    {".s16", 2, 0},    {".f16", 2, 0},   {".bf16", 2, 0},  {".e4m3x2", 2, 0}, {".e5m2x2", 2, 0},
    {".b32", 4, 0},    {".u32", 4, 0},   {".s32", 4, 0},   {".f32", 4, 1},    {".f16x2", 4, 0},
    {".bf16x2", 4, 0}, {".u16x2", 4, 0}, {".s16x2", 4, 0}, {".tf32", 4, 0},   {".b64", 8, 0},
    {".u64", 8, 0},    {".s64", 8, 0},   {".f64", 8, 1},   {".b128", 16, 0},  {".pred", 1, 0},
};

/* State spaces may repeat inside a declaration (.ptr .global); they say nothing of size. */
static const char *const spaces[] = {".global", ".shared", ".local",
                                     ".const",  ".param",  ".unified"};

static const type_t *find_type(const cr__ptx_tok_t *t)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (cr__ptx_is(t, types[i].name))
            return &types[i];
    return NULL;
}

static int is_space_word(const cr__ptx_tok_t *t)
{
    for (size_t i = 0; i < sizeof spaces / sizeof spaces[0]; i++)
        if (cr__ptx_is(t, spaces[i]))
            return 1;
    return 0;
}

static int is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

/* ".align N" with the current token on .align. `ptr`: the .align is the pointee's. */
static int parse_align(cr__ptx_lex_t *lx, cr__ptx_decl_t *d, int ptr)
{
    uint64_t v;

    cr__ptx_next(lx);
    if (cr__ptx_count(lx, UINT32_MAX, &v) != 0 || !is_pow2(v))
        return cr__ptx_fail(lx, CR_ECORRUPT, "bad .align value");
    if (!ptr)
        d->align = v;
    return 0;
}

/* One qualifier. `ptr` tells whether .ptr was seen: what follows it describes the pointee. */
static int parse_qualifier(cr__ptx_lex_t *lx, cr__ptx_decl_t *d, int *ptr)
{
    const cr__ptx_tok_t *t = &lx->tok;
    const type_t *ty = find_type(t);

    if (ty) {
        d->type = *t;
        d->elem = ty->size;
        d->is_float = ty->is_float;
    } else if (cr__ptx_is(t, ".align")) {
        return parse_align(lx, d, *ptr);
    } else if (cr__ptx_is(t, ".v2") || cr__ptx_is(t, ".v4") || cr__ptx_is(t, ".v8")) {
        d->vec = (unsigned)(t->s[2] - '0');
    } else if (cr__ptx_is(t, ".ptr")) {
        *ptr = 1;
    } else if (cr__ptx_is(t, ".texref") || cr__ptx_is(t, ".samplerref") ||
               cr__ptx_is(t, ".surfref")) {
        d->opaque = 1;
    } else if (cr__ptx_is(t, ".attribute")) {
        cr__ptx_next(lx);
        if (!cr__ptx_punct(&lx->tok, '('))
            return cr__ptx_fail(lx, CR_ECORRUPT, "expected '(' after .attribute");
        return cr__ptx_skip_parens(lx);
    } else if (!*ptr && !is_space_word(t) && d->unknown.kind == CR__PTX_EOF) {
        d->unknown = *t;
    }
    cr__ptx_next(lx);
    return 0;
}

int cr__ptx_decl_quals(cr__ptx_lex_t *lx, cr__ptx_decl_t *d)
{
    int ptr = 0, rc = 0;

    if (!d->vec)
        d->vec = 1;
    while (rc == 0 && lx->tok.kind == CR__PTX_WORD && lx->tok.s[0] == '.')
        rc = parse_qualifier(lx, d, &ptr);
    if (rc == 0 && !d->elem && !d->opaque)
        rc = cr__ptx_fail(lx, CR_ECORRUPT, "declaration without a type");
    return rc;
}

/* One "[N]" or "[]" (only first) after the name. */
static int parse_dim(cr__ptx_lex_t *lx, cr__ptx_decl_t *d)
{
    int rc;

    cr__ptx_next(lx); /* '[' */
    if (d->ndims == CR__PTX_MAX_DIMS)
        return cr__ptx_fail(lx, CR_ECORRUPT, "too many array dimensions");
    if (cr__ptx_punct(&lx->tok, ']') && d->ndims == 0) {
        d->unsized = 1;
        d->dims[d->ndims++] = 0;
    } else if ((rc = cr__ptx_count(lx, CR__PTX_MAX_VAR_BYTES, &d->dims[d->ndims++])) != 0) {
        return cr__ptx_fail(lx, rc, rc == CR_ETOOBIG ? "array too large" : "bad array size");
    }
    return cr__ptx_expect(lx, ']');
}

int cr__ptx_decl_name(cr__ptx_lex_t *lx, cr__ptx_decl_t *d)
{
    int rc = 0;
    uint64_t bytes;

    if (!cr__ptx_is_name(&lx->tok))
        return cr__ptx_fail(lx, CR_ECORRUPT, "expected a name");
    d->name = lx->tok;
    d->ndims = 0;
    d->unsized = 0;
    cr__ptx_next(lx);
    while (rc == 0 && cr__ptx_punct(&lx->tok, '['))
        rc = parse_dim(lx, d);
    if (rc == 0 && cr__ptx_decl_bytes(d, &bytes) != 0)
        rc = cr__ptx_fail(lx, CR_ETOOBIG, "array too large");
    return rc;
}

int cr__ptx_declarator(cr__ptx_lex_t *lx, cr__ptx_decl_t *d)
{
    int rc = cr__ptx_decl_quals(lx, d);
    return rc ? rc : cr__ptx_decl_name(lx, d);
}

/* ---- size and alignment ---- */

/* Scalars spanned by one element of dimension `from` and everything inside it. */
static int span_from(const cr__ptx_decl_t *d, unsigned from, uint64_t *n)
{
    uint64_t v = d->vec ? d->vec : 1;

    for (unsigned i = from; i < d->ndims; i++) {
        if (d->dims[i] && v > CR__PTX_MAX_VAR_BYTES / d->dims[i])
            return CR_ETOOBIG;
        v *= d->dims[i];
    }
    *n = v;
    return 0;
}

int cr__ptx_decl_bytes(const cr__ptx_decl_t *d, uint64_t *bytes)
{
    uint64_t n;
    int rc = span_from(d, 0, &n);

    if (rc)
        return rc;
    if (n > CR__PTX_MAX_VAR_BYTES / (d->elem ? d->elem : 1))
        return CR_ETOOBIG;
    *bytes = n * d->elem;
    return 0;
}

uint64_t cr__ptx_decl_align(const cr__ptx_decl_t *d)
{
    return d->align ? d->align : (uint64_t)d->elem * (d->vec ? d->vec : 1);
}

/* ---- initialisers ---- */

typedef struct {
    const cr__ptx_decl_t *d;
    uint8_t *buf;
    uint64_t cap;   /* bytes allocated */
    uint64_t limit; /* scalars the object holds (UINT64_MAX while unsized) */
    uint64_t index; /* next scalar */
    uint64_t used;  /* scalars written or skipped so far (high-water mark) */
    cr__ptx_addr_fn on_addr;
    void *user;
} init_t;

static int init_reserve(init_t *in, uint64_t scalars)
{
    uint64_t need, ncap;
    uint8_t *n;

    if (scalars > CR_IMAGE_MAX_SIZE / in->d->elem)
        return CR_ETOOBIG;
    need = scalars * in->d->elem;
    if (need <= in->cap)
        return 0;
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

/* Stores one scalar's bits at the next index, before `end` (the end of the innermost list). */
static int init_store(cr__ptx_lex_t *lx, init_t *in, uint64_t bits, uint64_t end)
{
    int rc;

    if (in->index >= end || in->index >= in->limit)
        return cr__ptx_fail(lx, CR_ECORRUPT, "too many initialisers");
    rc = init_reserve(in, in->index + 1);
    if (rc)
        return cr__ptx_fail(lx, rc, "initialiser too large");
    for (unsigned i = 0; i < in->d->elem && i < 8; i++)
        in->buf[in->index * in->d->elem + i] = (uint8_t)(bits >> (8 * i));
    in->index++;
    if (in->index > in->used)
        in->used = in->index;
    return 0;
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

/* The value of a float literal. */
static double float_value(const cr__ptx_num_t *n)
{
    uint32_t b32 = (uint32_t)n->bits;
    float f;
    double d;

    if (n->kind == CR__PTX_F32) {
        memcpy(&f, &b32, sizeof f);
        return f;
    }
    memcpy(&d, &n->bits, sizeof d);
    return d;
}

/* The bytes a scalar of the declaration holds for the literal: a value for .f32/.f64, the
 * literal's bits otherwise (a float literal for bits is encoded as .f32 for 4-byte scalars,
 * as .f64 for the others). (ptxas widens the bits of a 0f literal for an 8-byte scalar
 * instead; nvcc never writes one.) */
static uint64_t scalar_bits(const cr__ptx_decl_t *d, const cr__ptx_num_t *n, int neg)
{
    int is_int = n->kind == CR__PTX_INT;
    unsigned as_float = d->is_float ? d->elem : is_int ? 0 : d->elem == 4 ? 4 : 8;

    if (as_float == 4) {
        float f = is_int ? (float)n->bits : to_float(float_value(n));
        uint32_t b;
        f = neg ? -f : f;
        memcpy(&b, &f, sizeof b);
        return b;
    }
    if (as_float == 8) {
        double f = is_int ? (double)n->bits : float_value(n);
        uint64_t b;
        f = neg ? -f : f;
        memcpy(&b, &f, sizeof b);
        return b;
    }
    return neg ? (uint64_t)0 - n->bits : n->bits;
}

/* An address: sym or generic(sym), then +N/-N terms. Its bytes stay zero; on_addr hears. */
static int init_address(cr__ptx_lex_t *lx, init_t *in, uint64_t end)
{
    cr__ptx_addr_t a = {in->index * in->d->elem, in->d->elem, lx->tok, 0, 0};
    uint64_t addend = 0, v;
    int rc;

    cr__ptx_next(lx);
    if (cr__ptx_punct(&lx->tok, '(')) {
        if (!cr__ptx_is(&a.symbol, "generic"))
            return cr__ptx_fail(lx, CR_ECORRUPT, "bad address initialiser");
        cr__ptx_next(lx);
        if (!cr__ptx_is_name(&lx->tok))
            return cr__ptx_fail(lx, CR_ECORRUPT, "bad address initialiser");
        a.symbol = lx->tok;
        a.generic = 1;
        cr__ptx_next(lx);
        if ((rc = cr__ptx_expect(lx, ')')) != 0)
            return rc;
    }
    while (cr__ptx_punct(&lx->tok, '+') || cr__ptx_punct(&lx->tok, '-')) {
        int minus = cr__ptx_punct(&lx->tok, '-');
        cr__ptx_next(lx);
        if (cr__ptx_int(&lx->tok, &v) != 0)
            return cr__ptx_fail(lx, CR_ECORRUPT, "bad address offset in an initialiser");
        addend = minus ? addend - v : addend + v; /* two's complement, as the loader adds */
        cr__ptx_next(lx);
    }
    a.addend = (int64_t)addend;
    rc = init_store(lx, in, 0, end);
    if (rc == 0 && in->on_addr)
        rc = in->on_addr(in->user, &a);
    return rc;
}

/* One scalar: a number, or an address. */
static int init_scalar(cr__ptx_lex_t *lx, init_t *in, uint64_t end)
{
    cr__ptx_num_t n;
    int neg = 0;

    if (cr__ptx_punct(&lx->tok, '-')) {
        neg = 1;
        cr__ptx_next(lx);
    }
    if (lx->tok.kind == CR__PTX_NUM) {
        if (cr__ptx_number(&lx->tok, &n) != 0)
            return cr__ptx_fail(lx, CR_ECORRUPT, "bad number in an initialiser");
        cr__ptx_next(lx);
        return init_store(lx, in, scalar_bits(in->d, &n, neg), end);
    }
    if (neg || !cr__ptx_is_name(&lx->tok))
        return cr__ptx_fail(lx, CR_ECORRUPT, "bad initialiser");
    return init_address(lx, in, end);
}

/* { item, item, ... } at brace level `level` (1: the whole object). An inner list fills
 * one element of dimension level-2 and the rest of that element stays zero. (ptxas instead
 * packs a short inner list's items back to back; nvcc never writes one.) */
static int init_list(cr__ptx_lex_t *lx, init_t *in, unsigned level)
{
    uint64_t start = in->index, span, end;
    int rc;

    if (level > in->d->ndims + 1 || span_from(in->d, level - 1, &span) != 0)
        return cr__ptx_fail(lx, CR_ECORRUPT, "initialiser nested too deep");
    end = level == 1 && in->d->unsized ? UINT64_MAX : start + span;
    cr__ptx_next(lx); /* '{' */
    for (;;) {
        if (cr__ptx_punct(&lx->tok, '{'))
            rc = init_list(lx, in, level + 1);
        else
            rc = init_scalar(lx, in, end);
        if (rc)
            return rc;
        if (!cr__ptx_punct(&lx->tok, ','))
            break;
        cr__ptx_next(lx);
    }
    rc = cr__ptx_expect(lx, '}');
    if (rc == 0 && end != UINT64_MAX)
        in->index = end;
    return rc;
}

/* NULL for an all-zero buffer: zero-initialised variables have no initialiser. */
static uint8_t *drop_zero(uint8_t *buf, uint64_t size)
{
    for (uint64_t i = 0; i < size; i++)
        if (buf[i])
            return buf;
    free(buf);
    return NULL;
}

int cr__ptx_init(cr__ptx_lex_t *lx, const cr__ptx_decl_t *d, uint64_t *size, uint8_t **init,
                 cr__ptx_addr_fn on_addr, void *user)
{
    init_t in = {d, NULL, 0, UINT64_MAX, 0, 0, on_addr, user};
    uint64_t row = 0;
    int rc;

    *init = NULL;
    if (d->elem == 0 || d->opaque)
        return cr__ptx_fail(lx, CR_ECORRUPT, "initialiser for a variable without memory");
    if (d->unsized && span_from(d, 1, &row) != 0)
        return cr__ptx_fail(lx, CR_ETOOBIG, "array too large");
    if (!d->unsized)
        in.limit = *size / d->elem;
    else if (row == 0)
        in.limit = 0; /* rows of nothing ([][0]): no element fits */
    cr__ptx_next(lx); /* '=' */
    if (cr__ptx_punct(&lx->tok, '{'))
        rc = init_list(lx, &in, 1);
    else
        rc = init_scalar(lx, &in, 1);
    if (rc == 0 && d->unsized)
        *size = row ? (in.used + row - 1) / row * row * d->elem : 0; /* whole rows */
    if (rc == 0 && (rc = init_reserve(&in, *size / d->elem)) != 0)
        rc = cr__ptx_fail(lx, rc, "initialiser too large");
    if (rc) {
        free(in.buf);
        return rc;
    }
    *init = drop_zero(in.buf, *size);
    return 0;
}

/* ---- parameter lists ---- */

/* The next parameter's place after *end, which moves past it. */
static int place_param(cr__ptx_lex_t *lx, const cr__ptx_decl_t *d, uint64_t *end, cr_param_t *p)
{
    uint64_t size, align = cr__ptx_decl_align(d), off;

    if (d->opaque)
        return cr__ptx_fail(lx, CR_ECORRUPT, "opaque parameters are not supported");
    if (d->unsized)
        return cr__ptx_fail(lx, CR_ECORRUPT, "unsized parameter");
    if (cr__ptx_decl_bytes(d, &size) != 0 || !is_pow2(align) || align > CR__PTX_MAX_ALIGN)
        return cr__ptx_fail(lx, CR_ECORRUPT, "bad parameter size or alignment");
    off = (*end + align - 1) & ~(align - 1);
    if (size > UINT32_MAX || off > UINT32_MAX - size)
        return cr__ptx_fail(lx, CR_ECORRUPT, "parameters too large");
    *p = (cr_param_t){(uint32_t)off, (uint32_t)size};
    *end = off + size;
    return 0;
}

/* One ".param declarator" of a list. */
static int parse_param(cr__ptx_lex_t *lx, cr__ptx_param_fn on_param, void *user, uint64_t *end)
{
    cr__ptx_decl_t d = {0};
    cr_param_t p;
    int rc;

    if (cr__ptx_is(&lx->tok, ".reg"))
        return cr__ptx_fail(lx, CR_ECORRUPT, ".reg parameters are not supported");
    if (!cr__ptx_is(&lx->tok, ".param"))
        return cr__ptx_fail(lx, CR_ECORRUPT, "expected .param in a parameter list");
    cr__ptx_next(lx);
    rc = cr__ptx_declarator(lx, &d);
    if (rc == 0)
        rc = place_param(lx, &d, end, &p);
    if (rc == 0 && on_param)
        rc = on_param(user, &d, &p);
    return rc;
}

int cr__ptx_params(cr__ptx_lex_t *lx, cr__ptx_param_fn on_param, void *user, uint32_t *size)
{
    uint64_t end = 0;
    int rc = 0;

    *size = 0;
    cr__ptx_next(lx); /* '(' */
    while (rc == 0 && !cr__ptx_punct(&lx->tok, ')')) {
        rc = parse_param(lx, on_param, user, &end);
        if (rc == 0 && cr__ptx_punct(&lx->tok, ','))
            cr__ptx_next(lx);
        else if (rc == 0 && !cr__ptx_punct(&lx->tok, ')'))
            rc = cr__ptx_fail(lx, CR_ECORRUPT, "expected ',' or ')' after a parameter");
    }
    if (rc)
        return rc;
    cr__ptx_next(lx);
    *size = (uint32_t)end;
    return 0;
}

int cr__ptx_dims3(cr__ptx_lex_t *lx, uint32_t out[3])
{
    uint64_t v;
    int rc;

    out[0] = out[1] = out[2] = 1;
    cr__ptx_next(lx);
    for (int i = 0; i < 3; i++) {
        if (i && !cr__ptx_punct(&lx->tok, ','))
            break;
        if (i)
            cr__ptx_next(lx);
        if ((rc = cr__ptx_count(lx, UINT32_MAX, &v)) != 0)
            return cr__ptx_fail(lx, rc, "bad dimension");
        out[i] = (uint32_t)v;
    }
    return 0;
}
