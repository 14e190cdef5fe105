/* msgpack maps keyed by strings (the hello, @status): packing strings, finding fields. */
#ifndef CR_MPFIELD_H
#define CR_MPFIELD_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

/* Packs a NUL-terminated string. */
void cr_mp_pack_str(msgpack_packer *pk, const char *s);
/* Packs a map's entry: the key, then its value. */
void cr_mp_pack_kv_u64(msgpack_packer *pk, const char *key, uint64_t value);
void cr_mp_pack_kv_str(msgpack_packer *pk, const char *key, const char *value);
/* The value under the string key `key` of map; NULL when map is NULL, not a map, or has no
 * such key. */
const msgpack_object *cr_mp_field(const msgpack_object *map, const char *key);
/* Copies a string object into dst (cap > 0 bytes, NUL-terminated, cut to fit); "" when o is
 * NULL or not a string. */
void cr_mp_copy_str(char *dst, size_t cap, const msgpack_object *o);

#endif
