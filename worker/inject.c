// inject.c: injected faults: when they strike, and the two that end a rank.
#include "inject.h"

#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

// splitmix64: a seed spread over all 64 bits, so nearby seeds give unrelated steps.
static unsigned long long mix_(unsigned long long x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

long inject_draw_step(unsigned long long seed, long first_step, long total_steps)
{
    if (total_steps <= first_step)
        return 0;
    return first_step + 1 + (long)(mix_(seed) % (unsigned long long)(total_steps - first_step));
}

static long plan_one_(const char *name, const struct train_env_when *when, int rank,
                      long first_step, long total_steps)
{
    if (when->rank != rank)
        return 0;
    if (when->random) {
        unsigned long long seed = when->seed_given
                                      ? when->seed
                                      : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 20);
        long step = inject_draw_step(seed, first_step, total_steps);
        if (step == 0)
            log_warn("%s: this run has no steps left; nothing injected", name);
        else
            log_warn("%s: rank %d, after step %ld (drawn from seed %llu among steps %ld..%ld; "
                     "%s=%d@random:%llu repeats it)",
                     name, rank, step, seed, first_step + 1, total_steps, name, rank, seed);
        return step;
    }
    if (when->step <= first_step || when->step > total_steps) {
        log_warn("%s: step %ld is not among this run's steps %ld..%ld; nothing injected", name,
                 when->step, first_step + 1, total_steps);
        return 0;
    }
    return when->step;
}

void inject_plan_make(struct inject_plan *plan, const struct train_env *env, int rank,
                      long first_step, long total_steps)
{
    plan->hang_step = plan_one_("VGPU_INJECT_HANG", &env->hang, rank, first_step, total_steps);
    plan->kill_step = plan_one_("VGPU_INJECT_KILL", &env->kill, rank, first_step, total_steps);
    plan->perturb_step =
        plan_one_("VGPU_INJECT_PERTURB", &env->perturb, rank, first_step, total_steps);
}

void inject_after_step(const struct inject_plan *plan, int rank, long step)
{
    if (step == plan->kill_step) {
        log_warn("VGPU_INJECT_KILL: rank %d (pid %ld) kills itself after step %ld", rank,
                 (long)getpid(), step);
        fflush(NULL);
        raise(SIGKILL);
    }
    if (step == plan->hang_step) {
        log_warn("VGPU_INJECT_HANG: rank %d (pid %ld) stops itself after step %ld "
                 "(kill -CONT %ld resumes it)",
                 rank, (long)getpid(), step, (long)getpid());
        fflush(NULL);
        raise(SIGSTOP);
    }
}
