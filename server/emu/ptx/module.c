/* The public API of the PTX interpreter: loading a module (parse + decode once), resolving
 * its variables at the first launch and launching kernels. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "internal.h"

int cr_ptx_module_load(const char *ptx, size_t len, cr_ptx_module_t **out, char *err,
                       size_t err_len)
{
    cr_ptx_module_t *m = NULL;
    int rc = CR_ENOMEM;
    char dummy[8];
    if (!err || !err_len) {
        err = dummy;
        err_len = sizeof dummy;
    }
    err[0] = 0;
    if (!ptx || !out)
        return CR_EINVAL;
    *out = NULL;
    if (!(m = calloc(1, sizeof *m)))
        goto fail;
    pthread_mutex_t *lock = malloc(sizeof *lock);
    if (!lock || pthread_mutex_init(lock, NULL) != 0) {
        free(lock);
        goto fail;
    }
    m->lock = lock;
    if ((rc = cr__parse(ptx, len, &m->ir, err, err_len)) != 0)
        goto fail;
    if ((rc = cr__decode(&m->ir, &m->progs, &m->nprogs, err, err_len)) != 0)
        goto fail;
    *out = m;
    return 0;
fail:
    if (rc == CR_ENOMEM && !err[0])
        snprintf(err, err_len, "out of memory");
    cr_ptx_module_free(m);
    return rc;
}

void cr_ptx_module_free(cr_ptx_module_t *m)
{
    if (!m)
        return;
    for (uint32_t i = 0; i < m->nprogs; i++)
        cr__prog_free(&m->progs[i]);
    free(m->progs);
    cr__ir_free(&m->ir);
    if (m->lock) {
        pthread_mutex_destroy(m->lock);
        free(m->lock);
    }
    free(m->own);
    free(m->var_address);
    free(m);
}

static const cr__prog_t *find_prog(const cr_ptx_module_t *m, const char *kernel)
{
    for (uint32_t i = 0; i < m->nprogs; i++)
        if (strcmp(m->progs[i].name, kernel) == 0)
            return &m->progs[i];
    return NULL;
}

int cr_ptx_module_has_kernel(const cr_ptx_module_t *m, const char *kernel)
{
    return m && kernel && find_prog(m, kernel) != NULL;
}

/* The device address of a module variable by name (after resolution), or 0. */
static uint64_t var_by_name(const cr_ptx_module_t *m, const char *name)
{
    for (uint32_t v = 0; v < m->ir.nvars; v++) {
        const cr__ir_var_t *var = &m->ir.vars[v];
        if ((var->space == CR__SP_GLOBAL || var->space == CR__SP_CONST) &&
            strcmp(cr__ir_str(&m->ir, var->name), name) == 0 && m->var_address[v])
            return m->var_address[v];
    }
    return 0;
}

/* Places every .global/.const variable: at the embedder's address when it has one, else in
 * the module's own memory (initialised from the PTX); then writes address initialisers. Once
 * per module, at its first launch. */
static int resolve_vars(cr_ptx_module_t *m, const cr_ptx_env_t *env, cr_ptx_fault_t *fault)
{
    const cr__ir_t *ir = &m->ir;
    int rc = 0;
    pthread_mutex_lock(m->lock);
    if (m->resolved)
        goto out;
    rc = CR__CU_OUT_OF_MEMORY;
    if (!(m->var_address = calloc(ir->nvars ? ir->nvars : 1, sizeof *m->var_address)))
        goto out;
    uint64_t own_size = 0;
    uint8_t *embedder = calloc(ir->nvars ? ir->nvars : 1, 1);
    if (!embedder)
        goto out;
    for (uint32_t v = 0; v < ir->nvars; v++) {
        const cr__ir_var_t *var = &ir->vars[v];
        if (var->space != CR__SP_GLOBAL && var->space != CR__SP_CONST)
            continue;
        uint64_t addr = 0, size = 0;
        if (!var->is_extern && env && env->global_address &&
            env->global_address(env->user, cr__ir_str(ir, var->name), &addr, &size) == 0 &&
            size >= var->size) {
            m->var_address[v] = addr;
            embedder[v] = 1;
        } else {
            uint64_t a = var->align ? var->align : 1;
            own_size = (own_size + a - 1) / a * a + (var->size ? var->size : 1);
        }
    }
    if (own_size && !(m->own = calloc(1, own_size))) {
        free(embedder);
        goto out;
    }
    m->own_size = own_size;
    uint64_t off = 0;
    for (uint32_t v = 0; v < ir->nvars; v++) {
        const cr__ir_var_t *var = &ir->vars[v];
        if (var->space != CR__SP_GLOBAL && var->space != CR__SP_CONST)
            continue;
        if (embedder[v])
            continue;
        uint64_t a = var->align ? var->align : 1;
        off = (off + a - 1) / a * a;
        m->var_address[v] = (uint64_t)(uintptr_t)(m->own + off);
        if (var->init)
            memcpy(m->own + off, var->init, var->size);
        off += var->size ? var->size : 1;
    }
    /* address initialisers (the embedder left them as zeros) */
    for (uint32_t v = 0; v < ir->nvars; v++) {
        const cr__ir_var_t *var = &ir->vars[v];
        if (!m->var_address[v])
            continue;
        for (uint32_t k = 0; k < var->reloc_count; k++) {
            const cr__ir_reloc_t *r = &ir->relocs[var->reloc_first + k];
            const char *name = cr__ir_str(ir, r->name);
            uint64_t target = var_by_name(m, name);
            int f = target ? -1 : cr__ir_find_func(ir, name);
            if (f >= 0)
                target = CR__FUNC_TAG | (uint64_t)f; /* a function pointer */
            if (!target)
                continue;
            uint64_t val = target + (uint64_t)r->addend;
            memcpy((void *)(uintptr_t)(m->var_address[v] + r->offset), &val, r->size);
        }
    }
    free(embedder);
    m->resolved = 1;
    rc = 0;
out:
    pthread_mutex_unlock(m->lock);
    if (rc && fault) {
        fault->code = rc;
        snprintf(fault->message, sizeof fault->message, "out of memory placing module variables");
    }
    return rc;
}

int cr_ptx_launch(cr_ptx_module_t *m, const char *kernel, const cr_ptx_launch_t *l,
                  const cr_ptx_env_t *env, cr_ptx_fault_t *fault)
{
    cr_ptx_fault_t scratch;
    if (!fault)
        fault = &scratch;
    fault->code = 0;
    fault->message[0] = 0;
    const cr__prog_t *p = m && kernel ? find_prog(m, kernel) : NULL;
    if (!p || !l) {
        fault->code = CR__CU_NOT_SUPPORTED;
        snprintf(fault->message, sizeof fault->message, "no kernel %s in the PTX module",
                 kernel ? kernel : "(null)");
        return fault->code;
    }
    if (p->unsupported >= 0) {
        const cr__ir_t *ir = &m->ir;
        uint32_t src = p->src[p->unsupported];
        const cr__insn_t *in = &p->code[p->unsupported];
        fault->code = CR__CU_NOT_SUPPORTED;
        snprintf(fault->message, sizeof fault->message,
                 "kernel %s: the PTX interpreter does not support '%s' (PTX line %u: %s)", p->name,
                 src < ir->ninsns ? cr__ir_str(ir, ir->insns[src].text) : "?",
                 src < ir->ninsns ? ir->insns[src].line : 0,
                 in->r[0] < p->nwhy ? p->why[in->r[0]] : "unknown");
        return fault->code;
    }
    if (p->local_bytes > CR__LOCAL_PER_THREAD_MAX) {
        fault->code = CR__CU_OUT_OF_MEMORY;
        snprintf(fault->message, sizeof fault->message,
                 "kernel %s needs %u bytes of local memory per thread, more than the %u a "
                 "device has",
                 p->name, p->local_bytes, CR__LOCAL_PER_THREAD_MAX);
        return fault->code;
    }
    uint64_t shared = (uint64_t)p->shared_static + l->dynamic_shared;
    if (shared > CR__SHARED_PER_BLOCK_MAX) {
        fault->code = CR__CU_OUT_OF_MEMORY;
        snprintf(fault->message, sizeof fault->message,
                 "kernel %s needs %llu bytes of shared memory per block, more than the %u a "
                 "device has",
                 p->name, (unsigned long long)shared, CR__SHARED_PER_BLOCK_MAX);
        return fault->code;
    }
    uint64_t blocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
    uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
    if (!blocks || !threads || threads > 1024) {
        fault->code = CR__CU_LAUNCH_FAILED;
        snprintf(fault->message, sizeof fault->message, "kernel %s: bad launch dimensions",
                 p->name);
        return fault->code;
    }
    uint64_t warps = (threads + CR__WARP_SIZE - 1) / CR__WARP_SIZE;
    if ((uint64_t)p->nslots * 8 * CR__WARP_SIZE * warps > CR__REGISTERS_PER_BLOCK_MAX) {
        fault->code = CR__CU_OUT_OF_MEMORY;
        snprintf(fault->message, sizeof fault->message,
                 "kernel %s: %u registers per thread for %llu threads is more than the "
                 "interpreter gives a block",
                 p->name, p->nslots, (unsigned long long)threads);
        return fault->code;
    }
    if (!p->has_effects)
        return 0; /* nothing it does can be seen */
    int rc = resolve_vars(m, env, fault);
    if (rc)
        return rc;
    uint8_t *params =
        calloc(1, p->param_size > l->param_size ? p->param_size + 8 : l->param_size + 8);
    if (!params) {
        fault->code = CR__CU_OUT_OF_MEMORY;
        snprintf(fault->message, sizeof fault->message, "out of memory");
        return fault->code;
    }
    if (l->param_size && l->params)
        memcpy(params, l->params, l->param_size);
    pthread_mutex_t lock;
    pthread_mutex_init(&lock, NULL);
    cr__job_t job;
    memset(&job, 0, sizeof job);
    job.module = m;
    job.prog = p;
    job.launch = *l;
    job.params = params;
    job.env = env;
    job.nblocks = blocks;
    job.lock = &lock;
    rc = cr__pool_run(&job);
    if (rc) {
        fault->code = job.fault;
        snprintf(fault->message, sizeof fault->message, "%s", job.fault_msg);
    }
    pthread_mutex_destroy(&lock);
    free(params);
    return rc;
}
