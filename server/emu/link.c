/* The JIT linker of the emulated device (cuLinkCreate .. cuLinkDestroy).
 *
 * The device runs PTX only, so linking joins PTX: each input (PTX text, or the PTX a fatbin
 * holds for the device's compute capability) is checked when it is added, as the driver
 * compiles it then, and cuLinkComplete writes one PTX module that holds them all. Module
 * scope is read statement by statement with the shared PTX tokenizer:
 *   - one header: the newest .version, the highest .target, .address_size 64;
 *   - every variable definition first, so that the functions of each input find the
 *     variables other inputs define (an .extern declaration of a defined variable is
 *     dropped, as the linker resolves it);
 *   - then every other statement in input order; function declarations stay, and the
 *     interpreter calls the definition wherever it is;
 *   - symbols as a linker resolves them: an input that defines again a .visible symbol an
 *     earlier input defines is refused when it is added, with each such symbol in the log,
 *     and the link then fails to complete (CUDA_ERROR_INVALID_SOURCE both, as NVIDIA's
 *     driver 580 does), a .weak one gives way to a .visible one and to an earlier .weak one, an
 *     internal one defined again elsewhere is dropped when the text is the same (libdevice's
 *     helpers in two inputs) and fails otherwise, since nothing here renames; an .extern
 *     function or variable nobody defines fails ("undefined reference") unless the device
 *     provides it (vprintf, malloc, ...).
 * The result is loaded once as a check, so it is an image cuModuleLoadData takes. Logs go to
 * the caller's buffers (CU_JIT_INFO_LOG_BUFFER ...), their sizes and the wall time to the
 * option values, which must outlive the link state as the driver documents.
 *
 * Threads: a link state is used by one thread at a time, as the driver requires; its lock
 * only guards against a destroy racing a call. */
#include "emu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "error.h"
#include "jit_options.h"
#include "ptx.h"
#include "ptx_lex.h"

/* Module-scope statements (functions, variables, declarations) over all inputs: symbols
 * are resolved pair by pair, so their count is bounded. */
#define MAX_STATEMENTS 16384u

/* A .visible definition an input makes, noted when it is added (the name is in its text). */
typedef struct {
    const char *name;
    uint32_t len;
    uint8_t kind; /* st_kind_t */
} definition_t;

typedef struct {
    char *name;
    char *text; /* NUL-terminated */
    size_t len;
    definition_t *defined; /* its .visible, not .weak definitions */
    size_t defined_count;
} input_t;

typedef struct {
    cr__obj_t obj;
    pthread_mutex_t lock;
    input_t *inputs;
    size_t count, cap;
    void **values; /* the caller's option values: sizes and the wall time are written back */
    int info_size_at, error_size_at, wall_at;
    char *info, *error; /* the caller's log buffers and their sizes */
    size_t info_cap, error_cap, info_used, error_used;
    char *image;
    size_t image_len;
    size_t statements; /* module-scope statements of the inputs, as added */
    int refused;       /* an input defined a symbol again: the link cannot complete */
} link_t;

/* ---- logs and options ---- */

static void say(link_t *l, int error, const char *fmt, ...)
{
    char *buf = error ? l->error : l->info;
    size_t cap = error ? l->error_cap : l->info_cap;
    size_t *used = error ? &l->error_used : &l->info_used;
    int at = error ? l->error_size_at : l->info_size_at;
    if (!buf || cap == 0 || *used + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, cap - *used, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    *used += (size_t)n < cap - *used ? (size_t)n : cap - *used - 1;
    if (*used + 2 < cap) { /* one line per message */
        buf[(*used)++] = '\n';
        buf[*used] = 0;
    }
    if (at >= 0)
        l->values[at] = (void *)(uintptr_t)(*used + 1);
}

/* Reads the options of cuLinkCreate: where the logs go. */
static CUresult read_options(link_t *l, unsigned n, const CUjit_option *opt, void **values)
{
    if (n && (!opt || !values))
        return CUDA_ERROR_INVALID_VALUE;
    l->values = values;
    l->info_size_at = l->error_size_at = l->wall_at = -1;
    for (unsigned i = 0; i < n; i++) {
        switch (cr_jit_option_kind((uint32_t)opt[i])) {
        case CR_JIT_UNKNOWN:
            return CUDA_ERROR_INVALID_VALUE;
        case CR_JIT_INFO_LOG:
            l->info = values[i];
            break;
        case CR_JIT_ERROR_LOG:
            l->error = values[i];
            break;
        case CR_JIT_INFO_SIZE:
            l->info_cap = (size_t)(uintptr_t)values[i];
            l->info_size_at = (int)i;
            break;
        case CR_JIT_ERROR_SIZE:
            l->error_cap = (size_t)(uintptr_t)values[i];
            l->error_size_at = (int)i;
            break;
        case CR_JIT_WALL_TIME:
            l->wall_at = (int)i;
            break;
        default: /* compiler settings: nothing to choose for an interpreter */
            break;
        }
    }
    if (l->info && l->info_cap)
        l->info[0] = 0;
    if (l->error && l->error_cap)
        l->error[0] = 0;
    if (l->info_size_at >= 0)
        values[l->info_size_at] = 0;
    if (l->error_size_at >= 0)
        values[l->error_size_at] = 0;
    return CUDA_SUCCESS;
}

static void link_release(cr__obj_t *obj)
{
    link_t *l = (link_t *)obj;
    for (size_t i = 0; i < l->count; i++) {
        free(l->inputs[i].name);
        free(l->inputs[i].text);
        free(l->inputs[i].defined);
    }
    free(l->inputs);
    free(l->image);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

static link_t *link_get(CUlinkState state)
{
    cr__obj_t *owner;
    return cr__handle_get((uint64_t)(uintptr_t)state, CR__HMASK(CR__H_LINK), &owner, NULL);
}

CUresult cr_emu_cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                CUlinkState *stateOut)
{
    CUresult r;
    if (!stateOut)
        return CUDA_ERROR_INVALID_VALUE;
    link_t *l = calloc(1, sizeof *l);
    if (!l || pthread_mutex_init(&l->lock, NULL) != 0) {
        free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    cr__obj_init(&l->obj, link_release);
    if ((r = read_options(l, numOptions, options, optionValues)) == CUDA_SUCCESS) {
        uint64_t h = cr__handle_new(CR__H_LINK, &l->obj, l);
        if (h)
            *stateOut = (CUlinkState)(uintptr_t)h;
        else
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    cr__obj_unref(&l->obj); /* the handle holds it now, or nothing does */
    return r;
}

/* ---- inputs ---- */

static CUresult note_definitions(link_t *l, input_t *in);

static CUresult add_ptx(link_t *l, const char *text, size_t size, const char *name)
{
    size_t len = strnlen(text, size);
    char err[256];
    cr_ptx_module_t *m = NULL;
    int rc = cr_ptx_module_load(text, len, &m, err, sizeof err);
    if (rc == CR_ENOMEM)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != 0) {
        say(l, 1, "ptxas error   : %s: %s", name, err[0] ? err : "not PTX the device can read");
        return CUDA_ERROR_INVALID_PTX;
    }
    cr_ptx_module_free(m);
    input_t in = {strdup(name), malloc(len + 1), len};
    if (!in.name || !in.text ||
        cr_array_room((void **)&l->inputs, &l->cap, l->count, sizeof *l->inputs) != 0) {
        free(in.name);
        free(in.text);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(in.text, text, len);
    in.text[len] = 0;
    CUresult r = note_definitions(l, &in);
    if (r != CUDA_SUCCESS) {
        free(in.name);
        free(in.text);
        free(in.defined);
        return r;
    }
    l->inputs[l->count++] = in;
    return CUDA_SUCCESS;
}

static CUresult add_fatbin(link_t *l, const void *data, size_t size, const char *name)
{
    size_t need;
    cr_image_t *img;
    if (cr_image_measure_bounded(data, size, &need) != 0 || need > size ||
        cr_image_parse(data, need, &img) != 0) {
        say(l, 1, "error   : %s: not a fatbin", name);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    const cr_image_entry_t *e = cr_image_select(img, cr__emu.sm);
    CUresult r;
    if (e && e->kind == CR_IMAGE_PTX) {
        r = add_ptx(l, (const char *)e->data, e->size, name);
    } else {
        say(l, 1, "error   : %s: no PTX for compute_%u (the emulated device runs PTX only)", name,
            cr__emu.sm);
        r = CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    cr_image_free(img);
    return r;
}

CUresult cr_emu_cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                 const char *name, unsigned int numOptions, CUjit_option *options,
                                 void **optionValues)
{
    if (!data || !size || (numOptions && (!options || !optionValues)))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numOptions; i++)
        if (cr_jit_option_kind((uint32_t)options[i]) == CR_JIT_UNKNOWN)
            return CUDA_ERROR_INVALID_VALUE;
    link_t *l = link_get(state);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    const char *what = name && *name ? name : "<unnamed>";
    CUresult r;
    pthread_mutex_lock(&l->lock);
    switch (type) {
    case CU_JIT_INPUT_PTX:
        r = add_ptx(l, data, size, what);
        break;
    case CU_JIT_INPUT_FATBINARY:
        r = add_fatbin(l, data, size, what);
        break;
    case CU_JIT_INPUT_CUBIN:
    case CU_JIT_INPUT_OBJECT:
    case CU_JIT_INPUT_LIBRARY:
    case CU_JIT_INPUT_NVVM:
        say(l, 1, "error   : %s: the emulated device links PTX only, not %s", what,
            type == CU_JIT_INPUT_CUBIN    ? "a cubin"
            : type == CU_JIT_INPUT_OBJECT ? "a relocatable object"
            : type == CU_JIT_INPUT_NVVM   ? "NVVM IR"
                                          : "a library");
        r = CUDA_ERROR_NO_BINARY_FOR_GPU;
        break;
    default:
        r = CUDA_ERROR_INVALID_VALUE;
        break;
    }
    pthread_mutex_unlock(&l->lock);
    cr__obj_unref(&l->obj);
    return r;
}

CUresult cr_emu_cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                                 unsigned int numOptions, CUjit_option *options,
                                 void **optionValues)
{
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            char *p = realloc(data, cap = cap ? cap * 2 : 65536);
            if (!p) {
                free(data);
                fclose(f);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            data = p;
        }
        size_t got = fread(data + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    int failed = ferror(f);
    fclose(f);
    CUresult r = failed || len == 0 ? CUDA_ERROR_FILE_NOT_FOUND
                                    : cr_emu_cuLinkAddData_v2(state, type, data, len, path,
                                                              numOptions, options, optionValues);
    free(data);
    return r;
}

/* ---- joining ---- */

typedef enum { ST_KEEP, ST_DROP, ST_FUNC, ST_VAR } st_kind_t;

typedef struct {
    size_t start, end; /* bytes of the input's text */
    uint8_t kind;      /* st_kind_t */
    uint8_t is_extern, is_visible, is_weak, has_body, is_shared;
    const char *name; /* in the text */
    uint32_t name_len;
} stmt_t;

typedef struct {
    stmt_t *st;
    size_t count, cap;
    unsigned version; /* major * 100 + minor */
    unsigned sm;
    const char *target; /* the .target line's first word */
    uint32_t target_len;
} scan_t;

static unsigned number_at(const char *s, uint32_t len, uint32_t *pos)
{
    unsigned v = 0;
    while (*pos < len && s[*pos] >= '0' && s[*pos] <= '9' && v < 100000)
        v = v * 10 + (unsigned)(s[(*pos)++] - '0');
    return v;
}

/* Ends the statement at the current token: the end of its line, or `;` / the `}` of a body
 * at depth 0. Leaves the tokenizer after it. */
static size_t statement_end(cr__ptx_lex_t *lx, const char *text, int to_line_end)
{
    uint32_t line = lx->tok.line;
    int depth = 0;
    size_t end = (size_t)(lx->tok.s - text) + lx->tok.len;
    while (lx->tok.kind != CR__PTX_EOF) {
        const cr__ptx_tok_t *t = &lx->tok;
        if (to_line_end && t->line != line)
            break;
        end = (size_t)(t->s - text) + t->len + (t->kind == CR__PTX_STR ? 1 : 0);
        int closes = 0;
        if (t->kind == CR__PTX_PUNCT) {
            char c = t->s[0];
            if (c == '{' || c == '(' || c == '[')
                depth++;
            else if (c == '}' || c == ')' || c == ']')
                closes = --depth == 0 && c == '}';
            else if (c == ';' && depth == 0)
                closes = 1;
        }
        cr__ptx_next(lx);
        if (closes && !to_line_end)
            break;
    }
    return end;
}

static int scan(const input_t *in, scan_t *sc)
{
    cr__ptx_lex_t lx;
    cr__ptx_lex_init(&lx, in->text, in->len);
    while (lx.tok.kind != CR__PTX_EOF) {
        stmt_t st = {.start = (size_t)(lx.tok.s - in->text), .kind = ST_KEEP};
        const cr__ptx_tok_t *t = &lx.tok;
        int line_directive = 0;
        if (cr__ptx_is(t, ".version")) {
            cr__ptx_next(&lx);
            uint32_t p = 0;
            unsigned major = number_at(lx.tok.s, lx.tok.len, &p), minor = 0;
            if (p < lx.tok.len && lx.tok.s[p] == '.' && ++p)
                minor = number_at(lx.tok.s, lx.tok.len, &p);
            if (major * 100 + minor > sc->version)
                sc->version = major * 100 + minor;
            st.kind = ST_DROP, line_directive = 1;
        } else if (cr__ptx_is(t, ".target")) {
            cr__ptx_next(&lx);
            uint32_t p = 3;
            if (lx.tok.len > 3 && !memcmp(lx.tok.s, "sm_", 3)) {
                unsigned sm = number_at(lx.tok.s, lx.tok.len, &p);
                if (sm > sc->sm || !sc->target) {
                    sc->sm = sm;
                    sc->target = lx.tok.s;
                    sc->target_len = lx.tok.len;
                }
            }
            st.kind = ST_DROP, line_directive = 1;
        } else if (cr__ptx_is(t, ".address_size") || cr__ptx_is(t, ".file")) {
            st.kind = ST_DROP, line_directive = 1;
        } else if (cr__ptx_is(t, ".section")) {
            st.kind = ST_DROP; /* debug sections: the interpreter has no use for them */
        } else {
            for (; t->kind == CR__PTX_WORD && t->s[0] == '.'; cr__ptx_next(&lx)) {
                if (cr__ptx_is(t, ".extern"))
                    st.is_extern = 1;
                else if (cr__ptx_is(t, ".visible"))
                    st.is_visible = 1;
                else if (cr__ptx_is(t, ".weak") || cr__ptx_is(t, ".common"))
                    st.is_weak = 1;
                else if (cr__ptx_is(t, ".func") || cr__ptx_is(t, ".entry")) {
                    st.kind = ST_FUNC;
                    cr__ptx_next(&lx);
                    if (cr__ptx_punct(&lx.tok, '(') && cr__ptx_skip_parens(&lx))
                        return -1;
                    break;
                } else if (cr__ptx_is(t, ".global") || cr__ptx_is(t, ".const") ||
                           cr__ptx_is(t, ".shared")) {
                    st.kind = ST_VAR;
                    st.is_shared = cr__ptx_is(t, ".shared");
                    cr__ptx_next(&lx);
                    while (lx.tok.kind != CR__PTX_EOF && !cr__ptx_is_name(&lx.tok) &&
                           !cr__ptx_punct(&lx.tok, ';'))
                        cr__ptx_next(&lx);
                    break;
                } else {
                    break; /* .pragma and the like: kept as they are */
                }
            }
            if (st.kind == ST_FUNC || st.kind == ST_VAR) {
                if (!cr__ptx_is_name(&lx.tok))
                    return -1;
                st.name = lx.tok.s;
                st.name_len = lx.tok.len;
            }
        }
        if (lx.tok.kind == CR__PTX_EOF)
            return -1;
        st.end = statement_end(&lx, in->text, line_directive);
        if (st.kind == ST_FUNC)
            st.has_body = in->text[st.end - 1] == '}';
        else if (st.kind == ST_VAR)
            st.has_body = !st.is_extern;
        if (cr_array_room((void **)&sc->st, &sc->cap, sc->count, sizeof *sc->st) != 0)
            return -1;
        sc->st[sc->count++] = st;
    }
    return 0;
}

static int same_name(const stmt_t *a, const stmt_t *b)
{
    return a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0;
}

static int same_text(const input_t *ia, const stmt_t *a, const input_t *ib, const stmt_t *b)
{
    return a->end - a->start == b->end - b->start &&
           memcmp(ia->text + a->start, ib->text + b->start, a->end - a->start) == 0;
}

/* A definition no other may share: .visible, not .weak. */
static int strong(const stmt_t *s)
{
    return (s->kind == ST_FUNC || s->kind == ST_VAR) && s->has_body && s->is_visible &&
           !s->is_weak && !s->is_shared;
}

/* Reads an input's module scope once, when it is added, and notes its .visible
 * definitions; refuses it when one defines again what an earlier input defines, as
 * NVIDIA's driver does when the input is added, logging each such symbol, after which the
 * link cannot complete (CUDA_ERROR_INVALID_SOURCE both times, seen on driver 580). .weak
 * and internal definitions are left to cuLinkComplete, which resolves them; so is an
 * input whose module scope cannot be read, and a link past MAX_STATEMENTS, which it
 * refuses (the pairs compared here stay as bounded as its own). */
static CUresult note_definitions(link_t *l, input_t *in)
{
    scan_t sc = {0};
    if (scan(in, &sc) != 0) {
        free(sc.st);
        return CUDA_SUCCESS;
    }
    size_t statements = sc.count, n = 0;
    for (size_t k = 0; k < sc.count; k++)
        n += strong(&sc.st[k]);
    if (n && !(in->defined = calloc(n, sizeof *in->defined))) {
        free(sc.st);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t k = 0; k < sc.count; k++)
        if (strong(&sc.st[k]))
            in->defined[in->defined_count++] =
                (definition_t){sc.st[k].name, sc.st[k].name_len, sc.st[k].kind};
    free(sc.st);
    int again = 0;
    for (size_t k = 0; k < in->defined_count && l->statements + statements <= MAX_STATEMENTS; k++) {
        const definition_t *a = &in->defined[k];
        int found = 0;
        for (size_t i = 0; i < l->count && !found; i++)
            for (size_t m = 0; m < l->inputs[i].defined_count && !found; m++) {
                const definition_t *b = &l->inputs[i].defined[m];
                found = b->kind == a->kind && b->len == a->len && !memcmp(b->name, a->name, a->len);
                if (found)
                    say(l, 1,
                        "error   : Multiple definition of '%.*s' in '%s', first defined in '%s'",
                        (int)a->len, a->name, in->name, l->inputs[i].name);
            }
        again |= found;
    }
    if (again) {
        l->refused = 1;
        return CUDA_ERROR_INVALID_SOURCE;
    }
    l->statements += statements;
    return CUDA_SUCCESS;
}

/* Functions the device provides, which no input defines. */
static int provided(const stmt_t *s)
{
    static const char *const names[] = {"vprintf",
                                        "__assertfail",
                                        "malloc",
                                        "free",
                                        "__nv_aligned_device_malloc",
                                        "cudaGraphSetConditional"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == s->name_len && !memcmp(names[i], s->name, s->name_len))
            return 1;
    return 0;
}

/* Resolves the symbols of every input: marks the statements the joined text leaves out.
 * Returns CUDA_SUCCESS, or the error with the reason in the error log. */
static CUresult resolve(link_t *l, scan_t *sc)
{
    for (size_t i = 0; i < l->count; i++)
        for (size_t k = 0; k < sc[i].count; k++) {
            stmt_t *a = &sc[i].st[k];
            if (a->kind == ST_DROP || a->kind == ST_KEEP || !a->has_body ||
                (a->kind == ST_VAR && a->is_shared))
                continue;
            /* a definition: against the definitions of the same name after it */
            for (size_t j = i; j < l->count && a->kind != ST_DROP; j++)
                for (size_t m = j == i ? k + 1 : 0; m < sc[j].count; m++) {
                    stmt_t *b = &sc[j].st[m];
                    if (b->kind != a->kind || !b->has_body || b->is_shared || !same_name(a, b))
                        continue;
                    if (a->is_weak && !b->is_weak) {
                        a->kind = ST_DROP;
                        break;
                    }
                    if (b->is_weak || (!a->is_visible && !b->is_visible &&
                                       same_text(&l->inputs[i], a, &l->inputs[j], b))) {
                        b->kind = ST_DROP;
                        continue;
                    }
                    say(l, 1, "nvlink error  : %s of '%.*s' (in %s and %s)",
                        a->is_visible && b->is_visible ? "Multiple definition"
                                                       : "Two different definitions",
                        (int)a->name_len, a->name, l->inputs[i].name, l->inputs[j].name);
                    return CUDA_ERROR_INVALID_IMAGE;
                }
        }
    /* declarations: each must find a definition, or the device must provide it */
    for (size_t i = 0; i < l->count; i++)
        for (size_t k = 0; k < sc[i].count; k++) {
            stmt_t *a = &sc[i].st[k];
            if ((a->kind != ST_FUNC && a->kind != ST_VAR) || a->has_body ||
                (a->kind == ST_VAR && a->is_shared) || !a->is_extern)
                continue;
            int found = 0;
            for (size_t j = 0; j < l->count && !found; j++)
                for (size_t m = 0; m < sc[j].count && !found; m++) {
                    const stmt_t *b = &sc[j].st[m];
                    found = b->kind == a->kind && b->has_body && !b->is_shared && same_name(a, b);
                }
            if (!found && !(a->kind == ST_FUNC && provided(a))) {
                say(l, 1, "nvlink error  : Undefined reference to '%.*s' in '%s'", (int)a->name_len,
                    a->name, l->inputs[i].name);
                return CUDA_ERROR_INVALID_IMAGE;
            }
            if (found && a->kind == ST_VAR)
                a->kind = ST_DROP; /* the definition comes first in the joined text */
        }
    return CUDA_SUCCESS;
}

static int append(char **out, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 2 > *cap) {
        size_t want = (*len + n + 2) * 2;
        char *p = realloc(*out, want);
        if (!p)
            return -1;
        *out = p;
        *cap = want;
    }
    memcpy(*out + *len, s, n);
    *len += n;
    (*out)[(*len)++] = '\n';
    (*out)[*len] = 0;
    return 0;
}

static CUresult join(link_t *l, scan_t *sc)
{
    unsigned version = 0, sm = 0;
    const char *target = NULL;
    uint32_t target_len = 0;
    for (size_t i = 0; i < l->count; i++) {
        if (sc[i].version > version)
            version = sc[i].version;
        if (sc[i].target && (!target || sc[i].sm > sm)) {
            sm = sc[i].sm;
            target = sc[i].target;
            target_len = sc[i].target_len;
        }
    }
    char header[128];
    int n = snprintf(header, sizeof header, ".version %u.%u\n.target %.*s\n.address_size 64",
                     version / 100, version % 100, target ? (int)target_len : 5,
                     target ? target : "sm_52");
    char *out = NULL;
    size_t len = 0, cap = 0;
    int err = append(&out, &len, &cap, header, (size_t)n);
    /* variable definitions first, then everything else, each in input order */
    for (int pass = 0; pass < 2 && !err; pass++)
        for (size_t i = 0; i < l->count && !err; i++)
            for (size_t k = 0; k < sc[i].count && !err; k++) {
                const stmt_t *s = &sc[i].st[k];
                int is_definition = s->kind == ST_VAR && s->has_body;
                if (s->kind == ST_DROP || is_definition != (pass == 0))
                    continue;
                err = append(&out, &len, &cap, l->inputs[i].text + s->start, s->end - s->start);
            }
    if (err) {
        free(out);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    free(l->image);
    l->image = out;
    l->image_len = len + 1; /* with its NUL, as cuModuleLoadData reads PTX */
    return CUDA_SUCCESS;
}

static CUresult complete(link_t *l)
{
    if (l->refused) { /* said when the input was refused */
        say(l, 1, "error   : the link holds a refused input (a symbol defined twice)");
        return CUDA_ERROR_INVALID_SOURCE;
    }
    if (l->count == 0) {
        say(l, 1, "nvlink error  : no input to link");
        return CUDA_ERROR_INVALID_VALUE;
    }
    scan_t *sc = calloc(l->count, sizeof *sc);
    if (!sc)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < l->count && r == CUDA_SUCCESS; i++)
        if (scan(&l->inputs[i], &sc[i]) != 0) {
            say(l, 1, "nvlink error  : cannot read the module scope of '%s'", l->inputs[i].name);
            r = CUDA_ERROR_INVALID_PTX;
        }
    size_t statements = 0;
    for (size_t i = 0; i < l->count; i++)
        statements += sc[i].count;
    if (r == CUDA_SUCCESS && statements > MAX_STATEMENTS) { /* resolving compares pairs */
        say(l, 1,
            "nvlink error  : %zu module-scope statements, more than the emulated "
            "device links (%u)",
            statements, MAX_STATEMENTS);
        r = CUDA_ERROR_INVALID_IMAGE;
    }
    if (r == CUDA_SUCCESS)
        r = resolve(l, sc);
    if (r == CUDA_SUCCESS)
        r = join(l, sc);
    for (size_t i = 0; i < l->count; i++)
        free(sc[i].st);
    free(sc);
    if (r != CUDA_SUCCESS)
        return r;
    char err[256];
    cr_ptx_module_t *m = NULL;
    int rc = cr_ptx_module_load(l->image, l->image_len - 1, &m, err, sizeof err);
    if (rc != 0) {
        say(l, 1, "nvlink error  : the joined module does not load: %s", err);
        return rc == CR_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_PTX;
    }
    cr_ptx_module_free(m);
    say(l, 0, "info    : linked %zu PTX input%s into one module for the emulated device (sm_%u)",
        l->count, l->count == 1 ? "" : "s", cr__emu.sm);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    if (!cubinOut || !sizeOut)
        return CUDA_ERROR_INVALID_VALUE;
    link_t *l = link_get(state);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_mutex_lock(&l->lock);
    CUresult r = complete(l);
    if (r == CUDA_SUCCESS) {
        *cubinOut = l->image;
        *sizeOut = l->image_len;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (l->wall_at >= 0) {
        float ms = (float)((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
        memcpy(&l->values[l->wall_at], &ms, sizeof ms);
    }
    pthread_mutex_unlock(&l->lock);
    cr__obj_unref(&l->obj);
    return r;
}

CUresult cr_emu_cuLinkDestroy(CUlinkState state)
{
    return cr__handle_del((uint64_t)(uintptr_t)state, CR__HMASK(CR__H_LINK)) == 0
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_HANDLE;
}
