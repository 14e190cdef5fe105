/* Warp-wide instructions (shfl, vote, match, redux) and the block's barriers.
 *
 * Warp operations run over the lanes that execute them together: the interpreter keeps the
 * lanes of a warp at the same instruction in lockstep, so the lanes of a member mask that
 * reach a shfl.sync arrive at it as one group. A source lane outside the group gives its
 * register as it is (undefined on a GPU). Barriers count arriving threads per barrier id;
 * a barrier without a thread count completes when every thread of the block that has not
 * exited is waiting at it. */
#include "exec.h"

void cr__exec_shfl(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    (void)wk;
    uint64_t *R = w->R;
    const uint64_t *a = SLOT(in->r[1]), *b = SLOT(in->r[2]), *c = SLOT(in->r[3]);
    uint64_t *d = SLOT(in->r[0]), *p = SLOT(in->r[5]);
    uint64_t src[CR__WARP_SIZE], out[CR__WARP_SIZE];
    uint8_t ok[CR__WARP_SIZE];
    memcpy(src, a, sizeof src);
    LANES({
        int lane = (int)l;
        int bval = (int)(b[l] & 31);
        int cval = (int)(c[l] & 31), seg = (int)((c[l] >> 8) & 31);
        int max_lane = (lane & seg) | (cval & ~seg), min_lane = lane & seg;
        int j, pval;
        switch (in->sub) {
        case CR__SHFL_UP:
            j = lane - bval;
            pval = j >= max_lane;
            break;
        case CR__SHFL_DOWN:
            j = lane + bval;
            pval = j <= max_lane;
            break;
        case CR__SHFL_BFLY:
            j = lane ^ bval;
            pval = j <= max_lane;
            break;
        default:
            j = min_lane | (bval & ~seg);
            pval = j <= max_lane;
            break;
        }
        if (!pval || j < 0 || j > 31)
            j = lane;
        out[l] = (uint32_t)src[j];
        ok[l] = (uint8_t)pval;
    });
    LANES({
        d[l] = out[l];
        p[l] = ok[l];
    });
}

void cr__exec_vote(cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    uint64_t *R = w->R;
    const uint64_t *a = SLOT(in->r[1]);
    uint64_t *d = SLOT(in->r[0]);
    int neg = in->sub2 & CR__VOTE_NOT;
    /* the lanes of the member mask that vote (all that run, if the mask names none) */
    uint32_t voters = m ? m & (uint32_t)SLOT(in->r[2])[__builtin_ctz(m)] : 0;
    if (!voters)
        voters = m;
    uint32_t ballot = 0;
    LANES(ballot |= (uint32_t)(((a[l] != 0) ^ neg) & 1) << l);
    ballot &= voters;
    uint64_t r;
    switch (in->sub) {
    case CR__VOTE_ALL:
        r = ballot == voters;
        break;
    case CR__VOTE_ANY:
        r = ballot != 0;
        break;
    case CR__VOTE_UNI:
        r = ballot == voters || ballot == 0;
        break;
    default:
        r = ballot;
        break;
    }
    LANES(d[l] = r);
}

void cr__exec_match(cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    uint64_t *R = w->R;
    const uint64_t *a = SLOT(in->r[1]);
    uint64_t *d = SLOT(in->r[0]), *p = SLOT(in->r[3]);
    uint64_t vmask = in->sub2 ? ~0ull : 0xffffffffull;
    uint64_t src[CR__WARP_SIZE];
    memcpy(src, a, sizeof src);
    if (in->sub) { /* all */
        int same = 1;
        uint64_t first = m ? src[__builtin_ctz(m)] & vmask : 0;
        LANES(same &= (src[l] & vmask) == first);
        LANES({
            d[l] = same ? m : 0;
            p[l] = (uint64_t)same;
        });
        return;
    }
    uint32_t res[CR__WARP_SIZE];
    LANES({
        uint32_t mk = 0;
        for (uint32_t mm = m; mm; mm &= mm - 1) {
            uint32_t j = (uint32_t)__builtin_ctz(mm);
            if ((src[j] & vmask) == (src[l] & vmask))
                mk |= 1u << j;
        }
        res[l] = mk;
    });
    LANES(d[l] = res[l]);
}

void cr__exec_redux(cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    uint64_t *R = w->R;
    const uint64_t *a = SLOT(in->r[1]);
    uint64_t *d = SLOT(in->r[0]);
    int sgn = in->sub2;
    uint32_t acc = 0;
    int first = 1;
    LANES({
        uint32_t v = (uint32_t)a[l];
        if (first) {
            acc = v;
            first = 0;
        } else {
            switch (in->sub) {
            case CR__ATOM_ADD:
                acc += v;
                break;
            case CR__ATOM_MIN:
                acc = sgn ? ((int32_t)v < (int32_t)acc ? v : acc) : (v < acc ? v : acc);
                break;
            case CR__ATOM_MAX:
                acc = sgn ? ((int32_t)v > (int32_t)acc ? v : acc) : (v > acc ? v : acc);
                break;
            case CR__ATOM_AND:
                acc &= v;
                break;
            case CR__ATOM_OR:
                acc |= v;
                break;
            default:
                acc ^= v;
                break;
            }
        }
    });
    LANES(d[l] = acc);
}

/* ---- barriers ---- */

/* Releases barrier id: its waiting lanes in every warp go on; bar.red lanes get the result. */
static void release(cr__worker_t *wk, uint32_t id)
{
    const cr__prog_t *p = wk->prog;
    for (uint32_t i = 0; i < wk->nwarps; i++) {
        cr__warp_t *w = &wk->warps[i];
        uint32_t lanes = 0;
        for (uint32_t mm = w->waiting; mm; mm &= mm - 1) {
            uint32_t l = (uint32_t)__builtin_ctz(mm);
            if (w->bar_id[l] != id)
                continue;
            lanes |= 1u << l;
            const cr__insn_t *in = &p->code[w->lane_pc[l] - 1];
            if (in->op == CR__OP_BAR && in->sub >= CR__BAR_RED_POPC) {
                uint64_t v = in->sub == CR__BAR_RED_POPC  ? wk->bar_red[id][0]
                             : in->sub == CR__BAR_RED_AND ? wk->bar_red[id][1]
                                                          : wk->bar_red[id][2];
                w->R[(size_t)in->r[0] * CR__WARP_SIZE + l] = v;
            }
        }
        w->waiting &= ~lanes;
    }
    wk->bar_arrived[id] = 0;
    wk->bar_expected[id] = 0;
    wk->bar_red[id][0] = 0;
    wk->bar_red[id][1] = 1;
    wk->bar_red[id][2] = 0;
}

void cr__barrier_check(cr__worker_t *wk)
{
    for (uint32_t id = 0; id < 16; id++) {
        if (!wk->bar_arrived[id])
            continue;
        uint32_t want = wk->bar_expected[id] ? wk->bar_expected[id] : wk->live;
        if (wk->bar_arrived[id] >= want)
            release(wk, id);
    }
}

int cr__barrier_arrive(cr__worker_t *wk, cr__warp_t *w, const cr__insn_t *in, uint32_t m)
{
    uint64_t *R = w->R;
    uint32_t first = (uint32_t)__builtin_ctz(m);
    uint64_t idv = R[(size_t)in->r[1] * CR__WARP_SIZE + first];
    uint64_t count = R[(size_t)in->r[2] * CR__WARP_SIZE + first];
    if (idv > 15) {
        cr__fault(wk, w, first, CR__CU_ILLEGAL_INSTRUCTION, "barrier id %llu out of range",
                  (unsigned long long)idv);
        return 0;
    }
    if (count && count % CR__WARP_SIZE) {
        cr__fault(wk, w, first, CR__CU_ILLEGAL_INSTRUCTION,
                  "barrier thread count %llu not a multiple of the warp size",
                  (unsigned long long)count);
        return 0;
    }
    uint32_t id = (uint32_t)idv;
    if (!wk->bar_arrived[id]) {
        wk->bar_red[id][0] = 0;
        wk->bar_red[id][1] = 1;
        wk->bar_red[id][2] = 0;
    }
    if (in->sub >= CR__BAR_RED_POPC) {
        const uint64_t *c = SLOT(in->r[3]);
        int neg = in->sub2 & 1;
        LANES({
            uint32_t v = (uint32_t)(((c[l] != 0) ^ neg) & 1);
            wk->bar_red[id][0] += v;
            wk->bar_red[id][1] &= v;
            wk->bar_red[id][2] |= v;
        });
    }
    if (count)
        wk->bar_expected[id] = (uint32_t)count;
    wk->bar_arrived[id] += (uint32_t)__builtin_popcount(m);
    int wait = in->sub != CR__BAR_ARRIVE;
    if (wait) {
        w->waiting |= m;
        LANES(w->bar_id[l] = (uint8_t)id);
    }
    cr__barrier_check(wk);
    return wait && (w->waiting & m) != 0;
}
