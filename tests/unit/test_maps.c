/* The handle map (idmap) and the range map against simple reference models. */
#include <stdlib.h>

#include "check.h"
#include "error.h"
#include "idmap.h"
#include "rangemap.h"

static void test_idmap(void)
{
    cr_idmap_t m = CR_IDMAP_INIT;
    uint64_t v = 0;
    CHECK_EQ_INT(cr_idmap_put(&m, 0, 1), CR_EINVAL); /* reserved keys */
    CHECK_EQ_INT(cr_idmap_put(&m, UINT64_MAX, 1), CR_EINVAL);
    CHECK_EQ_INT(cr_idmap_get(&m, 5, &v), 0);

    /* against a reference array: insert, overwrite, remove in a pseudo-random order */
    enum { N = 5000 };
    static uint64_t ref[N + 1]; /* key k -> value, 0 = absent */
    unsigned seed = 12345;
    for (int step = 0; step < 40000; step++) {
        seed = seed * 1103515245 + 12345;
        uint64_t key = 1 + (seed >> 8) % N;
        int op = (seed >> 4) % 3;
        if (op < 2) {
            uint64_t value = ((uint64_t)seed << 20) | key;
            CHECK_EQ_INT(cr_idmap_put(&m, key * 0x10000, value), 0);
            ref[key] = value;
        } else {
            int had = cr_idmap_remove(&m, key * 0x10000, &v);
            CHECK_EQ_INT(had, ref[key] != 0);
            if (had)
                CHECK_EQ_U64(v, ref[key]);
            ref[key] = 0;
        }
    }
    size_t live = 0;
    for (uint64_t k = 1; k <= N; k++) {
        int found = cr_idmap_get(&m, k * 0x10000, &v);
        CHECK_EQ_INT(found, ref[k] != 0);
        if (found)
            CHECK_EQ_U64(v, ref[k]);
        live += ref[k] != 0;
    }
    CHECK_EQ_INT(m.count, live);
    size_t pos = 0, seen = 0;
    uint64_t key;
    while (cr_idmap_next(&m, &pos, &key, &v)) {
        CHECK_EQ_U64(v, ref[key / 0x10000]);
        seen++;
    }
    CHECK_EQ_INT(seen, live);
    cr_idmap_free(&m);
}

static void test_rangemap(void)
{
    cr_rangemap_t m = CR_RANGEMAP_INIT;
    CHECK_EQ_INT(cr_rangemap_add(&m, 1000, 100, 1), 0);
    CHECK_EQ_INT(cr_rangemap_add(&m, 2000, 50, 2), 0);
    CHECK_EQ_INT(cr_rangemap_add(&m, 500, 500, 3), 0); /* touches 1000 exactly: no overlap */
    CHECK_EQ_INT(cr_rangemap_add(&m, 1099, 2, 4), CR_EEXISTS);
    CHECK_EQ_INT(cr_rangemap_add(&m, 1990, 11, 4), CR_EEXISTS);
    CHECK_EQ_INT(cr_rangemap_add(&m, 10, 0, 4), CR_EINVAL);
    CHECK_EQ_INT(cr_rangemap_add(&m, UINT64_MAX - 5, 10, 4), CR_EINVAL);
    CHECK_EQ_INT(m.count, 3);
    CHECK_EQ_U64(m.total, 650);

    const cr_range_t *r = cr_rangemap_find(&m, 1050);
    CHECK(r && r->start == 1000 && r->value == 1);
    CHECK(cr_rangemap_find(&m, 1100) == NULL); /* one past the end */
    CHECK(cr_rangemap_find(&m, 499) == NULL);
    r = cr_rangemap_find(&m, 999);
    CHECK(r && r->value == 3);
    CHECK_EQ_INT(cr_rangemap_contains(&m, 1000, 100), 1);
    CHECK_EQ_INT(cr_rangemap_contains(&m, 1000, 101), 0);
    CHECK_EQ_INT(cr_rangemap_contains(&m, 1099, 1), 1);
    CHECK_EQ_INT(cr_rangemap_contains(&m, 2049, 0), 1);
    CHECK_EQ_INT(cr_rangemap_contains(&m, 1500, 1), 0);
    /* covers: ranges one after another, [500,1000) then [1000,1100), count as one span */
    CHECK_EQ_INT(cr_rangemap_contains(&m, 900, 200), 0);
    CHECK_EQ_INT(cr_rangemap_covers(&m, 900, 200), 1);
    CHECK_EQ_INT(cr_rangemap_covers(&m, 500, 600), 1);
    CHECK_EQ_INT(cr_rangemap_covers(&m, 500, 601), 0);   /* one byte past [1000,1100) */
    CHECK_EQ_INT(cr_rangemap_covers(&m, 1050, 1000), 0); /* the gap before 2000 */
    CHECK_EQ_INT(cr_rangemap_covers(&m, 499, 2), 0);
    CHECK_EQ_INT(cr_rangemap_covers(&m, 2049, 0), 1);
    CHECK_EQ_INT(cr_rangemap_covers(&m, 2000, UINT64_MAX), 0); /* wraps */

    cr_range_t out;
    CHECK_EQ_INT(cr_rangemap_remove(&m, 1001, &out), 0); /* only by the exact start */
    CHECK_EQ_INT(cr_rangemap_remove(&m, 1000, &out), 1);
    CHECK_EQ_U64(out.size, 100);
    CHECK(cr_rangemap_find(&m, 1050) == NULL);
    CHECK_EQ_U64(m.total, 550);

    /* removing what overlaps a span: touching ranges stay */
    cr_rangemap_t o = CR_RANGEMAP_INIT;
    cr_rangemap_add(&o, 100, 10, 1);                              /* [100,110) */
    cr_rangemap_add(&o, 110, 10, 2);                              /* [110,120) */
    cr_rangemap_add(&o, 130, 10, 3);                              /* [130,140) */
    cr_rangemap_add(&o, 140, 10, 4);                              /* [140,150) */
    CHECK_EQ_INT(cr_rangemap_remove_overlapping(&o, 115, 20), 2); /* [115,135) */
    CHECK_EQ_INT(o.count, 2);
    CHECK(cr_rangemap_find(&o, 105) && cr_rangemap_find(&o, 145));
    CHECK(!cr_rangemap_find(&o, 112) && !cr_rangemap_find(&o, 131));
    CHECK_EQ_U64(o.total, 20);
    CHECK_EQ_INT(cr_rangemap_remove_overlapping(&o, 110, 30), 0); /* [110,140): only touches */
    CHECK_EQ_INT(cr_rangemap_remove_overlapping(&o, 0, UINT64_MAX), 2);
    CHECK_EQ_INT(o.count, 0);
    cr_rangemap_free(&o);

    /* many ranges in random order: every lookup agrees with a linear scan */
    cr_rangemap_t big = CR_RANGEMAP_INIT;
    unsigned seed = 7;
    for (int i = 0; i < 3000; i++) {
        seed = seed * 1664525 + 1013904223;
        uint64_t slot = seed % 4096;
        cr_rangemap_add(&big, slot * 4096, 1 + seed % 4000, slot);
    }
    for (uint64_t a = 0; a < 4096 * 4096; a += 997) {
        const cr_range_t *got = cr_rangemap_find(&big, a);
        const cr_range_t *want = NULL;
        for (size_t i = 0; i < big.count; i++)
            if (a >= big.ranges[i].start && a < big.ranges[i].start + big.ranges[i].size)
                want = &big.ranges[i];
        CHECK(got == want);
    }
    for (size_t i = 1; i < big.count; i++)
        CHECK(big.ranges[i - 1].start + big.ranges[i - 1].size <= big.ranges[i].start);
    cr_rangemap_free(&big);
    cr_rangemap_free(&m);
}

int main(void)
{
    test_idmap();
    test_rangemap();
    CHECK_DONE();
}
