// vgpurun_launch.h: runs the launcher (mpirun, or srun with --mps) as
// vgpurun's child: stop signals become checkpoint requests the ranks can
// take, a hung mpirun is ended, and a rank killed by a signal is named.
#ifndef VGPU_VGPURUN_LAUNCH_H
#define VGPU_VGPURUN_LAUNCH_H

#include "vgpurun_plan.h"

#define VGPURUN_EXIT_NOT_RUN 127 // the launcher itself could not be started

// Takes the stop signals (TERM, INT, HUP) and USR1/USR2: call first thing,
// so that a stop before the launcher runs is a request too.
void vgpurun_launch_take_signals(void);

// srun is about to replace vgpurun and passes TERM/INT on itself from here.
// Returns 1 when a stop request came before (nothing to checkpoint yet).
int vgpurun_launch_hand_over(void);

// What the child will be, said before anything it needs is started: srun or
// mpirun, and whether mpirun's children are the ranks themselves (one host;
// expected_local_ranks of them when known, else 0).
void vgpurun_launch_expect(int uses_srun, int ranks_are_children, int expected_local_ranks);

// Runs plan->argv and waits for it. Returns the job's exit status (128 +
// the signal when the launcher was killed), VGPURUN_EXIT_NOT_RUN when it
// could not be started.
int vgpurun_launch_run(const struct vgpurun_plan *plan);

#endif
