// preempt.c: the stop-request flag set by SIGTERM/SIGINT/SIGUSR1 (see preempt.h).
//
// The signals are blocked in every thread and taken by one waiting thread
// (sigwait), so no signal frame is ever pushed onto a thread that is running
// oneDNN's JIT GEMM, whose stack pointer may point into the heap.
#include "preempt.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static const int preempt_signals_[] = {SIGTERM, SIGINT, SIGUSR1};
#define PREEMPT_SIGNAL_COUNT (int)(sizeof preempt_signals_ / sizeof preempt_signals_[0])

static atomic_int requested_signal_; // 0 until the first signal while armed
static atomic_int armed_;            // between preempt_install and preempt_uninstall
static long long first_signal_ms_;   // the waiter's own
static int started_;

static void signal_set_(sigset_t *set)
{
    sigemptyset(set);
    for (int i = 0; i < PREEMPT_SIGNAL_COUNT; i++)
        sigaddset(set, preempt_signals_[i]);
}

static long long monotonic_ms_(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// The default action of sig (these three end the process), taken on this
// thread: the only one that may receive it.
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
    raise(sig); // pending on this thread, delivered on return
}

static void *waiter_(void *arg)
{
    (void)arg;
    sigset_t set;
    signal_set_(&set);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        long long now_ms = monotonic_ms_();
        if (!atomic_load(&armed_)) {
            die_of_(sig);
        } else if (!atomic_load(&requested_signal_)) {
            first_signal_ms_ = now_ms;
            atomic_store(&requested_signal_, sig);
        } else if (now_ms - first_signal_ms_ >= PREEMPT_REPEAT_GRACE_MS) {
            die_of_(sig); // the user insists
        }
    }
    return NULL;
}

int preempt_start(void)
{
    if (started_)
        return 0;
    sigset_t set;
    signal_set_(&set);
    int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (rc)
        return -rc;
    pthread_attr_t attr;
    pthread_t thread;
    if ((rc = pthread_attr_init(&attr)) != 0)
        return -rc;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&thread, &attr, waiter_, NULL);
    pthread_attr_destroy(&attr);
    if (rc) {
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        return -rc;
    }
    started_ = 1;
    return 0;
}

int preempt_install(void)
{
    if (!started_)
        return -ESRCH;
    atomic_store(&requested_signal_, 0);
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

const char *preempt_signal_name(void)
{
    switch (atomic_load(&requested_signal_)) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "none";
    }
}
