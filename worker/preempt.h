// preempt.h: stop requests from outside (the batch system, the user): the
// first SIGTERM, SIGINT or SIGUSR1 asks the run to stop at its next check
// (every few steps) and checkpoint; a later one ends the process at once.
// SIGUSR2 asks what the process is doing (preempt_set_observer).
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

// Call first in main, before any other thread exists: blocks SIGTERM, SIGINT
// and SIGUSR1 in the calling thread, and so in every thread started after it
// (MPI's, OpenMP's), and starts one thread that takes them with sigwait.
// Why: oneDNN 2.6's AVX-512 GEMM points the stack pointer into a heap buffer
// while it runs (oneDNN issue #4845, fixed upstream in 2026); a signal handled
// on that thread writes its frame there and corrupts the heap. A process
// whose signals only a waiting thread receives never runs a handler on a
// computing thread. Threads that a library started before main (OpenBLAS's)
// do not block them: a handler with the same logic serves those. Until
// preempt_install, and after preempt_uninstall, a signal ends the process as
// its default action would, or stays ignored if it was ignored when
// preempt_start ran. Idempotent. Returns 0 or -errno. Signals sent to one
// thread that blocks them (raise, pthread_kill) stay pending: the batch
// system, the launcher and kill(1) signal the process.
int preempt_start(void);

// preempt_start and preempt_install in one, armed before the handler exists:
// from the moment a launcher can see (/proc: SigCgt) that the process takes
// SIGUSR1, a stop signal is a request, never the default death (between
// preempt_start and preempt_install it would be). Returns 0 or -errno.
int preempt_start_armed(void);

// Arms the flag (preempt_start must have run; else -ESRCH) and clears any
// earlier request. After the first signal preempt_requested() is true; a
// signal that comes PREEMPT_REPEAT_GRACE_MS or more later ends the process
// by that signal's default action (an ignored one too: the user insists).
// Returns 0 or -errno.
int preempt_install(void);

// Disarms: signals end the process again. Returns 0.
int preempt_uninstall(void);

// SIGUSR2 asks "what is it doing?": preempt_start blocks it too, and the
// signal thread calls `observer` with it (nothing else happens; without an
// observer it is ignored). The observer is also called, on that thread,
// with the first stop signal while armed (after the flag is set). It runs
// on an ordinary thread: it may take locks, allocate and write files.
void preempt_set_observer(void (*observer)(int sig));

// Whether a stop was requested (an atomic read).
int preempt_requested(void);

// The signal that asked to stop (SIGTERM, SIGINT, SIGUSR1), 0 when none.
int preempt_signal(void);

// The pid of the process that sent that signal (kill(2)'s sender), 0 when
// unknown (none yet, or raised by the kernel or a thread).
int preempt_sender(void);

// Whether that signal is Open MPI's launcher ending the job itself: SIGTERM
// from the parent process, which is mpirun (or orted, on another host).
// mpirun answers a SIGINT or SIGTERM of its own that way, and then exits 1
// whatever the ranks do (Open MPI 4.1: it cannot forward TERM or INT), and
// kills the ranks odls_base_sigkill_timeout (1 s) after the SIGTERM.
int preempt_from_mpi_launcher(void);

// The name of such a signal ("SIGTERM", "SIGINT", "SIGUSR1"), "none" for 0.
const char *preempt_signal_name(int sig);

#endif
