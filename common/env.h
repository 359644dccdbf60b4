// env.h: libvgpu's environment switches: one table (every VGPU_* variable the
// library and its programs read, with its form and meaning), through which
// each is read, parsed once (env_get) and printed (env_print_reference; the
// docs' table is generated from it). A program keeps its own switches in its
// own table with the helpers below (vgpu_train: worker/train_env.h).
// The config's switches (VGPU_RANKS_PER_DEVICE, VGPU_MEMORY_LIMIT,
// VGPU_BACKEND, VGPU_COMM_TIMEOUT_S) are in the table; config_apply_env sets
// their keys.
#ifndef VGPU_ENV_H
#define VGPU_ENV_H

#include <stddef.h>
#include <stdio.h>

// One switch: NAME=FORM, and what it does (one paragraph; where it is told
// more: a docs/*.md file).
struct env_var {
    const char *name;
    const char *form;
    const char *doc;
};

// Writes one entry per switch of vars[count]: "  NAME=FORM" and its meaning
// on the next line, indented by six spaces.
void env_table_print(FILE *f, const struct env_var *vars, size_t count);

// getenv(name) for a switch of vars[count] (NULL when unset). A name not in
// the table is a bug: said on stderr, then abort(), so a switch cannot be
// read without being documented.
const char *env_table_get(const struct env_var *vars, size_t count, const char *name);

// Reports a malformed value once: "ignoring NAME=VALUE: expected EXPECTED"
// (a warning; the switch is then treated as unset).
void env_warn_malformed(const char *name, const char *value, const char *expected);

struct vgpu_env {
    int ring_staging;     // VGPU_RING_STAGING: 1 always staging (CPU devices too), 0 CUDA IPC on a
                          // shared GPU even without MPS, -1 unset (ring_window_kind decides)
    int mpi_staging;      // VGPU_MPI_STAGING=1: so does the mpi backend
    long ring_spin;       // VGPU_RING_SPIN: polls before a ring wait yields, count; -1 = unset (automatic)
    long ring_yield_us;   // VGPU_RING_YIELD_US: a ring wait's yield phase, us; -1 = unset (250)
    long ring_msg_bytes;  // VGPU_RING_MSG_BYTES: the largest message between hosts, bytes
                          // (0: a step in one message); -1 = unset (comm_ring.c's default)
    int ring_algo;        // VGPU_RING_ALGO: 0 auto, else k for ring_algos.h's k-th row
                          // (1 ring, 2 one-shot, ...: ring_internal.h's enum ring_algo + 1)
    int nccl_multi_rank_gpu; // NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL's own switch, NCCL >= 2.30):
                          // NCCL may run ranks that share a GPU
    // The launcher's own variables, for the runtime (runtime_launcher_rank, rt->launched):
    int launcher_rank;    // OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID;
                          // -1 = not started by a launcher
    int under_launcher;   // started by mpirun/srun: a rank's stdout is then not the user's terminal
    int plan;             // VGPU_PLAN=1: start up, print the job table, open nothing
    int terminal;         // VGPU_TERMINAL=1: the job's output reaches a terminal
    const char *flight_dir; // VGPU_FLIGHT_DIR: the flight recorder's records; default
                            // $TMPDIR/vgpu-flight-<uid> (/tmp without TMPDIR)
    int flight_dir_default; // 1: flight_dir is that default (a directory of this user's,
                            // made 0700 and checked before use)
    char flight_dir_buf[256]; // the default's text
    // Test hooks:
    char test_host[64];   // VGPU_TEST_HOST=NAME: this rank counts as on host NAME
    int test_nccl_version; // VGPU_TEST_NCCL_VERSION: the NCCL version this rank reports to the
                           // backend choice; -1 = unset (the one it loads)
};

// The parsed switches. The first call reads the environment (later changes
// are not seen); a malformed value is reported once on stderr and treated as
// unset. Not thread-safe on the first call: call it from the main thread.
const struct vgpu_env *env_get(void);

// Forgets the parsed values so the next env_get reads the environment again
// (tests that set variables in-process).
void env_reset(void);

// One of the library's switches as it is now (getenv through the table, not
// parsed, not cached): for those read apart from env_get, where they are used
// (VGPU_SIM_GPUS, VGPU_COMM_TIMEOUT_S before the config, vgpurun's own, the
// binding's record). A name not in the table aborts (env_table_get).
const char *env_read(const char *name);

// VGPU_COMM_TIMEOUT_S as a bound before any config is read (vgpu's start-up,
// vgpu's NCCL, which has none): its value where it is 0.1 to 86400 seconds,
// else 300.
#define ENV_DEFAULT_TIMEOUT_S 300.0
double env_comm_timeout_s(void);

// Writes one entry per library switch: its name, form and meaning.
void env_print_reference(FILE *f);

#endif
