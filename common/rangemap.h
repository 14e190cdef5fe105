/* A set of disjoint address ranges [start, start + size), each with a value, kept sorted so
 * that the range containing an address is found by binary search. Used for allocation maps
 * (the client's device and pinned-host ranges, the server's per-session allocations). Not
 * thread-safe: the owner locks. */
#ifndef CR_RANGEMAP_H
#define CR_RANGEMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t start;
    uint64_t size;
    uint64_t value;
} cr_range_t;

typedef struct {
    cr_range_t *ranges;
    size_t count;
    size_t cap;
    uint64_t total; /* sum of sizes */
} cr_rangemap_t;

#define CR_RANGEMAP_INIT                                                                           \
    {                                                                                              \
        NULL, 0, 0, 0                                                                              \
    }

/* Adds a range. CR_EEXISTS if it overlaps one already present, CR_EINVAL for size 0 or an
 * overflowing end, CR_ENOMEM. */
int cr_rangemap_add(cr_rangemap_t *m, uint64_t start, uint64_t size, uint64_t value);
/* Removes the range that starts exactly at `start`; copies it to *out if out. 1 if found. */
int cr_rangemap_remove(cr_rangemap_t *m, uint64_t start, cr_range_t *out);
/* Removes every range that overlaps [start, start + size); returns how many. */
size_t cr_rangemap_remove_overlapping(cr_rangemap_t *m, uint64_t start, uint64_t size);
/* The range containing addr, or NULL. The pointer is valid until the map changes. */
const cr_range_t *cr_rangemap_find(const cr_rangemap_t *m, uint64_t addr);
/* 1 when [addr, addr + len) lies inside one range (len 0 counts as inside when addr does). */
int cr_rangemap_contains(const cr_rangemap_t *m, uint64_t addr, uint64_t len);
/* 1 when [addr, addr + len) is covered by ranges that follow one another without a gap
 * (len 0: when addr is inside one). */
int cr_rangemap_covers(const cr_rangemap_t *m, uint64_t addr, uint64_t len);
void cr_rangemap_free(cr_rangemap_t *m);

#endif
