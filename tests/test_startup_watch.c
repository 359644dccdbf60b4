// test_startup_watch.c: the start-up bound (startup_watch.h), in fork()ed
// children since it ends its process: a stage past the bound ends it with
// exit status 1 and a line naming the stage and what the caller adds; stages
// that each stay inside the bound do not; time the process spent stopped is
// not counted.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "startup_watch.h"
#include "util.h"

static void sleep_s_(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0) {
    }
}

static void describe_(void *arg, char *buf, size_t bytes)
{
    snprintf(buf, bytes, "rank %d is stopped", *(int *)arg);
}

// Runs body in a child with stderr captured; returns its exit status (-1:
// killed) and its stderr in err, and how long it ran in *secs.
static int run_child_(void (*body)(void), char *err, size_t err_bytes, double *secs)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    const double t0 = util_now_s();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        body();
        _exit(0);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t n;
    while (len + 1 < err_bytes && (n = read(fds[0], err + len, err_bytes - 1 - len)) > 0)
        len += (size_t)n;
    err[len] = '\0';
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    *secs = util_now_s() - t0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void stuck_body_(void)
{
    static int who = 2;
    startup_watch_begin("connecting the collectives", 0.3);
    struct startup_watch_hooks hooks = {.describe = describe_, .arg = &who};
    startup_watch_set_hooks(&hooks);
    sleep_s_(5);
}

static void test_stuck_stage_ends_the_process(void **state)
{
    (void)state;
    char err[1024];
    double secs;
    assert_int_equal(run_child_(stuck_body_, err, sizeof err, &secs), 1);
    assert_true(secs < 2.0);
    assert_non_null(strstr(err, "start-up did not finish"));
    assert_non_null(strstr(err, "in 'connecting the collectives' (bound 0.3 s"));
    assert_non_null(strstr(err, ": rank 2 is stopped"));
}

static void moving_body_(void)
{
    startup_watch_begin("a", 0.4);
    static const char *const stages[] = {"b", "c", "d", "e", "f", "g"};
    for (int i = 0; i < 6; i++) {
        sleep_s_(0.2);
        startup_watch_stage(stages[i]);
    }
    startup_watch_end();
    startup_watch_end(); // idempotent
    sleep_s_(0.6);       // over the bound, but start-up is over
}

static void test_stages_inside_the_bound_pass(void **state)
{
    (void)state;
    char err[1024];
    double secs;
    assert_int_equal(run_child_(moving_body_, err, sizeof err, &secs), 0);
    assert_null(strstr(err, "did not finish"));
}

static void stopped_body_(void)
{
    startup_watch_begin("stopped", 0.8);
    raise(SIGSTOP); // the parent continues it after 1.5 s
    sleep_s_(0.3);
    startup_watch_end();
}

static void test_own_stopped_time_does_not_count(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        stopped_body_();
        _exit(0);
    }
    close(fds[1]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
    assert_true(WIFSTOPPED(st));
    sleep_s_(1.5);
    kill(pid, SIGCONT);
    waitpid(pid, &st, 0);
    char err[512] = "";
    ssize_t n = read(fds[0], err, sizeof err - 1);
    err[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_null(strstr(err, "did not finish"));
}

static void test_expired_rule(void **state)
{
    (void)state;
    assert_false(startup_watch_expired(1.0, 0));  // no bound
    assert_false(startup_watch_expired(1.0, 1.0)); // at the bound: not yet
    assert_true(startup_watch_expired(1.01, 1.0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stuck_stage_ends_the_process),
        cmocka_unit_test(test_stages_inside_the_bound_pass),
        cmocka_unit_test(test_own_stopped_time_does_not_count),
        cmocka_unit_test(test_expired_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
