/* Memory instructions of the interpreter: loads, stores and atomics in every state space,
 * calls (argument and frame set-up) and the builtins (vprintf, __assertfail,
 * cudaGraphSetConditional).
 *
 * Device addresses are host addresses: a global access is checked against the live
 * allocations (a per-worker cache of recent ranges, else the embedder's lookup) and then is a
 * plain memory access. Shared memory is the block's buffer, local memory the thread's stack;
 * generic addresses carry a window tag in their top byte for those (internal.h). Atomics use
 * the compiler's __atomic builtins on the real address, so they are atomic across the host
 * threads running other blocks; float and min/max forms loop on compare-and-swap. */
#include <stdlib.h>

#include "exec.h"

void *cr__global_ptr(cr__worker_t *wk, const cr__warp_t *w, uint32_t lane, uint64_t addr,
                     uint32_t size, int write)
{
    uint64_t end = addr + size;
    for (uint32_t i = 0; i < wk->nranges; i++) {
        cr__range_t *r = &wk->ranges[i];
        if (addr >= r->lo && end <= r->hi && end >= addr) {
            if (i) { /* most recent first */
                cr__range_t t = *r;
                memmove(&wk->ranges[1], &wk->ranges[0], i * sizeof t);
                wk->ranges[0] = t;
            }
            return (void *)(uintptr_t)addr;
        }
    }
    const cr_ptx_module_t *m = wk->job->module;
    uint64_t own = (uint64_t)(uintptr_t)m->own;
    if (m->own && addr >= own && end <= own + m->own_size && end >= addr)
        return (void *)(uintptr_t)addr;
    const cr_ptx_env_t *env = wk->job->env;
    uint64_t base, len;
    if (end >= addr && env && env->allocation && env->allocation(env->user, addr, &base, &len) &&
        end <= base + len) {
        uint32_t n = wk->nranges < CR__RANGE_CACHE ? wk->nranges : CR__RANGE_CACHE - 1;
        memmove(&wk->ranges[1], &wk->ranges[0], n * sizeof wk->ranges[0]);
        wk->ranges[0] = (cr__range_t){base, base + len};
        wk->nranges = n + 1;
        return (void *)(uintptr_t)addr;
    }
    cr__fault(wk, w, lane, CR__CU_ILLEGAL_ADDRESS,
              "out-of-bounds global %s of %u bytes at 0x%llx (outside every allocation)",
              write ? "store" : "load", size, (unsigned long long)addr);
    return NULL;
}

/* The host address of [a, a + size) in state space `op` (a load or store opcode's space), or
 * NULL with the fault recorded. */
static uint8_t *resolve(cr__worker_t *wk, cr__warp_t *w, uint32_t l, int space, uint64_t a,
                        uint32_t size, int write)
{
    const char *what = write ? "store" : "load";
    if (space == CR__SP_NONE) {
        uint64_t tag = a >> CR__WIN_SHIFT;
        if (tag == CR__WIN_SHARED)
            space = CR__SP_SHARED;
        else if (tag == CR__WIN_LOCAL)
            space = CR__SP_LOCAL;
        else if (tag == CR__WIN_PARAM)
            space = CR__SP_PARAM;
        else
            space = CR__SP_GLOBAL;
        if (space != CR__SP_GLOBAL)
            a &= CR__WIN_MASK;
    }
    switch (space) {
    case CR__SP_GLOBAL: {
        void *p = cr__global_ptr(wk, w, l, a, size, write);
        return p;
    }
    case CR__SP_SHARED:
        if (a >= wk->shared_size || size > wk->shared_size - a) {
            cr__fault(wk, w, l, CR__CU_ILLEGAL_ADDRESS,
                      "shared-memory %s of %u bytes at offset 0x%llx outside the block's %u bytes",
                      what, size, (unsigned long long)a, wk->shared_size);
            return NULL;
        }
        return wk->shared + a;
    case CR__SP_LOCAL:
        if (a >= wk->local_stride || size > wk->local_stride - a) {
            cr__fault(wk, w, l, CR__CU_ILLEGAL_ADDRESS,
                      "local-memory %s of %u bytes at offset 0x%llx outside the thread's %u bytes",
                      what, size, (unsigned long long)a, wk->local_stride);
            return NULL;
        }
        return cr__lane_local(wk, w, l) + a;
    default: { /* kernel parameters */
        uint32_t ps = wk->prog->param_size;
        if (write || a >= ps || size > ps - a) {
            cr__fault(wk, w, l, CR__CU_ILLEGAL_ADDRESS, "parameter %s of %u bytes at offset 0x%llx",
                      what, size, (unsigned long long)a);
            return NULL;
        }
        return (uint8_t *)wk->job->params + a;
    }
    }
}

static int space_of_op(unsigned op)
{
    switch (op) {
    case CR__OP_LD_GLOBAL:
    case CR__OP_ST_GLOBAL:
    case CR__OP_ATOM_GLOBAL:
        return CR__SP_GLOBAL;
    case CR__OP_LD_SHARED:
    case CR__OP_ST_SHARED:
    case CR__OP_ATOM_SHARED:
        return CR__SP_SHARED;
    case CR__OP_LD_LOCAL:
    case CR__OP_ST_LOCAL:
        return CR__SP_LOCAL;
    case CR__OP_LD_PARAM:
        return CR__SP_PARAM;
    default:
        return CR__SP_NONE;
    }
}

static int misaligned(cr__worker_t *wk, cr__warp_t *w, uint32_t l, uint64_t a, unsigned size,
                      int write)
{
    return cr__fault(wk, w, l, CR__CU_MISALIGNED_ADDRESS, "misaligned %s of %u bytes at 0x%llx",
                     write ? "store" : "load", size, (unsigned long long)a);
}

static inline uint64_t sx_bits(uint64_t v, unsigned bits)
{
    if (bits >= 64)
        return v;
    uint64_t m = 1ull << (bits - 1);
    return (v ^ m) - m;
}

/* The host address of lane l's access of `total` bytes at a: the fast paths (the block's
 * shared memory, the thread's local memory, the most recent global allocation) inline,
 * everything else (and every fault) through resolve(). */
static inline uint8_t *lane_ptr(cr__worker_t *wk, cr__warp_t *w, uint32_t l, int space, uint64_t a,
                                unsigned total, int write)
{
    switch (space) {
    case CR__SP_SHARED:
        if (a < wk->shared_size && total <= wk->shared_size - a)
            return wk->shared + a;
        break;
    case CR__SP_LOCAL:
        if (a < wk->local_stride && total <= wk->local_stride - a)
            return cr__lane_local(wk, w, l) + a;
        break;
    case CR__SP_GLOBAL:
    case CR__SP_NONE: /* a generic address in no window is global */
        if (wk->nranges && a >= wk->ranges[0].lo && a + total <= wk->ranges[0].hi && a + total >= a)
            return (uint8_t *)(uintptr_t)a;
        break;
    default:
        break;
    }
    return resolve(wk, w, l, space, a, total, write);
}

int cr__space_ptr(cr__worker_t *wk, cr__warp_t *w, uint32_t l, int space, uint64_t a, unsigned size,
                  int write, uint8_t **out)
{
    uint8_t *p = lane_ptr(wk, w, l, space, a, size, write);
    if (!p)
        return wk->fault;
    *out = p;
    return 0;
}

static inline uint64_t load_bytes(const uint8_t *p, unsigned size)
{
    switch (size) {
    case 1:
        return *p;
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

static inline void store_bytes(uint8_t *p, uint64_t v, unsigned size)
{
    switch (size) {
    case 1:
        *p = (uint8_t)v;
        break;
    case 2: {
        uint16_t x = (uint16_t)v;
        memcpy(p, &x, 2);
        break;
    }
    case 4: {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    default:
        memcpy(p, &v, 8);
        break;
    }
}

int cr__exec_ld(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    uint64_t *R = w->R;
    const uint64_t *base = SLOT(in->r[4]);
    unsigned size = in->sub2 & CR__MEM_SIZE_MASK, n = in->n, total = size * n;
    unsigned dbytes = (in->sub2 >> CR__MEM_DEST_SHIFT) & 0xf;
    int sgn = (in->sub2 & CR__MEM_SIGNED) && dbytes > size;
    uint64_t regmask = dbytes >= 8 ? ~0ull : (1ull << (dbytes * 8)) - 1;
    int space = space_of_op(in->op);
    uint64_t *d0 = SLOT(in->r[0]);
    for (uint32_t mm = m; mm; mm &= mm - 1) {
        uint32_t l = (uint32_t)__builtin_ctz(mm);
        uint64_t a = base[l] + (uint64_t)in->imm;
        if (a & (total - 1))
            return misaligned(wk, w, l, a, total, 0);
        const uint8_t *p = lane_ptr(wk, w, l, space, a, total, 0);
        if (!p)
            return wk->fault;
        if (n == 1) {
            CR__DEVICE_BEGIN();
            uint64_t v = load_bytes(p, size);
            CR__DEVICE_END();
            d0[l] = sgn ? sx_bits(v, size * 8) & regmask : v;
            continue;
        }
        uint64_t vals[4];
        CR__DEVICE_BEGIN();
        for (unsigned k = 0; k < n; k++)
            vals[k] = load_bytes(p + k * size, size);
        CR__DEVICE_END();
        for (unsigned k = 0; k < n; k++)
            R[(size_t)in->r[k] * CR__WARP_SIZE + l] =
                sgn ? sx_bits(vals[k], size * 8) & regmask : vals[k];
    }
    return 0;
}

int cr__exec_st(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    uint64_t *R = w->R;
    const uint64_t *base = SLOT(in->r[4]);
    unsigned size = in->sub2 & CR__MEM_SIZE_MASK, n = in->n, total = size * n;
    int space = space_of_op(in->op);
    const uint64_t *v0 = SLOT(in->r[0]);
    for (uint32_t mm = m; mm; mm &= mm - 1) {
        uint32_t l = (uint32_t)__builtin_ctz(mm);
        uint64_t a = base[l] + (uint64_t)in->imm;
        if (a & (total - 1))
            return misaligned(wk, w, l, a, total, 1);
        uint8_t *p = lane_ptr(wk, w, l, space, a, total, 1);
        if (!p)
            return wk->fault;
        CR__DEVICE_BEGIN();
        if (n == 1) {
            store_bytes(p, v0[l], size);
        } else {
            for (unsigned k = 0; k < n; k++)
                store_bytes(p + k * size, R[(size_t)in->r[k] * CR__WARP_SIZE + l], size);
        }
        CR__DEVICE_END();
    }
    return 0;
}

int cr__exec_cp_async(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    uint64_t *R = w->R;
    const uint64_t *dbase = SLOT(in->r[4]), *sbase = SLOT(in->r[1]), *soff = SLOT(in->r[2]),
                   *ssize = SLOT(in->r[3]);
    unsigned size = in->n;
    for (uint32_t mm = m; mm; mm &= mm - 1) {
        uint32_t l = (uint32_t)__builtin_ctz(mm);
        uint64_t d = dbase[l] + (uint64_t)in->imm, s = sbase[l] + soff[l];
        unsigned n = in->sub ? (ssize[l] ? 0 : size) : ssize[l] < size ? (unsigned)ssize[l] : size;
        if ((d & (size - 1)) || (s & (size - 1)))
            return misaligned(wk, w, l, d, size, 1);
        uint8_t *dst = resolve(wk, w, l, CR__SP_SHARED, d, size, 1);
        if (!dst)
            return wk->fault;
        const uint8_t *src = n ? resolve(wk, w, l, CR__SP_GLOBAL, s, n, 0) : dst;
        if (!src)
            return wk->fault;
        CR__DEVICE_BEGIN();
        memcpy(dst, src, n);
        CR__DEVICE_END();
        memset(dst + n, 0, size - n);
    }
    return 0;
}

/* ---- atomics ---- */

#define CAS_LOOP(T, p, compute)                                                                    \
    do {                                                                                           \
        T old_ = __atomic_load_n((T *)(p), __ATOMIC_RELAXED), new_;                                \
        do {                                                                                       \
            T o = old_;                                                                            \
            new_ = (compute);                                                                      \
        } while (!__atomic_compare_exchange_n((T *)(p), &old_, new_, 1, __ATOMIC_SEQ_CST,          \
                                              __ATOMIC_RELAXED));                                  \
        return old_;                                                                               \
    } while (0)

static uint64_t atomic32(uint8_t *p, int op, cr__type_t t, uint32_t b, uint32_t c)
{
    uint32_t *q = (uint32_t *)p;
    int sgn = t == CR__T_S32;
    switch (op) {
    case CR__ATOM_ADD:
        if (t == CR__T_F32)
            CAS_LOOP(uint32_t, q, (uint32_t)B32(F32(o) + F32(b)));
        return __atomic_fetch_add(q, b, __ATOMIC_SEQ_CST);
    case CR__ATOM_MIN:
        if (t == CR__T_F32)
            CAS_LOOP(uint32_t, q, (uint32_t)B32(cr__fmin32(F32(o), F32(b))));
        if (sgn)
            CAS_LOOP(uint32_t, q, (int32_t)o < (int32_t)b ? o : b);
        CAS_LOOP(uint32_t, q, o < b ? o : b);
    case CR__ATOM_MAX:
        if (t == CR__T_F32)
            CAS_LOOP(uint32_t, q, (uint32_t)B32(cr__fmax32(F32(o), F32(b))));
        if (sgn)
            CAS_LOOP(uint32_t, q, (int32_t)o > (int32_t)b ? o : b);
        CAS_LOOP(uint32_t, q, o > b ? o : b);
    case CR__ATOM_INC:
        CAS_LOOP(uint32_t, q, o >= b ? 0 : o + 1);
    case CR__ATOM_DEC:
        CAS_LOOP(uint32_t, q, (o == 0 || o > b) ? b : o - 1);
    case CR__ATOM_EXCH:
        return __atomic_exchange_n(q, b, __ATOMIC_SEQ_CST);
    case CR__ATOM_CAS: {
        uint32_t expected = b;
        __atomic_compare_exchange_n(q, &expected, c, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        return expected;
    }
    case CR__ATOM_AND:
        return __atomic_fetch_and(q, b, __ATOMIC_SEQ_CST);
    case CR__ATOM_OR:
        return __atomic_fetch_or(q, b, __ATOMIC_SEQ_CST);
    default:
        return __atomic_fetch_xor(q, b, __ATOMIC_SEQ_CST);
    }
}

static uint64_t atomic64(uint8_t *p, int op, cr__type_t t, uint64_t b, uint64_t c)
{
    uint64_t *q = (uint64_t *)p;
    int sgn = t == CR__T_S64;
    switch (op) {
    case CR__ATOM_ADD:
        if (t == CR__T_F64)
            CAS_LOOP(uint64_t, q, B64(F64(o) + F64(b)));
        return __atomic_fetch_add(q, b, __ATOMIC_SEQ_CST);
    case CR__ATOM_MIN:
        if (t == CR__T_F64)
            CAS_LOOP(uint64_t, q, B64(cr__fmin64(F64(o), F64(b))));
        if (sgn)
            CAS_LOOP(uint64_t, q, (int64_t)o < (int64_t)b ? o : b);
        CAS_LOOP(uint64_t, q, o < b ? o : b);
    case CR__ATOM_MAX:
        if (t == CR__T_F64)
            CAS_LOOP(uint64_t, q, B64(cr__fmax64(F64(o), F64(b))));
        if (sgn)
            CAS_LOOP(uint64_t, q, (int64_t)o > (int64_t)b ? o : b);
        CAS_LOOP(uint64_t, q, o > b ? o : b);
    case CR__ATOM_EXCH:
        return __atomic_exchange_n(q, b, __ATOMIC_SEQ_CST);
    case CR__ATOM_CAS: {
        uint64_t expected = b;
        __atomic_compare_exchange_n(q, &expected, c, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        return expected;
    }
    case CR__ATOM_AND:
        return __atomic_fetch_and(q, b, __ATOMIC_SEQ_CST);
    case CR__ATOM_OR:
        return __atomic_fetch_or(q, b, __ATOMIC_SEQ_CST);
    default:
        return __atomic_fetch_xor(q, b, __ATOMIC_SEQ_CST);
    }
}

int cr__exec_atom(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    uint64_t *R = w->R;
    const uint64_t *base = SLOT(in->r[4]), *b = SLOT(in->r[1]), *c = SLOT(in->r[2]);
    uint64_t *d = SLOT(in->r[0]);
    cr__type_t t = (cr__type_t)in->sub2;
    unsigned size = cr__type_size(t);
    int space = space_of_op(in->op);
    for (uint32_t mm = m; mm; mm &= mm - 1) {
        uint32_t l = (uint32_t)__builtin_ctz(mm);
        uint64_t a = base[l] + (uint64_t)in->imm;
        if (a & (size - 1))
            return misaligned(wk, w, l, a, size, 1);
        uint8_t *p = resolve(wk, w, l, space, a, size, 1);
        if (!p)
            return wk->fault;
        CR__DEVICE_BEGIN();
        uint64_t old = size == 4 ? atomic32(p, in->sub, t, (uint32_t)b[l], (uint32_t)c[l])
                                 : atomic64(p, in->sub, t, b[l], c[l]);
        CR__DEVICE_END();
        d[l] = old;
    }
    return 0;
}

/* ---- calls ---- */

int cr__exec_call(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    const cr__prog_t *p = wk->prog;
    const cr__call_t *c = &p->calls[in->imm];
    uint32_t caller_size = p->funcs[c->caller].frame_size;
    uint64_t *R = w->R, *frame = SLOT(CR__SLOT_FRAME);
    uint32_t first = (uint32_t)__builtin_ctz(m), callee_index = c->func, wait = 0;
    if (c->func == CR__CALL_INDIRECT) {
        /* lanes calling the same function go together; the others call at their turn */
        const uint64_t *target = SLOT(in->r[1]);
        uint64_t t = target[first];
        int32_t f =
            (t & ~CR__WIN_MASK) == CR__FUNC_TAG && (t & CR__WIN_MASK) < wk->job->module->ir.nfuncs
                ? p->func_of_ir[t & CR__WIN_MASK]
                : -1;
        if (f < 0)
            return cr__fault(wk, w, first, CR__CU_ILLEGAL_ADDRESS,
                             "call through a pointer to no function (0x%llx)",
                             (unsigned long long)t);
        for (uint32_t mm = m; mm; mm &= mm - 1) {
            uint32_t l = (uint32_t)__builtin_ctz(mm);
            if (target[l] != t)
                wait |= 1u << l;
        }
        m &= ~wait;
        callee_index = (uint32_t)f;
    }
    const cr__pfunc_t *callee = &p->funcs[callee_index];
    if (w->depth >= CR__MAX_CALL_DEPTH)
        return cr__fault(wk, w, first, CR__CU_LAUNCH_FAILED, "call depth over %d",
                         CR__MAX_CALL_DEPTH);
    for (uint32_t mm = m; mm; mm &= mm - 1) {
        uint32_t l = (uint32_t)__builtin_ctz(mm);
        uint64_t nb = frame[l] + caller_size;
        if (nb + callee->frame_size > wk->local_stride)
            return cr__fault(wk, w, l, CR__CU_LAUNCH_FAILED,
                             "call stack overflow (%u bytes of local memory per thread)",
                             wk->local_stride);
    }
    int64_t saved = -1;
    if (callee->recursive) {
        size_t n = (size_t)callee->reg_count * CR__WARP_SIZE;
        if (w->save_used + n > w->save_cap) {
            size_t cap = w->save_cap ? w->save_cap * 2 : 4096;
            while (cap < w->save_used + n)
                cap *= 2;
            uint64_t *s = realloc(w->save_stack, cap * sizeof *s);
            if (!s)
                return cr__fault(wk, w, first, CR__CU_OUT_OF_MEMORY, "out of memory");
            w->save_stack = s;
            w->save_cap = cap;
        }
        saved = (int64_t)w->save_used;
        memcpy(w->save_stack + w->save_used, R + (size_t)callee->reg_base * CR__WARP_SIZE,
               n * sizeof(uint64_t));
        w->save_used += n;
    }
    for (uint32_t mm = m; mm; mm &= mm - 1) {
        uint32_t l = (uint32_t)__builtin_ctz(mm);
        uint8_t *local = cr__lane_local(wk, w, l);
        uint64_t base = frame[l], nb = base + caller_size;
        for (uint32_t k = 0; k < c->arg_count; k++) {
            const cr__copy_t *cp = &p->copies[c->arg_first + k];
            uint32_t to = cp->to, size = cp->size;
            if (c->func == CR__CALL_INDIRECT) {
                if (k >= callee->param_count)
                    break;
                const cr__copy_t *param = &p->copies[callee->param_first + k];
                to = param->to;
                size = size < param->size ? size : param->size;
            }
            memmove(local + nb + to, local + base + cp->from, size);
        }
        frame[l] = nb;
    }
    w->frames[w->depth++] =
        (cr__frame_t){m, w->pc + 1, (uint32_t)in->imm, callee_index, w->returned, saved};
    w->returned = 0;
    for (uint32_t mm = w->active & ~m; mm; mm &= mm - 1) {
        uint32_t l = (uint32_t)__builtin_ctz(mm);
        w->lane_pc[l] = wait >> l & 1 ? w->pc : w->pc + 1; /* waiting: call at their turn */
    }
    w->pc = callee->entry;
    w->active = m;
    return 0;
}

/* ---- builtins ---- */

static uint64_t frame_u64(cr__worker_t *wk, cr__warp_t *w, uint32_t l, uint32_t off, unsigned size)
{
    uint64_t v = 0;
    uint64_t base = w->R[CR__SLOT_FRAME * CR__WARP_SIZE + l];
    if (base + off + size <= wk->local_stride)
        memcpy(&v, cr__lane_local(wk, w, l) + base + off, size);
    return v;
}

int cr__exec_builtin(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    for (uint32_t mm = m; mm; mm &= mm - 1) {
        uint32_t l = (uint32_t)__builtin_ctz(mm);
        if (in->op == CR__OP_SETCOND) {
            uint32_t value = (uint32_t)frame_u64(wk, w, l, in->r[2], 4);
            uint64_t h = frame_u64(wk, w, l, in->r[1], 8);
            const cr_ptx_env_t *env = wk->job->env;
            if (!env || !env->set_conditional || env->set_conditional(env->user, h, value))
                return cr__fault(wk, w, l, CR__CU_ILLEGAL_ADDRESS,
                                 "cudaGraphSetConditional of handle %llu, which is not one of "
                                 "the graph this kernel runs in",
                                 (unsigned long long)h);
        } else if (in->op == CR__OP_VPRINTF) {
            int rc = cr__vprintf(wk, w, l, frame_u64(wk, w, l, in->r[1], 8),
                                 frame_u64(wk, w, l, in->r[2], 8));
            if (rc < 0)
                return wk->fault;
            uint64_t base = w->R[CR__SLOT_FRAME * CR__WARP_SIZE + l];
            if (in->n && base + in->r[0] + 4 <= wk->local_stride) {
                int32_t v = rc;
                memcpy(cr__lane_local(wk, w, l) + base + in->r[0], &v, 4);
            }
        } else {
            int rc = cr__assertfail(
                wk, w, l, frame_u64(wk, w, l, in->r[1], 8), frame_u64(wk, w, l, in->r[2], 8),
                (uint32_t)frame_u64(wk, w, l, in->r[3], 4), frame_u64(wk, w, l, in->r[4], 8));
            if (rc)
                return rc;
        }
    }
    if (in->op == CR__OP_ASSERTFAIL)
        return cr__fault(wk, w, (uint32_t)__builtin_ctz(m), CR__CU_ASSERT,
                         "device-side assertion failed");
    return 0;
}

int cr__generic_read(cr__worker_t *wk, const cr__warp_t *w, uint32_t lane, uint64_t addr, void *dst,
                     uint32_t size)
{
    uint8_t *p = resolve(wk, (cr__warp_t *)w, lane, CR__SP_NONE, addr, size, 0);
    if (!p)
        return wk->fault;
    CR__DEVICE_BEGIN();
    memcpy(dst, p, size);
    CR__DEVICE_END();
    return 0;
}

int cr__read_string(cr__worker_t *wk, const cr__warp_t *w, uint32_t lane, uint64_t addr, char *buf,
                    size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        char ch = 0;
        int rc = cr__generic_read(wk, w, lane, addr + n, &ch, 1);
        if (rc)
            return rc;
        if (!ch)
            break;
        buf[n++] = ch;
    }
    buf[n] = 0;
    return 0;
}
