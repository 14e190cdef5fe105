/* Name tables of the PTX interpreter: types, instruction bases, modifiers, special registers
 * and decoded opcodes, each generated from its one X-macro list in internal.h/ops.h. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "internal.h"

int cr__grow(void **arr, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    uint64_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    if (ncap > UINT32_MAX || ncap * size > ((size_t)1 << 34))
        return CR_ENOMEM;
    void *n = realloc(*arr, (size_t)ncap * size);
    if (!n)
        return CR_ENOMEM;
    *arr = n;
    *cap = (uint32_t)ncap;
    return 0;
}

static const struct {
    const char *name;
    unsigned size;
} types[] = {
#define CR__TYPE_ROW(name, str, size) {str, size},
    CR__TYPES(CR__TYPE_ROW)
#undef CR__TYPE_ROW
};

unsigned cr__type_size(cr__type_t t)
{
    return t < CR__T_COUNT ? types[t].size : 0;
}

int cr__type_signed(cr__type_t t)
{
    return t == CR__T_S8 || t == CR__T_S16 || t == CR__T_S32 || t == CR__T_S64 || t == CR__T_S16X2;
}

int cr__type_float(cr__type_t t)
{
    return t == CR__T_F16 || t == CR__T_F16X2 || t == CR__T_BF16 || t == CR__T_BF16X2 ||
           t == CR__T_F32 || t == CR__T_F64 || t == CR__T_TF32;
}

cr__type_t cr__type_from(const char *s, size_t len)
{
    for (unsigned i = 1; i < CR__T_COUNT; i++)
        if (strlen(types[i].name) == len && memcmp(types[i].name, s, len) == 0)
            return (cr__type_t)i;
    return CR__T_NONE;
}

static const char *const sreg_names[] = {
#define CR__SREG_ROW(name, str) str,
    CR__SREGS(CR__SREG_ROW)
#undef CR__SREG_ROW
};

int cr__sreg_from(const char *s, size_t len)
{
    for (unsigned i = 0; i < CR__SR_COUNT; i++)
        if (strlen(sreg_names[i]) == len && memcmp(sreg_names[i], s, len) == 0)
            return (int)i;
    return -1;
}

static const char *const op_names[] = {
#define CR__OP_ROW(name) #name,
    CR__OPS(CR__OP_ROW)
#undef CR__OP_ROW
};

const char *cr__op_name(unsigned op)
{
    return op < CR__OP_COUNT ? op_names[op] : "?";
}
