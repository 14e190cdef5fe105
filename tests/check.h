/* Minimal assertions for the C unit tests: each failed check prints both sides and the
 * location, the test goes on, and CHECK_DONE() returns the exit status ctest reads. */
#ifndef CR_TEST_CHECK_H
#define CR_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        check_count++;                                                                             \
        if (!(cond)) {                                                                             \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(actual, expected)                                                             \
    do {                                                                                           \
        long long a_ = (long long)(actual), e_ = (long long)(expected);                            \
        check_count++;                                                                             \
        if (a_ != e_) {                                                                            \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__,        \
                    #actual, a_, #expected, e_);                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_U64(actual, expected)                                                             \
    do {                                                                                           \
        uint64_t a_ = (uint64_t)(actual), e_ = (uint64_t)(expected);                               \
        check_count++;                                                                             \
        if (a_ != e_) {                                                                            \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: %s == 0x%" PRIx64 ", expected 0x%" PRIx64 "\n", __FILE__,      \
                    __LINE__, #actual, a_, e_);                                                    \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_STR(actual, expected)                                                             \
    do {                                                                                           \
        const char *a_ = (actual), *e_ = (expected);                                               \
        check_count++;                                                                             \
        if (!a_ || !e_ || strcmp(a_, e_) != 0) {                                                   \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #actual, \
                    a_ ? a_ : "(null)", e_ ? e_ : "(null)");                                       \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_MEM(actual, expected, len)                                                        \
    do {                                                                                           \
        const unsigned char *a_ = (const void *)(actual), *e_ = (const void *)(expected);          \
        size_t n_ = (len);                                                                         \
        check_count++;                                                                             \
        if (memcmp(a_, e_, n_) != 0) {                                                             \
            size_t i_ = 0;                                                                         \
            while (a_[i_] == e_[i_])                                                               \
                i_++;                                                                              \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: %s differs from %s at byte %zu: 0x%02x, expected 0x%02x\n",    \
                    __FILE__, __LINE__, #actual, #expected, i_, a_[i_], e_[i_]);                   \
        }                                                                                          \
    } while (0)

/* Returns from main: 0 when every check held. */
#define CHECK_DONE()                                                                               \
    do {                                                                                           \
        fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures);                    \
        return check_failures ? 1 : 0;                                                             \
    } while (0)

#endif
