/* Sorted set of disjoint ranges (see rangemap.h). */
#include "rangemap.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

/* Index of the first range whose start is > addr. */
static size_t upper_bound(const cr_rangemap_t *m, uint64_t addr)
{
    size_t lo = 0, hi = m->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->ranges[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int cr_rangemap_add(cr_rangemap_t *m, uint64_t start, uint64_t size, uint64_t value)
{
    if (size == 0 || start + size < start)
        return CR_EINVAL;
    size_t i = upper_bound(m, start);
    if (i > 0) {
        const cr_range_t *prev = &m->ranges[i - 1];
        if (prev->start + prev->size > start)
            return CR_EEXISTS;
    }
    if (i < m->count && m->ranges[i].start < start + size)
        return CR_EEXISTS;
    if (m->count == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        cr_range_t *r = realloc(m->ranges, cap * sizeof *r);
        if (!r)
            return CR_ENOMEM;
        m->ranges = r;
        m->cap = cap;
    }
    memmove(&m->ranges[i + 1], &m->ranges[i], (m->count - i) * sizeof *m->ranges);
    m->ranges[i] = (cr_range_t){start, size, value};
    m->count++;
    m->total += size;
    return 0;
}

int cr_rangemap_remove(cr_rangemap_t *m, uint64_t start, cr_range_t *out)
{
    size_t i = upper_bound(m, start);
    if (i == 0 || m->ranges[i - 1].start != start)
        return 0;
    i--;
    if (out)
        *out = m->ranges[i];
    m->total -= m->ranges[i].size;
    memmove(&m->ranges[i], &m->ranges[i + 1], (m->count - i - 1) * sizeof *m->ranges);
    m->count--;
    return 1;
}

size_t cr_rangemap_remove_overlapping(cr_rangemap_t *m, uint64_t start, uint64_t size)
{
    uint64_t end = start + size < start ? UINT64_MAX : start + size;
    size_t i = upper_bound(m, start), first, last;
    /* the range before may reach into [start, end) */
    first = i > 0 && m->ranges[i - 1].start + m->ranges[i - 1].size > start ? i - 1 : i;
    last = i;
    while (last < m->count && m->ranges[last].start < end)
        last++;
    if (first == last)
        return 0;
    for (size_t j = first; j < last; j++)
        m->total -= m->ranges[j].size;
    memmove(&m->ranges[first], &m->ranges[last], (m->count - last) * sizeof *m->ranges);
    m->count -= last - first;
    return last - first;
}

const cr_range_t *cr_rangemap_find(const cr_rangemap_t *m, uint64_t addr)
{
    size_t i = upper_bound(m, addr);
    if (i == 0)
        return NULL;
    const cr_range_t *r = &m->ranges[i - 1];
    return addr - r->start < r->size ? r : NULL;
}

int cr_rangemap_contains(const cr_rangemap_t *m, uint64_t addr, uint64_t len)
{
    const cr_range_t *r = cr_rangemap_find(m, addr);
    return r && len <= r->size - (addr - r->start);
}

int cr_rangemap_covers(const cr_rangemap_t *m, uint64_t addr, uint64_t len)
{
    uint64_t end = addr + (len ? len : 1);
    if (end < addr)
        return 0;
    while (addr < end) {
        const cr_range_t *r = cr_rangemap_find(m, addr);
        if (!r)
            return 0;
        addr = r->start + r->size; /* the next range must start where this one ends */
    }
    return 1;
}

void cr_rangemap_free(cr_rangemap_t *m)
{
    free(m->ranges);
    *m = (cr_rangemap_t)CR_RANGEMAP_INIT;
}
