/* The process's client record (client.h): published once by cuInit, read by every call.
 *
 * Threads: any; the pointer is published after the record is complete, and the record is
 * not changed after. Nothing here waits. */
#include "client.h"

static cr_client_t *volatile client_ready; /* set once cuInit succeeded */

cr_client_t *cr_client(void)
{
    return client_ready;
}

void cr_client_publish(cr_client_t *cl)
{
    __atomic_store_n(&client_ready, cl, __ATOMIC_RELEASE);
}

void cr_client_forget(void)
{
    client_ready = NULL;
}
