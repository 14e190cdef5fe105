#include "size.h"

#include <stdlib.h>
#include <strings.h>

#include "error.h"

int cr_parse_size(const char *text, uint64_t *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || !(v > 0) || v > 1.8e19)
        return CR_EINVAL;
    static const struct {
        const char *suffix;
        uint64_t unit;
    } units[] = {{"", 1},           {"b", 1},
                 {"k", 1ull << 10}, {"kib", 1ull << 10},
                 {"m", 1ull << 20}, {"mib", 1ull << 20},
                 {"g", 1ull << 30}, {"gib", 1ull << 30},
                 {"t", 1ull << 40}, {"tib", 1ull << 40}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcasecmp(end, units[i].suffix) == 0) {
            double bytes = v * (double)units[i].unit;
            if (bytes >= 1.8446744073709552e19)
                return CR_EINVAL;
            *out = (uint64_t)bytes;
            return 0;
        }
    return CR_EINVAL;
}
