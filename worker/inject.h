// inject.h: the faults a user plants to see what the job does with them
// (VGPU_INJECT_*, docs/TROUBLESHOOTING.md: Injecting faults). The slow rank and the drifting
// replica act inside the step (train_step.c, train_replicas.c); hanging and
// dying happen here, after a step. A step drawn at random is fixed once the
// run's steps are known, from a seed that is said, so a run can be repeated.
#ifndef VGPU_INJECT_H
#define VGPU_INJECT_H

#include "train_env.h"

// The steps after which this rank hangs, dies or nudges a parameter in this
// run; 0 = not at all.
struct inject_plan {
    long hang_step;
    long kill_step;
    long perturb_step;
};

// The plan of `rank` for a run that goes from after first_step to total_steps.
// Says (stderr) a step drawn at random, with its seed, and a fixed step that
// the run does not reach.
void inject_plan_make(struct inject_plan *plan, const struct train_env *env, int rank,
                      long first_step, long total_steps);

// The step drawn from seed among first_step + 1 .. total_steps (pure; for tests).
long inject_draw_step(unsigned long long seed, long first_step, long total_steps);

// Called after `step` finished: stops this process (SIGSTOP) or kills it
// (SIGKILL) when the plan says so, after saying so on stderr. Returns when
// stopped and continued.
void inject_after_step(const struct inject_plan *plan, int rank, long step);

#endif
