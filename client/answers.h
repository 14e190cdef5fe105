/* Answers the stub keeps (answers.c).
 *
 * Some driver calls only read what code and the device are: a kernel's function in a
 * context, an attribute, an occupancy. Their answer depends on nothing but their arguments
 * and the kernels' attributes (context.h's generation), so each is asked of the server
 * once and answered here after, while the generation it was asked in holds. cuBLASLt asks
 * five such calls around each launch (seen on an H100), each a round trip that held the
 * launch back: a 4096^3 product ran at 0.6 of native speed.
 *
 * The caller makes the key: the call's arguments in a canonical form (handles resolved,
 * no padding), with every handle checked live first, so that a dead handle still gets its
 * error from the server. Threads: any. */
#ifndef CR_ANSWERS_H
#define CR_ANSWERS_H

#include <stddef.h>
#include <stdint.h>

#define CR_ANSWER_KEY_MAX 256 /* bytes: longer keys are not kept */
#define CR_ANSWER_MAX 16      /* bytes of an answer */

/* 1 with the answer in `answer` (`size` bytes) when one is kept for the call `opcode` with
 * this key in the current generation, else 0. */
int cr_answer_find(uint16_t opcode, const void *key, size_t len, void *answer, size_t size);
/* Keeps an answer the server gave, asked in `generation` (read before asking, so that a
 * change on the way is not missed). */
void cr_answer_keep(uint16_t opcode, const void *key, size_t len, uint64_t generation,
                    const void *answer, size_t size);

/* Says (CUDA_REMOTE_LOG=debug) how often a call was answered here and how often asked,
 * and how often the attributes' generation moved: for the report at exit. */
void cr_answers_report(void);

#endif
