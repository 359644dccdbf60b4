// preempt.h: stop requests from outside (the batch system, the user): the
// first SIGTERM, SIGINT or SIGUSR1 asks the run to stop at the next step
// boundary and checkpoint; a later one ends the process at once.
//
// Why SIGUSR1 too: mpirun (Open MPI 4.1) cannot forward SIGTERM or SIGINT; it
// answers them by killing the job (SIGCONT, then SIGTERM and SIGKILL
// odls_base_sigkill_timeout seconds apart) and exits 1. It forwards SIGUSR1
// at once, so scripts/mpirun.sh turns the first TERM/INT into USR1. Slurm's
// `--signal=USR1@T` uses the same signal.
#ifndef VGPU_PREEMPT_H
#define VGPU_PREEMPT_H

// A repeat that arrives within this window of the first signal is the same
// request reaching the rank twice (Slurm signals every process of a step, the
// launcher forwards its own copy), not a second request: it is ignored.
#define PREEMPT_REPEAT_GRACE_MS 1000

// Installs the handlers for SIGTERM, SIGINT and SIGUSR1 (sigaction, SA_RESTART,
// each blocking the others while it runs) and clears any earlier request.
// After the first signal preempt_requested() is true; a signal that comes
// PREEMPT_REPEAT_GRACE_MS or more later restores the default action and
// re-raises it, so the process dies of that signal. Returns 0 or -errno.
int preempt_install(void);

// Puts back the dispositions preempt_install replaced. Returns 0 or -errno.
int preempt_uninstall(void);

// Whether a stop was requested. Async-signal-safe read of a flag.
int preempt_requested(void);

// The signal that asked to stop (SIGTERM, SIGINT, SIGUSR1), 0 when none.
int preempt_signal(void);

// The name of that signal ("SIGTERM", "SIGINT", "SIGUSR1"), "none" when none.
const char *preempt_signal_name(void);

#endif
