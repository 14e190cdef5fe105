/* libFuzzer target: a msgpack body as the server decodes it (cr_request_decode): the
 * allocation-free walk (cr_mpcheck), then msgpack-c's unpacker, then the string-keyed field
 * lookups of the hello (common/mpfield.c).
 *
 * Feeds: the whole input as one body.
 * Checks: msgpack-c is only ever given what cr_mpcheck accepted, and then it must decode
 * all of it as one object; the decoded tree has at most one node per input byte, nests at most 32 containers deep and has no string,
 * binary or extension longer than the input (what mpcheck promises: unpacking allocates in
 * proportion to the input); packing the tree gives bytes that cr_mpcheck accepts and that pack
 * again to the same bytes; every string key of every map is found by cr_mp_field at its first
 * occurrence, and cr_mp_copy_str cuts and terminates strings as its contract says. */
#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "mpcheck.h"
#include "mpfield.h"

typedef struct {
    size_t nodes;
    size_t input;
    int depth; /* containers open around the node being walked */
} walk_t;

/* One map's string keys against cr_mp_field and cr_mp_copy_str. */
static void check_fields(const msgpack_object *map)
{
    const msgpack_object_map *m = &map->via.map;
    char key[64], copy[16];
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key;
        /* (msgpack-c leaves an empty string's pointer NULL) */
        /* keys as the server names them: NUL-terminated, never empty (cr_mp_field with ""
         * would pass memcmp the NULL pointer msgpack-c gives an empty string) */
        size_t n = k->type == MSGPACK_OBJECT_STR ? k->via.str.size : 0;
        if (n == 0 || n >= sizeof key || memchr(k->via.str.ptr, 0, n))
            continue;
        memcpy(key, k->via.str.ptr, n);
        key[n] = '\0';
        uint32_t first = 0;
        while (!(m->ptr[first].key.type == MSGPACK_OBJECT_STR &&
                 m->ptr[first].key.via.str.size == n &&
                 memcmp(m->ptr[first].key.via.str.ptr, key, n) == 0))
            first++;
        const msgpack_object *v = cr_mp_field(map, key);
        FUZZ_CHECK(v == &m->ptr[first].val);

        /* a copy is the string's prefix that fits, always terminated */
        for (size_t cap = 1; cap <= sizeof copy; cap += 7) {
            memset(copy, 'x', sizeof copy);
            cr_mp_copy_str(copy, cap, v);
            size_t got = strnlen(copy, cap);
            FUZZ_CHECK(got < cap);
            if (v->type == MSGPACK_OBJECT_STR) {
                size_t want = v->via.str.size < cap - 1 ? v->via.str.size : cap - 1;
                FUZZ_CHECK(want == 0 || memcmp(copy, v->via.str.ptr, want) == 0);
                FUZZ_CHECK(got <= want);
            } else {
                FUZZ_CHECK_EQ(got, 0);
            }
        }
    }
}

static void walk(walk_t *w, const msgpack_object *o)
{
    w->nodes++;
    FUZZ_CHECK(w->nodes <= w->input);
    switch (o->type) {
    case MSGPACK_OBJECT_STR:
        FUZZ_CHECK(o->via.str.size <= w->input);
        break;
    case MSGPACK_OBJECT_BIN:
        FUZZ_CHECK(o->via.bin.size <= w->input);
        break;
    case MSGPACK_OBJECT_EXT:
        FUZZ_CHECK(o->via.ext.size <= w->input);
        break;
    case MSGPACK_OBJECT_ARRAY:
        FUZZ_CHECK(++w->depth <= 32); /* mpcheck's nesting limit */
        for (uint32_t i = 0; i < o->via.array.size; i++)
            walk(w, &o->via.array.ptr[i]);
        w->depth--;
        break;
    case MSGPACK_OBJECT_MAP:
        FUZZ_CHECK(++w->depth <= 32);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            walk(w, &o->via.map.ptr[i].key);
            walk(w, &o->via.map.ptr[i].val);
        }
        w->depth--;
        check_fields(o);
        break;
    default:
        break;
    }
    /* the lookups refuse anything that is not a map */
    if (o->type != MSGPACK_OBJECT_MAP)
        FUZZ_CHECK(cr_mp_field(o, "protocol") == NULL);
}

/* Unpacks exactly one object from data into zone and packs it into out: what cr_mpcheck
 * accepted, msgpack-c must unpack (its stack holds 32 containers, empty ones too, and
 * cr_mpcheck counts them alike). */
static int repack(const void *data, size_t size, msgpack_zone *zone, msgpack_sbuffer *out)
{
    msgpack_object root;
    size_t off = 0;
    int rc = msgpack_unpack(data, size, &off, zone, &root);
    FUZZ_CHECK_EQ(rc, MSGPACK_UNPACK_SUCCESS);
    FUZZ_CHECK_EQ(off, size);
    walk_t w = {0, size, 0};
    walk(&w, &root);
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    FUZZ_CHECK_EQ(msgpack_pack_object(&pk, root), 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (cr_mpcheck(data, size) != 0)
        return 0; /* refused: the server closes the connection without unpacking */
    msgpack_zone zone;
    msgpack_sbuffer once, twice;
    msgpack_zone_init(&zone, 2048);
    msgpack_sbuffer_init(&once);
    msgpack_sbuffer_init(&twice);
    if (repack(data, size, &zone, &once) == 0) {
        /* what a packer writes is well-formed, and stable under another round */
        FUZZ_CHECK_EQ(cr_mpcheck(once.data, once.size), 0);
        msgpack_zone_clear(&zone);
        FUZZ_CHECK_EQ(repack(once.data, once.size, &zone, &twice), 0);
        FUZZ_CHECK_EQ(twice.size, once.size);
        FUZZ_CHECK(memcmp(once.data, twice.data, once.size) == 0);
    }
    msgpack_sbuffer_destroy(&once);
    msgpack_sbuffer_destroy(&twice);
    msgpack_zone_destroy(&zone);
    return 0;
}
