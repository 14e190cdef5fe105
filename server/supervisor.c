/* The supervisor: cuda-remoted's first process holds the listening sockets and runs the
 * server in a child process, which it starts again when the device context is lost.
 *
 * A kernel fault on a GPU breaks the one context every session runs in, for good: every
 * later call in it fails, and neither cuDevicePrimaryCtxReset nor a new context clears the
 * error while the process lives (measured on an H100; NVIDIA documents that only ending the
 * process does). So the device belongs to a child process that can end: it tells every
 * session that its device state is gone, exits with CR_EXIT_RESTART, and the supervisor
 * forks a fresh one. The supervisor never loads the driver, so each child starts clean;
 * the listening sockets stay open across the restart, so clients that connect meanwhile
 * wait in the backlog instead of being refused. A child that dies of any signal nobody
 * asked the supervisor for (a crash, the out-of-memory killer's SIGKILL, a stray kill) is
 * started again too; when that keeps happening, after a pause that grows up to
 * MAX_BACKOFF_S. A child that exits with a code of its own (a bad option, no device) ends
 * the supervisor with that code: starting it again would fail the same way. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "loop.h"
#include "supervisor.h"

#define MAX_RESTARTS 5 /* within RESTART_WINDOW_NS, then pause */
#define RESTART_WINDOW_NS (60 * 1000000000LL)
#define MAX_BACKOFF_S 30

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t stopping;

/* SIGINT, SIGTERM and SIGHUP are the server's: passed on to the child. */
static void forward(int sig)
{
    if (sig != SIGHUP)
        stopping = 1;
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};

static void set_handlers(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaction(forwarded[i], &sa, NULL);
}

/* Sleeps for `seconds` unless asked to stop meanwhile. */
static void pause_unless_stopping(int seconds)
{
    for (int i = 0; i < seconds * 10 && !stopping; i++)
        usleep(100000);
}

int cr_supervise(void)
{
    pid_t supervisor = getpid();
    int64_t restarts_at[MAX_RESTARTS] = {0};
    int backoff = 0; /* seconds of the last pause before a restart */
    set_handlers(forward);
    for (int generation = 0;; generation++) {
        pid_t pid = fork();
        if (pid < 0) {
            CR_ERROR("cannot start the server process: %s", strerror(errno));
            exit(1);
        }
        if (pid == 0) {
            set_handlers(SIG_DFL);
            /* a supervisor killed outright takes its server along */
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != supervisor)
                _exit(1);
            return generation;
        }
        child_pid = pid;
        if (stopping) /* asked to stop while no child was there to be told */
            kill(pid, SIGTERM);
        int status;
        while (waitpid(pid, &status, 0) < 0)
            if (errno != EINTR) {
                CR_ERROR("lost track of the server process: %s", strerror(errno));
                exit(1);
            }
        child_pid = 0;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        int again =
            !stopping && ((WIFEXITED(status) && code == CR_EXIT_RESTART) || WIFSIGNALED(status));
        if (!again)
            exit(code == CR_EXIT_RESTART ? 1 : code);
        if (WIFSIGNALED(status)) {
            int sig = WTERMSIG(status);
            CR_ERROR("the server process died of signal %d (%s)%s; starting a fresh one", sig,
                     strsignal(sig),
                     sig == SIGKILL ? ", perhaps from the kernel's out-of-memory killer" : "");
        } else {
            CR_INFO("starting a fresh server process with a new device context");
        }
        /* the oldest of the last MAX_RESTARTS restarts: too recent means a loop, which
         * must not spin; the service stays, after a growing pause */
        int64_t now = cr_now_ns();
        int slot = generation % MAX_RESTARTS;
        if (generation >= MAX_RESTARTS && now - restarts_at[slot] < RESTART_WINDOW_NS) {
            backoff = backoff ? (backoff * 2 > MAX_BACKOFF_S ? MAX_BACKOFF_S : backoff * 2) : 1;
            CR_ERROR("the server process ended %d times within a minute; waiting %d s before "
                     "the next one",
                     MAX_RESTARTS, backoff);
            pause_unless_stopping(backoff);
            if (stopping)
                exit(1);
        } else {
            backoff = 0;
        }
        restarts_at[slot] = cr_now_ns();
    }
}
