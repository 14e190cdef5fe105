/* The handle ids the server gave this client, with their types. Asynchronous calls are
 * sent without waiting, so a stale or made-up handle must be caught here to fail at once,
 * as it does on a GPU, instead of at some unrelated later call.
 *
 * Threads: any; nothing here waits but for the table's lock. */
#include "handles.h"

#include <pthread.h>

#include "cr_api_desc.h"
#include "idmap.h"
#include "protocol.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cr_idmap_t live = CR_IDMAP_INIT;    /* id -> type */
static cr_idmap_t aliases = CR_IDMAP_INIT; /* alias -> id */
static int any_alias;                      /* atomic: the common case skips the lock */

int cr_handles_alias(uint64_t alias, uint64_t id)
{
    pthread_mutex_lock(&lock);
    int err = cr_idmap_put(&aliases, alias, id);
    pthread_mutex_unlock(&lock);
    if (!err)
        __atomic_store_n(&any_alias, 1, __ATOMIC_RELEASE);
    return err;
}

uint64_t cr_handles_resolve(uint64_t handle)
{
    if (!__atomic_load_n(&any_alias, __ATOMIC_ACQUIRE))
        return handle;
    uint64_t id = handle;
    pthread_mutex_lock(&lock);
    cr_idmap_get(&aliases, handle, &id);
    pthread_mutex_unlock(&lock);
    return id;
}
static uint64_t next_client_id = CR_CLIENT_ID_BASE;

uint64_t cr_handles_new_id(void)
{
    return __atomic_add_fetch(&next_client_id, 0x10, __ATOMIC_RELAXED);
}

int cr_handles_add(uint64_t id, unsigned type)
{
    if (!id)
        return 0;
    pthread_mutex_lock(&lock);
    int err = cr_idmap_put(&live, id, type);
    pthread_mutex_unlock(&lock);
    return err;
}

void cr_handles_remove(uint64_t id)
{
    pthread_mutex_lock(&lock);
    cr_idmap_remove(&live, id, NULL);
    pthread_mutex_unlock(&lock);
}

int cr_handles_valid(uint64_t id, unsigned type)
{
    uint64_t t = 0;
    id = cr_handles_resolve(id);
    pthread_mutex_lock(&lock);
    int found = cr_idmap_get(&live, id, &t);
    pthread_mutex_unlock(&lock);
    /* cudart passes a CUkernel wherever a CUfunction goes */
    return found && (t == type || (type == CR_HT_CUfunc && t == CR_HT_CUkern));
}

void cr_handles_forget_type(unsigned type)
{
    pthread_mutex_lock(&lock);
    for (;;) { /* removal leaves other slots in place, but restart to stay simple */
        size_t pos = 0;
        uint64_t id, t;
        int removed = 0;
        while (cr_idmap_next(&live, &pos, &id, &t))
            if (t == type) {
                cr_idmap_remove(&live, id, NULL);
                removed = 1;
            }
        if (!removed)
            break;
    }
    pthread_mutex_unlock(&lock);
}
