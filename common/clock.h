/* Monotonic time in nanoseconds: deadlines of spin-waits, timeouts, measured intervals. */
#ifndef CR_CLOCK_H
#define CR_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t cr_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

#endif
