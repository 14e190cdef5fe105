// Device printf: every conversion the interpreter formats, with widths and precisions.
#include <cstdio>

extern "C" __global__ void formats(int i, unsigned u, long long ll, unsigned long long ull,
                                   double d, float f, const char *s, char c, void *p)
{
    printf("d=%d i=%i u=%u x=%x X=%X o=%o c=%c\n", i, -i, u, u, u, u, c);
    printf("ld=%ld lld=%lld lu=%lu llu=%llu lx=%lx llx=%llx\n", (long)ll, ll,
           (unsigned long)ull, ull, (unsigned long)ull, ull);
    printf("f=%f e=%e g=%g F=%.3f E=%.2E G=%G\n", d, d, d, (double)f, d, 1e-10);
    printf("s=%s w=[%8s] l=[%-8s] p=[%.3s] ptr=%p null=%s\n", s, s, s, s, p, (char *)0);
    printf("w=[%5d] l=[%-5d] z=[%05d] plus=[%+d] sp=[% d] hash=[%#x] [%#o] pct=%%\n", i, i, i, i,
           i, u, u);
    printf("short=%hd char=%hhu mix=%d,%lld,%d,%f,%c\n", (short)i, (unsigned char)u, 1, ll, 2,
           d, c);
}

extern "C" __global__ void many(int tag)
{
    printf("block %d thread %d tag %d\n", blockIdx.x, threadIdx.x, tag);
}
