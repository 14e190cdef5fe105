/* Device time per tenant, and whose launches go to the device next.
 *
 * Measuring. A session's launches on a stream are grouped into batches: its executor records
 * a timing event on the stream before a batch's first launch and another after its last, and
 * one harvester thread polls the pending batches' end events and charges the time between the
 * two to the tenant and the session. A batch ends after a few launches (BATCH_NS of estimated
 * device time, BATCH_LAUNCHES at most), before the executor runs any other request and before
 * it waits (for admission or for input), so admitted work is never left in an open batch.
 * Device time counts kernels; copies are counted in bytes elsewhere.
 *
 * Dispatching. Every launch is admitted first (cr_sched_launch_begin). One tenant at a time
 * holds the device: its launches are admitted up to its own bound on work in flight
 * (INFLIGHT_LAUNCHES, and AHEAD_NS of estimated device time); other tenants' executors wait,
 * and their connections stop being read once their queues fill, so no tenant can flood the
 * device. The next holder is, among the tenants waiting to launch, one of the highest priority
 * level, and within it the one with the least virtual time (device time / weight). The holder
 * keeps the device while no other tenant of its level waits; with a rival, it stops after
 * QUANTUM_NS of device time. Its admitted work drains before the next holder starts (a lower
 * level waits for that too: it only gets what the others leave). So, under contention,
 * different tenants' kernels do not overlap on the device, each batch's time is its own, and
 * device time goes by weight (a GPU time-slices between processes the same way). A tenant of
 * a higher level takes the device at once, without waiting for the drain, and its streams
 * outrank the others' on the device (handlers_stream.c). A tenant back from more than IDLE_NS
 * without work starts at the virtual clock (the least virtual time of the busy tenants): it
 * banks no credit for the time it did not use. Work that makes no progress for STUCK_NS (a
 * kernel waiting for the host, or one that runs very long) no longer keeps others waiting.
 * The harvester polls every POLL_MIN_NS while an executor waits for admission (the first
 * to wait wakes it), backing off to POLL_MAX_NS otherwise.
 *
 * Loops. Real work is a loop: a training step or an inference request launches its kernels
 * and waits for them, so between rounds a tenant has nothing queued for the time its
 * client takes to see the result and launch again (its think time). A holder whose queue
 * runs dry would lose the device at every round, and with it the share its weight gives
 * it. So the holder keeps the device for a short while after its work finished
 * (anticipation, as I/O schedulers idle for a process that is about to read again): as
 * long as twice its measured think time, never longer than ANTICIPATE_MAX_NS nor than
 * its last round's device time (so at most about half the device idles for a tenant
 * whose rounds are short), and only while its slice lasts and a rival waits. When its
 * slice ends during such a wait it may start the next slice itself, if its virtual time is
 * still the least. A tenant that does not come back in time loses the device as before.
 *
 * Hard caps. A tenant with a compute_limit earns device time at that rate of the wall time,
 * into a small bucket (CAP_BURST_NS): it is admitted only while its credit, less the
 * estimate of what it has in flight, is left, even when the device is otherwise idle, and
 * while it waits for credit it is not a candidate for the device. Charged device time
 * spends the credit.
 *
 * A lone tenant runs at full speed: it is never made to drain, and only its own bound applies. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "backend.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "scheduler.h"
#include "session.h"
#include "tenants.h"

#define QUANTUM_NS 4e6         /* a holder's device time before a rival of its level goes */
#define AHEAD_NS 50e6          /* estimated device time a tenant may have in flight */
#define INFLIGHT_LAUNCHES 4096 /* launches a tenant may have in flight */
#define BATCH_NS 1e6           /* estimated device time of one measured batch */
#define BATCH_LAUNCHES 64
#define STUCK_NS 250000000        /* no progress for this long: stop waiting for that work */
#define IDLE_NS 50000000          /* a tenant without work for longer is back from idle */
#define RECENT_TAU_NS 2e9         /* how fast the recent share forgets */
#define POLL_MIN_NS 20000         /* harvester: while executors wait for admission */
#define POLL_MAX_NS 1000000       /* harvester: otherwise, backing off to this */
#define ADMIT_RECHECK_NS 10000000 /* a waiting executor looks again (stuck work) */
#define ANTICIPATE_MAX_NS 3e6     /* the longest the device waits for a holder's next round */
#define THINK_MAX_NS 20e6         /* a longer gap is no loop's think time */
#define CAP_BURST_NS 20e6         /* a capped tenant's credit of device time, at most */

typedef struct cr_batch_s {
    struct cr_batch_s *next; /* the session's open batches, then the pending list */
    cr_session_t *session;   /* referenced */
    cr_tenant_t *tenant;
    cr_handle_t *stream; /* while open */
    CUevent start, end;
    uint32_t launches, limit;
    int timed; /* start recorded: the time between start and end counts */
    double ns; /* its device time, once finished */
} batch_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t admit_cond;   /* monotonic clock */
static pthread_cond_t harvest_cond; /* monotonic clock */
static const cr_backend_t *backend;
static cr_tenant_t *known;
static cr_tenant_t *holder;
static double vclock;
static unsigned blocked;     /* executors waiting for admission */
static unsigned waiting_all; /* executors in cr_sched_launch_begin */
static int harvester_idle;   /* nothing pending: it waits for a batch */
static batch_t *pending_head, *pending_tail;
static CUevent *event_pool; /* timing events to reuse */
static size_t pool_count, pool_cap;

/* CLOCK_MONOTONIC, ns from now, for the timed waits. */
static struct timespec deadline(int64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec += ns % 1000000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

static int level(const cr_tenant_t *t)
{
    return __atomic_load_n(&t->priority, __ATOMIC_RELAXED);
}

static double weight(const cr_tenant_t *t)
{
    double w;
    __atomic_load(&t->weight, &w, __ATOMIC_RELAXED); /* a reload may change it */
    return w > 0 ? w : 1;
}

/* ---- the policy (all under lock) ---- */

static double launch_estimate(const cr_tenant_t *t)
{
    return t->sched.launch_ns > 0 ? t->sched.launch_ns : QUANTUM_NS;
}

static double compute_limit(const cr_tenant_t *t)
{
    double l;
    __atomic_load(&t->compute_limit, &l, __ATOMIC_RELAXED); /* a reload may change it */
    return l > 0 && l < 1 ? l : 0;
}

/* A capped tenant's credit now (what it earned since credit_at, up to the bucket). */
static double credit(const cr_tenant_t *t, int64_t now)
{
    const cr_sched_tenant_t *st = &t->sched;
    double c = st->credit_ns + (double)(now - st->credit_at) * compute_limit(t);
    return c < CAP_BURST_NS ? c : CAP_BURST_NS;
}

/* How long a capped tenant waits before one more launch fits its credit, 0: it fits. */
static double capped_for(const cr_tenant_t *t, int64_t now)
{
    double l = compute_limit(t);
    if (!l)
        return 0;
    double short_of = t->sched.inflight * launch_estimate(t) - credit(t, now);
    return short_of >= 0 ? short_of / l + 1 : 0;
}

/* The tenant's own bound on work in flight, and its cap, leave room for one more launch
 * (the clock is read only for a capped tenant: this runs on every launch). */
static int own_room(const cr_tenant_t *t)
{
    unsigned n = t->sched.inflight;
    return n < INFLIGHT_LAUNCHES && (n == 0 || n * launch_estimate(t) < AHEAD_NS) &&
           (!compute_limit(t) || capped_for(t, cr_now_ns()) == 0);
}

/* Another tenant of at least t's level wants the device. */
static int has_rival(const cr_tenant_t *t)
{
    for (const cr_tenant_t *u = known; u; u = u->sched.next_known)
        if (u != t && u->sched.waiting && level(u) >= level(t))
            return 1;
    return 0;
}

static int waiting_above(int lv)
{
    for (const cr_tenant_t *u = known; u; u = u->sched.next_known)
        if (u->sched.waiting && level(u) > lv)
            return 1;
    return 0;
}

static int slice_used(const cr_tenant_t *t)
{
    return t->sched.slice_ns + t->sched.inflight * launch_estimate(t) >= QUANTUM_NS;
}

static int stuck(const cr_tenant_t *t, int64_t now)
{
    return t->sched.inflight > 0 && now - t->sched.progress_ns > STUCK_NS;
}

/* How long the device waits for t's next round after its work finished, 0: not at all. */
static double anticipation_ns(const cr_tenant_t *t)
{
    const cr_sched_tenant_t *st = &t->sched;
    if (st->think_ns <= 0 || st->round_ns <= 0)
        return 0;
    double w = 2 * st->think_ns + 20e3; /* a little more than its usual gap */
    if (w > ANTICIPATE_MAX_NS)
        w = ANTICIPATE_MAX_NS;
    return w < st->round_ns ? w : st->round_ns;
}

/* t's work finished a moment ago and its next round is expected: the device waits for it. */
static int anticipated(const cr_tenant_t *t, int64_t now)
{
    return t && !t->sched.waiting && !t->sched.inflight &&
           now - t->sched.idle_since < anticipation_ns(t);
}

/* Who goes next: a waiting tenant with room (or the anticipated holder), of the highest
 * level, least virtual time. */
static cr_tenant_t *best(const cr_tenant_t *expected)
{
    cr_tenant_t *b = NULL;
    for (cr_tenant_t *u = known; u; u = u->sched.next_known) {
        if (!(u->sched.waiting || u == expected) || !own_room(u))
            continue;
        if (!b || level(u) > level(b) || (level(u) == level(b) && u->sched.vtime < b->sched.vtime))
            b = u;
    }
    return b;
}

static void update_holder(int64_t now)
{
    cr_tenant_t *h = holder;
    const cr_tenant_t *expected = NULL;
    if (h && !waiting_above(level(h))) {
        if (h->sched.waiting && own_room(h) && !(has_rival(h) && slice_used(h)))
            return; /* it goes on */
        if (h->sched.inflight && !stuck(h, now))
            return; /* its work drains before anyone else's starts */
        if (anticipated(h, now)) {
            if (!slice_used(h))
                return;   /* its next round comes soon: the device waits */
            expected = h; /* it may take the next slice if it is its turn */
        }
    }
    cr_tenant_t *next = best(expected);
    if (!next) {
        if (h && !h->sched.waiting && !h->sched.inflight)
            holder = NULL;
        return;
    }
    if (next != h || slice_used(h)) { /* a new slice */
        holder = next;
        next->sched.slice_ns = 0;
        next->sched.progress_ns = now;
    }
}

static int may_admit(const cr_tenant_t *t)
{
    return holder == t && own_room(t) && !(has_rival(t) && slice_used(t));
}

/* The least virtual time of the busy tenants moves the virtual clock forward. */
static void advance_vclock(void)
{
    double least = INFINITY;
    for (const cr_tenant_t *u = known; u; u = u->sched.next_known)
        if ((u->sched.waiting || u->sched.inflight) && u->sched.vtime < least)
            least = u->sched.vtime;
    if (least != INFINITY && least > vclock)
        vclock = least;
}

static double recent(const cr_tenant_t *t, int64_t now)
{
    return t->sched.recent_ns * exp(-(double)(now - t->sched.recent_at) / RECENT_TAU_NS);
}

/* n launches of t are off the device (finished, or never got there). */
static void leave_flight(cr_tenant_t *t, unsigned n, int64_t now)
{
    cr_sched_tenant_t *st = &t->sched;
    st->inflight -= n;
    if (!st->inflight) {
        st->idle_since = now; /* idle, unless it is waiting to launch more */
        if (!st->waiting) {   /* the end of a round: its client takes over */
            st->round_ns = st->round_acc_ns;
            st->round_acc_ns = 0;
        }
    }
    pthread_cond_broadcast(&admit_cond);
}

/* A finished batch: its time to the tenant and the session, its launches out of flight. */
static void charge(batch_t *b, double ns, int64_t now)
{
    cr_tenant_t *t = b->tenant;
    cr_sched_tenant_t *st = &t->sched;
    if (ns > 0)
        st->round_acc_ns += ns; /* before leave_flight, which may end the round */
    if (compute_limit(t)) {     /* the cap's credit pays for it */
        st->credit_ns = credit(t, now) - ns;
        st->credit_at = now;
    }
    leave_flight(t, b->launches, now);
    st->progress_ns = now;
    if (ns > 0) {
        st->vtime += ns / weight(t);
        if (holder == t)
            st->slice_ns += ns;
        double one = ns / b->launches;
        st->launch_ns = st->launch_ns > 0 ? 0.7 * st->launch_ns + 0.3 * one : one;
        st->recent_ns = recent(t, now) + ns;
        st->recent_at = now;
        cr_session_count_device_time(b->session, (uint64_t)ns); /* and its tenant's */
    }
    advance_vclock();
}

/* ---- timing events ---- */

static CUevent event_get(void)
{
    CUevent e = NULL;
    pthread_mutex_lock(&lock);
    if (pool_count)
        e = event_pool[--pool_count];
    pthread_mutex_unlock(&lock);
    if (!e && backend->d.cuEventCreate(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
        e = NULL;
    return e;
}

static void event_put(CUevent e) /* under lock */
{
    if (!e)
        return;
    if (pool_count == pool_cap) {
        size_t cap = pool_cap ? pool_cap * 2 : 64;
        CUevent *grown = realloc(event_pool, cap * sizeof *grown);
        if (!grown) {
            backend->d.cuEventDestroy_v2(e); /* any thread bound to the context */
            return;
        }
        event_pool = grown;
        pool_cap = cap;
    }
    event_pool[pool_count++] = e;
}

static void batch_free(batch_t *b)
{
    pthread_mutex_lock(&lock);
    event_put(b->start);
    event_put(b->end);
    pthread_mutex_unlock(&lock);
    cr_session_unref(b->session);
    free(b);
}

/* The session's open batches (executor only). */
static batch_t **open_batches(cr_session_t *s)
{
    return (batch_t **)cr_session_slot(s, CR_SLOT_SCHED);
}

/* ---- the executor's side ---- */

/* The session's open batch on the stream, opened if there is none (after admission). */
static CUresult open_batch(cr_session_t *s, cr_handle_t *stream, double estimate)
{
    if (stream->batch)
        return CUDA_SUCCESS;
    batch_t *b = calloc(1, sizeof *b);
    if (!b)
        return CUDA_ERROR_OUT_OF_MEMORY;
    b->session = s;
    cr_session_ref(s);
    b->tenant = cr_session_tenant(s);
    b->stream = stream;
    double n = BATCH_NS / estimate;
    b->limit = n < 1 ? 1 : n > BATCH_LAUNCHES ? BATCH_LAUNCHES : (uint32_t)n;
    b->start = event_get();
    b->end = event_get();
    b->timed =
        b->start && b->end && backend->d.cuEventRecord(b->start, stream->obj) == CUDA_SUCCESS;
    stream->batch = b;
    b->next = *open_batches(s);
    *open_batches(s) = b;
    return CUDA_SUCCESS;
}

static void close_batch(cr_session_t *s, batch_t *b)
{
    for (batch_t **p = open_batches(s); *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            break;
        }
    b->next = NULL;
    b->stream->batch = NULL;
    if (!b->launches) {
        batch_free(b);
        return;
    }
    /* without an end event there is nothing to wait for: its launches leave flight now */
    int tracked = b->end && backend->d.cuEventRecord(b->end, b->stream->obj) == CUDA_SUCCESS;
    b->stream = NULL;
    pthread_mutex_lock(&lock);
    if (tracked) {
        if (pending_tail)
            pending_tail->next = b;
        else
            pending_head = b;
        pending_tail = b;
        if (harvester_idle)
            pthread_cond_signal(&harvest_cond);
        pthread_mutex_unlock(&lock);
        return;
    }
    charge(b, 0, cr_now_ns());
    pthread_mutex_unlock(&lock);
    batch_free(b);
}

void cr_sched_flush(cr_session_t *s)
{
    while (*open_batches(s))
        close_batch(s, *open_batches(s));
}

CUresult cr_sched_launch_begin(cr_session_t *s, cr_handle_t *stream)
{
    cr_tenant_t *t = cr_session_tenant(s);
    cr_sched_tenant_t *st = &t->sched;
    pthread_mutex_lock(&lock);
    if (!st->known) {
        st->known = 1;
        st->credit_ns = CAP_BURST_NS; /* a capped tenant starts with a full bucket */
        st->credit_at = cr_now_ns();
        st->next_known = known;
        known = t;
    }
    /* back from idle: no credit for the time it did not use (a gap shorter than IDLE_NS
     * is a client between two launches, which must not cost it its share); a short gap is
     * its loop's think time */
    if (st->waiting++ == 0 && st->inflight == 0) {
        double gap = (double)(cr_now_ns() - st->idle_since);
        if (gap > IDLE_NS && st->vtime < vclock)
            st->vtime = vclock;
        if (gap < THINK_MAX_NS)
            st->think_ns = st->think_ns > 0 ? 0.8 * st->think_ns + 0.2 * gap : gap;
        else
            st->think_ns = 0; /* not looping now: no anticipation until it is again */
    }
    waiting_all++;
    CUresult r = CUDA_SUCCESS;
    for (;;) {
        /* the common case, a holder nobody else waits for, in few instructions */
        if (holder == t && waiting_all == st->waiting && own_room(t))
            break;
        update_holder(cr_now_ns());
        if (may_admit(t))
            break;
        if (cr_session_closing(s)) {
            r = CUDA_ERROR_DEINITIALIZED; /* nobody reads the answer */
            break;
        }
        if (*open_batches(s)) { /* what it already launched must be able to finish */
            pthread_mutex_unlock(&lock);
            cr_sched_flush(s);
            pthread_mutex_lock(&lock);
            continue;
        }
        /* look again when the holder's anticipated round is due, at the latest */
        int64_t now = cr_now_ns(), wait = ADMIT_RECHECK_NS;
        if (holder != t && anticipated(holder, now)) {
            int64_t left = holder->sched.idle_since + (int64_t)anticipation_ns(holder) - now;
            if (left < wait)
                wait = left > 1000 ? left : 1000;
        }
        double capped = capped_for(t, now); /* or when its cap's credit will let it */
        if (capped > 0 && capped < wait)
            wait = capped > 1000 ? (int64_t)capped : 1000;
        struct timespec until = deadline(wait);
        if (blocked++ == 0) /* the harvester polls faster while anyone waits */
            pthread_cond_signal(&harvest_cond);
        pthread_cond_timedwait(&admit_cond, &lock, &until);
        blocked--;
    }
    st->waiting--;
    waiting_all--;
    if (r == CUDA_SUCCESS)
        st->inflight++;
    double estimate = launch_estimate(t);
    pthread_mutex_unlock(&lock);
    if (r == CUDA_SUCCESS && (r = open_batch(s, stream, estimate)) != CUDA_SUCCESS) {
        pthread_mutex_lock(&lock);
        leave_flight(t, 1, cr_now_ns());
        pthread_mutex_unlock(&lock);
    }
    return r;
}

void cr_sched_launch_end(cr_session_t *s, cr_handle_t *stream, CUresult r)
{
    batch_t *b = stream->batch;
    if (r == CUDA_SUCCESS) {
        if (++b->launches >= b->limit)
            close_batch(s, b);
        return;
    }
    pthread_mutex_lock(&lock); /* it never reached the device */
    leave_flight(cr_session_tenant(s), 1, cr_now_ns());
    pthread_mutex_unlock(&lock);
}

void cr_sched_wake(void)
{
    pthread_mutex_lock(&lock);
    pthread_cond_broadcast(&admit_cond);
    pthread_mutex_unlock(&lock);
}

void cr_sched_figures(const cr_tenant_t *t, double *share, double *busy, unsigned *inflight)
{
    int64_t now = cr_now_ns();
    double all = 0, mine = 0;
    pthread_mutex_lock(&lock);
    for (const cr_tenant_t *u = known; u; u = u->sched.next_known) {
        double r = recent(u, now);
        all += r;
        if (u == t)
            mine = r;
    }
    *inflight = t->sched.inflight;
    pthread_mutex_unlock(&lock);
    *share = all > 0 ? mine / all : 0;
    /* recent() decays with RECENT_TAU_NS, so a device busy for the tenant all along holds
     * RECENT_TAU_NS of its time */
    *busy = fmin(1.0, mine / RECENT_TAU_NS);
}

/* ---- the harvester ---- */

/* The device time of a finished batch, 0 when it cannot be known. */
static double batch_ns(const batch_t *b, CUresult ended)
{
    const cr_driver_t *d = &backend->d;
    float ms = 0;
    if (!b->timed || ended != CUDA_SUCCESS)
        return 0; /* a fault: the stream reports it to its session */
    CUresult r = d->cuEventElapsedTime_v2 ? d->cuEventElapsedTime_v2(&ms, b->start, b->end)
                                          : d->cuEventElapsedTime(&ms, b->start, b->end);
    return r == CUDA_SUCCESS && ms > 0 ? ms * 1e6 : 0;
}

static void *harvester_main(void *unused)
{
    (void)unused;
    cr_backend_bind_thread(backend);
    int64_t poll = POLL_MIN_NS;
    for (;;) {
        pthread_mutex_lock(&lock);
        harvester_idle = 1;
        while (!pending_head)
            pthread_cond_wait(&harvest_cond, &lock);
        harvester_idle = 0;
        batch_t *list = pending_head;
        pending_head = pending_tail = NULL;
        pthread_mutex_unlock(&lock);

        /* look at each without the lock: executors keep adding and admitting */
        batch_t *left = NULL, *left_last = NULL, *done = NULL;
        while (list) {
            batch_t *b = list;
            list = b->next;
            b->next = NULL;
            CUresult ended = backend->d.cuEventQuery(b->end);
            if (ended == CUDA_ERROR_NOT_READY) {
                if (left_last)
                    left_last->next = b;
                else
                    left = b;
                left_last = b;
                continue;
            }
            b->ns = batch_ns(b, ended);
            b->next = done;
            done = b;
        }

        int64_t now = cr_now_ns();
        pthread_mutex_lock(&lock);
        for (batch_t *b = done; b; b = b->next)
            charge(b, b->ns, now);
        if (left) { /* before what arrived meanwhile: the list stays in order */
            left_last->next = pending_head;
            if (!pending_head)
                pending_tail = left_last;
            pending_head = left;
        }
        if (done)
            pthread_cond_broadcast(&admit_cond);
        poll = done || blocked ? POLL_MIN_NS : poll * 2 > POLL_MAX_NS ? POLL_MAX_NS : poll * 2;
        pthread_mutex_unlock(&lock);
        while (done) {
            batch_t *b = done;
            done = b->next;
            batch_free(b);
        }
        if (left) { /* an executor that starts waiting for admission wakes it */
            struct timespec until = deadline(poll);
            pthread_mutex_lock(&lock);
            pthread_cond_timedwait(&harvest_cond, &lock, &until);
            pthread_mutex_unlock(&lock);
        }
    }
    return NULL;
}

int cr_sched_start(const cr_backend_t *b)
{
    backend = b;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&admit_cond, &attr);
    if (rc == 0)
        rc = pthread_cond_init(&harvest_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_t thread;
    if (rc != 0 || pthread_create(&thread, NULL, harvester_main, NULL) != 0)
        return CR_ENOMEM;
    pthread_detach(thread);
    return 0;
}
