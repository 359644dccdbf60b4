// preempt.c: the stop-request flag set by SIGTERM/SIGINT/SIGUSR1 (see preempt.h).
#include "preempt.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

static const int preempt_signals_[] = {SIGTERM, SIGINT, SIGUSR1};
#define PREEMPT_SIGNAL_COUNT (int)(sizeof preempt_signals_ / sizeof preempt_signals_[0])

static volatile sig_atomic_t requested_signal_; // 0 until the first signal
// Written only by the handler, which the sa_mask keeps from nesting.
static long long first_signal_ms_;
static struct sigaction previous_[PREEMPT_SIGNAL_COUNT];
static int installed_;

static long long monotonic_ms_(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); // async-signal-safe (POSIX)
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// Only async-signal-safe calls here: clock_gettime, sigaction, raise.
static void on_signal_(int sig)
{
    int saved_errno = errno;
    long long now_ms = monotonic_ms_();
    if (!requested_signal_) {
        first_signal_ms_ = now_ms;
        requested_signal_ = sig;
    } else if (now_ms - first_signal_ms_ >= PREEMPT_REPEAT_GRACE_MS) {
        // The user insists: die of this signal (delivered when we return).
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        raise(sig);
    }
    errno = saved_errno;
}

int preempt_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal_;
    sa.sa_flags = SA_RESTART; // a signal must not turn a read or a wait into an error
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < PREEMPT_SIGNAL_COUNT; i++)
        sigaddset(&sa.sa_mask, preempt_signals_[i]);

    requested_signal_ = 0;
    first_signal_ms_ = 0;
    for (int i = 0; i < PREEMPT_SIGNAL_COUNT; i++) {
        struct sigaction *keep = installed_ ? NULL : &previous_[i];
        if (sigaction(preempt_signals_[i], &sa, keep) != 0) {
            int err = -errno;
            for (int j = 0; j < i && !installed_; j++)
                sigaction(preempt_signals_[j], &previous_[j], NULL);
            return err;
        }
    }
    installed_ = 1;
    return 0;
}

int preempt_uninstall(void)
{
    if (!installed_)
        return 0;
    int rc = 0;
    for (int i = 0; i < PREEMPT_SIGNAL_COUNT; i++)
        if (sigaction(preempt_signals_[i], &previous_[i], NULL) != 0 && rc == 0)
            rc = -errno;
    installed_ = 0;
    return rc;
}

int preempt_requested(void) { return requested_signal_ != 0; }

int preempt_signal(void) { return requested_signal_; }

const char *preempt_signal_name(void)
{
    switch (requested_signal_) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "none";
    }
}
