// preempt.c: the stop-request flag set by SIGTERM/SIGINT/SIGUSR1 (see preempt.h).
//
// The signals are blocked in every thread we start and taken by one waiting
// thread (sigwait), so no signal frame is ever pushed onto a thread that is
// running oneDNN's JIT GEMM, whose stack pointer may point into the heap. A
// handler with the same logic serves threads that predate preempt_start.
#include "preempt.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const int preempt_signals_[] = {SIGTERM, SIGINT, SIGUSR1};
#define PREEMPT_SIGNAL_COUNT (int)(sizeof preempt_signals_ / sizeof preempt_signals_[0])

static atomic_int requested_signal_;  // 0 until the first signal while armed
static atomic_int requested_by_;      // the pid that sent it; 0 = unknown
static atomic_int handed_by_;         // a signal's sender, handed over with pthread_kill
static atomic_int armed_;             // between preempt_install and preempt_uninstall
static atomic_llong first_signal_ms_; // when requested_signal_ was set; 0 = not yet known
static int ignored_[PREEMPT_SIGNAL_COUNT]; // SIG_IGN when preempt_start ran (`cmd &` in a script)
static atomic_int started_;
static pthread_t waiter_thread_;
static void (*_Atomic observer_)(int sig);

// The stop signals, and SIGUSR2 with them (the waiting thread takes all).
static void signal_set_(sigset_t *set)
{
    sigemptyset(set);
    for (int i = 0; i < PREEMPT_SIGNAL_COUNT; i++)
        sigaddset(set, preempt_signals_[i]);
    sigaddset(set, SIGUSR2);
}

static long long monotonic_ms_(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); // async-signal-safe (POSIX)
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// The default action of sig (these three end the process), on this thread.
static void die_of_(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig); // pending on this thread; delivered once unblocked
}

// What a stop signal does, wherever it is taken: by the waiting thread, or
// by the handler on a thread that already ran when preempt_start blocked the
// signals (a library's, started by its constructor), which therefore does
// not block them. Only async-signal-safe calls (atomics are lock-free here).
static void take_(int sig, int sender)
{
    long long now_ms = monotonic_ms_();
    if (!atomic_load(&armed_)) {
        for (int i = 0; i < PREEMPT_SIGNAL_COUNT; i++)
            if (preempt_signals_[i] == sig && ignored_[i])
                return; // ignored before we came: stays ignored until armed
        die_of_(sig);
        return;
    }
    int none = 0;
    if (atomic_compare_exchange_strong(&requested_signal_, &none, sig)) {
        atomic_store(&requested_by_, sender);
        atomic_store(&first_signal_ms_, now_ms);
        return;
    }
    long long first_ms = atomic_load(&first_signal_ms_);
    if (first_ms && now_ms - first_ms >= PREEMPT_REPEAT_GRACE_MS)
        die_of_(sig); // the user insists
}

// On a thread that does not block the signals: hand the signal to the
// waiting thread (pthread_kill is async-signal-safe), which does the rest on
// an ordinary stack; it blocks the signal, so the signal waits for its
// sigwait. Before that thread exists, the flag is set here.
static void on_signal_(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    int saved_errno = errno;
    const int sender = info && info->si_code == SI_USER ? (int)info->si_pid : 0;
    if (sig != SIGUSR2)
        atomic_store(&handed_by_, sender);
    if (!started_ || pthread_kill(waiter_thread_, sig) != 0) {
        if (sig != SIGUSR2)
            take_(sig, sender);
    }
    errno = saved_errno;
}

static void *waiter_(void *arg)
{
    (void)arg;
    sigset_t set;
    signal_set_(&set);
    for (;;) {
        siginfo_t info;
        const int sig = sigwaitinfo(&set, &info);
        if (sig < 0)
            continue;
        // Who sent it: kill(2)'s sender, or the one a handler on another
        // thread saw before handing the signal over (pthread_kill: SI_TKILL).
        const int sender = info.si_code == SI_USER ? (int)info.si_pid
                         : info.si_code == SI_TKILL ? atomic_load(&handed_by_) : 0;
        void (*observer)(int) = atomic_load(&observer_);
        if (sig == SIGUSR2) {
            if (observer)
                observer(sig);
            continue;
        }
        const int first = !atomic_load(&requested_signal_);
        take_(sig, sender);
        if (first && atomic_load(&requested_signal_) == sig && observer)
            observer(sig);
    }
    return NULL;
}

void preempt_set_observer(void (*observer)(int sig)) { atomic_store(&observer_, observer); }

int preempt_start(void)
{
    if (started_)
        return 0;
    sigset_t set;
    signal_set_(&set);
    int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (rc)
        return -rc;
    // The handler covers threads that were already running; every thread
    // started from here on inherits the blocked mask.
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal_;
    sa.sa_flags = SA_RESTART | SA_SIGINFO; // a signal must not turn a read or a wait into an error
    sa.sa_mask = set;
    for (int i = 0; i < PREEMPT_SIGNAL_COUNT; i++) {
        struct sigaction old;
        if (sigaction(preempt_signals_[i], &sa, &old) != 0)
            return -errno;
        ignored_[i] = old.sa_handler == SIG_IGN;
    }
    if (sigaction(SIGUSR2, &sa, NULL) != 0)
        return -errno;
    pthread_attr_t attr;
    pthread_t thread;
    if ((rc = pthread_attr_init(&attr)) != 0)
        return -rc;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&thread, &attr, waiter_, NULL);
    waiter_thread_ = thread;
    pthread_attr_destroy(&attr);
    if (rc)
        return -rc;
    started_ = 1;
    return 0;
}

int preempt_start_armed(void)
{
    atomic_store(&requested_signal_, 0);
    atomic_store(&requested_by_, 0);
    atomic_store(&first_signal_ms_, 0);
    atomic_store(&armed_, 1);
    const int rc = preempt_start();
    if (rc != 0)
        atomic_store(&armed_, 0);
    return rc;
}

int preempt_install(void)
{
    if (!started_)
        return -ESRCH;
    atomic_store(&requested_signal_, 0);
    atomic_store(&requested_by_, 0);
    atomic_store(&first_signal_ms_, 0);
    atomic_store(&armed_, 1);
    return 0;
}

int preempt_uninstall(void)
{
    atomic_store(&armed_, 0);
    return 0;
}

int preempt_requested(void) { return atomic_load(&requested_signal_) != 0; }

int preempt_signal(void) { return atomic_load(&requested_signal_); }

int preempt_sender(void) { return atomic_load(&requested_by_); }

int preempt_from_mpi_launcher(void)
{
    const int sender = preempt_sender();
    if (preempt_signal() != SIGTERM || sender <= 1 || sender != (int)getppid())
        return 0;
    // mpirun (orterun, mpiexec) and its remote agents (orted; PRRTE's prterun
    // and prted in Open MPI 5) send SIGTERM only to end the job themselves:
    // they forward SIGUSR1 and SIGUSR2, never TERM or INT.
    char path[64], comm[64] = "";
    snprintf(path, sizeof path, "/proc/%d/comm", sender);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(comm, sizeof comm, f))
        comm[0] = '\0';
    fclose(f);
    comm[strcspn(comm, "\n")] = '\0';
    static const char *const launchers[] = {"mpirun", "mpiexec", "orterun", "orted",
                                            "prterun", "prted"};
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++)
        if (!strcmp(comm, launchers[i]))
            return 1;
    return 0;
}

const char *preempt_signal_name(int sig)
{
    switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "none";
    }
}
