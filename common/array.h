/* Growing a plain C array: one rule for every module that keeps `count` elements in a
 * malloc'd array of `cap`. */
#ifndef CR_ARRAY_H
#define CR_ARRAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Makes room in *array (count elements of `size` bytes, room for *cap) for one more,
 * doubling it (8 at first). 0, or -1 when out of memory (*array unchanged). */
static inline int cr_array_room(void **array, size_t *cap, size_t count, size_t size)
{
    if (count < *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 8;
    if (n > SIZE_MAX / size)
        return -1;
    void *grown = realloc(*array, n * size);
    if (!grown)
        return -1;
    *array = grown;
    *cap = n;
    return 0;
}

#endif
