/* Admission (loop thread): a connection's first message, its hello, names the client for
 * the log and, by its token, the tenant; the tenant must exist and may have one more
 * session. Then the session's executor starts, and the hello goes to it to be answered
 * (hello.c); a refusal is answered at once with its reason. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "guard.h"
#include "hello.h"
#include "log.h"
#include "mpfield.h"
#include "protocol.h"
#include "request.h"
#include "session.h"
#include "session_private.h"
#include "tenants.h"
#include "tls.h"

typedef struct {
    const char *wanted; /* "CN=...", "DNS:..." or "URI:..." */
    int found;
} name_match_t;

static int name_equal(const char *name, void *arg)
{
    name_match_t *m = arg;
    /* DNS names compare without case, as DNS does; the others exactly */
    m->found =
        !strncmp(m->wanted, "DNS:", 4) ? !strcasecmp(m->wanted, name) : !strcmp(m->wanted, name);
    return m->found;
}

/* Whether the session's verified client certificate carries the name (arg: the session). */
static int certificate_has(const char *wanted, void *arg)
{
    name_match_t m = {wanted, 0};
    cr_tls_peer_names(((cr_session_t *)arg)->tls, name_equal, &m);
    return m.found;
}

/* The tenant a hello names (by its token, else by the client's certificate), if it may have
 * one more session; else the error to answer and its reason in `why`. Says how it was
 * named in s->auth. */
static cr_tenant_t *admit_tenant(cr_session_t *s, const msgpack_object *info, CUresult *r,
                                 char *why, size_t why_len)
{
    char protocol[16];
    cr_hello_field(protocol, sizeof protocol, info, "protocol");
    if (atoi(protocol) != CR_PROTOCOL_VERSION) {
        snprintf(why, why_len, "protocol version %s is not %d", protocol, CR_PROTOCOL_VERSION);
        *r = CUDA_ERROR_NOT_SUPPORTED;
        return NULL;
    }
    const msgpack_object *token = cr_mp_field(info, "token");
    int has_token = token && token->type == MSGPACK_OBJECT_STR;
    char subject[256] = "";
    cr_tenant_t *by_cert = NULL;
    if (s->tls) {
        cr_tls_peer_subject(s->tls, subject, sizeof subject);
        by_cert = cr_tenants_find_cert(certificate_has, s);
    }
    const char *reason = NULL;
    cr_tenant_t *tenant = by_cert;
    if (has_token || !by_cert)
        tenant = cr_tenants_find(has_token ? token->via.str.ptr : NULL,
                                 has_token ? token->via.str.size : 0, &reason);
    if (tenant && by_cert && tenant != by_cert) {
        snprintf(why, why_len, "the token names tenant %s, the client certificate tenant %s",
                 tenant->name, by_cert->name);
        *r = CUDA_ERROR_NOT_PERMITTED;
        return NULL;
    }
    if (!tenant) {
        if (subject[0] && !has_token)
            snprintf(why, why_len,
                     "no tenant has the client certificate %s (a tenant's \"cert\"); or set "
                     "CUDA_REMOTE_TOKEN",
                     subject);
        else
            snprintf(why, why_len, "%s", reason ? reason : "no such tenant");
        *r = CUDA_ERROR_NOT_PERMITTED;
        return NULL;
    }
    const char *over = s->tls ? " over TLS" : "";
    if (has_token)
        snprintf(s->auth, sizeof s->auth, "token%s", over);
    else if (by_cert)
        snprintf(s->auth, sizeof s->auth, "certificate %s%s", by_cert->cert, over);
    else
        snprintf(s->auth, sizeof s->auth, "nothing%s (no tenants file)", over);
    unsigned limit = __atomic_load_n(&tenant->max_sessions, __ATOMIC_RELAXED);
    if (!limit)
        limit = cr_guard_limits()->tenant_sessions;
    /* counted here, on the loop thread, which admits every session: no two can race */
    uint64_t now = __atomic_load_n(&tenant->sessions, __ATOMIC_RELAXED);
    if (limit && now >= limit) {
        snprintf(why, why_len, "tenant %s has %llu sessions, as many as it may have", tenant->name,
                 (unsigned long long)now);
        *r = CUDA_ERROR_NOT_PERMITTED;
        return NULL;
    }
    (void)s;
    return tenant;
}

int cr_session_admit(cr_session_t *s, cr_request_t *req, char *why, size_t why_len)
{
    msgpack_zone zone;
    msgpack_zone_init(&zone, 2048);
    int err = cr_request_decode(req, &zone);
    const msgpack_object *info = !err && req->root.type == MSGPACK_OBJECT_MAP ? &req->root : NULL;
    if (!info) {
        snprintf(why, why_len, "a malformed hello");
        msgpack_zone_destroy(&zone);
        return CR_EPROTO;
    }
    char pid[16], host[64], program[200];
    cr_hello_field(pid, sizeof pid, info, "pid");
    cr_hello_field(host, sizeof host, info, "host");
    cr_hello_field(program, sizeof program, info, "program");
    const char *base = strrchr(program, '/');
    snprintf(s->who, sizeof s->who, "%s (pid %s) on %s", base ? base + 1 : program, pid, host);
    snprintf(s->program, sizeof s->program, "%.63s", base ? base + 1 : program);
    const msgpack_object *pid_field = cr_mp_field(info, "pid");
    if (pid_field && pid_field->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
        pid_field->via.u64 <= UINT32_MAX)
        s->pid = (uint32_t)pid_field->via.u64;
    CUresult r = CUDA_SUCCESS;
    char reason[400];
    cr_tenant_t *tenant = admit_tenant(s, info, &r, reason, sizeof reason);
    if (tenant) {
        s->tenant = tenant;
        __atomic_add_fetch(&tenant->sessions, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&tenant->sessions_total, 1, __ATOMIC_RELAXED);
        if (cr_executor_start(s) == 0) {
            msgpack_zone_destroy(&zone);
            return 0;
        }
        __atomic_sub_fetch(&tenant->sessions, 1, __ATOMIC_RELAXED);
        s->tenant = NULL;
        snprintf(reason, sizeof reason, "the server cannot start a thread for the session");
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    cr_hello_refuse(req, r, reason);
    snprintf(why, why_len, "%s: %s", s->who, reason);
    msgpack_zone_destroy(&zone);
    return r == CUDA_ERROR_NOT_SUPPORTED ? CR_EVERSION : CR_EPERM;
}
