/* Running a grid: blocks are handed out one at a time (an atomic counter) to the launching
 * thread and to a pool of host threads shared by all launches, so the blocks of a grid run in
 * parallel and in any order. One host thread runs a whole block: its warps take turns (a
 * warp runs until it waits at a barrier, exits or used its time slice), which lets warps of a
 * block wait for each other and keeps shared-memory accesses of a block on one thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "exec.h"

#define SLICE 4096 /* warp instructions before the next warp of the block gets a turn */

static struct {
    pthread_once_t once;
    pthread_mutex_t lock;
    pthread_cond_t work; /* a job with blocks left was added */
    pthread_cond_t idle; /* a worker left a job */
    cr__job_t *jobs;
    unsigned nthreads;
    pthread_key_t key;
    int key_ok;
} pool = {PTHREAD_ONCE_INIT,
          PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          NULL,
          0,
          0,
          0};

static void worker_free(void *arg)
{
    cr__worker_t *wk = arg;
    if (!wk)
        return;
    for (uint32_t i = 0; i < wk->warps_cap; i++)
        free(wk->warps[i].save_stack);
    free(wk->warps);
    free(wk->regs);
    free(wk->shared);
    free(wk->local);
    free(wk->out);
    free(wk);
}

/* The calling thread's worker state (kept for the thread's life). */
static cr__worker_t *worker_get(void)
{
    cr__worker_t *wk = pool.key_ok ? pthread_getspecific(pool.key) : NULL;
    if (wk)
        return wk;
    if (!(wk = calloc(1, sizeof *wk)))
        return NULL;
    if (pool.key_ok)
        pthread_setspecific(pool.key, wk);
    return wk;
}

static int ensure(void **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    void *p = realloc(*buf, n);
    if (!p)
        return -1;
    *buf = p;
    *cap = n;
    return 0;
}

/* ---- one block ---- */

/* Fills warp `index`'s slots that stay the same for every block of the launch: thread
 * indices, dimensions, lane masks, constants, variable addresses. */
static void prime_warp(cr__worker_t *wk, cr__warp_t *w, uint32_t index)
{
    const cr__prog_t *p = wk->prog;
    const cr_ptx_launch_t *L = &wk->job->launch;
    const cr_ptx_module_t *m = wk->job->module;
    uint64_t *R = w->R;
    uint32_t first = index * CR__WARP_SIZE, bx = L->block[0], by = L->block[1];
    memset(R, 0, (size_t)p->const_base * CR__WARP_SIZE * sizeof *R);
    for (uint32_t l = 0; l < CR__WARP_SIZE; l++) {
        uint32_t t = first + l;
        SLOT(CR__SLOT_TID_X)[l] = t % bx;
        SLOT(CR__SLOT_TID_Y)[l] = (t / bx) % by;
        SLOT(CR__SLOT_TID_Z)[l] = t / (bx * by);
        SLOT(CR__SLOT_NTID_X)[l] = L->block[0];
        SLOT(CR__SLOT_NTID_Y)[l] = L->block[1];
        SLOT(CR__SLOT_NTID_Z)[l] = L->block[2];
        SLOT(CR__SLOT_NCTAID_X)[l] = L->grid[0];
        SLOT(CR__SLOT_NCTAID_Y)[l] = L->grid[1];
        SLOT(CR__SLOT_NCTAID_Z)[l] = L->grid[2];
        SLOT(CR__SLOT_LANEID)[l] = l;
        SLOT(CR__SLOT_WARPID)[l] = index;
        SLOT(CR__SLOT_NWARPID)[l] = 64;
        SLOT(CR__SLOT_LANEMASK_EQ)[l] = 1u << l;
        SLOT(CR__SLOT_LANEMASK_LE)[l] = (uint32_t)((2ull << l) - 1);
        SLOT(CR__SLOT_LANEMASK_LT)[l] = (1u << l) - 1;
        SLOT(CR__SLOT_LANEMASK_GE)[l] = (uint32_t)(~0u << l);
        SLOT(CR__SLOT_LANEMASK_GT)[l] = l == 31 ? 0 : (uint32_t)(~0u << (l + 1));
        SLOT(CR__SLOT_DYN_SMEM)[l] = L->dynamic_shared;
        SLOT(CR__SLOT_TOTAL_SMEM)[l] = wk->shared_size;
    }
    for (uint32_t k = 0; k < p->nconsts; k++) {
        uint64_t *s = SLOT(p->const_base + k), v = p->consts[k];
        for (uint32_t l = 0; l < CR__WARP_SIZE; l++)
            s[l] = v;
    }
    for (uint32_t k = 0; k < p->nsyms; k++) {
        uint64_t *s = SLOT(p->sym_base + k), v = m->var_address[p->sym_vars[k]];
        for (uint32_t l = 0; l < CR__WARP_SIZE; l++)
            s[l] = v;
    }
}

/* Resets warp `index` for a new block: its state, block index, frame base, carry and
 * registers (zero, for runs that do not depend on the previous block). */
static void reset_warp(cr__worker_t *wk, cr__warp_t *w, uint32_t index, uint32_t nthreads)
{
    const cr__prog_t *p = wk->prog;
    uint64_t *R = w->R;
    uint64_t *save = w->save_stack;
    size_t save_cap = w->save_cap;
    memset(w, 0, offsetof(cr__warp_t, save_stack));
    w->R = R;
    w->save_stack = save;
    w->save_cap = save_cap;
    w->save_used = 0;
    w->index = index;
    w->next_pc = UINT32_MAX;
    uint32_t first = index * CR__WARP_SIZE;
    uint32_t count = nthreads - first < CR__WARP_SIZE ? nthreads - first : CR__WARP_SIZE;
    w->valid = count == CR__WARP_SIZE ? CR__FULL_MASK : (1u << count) - 1;
    w->active = w->valid;
    w->pc = 0;
    for (uint32_t l = 0; l < CR__WARP_SIZE; l++) {
        SLOT(CR__SLOT_CTAID_X)[l] = wk->ctaid[0];
        SLOT(CR__SLOT_CTAID_Y)[l] = wk->ctaid[1];
        SLOT(CR__SLOT_CTAID_Z)[l] = wk->ctaid[2];
        SLOT(CR__SLOT_FRAME)[l] = 0;
        SLOT(CR__SLOT_CC)[l] = 0;
    }
    memset(R + (size_t)CR__SLOT_FIXED * CR__WARP_SIZE, 0,
           (size_t)(p->const_base - CR__SLOT_FIXED) * CR__WARP_SIZE * sizeof *R);
}

static int run_block(cr__worker_t *wk, uint64_t b)
{
    const cr__prog_t *p = wk->prog;
    const cr_ptx_launch_t *L = &wk->job->launch;
    wk->ctaid[0] = (uint32_t)(b % L->grid[0]);
    wk->ctaid[1] = (uint32_t)(b / L->grid[0] % L->grid[1]);
    wk->ctaid[2] = (uint32_t)(b / ((uint64_t)L->grid[0] * L->grid[1]));
    uint32_t nthreads = L->block[0] * L->block[1] * L->block[2];
    uint32_t nwarps = (nthreads + CR__WARP_SIZE - 1) / CR__WARP_SIZE;
    size_t slots = (size_t)p->nslots * CR__WARP_SIZE;
    if (nwarps > wk->warps_cap) {
        cr__warp_t *n = realloc(wk->warps, nwarps * sizeof *n);
        if (!n)
            return cr__fault(wk, NULL, 0, CR__CU_OUT_OF_MEMORY, "out of memory");
        memset(n + wk->warps_cap, 0, (nwarps - wk->warps_cap) * sizeof *n);
        wk->warps = n;
        wk->warps_cap = nwarps;
    }
    uint64_t *regs_before = wk->regs;
    if (ensure((void **)&wk->regs, &wk->regs_cap, nwarps * slots * sizeof(uint64_t)) ||
        ensure((void **)&wk->shared, &wk->shared_cap, wk->shared_size + 16) ||
        ensure((void **)&wk->local, &wk->local_cap,
               (size_t)nwarps * CR__WARP_SIZE * wk->local_stride + 16))
        return cr__fault(wk, NULL, 0, CR__CU_OUT_OF_MEMORY, "out of memory for a block");
    wk->nwarps = nwarps;
    memset(wk->shared, 0, wk->shared_size);
    if (wk->local_stride)
        memset(wk->local, 0, (size_t)nthreads * wk->local_stride);
    memset(wk->bar_arrived, 0, sizeof wk->bar_arrived);
    memset(wk->bar_expected, 0, sizeof wk->bar_expected);
    wk->live = nthreads;
    if (wk->regs != regs_before || !wk->primed) { /* the first block of this launch here */
        for (uint32_t i = 0; i < nwarps; i++) {
            wk->warps[i].R = wk->regs + i * slots;
            prime_warp(wk, &wk->warps[i], i);
        }
        wk->primed = 1;
    }
    for (uint32_t i = 0; i < nwarps; i++)
        reset_warp(wk, &wk->warps[i], i, nthreads);
    for (;;) {
        int pending = 0, ran = 0;
        for (uint32_t i = 0; i < nwarps; i++) {
            cr__warp_t *w = &wk->warps[i];
            if ((w->exited & w->valid) == w->valid)
                continue;
            pending = 1;
            if (!w->active && !cr__warp_schedule(wk, w))
                continue;
            int rc = cr__warp_run(wk, w, SLICE);
            ran = 1;
            if (rc)
                return rc;
        }
        if (!pending)
            return 0;
        if (!ran)
            return cr__fault(wk, NULL, 0, CR__CU_LAUNCH_FAILED,
                             "block (%u,%u,%u): barrier deadlock (%u live threads, some wait "
                             "at a barrier the others never reach)",
                             wk->ctaid[0], wk->ctaid[1], wk->ctaid[2], wk->live);
    }
}

static void flush_output(cr__worker_t *wk)
{
    if (!wk->out_len)
        return;
    const cr_ptx_env_t *env = wk->job->env;
    pthread_mutex_lock(wk->job->lock);
    if (env && env->output) {
        env->output(env->user, wk->out, wk->out_len);
    } else {
        fwrite(wk->out, 1, wk->out_len, stdout);
        fflush(stdout);
    }
    pthread_mutex_unlock(wk->job->lock);
    wk->out_len = 0;
}

/* Runs blocks of job until none is left (or one faulted). */
static void work_on(cr__job_t *job, cr__worker_t *wk)
{
    const cr__prog_t *p = job->prog;
    wk->job = job;
    wk->prog = p;
    wk->primed = 0;
    wk->nranges = 0;
    wk->fault = 0;
    wk->fault_msg[0] = 0;
    uint64_t align = p->shared_dyn_offset_align ? p->shared_dyn_offset_align : 16;
    wk->shared_size =
        (uint32_t)((p->shared_static + align - 1) / align * align) + job->launch.dynamic_shared;
    wk->local_stride = p->local_bytes;
    while (!atomic_load(&job->failed)) {
        uint64_t b = atomic_fetch_add(&job->next_block, 1);
        if (b >= job->nblocks)
            break;
        int rc = run_block(wk, b);
        flush_output(wk);
        if (rc) {
            pthread_mutex_lock(job->lock);
            if (!job->fault) {
                job->fault = rc;
                snprintf(job->fault_msg, sizeof job->fault_msg, "%s", wk->fault_msg);
            }
            pthread_mutex_unlock(job->lock);
            atomic_store(&job->failed, 1);
            break;
        }
    }
    wk->job = NULL;
    wk->prog = NULL;
}

/* ---- the pool ---- */

static void *pool_thread(void *arg)
{
    (void)arg;
    cr__worker_t *wk = worker_get();
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        cr__job_t *job = NULL;
        for (cr__job_t *j = pool.jobs; j && wk; j = j->next)
            if (!atomic_load(&j->failed) && atomic_load(&j->next_block) < j->nblocks) {
                job = j;
                break;
            }
        if (!job) {
            pthread_cond_wait(&pool.work, &pool.lock);
            continue;
        }
        job->refs++;
        pthread_mutex_unlock(&pool.lock);
        work_on(job, wk);
        pthread_mutex_lock(&pool.lock);
        if (--job->refs == 0)
            pthread_cond_broadcast(&pool.idle);
    }
    return NULL;
}

static void pool_start(void)
{
    pool.key_ok = pthread_key_create(&pool.key, worker_free) == 0;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    const char *env = getenv("CUDA_REMOTE_EMU_THREADS");
    if (env && atoi(env) > 0)
        n = atoi(env);
    if (n < 1)
        n = 1;
    if (n > 256)
        n = 256;
    for (long i = 0; i < n - 1; i++) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, pool_thread, NULL) == 0)
            pool.nthreads++;
        pthread_attr_destroy(&attr);
    }
}

int cr__pool_run(cr__job_t *job)
{
    pthread_once(&pool.once, pool_start);
    cr__worker_t *wk = worker_get();
    if (!wk) {
        job->fault = CR__CU_OUT_OF_MEMORY;
        snprintf(job->fault_msg, sizeof job->fault_msg, "out of memory");
        return job->fault;
    }
    int shared = job->nblocks > 1 && pool.nthreads > 0;
    if (shared) {
        pthread_mutex_lock(&pool.lock);
        job->next = pool.jobs;
        pool.jobs = job;
        pthread_cond_broadcast(&pool.work);
        pthread_mutex_unlock(&pool.lock);
    }
    work_on(job, wk);
    if (shared) {
        pthread_mutex_lock(&pool.lock);
        for (cr__job_t **pp = &pool.jobs; *pp; pp = &(*pp)->next)
            if (*pp == job) {
                *pp = job->next;
                break;
            }
        while (job->refs > 0)
            pthread_cond_wait(&pool.idle, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
    }
    return job->fault;
}
