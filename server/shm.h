/* Memory shared with clients on the same host (shm.c): regions a client passes as memfds,
 * mapped and registered with the device so that copies need no socket. */
#ifndef CR_SERVER_SHM_H
#define CR_SERVER_SHM_H

#include "session.h"

/* --no-shm: decline every region (clients then move their bytes over the socket). */
void cr_shm_set_enabled(int on);
/* --max-shared: a session's regions together may hold this many bytes, which the server
 * page-locks (pins); past it a region is declined (the client keeps the memory its own). */
void cr_shm_set_limit(uint64_t bytes);
/* @shm_attach and @shm_detach (executor): cr_srv_shm_attach, cr_srv_shm_detach. */
/* The server's address of [offset, offset + bytes) in one of the session's regions, NULL
 * when that is not inside a region. Valid until the region is detached, which waits for
 * the session's streams (executor). */
void *cr_shm_host_ptr(cr_session_t *s, uint64_t region, uint64_t offset, uint64_t bytes);
/* Unmaps every region of the session (its work has finished). */
void cr_shm_release_all(cr_session_t *s);

#endif
