/* A processor hint for spin-wait loops. */
#ifndef CR_CPU_H
#define CR_CPU_H

static inline void cr_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

#endif
