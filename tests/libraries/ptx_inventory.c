/* ptx_inventory: what the emulated device can do with the code of a shared library (cuBLAS,
 * cuFFT, cuRAND...), read straight from the file, without a server.
 *
 *   ptx_inventory SM LIBRARY [KERNEL...]
 *
 * SM is a compute capability as the emulated device takes it (e.g. 12.0). For every fatbin
 * container in LIBRARY (in .nv_fatbin, or among its data, where cuFFT keeps its kernels) it
 * finds what a device of that capability would load (the CUDA_ERROR_NO_BINARY_FOR_GPU
 * containers are listed with their entries and kernels) and which PTX the interpreter would
 * run; it compiles that PTX as the emulated device does and counts the instructions the
 * interpreter does not know, by instruction text and reason: how many kernels reach one, and
 * at how many places of the PTX. Bare cubins stored as such are counted too (SASS only,
 * never runnable here); code a library keeps compressed in its own format (cuBLASLt's GEMM
 * cubins) is not seen. With KERNEL names (mangled, as the server's log prints them) only
 * those kernels are counted, and where each one was found is printed.
 *
 * A diagnostic for deciding what the interpreter should learn next; the test of record is
 * cublas_emu. Output: a summary and a table, most widespread instruction first. Exit 0, or
 * 1 when the library cannot be read. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_api.h"
#include "error.h"
#include "fatbin.h"
#include "internal.h" /* server/emu/ptx: the decoded programs */
#include "ptx.h"

#define EI_CLASS_OFFSET 4   /* e_ident[EI_CLASS]: 2 for 64-bit */
#define EM_CUDA_MACHINE 190 /* e_machine of NVIDIA cubins */

typedef struct {
    char *text; /* instruction text and reason */
    unsigned kernels, places;
} tally_t;

static tally_t *tallies;
static size_t ntallies, cap_tallies;

static tally_t *tally(const char *insn, const char *why)
{
    char key[512];
    snprintf(key, sizeof key, "%s  [%s]", insn, why);
    for (size_t i = 0; i < ntallies; i++)
        if (strcmp(tallies[i].text, key) == 0)
            return &tallies[i];
    if (ntallies == cap_tallies) {
        cap_tallies = cap_tallies ? cap_tallies * 2 : 64;
        tallies = realloc(tallies, cap_tallies * sizeof *tallies);
        if (!tallies)
            exit(1);
    }
    tallies[ntallies] = (tally_t){strdup(key), 0, 0};
    return &tallies[ntallies++];
}

static int by_kernels(const void *a, const void *b)
{
    const tally_t *x = a, *y = b;
    if (x->kernels != y->kernels)
        return x->kernels < y->kernels ? 1 : -1;
    return strcmp(x->text, y->text);
}

/* The whole file: libraries keep fatbin containers in .nv_fatbin (cuBLAS, cuRAND) or among
 * their own data (cuFFT), so every byte is searched. */
static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    long len;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (data = malloc((size_t)len)) && fread(data, 1, (size_t)len, f) == (size_t)len) {
        *size = (size_t)len;
    } else {
        free(data);
        data = NULL;
    }
    fclose(f);
    return data;
}

/* The PTX entry the emulated device runs (server/emu/kernel.c: ptx_entry). */
static const cr_image_entry_t *ptx_entry(const cr_image_t *img, unsigned sm)
{
    const cr_image_entry_t *best = NULL;
    for (uint32_t i = 0; i < img->entry_count; i++) {
        const cr_image_entry_t *e = &img->entries[i];
        if (e->kind != CR_IMAGE_PTX || e->arch > sm)
            continue;
        if (e->arch_suffix == 'a' && e->arch != sm)
            continue;
        if (e->arch_suffix == 'f' && e->arch / 10 != sm / 10)
            continue;
        if (!best || e->arch > best->arch)
            best = e;
    }
    return best;
}

static void print_entries(const cr_image_t *img)
{
    for (uint32_t i = 0; i < img->entry_count; i++) {
        const cr_image_entry_t *e = &img->entries[i];
        printf(" %s_%u%s", e->kind == CR_IMAGE_PTX ? "compute" : "sm", e->arch,
               e->arch_suffix == 'a'   ? "a"
               : e->arch_suffix == 'f' ? "f"
                                       : "");
    }
    printf("\n");
}

static int wanted(const char *name, char **kernels, int nkernels)
{
    if (nkernels == 0)
        return 1;
    for (int i = 0; i < nkernels; i++)
        if (strcmp(kernels[i], name) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    unsigned sm;
    size_t size = 0;
    if (argc < 3 || cr_emu_parse_compute_capability(argv[1], &sm) != 0) {
        fprintf(stderr, "usage: ptx_inventory SM LIBRARY [KERNEL...]  (SM one of %s)\n",
                CR_EMU_COMPUTE_CAPABILITIES);
        return 2;
    }
    uint8_t *file = read_file(argv[2], &size);
    if (!file) {
        fprintf(stderr, "ptx_inventory: cannot read %s\n", argv[2]);
        return 1;
    }
    char **kernels = argv + 3;
    int nkernels = argc - 3;
    unsigned containers = 0, no_binary = 0, no_ptx = 0, bad_ptx = 0, kernel_total = 0,
             kernels_ptx = 0, kernels_blocked = 0;
    unsigned raw_cubins = 0, raw_kernels = 0;
    size_t off = 0, next_fatbin = 0, next_elf = 0;
    static const uint8_t fatbin_magic[4] = {0x50, 0xed, 0x55, 0xba}; /* CR_FATBIN_MAGIC */
    static const uint8_t elf_magic[4] = {0x7f, 'E', 'L', 'F'};
    while (off + 16 <= size) {
        /* the next candidate of either kind, each searched again only once passed */
        if (next_fatbin < off) {
            const uint8_t *h = memmem(file + off, size - off, fatbin_magic, 4);
            next_fatbin = h ? (size_t)(h - file) : SIZE_MAX;
        }
        if (next_elf < off) {
            const uint8_t *h = memmem(file + off, size - off, elf_magic, 4);
            next_elf = h ? (size_t)(h - file) : SIZE_MAX;
        }
        size_t at = next_fatbin < next_elf ? next_fatbin : next_elf;
        if (at == SIZE_MAX || at + 64 > size)
            break;
        off = at + 4; /* unless it is an image, below */
        cr_image_t *img = NULL;
        if (at == next_elf) {
            /* a bare cubin (cuBLASLt loads its GEMM kernels so): SASS only, never runnable
             * on the interpreter; the library's own x86 ELF header is not one (machine) */
            uint16_t machine;
            size_t len;
            memcpy(&machine, file + at + 18, 2);
            if (file[at + EI_CLASS_OFFSET] != 2 || machine != EM_CUDA_MACHINE ||
                cr_image_measure_bounded(file + at, size - at, &len) != 0 || len > size - at ||
                cr_image_parse(file + at, len, &img) != 0)
                continue;
            off = at + len;
            raw_cubins++;
            for (uint32_t k = 0; k < img->kernel_count; k++)
                if (wanted(img->kernels[k].name, kernels, nkernels)) {
                    raw_kernels++;
                    if (nkernels)
                        printf("%s: in a bare sm_%u cubin at 0x%zx: no PTX\n", img->kernels[k].name,
                               img->entries[0].arch, at);
                }
            cr_image_free(img);
            continue;
        }
        uint16_t header;
        uint64_t payload;
        memcpy(&header, file + at + 6, 2);
        memcpy(&payload, file + at + 8, 8);
        /* the magic inside other data: not a container */
        if (header != 16 || payload > size - at - 16 ||
            cr_image_parse(file + at, 16 + payload, &img) != 0)
            continue;
        off = at + 16 + payload;
        containers++;
        if (nkernels)
            for (uint32_t k = 0; k < img->kernel_count; k++)
                if (wanted(img->kernels[k].name, kernels, nkernels)) {
                    printf("%s: in the container at 0x%zx:", img->kernels[k].name, at);
                    print_entries(img);
                }
        unsigned mine = 0;
        for (uint32_t k = 0; k < img->kernel_count; k++)
            mine += (unsigned)wanted(img->kernels[k].name, kernels, nkernels);
        kernel_total += mine;
        if (!cr_image_select(img, sm)) {
            no_binary++;
            printf("container at 0x%zx (%u kernels): CUDA_ERROR_NO_BINARY_FOR_GPU; entries:", at,
                   img->kernel_count);
            print_entries(img);
            for (uint32_t k = 0; k < img->kernel_count; k++)
                printf("    %s\n", img->kernels[k].name);
        }
        const cr_image_entry_t *e = ptx_entry(img, sm);
        if (!e) {
            no_ptx += mine ? 1 : 0;
            cr_image_free(img);
            continue;
        }
        if (!mine) {
            cr_image_free(img);
            continue;
        }
        cr_ptx_module_t *m = NULL;
        char err[256];
        if (cr_ptx_module_load((const char *)e->data, e->size, &m, err, sizeof err) != 0) {
            bad_ptx++;
            printf("container at 0x%zx: its compute_%u PTX does not compile: %s\n", at, e->arch,
                   err);
            cr_image_free(img);
            continue;
        }
        /* places: each PTX instruction once per module, however many kernels reach it */
        uint8_t *seen = calloc(m->ir.ninsns ? m->ir.ninsns : 1, 1);
        if (!seen)
            return 1;
        for (uint32_t i = 0; i < m->nprogs; i++) {
            const cr__prog_t *p = &m->progs[i];
            if (!wanted(p->name, kernels, nkernels))
                continue;
            kernels_ptx++;
            if (p->unsupported < 0)
                continue;
            kernels_blocked++;
            /* each distinct (instruction, reason) once per kernel; tallies grow by at most
             * one per instruction of this kernel */
            unsigned *counted = calloc(ntallies + p->ncode + 1, sizeof *counted);
            if (!counted)
                return 1;
            for (uint32_t pc = 0; pc < p->ncode; pc++) {
                const cr__insn_t *in = &p->code[pc];
                if (in->op != CR__OP_UNSUPPORTED)
                    continue;
                uint32_t src = p->src[pc];
                const char *text = src < m->ir.ninsns ? cr__ir_str(&m->ir, m->ir.insns[src].text)
                                                      : "(added by the decoder)";
                const char *why = in->r[0] < p->nwhy ? p->why[in->r[0]] : "?";
                tally_t *t = tally(text, why);
                size_t idx = (size_t)(t - tallies);
                if (!counted[idx]) {
                    counted[idx] = 1;
                    t->kernels++;
                }
                if (src < m->ir.ninsns && !seen[src]) {
                    seen[src] = 1;
                    t->places++;
                }
            }
            free(counted);
        }
        free(seen);
        cr_ptx_module_free(m);
        cr_image_free(img);
    }
    printf("%s at compute capability %u.%u: %u containers, %u kernels%s; %u containers "
           "CUDA_ERROR_NO_BINARY_FOR_GPU, %u with kernels but no PTX to run, %u whose PTX does "
           "not compile; %u kernels in PTX the interpreter compiled, %u of them reach an "
           "instruction it does not know; %u bare cubins (no PTX) with %u kernels%s\n",
           argv[2], sm / 10, sm % 10, containers, kernel_total, nkernels ? " of those named" : "",
           no_binary, no_ptx, bad_ptx, kernels_ptx, kernels_blocked, raw_cubins, raw_kernels,
           nkernels ? " of those named" : "");
    qsort(tallies, ntallies, sizeof *tallies, by_kernels);
    printf("%8s %8s  %s\n", "kernels", "places", "instruction  [reason]");
    for (size_t i = 0; i < ntallies; i++)
        printf("%8u %8u  %s\n", tallies[i].kernels, tallies[i].places, tallies[i].text);
    free(file);
    return 0;
}
