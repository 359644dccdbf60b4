// vgpurun.c: `vgpurun -np N [...] -- PROGRAM ARGS`: builds and runs the mpirun
// (or, inside Slurm, srun --mpi=pmix) line for a vgpu job.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status.h"
#include "vgpurun_facts.h"
#include "vgpurun_launch.h"
#include "vgpurun_mps.h"
#include "vgpurun_plan.h"

#define EXIT_USAGE 2
#define EXIT_NOT_EXECUTABLE 126 // as the shell: found, cannot be run
#define EXIT_NOT_FOUND 127      // as the shell: no such program
#define EXIT_NOT_RUN VGPURUN_EXIT_NOT_RUN // the launcher itself could not be started
#define EXIT_PREEMPTED 75       // as vgpu_train: stopped on request, resumable

static void usage_(FILE *f)
{
    fprintf(f,
            "usage: vgpurun -np N [options] [-- LAUNCHER-OPTIONS] -- PROGRAM ARGS...\n"
            "\n"
            "Runs PROGRAM as N ranks = N virtual GPUs: with mpirun, or inside a Slurm\n"
            "allocation with srun --mpi=pmix. Adds --allow-run-as-root / --oversubscribe\n"
            "only when needed, maps ranks host by host, binds them, and exports the\n"
            "variables the ranks need to every host.\n"
            "\n"
            "options:\n"
            "  -np, -n N              number of ranks (inside Slurm: default SLURM_NTASKS)\n"
            "  --hostfile FILE        Open MPI hostfile (\"host slots=K\" lines)\n"
            "  -H, --host LIST        hosts as host[:slots],...\n"
            "  --ranks-per-gpu K      ranks sharing one device (exports " VGPURUN_ENV_RANKS_PER_DEVICE ")\n"
            "  --mem-per-rank SIZE    device memory cap per rank, e.g. 512M, 2G\n"
            "                         (exports " VGPURUN_ENV_MEMORY_LIMIT ")\n"
            "  --backend B            collectives: auto, ring, mpi or nccl (exports " VGPURUN_ENV_BACKEND ")\n"
            "  --launcher L           auto (srun inside Slurm, else mpirun), mpirun or srun\n"
            "  --mps                  start a private CUDA MPS daemon for the job even where\n"
            "                         no GPU is shared (GPU hosts only; one host). Without it\n"
            "                         vgpurun starts one by itself when ranks share a GPU in\n"
            "                         Default mode and no MPS server runs (said on one line)\n"
            "  --no-mps               never start MPS: ranks sharing a GPU take turns on it\n"
            "  --sm-share PCT         under MPS: each rank may use PCT%% of the GPU's SMs\n"
            "                         (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)\n"
            "  -x NAME[=VALUE]        pass a variable to every rank (mpirun -x; srun exports all)\n"
            "  --dry-run              print the command and exit\n"
            "  --plan                 run the job's start-up only: each vgpu program prints its\n"
            "                         job table (hosts, devices, caps, backend) and exits\n"
            "                         (exports " VGPURUN_ENV_PLAN "=1)\n"
            "  -v, --verbose          print the command and why each part is there, then run it;\n"
            "                         keeps mpirun's own reports (also " VGPURUN_ENV_MPIRUN_REPORT "=1)\n"
            "  --version              print vgpurun's version\n"
            "  -h, --help             this help\n"
            "\n"
            "LAUNCHER-OPTIONS, between two --, go to mpirun or srun as they are, e.g.\n"
            "  vgpurun -np 4 -- --mca btl self,tcp -- build/vgpu_train configs/default.ini\n"
            "\n"
            "On one host mpirun runs with -q: after a failure the ranks' own message is\n"
            "the last word, not mpirun's 10-line report; a rank killed by a signal is\n"
            "still named as such. On a terminal the ranks are told so (VGPU_TERMINAL=1,\n"
            "COLUMNS): vgpu_train then draws its live progress bar (VGPU_PROGRESS decides).\n"
            "\n"
            "Under vgpurun's MPS each rank gets a driver-enforced memory limit,\n"
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT = --mem-per-rank + 1.5 GiB, or without it an\n"
            "equal share of the GPU; the daemon is stopped however the job ends (a watcher\n"
            "process stops it if vgpurun itself is killed).\n"
            "\n"
            "PROGRAM may be any program: each rank starts through vgpurun-rank (beside\n"
            "vgpurun), which sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (as torchrun\n"
            "does; MASTER_ADDR and MASTER_PORT come from vgpurun unless set) and, on a GPU\n"
            "host, the rank's own CUDA_VISIBLE_DEVICES by vgpu's binding policy, e.g.\n"
            "  vgpurun -np 4 -- python3 train_ddp.py   (torch.distributed, env://)\n"
            "Where a host's ranks share a GPU it also puts vgpu's NCCL first on the\n"
            "loader's path, so that an NCCL program (backend=\"nccl\", MPI+NCCL codes)\n"
            "runs there unmodified (VGPU_NCCL=auto|vgpu|real; docs/LIBRARY.md).\n"
            "\n"
            "The settings reach the program through the environment; libvgpu reads them\n"
            "(config file < environment < --set). Exit status: the job's; 2 bad usage;\n"
            "126 PROGRAM is not executable; 127 PROGRAM or the launcher was not found.\n");
}

// As the shell finds a command: a name with a '/' is a path, others are
// looked up on PATH. Returns 0 if it can be run, else 127 (not found) or 126
// (found, not executable), with the message printed.
static int check_program_(const char *program)
{
    struct stat st;
    if (strchr(program, '/')) {
        if (stat(program, &st) < 0) {
            fprintf(stderr, "vgpurun: %s: %s\n", program, strerror(errno));
            return EXIT_NOT_FOUND;
        }
        if (S_ISDIR(st.st_mode) || access(program, X_OK) < 0) {
            fprintf(stderr, "vgpurun: %s: %s\n", program,
                    S_ISDIR(st.st_mode) ? "is a directory" : "not executable");
            return EXIT_NOT_EXECUTABLE;
        }
        return 0;
    }
    if (vgpurun_on_path(program))
        return 0;
    fprintf(stderr, "vgpurun: %s: command not found (not on PATH; a program here needs ./)\n",
            program);
    return EXIT_NOT_FOUND;
}

// ---- the run's phases ----

// The facts of this machine and the plan built from them. Returns 0, or
// EXIT_USAGE with the reason printed.
static int plan_job_(const struct vgpurun_options *opts, struct vgpurun_plan *plan, int *in_slurm)
{
    struct vgpurun_facts facts;
    struct vgpurun_facts_store store;
    if (vgpurun_facts_gather(opts, &facts, &store) < 0) {
        vgpurun_facts_free(&store);
        return EXIT_USAGE;
    }
    *in_slurm = facts.in_slurm;
    char err[1024] = "";
    int rc = vgpurun_plan_build(opts, &facts, plan, err, sizeof err);
    vgpurun_facts_free(&store);
    if (rc < 0) {
        fprintf(stderr, "vgpurun: %s\n", err);
        vgpurun_plan_free(plan);
        return EXIT_USAGE;
    }
    return 0;
}

// The notes (all with -v, else the loud ones) and the command: printed for
// --dry-run, said with -v.
static void show_plan_(const struct vgpurun_options *opts, const struct vgpurun_plan *plan)
{
    static char line[16384];
    vgpurun_format_command(plan, line, sizeof line);
    for (int i = 0; i < plan->notec; i++)
        if (opts->verbose || plan->loud[i])
            fprintf(stderr, "vgpurun: %s\n", plan->notes[i]);
    if (opts->dry_run)
        printf("%s\n", line);
    else if (opts->verbose)
        fprintf(stderr, "vgpurun: %s\n", line);
}

// srun forwards signals to the tasks itself (SIGTERM reaches vgpu_train,
// which checkpoints), so it replaces vgpurun. Returns only on failure.
static int exec_srun_(const struct vgpurun_plan *plan)
{
    if (vgpurun_launch_hand_over()) {
        fprintf(stderr, "vgpurun: stopped before the job started (a stop signal); nothing "
                        "to checkpoint\n");
        return EXIT_PREEMPTED;
    }
    execvp(plan->argv[0], plan->argv);
    fprintf(stderr, "vgpurun: cannot run %s: %s%s\n", plan->argv[0], strerror(errno),
            errno == ENOENT ? (plan->uses_srun ? " (is Slurm installed?)"
                                               : " (install Open MPI: openmpi-bin)")
                            : "");
    return EXIT_NOT_RUN;
}

// The job beside a private MPS daemon, started before the ranks and stopped
// after them (by its watcher, also when vgpurun is killed).
static int run_with_mps_(const struct vgpurun_options *opts, const struct vgpurun_plan *plan)
{
    char err[1024] = "";
    struct vgpurun_mps mps = {.watcher = 0, .watch_fd = -1};
    if (vgpurun_mps_start(&mps, err, sizeof err) < 0) {
        fprintf(stderr, "vgpurun: %s\n", err);
        return EXIT_NOT_RUN;
    }
    if (opts->verbose)
        fprintf(stderr, "vgpurun: MPS control daemon started (CUDA_MPS_PIPE_DIRECTORY=%s)\n",
                getenv("CUDA_MPS_PIPE_DIRECTORY"));
    int rc = vgpurun_launch_run(plan);
    vgpurun_mps_stop(&mps, rc);
    return rc;
}

int main(int argc, char **argv)
{
    vgpurun_launch_take_signals();
    struct vgpurun_options opts;
    char err[1024] = "";
    int rc = vgpurun_parse_args(argc, argv, &opts, err, sizeof err);
    if (rc == VGPU_OK && opts.help) {
        usage_(stdout);
        return 0;
    }
    if (rc == VGPU_OK && opts.version) {
        printf("vgpurun %s\n", VGPU_VERSION);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "vgpurun: %s\n", err);
        return EXIT_USAGE;
    }

    struct vgpurun_plan plan;
    int in_slurm;
    if ((rc = plan_job_(&opts, &plan, &in_slurm)) != 0)
        return rc;
    // A program that is not there ends it before anything is said to start.
    if (!opts.dry_run && (rc = check_program_(opts.program[0])) != 0) {
        vgpurun_plan_free(&plan);
        return rc;
    }
    show_plan_(&opts, &plan);
    if (opts.dry_run) {
        vgpurun_plan_free(&plan);
        return 0;
    }
    if (plan.uses_srun && !in_slurm)
        fprintf(stderr, "vgpurun: not inside a Slurm allocation (no SLURM_JOB_ID): srun asks Slurm "
                        "for one and waits until it is granted\n");
    for (int i = 0; i < plan.envc; i++)
        putenv(plan.env[i]); // the plan keeps owning the strings until exit

    if (!plan.mps && plan.uses_srun)
        return exec_srun_(&plan);
    const int ranks_are_children = !opts.hostfile && !opts.hosts;
    vgpurun_launch_expect(plan.uses_srun, ranks_are_children, ranks_are_children ? opts.np : 0);
    return plan.mps ? run_with_mps_(&opts, &plan) : vgpurun_launch_run(&plan);
}
