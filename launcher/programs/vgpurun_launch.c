// vgpurun_launch.c: the launcher as vgpurun's child: stop signals passed on
// as checkpoint requests once the ranks can take them, an mpirun that
// outlives its ranks ended, its exit status reported.
#include "vgpurun_launch.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env.h"
#include "util.h"

// A repeat within this time of the first stop signal is the same request
// (a double Ctrl-C, Slurm and a script both passing it on), as for the ranks
// (worker/preempt.h, PREEMPT_REPEAT_GRACE_MS).
#define REPEAT_GRACE_MS 1000

static volatile sig_atomic_t child_pid_ = 0;
static volatile sig_atomic_t stop_signals_ = 0; // TERM/INT received so far
static volatile sig_atomic_t stop_pending_ = 0; // a stop request not yet passed to mpirun
static long long first_stop_ms_ = 0;
static long long pending_since_ms_ = 0;
static volatile sig_atomic_t translate_stop_ = 1; // the child is mpirun: first TERM/INT becomes
                                                  // USR1 (0 for srun, which passes them on)
static int expected_local_ranks_ = 0; // mpirun's children that are ranks, when known (one host)
static int ranks_are_children_ = 1;   // one host: mpirun's children are the ranks
static int child_killed_ = 0;   // the launcher itself ended by a signal
static int ended_hung_ = 0;     // vgpurun ended an mpirun that outlived its ranks

static long long monotonic_ms_(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); // async-signal-safe
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// Forward ^C / kill to the launcher, which passes it to the ranks; vgpurun
// lives on to stop the MPS daemon. mpirun cannot forward TERM or INT (it
// kills the ranks instead, and exits 1) but forwards USR1 at once, which
// vgpu_train takes as "checkpoint and exit 75"; a second TERM/INT, a second
// or more after the first, aborts. The stop request (USR1) is held until it
// can reach every rank (ranks_ready_): the wait loop passes it on. Taken
// from main's first line: a stop before mpirun runs is a request too.
static void forward_signal_(int sig)
{
    if (translate_stop_ && (sig == SIGTERM || sig == SIGINT || sig == SIGUSR1)) {
        long long now_ms = monotonic_ms_();
        if (sig == SIGUSR1 || stop_signals_ == 0) {
            if (sig != SIGUSR1) {
                first_stop_ms_ = now_ms;
                stop_signals_++;
            }
            if (!stop_pending_)
                pending_since_ms_ = now_ms;
            stop_pending_ = 1;
            return;
        }
        if (now_ms - first_stop_ms_ < REPEAT_GRACE_MS)
            return;
        stop_signals_++;
        stop_pending_ = 0;
        if (child_pid_ <= 0) // before mpirun: nothing to stop in order
            _exit(128 + sig);
    }
    if (child_pid_ > 0)
        kill((pid_t)child_pid_, sig);
    else if (sig == SIGHUP) // the terminal went before the job started: nothing to pass it to
        _exit(128 + sig);
}

// Whether process `pid` has a handler for SIGUSR1 (/proc: SigCgt).
static int catches_usr1_(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned long long caught = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "SigCgt: %llx", &caught) == 1;
    fclose(f);
    return found && (caught >> (SIGUSR1 - 1) & 1);
}

// Whether process `pid` (a /proc entry's name) is a live child of `parent`:
// its stat's parent, and not dead (a dead rank mpirun has not reaped, as a
// hung mpirun does not, is no child).
static int live_child_(const char *pid, pid_t parent)
{
    char state;
    long ppid;
    return util_proc_stat(strtol(pid, NULL, 10), &state, &ppid) == 0 && ppid == (long)parent &&
           state != 'Z' && state != 'X';
}

// Whether a USR1 to mpirun now reaches every rank as a stop request: mpirun
// catches USR1 (before, USR1 kills it: exit 138), and its ranks exist (it
// forwards USR1 only to those: a request sent before is lost) and catch it
// (a rank before its handler dies of it). On one host the ranks are mpirun's
// children: each runs its own program (one still running mpirun's image has
// not exec'd) and catches USR1; as many as asked for when -np was given.
static int ranks_ready_(pid_t mpirun)
{
    if (!catches_usr1_(mpirun))
        return 0;
    char path[300], own[512], exe[512];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)mpirun);
    ssize_t n = readlink(path, own, sizeof own - 1);
    if (n <= 0)
        return 0;
    own[n] = '\0';
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int kids = 0, ready = 1;
    struct dirent *e;
    while (ready && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        if (!live_child_(e->d_name, mpirun))
            continue;
        const pid_t pid = (pid_t)atoi(e->d_name);
        snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
        n = readlink(path, exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        ready = n > 0 && strcmp(exe, own) != 0 && (!ranks_are_children_ || catches_usr1_(pid));
        kids++;
    }
    closedir(d);
    return ready && kids >= (expected_local_ranks_ > 0 ? expected_local_ranks_ : 1);
}

// Passes a held stop request on once it can reach the ranks, or once it has
// been held HOLD_MS and mpirun at least takes USR1 (a program that never
// catches USR1: what it does with one is its own affair).
#define STOP_HOLD_MS 10000
static void deliver_stop_(pid_t mpirun)
{
    if (!stop_pending_)
        return;
    if (ranks_ready_(mpirun) ||
        (monotonic_ms_() - pending_since_ms_ >= STOP_HOLD_MS && catches_usr1_(mpirun))) {
        stop_pending_ = 0;
        kill(mpirun, SIGUSR1);
    }
}

// Whether process `pid` has a child now (a scan of /proc; 1 when it cannot
// tell).
static int has_children_(pid_t pid)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 1;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        found = live_child_(e->d_name, pid);
    }
    closedir(d);
    return found;
}

// Open MPI's mpirun can hang once its ranks are gone (seen when a rank dies
// inside MPI_Init: "PMIX ERROR: UNREACHABLE", then deaf even to SIGTERM).
// Once mpirun has had children (the ranks, or the agents that start them
// elsewhere) and then none for VGPU_MPIRUN_ORPHAN_S seconds (default 5), it
// is ended, and said. Returns the seconds, 0 when the watch is off.
static double orphan_limit_s_(void)
{
    const char *v = env_read("VGPU_MPIRUN_ORPHAN_S");
    if (!v || !v[0])
        return 5;
    char *end;
    double s = strtod(v, &end);
    if (*end || !(s >= 0 && s <= 86400)) {
        fprintf(stderr, "vgpurun: warning: VGPU_MPIRUN_ORPHAN_S='%s' is not a number of seconds "
                        "from 0 to 86400; using 5\n", v);
        return 5;
    }
    return s;
}

static void end_hung_mpirun_(pid_t pid, double limit_s)
{
    fprintf(stderr, "vgpurun: mpirun is still running %g s after its last rank ended: ending it "
                    "(an Open MPI hang)\n", limit_s);
    ended_hung_ = 1;
    kill(pid, SIGTERM);
    for (int i = 0; i < 20; i++) {
        siginfo_t info = {0}; // has it ended? (WNOWAIT: run_and_wait_ reaps it)
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == pid)
            return;
        usleep(100000);
    }
    kill(pid, SIGKILL);
}

static int run_and_wait_(char *const *argv)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "vgpurun: fork: %s\n", strerror(errno));
        return VGPURUN_EXIT_NOT_RUN;
    }
    if (pid == 0) {
        // A session of its own: a signal to vgpurun's process group (a
        // terminal's ^C, timeout(1)) reaches vgpurun alone, which turns it
        // into the stop with a checkpoint; mpirun would kill the ranks. If
        // vgpurun dies, mpirun gets SIGTERM and ends the job.
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(VGPURUN_EXIT_NOT_RUN); // vgpurun died before the line above
        execvp(argv[0], argv);
        fprintf(stderr, "vgpurun: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(VGPURUN_EXIT_NOT_RUN);
    }
    child_pid_ = pid;
    // Wait, watching for an mpirun that outlives its ranks (not srun's), and
    // passing a held stop request on (polling while one is held).
    const double limit_s = translate_stop_ ? orphan_limit_s_() : 0;
    int status, seen = 0;
    long long idle_since_ms = -1;
    for (;;) {
        deliver_stop_(pid);
        const int poll = limit_s > 0 || stop_pending_;
        pid_t r = waitpid(pid, &status, poll ? WNOHANG : 0);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            return VGPURUN_EXIT_NOT_RUN;
        if (stop_pending_ && r == 0) {
            usleep(50000);
            continue;
        }
        if (limit_s <= 0 || r < 0)
            continue;
        const long long now = monotonic_ms_();
        if (has_children_(pid)) {
            seen = 1;
            idle_since_ms = -1;
        } else if (seen && idle_since_ms < 0) {
            idle_since_ms = now;
        } else if (seen && now - idle_since_ms >= (long long)(limit_s * 1000) && !ended_hung_) {
            end_hung_mpirun_(pid, limit_s);
        }
        usleep(250000);
    }
    child_pid_ = 0;
    child_killed_ = !WIFEXITED(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// What mpirun -q left out that the status cannot say alone: a rank ended by
// a signal (vgpu's ranks never end that way when they agree on an exit).
static int report_(const struct vgpurun_plan *plan, int rc)
{
    if (plan->quiet_mpirun && !child_killed_ && !stop_signals_ && !ended_hung_ && rc > 128 &&
        rc < 128 + 65)
        fprintf(stderr, "vgpurun: a rank was killed by signal %d (%s) and mpirun ended the job "
                        "(exit %d); " VGPURUN_ENV_MPIRUN_REPORT "=1 or -v keeps mpirun's report, "
                        "which names the rank\n",
                rc - 128, strsignal(rc - 128), rc);
    return rc;
}

// Stop signals from the first instruction on (forward_signal_); USR2 and
// HUP pass through to the launcher once it runs.
void vgpurun_launch_take_signals(void)
{
    struct sigaction sa = {.sa_handler = forward_signal_};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    // USR1 (checkpoint and stop) and USR2 (the ranks' flight recorders say
    // what they are doing) pass through; mpirun and srun forward them.
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
}

int vgpurun_launch_hand_over(void)
{
    translate_stop_ = 0; // from here on srun's: it passes TERM/INT to the tasks
    return stop_pending_ != 0;
}

void vgpurun_launch_expect(int uses_srun, int ranks_are_children, int expected_local_ranks)
{
    translate_stop_ = !uses_srun;
    ranks_are_children_ = ranks_are_children;
    expected_local_ranks_ = expected_local_ranks;
}

int vgpurun_launch_run(const struct vgpurun_plan *plan)
{
    return report_(plan, run_and_wait_(plan->argv));
}
