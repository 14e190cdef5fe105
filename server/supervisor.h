/* The supervisor (supervisor.c): the first process, which starts a server process and
 * starts a fresh one when it ends for a restart or dies of a signal. */
#ifndef CR_SERVER_SUPERVISOR_H
#define CR_SERVER_SUPERVISOR_H

/* Exit status of a server process that lost the device context: the supervisor starts a
 * fresh one. */
#define CR_EXIT_RESTART 75

/* In the first process: returns in each server process it starts (0 for the first, n for
 * the n-th restart); the supervisor itself exits with the last one's status. */
int cr_supervise(void);

#endif
