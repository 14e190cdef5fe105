/* Shared helpers of the PTX interpreter tests: "device memory" from malloc registered in a
 * table that the interpreter's env consults, captured printf output, loading PTX files, and
 * a micro-harness that runs one instruction over a table of cases (one thread per case). */
#ifndef CR_PTX_TEST_H
#define CR_PTX_TEST_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "ptx.h"

#define DEV_MAX 256

static struct {
    pthread_mutex_t lock;
    uint64_t base[DEV_MAX], size[DEV_MAX];
    int n;
    char *out; /* printf output */
    size_t out_len;
} dev = {.lock = PTHREAD_MUTEX_INITIALIZER};

static inline int dev_allocation(void *user, uint64_t addr, uint64_t *base, uint64_t *size)
{
    (void)user;
    int found = 0;
    pthread_mutex_lock(&dev.lock);
    for (int i = 0; i < dev.n && !found; i++)
        if (addr >= dev.base[i] && addr < dev.base[i] + dev.size[i]) {
            *base = dev.base[i];
            *size = dev.size[i];
            found = 1;
        }
    pthread_mutex_unlock(&dev.lock);
    return found;
}

static inline void dev_output(void *user, const char *text, size_t len)
{
    (void)user;
    pthread_mutex_lock(&dev.lock);
    char *n = realloc(dev.out, dev.out_len + len + 1);
    if (n) {
        memcpy(n + dev.out_len, text, len);
        dev.out_len += len;
        n[dev.out_len] = 0;
        dev.out = n;
    }
    pthread_mutex_unlock(&dev.lock);
}

static inline void dev_output_clear(void)
{
    pthread_mutex_lock(&dev.lock);
    free(dev.out);
    dev.out = NULL;
    dev.out_len = 0;
    pthread_mutex_unlock(&dev.lock);
}

static const cr_ptx_env_t dev_env = {NULL, NULL, dev_allocation, dev_output};

/* Zeroed "device memory" of n bytes (64-byte aligned), registered as a live allocation. */
static inline void *dev_alloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 1) != 0)
        abort();
    memset(p, 0, n ? n : 1);
    pthread_mutex_lock(&dev.lock);
    if (dev.n == DEV_MAX)
        abort();
    dev.base[dev.n] = (uint64_t)(uintptr_t)p;
    dev.size[dev.n++] = n;
    pthread_mutex_unlock(&dev.lock);
    return p;
}

static inline void dev_free(void *p)
{
    pthread_mutex_lock(&dev.lock);
    for (int i = 0; i < dev.n; i++)
        if (dev.base[i] == (uint64_t)(uintptr_t)p) {
            dev.base[i] = dev.base[dev.n - 1];
            dev.size[i] = dev.size[dev.n - 1];
            dev.n--;
            break;
        }
    pthread_mutex_unlock(&dev.lock);
    free(p);
}

static inline char *read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n)
        exit(1);
    b[n] = 0;
    fclose(f);
    if (len)
        *len = (size_t)n;
    return b;
}

static inline cr_ptx_module_t *load_text(const char *ptx)
{
    char err[256];
    cr_ptx_module_t *m = NULL;
    int rc = cr_ptx_module_load(ptx, strlen(ptx), &m, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "PTX load failed (%d): %s\n", rc, err);
    return m;
}

static inline cr_ptx_module_t *load_file(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = read_text(path, NULL);
    cr_ptx_module_t *m = load_text(text);
    free(text);
    if (!m) {
        fprintf(stderr, "cannot load %s\n", path);
        exit(1);
    }
    return m;
}

/* Packs parameters: each at its natural alignment (as the .param list lays them out). */
typedef struct {
    uint8_t buf[512];
    uint32_t size;
} params_t;

static inline void param_put(params_t *p, const void *v, uint32_t size)
{
    p->size = (p->size + size - 1) / size * size;
    memcpy(p->buf + p->size, v, size);
    p->size += size;
}
#define PARAM(p, v)                                                                                \
    do {                                                                                           \
        __typeof__(v) v_ = (v);                                                                    \
        param_put((p), &v_, sizeof v_);                                                            \
    } while (0)

static inline int launch(cr_ptx_module_t *m, const char *kernel, uint32_t gx, uint32_t gy,
                         uint32_t bx, uint32_t by, uint32_t shared, const params_t *p,
                         cr_ptx_fault_t *fault)
{
    cr_ptx_launch_t l = {{gx, gy, 1}, {bx, by, 1}, shared, p->buf, p->size};
    cr_ptx_fault_t f;
    int rc = cr_ptx_launch(m, kernel, &l, &dev_env, fault ? fault : &f);
    if (rc && !fault)
        fprintf(stderr, "launch of %s failed (%d): %s\n", kernel, rc, f.message);
    return rc;
}

static inline double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static inline float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline double bitsd(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

#endif
