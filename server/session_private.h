/* What the files of the session module share and no other module uses: the session itself.
 * They are session.c, handles.c, allocations.c, virtual_memory.c, legacy_stream.c,
 * context_loss.c,
 * executor.c, admission.c, hello.c, and the session's output (outbox.c, unsent.c); every
 * other module goes through the functions of session.h and loop.h. */

#include <pthread.h>
#include <uv.h>

#include "buf.h"
#include "idmap.h"
#include "rangemap.h"
#include "tls.h"
#include "session.h"
#ifndef CR_SERVER_SESSION_PRIVATE_H
#define CR_SERVER_SESSION_PRIVATE_H


/* A session. s->lock guards what the comments say; the rest is set before the session is
 * shared or belongs to the thread named. */
struct cr_session_s {
    cr_server_t *server;
    const cr_backend_t *backend;
    uint64_t id;
    char peer[128];   /* address of the connection */
    char who[320];    /* "program (pid N) on host" after hello */
    char program[64]; /* the program without its folder, after hello */
    uint32_t pid;     /* on the client's host, after hello (0: it did not say) */
    int drove_device; /* it made a driver call, as a process using the GPU (atomic) */
    char auth[300];   /* how the hello was admitted (cr_session_info_t) */
    int hello_done;
    cr_tenant_t *tenant; /* set at hello */

    /* loop side */
    uv_stream_t *stream; /* uv_tcp_t or uv_pipe_t, owned by server.c */

    pthread_mutex_t lock; /* everything below */
    pthread_cond_t cond;
    cr_request_t *inbox_head, *inbox_tail;
    size_t inbox_bytes;   /* received, not yet run: the loop stops reading above a mark */
    int reading_paused;   /* the loop stopped reading this connection */
    int resume_reading;   /* the executor caught up: the loop may read again */
    int closing;          /* the connection is gone: finish and clean up */
    int refs;             /* executor, connection, queued output, tasks */
    int tasks;            /* waiter tasks and host functions still using the backend */
    cr_idmap_t handles;   /* id -> cr_handle_t * */
    cr_idmap_t by_object; /* backend handle -> id */
    uint64_t next_handle;
    cr_rangemap_t allocations;  /* device memory the session holds (value: charged bytes) */
    cr_rangemap_t code_ranges;  /* globals of its code (value: the library/module id) */
    cr_rangemap_t vmm_reserved; /* address ranges it reserved (virtual_memory.c) */
    cr_rangemap_t vmm_mapped;   /* where its physical memory is mapped (value: its id) */
    cr_rangemap_t host_mapped;  /* its page-locked memory the device reaches (shm.c) */
    cr_idmap_t vmm_physical;    /* id -> physical memory it created */
    uint64_t next_physical_id;
    CUresult deferred_error; /* first failure of an asynchronous request, not yet reported */
    CUresult context_error;  /* a kernel fault broke the client's context: every call fails */
    int probe_wanted;        /* the executor should ask whether the device context is lost */

    /* executor only */
    pthread_t executor;
    cr_handle_t legacy; /* the session's own legacy default stream (id 0) */
    uint64_t legacy_gen;
    void *slots[CR_SLOT_COUNT]; /* what other modules keep per session (cr_session_slot) */

    /* output: written straight from the sending thread when nothing is queued before it
     * (no hand-off to the loop on the way out), else queued for the loop */
    int fd;               /* the connection's socket, -1 once it closes */
    int direct_busy;      /* a thread is writing straight to fd */
    int writes_in_flight; /* messages handed to libuv, not yet written */
    /* TLS (outbox.c): messages are encrypted into tls_wire a piece at a time, by the thread
     * that writes: a direct writer, or the loop while tls_busy */
    cr_tls_t *tls; /* owned; NULL: plaintext */
    cr_buf_t tls_wire;
    size_t tls_wire_sent;
    int tls_busy; /* the loop encrypts or writes tls_wire (counts in writes_in_flight) */
    uv_write_t tls_write;
    struct cr_outmsg_s *out_head, *out_tail;
    int out_queued;        /* on the server's list of sessions with output */
    int close_requested;   /* close the connection once the output is written */
    uint64_t out_bytes;    /* output queued or being written */
    uint64_t staged_bytes; /* device-to-host bytes staged for output still to come */
    int output_waiting;    /* the executor waits for the client to read */
    struct cr_session_s *next_with_output;
    uint64_t stat_requests; /* atomic */

    /* accounting, for `cuda-remote status` and /metrics */
    cr_usage_t usage;                         /* atomic */
    uint64_t memory;                          /* device memory charged for this session (atomic) */
    int64_t connected_ns;                     /* CLOCK_REALTIME */
    int listed;                               /* said hello: shown (under lock) */
    size_t inbox_count;                       /* requests received, not yet run (under lock) */
    struct cr_session_s *all_prev, *all_next; /* every session (session.c) */
};

/* The first handle id a session gives out: well above NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD. */
#define CR_FIRST_HANDLE_ID 0x10000

/* Calls fn for every session, admitted or not, under the sessions' lock. */
void cr_sessions_each(void (*fn)(cr_session_t *s, void *arg), void *arg);
/* Starts the admitted session's executor (executor.c). 0, or CR_ENOMEM with nothing
 * started. */
int cr_executor_start(cr_session_t *s);
/* Whether the device context is lost, after a fault the driver's callback thread saw
 * (context_loss.c; the executor asks, for s->probe_wanted). */
void cr_session_probe_context(cr_session_t *s);
/* Routes the stream's device printf to the session's client, where the backend allows it
 * (handles.c). */
void cr_session_capture_output(cr_session_t *s, void *stream);
/* Frees the session's record of every handle, not the backend objects (handles.c).
 * Caller holds s->lock, or the last reference. */
void cr_session_forget_handles_locked(cr_session_t *s);
/* Forgets the globals of a library or module being unloaded (allocations.c). Caller holds
 * s->lock. */
void cr_session_untrack_code_locked(cr_session_t *s, uint64_t owner);

#endif
