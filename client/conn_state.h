/* The connection's state, shared by the files that implement conn.h and private to them:
 * conn.c (opening, state, registrations), conn_send.c (the send buffer), conn_read.c
 * (reading and the reader thread) and conn_callback.c (the host-function thread).
 *
 * Locks: send_lock guards the send buffer; lock guards the pending list, the asynchronous
 * registrations, `dead`, and the read role; cb_lock guards the callback queue. A thread
 * holding send_lock may take lock, never the reverse; cb_lock is taken alone. */
#ifndef CR_CONN_STATE_H
#define CR_CONN_STATE_H

#include <pthread.h>

#include "conn.h"
#include "idmap.h"
#include "transport.h"

#define READ_BUFFER (256u << 10)

typedef struct {
    size_t at; /* offset in the send buffer where these bytes belong */
    const void *data;
    size_t len;
} bulk_ref_t;

/* Something the server will send for an asynchronous request. */
typedef struct {
    int is_host_func;
    cr_sink_t sink;
    void (*fn)(void *);
    void *data;
} async_reg_t;

typedef struct callback_job_s {
    struct callback_job_s *next;
    uint64_t call_id;
    void (*fn)(void *);
    void *data;
} callback_job_t;

struct cr_conn_s {
    cr_transport_t tr; /* the socket, plaintext or TLS */
    char address[300];
    char why[320]; /* why it died (under lock) */

    pthread_mutex_t send_lock;
    cr_buf_t out;
    bulk_ref_t *refs;
    size_t ref_count, ref_cap;
    uint64_t next_call_id;

    pthread_mutex_t lock; /* pending list, async registrations, dead, the read role */
    pthread_cond_t cond;  /* broadcast when a reply completes or the read role is free */
    cr_pending_t *pending;
    cr_idmap_t async_regs;      /* call id -> async_reg_t * */
    cr_idmap_t kept_host_funcs; /* host id -> async_reg_t *: graph host nodes, kept */
    int dead;
    int established;         /* the hello succeeded (cr_conn_established) */
    int context_error;       /* CUresult the server said broke the context, 0 if none */
    int context_reason_told; /* the server's reason was printed (receiving thread only) */

    /* Reading: one thread at a time holds the read role and reads whole frames. A thread
     * waiting for its reply reads itself (spinning briefly first), so a round trip costs no
     * thread hand-off; the background reader reads only while nobody waits, so that
     * asynchronous data and host functions progress without a synchronizing call. */
    int role;        /* ROLE_* */
    int app_waiters; /* threads waiting for a reply */
    int wake_fd;     /* eventfd: asks the background reader to give up the role */
    uint8_t *rbuf;
    size_t rpos, rlen;
    pthread_t reader;
    uint64_t spin_ns; /* how long a waiting thread polls the socket before sleeping */

    pthread_mutex_t cb_lock;
    pthread_cond_t cb_cond;
    callback_job_t *cb_head, *cb_tail;
    pthread_t cb_thread;
    int cb_started;
};

enum { ROLE_NONE, ROLE_APP, ROLE_BACKGROUND };

/* conn.c: marks the connection failed and wakes every waiter; says why once it was
 * established. Takes lock. */
void cr_conn_mark_dead(cr_conn_t *c, const char *why);

/* conn_send.c: registers p as waiting for m's reply and sends m (with pass_fd, or -1). */
int cr_conn_call_start(cr_msg_t *m, cr_pending_t *p, int pass_fd);
/* conn_send.c: an asynchronous message that must not wait in the buffer (acknowledgements). */
int cr_conn_send_now(cr_msg_t *m);

/* conn_read.c: the background reader thread's body (arg: the connection). */
void *cr_conn_reader_main(void *arg);
/* conn_read.c: a write failed. The server may have closed the connection on purpose after
 * saying why (@context_error): what it sent before is read first (by the thread reading
 * now, else by the caller), then the connection is marked dead. The caller may hold
 * send_lock, not lock. */
void cr_conn_write_failed(cr_conn_t *c, const char *why);

/* conn_callback.c: queues a host function to run on the callback thread, starting it on
 * first use, then acknowledges it. 0 or CR_ENOMEM. */
int cr_conn_queue_host_func(cr_conn_t *c, uint64_t call_id, void (*fn)(void *), void *data);

#endif
