// env.h: every environment switch vgpu reads, in one table, parsed once (on
// first use) and documented by env_print_reference and the README's table.
// The launcher's device settings (VGPU_RANKS_PER_DEVICE, VGPU_MEMORY_LIMIT,
// VGPU_BACKEND) are config keys and stay with the config (config_apply_env,
// config_print_env_reference).
#ifndef VGPU_ENV_H
#define VGPU_ENV_H

#include <stdio.h>

// When an injected fault strikes: RANK@STEP, or RANK@random[:SEED] (the step
// is drawn from SEED among the run's steps by the trainer, which knows them).
struct env_when {
    int rank;                // -1 = off
    long step;               // >= 1 when !random
    int random;              // RANK@random...
    int seed_given;          // RANK@random:SEED (else the trainer picks a seed and says it)
    unsigned long long seed;
};

struct vgpu_env {
    int progress;         // VGPU_PROGRESS: 1 = "bar", 0 = "lines", -1 = unset (automatic)
    int ring_staging;     // VGPU_RING_STAGING=1: the ring copies through host staging on CPU devices too
    int mpi_staging;      // VGPU_MPI_STAGING=1: so does the mpi backend
    long ring_spin;       // VGPU_RING_SPIN: polls before a ring wait sleeps, count; -1 = unset (automatic)
    int nccl_multi_rank_gpu; // NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL's own switch, NCCL >= 2.30):
                          // NCCL may run ranks that share a GPU
    // The launcher's own variables, for the runtime (runtime_launcher_rank, rt->launched):
    int launcher_rank;    // OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID;
                          // -1 = not started by a launcher
    int under_launcher;   // started by mpirun/srun: a rank's stdout is then not the user's terminal
    // Injected faults (README: Injecting faults), read by the trainer.
    int slow_rank;        // VGPU_INJECT_SLOW=RANK:FACTOR: RANK's compute lasts FACTOR times as long; -1 = off
    double slow_factor;
    struct env_when hang;    // VGPU_INJECT_HANG=RANK@WHEN: RANK stops itself after that step
    struct env_when kill;    // VGPU_INJECT_KILL=RANK@WHEN: RANK kills itself after that step
    struct env_when perturb; // VGPU_INJECT_PERTURB=RANK@WHEN: RANK nudges a parameter after that step
    int plan;             // VGPU_PLAN=1: start up, print the job table, do not train
    const char *flight_dir; // VGPU_FLIGHT_DIR: the flight recorder's records; default
                            // $TMPDIR/vgpu-flight-<uid> (/tmp without TMPDIR)
    int flight_dir_default; // 1: flight_dir is that default (a directory of this user's,
                            // made 0700 and checked before use)
    char flight_dir_buf[256]; // the default's text
    // Test hooks:
    char test_host[64];   // VGPU_TEST_HOST=NAME: this rank counts as on host NAME
    int test_nccl_version; // VGPU_TEST_NCCL_VERSION: the NCCL version this rank reports to the
                           // backend choice; -1 = unset (the one it loads)
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
