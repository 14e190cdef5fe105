/* Kernel execution of the emulated device: the glue between launches and the PTX interpreter.
 *
 * A library's PTX is compiled (parsed and decoded) at its first launch and kept with the
 * library. The PTX is the image's newest PTX entry a device of the configured compute
 * capability (cr__emu.sm) could JIT, whatever entry was loaded: cubins hold SASS, which is
 * not interpreted. The interpreter sees device memory through the allocation table and the
 * library's globals through its global table; device printf goes to the stream's output
 * sink. */
#include <stdio.h>
#include <string.h>

#include "emu.h"
#include "log.h"
#include "ptx.h"

/* The PTX entry to run: the highest arch <= the device's (arch-specific ones only on their
 * arch, family-specific ones only on their major version). */
static const cr_image_entry_t *ptx_entry(const cr_image_t *img)
{
    const cr_image_entry_t *best = NULL;
    unsigned sm = cr__emu.sm;
    for (uint32_t i = 0; i < img->entry_count; i++) {
        const cr_image_entry_t *e = &img->entries[i];
        if (e->kind != CR_IMAGE_PTX || e->arch > sm)
            continue;
        if (e->arch_suffix == 'a' && e->arch != sm)
            continue;
        if (e->arch_suffix == 'f' && e->arch / 10 != sm / 10)
            continue;
        if (!best || e->arch > best->arch)
            best = e;
    }
    return best;
}

int cr__library_has_ptx(const cr__library_t *lib)
{
    return ptx_entry(lib->image) != NULL;
}

unsigned cr__library_newest_ptx(const cr__library_t *lib)
{
    unsigned newest = 0;
    for (uint32_t i = 0; i < lib->image->entry_count; i++) {
        const cr_image_entry_t *e = &lib->image->entries[i];
        if (e->kind == CR_IMAGE_PTX && e->arch > newest)
            newest = e->arch;
    }
    return newest;
}

/* The library's compiled PTX, compiling it at the first call; NULL when there is none. */
static cr_ptx_module_t *library_ptx(cr__library_t *lib)
{
    pthread_mutex_lock(&lib->ptx_lock);
    if (lib->ptx_state == 0) {
        const cr_image_entry_t *e = ptx_entry(lib->image);
        char err[256];
        lib->ptx_state = -1;
        if (!e) {
            /* reported per kernel at its launch */
        } else if (cr_ptx_module_load((const char *)e->data, e->size, &lib->ptx, err, sizeof err) !=
                   0) {
            CR_ERROR("emu: the PTX (compute_%u) of a library does not compile: %s", e->arch, err);
        } else {
            CR_DEBUG("emu: compiled the compute_%u PTX of a library", e->arch);
            lib->ptx_state = 1;
        }
    }
    cr_ptx_module_t *m = lib->ptx_state == 1 ? lib->ptx : NULL;
    pthread_mutex_unlock(&lib->ptx_lock);
    return m;
}

void cr__library_ptx_free(cr__library_t *lib)
{
    cr_ptx_module_free(lib->ptx);
    lib->ptx = NULL;
    lib->ptx_state = 0;
}

/* ---- what the interpreter asks ---- */

static int env_allocation(void *user, uint64_t addr, uint64_t *base, uint64_t *size)
{
    (void)user;
    int found = 0;
    pthread_rwlock_rdlock(&cr__mem_lock);
    const cr__alloc_t *a = cr__alloc_find(addr);
    if (a) {
        *base = a->base;
        *size = a->size;
        found = 1;
    }
    pthread_rwlock_unlock(&cr__mem_lock);
    /* page-locked host memory is the device's too, at its own address */
    return found || cr__host_range(addr, base, size);
}

typedef struct {
    cr__library_t *lib;
    void (*fn)(void *user, const char *text, size_t len);
    void *user;
    cr__cond_t *cond;
} run_ctx_t;

static void env_output(void *user, const char *text, size_t len)
{
    run_ctx_t *c = user;
    if (c->fn) {
        c->fn(c->user, text, len);
        return;
    }
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

static int env_global(void *user, const char *name, uint64_t *address, uint64_t *size)
{
    return cr__library_global(((run_ctx_t *)user)->lib, name, address, size);
}

static int env_set_conditional(void *user, uint64_t handle, uint32_t value)
{
    cr__cond_t *c = ((run_ctx_t *)user)->cond;
    if (!c || !handle || handle > c->n)
        return -1;
    __atomic_store_n(&c->v[handle - 1], value, __ATOMIC_RELAXED);
    return 0;
}

CUresult cr__kernel_run(const cr__run_t *run, cr__stream_t *s)
{
    const char *name = run->kernel->info->name;
    cr_ptx_module_t *m = library_ptx(run->lib);
    if (!m || !cr_ptx_module_has_kernel(m, name)) {
        CR_WARN("emu: kernel %s cannot run: %s", name,
                m ? "its library's PTX does not define it"
                  : "its library has no PTX the interpreter can compile (see above)");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    run_ctx_t ctx = {run->lib, NULL, NULL, run->cond};
    pthread_mutex_lock(&s->lock);
    ctx.fn = s->out_fn;
    ctx.user = s->out_user;
    pthread_mutex_unlock(&s->lock);
    cr_ptx_env_t env = {&ctx, env_global, env_allocation, env_output, env_set_conditional};
    cr_ptx_launch_t launch = {
        .grid = {run->grid[0], run->grid[1], run->grid[2]},
        .block = {run->block[0], run->block[1], run->block[2]},
        .dynamic_shared = run->shared,
        .params = run->params,
        .param_size = run->param_size,
    };
    cr_ptx_fault_t fault;
    int rc = cr_ptx_launch(m, name, &launch, &env, &fault);
    if (rc != 0)
        CR_WARN("emu: kernel fault (CUresult %d): %s", rc, fault.message);
    return (CUresult)rc;
}
