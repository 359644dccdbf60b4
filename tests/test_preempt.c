// test_preempt.c: the stop-request flag: before it is armed a signal ends the
// process; armed, the first signal sets it and the process lives on, a repeat
// within the grace window is ignored and a later one ends the process with
// that signal. Signals go to the process (kill), as the batch system and the
// launcher send them, and are taken by preempt.c's waiting thread, so the
// flag is polled for. Each case runs in a fork()ed child so a signal that
// kills cannot take the test runner with it.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu_gemm.h"
#include "preempt.h"

static void sleep_ms_(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

// Signals the whole process and waits up to 2 s for the flag to name sig.
static int signal_and_wait_(int sig)
{
    kill(getpid(), sig);
    for (int i = 0; i < 2000 && preempt_signal() != sig; i++)
        sleep_ms_(1);
    return preempt_signal() == sig;
}

// Runs body in a child; returns its wait status.
static int run_in_child_(void (*body)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        body();
        _exit(0);
    }
    int wstatus = 0;
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    return wstatus;
}

// body, run in a child, must exit 0 (other codes name the check that failed).
static void expect_child_ok_(void (*body)(void))
{
    int wstatus = run_in_child_(body);
    if (WIFSIGNALED(wstatus))
        fail_msg("the child died of signal %d", WTERMSIG(wstatus));
    if (WEXITSTATUS(wstatus) != 0)
        fail_msg("the child failed its check %d", WEXITSTATUS(wstatus));
}

// body, run in a child, must die of sig.
static void expect_child_killed_(void (*body)(void), int sig)
{
    int wstatus = run_in_child_(body);
    if (!WIFSIGNALED(wstatus))
        fail_msg("the child exited %d; it should have died of signal %d", WEXITSTATUS(wstatus), sig);
    assert_int_equal(WTERMSIG(wstatus), sig);
}

// Exit codes name the check that failed inside the child.
static void first_signal_body_(void)
{
    if (preempt_install() != -ESRCH) _exit(9); // not started yet
    if (preempt_start() != 0 || preempt_start() != 0) _exit(10);
    if (preempt_install() != 0) _exit(10);
    if (preempt_requested() || preempt_signal() != 0) _exit(11);
    if (!signal_and_wait_(SIGTERM)) _exit(12);
    if (!preempt_requested()) _exit(13);
    kill(getpid(), SIGINT); // within the grace window: the same request again
    sleep_ms_(100);
    if (preempt_signal() != SIGTERM) _exit(14);
}

static void first_signal_sets_flag(void **state)
{
    (void)state;
    expect_child_ok_(first_signal_body_);
}

// A stop signal already pending when the handler appears (a launcher sends
// it the moment /proc shows the process takes SIGUSR1): with
// preempt_start_armed it is a request; with preempt_start alone (not armed
// until preempt_install) it would end the process, as it does here.
static void pending_body_(int armed)
{
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGUSR1);
    sigprocmask(SIG_BLOCK, &one, NULL);
    kill(getpid(), SIGUSR1); // pending on the process
    if ((armed ? preempt_start_armed() : preempt_start()) != 0) _exit(10);
    for (int i = 0; i < 2000 && !preempt_requested(); i++)
        sleep_ms_(1);
    if (preempt_signal() != SIGUSR1) _exit(11);
}
static void pending_armed_body_(void) { pending_body_(1); }
static void pending_unarmed_body_(void) { pending_body_(0); }

static void armed_from_the_start(void **state)
{
    (void)state;
    expect_child_ok_(pending_armed_body_);
    expect_child_killed_(pending_unarmed_body_, SIGUSR1);
}

// The sender of the stop: this process (kill to itself) is no MPI launcher;
// a SIGTERM from a parent named mpirun is mpirun ending the job (it was
// signalled itself), a SIGUSR1 from it is a request passed on.
static int sender_pipe_[2];
static void sender_self_body_(void)
{
    if (preempt_start() != 0 || preempt_install() != 0) _exit(10);
    if (!signal_and_wait_(SIGTERM)) _exit(11);
    if (preempt_sender() != (int)getpid()) _exit(12);
    if (preempt_from_mpi_launcher()) _exit(13);
}

// The parent (named mpirun meanwhile) sends the signal read from the pipe.
static void sender_parent_body_(void)
{
    if (preempt_start() != 0 || preempt_install() != 0) _exit(10);
    char ready = 'r';
    if (write(sender_pipe_[1], &ready, 1) != 1) _exit(11);
    for (int i = 0; i < 2000 && !preempt_requested(); i++)
        sleep_ms_(1);
    if (preempt_sender() != (int)getppid()) _exit(12);
    _exit(preempt_from_mpi_launcher() ? 20 : 21); // the parent checks which
}

static void stop_sender(void **state)
{
    (void)state;
    expect_child_ok_(sender_self_body_);
    char name[16] = "";
    prctl(PR_GET_NAME, name);
    prctl(PR_SET_NAME, "mpirun");
    const int sigs[2] = {SIGTERM, SIGUSR1}, want[2] = {20, 21};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pipe(sender_pipe_), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            sender_parent_body_();
        char ready;
        assert_int_equal(read(sender_pipe_[0], &ready, 1), 1);
        kill(pid, sigs[i]);
        int wstatus = 0;
        assert_int_equal(waitpid(pid, &wstatus, 0), pid);
        close(sender_pipe_[0]);
        close(sender_pipe_[1]);
        if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != want[i]) {
            prctl(PR_SET_NAME, name);
            fail_msg("signal %d from a parent named mpirun: child status %#x, want exit %d",
                     sigs[i], wstatus, want[i]);
        }
    }
    prctl(PR_SET_NAME, name);
}

static void second_signal_body_(void)
{
    if (preempt_start() != 0 || preempt_install() != 0) _exit(10);
    if (!signal_and_wait_(SIGUSR1)) _exit(11);
    sleep_ms_(PREEMPT_REPEAT_GRACE_MS + 100);
    kill(getpid(), SIGTERM); // the user insists: dies of SIGTERM
    sleep_ms_(5000);
    _exit(12);
}

static void second_signal_kills(void **state)
{
    (void)state;
    expect_child_killed_(second_signal_body_, SIGTERM);
}

static void before_install_body_(void)
{
    if (preempt_start() != 0) _exit(10);
    kill(getpid(), SIGTERM); // not armed yet: the default action
    sleep_ms_(5000);
    _exit(11);
}

static void before_install_kills(void **state)
{
    (void)state;
    expect_child_killed_(before_install_body_, SIGTERM);
}

static void uninstall_body_(void)
{
    if (preempt_start() != 0 || preempt_install() != 0) _exit(10);
    if (preempt_uninstall() != 0) _exit(11);
    kill(getpid(), SIGINT); // default action again: dies
    sleep_ms_(5000);
    _exit(12);
}

static void uninstall_restores_default(void **state)
{
    (void)state;
    expect_child_killed_(uninstall_body_, SIGINT);
}

static void signal_name_body_(void)
{
    if (preempt_start() != 0 || preempt_install() != 0) _exit(10);
    if (strcmp(preempt_signal_name(preempt_signal()), "none") != 0) _exit(11);
    if (!signal_and_wait_(SIGINT) || strcmp(preempt_signal_name(preempt_signal()), "SIGINT") != 0) _exit(12);
    if (preempt_install() != 0 || strcmp(preempt_signal_name(preempt_signal()), "none") != 0) _exit(13);
    if (!signal_and_wait_(SIGUSR1) || strcmp(preempt_signal_name(preempt_signal()), "SIGUSR1") != 0) _exit(14);
}

static void signal_names(void **state)
{
    (void)state;
    expect_child_ok_(signal_name_body_);
}

// The calling thread (and any it starts) no longer receives the signals.
static void blocked_in_caller_body_(void)
{
    if (preempt_start() != 0) _exit(10);
    sigset_t mask;
    if (pthread_sigmask(SIG_BLOCK, NULL, &mask) != 0) _exit(11);
    if (!sigismember(&mask, SIGTERM) || !sigismember(&mask, SIGINT) ||
        !sigismember(&mask, SIGUSR1))
        _exit(12);
}

static void signals_blocked_in_caller(void **state)
{
    (void)state;
    expect_child_ok_(blocked_in_caller_body_);
}

// A thread that already ran when preempt_start blocked the signals (as
// OpenBLAS starts one from its library constructor) does not block them: a
// signal delivered to it must set the flag, not take the default action.
static void *idle_(void *arg)
{
    (void)arg;
    for (;;)
        sleep_ms_(1000);
    return NULL;
}

static void earlier_thread_body_(void)
{
    pthread_t early;
    if (pthread_create(&early, NULL, idle_, NULL) != 0) _exit(10);
    if (preempt_start() != 0 || preempt_install() != 0) _exit(11);
    pthread_kill(early, SIGTERM); // to that thread alone
    for (int i = 0; i < 2000 && !preempt_requested(); i++)
        sleep_ms_(1);
    if (preempt_signal() != SIGTERM) _exit(12);
}

static void earlier_thread_sets_flag(void **state)
{
    (void)state;
    expect_child_ok_(earlier_thread_body_);
}

// A signal ignored when preempt_start runs (a background job of a script
// ignores SIGINT) stays ignored until armed; armed, it asks to stop.
static void ignored_body_(void)
{
    signal(SIGINT, SIG_IGN);
    if (preempt_start() != 0) _exit(10);
    kill(getpid(), SIGINT);
    sleep_ms_(200); // still alive
    if (preempt_install() != 0) _exit(11);
    if (!signal_and_wait_(SIGINT)) _exit(12);
}

static void ignored_stays_ignored(void **state)
{
    (void)state;
    expect_child_ok_(ignored_body_);
}

// A burst of stop signals while the CPU GEMM runs (oneDNN's AVX-512 kernel
// points rsp into the heap: a signal frame pushed on the computing thread
// corrupts it). Up to 2000 signals, all within half the grace window (on a
// loaded machine 2000 short sleeps took over the 1 s grace, and a signal past
// it rightly ended the child), so only the first counts; the GEMM's results
// and the heap must stay intact.
static void *signal_burst_(void *arg)
{
    (void)arg;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < 2000; i++) {
        kill(getpid(), SIGUSR1);
        struct timespec t = {0, 200000};
        nanosleep(&t, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >=
            PREEMPT_REPEAT_GRACE_MS / 2)
            break;
    }
    return NULL;
}

static void gemm_under_signals_body_(void)
{
    enum { M = 256, N = 256, K = 784 };
    if (preempt_start() != 0 || preempt_install() != 0) _exit(10);
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N),
          *c = malloc(sizeof(float) * M * N), *c0 = malloc(sizeof(float) * M * N);
    if (!a || !b || !c || !c0) _exit(11);
    for (int i = 0; i < M * K; i++) a[i] = (float)(i % 7) * 0.125f;
    for (int i = 0; i < K * N; i++) b[i] = (float)(i % 5) * 0.25f;
    if (cpu_gemm(0, 0, M, N, K, 1.0f, a, b, 0.0f, c0) != 0) _exit(12);
    pthread_t sender;
    if (pthread_create(&sender, NULL, signal_burst_, NULL) != 0) _exit(13);
    for (int round = 0; round < 400; round++) {
        if (cpu_gemm(0, 0, M, N, K, 1.0f, a, b, 0.0f, c) != 0) _exit(14);
        if (memcmp(c, c0, sizeof(float) * M * N) != 0) _exit(15);
        free(malloc((size_t)(round % 64 + 1) * 1024)); // heap in use
    }
    pthread_join(sender, NULL);
    if (preempt_signal() != SIGUSR1) _exit(16);
    free(a), free(b), free(c), free(c0);
}

static void gemm_under_signals(void **state)
{
    (void)state;
    expect_child_ok_(gemm_under_signals_body_);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_signal_sets_flag),
        cmocka_unit_test(stop_sender),
        cmocka_unit_test(armed_from_the_start),
        cmocka_unit_test(second_signal_kills),
        cmocka_unit_test(before_install_kills),
        cmocka_unit_test(uninstall_restores_default),
        cmocka_unit_test(signal_names),
        cmocka_unit_test(signals_blocked_in_caller),
        cmocka_unit_test(gemm_under_signals),
        cmocka_unit_test(earlier_thread_sets_flag),
        cmocka_unit_test(ignored_stays_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
