/* Cubin (ELF64) reading: the size of an image from its headers, its SM version, and the
 * kernels and globals it defines.
 *
 * Kernels are FUNC symbols marked as entries (st_other & 0x10). Their parameter layout and
 * attributes come from the section .nv.info.<kernel> (found through its sh_info, which names
 * the kernel's .text section), a list of {u8 format, u8 attribute, u16 value-or-size,
 * payload}; register counts and stack frame sizes from the module-wide .nv.info, keyed by
 * symbol index; static shared memory from .nv.shared.<kernel>. Globals are OBJECT symbols in
 * .nv.global (zero-initialised), .nv.global.init and .nv.constant3 (__constant__).
 *
 * Every header, offset, size, index and string is checked against the buffer: the bytes may
 * come from the network. */
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "image_internal.h"

#define STO_CUDA_ENTRY 0x10
#define SHT_CUDA_INFO 0x70000000u
/* Relocatable cubins (-rdc) give .nv.global and .nv.shared.<kernel> section types of their
 * own that, like SHT_NOBITS, have no bytes in the file, and their globals a symbol type. */
#define SHT_CUDA_NOBITS_GLOBAL 0x70000007u
#define SHT_CUDA_NOBITS_SHARED 0x7000000au
#define STT_CUDA_OBJECT 13

/* .nv.info attribute formats and the attributes we read. */
#define EIFMT_NVAL 1
#define EIFMT_BVAL 2
#define EIFMT_HVAL 3
#define EIFMT_SVAL 4
#define EIATTR_MAX_THREADS 0x05
#define EIATTR_REQNTID 0x10
#define EIATTR_FRAME_SIZE 0x11
#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_KPARAM_INFO_V2 0x45 /* parameter lists past 4 KiB (CUDA 12.1+) */
#define EIATTR_CBANK_PARAM_SIZE 0x19
#define EIATTR_REGCOUNT 0x2f

/* From sm_90 on, each .nv.shared.<kernel> starts with the 1 KiB that the driver reserves per
 * block (cubins that lay it out carry a .nv.shared.reserved.* section): a 1024-byte tile
 * gives a 2048-byte section. ptxas -v reports only what follows the reserved part, and so
 * do we (not yet checked against cuFuncGetAttribute on a GPU). */
#define RESERVED_SMEM_BYTES 1024u

typedef struct {
    const uint8_t *p;
    size_t size;
    uint64_t shoff;
    uint32_t shnum;
    uint32_t shentsize;
    uint32_t shstrndx;
} elf_t;

/* What the collector needs about the sections, indexed by section or symbol number. */
typedef struct {
    uint32_t *info_for;   /* .text section index -> its .nv.info.<kernel> section (0: none) */
    uint32_t *shared_for; /* .text section index -> .nv.shared.<kernel> */
    uint32_t *local_for;  /* .text section index -> .nv.local.<kernel> (older toolchains) */
    uint32_t *regs;       /* symbol index -> EIATTR_REGCOUNT */
    uint32_t *frame;      /* symbol index -> EIATTR_FRAME_SIZE */
    uint32_t global_sec, global_init_sec, const3_sec;
    int reserved_smem;
    /* the symbol table */
    const uint8_t *syms;
    size_t sym_count, sym_entsize;
    const uint8_t *strtab;
    size_t strtab_size;
    const uint8_t *xindex; /* SHT_SYMTAB_SHNDX: 32-bit section indices, one per symbol */
    size_t xindex_count;
} maps_t;

/* One .nv.info attribute. */
typedef struct {
    uint8_t fmt, code;
    uint16_t val;
    const uint8_t *payload; /* EIFMT_SVAL only */
} attr_t;

/* ---- headers ---- */

static int read_ehdr(const uint8_t *p, size_t limit, Elf64_Ehdr *eh)
{
    if (limit < sizeof *eh)
        return CR_ECORRUPT;
    memcpy(eh, p, sizeof *eh);
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB)
        return CR_ECORRUPT;
    return 0;
}

/* Table of n entries of entsize bytes at off must fit in limit; returns its end. */
static int table_end(uint64_t off, uint64_t n, uint64_t entsize, uint64_t limit, uint64_t *end)
{
    if (n && entsize > limit / n)
        return CR_ECORRUPT;
    if (!cr__in_bounds(off, n * entsize, limit))
        return CR_ECORRUPT;
    *end = off + n * entsize;
    return 0;
}

/* Section count and name-table index, following the extended numbering that ELF uses when
 * there are 0xff00 sections or more (counts kept in section header 0). */
static int open_elf(elf_t *e, const uint8_t *p, size_t limit)
{
    Elf64_Ehdr eh;
    Elf64_Shdr sh0;
    uint64_t end;
    int rc = read_ehdr(p, limit, &eh);

    if (rc)
        return rc;
    *e = (elf_t){p, limit, eh.e_shoff, eh.e_shnum, eh.e_shentsize, eh.e_shstrndx};
    if (e->shoff == 0) {
        e->shnum = 0;
        return 0;
    }
    if (e->shentsize < sizeof(Elf64_Shdr) || table_end(e->shoff, 1, e->shentsize, limit, &end))
        return CR_ECORRUPT;
    memcpy(&sh0, p + e->shoff, sizeof sh0);
    if (e->shnum == 0)
        e->shnum = sh0.sh_size > UINT32_MAX ? UINT32_MAX : (uint32_t)sh0.sh_size;
    if (e->shstrndx == SHN_XINDEX)
        e->shstrndx = sh0.sh_link;
    return table_end(e->shoff, e->shnum, e->shentsize, limit, &end);
}

static void get_shdr(const elf_t *e, uint32_t i, Elf64_Shdr *sh)
{
    memcpy(sh, e->p + e->shoff + (uint64_t)i * e->shentsize, sizeof *sh);
}

/* Sections whose bytes are in the file; only these are ever read. */
static int has_bytes(const Elf64_Shdr *sh)
{
    return sh->sh_type != SHT_NOBITS && sh->sh_type != SHT_NULL &&
           sh->sh_type != SHT_CUDA_NOBITS_GLOBAL && sh->sh_type != SHT_CUDA_NOBITS_SHARED;
}

static int section_end(const Elf64_Shdr *sh, uint64_t limit, uint64_t *end)
{
    if (!has_bytes(sh)) {
        *end = 0;
        return 0;
    }
    if (!cr__in_bounds(sh->sh_offset, sh->sh_size, limit))
        return CR_ECORRUPT;
    *end = sh->sh_offset + sh->sh_size;
    return 0;
}

static int segments_end(const uint8_t *p, const Elf64_Ehdr *eh, uint64_t limit, uint64_t *end)
{
    uint64_t t;
    Elf64_Phdr ph;

    if (eh->e_phoff == 0 || eh->e_phnum == 0)
        return 0;
    if (eh->e_phentsize < sizeof ph ||
        table_end(eh->e_phoff, eh->e_phnum, eh->e_phentsize, limit, &t))
        return CR_ECORRUPT;
    if (t > *end)
        *end = t;
    for (uint32_t i = 0; i < eh->e_phnum; i++) {
        memcpy(&ph, p + eh->e_phoff + (uint64_t)i * eh->e_phentsize, sizeof ph);
        if (!cr__in_bounds(ph.p_offset, ph.p_filesz, limit))
            return CR_ECORRUPT;
        if (ph.p_offset + ph.p_filesz > *end)
            *end = ph.p_offset + ph.p_filesz;
    }
    return 0;
}

int cr__elf_measure(const uint8_t *p, size_t limit, size_t *size)
{
    Elf64_Ehdr eh;
    Elf64_Shdr sh;
    elf_t e;
    uint64_t end = sizeof eh, t;
    int rc = open_elf(&e, p, limit);

    if (rc)
        return rc;
    memcpy(&eh, p, sizeof eh);
    if (e.shnum && table_end(e.shoff, e.shnum, e.shentsize, limit, &t) == 0 && t > end)
        end = t;
    for (uint32_t i = 0; i < e.shnum; i++) {
        get_shdr(&e, i, &sh);
        if (section_end(&sh, limit, &t))
            return CR_ECORRUPT;
        if (t > end)
            end = t;
    }
    rc = segments_end(p, &eh, limit, &end);
    if (rc)
        return rc;
    *size = (size_t)end;
    return 0;
}

unsigned cr__elf_arch(const uint8_t *p, size_t size)
{
    Elf64_Ehdr eh;

    if (read_ehdr(p, size, &eh))
        return 0;
    /* ABI version 8 (CUDA 12.8+) moved the SM number from bits 0-7 to bits 8-15. */
    if (eh.e_ident[EI_ABIVERSION] >= 8)
        return (eh.e_flags >> 8) & 0xff;
    return eh.e_flags & 0xff;
}

/* ---- names ---- */

/* The NUL-terminated string at off inside tab, or NULL when it runs off the table. */
static const char *str_at(const uint8_t *tab, size_t tab_size, uint64_t off)
{
    if (!tab || off >= tab_size || !memchr(tab + off, 0, tab_size - off))
        return NULL;
    return (const char *)tab + off;
}

static const char *section_name(const elf_t *e, const Elf64_Shdr *sh)
{
    Elf64_Shdr st;

    if (e->shstrndx == SHN_UNDEF || e->shstrndx >= e->shnum)
        return NULL;
    get_shdr(e, e->shstrndx, &st);
    if (st.sh_type != SHT_STRTAB)
        return NULL;
    return str_at(e->p + st.sh_offset, st.sh_size, sh->sh_name);
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- .nv.info attributes ---- */

/* Reads the attribute at *off; returns 1 with *a set, 0 at the end, CR_ECORRUPT. */
static int next_attr(const uint8_t *sec, size_t size, size_t *off, attr_t *a)
{
    if (*off == size)
        return 0;
    if (size - *off < 4)
        return CR_ECORRUPT;
    a->fmt = sec[*off];
    a->code = sec[*off + 1];
    a->val = cr_le_get16(sec + *off + 2);
    a->payload = NULL;
    *off += 4;
    if (a->fmt == EIFMT_SVAL) {
        if (size - *off < a->val)
            return CR_ECORRUPT;
        a->payload = sec + *off;
        *off += a->val;
    } else if (a->fmt < EIFMT_NVAL || a->fmt > EIFMT_HVAL) {
        return CR_ECORRUPT; /* unknown format: its length is unknown too */
    }
    return 1;
}

/* x * y * z of a MAX_THREADS/REQNTID payload, saturated to 32 bits. */
static uint32_t threads_of(const attr_t *a)
{
    uint64_t n = 1;

    if (a->fmt != EIFMT_SVAL || a->val < 12)
        return 0;
    for (int i = 0; i < 3; i++) {
        uint32_t d = cr_le_get32(a->payload + 4 * i);
        n = d && n > UINT32_MAX / d ? (uint64_t)UINT32_MAX + 1 : n * d;
    }
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

static int is_kparam(const attr_t *a)
{
    return (a->code == EIATTR_KPARAM_INFO || a->code == EIATTR_KPARAM_INFO_V2) &&
           a->fmt == EIFMT_SVAL && a->val >= 12;
}

/* Places one parameter record: both kinds start {u32 index, u16 ordinal, u16 offset};
 * KPARAM_INFO then has u32 flags with the size in bits 18..31, KPARAM_INFO_V2 (kernels whose
 * parameters pass 4 KiB) a u16 size and u16 attributes. */
static int put_param(cr_kernel_info_t *k, uint8_t *seen, const attr_t *a)
{
    uint16_t ord = cr_le_get16(a->payload + 4);

    /* Every ordinal exactly once: a gap or a repeat makes the layout meaningless. */
    if (ord >= k->param_count || seen[ord])
        return CR_ECORRUPT;
    seen[ord] = 1;
    k->params[ord].offset = cr_le_get16(a->payload + 6);
    if (a->code == EIATTR_KPARAM_INFO_V2)
        k->params[ord].size = cr_le_get16(a->payload + 8);
    else
        k->params[ord].size = (cr_le_get32(a->payload + 8) >> 18) & 0x3fff;
    return 0;
}

/* Parameter buffer size when EIATTR_CBANK_PARAM_SIZE is missing: the end of the last one. */
static uint32_t params_end(const cr_kernel_info_t *k)
{
    uint32_t end = 0;

    for (uint32_t i = 0; i < k->param_count; i++)
        if (k->params[i].offset + k->params[i].size > end)
            end = k->params[i].offset + k->params[i].size;
    return end;
}

/* Reads params, their total size and the thread limit from .nv.info.<kernel>. */
static int read_kernel_info(const uint8_t *sec, size_t size, cr_kernel_info_t *k)
{
    attr_t a;
    size_t off = 0;
    uint8_t *seen = NULL;
    int have_size = 0, r;

    while ((r = next_attr(sec, size, &off, &a)) == 1)
        k->param_count += (uint32_t)is_kparam(&a);
    if (r < 0)
        return r;
    if (k->param_count) {
        k->params = calloc(k->param_count, sizeof *k->params);
        seen = calloc(k->param_count, 1);
        if (!k->params || !seen) {
            r = CR_ENOMEM;
            goto out;
        }
    }
    for (off = 0; (r = next_attr(sec, size, &off, &a)) == 1;) {
        if (is_kparam(&a) && (r = put_param(k, seen, &a)) != 0)
            goto out;
        if (a.code == EIATTR_CBANK_PARAM_SIZE && a.fmt == EIFMT_HVAL) {
            k->param_size = a.val;
            have_size = 1;
        }
        if (a.code == EIATTR_MAX_THREADS || a.code == EIATTR_REQNTID)
            k->max_threads_per_block = threads_of(&a);
    }
    if (!have_size)
        k->param_size = params_end(k);
    if (r == 0 && params_end(k) > k->param_size)
        r = CR_ECORRUPT;
out:
    free(seen);
    return r;
}

/* ---- sections and symbols ---- */

static void maps_free(maps_t *m)
{
    free(m->info_for);
    free(m->regs);
}

/* Files one section into the maps by its name. */
static void classify_section(const elf_t *e, maps_t *m, uint32_t i, const Elf64_Shdr *sh)
{
    const char *name = section_name(e, sh);
    uint32_t text = sh->sh_info < e->shnum ? (uint32_t)sh->sh_info : 0;

    if (!name)
        return;
    if (starts_with(name, ".nv.info.") && sh->sh_type == SHT_CUDA_INFO)
        m->info_for[text] = i;
    else if (starts_with(name, ".nv.shared.reserved."))
        m->reserved_smem = 1;
    else if (starts_with(name, ".nv.shared."))
        m->shared_for[text] = i;
    else if (starts_with(name, ".nv.local."))
        m->local_for[text] = i;
    else if (strcmp(name, ".nv.global") == 0)
        m->global_sec = i;
    else if (strcmp(name, ".nv.global.init") == 0)
        m->global_init_sec = i;
    else if (strcmp(name, ".nv.constant3") == 0)
        m->const3_sec = i;
}

/* Finds the symbol table, its string table and its extended-index table. */
static int find_symtab(const elf_t *e, maps_t *m)
{
    Elf64_Shdr sh, st;
    uint32_t symtab = 0;

    for (uint32_t i = 1; i < e->shnum && !symtab; i++) {
        get_shdr(e, i, &sh);
        if (sh.sh_type == SHT_SYMTAB)
            symtab = i;
    }
    if (!symtab)
        return 0;
    get_shdr(e, symtab, &sh);
    if (sh.sh_entsize < sizeof(Elf64_Sym) || sh.sh_link == 0 || sh.sh_link >= e->shnum)
        return CR_ECORRUPT;
    get_shdr(e, sh.sh_link, &st);
    if (st.sh_type != SHT_STRTAB)
        return CR_ECORRUPT;
    m->syms = e->p + sh.sh_offset;
    m->sym_entsize = sh.sh_entsize;
    m->sym_count = sh.sh_size / sh.sh_entsize;
    m->strtab = e->p + st.sh_offset;
    m->strtab_size = st.sh_size;
    for (uint32_t i = 1; i < e->shnum; i++) {
        get_shdr(e, i, &sh);
        if (sh.sh_type == SHT_SYMTAB_SHNDX && sh.sh_link == symtab) {
            m->xindex = e->p + sh.sh_offset;
            m->xindex_count = sh.sh_size / 4;
        }
    }
    return 0;
}

/* Symbol index -> register count and frame size, from the module-wide .nv.info. */
static int read_module_info(const uint8_t *sec, size_t size, maps_t *m)
{
    attr_t a;
    size_t off = 0;
    int r;

    while ((r = next_attr(sec, size, &off, &a)) == 1) {
        uint32_t sym;
        if (a.fmt != EIFMT_SVAL || a.val < 8)
            continue;
        sym = cr_le_get32(a.payload);
        if (sym >= m->sym_count)
            continue;
        if (a.code == EIATTR_REGCOUNT)
            m->regs[sym] = cr_le_get32(a.payload + 4);
        else if (a.code == EIATTR_FRAME_SIZE)
            m->frame[sym] = cr_le_get32(a.payload + 4);
    }
    return r;
}

/* Checks every section, files them, and reads the module-wide attributes. */
static int build_maps(const elf_t *e, maps_t *m)
{
    Elf64_Shdr sh;
    uint64_t end;
    int rc;

    m->info_for = calloc((size_t)e->shnum * 3 + 1, sizeof *m->info_for);
    if (!m->info_for)
        return CR_ENOMEM;
    m->shared_for = m->info_for + e->shnum;
    m->local_for = m->shared_for + e->shnum;
    /* All sections are checked before any is used: names may live in a later one. */
    for (uint32_t i = 1; i < e->shnum; i++) {
        get_shdr(e, i, &sh);
        if (section_end(&sh, e->size, &end))
            return CR_ECORRUPT;
    }
    for (uint32_t i = 1; i < e->shnum; i++) {
        get_shdr(e, i, &sh);
        classify_section(e, m, i, &sh);
    }
    rc = find_symtab(e, m);
    if (rc || !m->syms)
        return rc;
    m->regs = calloc(m->sym_count * 2 + 1, sizeof *m->regs);
    if (!m->regs)
        return CR_ENOMEM;
    m->frame = m->regs + m->sym_count;
    for (uint32_t i = 1; i < e->shnum && rc == 0; i++) {
        get_shdr(e, i, &sh);
        const char *name = section_name(e, &sh);
        if (name && strcmp(name, ".nv.info") == 0 && has_bytes(&sh))
            rc = read_module_info(e->p + sh.sh_offset, sh.sh_size, m);
    }
    return rc;
}

static void get_sym(const maps_t *m, size_t i, Elf64_Sym *s)
{
    memcpy(s, m->syms + i * m->sym_entsize, sizeof *s);
}

/* A symbol's section index, through SHT_SYMTAB_SHNDX when it does not fit in 16 bits;
 * 0 for undefined, absolute, common or out-of-range ones. */
static uint32_t sym_section(const elf_t *e, const maps_t *m, size_t i, const Elf64_Sym *s)
{
    uint32_t sec = s->st_shndx;

    if (sec == SHN_XINDEX)
        sec = i < m->xindex_count ? cr_le_get32(m->xindex + 4 * i) : 0;
    else if (sec >= SHN_LORESERVE)
        sec = 0;
    return sec < e->shnum ? sec : 0;
}

static uint32_t section_size32(const elf_t *e, uint32_t i)
{
    Elf64_Shdr sh;

    if (!i)
        return 0;
    get_shdr(e, i, &sh);
    return sh.sh_size > UINT32_MAX ? UINT32_MAX : (uint32_t)sh.sh_size;
}

static uint32_t static_shared(const elf_t *e, const maps_t *m, uint32_t text)
{
    uint32_t n = section_size32(e, m->shared_for[text]);

    if (m->reserved_smem && m->shared_for[text])
        n = n >= RESERVED_SMEM_BYTES ? n - RESERVED_SMEM_BYTES : 0;
    return n;
}

/* Fills the attributes that do not come from .nv.info.<kernel>. */
static void kernel_resources(const elf_t *e, const maps_t *m, size_t symi, uint32_t text,
                             cr_kernel_info_t *k)
{
    Elf64_Shdr sh;

    get_shdr(e, text, &sh);
    /* Older cubins keep the register count only in the top byte of the .text sh_info. */
    k->num_regs = m->regs[symi] ? m->regs[symi] : (uint32_t)(sh.sh_info >> 24);
    k->local_bytes = m->frame[symi] ? m->frame[symi] : section_size32(e, m->local_for[text]);
    k->static_shared_bytes = static_shared(e, m, text);
    k->const_bytes = section_size32(e, m->const3_sec);
}

static int add_kernel(cr__builder_t *b, const elf_t *e, const maps_t *m, size_t symi,
                      const char *name, uint32_t text)
{
    cr_kernel_info_t k = {0};
    uint32_t info = m->info_for[text];
    int rc = 0;

    k.name = strdup(name);
    if (!k.name)
        return CR_ENOMEM;
    if (info) {
        Elf64_Shdr sh;
        get_shdr(e, info, &sh);
        rc = read_kernel_info(e->p + sh.sh_offset, sh.sh_size, &k);
        if (rc)
            goto fail;
    }
    kernel_resources(e, m, symi, text, &k);
    return cr__builder_add_kernel(b, &k);
fail:
    cr__kernel_clear(&k);
    return rc;
}

/* Copies a global's initial bytes, or leaves init NULL when they are all zero. */
static int copy_init(const uint8_t *src, uint64_t size, cr_global_info_t *g)
{
    uint8_t *init;
    uint64_t i = 0;

    while (i < size && !src[i])
        i++;
    if (i == size)
        return 0;
    init = malloc(size);
    if (!init)
        return CR_ENOMEM;
    memcpy(init, src, size);
    g->init = init;
    return 0;
}

static int add_global(cr__builder_t *b, const elf_t *e, const maps_t *m, const Elf64_Sym *s,
                      const char *name, uint32_t sec)
{
    cr_global_info_t g = {0};
    Elf64_Shdr sh;
    int rc = 0;

    get_shdr(e, sec, &sh);
    if (!cr__in_bounds(s->st_value, s->st_size, sh.sh_size))
        return CR_ECORRUPT;
    g.name = strdup(name);
    if (!g.name)
        return CR_ENOMEM;
    g.size = s->st_size;
    g.is_const = sec == m->const3_sec;
    if (has_bytes(&sh))
        rc = copy_init(e->p + sh.sh_offset + s->st_value, s->st_size, &g);
    if (rc)
        goto fail;
    return cr__builder_add_global(b, &g);
fail:
    cr__global_clear(&g);
    return rc;
}

static int is_global_section(const maps_t *m, uint32_t sec)
{
    return sec && (sec == m->global_sec || sec == m->global_init_sec || sec == m->const3_sec);
}

static int collect_symbol(cr__builder_t *b, const elf_t *e, const maps_t *m, size_t i)
{
    Elf64_Sym s;
    const char *name;
    uint32_t sec;

    get_sym(m, i, &s);
    sec = sym_section(e, m, i, &s);
    name = str_at(m->strtab, m->strtab_size, s.st_name);
    if (!sec || !name || !*name)
        return 0;
    if (ELF64_ST_TYPE(s.st_info) == STT_FUNC && (s.st_other & STO_CUDA_ENTRY))
        return add_kernel(b, e, m, i, name, sec);
    if ((ELF64_ST_TYPE(s.st_info) == STT_OBJECT || ELF64_ST_TYPE(s.st_info) == STT_CUDA_OBJECT) &&
        is_global_section(m, sec))
        return add_global(b, e, m, &s, name, sec);
    return 0;
}

int cr__elf_collect(cr__builder_t *b, const uint8_t *p, size_t size)
{
    elf_t e;
    maps_t m = {0};
    int rc = open_elf(&e, p, size);

    if (rc)
        return rc;
    rc = build_maps(&e, &m);
    for (size_t i = 1; rc == 0 && i < m.sym_count; i++)
        rc = collect_symbol(b, &e, &m, i);
    maps_free(&m);
    return rc;
}
