/* msgpack maps keyed by strings (see mpfield.h). */
#include "mpfield.h"

#include <string.h>

void cr_mp_pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

void cr_mp_pack_kv_u64(msgpack_packer *pk, const char *key, uint64_t value)
{
    cr_mp_pack_str(pk, key);
    msgpack_pack_uint64(pk, value);
}

void cr_mp_pack_kv_str(msgpack_packer *pk, const char *key, const char *value)
{
    cr_mp_pack_str(pk, key);
    cr_mp_pack_str(pk, value);
}

const msgpack_object *cr_mp_field(const msgpack_object *map, const char *key)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    size_t n = strlen(key);
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
            memcmp(k->via.str.ptr, key, n) == 0)
            return &map->via.map.ptr[i].val;
    }
    return NULL;
}

void cr_mp_copy_str(char *dst, size_t cap, const msgpack_object *o)
{
    size_t n = 0;
    if (o && o->type == MSGPACK_OBJECT_STR) {
        n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
        memcpy(dst, o->via.str.ptr, n);
    }
    dst[n] = '\0';
}
