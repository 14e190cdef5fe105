/* Invariant checks for the fuzz targets: a violated one prints where and what, then aborts,
 * so that libFuzzer saves the input. Unlike assert() it stays in release builds (the fuzz
 * build is RelWithDebInfo, which defines NDEBUG). */
#ifndef CR_FUZZ_CHECK_H
#define CR_FUZZ_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Both values shown: most invariants compare two numbers. */
#define FUZZ_CHECK_EQ(actual, expected)                                                            \
    do {                                                                                           \
        uint64_t a_ = (uint64_t)(actual), e_ = (uint64_t)(expected);                               \
        if (a_ != e_) {                                                                            \
            fprintf(stderr,                                                                        \
                    "%s:%d: invariant violated: %s == 0x%" PRIx64 ", expected %s == "              \
                    "0x%" PRIx64 "\n",                                                             \
                    __FILE__, __LINE__, #actual, a_, #expected, e_);                               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
