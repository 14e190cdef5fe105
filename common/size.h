/* Sizes written for people: "4GiB", "512MiB", "1.5G", "1048576". */
#ifndef CR_SIZE_H
#define CR_SIZE_H

#include <stdint.h>

/* Parses a positive size with an optional unit (k, KiB, M, MiB, G, GiB, T, TiB, B; case
 * does not matter; all binary). 0 or CR_EINVAL. */
int cr_parse_size(const char *text, uint64_t *out);

#endif
