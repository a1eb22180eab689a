/* signals: SIGINT and SIGTERM during training. The first one only sets a
 * flag: the step in flight finishes, and at the start of the next one every
 * rank adds its flag into the step's first all-reduce (train.c), so all
 * ranks agree to stop at the same step; the run then writes a checkpoint
 * and exits with 128 + the signal (130 for SIGINT, 143 for SIGTERM). A
 * SIGINT after a first signal ends the process at once, without a
 * checkpoint (the previous ones are intact: checkpoints are written
 * atomically). Owns the handlers and the flag; the handler does nothing but
 * async-signal-safe calls.
 *
 * Output must not stop a run that was asked to save: under mpirun, the
 * launcher stops reading the ranks' stdout and stderr once it has a signal
 * to pass on, and rank 0's next progress line would block in write() until
 * the launcher's SIGKILL. There the first signal makes both descriptors
 * non-blocking (they are the rank's own pty and pipe, shared with no
 * shell), so that line fails instead and the checkpoint gets written. And
 * SIGPIPE is ignored throughout: Ctrl-C on `vktrain train | tee log` ends
 * tee too, and the next line must fail with EPIPE, not kill the run. */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "train_internal.h"

static volatile sig_atomic_t received; /* the first signal, or 0 */
static int loud;                       /* rank 0 says what happens */
static int launched;                   /* under mpirun: see above */

static void unblock(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static void say(const char *s)
{
    if (loud && write(STDERR_FILENO, s, strlen(s)) < 0)
        return; /* nothing to do about a closed stderr */
}

static void on_signal(int sig)
{
    if (received && sig == SIGINT) {
        say("\nvktrain: SIGINT again: exiting at once, without a checkpoint\n");
        _exit(128 + SIGINT);
    }
    if (received)
        return;
    received = sig;
    if (launched) {
        unblock(STDOUT_FILENO);
        unblock(STDERR_FILENO);
    }
    say(sig == SIGINT ? "\nvktrain: SIGINT: finishing this step, then writing a checkpoint "
                        "(SIGINT again exits at once, without one)\n"
                      : "\nvktrain: SIGTERM: finishing this step, then writing a checkpoint\n");
}

void signals_install(int rank, int under_launcher)
{
    loud = rank == 0;
    launched = under_launcher;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* a write or a wait goes on where it was */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void signals_ignore_pipe(void)
{
    signal(SIGPIPE, SIG_IGN);
}

int signals_received(void) { return received; }
