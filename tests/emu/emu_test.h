/* Shared set-up for the emulated-device tests: each test program configures a small arena,
 * initialises the emu and makes its context current, then calls cr_emu_* functions directly. */
#ifndef CR_EMU_TEST_H
#define CR_EMU_TEST_H

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "emu.h"
#include "error.h"

/* The emu's default device address; sanitizers own 0x600000000000 (see device.c). */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_VA_BASE 0x700000000000ull
#elif defined(__SANITIZE_THREAD__)
#define TEST_VA_BASE 0x2000000000ull
#else
#define TEST_VA_BASE 0x600000000000ull
#endif

#define CHECK_CU(call, expected) CHECK_EQ_INT((call), (expected))
#define CHECK_OK(call) CHECK_EQ_INT((call), CUDA_SUCCESS)

static inline CUcontext test_setup(uint64_t memory_bytes, const char *trace_path)
{
    cr_emu_config_t cfg = {memory_bytes, 0, trace_path}; /* default base: TEST_VA_BASE */
    CUcontext ctx = NULL;
    if (cr_emu_configure(&cfg) != 0 || cr_emu_cuInit(0) != CUDA_SUCCESS ||
        cr_emu_cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cr_emu_cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "emu set-up failed\n");
        exit(1);
    }
    return ctx;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* A gate a host function blocks on until the test opens it. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open;
    int entered;
} gate_t;

static inline void gate_init(gate_t *g)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->open = 0;
    g->entered = 0;
}

static inline void gate_wait_fn(void *arg) /* a CUhostFn */
{
    gate_t *g = arg;
    pthread_mutex_lock(&g->lock);
    g->entered = 1;
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static inline void gate_open(gate_t *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static inline void gate_open_fn(void *arg) /* a CUhostFn */
{
    gate_open(arg);
}

static inline int gate_entered(gate_t *g)
{
    pthread_mutex_lock(&g->lock);
    int e = g->entered;
    pthread_mutex_unlock(&g->lock);
    return e;
}

/* An ordered log that host functions append to. */
typedef struct {
    pthread_mutex_t lock;
    int items[64];
    int count;
} order_log_t;

typedef struct {
    order_log_t *log;
    int value;
} order_item_t;

static inline void order_fn(void *arg) /* a CUhostFn */
{
    order_item_t *it = arg;
    pthread_mutex_lock(&it->log->lock);
    if (it->log->count < 64)
        it->log->items[it->log->count++] = it->value;
    pthread_mutex_unlock(&it->log->lock);
}

static inline int order_count(order_log_t *log)
{
    pthread_mutex_lock(&log->lock);
    int n = log->count;
    pthread_mutex_unlock(&log->lock);
    return n;
}

static inline void fill_random(void *p, size_t n, unsigned seed)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (unsigned char)(seed >> 16);
    }
}

#endif
