/* The stub's lifecycle (lifecycle.c): cuInit's sequence, the primary-context reset, fork and
 * exit. What others need to know of it. */
#ifndef CR_LIFECYCLE_H
#define CR_LIFECYCLE_H

/* 1 in a child forked after its parent connected: CUDA is unusable there, as natively (its
 * parent's handles mean nothing to a session of its own). */
int cr_lifecycle_forked_after_init(void);

#endif
