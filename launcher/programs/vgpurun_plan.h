// vgpurun_plan.h: vgpurun's pure part: options and machine facts in, the launch
// command (argv + environment) out. No I/O, so it is unit-tested as is.
// vgpurun_args.c reads the command line and host lists, vgpurun_plan.c builds
// the command, vgpurun_identity.c reads a rank's identity (vgpurun-rank).
#ifndef VGPU_VGPURUN_PLAN_H
#define VGPU_VGPURUN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "binding.h"
#include "status.h"

// Environment variables through which vgpurun hands device settings to the
// ranks (common/config.c reads them: file < environment < --set).
#define VGPURUN_ENV_RANKS_PER_DEVICE "VGPU_RANKS_PER_DEVICE"
#define VGPURUN_ENV_MEMORY_LIMIT "VGPU_MEMORY_LIMIT"
#define VGPURUN_ENV_BACKEND "VGPU_BACKEND"
#define VGPURUN_ENV_PLAN "VGPU_PLAN"
// Set to 1, it keeps mpirun's own reports (vgpurun runs mpirun -q on one host).
#define VGPURUN_ENV_MPIRUN_REPORT "VGPU_MPIRUN_REPORT"

// Room above --mem-per-rank in the MPS limit: the MPS cap covers everything a
// rank pins on the GPU, vgpu's cap only its arena: the CUDA context (cuBLAS
// workspace included) and, for a rank alone on its GPU, NCCL's buffers (the
// runtime's automatic cap leaves the same room).
#define VGPURUN_MPS_HEADROOM_BYTES (BINDING_CUDA_CONTEXT_BYTES + BINDING_NCCL_BUFFER_BYTES)

#define VGPURUN_MAX_ARGS 512
#define VGPURUN_MAX_ENV 64
#define VGPURUN_MAX_NOTES 16
#define VGPURUN_MAX_EXPORTS 32

enum vgpurun_launcher { VGPURUN_AUTO, VGPURUN_MPIRUN, VGPURUN_SRUN };

struct vgpurun_options {
    int np;                     // ranks; 0 = not given
    const char *hostfile;       // --hostfile path or NULL
    const char *hosts;          // -H host[:slots],... or NULL
    int ranks_per_gpu;          // 0 = not given
    const char *mem_per_rank;   // size text as given (K/M/G), or NULL
    uint64_t mem_per_rank_bytes; // parsed from mem_per_rank
    int sm_share;               // --sm-share PCT (with --mps): each rank's share of the SMs; 0 = all
    const char *backend;        // auto|ring|mpi|nccl, or NULL
    enum vgpurun_launcher launcher;
    int mps, dry_run, verbose, plan;
    int no_mps;                 // --no-mps: never start MPS (ranks sharing a GPU take turns)
    int help;                   // --help: print the usage, run nothing
    int version;                // --version: print the version, run nothing
    const char *exports[VGPURUN_MAX_EXPORTS]; // -x NAME or NAME=VALUE, in order
    int export_count;
    char **launcher_args;       // [-- LAUNCHER-OPTIONS] before "-- PROGRAM" (points into argv)
    int launcher_arg_count;
    char **program;             // PROGRAM ARGS..., NULL-terminated (points into argv)
    int program_count;
};

// What vgpurun found out about where it runs (gathered by vgpurun.c).
struct vgpurun_facts {
    int is_root;                // effective uid 0
    int root_allowed_by_env;    // OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM}=1 already set
    int cores;                  // online CPUs of this host
    int in_slurm;               // SLURM_JOB_ID is set
    int slurm_ntasks;           // SLURM_NTASKS, 0 if unset
    int slurm_nnodes;           // SLURM_JOB_NUM_NODES, 0 if unset
    int host_count;             // hosts named by --hostfile / -H; 0 = none given
    int slot_count;             // their slots; -1 = some host gave none (mpirun decides)
    int gpus_simulated;         // they are VGPU_SIM_GPUS's: no driver behind them
    int gpu_count;              // GPUs this host shows (VGPU_SIM_GPUS's when set, else
                                // /dev/nvidiaN, as CUDA_VISIBLE_DEVICES selects); 0 = none
    const int *gpu_modes;       // [gpu_count] compute modes (enum gpu_compute_mode); NULL = not
                                // known (DEFAULT assumed)
    const uint64_t *gpu_bytes;  // [gpu_count] memory of each, bytes; NULL = not known
    int ranks_per_gpu_env;      // VGPU_RANKS_PER_DEVICE as set here; 0 = unset
    const char *mps_server;     // an MPS server the ranks reach already: CUDA_MPS_PIPE_DIRECTORY,
                                // or /tmp/nvidia-mps with its control pipe; NULL = none
    int have_mps_control;       // nvidia-cuda-mps-control is on PATH
    int have_rsh_agent;         // ssh or rsh is on PATH (Open MPI 4's mpirun needs one, even
                                // on one host)
    int terminal_columns;       // width of vgpurun's stdout terminal; 0 = not a terminal
    int keep_mpirun_reports;    // VGPU_MPIRUN_REPORT=1: no mpirun -q
    const char *cuda_visible;   // CUDA_VISIBLE_DEVICES as set, NULL if not
    const char *const *gpu_uuids; // the host's GPU UUIDs in PCI order (nvidia-smi, simulated),
    int gpu_uuid_count;           // NULL/0 when unknown
    const char *host;           // this host's name, for messages
    const char *const *env_names; // variables set in the environment (names only), NULL-terminated
    // Any program as a rank: the per-rank shim (vgpurun-rank beside vgpurun;
    // NULL = the program runs as it is) and the rendezvous it passes on.
    const char *rank_shim;
    const char *master_addr;    // where rank 0 runs, as the ranks reach it
    int master_port;            // a port for rank 0's rendezvous
};

// A rank as the frameworks name it (torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE), from the launcher's variables.
struct vgpurun_rank_id {
    int rank, world_size, local_rank, local_size;
    int node;                   // host index (Slurm's SLURM_NODEID; 0 under mpirun)
};

// Reads the rank's identity through get (getenv, or a test's table): Open
// MPI's OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}, else Slurm's
// SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and SLURM_STEP_TASKS_PER_NODE
// (or SLURM_TASKS_PER_NODE) at SLURM_NODEID. Returns VGPU_OK, or VGPU_ECONFIG
// with the reason in err (not under a launcher, or inconsistent values).
typedef const char *(*vgpurun_getenv_fn)(const char *name);
int vgpurun_rank_identity(vgpurun_getenv_fn get, struct vgpurun_rank_id *id, char *err,
                          size_t err_bytes);

// Tasks on node `node` of a Slurm tasks-per-node list ("2(x3),1": 2 on each
// of nodes 0-2, 1 on node 3); -1 when the list is malformed or too short.
int vgpurun_slurm_tasks_on_node(const char *list, int node);

struct vgpurun_plan {
    char *argv[VGPURUN_MAX_ARGS]; // launcher command, NULL-terminated, owned
    int argc;
    char *env[VGPURUN_MAX_ENV];   // NAME=VALUE to set before running, owned
    int envc;
    char *notes[VGPURUN_MAX_NOTES]; // why each choice was made, owned
    int loud[VGPURUN_MAX_NOTES];    // said even without -v: it overrides what the user asked for
    int notec;
    int uses_srun;
    int mps;                      // vgpurun starts the job's own MPS daemon (vgpurun_mps_decide)
    int quiet_mpirun;             // mpirun -q: its reports are left out (see vgpurun_plan_build)
};

// Parses vgpurun's command line (argv[0] is the program name). Returns VGPU_OK
// (opts->help set if --help was asked for), or VGPU_ECONFIG with a message in err.
int vgpurun_parse_args(int argc, char **argv, struct vgpurun_options *opts, char *err,
                       size_t err_bytes);

// Counts hosts and slots in an Open MPI hostfile's text ("host slots=N" lines,
// '#' comments) or a -H list ("a:2,b,c:4"; a host without a count has 1 slot).
// A hostfile host without slots= leaves *slot_count = -1 (mpirun counts cores).
// Returns VGPU_OK, or VGPU_ECONFIG with a message in err (naming the line).
int vgpurun_count_hostfile(const char *text, int *host_count, int *slot_count, char *err,
                           size_t err_bytes);
int vgpurun_count_host_list(const char *list, int *host_count, int *slot_count, char *err,
                            size_t err_bytes);

// Builds the command. Returns VGPU_OK, or VGPU_ECONFIG with a message in err
// for combinations that cannot work (e.g. --mps without a GPU). The caller frees with
// vgpurun_plan_free (also after an error).
int vgpurun_plan_build(const struct vgpurun_options *opts, const struct vgpurun_facts *facts,
                       struct vgpurun_plan *plan, char *err, size_t err_bytes);
void vgpurun_plan_free(struct vgpurun_plan *plan);

// Whether vgpurun starts a job-private MPS daemon, and why, in one line.
struct vgpurun_mps_choice {
    int start;              // start it (--mps, or ranks share a DEFAULT-mode GPU here)
    int loud;               // say `why` without -v: a daemon starts, or ranks take turns
    int shared_ranks;       // ranks on GPUs that hold more than one (this host)
    uint64_t limit_bytes;   // each rank's CUDA_MPS_PINNED_DEVICE_MEM_LIMIT; 0 = none
    char why[320];          // "MPS: started for the job (4 ranks share GPU 0)"; "" = nothing
                            // to say (no GPU here)
};

// The decision, from the options, this host's GPUs (count, compute modes,
// sizes), the np ranks and the binding policy's placement (ranks in order
// fill the usable GPUs, --ranks-per-gpu / VGPU_RANKS_PER_DEVICE each, else
// an even split), a server already running, nvidia-cuda-mps-control on PATH
// and the hosts. Started only for ranks sharing a GPU in DEFAULT mode on
// vgpurun's one host, unless --mps forces it. The limit is --mem-per-rank +
// VGPURUN_MPS_HEADROOM_BYTES, else an equal share of the smallest shared
// GPU's memory (its size / its ranks, MiB-rounded down). Returns VGPU_OK, or
// VGPU_ECONFIG with err where --mps cannot work or options contradict.
int vgpurun_mps_decide(const struct vgpurun_options *opts, const struct vgpurun_facts *facts,
                       int np, struct vgpurun_mps_choice *out, char *err, size_t err_bytes);

// The value for CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: "0=NMB,1=NMB,..." for each of
// gpu_count devices, N = limit rounded up to MiB. Returns buf.
char *vgpurun_mps_limit(uint64_t limit_bytes, int gpu_count, char *buf, size_t buf_bytes);

// An MPS server renumbers the GPUs it is given, so a client's
// CUDA_VISIBLE_DEVICES=2,3 names devices the server does not have. vgpurun
// gives the daemon and the ranks the same GPUs by UUID: each ordinal entry of
// `visible` (in PCI bus order, CUDA_DEVICE_ORDER=PCI_BUS_ID) becomes its UUID
// from uuids[n]; UUID and MIG entries stay. Returns 0, or VGPU_ECONFIG with
// the reason in err (an ordinal with no UUID known).
int vgpurun_visible_as_uuids(const char *visible, const char *const *uuids, int n, char *out,
                             size_t out_bytes, char *err, size_t err_bytes);

// Formats env assignments and argv as one shell-quoted line into buf. Returns buf.
char *vgpurun_format_command(const struct vgpurun_plan *plan, char *buf, size_t buf_bytes);

#endif
