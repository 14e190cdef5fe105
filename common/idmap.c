/* Open-addressing hash map of 64-bit keys (see idmap.h). */
#include "idmap.h"

#include <stdlib.h>

#include "error.h"

#define EMPTY 0
#define REMOVED UINT64_MAX

static size_t slot_of(uint64_t key, size_t cap)
{
    key ^= key >> 33; /* a multiplicative mix (splitmix64 finaliser) spreads nearby ids */
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static int rehash(cr_idmap_t *m, size_t cap)
{
    uint64_t *keys = calloc(cap, sizeof *keys);
    uint64_t *values = malloc(cap * sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        return CR_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        uint64_t k = m->keys[i];
        if (k == EMPTY || k == REMOVED)
            continue;
        size_t s = slot_of(k, cap);
        while (keys[s] != EMPTY)
            s = (s + 1) & (cap - 1);
        keys[s] = k;
        values[s] = m->values[i];
    }
    free(m->keys);
    free(m->values);
    m->keys = keys;
    m->values = values;
    m->cap = cap;
    m->used = m->count;
    return 0;
}

static size_t find(const cr_idmap_t *m, uint64_t key)
{
    if (!m->cap)
        return SIZE_MAX;
    size_t s = slot_of(key, m->cap);
    for (size_t n = 0; n < m->cap; n++) {
        if (m->keys[s] == key)
            return s;
        if (m->keys[s] == EMPTY)
            return SIZE_MAX;
        s = (s + 1) & (m->cap - 1);
    }
    return SIZE_MAX;
}

int cr_idmap_put(cr_idmap_t *m, uint64_t key, uint64_t value)
{
    if (key == EMPTY || key == REMOVED)
        return CR_EINVAL;
    size_t s = find(m, key);
    if (s != SIZE_MAX) {
        m->values[s] = value;
        return 0;
    }
    if ((m->used + 1) * 4 > m->cap * 3) {
        size_t cap = m->cap ? m->cap : 16;
        while ((m->count + 1) * 2 > cap)
            cap *= 2;
        int err = rehash(m, cap);
        if (err)
            return err;
    }
    s = slot_of(key, m->cap);
    while (m->keys[s] != EMPTY && m->keys[s] != REMOVED)
        s = (s + 1) & (m->cap - 1);
    if (m->keys[s] == EMPTY)
        m->used++;
    m->keys[s] = key;
    m->values[s] = value;
    m->count++;
    return 0;
}

int cr_idmap_get(const cr_idmap_t *m, uint64_t key, uint64_t *value)
{
    if (key == EMPTY || key == REMOVED)
        return 0;
    size_t s = find(m, key);
    if (s == SIZE_MAX)
        return 0;
    if (value)
        *value = m->values[s];
    return 1;
}

int cr_idmap_remove(cr_idmap_t *m, uint64_t key, uint64_t *value)
{
    if (key == EMPTY || key == REMOVED)
        return 0;
    size_t s = find(m, key);
    if (s == SIZE_MAX)
        return 0;
    if (value)
        *value = m->values[s];
    m->keys[s] = REMOVED;
    m->count--;
    return 1;
}

int cr_idmap_next(const cr_idmap_t *m, size_t *pos, uint64_t *key, uint64_t *value)
{
    for (size_t i = *pos; i < m->cap; i++) {
        if (m->keys[i] != EMPTY && m->keys[i] != REMOVED) {
            *key = m->keys[i];
            if (value)
                *value = m->values[i];
            *pos = i + 1;
            return 1;
        }
    }
    *pos = m->cap;
    return 0;
}

void cr_idmap_free(cr_idmap_t *m)
{
    free(m->keys);
    free(m->values);
    *m = (cr_idmap_t)CR_IDMAP_INIT;
}
