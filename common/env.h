// env.h: every environment switch vgpu reads, in one table, parsed once (on
// first use) and documented by env_print_reference and the README's table.
// The launcher's device settings (VGPU_RANKS_PER_DEVICE, VGPU_MEMORY_LIMIT,
// VGPU_BACKEND) are config keys and stay with the config (config_apply_env,
// config_print_env_reference).
#ifndef VGPU_ENV_H
#define VGPU_ENV_H

#include <stdio.h>

struct vgpu_env {
    int progress;         // VGPU_PROGRESS: 1 = "bar", 0 = "lines", -1 = unset (automatic)
    int ring_staging;     // VGPU_RING_STAGING=1: the ring copies through host staging on CPU devices too
    long ring_spin;       // VGPU_RING_SPIN: polls before a ring wait sleeps, count; -1 = unset (automatic)
    int nccl_multi_rank_gpu; // NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL's own switch, NCCL >= 2.30):
                          // NCCL may run ranks that share a GPU
    // The launcher's own variables, for the runtime (runtime_launcher_rank, rt->launched):
    int launcher_rank;    // OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID;
                          // -1 = not started by a launcher
    int under_launcher;   // started by mpirun/srun: a rank's stdout is then not the user's terminal
    // Test hooks: faults that the end-to-end tests plant.
    int perturb_rank;     // VGPU_TEST_PERTURB=RANK@STEP: nudge one parameter of RANK after STEP; -1 = off
    long perturb_step;
    int slow_rank;        // VGPU_TEST_SLOW=RANK:FACTOR: RANK's compute lasts FACTOR times as long; -1 = off
    double slow_factor;
    int plan;             // VGPU_PLAN=1: start up, print the job table, do not train
    char test_host[64];   // VGPU_TEST_HOST=NAME: this rank counts as on host NAME
    char pause_stage[16]; // VGPU_TEST_START_PAUSE=STAGE:SECONDS: every rank sleeps at that
    double pause_s;       // start-up stage (data, open, warmup); "" = off
};

// The parsed switches. The first call reads the environment (later changes
// are not seen); a malformed value is reported once on stderr and treated as
// unset. Not thread-safe on the first call: call it from the main thread.
const struct vgpu_env *env_get(void);

// Forgets the parsed values so the next env_get reads the environment again
// (tests that set variables in-process).
void env_reset(void);

// Writes one line per switch: its name, form and meaning.
void env_print_reference(FILE *f);

#endif
