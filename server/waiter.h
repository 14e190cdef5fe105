/* Waiter threads (waiter.c) for calls that wait on the device: neither the loop nor an
 * executor ever waits. Sessions hand work to them through cr_session_finish_on_waiter. */
#ifndef CR_SERVER_WAITER_H
#define CR_SERVER_WAITER_H

#include "backend.h"

/* Binds waiter threads to the backend's context. Call once at start-up. */
void cr_waiter_init(const cr_backend_t *b);
/* Runs fn(arg) on a waiter thread. 0 or CR_ENOMEM. */
int cr_waiter_run(void (*fn)(void *), void *arg);

#endif
