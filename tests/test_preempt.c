// test_preempt.c: the stop-request flag: the first signal sets it and the
// process lives on; a repeat within the grace window is ignored; a later one
// kills the process with that signal. Each case runs in a fork()ed child so a
// signal that kills cannot take the test runner with it.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "preempt.h"

static void sleep_ms_(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
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

// Exit codes name the check that failed inside the child.
static void first_signal_body_(void)
{
    if (preempt_install() != 0) _exit(10);
    if (preempt_requested() || preempt_signal() != 0) _exit(11);
    raise(SIGTERM);
    if (!preempt_requested()) _exit(12);
    if (preempt_signal() != SIGTERM) _exit(13);
    raise(SIGINT); // within the grace window: the same request again
    if (preempt_signal() != SIGTERM) _exit(14);
}

static void first_signal_sets_flag(void **state)
{
    (void)state;
    int wstatus = run_in_child_(first_signal_body_);
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
}

static void second_signal_body_(void)
{
    if (preempt_install() != 0) _exit(10);
    raise(SIGUSR1);
    if (preempt_signal() != SIGUSR1) _exit(11);
    sleep_ms_(PREEMPT_REPEAT_GRACE_MS + 100);
    raise(SIGTERM); // the user insists: dies of SIGTERM here
    _exit(12);
}

static void second_signal_kills(void **state)
{
    (void)state;
    int wstatus = run_in_child_(second_signal_body_);
    assert_true(WIFSIGNALED(wstatus));
    assert_int_equal(WTERMSIG(wstatus), SIGTERM);
}

static void uninstall_body_(void)
{
    if (preempt_install() != 0) _exit(10);
    if (preempt_uninstall() != 0) _exit(11);
    raise(SIGINT); // default action again: dies
    _exit(12);
}

static void uninstall_restores_default(void **state)
{
    (void)state;
    int wstatus = run_in_child_(uninstall_body_);
    assert_true(WIFSIGNALED(wstatus));
    assert_int_equal(WTERMSIG(wstatus), SIGINT);
}

static void signal_name_body_(void)
{
    if (preempt_install() != 0) _exit(10);
    if (strcmp(preempt_signal_name(), "none") != 0) _exit(11);
    raise(SIGINT);
    if (strcmp(preempt_signal_name(), "SIGINT") != 0) _exit(12);
    if (preempt_install() != 0 || strcmp(preempt_signal_name(), "none") != 0) _exit(13);
    raise(SIGUSR1);
    if (strcmp(preempt_signal_name(), "SIGUSR1") != 0) _exit(14);
}

static void signal_names(void **state)
{
    (void)state;
    int wstatus = run_in_child_(signal_name_body_);
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_signal_sets_flag),
        cmocka_unit_test(second_signal_kills),
        cmocka_unit_test(uninstall_restores_default),
        cmocka_unit_test(signal_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
