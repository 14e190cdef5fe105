/* PTX declarations of a module for the image parser: the kernels (.entry parameter lists,
 * .maxntid/.reqntid, the static .shared memory they reach) and the module-scope variables
 * (.global, .const, with sizes and initialisers) of a PTX text. This is the only source of
 * kernel layouts for PTX-only builds. Each declaration is read by ptx_var.c, which the PTX
 * interpreter uses too, so the parameter offsets the client packs are those the
 * interpreter reads.
 *
 * The text is untrusted: the tokenizer (ptx_lex.c) never reads past `len` or a NUL, and
 * ptx_var.c checks every number and size. Instructions are not parsed; only declarations at
 * the places they can appear are, and the names a body uses. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "image_internal.h"
#include "ptx_lex.h"
#include "ptx_var.h"

static int is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

/* ---- module-scope variables ---- */

/* Parses the rest of one declarator (its initialiser) and keeps the variable if asked. */
static int add_variable(cr__builder_t *b, cr__ptx_lex_t *lx, const cr__ptx_decl_t *d, int is_const,
                        int keep)
{
    cr_global_info_t g = {0};
    uint8_t *init = NULL;
    int rc = cr__ptx_decl_bytes(d, &g.size);

    if (rc == 0 && cr__ptx_punct(&lx->tok, '='))
        rc = cr__ptx_init(lx, d, &g.size, &init, NULL, NULL);
    g.init = init;
    if (rc || !keep || d->opaque)
        goto out;
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
static int parse_module_var(cr__builder_t *b, cr__ptx_lex_t *lx, int keep)
{
    int is_const = cr__ptx_is(&lx->tok, ".const");
    cr__ptx_decl_t d = {0};
    int rc;

    cr__ptx_next(lx);
    do {
        if (cr__ptx_punct(&lx->tok, ','))
            cr__ptx_next(lx);
        rc = cr__ptx_declarator(lx, &d);
        if (rc == 0)
            rc = add_variable(b, lx, &d, is_const, keep);
    } while (rc == 0 && cr__ptx_punct(&lx->tok, ','));
    return rc ? rc : cr__ptx_expect(lx, ';');
}

/* ---- kernels ---- */

/* Appends one parameter (placed by ptx_var.c) to the kernel; `user` is a param_list_t. */
typedef struct {
    cr_kernel_info_t *k;
    uint32_t cap;
} param_list_t;

static int add_param(void *user, const cr__ptx_decl_t *d, const cr_param_t *p)
{
    param_list_t *l = user;
    cr_kernel_info_t *k = l->k;

    if (k->param_count == l->cap) {
        uint32_t ncap = l->cap ? l->cap * 2 : 8;
        cr_param_t *n = ncap > l->cap ? realloc(k->params, ncap * sizeof *n) : NULL;
        if (!n)
            return CR_ENOMEM;
        k->params = n;
        l->cap = ncap;
    }
    k->params[k->param_count++] = *p;
    return 0;
}

/* .maxntid x[, y[, z]] or .reqntid: the product is the block size limit. */
static int parse_ntid(cr__ptx_lex_t *lx, cr_kernel_info_t *k)
{
    uint32_t dims[3];
    uint64_t n = 1;
    int rc = cr__ptx_dims3(lx, dims);

    for (int i = 0; rc == 0 && i < 3; i++)
        n = n * dims[i] > UINT32_MAX ? UINT32_MAX : n * dims[i];
    if (rc == 0)
        k->max_threads_per_block = (uint32_t)n;
    return rc;
}

/* .pragma "..."; — its ';' does not end the entry header. */
static void skip_pragma(cr__ptx_lex_t *lx)
{
    while (lx->tok.kind != CR__PTX_EOF && !cr__ptx_punct(&lx->tok, ';') &&
           !cr__ptx_punct(&lx->tok, '{'))
        cr__ptx_next(lx);
    if (cr__ptx_punct(&lx->tok, ';'))
        cr__ptx_next(lx);
}

/* After the parameters: performance directives up to '{' (a body) or ';' (a prototype). */
static int parse_entry_directives(cr__ptx_lex_t *lx, cr_kernel_info_t *k)
{
    for (;;) {
        int rc = 0;
        if (lx->tok.kind == CR__PTX_EOF)
            return CR_ECORRUPT;
        if (cr__ptx_punct(&lx->tok, '{') || cr__ptx_punct(&lx->tok, ';'))
            return 0;
        if (cr__ptx_is(&lx->tok, ".maxntid") || cr__ptx_is(&lx->tok, ".reqntid"))
            rc = parse_ntid(lx, k);
        else if (cr__ptx_is(&lx->tok, ".pragma"))
            skip_pragma(lx);
        else
            cr__ptx_next(lx);
        if (rc)
            return rc;
    }
}

/* ".entry name (params) directives" with the current token on .entry. Leaves the token on
 * '{' or ';'. */
static int parse_entry_header(cr__ptx_lex_t *lx, cr_kernel_info_t *k)
{
    int rc = 0;

    cr__ptx_next(lx);
    if (!cr__ptx_is_name(&lx->tok))
        return CR_ECORRUPT;
    k->name = strndup(lx->tok.s, lx->tok.len);
    if (!k->name)
        return CR_ENOMEM;
    cr__ptx_next(lx);
    if (cr__ptx_punct(&lx->tok, '('))
        rc = cr__ptx_params(lx, add_param, &(param_list_t){k, 0}, &k->param_size);
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
    cr__ptx_lex_t lx;
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

static sym_t *sym_find(module_t *m, const cr__ptx_tok_t *name)
{
    uint32_t slot;

    if (!m->nslots)
        return NULL;
    slot = *sym_slot(m, name->s, name->len);
    return slot ? &m->syms[slot - 1] : NULL;
}

/* Adds a symbol, or finds it when declared before (a prototype, then the definition). */
static int sym_add(module_t *m, const cr__ptx_tok_t *name, int is_func, uint32_t *index)
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
static int note_name(module_t *m, const cr__ptx_tok_t *t)
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

    if (!is_pow2(align) || align > CR__PTX_MAX_ALIGN)
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
    cr__ptx_decl_t d = {0};
    uint64_t size;
    uint32_t index;
    int rc;

    cr__ptx_next(&m->lx);
    rc = cr__ptx_declarator(&m->lx, &d);
    if (rc == 0)
        rc = cr__ptx_decl_bytes(&d, &size);
    if (rc == 0 && m->braces == 0 && m->is_extern && !d.opaque &&
        cr__ptx_decl_align(&d) > m->dyn_align)
        m->dyn_align = cr__ptx_decl_align(&d);
    if (rc || m->is_extern || d.unsized || d.opaque)
        return rc;
    if (m->braces == 0) {
        rc = sym_add(m, &d.name, 0, &index);
        if (rc == 0 && !m->syms[index].is_func) {
            m->syms[index].size = size;
            m->syms[index].align = cr__ptx_decl_align(&d);
        }
        return rc;
    }
    if (m->body_kind != BODY_KERNEL)
        return 0;
    return place_shared(&m->kernels[m->body_index].k, size, cr__ptx_decl_align(&d));
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

    if (rc || !cr__ptx_punct(&m->lx.tok, '{'))
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
    cr__ptx_lex_t *lx = &m->lx;
    uint32_t index;
    cr__ptx_tok_t name;
    int rc = 0;

    cr__ptx_next(lx);
    if (cr__ptx_punct(&lx->tok, '(') && (rc = cr__ptx_skip_parens(lx)) != 0)
        return rc;
    if (!cr__ptx_is_name(&lx->tok))
        return CR_ECORRUPT;
    name = lx->tok;
    cr__ptx_next(lx);
    if (cr__ptx_punct(&lx->tok, '(') && (rc = cr__ptx_skip_parens(lx)) != 0)
        return rc;
    while (lx->tok.kind != CR__PTX_EOF && !cr__ptx_punct(&lx->tok, '{') &&
           !cr__ptx_punct(&lx->tok, ';')) {
        if (cr__ptx_is(&lx->tok, ".pragma"))
            skip_pragma(lx);
        else
            cr__ptx_next(lx);
    }
    rc = sym_add(m, &name, 1, &index);
    if (rc == 0 && cr__ptx_punct(&lx->tok, '{') && m->syms[index].is_func)
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
    const cr__ptx_tok_t *t = &m->lx.tok;
    int rc;

    if (cr__ptx_is(t, ".entry"))
        return on_entry(m);
    if (cr__ptx_is(t, ".func"))
        return on_func(m);
    if (cr__ptx_is(t, ".global") || cr__ptx_is(t, ".const")) {
        rc = parse_module_var(m->b, &m->lx, !m->is_extern);
        m->is_extern = 0;
        return rc;
    }
    cr__ptx_next(&m->lx);
    return 0;
}

/* One step: handles the current token and moves past what it consumed. */
static int step(module_t *m)
{
    cr__ptx_tok_t *t = &m->lx.tok;
    int rc = 0;

    if (t->kind == CR__PTX_PUNCT) {
        rc = on_punct(m);
        cr__ptx_next(&m->lx);
        return rc;
    }
    if (t->kind != CR__PTX_WORD || m->parens) {
        cr__ptx_next(&m->lx);
        return 0;
    }
    if (cr__ptx_is(t, ".extern")) {
        m->is_extern = 1;
    } else if (cr__ptx_is(t, ".shared")) {
        return on_shared(m);
    } else if (m->braces == 0 && t->s[0] == '.') {
        return on_top_directive(m);
    } else if (m->braces && t->s[0] != '.') {
        rc = note_name(m, t);
    }
    cr__ptx_next(&m->lx);
    return rc;
}

int cr__ptx_collect(cr__builder_t *b, const char *text, size_t len)
{
    module_t m = {.b = b};
    int rc = 0;

    cr__ptx_lex_init(&m.lx, text, len);
    /* Every PTX module starts with .version: anything else is not PTX. */
    if (!cr__ptx_is(&m.lx.tok, ".version"))
        return CR_ECORRUPT;
    while (rc == 0 && m.lx.tok.kind != CR__PTX_EOF)
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
    cr__ptx_lex_t lx;
    unsigned arch = 0;
    size_t i;

    *suffix = 0;
    for (cr__ptx_lex_init(&lx, text, len); lx.tok.kind != CR__PTX_EOF; cr__ptx_next(&lx)) {
        if (!cr__ptx_is(&lx.tok, ".target"))
            continue;
        cr__ptx_next(&lx);
        if (lx.tok.kind != CR__PTX_WORD || lx.tok.len < 4 || memcmp(lx.tok.s, "sm_", 3) != 0)
            return 0;
        for (i = 3; i < lx.tok.len && i < 8 && lx.tok.s[i] >= '0' && lx.tok.s[i] <= '9'; i++)
            arch = arch * 10 + (unsigned)(lx.tok.s[i] - '0');
        if (i + 1 == lx.tok.len && (lx.tok.s[i] == 'a' || lx.tok.s[i] == 'f'))
            *suffix = lx.tok.s[i];
        return arch;
    }
    return 0;
}
