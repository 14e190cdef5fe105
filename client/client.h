/* The process's client: its one connection and what the server described at hello.
 *
 * The stub's modules are layered; each uses only modules of the rows below its own:
 *
 *   export_tables nvml_view         the private tables (cuInit, contexts, modules); what
 *                                   NVML shows (for libnvidia-ml.so.1, client/nvml/)
 *   lifecycle                       cuInit's sequence, the primary-context reset, fork, exit
 *   copy launch memset tensormap    the calls that move data and run kernels
 *   module                          code and its kernels' layouts
 *   memory                          device ranges, address windows, page-locked memory
 *   context shm device capture      contexts, shared memory, device queries
 *   call                            cr_remote_call, the generated stubs' way to the server
 *   stream                          default streams, stream ids on the wire
 *   marshal connect                 the generic marshaller; the address and the hello
 *   request handles driver          replies as CUresults; handle ids; local driver answers
 *   client                          this record
 *   conn                            the connection: frames, threads, the socket (conn*.c)
 *
 * integrity and procaddr (the integrity check, the cuGetProcAddress table) use none of
 * them. What every feature does at cuInit or at the primary-context reset, lifecycle.c
 * calls in order: no feature knows another's part in them. */
#ifndef CR_CLIENT_H
#define CR_CLIENT_H

#include <stdint.h>

#include "conn.h"
#include "cr_client_hand.h"
#include "export_tables.h"

#define CR_MAX_DEVICES 16
#define CR_MAX_DEVICE_WINDOWS 8
#define CR_CUDA_VERSION 13000 /* the driver API version this stub implements */

typedef struct {
    char name[256];
    CUuuid uuid;
    uint64_t total_mem;
    int attrs[CU_DEVICE_ATTRIBUTE_MAX]; /* indexed by CUdevice_attribute */
} cr_device_t;

typedef struct {
    uint64_t base, size;
} cr_device_window_t;

typedef struct cr_client_s {
    cr_conn_t *conn;
    int is_unix; /* over a Unix socket: the server is on this host */
    int server_driver_version;
    char backend[32];
    int device_count;
    cr_device_t devices[CR_MAX_DEVICES];
    /* per table of common/export_tables.h: its size in bytes in the server's driver, 0 when
     * it has the table but says no size, -1 when it lacks it (export_tables.c) */
    int32_t export_table_size[CR_EXPORT_TABLE_COUNT];
    /* where the server's device addresses lie, when it knows */
    int window_count;
    cr_device_window_t windows[CR_MAX_DEVICE_WINDOWS];
    /* where the server maps shared regions at the client's addresses (shm.c); size 0: none */
    cr_device_window_t host_window;
} cr_client_t;

/* The connected client, or NULL before a successful cuInit. */
cr_client_t *cr_client(void);
/* Makes cl the connected client (lifecycle.c, once cuInit's steps all ran). */
void cr_client_publish(cr_client_t *cl);
/* No client any more (a forked child must not use its parent's connection). */
void cr_client_forget(void);

#endif
