/* Answers the stub keeps (answers.h): a table of sets of WAYS slots, the set chosen by a
 * hash of the call and its key; a new answer takes the slot kept longest ago in its set
 * (one slot per set would let two answers in use take each other's slot at every call). */
#include "answers.h"

#include <pthread.h>
#include <string.h>

#include "context.h"
#include "log.h"

#define SETS 128
#define WAYS 4

typedef struct {
    uint16_t opcode;
    uint16_t len; /* of key; 0: empty */
    uint8_t size; /* of answer */
    uint64_t generation;
    uint64_t kept_at; /* order of keeping */
    uint8_t answer[CR_ANSWER_MAX];
    uint8_t key[CR_ANSWER_KEY_MAX];
} slot_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static slot_t slots[SETS][WAYS];
static uint64_t kept; /* answers kept so far */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t hits, misses; /* atomic */

/* A child has another connection, whose handles may be numbered as its parent's were. */
static void forget_in_child(void)
{
    pthread_mutex_init(&lock, NULL);
    memset(slots, 0, sizeof slots);
    kept = 0;
}

static void install(void)
{
    pthread_atfork(NULL, NULL, forget_in_child);
}

static slot_t *set_of(uint16_t opcode, const void *key, size_t len)
{
    uint64_t h = 1469598103934665603ull ^ opcode; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ ((const uint8_t *)key)[i]) * 1099511628211ull;
    return slots[h % SETS];
}

static int holds(const slot_t *s, uint16_t opcode, const void *key, size_t len)
{
    return s->len == len && s->opcode == opcode && memcmp(s->key, key, len) == 0;
}

int cr_answer_find(uint16_t opcode, const void *key, size_t len, void *answer, size_t size)
{
    if (len == 0 || len > CR_ANSWER_KEY_MAX || size > CR_ANSWER_MAX)
        return 0;
    uint64_t generation = cr_ctx_attributes_generation();
    int found = 0;
    pthread_mutex_lock(&lock);
    const slot_t *set = set_of(opcode, key, len);
    for (int w = 0; w < WAYS && !found; w++)
        if (holds(&set[w], opcode, key, len) && set[w].size == size &&
            set[w].generation == generation) {
            memcpy(answer, set[w].answer, size);
            found = 1;
        }
    pthread_mutex_unlock(&lock);
    __atomic_add_fetch(found ? &hits : &misses, 1, __ATOMIC_RELAXED);
    return found;
}

void cr_answer_keep(uint16_t opcode, const void *key, size_t len, uint64_t generation,
                    const void *answer, size_t size)
{
    if (len == 0 || len > CR_ANSWER_KEY_MAX || size > CR_ANSWER_MAX)
        return;
    pthread_once(&once, install);
    pthread_mutex_lock(&lock);
    slot_t *set = set_of(opcode, key, len), *s = &set[0];
    for (int w = 0; w < WAYS; w++) { /* the same call's slot, else the one kept longest ago */
        if (holds(&set[w], opcode, key, len)) {
            s = &set[w];
            break;
        }
        if (set[w].kept_at < s->kept_at)
            s = &set[w];
    }
    s->kept_at = ++kept;
    s->opcode = opcode;
    s->len = (uint16_t)len;
    s->size = (uint8_t)size;
    s->generation = generation;
    memcpy(s->answer, answer, size);
    memcpy(s->key, key, len);
    pthread_mutex_unlock(&lock);
}

void cr_answers_report(void)
{
    uint64_t h = __atomic_load_n(&hits, __ATOMIC_RELAXED);
    uint64_t m = __atomic_load_n(&misses, __ATOMIC_RELAXED);
    if (h + m)
        CR_DEBUG("answers kept by the stub: %llu calls answered here, %llu asked of the server "
                 "(attributes' generation %llu)",
                 (unsigned long long)h, (unsigned long long)m,
                 (unsigned long long)cr_ctx_attributes_generation());
}
