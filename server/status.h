/* What the server and its tenants are doing: @status (status.c) and Prometheus metrics
 * (metrics.c), from the same collected figures. */
#ifndef CR_SERVER_STATUS_H
#define CR_SERVER_STATUS_H

#include <uv.h>

#include "loop.h"
#include "tenants.h"

/* Notes the server's start (for its uptime), in the supervisor. */
void cr_status_start(void);
/* How many times the server process was started afresh (supervisor.c), for status and
 * metrics. */
void cr_status_set_restarts(int n);
int cr_status_restarts(void);
/* @status (cr_srv_status) answers with the server, tenants and sessions the caller's
 * tenant may see. */
/* Serves Prometheus metrics at /metrics on a bound listener. 0 or CR_E* (logged). */
int cr_metrics_listen(uv_loop_t *loop, const cr_backend_t *b, const cr_listener_t *l);

/* One tenant's figures, collected for status and metrics. */
typedef struct {
    const cr_tenant_t *tenant;
    char name[64];
    uint64_t quota, used, sessions, sessions_total, queued;
    double weight, compute_limit;
    int priority, admin, removed;
    cr_usage_t usage;
    double share;      /* of the device time used lately (cr_sched_figures) */
    double busy;       /* of the recent wall time, the device on its work (likewise) */
    unsigned inflight; /* launches on the device now */
} cr_tenant_info_t;
/* Every tenant's figures (*count of them; free the array), or NULL when out of memory. */
cr_tenant_info_t *cr_status_tenants(size_t *count);
/* Whose sessions and figures a session's client may see: its own tenant's, or every
 * tenant's (NULL) for an admin tenant's session. */
const cr_tenant_t *cr_status_scope(const cr_session_t *s);
/* The sessions of tenant `only` (every tenant's for NULL) in *list (*count of them; free
 * it). 0, or CR_ENOMEM. */
int cr_status_sessions(const cr_tenant_t *only, cr_session_info_t **list, size_t *count);
/* Seconds since cr_status_start. */
double cr_status_uptime(void);

#endif
