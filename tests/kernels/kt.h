// Helpers for the kernel-execution programs: unlike the integration programs these REQUIRE
// kernels to execute (a GPU, or an emulated device that interprets PTX), check every result
// against a host reference and stop at the first mismatch, naming index, got and expected.
#pragma once

#include "../integration/cr_test.h"

#include <cinttypes>
#include <cmath>
#include <cstdint>

static const char *kt_name = "?";

#define KT_FAIL(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "%s: FAILED: ", kt_name);                                                  \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        exit(1);                                                                                   \
    } while (0)

// Launch check: the launch was accepted and the kernel ran to completion without error.
#define KT_SYNC()                                                                                  \
    do {                                                                                           \
        CHECK_CUDA(cudaGetLastError());                                                            \
        CHECK_CUDA(cudaDeviceSynchronize());                                                       \
    } while (0)

static inline void kt_start(const char *name)
{
    kt_name = name;
    if (!kernels_execute()) {
        fprintf(stderr, "%s: FAILED: kernels do not execute on this device\n", name);
        exit(1);
    }
}

static inline void kt_pass()
{
    printf("%s: all checks passed\n", kt_name);
    fflush(stdout);
}

static inline void kt_check_i64(const char *what, size_t i, long long got, long long expected)
{
    if (got != expected)
        KT_FAIL("%s[%zu]: got %lld (0x%llx), expected %lld (0x%llx)", what, i, got,
                (unsigned long long)got, expected, (unsigned long long)expected);
}

static inline void kt_check_u64(const char *what, size_t i, unsigned long long got,
                                unsigned long long expected)
{
    if (got != expected)
        KT_FAIL("%s[%zu]: got %llu (0x%llx), expected %llu (0x%llx)", what, i, got, got, expected,
                expected);
}

// Bitwise-equal floats (NaNs of any payload count as equal).
static inline void kt_check_f32_exact(const char *what, size_t i, float got, float expected)
{
    uint32_t g, e;
    memcpy(&g, &got, 4);
    memcpy(&e, &expected, 4);
    if (g != e && !(std::isnan(got) && std::isnan(expected)))
        KT_FAIL("%s[%zu]: got %.9g (0x%08x), expected %.9g (0x%08x)", what, i, got, g, expected, e);
}

static inline void kt_check_f64_exact(const char *what, size_t i, double got, double expected)
{
    uint64_t g, e;
    memcpy(&g, &got, 8);
    memcpy(&e, &expected, 8);
    if (g != e && !(std::isnan(got) && std::isnan(expected)))
        KT_FAIL("%s[%zu]: got %.17g (0x%016llx), expected %.17g (0x%016llx)", what, i, got,
                (unsigned long long)g, expected, (unsigned long long)e);
}

// |got - expected| <= rel * scale, where scale is the magnitude the computation works at
// (e.g. |a*x| + |y| for a*x + y, so that cancellation does not demand impossible accuracy).
static inline void kt_check_close(const char *what, size_t i, double got, double expected,
                                  double rel, double scale)
{
    double s = std::fabs(scale) > std::fabs(expected) ? std::fabs(scale) : std::fabs(expected);
    if (!(std::fabs(got - expected) <= rel * s))
        KT_FAIL("%s[%zu]: got %.17g, expected %.17g (difference %.3g, allowed %.3g)", what, i, got,
                expected, std::fabs(got - expected), rel * s);
}

// Small deterministic pseudo-random numbers (the same on every host).
struct KtRng {
    uint64_t s;
    explicit KtRng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1)
    {
    }
    uint32_t next()
    {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return (uint32_t)(s >> 16);
    }
    // uniform in [lo, hi]
    int range(int lo, int hi)
    {
        return lo + (int)(next() % (uint32_t)(hi - lo + 1));
    }
    float unit()
    {
        return (next() >> 8) * (1.0f / 16777216.0f);
    } // [0, 1)
};
