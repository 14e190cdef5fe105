/* The field names of the @status reply (its layout is in common/protocol.h). The server
 * writes them (server/status.c) and `cuda-remote status` reads them (tools/cuda-remote.c):
 * both name them here, so a field renamed for one is renamed for the other. */
#ifndef CR_STATUS_FIELDS_H
#define CR_STATUS_FIELDS_H

/* the reply's map */
#define CR_STATUS_SERVER "server"
#define CR_STATUS_SELF "self"
#define CR_STATUS_TENANTS "tenants"
#define CR_STATUS_SESSIONS "sessions"

/* server */
#define CR_STATUS_SERVER_VERSION "version"
#define CR_STATUS_SERVER_BACKEND "backend"
#define CR_STATUS_SERVER_DEVICE "device"
#define CR_STATUS_SERVER_MEMORY_TOTAL "memory_total"
#define CR_STATUS_SERVER_MEMORY_USED "memory_used"
#define CR_STATUS_SERVER_UPTIME_S "uptime_s"
#define CR_STATUS_SERVER_RESTARTS "restarts"
#define CR_STATUS_SERVER_TENANTS_FILE "tenants_file"

/* each of tenants */
#define CR_STATUS_TENANT_NAME "name"
#define CR_STATUS_TENANT_QUOTA "quota"
#define CR_STATUS_TENANT_USED "used"
#define CR_STATUS_TENANT_WEIGHT "weight"
#define CR_STATUS_TENANT_COMPUTE_LIMIT "compute_limit"
#define CR_STATUS_TENANT_PRIORITY "priority"
#define CR_STATUS_TENANT_ADMIN "admin"
#define CR_STATUS_TENANT_REMOVED "removed"
#define CR_STATUS_TENANT_SESSIONS "sessions"
#define CR_STATUS_TENANT_SESSIONS_TOTAL "sessions_total"
#define CR_STATUS_TENANT_QUEUED "queued"
#define CR_STATUS_TENANT_SHARE "share"
#define CR_STATUS_TENANT_INFLIGHT "inflight"

/* each of sessions */
#define CR_STATUS_SESSION_ID "id"
#define CR_STATUS_SESSION_ENDING "ending"
#define CR_STATUS_SESSION_TENANT "tenant"
#define CR_STATUS_SESSION_WHO "who"
#define CR_STATUS_SESSION_PEER "peer"
#define CR_STATUS_SESSION_AUTH "auth"
#define CR_STATUS_SESSION_MEMORY "memory"
#define CR_STATUS_SESSION_REQUESTS "requests"
#define CR_STATUS_SESSION_QUEUED "queued"
#define CR_STATUS_SESSION_CONNECTED_NS "connected_ns"

/* the usage every tenant and session carries too */
#define CR_STATUS_USAGE_LAUNCHES "launches"
#define CR_STATUS_USAGE_BYTES_H2D "bytes_h2d"
#define CR_STATUS_USAGE_BYTES_D2H "bytes_d2h"
#define CR_STATUS_USAGE_ERRORS "errors"
#define CR_STATUS_USAGE_DEVICE_NS "device_ns"

#endif
