/* What the server and its tenants are doing, for `cuda-remote status` (@status, wire format
 * in common/protocol.h) and for /metrics (metrics.c).
 *
 * A tenant's clients see their own tenant and its sessions; an admin tenant's (and, without
 * a tenants file, everyone, all being "default") see every tenant and session. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "backend.h"
#include "cr_server_hand.h"
#include "dispatch.h"
#include "error.h"
#include "log.h"
#include "mpfield.h"
#include "scheduler.h"
#include "session.h"
#include "status.h"
#include "status_fields.h"
#include "tenants.h"
#include "version.h"

static struct timespec started;
static int restarts;

void cr_status_start(void)
{
    clock_gettime(CLOCK_MONOTONIC, &started);
}

void cr_status_set_restarts(int n)
{
    restarts = n;
}

int cr_status_restarts(void)
{
    return restarts;
}

double cr_status_uptime(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - started.tv_sec) + (now.tv_nsec - started.tv_nsec) / 1e9;
}

/* ---- collecting ---- */


typedef struct {
    cr_tenant_info_t *list;
    size_t count, cap;
    int failed;
} tenant_list_t;

static void add_tenant(const cr_tenant_t *t, void *arg)
{
    tenant_list_t *l = arg;
    if (l->failed || cr_array_room((void **)&l->list, &l->cap, l->count, sizeof *l->list)) {
        l->failed = 1;
        return;
    }
    cr_tenant_info_t *i = &l->list[l->count++];
    memset(i, 0, sizeof *i);
    i->tenant = t;
    memcpy(i->name, t->name, sizeof i->name);
    i->quota = __atomic_load_n(&t->quota, __ATOMIC_RELAXED);
    i->used = __atomic_load_n(&t->used, __ATOMIC_RELAXED);
    i->sessions = __atomic_load_n(&t->sessions, __ATOMIC_RELAXED);
    i->sessions_total = __atomic_load_n(&t->sessions_total, __ATOMIC_RELAXED);
    i->weight = t->weight; /* settings: under the tenants' lock, which foreach holds */
    i->compute_limit = t->compute_limit;
    i->priority = t->priority;
    i->admin = t->admin;
    i->removed = t->removed;
    i->usage.launches = __atomic_load_n(&t->usage.launches, __ATOMIC_RELAXED);
    i->usage.bytes_h2d = __atomic_load_n(&t->usage.bytes_h2d, __ATOMIC_RELAXED);
    i->usage.bytes_d2h = __atomic_load_n(&t->usage.bytes_d2h, __ATOMIC_RELAXED);
    i->usage.errors = __atomic_load_n(&t->usage.errors, __ATOMIC_RELAXED);
    i->usage.device_ns = __atomic_load_n(&t->usage.device_ns, __ATOMIC_RELAXED);
    cr_sched_figures(t, &i->share, &i->busy, &i->inflight);
}

static void add_queued(const cr_session_info_t *s, void *arg)
{
    tenant_list_t *l = arg;
    for (size_t i = 0; i < l->count; i++)
        if (l->list[i].tenant == s->tenant)
            l->list[i].queued += s->queued;
}

cr_tenant_info_t *cr_status_tenants(size_t *count)
{
    tenant_list_t l = {0};
    cr_tenants_foreach(add_tenant, &l);
    if (l.failed || !l.list) {
        free(l.list);
        return NULL;
    }
    cr_sessions_foreach(add_queued, &l); /* after: the two locks are never nested */
    *count = l.count;
    return l.list;
}

/* ---- @status ---- */

#define USAGE_FIELDS 5 /* what pack_usage adds to a map */
static void pack_usage(msgpack_packer *pk, const cr_usage_t *u)
{
    cr_mp_pack_kv_u64(pk, CR_STATUS_USAGE_LAUNCHES, u->launches);
    cr_mp_pack_kv_u64(pk, CR_STATUS_USAGE_BYTES_H2D, u->bytes_h2d);
    cr_mp_pack_kv_u64(pk, CR_STATUS_USAGE_BYTES_D2H, u->bytes_d2h);
    cr_mp_pack_kv_u64(pk, CR_STATUS_USAGE_ERRORS, u->errors);
    cr_mp_pack_kv_u64(pk, CR_STATUS_USAGE_DEVICE_NS, u->device_ns);
}

typedef struct {
    cr_session_info_t *list;
    size_t count, cap;
    const cr_tenant_t *only; /* NULL: every tenant's */
    int failed;
} session_list_t;

static void add_session(const cr_session_info_t *s, void *arg)
{
    session_list_t *l = arg;
    if (l->failed || (l->only && s->tenant != l->only))
        return;
    if (cr_array_room((void **)&l->list, &l->cap, l->count, sizeof *l->list)) {
        l->failed = 1;
        return;
    }
    l->list[l->count++] = *s;
}

const cr_tenant_t *cr_status_scope(const cr_session_t *s)
{
    const cr_tenant_t *t = cr_session_tenant(s);
    return t && __atomic_load_n(&t->admin, __ATOMIC_RELAXED) ? NULL : t; /* admin: reloads */
}

int cr_status_sessions(const cr_tenant_t *only, cr_session_info_t **list, size_t *count)
{
    session_list_t l = {.only = only};
    cr_sessions_foreach(add_session, &l);
    if (l.failed) {
        free(l.list);
        return CR_ENOMEM;
    }
    *list = l.list;
    *count = l.count;
    return 0;
}

void cr_srv_status(cr_request_t *req)
{
    cr_session_t *self = req->session;
    const cr_backend_t *b = cr_session_backend(self);
    const cr_tenant_t *viewer = cr_session_tenant(self);
    int all = viewer && !cr_status_scope(self);
    size_t tenant_count = 0, session_count = 0;
    cr_tenant_info_t *tenants = cr_status_tenants(&tenant_count);
    cr_session_info_t *sessions = NULL;
    if (!tenants || cr_status_sessions(all ? NULL : viewer, &sessions, &session_count)) {
        free(tenants);
        cr_request_finish(req, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    size_t shown = 0;
    for (size_t i = 0; i < tenant_count; i++)
        shown += all || tenants[i].tenant == viewer;
    size_t free_mem = 0, total_mem = 0;
    if (b->d.cuMemGetInfo_v2)
        b->d.cuMemGetInfo_v2(&free_mem, &total_mem);

    cr_reply_t r;
    if (cr_reply_begin(req, &r, CUDA_SUCCESS, 1) != 0) {
        free(tenants);
        free(sessions);
        cr_request_free(req);
        return;
    }
    msgpack_packer *pk = &r.pk;
    msgpack_pack_map(pk, 4);
    cr_mp_pack_str(pk, CR_STATUS_SERVER);
    msgpack_pack_map(pk, 8);
    cr_mp_pack_kv_str(pk, CR_STATUS_SERVER_VERSION, "cuda-remoted " CR_VERSION);
    cr_mp_pack_kv_str(pk, CR_STATUS_SERVER_BACKEND, b->kind);
    cr_mp_pack_kv_str(pk, CR_STATUS_SERVER_DEVICE, b->desc.name);
    cr_mp_pack_kv_u64(pk, CR_STATUS_SERVER_MEMORY_TOTAL, total_mem ? total_mem : b->desc.total_mem);
    cr_mp_pack_kv_u64(pk, CR_STATUS_SERVER_MEMORY_USED, total_mem - free_mem);
    cr_mp_pack_str(pk, CR_STATUS_SERVER_UPTIME_S);
    msgpack_pack_double(pk, cr_status_uptime());
    cr_mp_pack_kv_u64(pk, CR_STATUS_SERVER_RESTARTS, (uint64_t)restarts);
    cr_mp_pack_kv_u64(pk, CR_STATUS_SERVER_TENANTS_FILE, (uint64_t)cr_tenants_from_file());
    cr_mp_pack_kv_u64(pk, CR_STATUS_SELF, cr_session_id(self));
    cr_mp_pack_str(pk, CR_STATUS_TENANTS);
    msgpack_pack_array(pk, shown);
    for (size_t i = 0; i < tenant_count; i++) {
        const cr_tenant_info_t *t = &tenants[i];
        if (!all && t->tenant != viewer)
            continue;
        msgpack_pack_map(pk, 13 + USAGE_FIELDS);
        cr_mp_pack_kv_str(pk, CR_STATUS_TENANT_NAME, t->name);
        cr_mp_pack_kv_u64(pk, CR_STATUS_TENANT_QUOTA, t->quota);
        cr_mp_pack_kv_u64(pk, CR_STATUS_TENANT_USED, t->used);
        cr_mp_pack_str(pk, CR_STATUS_TENANT_WEIGHT);
        msgpack_pack_double(pk, t->weight);
        cr_mp_pack_str(pk, CR_STATUS_TENANT_COMPUTE_LIMIT);
        msgpack_pack_double(pk, t->compute_limit);
        cr_mp_pack_kv_str(pk, CR_STATUS_TENANT_PRIORITY, cr_priority_name(t->priority));
        cr_mp_pack_kv_u64(pk, CR_STATUS_TENANT_ADMIN, t->admin);
        cr_mp_pack_kv_u64(pk, CR_STATUS_TENANT_REMOVED, t->removed);
        cr_mp_pack_kv_u64(pk, CR_STATUS_TENANT_SESSIONS, t->sessions);
        cr_mp_pack_kv_u64(pk, CR_STATUS_TENANT_SESSIONS_TOTAL, t->sessions_total);
        cr_mp_pack_kv_u64(pk, CR_STATUS_TENANT_QUEUED, t->queued);
        cr_mp_pack_str(pk, CR_STATUS_TENANT_SHARE);
        msgpack_pack_double(pk, t->share);
        cr_mp_pack_kv_u64(pk, CR_STATUS_TENANT_INFLIGHT, t->inflight);
        pack_usage(pk, &t->usage);
    }
    cr_mp_pack_str(pk, CR_STATUS_SESSIONS);
    msgpack_pack_array(pk, session_count);
    for (size_t i = 0; i < session_count; i++) {
        const cr_session_info_t *s = &sessions[i];
        msgpack_pack_map(pk, 10 + USAGE_FIELDS);
        cr_mp_pack_kv_u64(pk, CR_STATUS_SESSION_ID, s->id);
        cr_mp_pack_kv_u64(pk, CR_STATUS_SESSION_ENDING, (uint64_t)s->ending);
        cr_mp_pack_kv_str(pk, CR_STATUS_SESSION_TENANT, s->tenant ? s->tenant->name : "");
        cr_mp_pack_kv_str(pk, CR_STATUS_SESSION_WHO, s->who);
        cr_mp_pack_kv_str(pk, CR_STATUS_SESSION_PEER, s->peer);
        cr_mp_pack_kv_str(pk, CR_STATUS_SESSION_AUTH, s->auth);
        cr_mp_pack_kv_u64(pk, CR_STATUS_SESSION_MEMORY, s->memory);
        cr_mp_pack_kv_u64(pk, CR_STATUS_SESSION_REQUESTS, s->requests);
        cr_mp_pack_kv_u64(pk, CR_STATUS_SESSION_QUEUED, s->queued);
        cr_mp_pack_kv_u64(pk, CR_STATUS_SESSION_CONNECTED_NS, s->connected_ns);
        pack_usage(pk, &s->usage);
    }
    free(tenants);
    free(sessions);
    cr_reply_send(req, &r, 0);
    cr_request_free(req);
}
