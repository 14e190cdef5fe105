/* Checks msgpack bytes from the network before msgpack-c unpacks them (see mpcheck.c). */
#ifndef CR_MPCHECK_H
#define CR_MPCHECK_H

#include <stddef.h>

/* 0 when data holds exactly one well-formed object whose every declared count and length
 * fits in the bytes, nested at most 32 deep; CR_ECORRUPT otherwise. */
int cr_mpcheck(const void *data, size_t size);

#endif
