/* The scheduler (sched.c): device time per tenant, measured per batch of launches, and
 * whose launches go next. (Named scheduler.h: a sched.h here would hide the system's.) */
#ifndef CR_SERVER_SCHEDULER_H
#define CR_SERVER_SCHEDULER_H

#include "session.h"

/* Starts measuring and dispatching (the harvester thread). 0 or CR_ENOMEM. */
int cr_sched_start(const cr_backend_t *b);
/* Before a launch on `stream` (executor): waits until the session's tenant may put more
 * work on the device, then makes sure the launch is measured. CUDA_SUCCESS, or an error
 * when the session is closing or out of memory (do not launch). */
CUresult cr_sched_launch_begin(cr_session_t *s, cr_handle_t *stream);
/* After the launch that cr_sched_launch_begin admitted; r is its result. */
void cr_sched_launch_end(cr_session_t *s, cr_handle_t *stream, CUresult r);
/* Ends the session's open batches (executor): before any request other than a launch and
 * before the executor waits, so no admitted work is left unmeasured. */
void cr_sched_flush(cr_session_t *s);
/* Wakes executors waiting for admission (a session is closing). */
void cr_sched_wake(void);
/* The tenant's part of the device time all tenants used lately (0 to 1), the part of the
 * recent wall time the device spent on its work (0 to 1: 0 while the device idles), and its
 * launches in flight on the device now. */
void cr_sched_figures(const cr_tenant_t *t, double *share, double *busy, unsigned *inflight);

#endif
