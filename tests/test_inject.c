// test_inject.c: injected faults: when they strike (a fixed step inside the
// run, a step drawn from a seed, the same for the same seed and spread over the
// run's steps), and what striking does (a killed or stopped process, seen from
// its parent).
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "inject.h"

static void test_draw_is_in_range_and_repeatable(void **state)
{
    (void)state;
    int seen[11] = {0};
    for (unsigned long long seed = 0; seed < 2000; seed++) {
        long s = inject_draw_step(seed, 40, 50);
        assert_true(s >= 41 && s <= 50);
        assert_int_equal(s, inject_draw_step(seed, 40, 50));
        seen[s - 40]++;
    }
    for (int i = 1; i <= 10; i++)
        assert_true(seen[i] > 100); // about 200 each: every step can be drawn
    assert_int_equal(inject_draw_step(7, 50, 50), 0); // no steps left
    assert_int_equal(inject_draw_step(7, 0, 1), 1);
}

static void test_plan_only_for_the_rank_and_the_run(void **state)
{
    (void)state;
    struct train_env env = {.slow_rank = -1};
    env.hang = (struct train_env_when){.rank = 2, .step = 30};
    env.kill = (struct train_env_when){.rank = 1, .step = 30};
    env.perturb = (struct train_env_when){.rank = 2, .random = 1, .seed_given = 1, .seed = 9};
    struct inject_plan p;
    inject_plan_make(&p, &env, 2, 0, 100);
    assert_int_equal(p.hang_step, 30);
    assert_int_equal(p.kill_step, 0); // another rank's
    assert_int_equal(p.perturb_step, inject_draw_step(9, 0, 100));
    // Resumed after step 30, or a run of 20 steps: step 30 is not in it.
    inject_plan_make(&p, &env, 2, 30, 100);
    assert_int_equal(p.hang_step, 0);
    assert_int_equal(p.perturb_step, inject_draw_step(9, 30, 100));
    inject_plan_make(&p, &env, 2, 0, 20);
    assert_int_equal(p.hang_step, 0);
    // Unseeded: a step of the run all the same.
    env.perturb.seed_given = 0;
    inject_plan_make(&p, &env, 2, 10, 20);
    assert_true(p.perturb_step >= 11 && p.perturb_step <= 20);
}

// Runs inject_after_step(step) in a child; returns its wait status (stopped
// children are continued and reaped).
static int child_after_step_(const struct inject_plan *p, long step, int *was_stopped)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        inject_after_step(p, 3, step);
        _exit(0);
    }
    int status;
    *was_stopped = 0;
    assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
    if (WIFSTOPPED(status)) {
        *was_stopped = 1;
        kill(pid, SIGCONT);
        assert_int_equal(waitpid(pid, &status, 0), pid);
    }
    return status;
}

static void test_kill_and_hang_strike_at_their_step(void **state)
{
    (void)state;
    const struct inject_plan p = {.hang_step = 5, .kill_step = 7, .perturb_step = 0};
    int stopped;
    int status = child_after_step_(&p, 4, &stopped);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0 && !stopped);
    status = child_after_step_(&p, 7, &stopped);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    status = child_after_step_(&p, 5, &stopped); // stops; continued, it goes on
    assert_true(stopped);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_draw_is_in_range_and_repeatable),
        cmocka_unit_test(test_plan_only_for_the_rank_and_the_run),
        cmocka_unit_test(test_kill_and_hang_strike_at_their_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
