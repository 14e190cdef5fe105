/* The (name, ABI version, variant) table behind cuGetProcAddress, generated from the PFN
 * typedefs of cudaTypedefs.h (cr_procaddr.c in the build tree). */
#ifndef CR_PROCADDR_H
#define CR_PROCADDR_H

enum { CR_PROC_PLAIN = 0, CR_PROC_PTDS = 1, CR_PROC_PTSZ = 2 };

typedef struct {
    const char *name;
    int version; /* the ABI version the entry appeared in */
    int variant; /* CR_PROC_* */
    void *fn;
} cr_proc_entry_t;

/* Sorted by name, then variant, then version. */
extern const cr_proc_entry_t cr_proc_table[];
extern const unsigned cr_proc_table_size;

#endif
