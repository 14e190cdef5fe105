/* Waiter threads: calls that wait on the device (synchronizations, blocking copies) run
 * here, so that neither the loop nor any session's executor ever waits. Threads are made
 * on demand, one per concurrent wait, and leave after a while idle. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "backend.h"
#include "error.h"
#include "waiter.h"

#define IDLE_SECONDS 30

typedef struct task_s {
    struct task_s *next;
    void (*fn)(void *);
    void *arg;
} task_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static task_t *head, *tail;
static int idle;
static const cr_backend_t *backend;

void cr_waiter_init(const cr_backend_t *b)
{
    backend = b;
}

static void *waiter_main(void *unused)
{
    cr_backend_bind_thread(backend);
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!head) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += IDLE_SECONDS;
            idle++;
            int rc = pthread_cond_timedwait(&cond, &lock, &until);
            idle--;
            if (rc != 0 && !head) {
                pthread_mutex_unlock(&lock);
                return NULL;
            }
        }
        task_t *t = head;
        head = t->next;
        if (!head)
            tail = NULL;
        pthread_mutex_unlock(&lock);
        t->fn(t->arg);
        free(t);
        pthread_mutex_lock(&lock);
    }
}

int cr_waiter_run(void (*fn)(void *), void *arg)
{
    task_t *t = malloc(sizeof *t);
    if (!t)
        return CR_ENOMEM;
    t->next = NULL;
    t->fn = fn;
    t->arg = arg;
    pthread_mutex_lock(&lock);
    if (tail)
        tail->next = t;
    else
        head = t;
    tail = t;
    int spawn = idle == 0;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    if (spawn) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &attr, waiter_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) { /* take the task back unless a thread already has it */
            pthread_mutex_lock(&lock);
            int taken = 1;
            for (task_t **pt = &head, *prev = NULL; *pt; prev = *pt, pt = &(*pt)->next)
                if (*pt == t) {
                    *pt = t->next;
                    if (tail == t)
                        tail = prev;
                    taken = 0;
                    break;
                }
            pthread_mutex_unlock(&lock);
            if (!taken) {
                free(t);
                return CR_ENOMEM;
            }
        }
    }
    return 0;
}
