/* A hash map from nonzero 64-bit keys to 64-bit values (open addressing, linear probing).
 * Used for handle tables (id -> object, object -> id) on both sides. Not thread-safe: the
 * owner locks. */
#ifndef CR_IDMAP_H
#define CR_IDMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t *keys; /* 0 = empty, UINT64_MAX = removed */
    uint64_t *values;
    size_t cap;   /* power of two, or 0 */
    size_t count; /* live entries */
    size_t used;  /* live + removed slots */
} cr_idmap_t;

#define CR_IDMAP_INIT                                                                              \
    {                                                                                              \
        NULL, NULL, 0, 0, 0                                                                        \
    }

/* Inserts or replaces. key must not be 0 or UINT64_MAX. 0, CR_EINVAL or CR_ENOMEM. */
int cr_idmap_put(cr_idmap_t *m, uint64_t key, uint64_t value);
/* 1 and *value when present, else 0. value may be NULL. */
int cr_idmap_get(const cr_idmap_t *m, uint64_t key, uint64_t *value);
/* 1 when it was present. */
int cr_idmap_remove(cr_idmap_t *m, uint64_t key, uint64_t *value);
/* Iteration: start with *pos = 0; returns 0 at the end. Do not modify the map meanwhile. */
int cr_idmap_next(const cr_idmap_t *m, size_t *pos, uint64_t *key, uint64_t *value);
void cr_idmap_free(cr_idmap_t *m);

#endif
