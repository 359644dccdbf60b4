// vgpurun_plan.c: vgpurun's launch command, built from the options and the
// machine's facts: the launcher line, the ranks' environment, and why.
#include "vgpurun_plan.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "util.h"

// Variables the ranks need on every host; mpirun forwards OMPI_MCA_* itself.
static const char *const forward_prefixes_[] = {"VGPU_", "NCCL_", "CUDA_MPS_"};

// ---- adding to the plan ----

static int add_arg_(struct vgpurun_plan *plan, const char *arg)
{
    if (plan->argc + 1 >= VGPURUN_MAX_ARGS)
        return -1;
    if (!(plan->argv[plan->argc] = strdup(arg)))
        return -1;
    plan->argc++;
    return 0;
}

static int add_env_(struct vgpurun_plan *plan, const char *name, const char *value)
{
    char *buf = NULL;
    if (plan->envc >= VGPURUN_MAX_ENV || asprintf(&buf, "%s=%s", name, value) < 0)
        return -1;
    plan->env[plan->envc] = buf;
    plan->envc++;
    return 0;
}

static void note_(struct vgpurun_plan *plan, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_(struct vgpurun_plan *plan, const char *fmt, ...)
{
    if (plan->notec >= VGPURUN_MAX_NOTES)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if ((plan->notes[plan->notec] = strdup(buf)))
        plan->notec++;
}

// A note said even without -v (vgpurun prints every plan.loud note).
#define tell_(plan, ...)                                                  \
    do {                                                                  \
        note_((plan), __VA_ARGS__);                                       \
        if ((plan)->notec > 0)                                            \
            (plan)->loud[(plan)->notec - 1] = 1;                          \
    } while (0)

static int env_has_(const struct vgpurun_facts *facts, const char *name)
{
    for (int i = 0; facts->env_names && facts->env_names[i]; i++)
        if (!strcmp(facts->env_names[i], name))
            return 1;
    return 0;
}

static int forwarded_(const char *name)
{
    for (size_t i = 0; i < sizeof forward_prefixes_ / sizeof forward_prefixes_[0]; i++)
        if (!strncmp(name, forward_prefixes_[i], strlen(forward_prefixes_[i])))
            return 1;
    return 0;
}

// Names to pass with mpirun -x: those the plan sets (set_names), then forwarded
// ones already in the environment, each once.
static int add_exports_(struct vgpurun_plan *plan, const struct vgpurun_facts *facts,
                        const char *const *set_names, int set_count)
{
    const char *names[VGPURUN_MAX_ARGS / 2];
    int n = 0, cap = (int)(sizeof names / sizeof names[0]);
    for (int i = 0; i < set_count && n < cap; i++)
        names[n++] = set_names[i];
    for (int i = 0; facts->env_names && facts->env_names[i] && n < cap; i++)
        if (forwarded_(facts->env_names[i]))
            names[n++] = facts->env_names[i];
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(names[i], names[j]);
        if (!seen && (add_arg_(plan, "-x") || add_arg_(plan, names[i])))
            return -1;
    }
    return 0;
}

char *vgpurun_mps_limit(uint64_t limit_bytes, int gpu_count, char *buf, size_t buf_bytes)
{
    unsigned long long mib = (limit_bytes + (1ull << 20) - 1) >> 20;
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < gpu_count && used < buf_bytes; d++)
        used += (size_t)snprintf(buf + used, buf_bytes - used, "%s%d=%lluMB", d ? "," : "", d, mib);
    return buf;
}

int vgpurun_visible_as_uuids(const char *visible, const char *const *uuids, int n, char *out,
                             size_t out_bytes, char *err, size_t err_bytes)
{
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", visible);
    size_t used = 0;
    out[0] = '\0';
    char *save = NULL;
    for (char *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        const char *as = e;
        char *end;
        long i = strtol(e, &end, 10);
        if (end != e && !*end) {
            if (i < 0 || i >= n || !uuids)
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "--mps with CUDA_VISIBLE_DEVICES=%s: GPU %ld's UUID is not known "
                                   "(%s); an MPS server renumbers its GPUs, so name them by UUID: "
                                   "CUDA_VISIBLE_DEVICES=GPU-... (nvidia-smi -L lists them)",
                                   visible, i, uuids ? "no such GPU" : "nvidia-smi did not say");
            as = uuids[i];
        }
        used += (size_t)snprintf(out + used, used < out_bytes ? out_bytes - used : 0, "%s%s",
                                 used ? "," : "", as);
    }
    if (used >= out_bytes)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "CUDA_VISIBLE_DEVICES is too long");
    return 0;
}

// ---- building the plan, step by step ----

// What the plan sets for the ranks; mpirun passes these on with -x.
struct env_set {
    const char *names[VGPURUN_MAX_ENV];
    int count;
    char exported[VGPURUN_MAX_EXPORTS][128]; // the -x names, which names[] point into
};

static int too_long_(char *err, size_t err_bytes)
{
    return util_errorf(err, err_bytes, VGPU_ECONFIG,
                       "the command is too long (at most %d arguments)", VGPURUN_MAX_ARGS);
}

// Sets NAME=VALUE for the ranks. Returns 0, or -1 when the plan is full.
static int set_(struct vgpurun_plan *plan, struct env_set *set, const char *name, const char *value)
{
    if (add_env_(plan, name, value))
        return -1;
    set->names[set->count++] = name;
    return 0;
}

// Combinations that cannot work, refused before anything is built.
static int check_request_(const struct vgpurun_options *opts, int srun, char *err,
                          size_t err_bytes)
{
    if (srun && (opts->hostfile || opts->hosts))
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "inside a Slurm allocation the hosts come from Slurm: drop %s, or use "
                           "--launcher mpirun",
                           opts->hostfile ? "--hostfile" : "-H");
    // MPS's refusals are vgpurun_mps_decide's, once the rank count is known.
    return VGPU_OK;
}

// -np, else Slurm's tasks, else the hostfile's slots; 0 when none says.
static int rank_count_(const struct vgpurun_options *opts, const struct vgpurun_facts *facts, int srun)
{
    int np = opts->np;
    if (!np && srun)
        np = facts->slurm_ntasks;
    if (!np && !srun && facts->host_count > 0 && facts->slot_count > 0)
        np = facts->slot_count;
    return np;
}

// Device settings travel as environment variables, so they reach any
// program and every host; the config layer reads them.
static int add_device_env_(const struct vgpurun_options *opts, struct vgpurun_plan *plan,
                           struct env_set *set)
{
    char num[32];
    if (opts->ranks_per_gpu) {
        snprintf(num, sizeof num, "%d", opts->ranks_per_gpu);
        if (set_(plan, set, VGPURUN_ENV_RANKS_PER_DEVICE, num))
            return -1;
    }
    if (opts->mem_per_rank && set_(plan, set, VGPURUN_ENV_MEMORY_LIMIT, opts->mem_per_rank))
        return -1;
    if (opts->plan) {
        if (set_(plan, set, VGPURUN_ENV_PLAN, "1"))
            return -1;
        note_(plan, "--plan: each rank starts up, rank 0 prints the job table, and they exit "
                    "before the work (VGPU_PLAN=1)");
    }
    if (opts->backend && set_(plan, set, VGPURUN_ENV_BACKEND, opts->backend))
        return -1;
    return 0;
}

// Any program: the frameworks' rendezvous (torchrun's MASTER_ADDR and
// MASTER_PORT) is decided here, where the hosts are known; the shim gives
// each rank its RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and, on GPU
// hosts, its own CUDA_VISIBLE_DEVICES. The user's own values win.
static int add_rendezvous_env_(const struct vgpurun_facts *facts, struct vgpurun_plan *plan,
                               struct env_set *set)
{
    if (!facts->rank_shim)
        return 0;
    if (!env_has_(facts, "MASTER_ADDR") &&
        add_env_(plan, "MASTER_ADDR", facts->master_addr ? facts->master_addr : "127.0.0.1"))
        return -1;
    char num[32];
    snprintf(num, sizeof num, "%d", facts->master_port);
    if (!env_has_(facts, "MASTER_PORT") && add_env_(plan, "MASTER_PORT", num))
        return -1;
    set->names[set->count++] = "MASTER_ADDR";
    set->names[set->count++] = "MASTER_PORT";
    note_(plan, "each rank starts through %s: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE "
                "from the launcher, MASTER_ADDR/MASTER_PORT from here, its own "
                "CUDA_VISIBLE_DEVICES on GPU hosts",
          facts->rank_shim);
    return 0;
}

// MPS for the job (vgpurun_mps_decide): the driver's per-rank cap, the SM
// share, and the GPUs by UUID. Returns VGPU_OK, or VGPU_ECONFIG with err.
static int add_mps_env_(const struct vgpurun_options *opts, const struct vgpurun_facts *facts,
                        const struct vgpurun_mps_choice *mps, struct vgpurun_plan *plan,
                        struct env_set *set, char *err, size_t err_bytes)
{
    char limit[512];
    vgpurun_mps_limit(mps->limit_bytes, facts->gpu_count, limit, sizeof limit);
    if (mps->limit_bytes && set_(plan, set, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", limit))
        return too_long_(err, err_bytes);
    // The directories are made when the daemon starts (vgpurun_mps.c).
    set->names[set->count++] = "CUDA_MPS_PIPE_DIRECTORY";
    set->names[set->count++] = "CUDA_MPS_LOG_DIRECTORY";
    if (!mps->limit_bytes)
        note_(plan, "MPS: no memory limit per rank (no --mem-per-rank, and the GPUs' sizes are "
                    "not known here)");
    else if (opts->mem_per_rank)
        note_(plan, "MPS: hard cap %s per rank and GPU (--mem-per-rank + 1.5 GiB for the "
                    "CUDA context and NCCL's buffers), enforced by the driver",
              limit);
    else
        note_(plan, "MPS: hard cap %s per rank and GPU (an equal share of the GPU: no "
                    "--mem-per-rank), enforced by the driver",
              limit);
    if (opts->sm_share) {
        char pct[16];
        snprintf(pct, sizeof pct, "%d", opts->sm_share);
        if (set_(plan, set, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", pct))
            return too_long_(err, err_bytes);
        note_(plan, "MPS: each rank may use %d%% of the GPU's SMs "
                    "(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)", opts->sm_share);
    }
    if (!facts->cuda_visible || !facts->cuda_visible[0])
        return VGPU_OK;
    char uuids[1024];
    if (vgpurun_visible_as_uuids(facts->cuda_visible, facts->gpu_uuids, facts->gpu_uuid_count,
                                 uuids, sizeof uuids, err, err_bytes) < 0)
        return VGPU_ECONFIG;
    if (set_(plan, set, "CUDA_VISIBLE_DEVICES", uuids) ||
        set_(plan, set, "CUDA_DEVICE_ORDER", "PCI_BUS_ID"))
        return too_long_(err, err_bytes);
    note_(plan, "MPS: the daemon and the ranks get the same GPUs by UUID "
                "(CUDA_VISIBLE_DEVICES=%s): a server renumbers what it is given",
          uuids);
    return VGPU_OK;
}

// The ranks are told of the terminal, which they cannot see: under mpirun
// or srun their stdout is a pipe (a program may then draw live output, as
// vgpu_train's bar). The user's own settings win.
static int add_terminal_env_(const struct vgpurun_facts *facts, struct vgpurun_plan *plan,
                             struct env_set *set)
{
    if (facts->terminal_columns <= 0)
        return 0;
    if (!env_has_(facts, "VGPU_TERMINAL") && set_(plan, set, "VGPU_TERMINAL", "1"))
        return -1;
    char num[32];
    snprintf(num, sizeof num, "%d", facts->terminal_columns);
    if (!env_has_(facts, "COLUMNS") && add_env_(plan, "COLUMNS", num))
        return -1;
    set->names[set->count++] = "COLUMNS";
    return 0;
}

// -x NAME=VALUE is set here; -x NAME passes this environment's value.
// Returns VGPU_OK, or VGPU_ECONFIG with err.
static int add_user_exports_(const struct vgpurun_options *opts, const struct vgpurun_facts *facts,
                             struct vgpurun_plan *plan, struct env_set *set, char *err,
                             size_t err_bytes)
{
    for (int i = 0; i < opts->export_count; i++) {
        const char *item = opts->exports[i], *eq = strchr(item, '=');
        char *name = set->exported[i];
        snprintf(name, sizeof set->exported[i], "%.*s", (int)strcspn(item, "="), item);
        if (!eq && !env_has_(facts, name))
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "-x %s: %s is not set here (give -x %s=VALUE)", item, name, name);
        if (eq && add_env_(plan, name, eq + 1))
            return too_long_(err, err_bytes);
        if (set->count == VGPURUN_MAX_ENV)
            return too_long_(err, err_bytes);
        set->names[set->count++] = name;
    }
    return VGPU_OK;
}

static int add_srun_line_(struct vgpurun_plan *plan, const char *np)
{
    // --export=ALL: the variables above reach the ranks even when the
    // batch script was submitted with --export=NONE.
    if (add_arg_(plan, "srun") || add_arg_(plan, "--mpi=pmix") || add_arg_(plan, "--export=ALL") ||
        add_arg_(plan, "-n") || add_arg_(plan, np))
        return -1;
    note_(plan, "inside Slurm job: srun --mpi=pmix (Slurm places and binds the ranks)");
    return 0;
}

// mpirun's --oversubscribe (only when the ranks outnumber the slots or
// cores) and its mapping and binding.
static int add_mpirun_placement_(const struct vgpurun_options *opts,
                                 const struct vgpurun_facts *facts, struct vgpurun_plan *plan, int np)
{
    int slots = facts->host_count > 0 ? facts->slot_count : facts->cores;
    int over = slots > 0 && np > slots;
    if (over) {
        if (add_arg_(plan, "--oversubscribe"))
            return -1;
        // More ranks than the hostfile's slots goes against what the
        // user wrote down: said; more than the cores is routine here.
        if (facts->host_count > 0)
            tell_(plan, "--oversubscribe: %d ranks on %d slot%s of the %s (and --bind-to none)",
                  np, slots, slots == 1 ? "" : "s", opts->hostfile ? "hostfile" : "-H list");
        else
            note_(plan, "--oversubscribe: %d ranks on %d cores", np, slots);
    } else if (slots < 0) {
        note_(plan, "hostfile without slots=: mpirun counts each host's cores");
    }
    // Consecutive ranks fill a host first, so local ranks 0..K-1 share
    // GPU 0 as the binding policy expects. Pinning each rank to one core
    // (mpirun's default) would squeeze its BLAS threads onto that core;
    // a NUMA domain keeps a rank near its memory and GPU. Oversubscribed,
    // pinned ranks would queue on their cores while others idle: no binding.
    // Slots may exceed a host's cores (virtual GPUs share them), which
    // mpirun refuses to bind unless told that overload is allowed.
    if (add_arg_(plan, "--map-by") || add_arg_(plan, "slot") || add_arg_(plan, "--bind-to") ||
        add_arg_(plan, over ? "none" : "numa:overload-allowed"))
        return -1;
    note_(plan, "binding: --map-by slot --bind-to %s",
          over ? "none (oversubscribed)"
               : "numa:overload-allowed (a host may have more slots than cores)");
    return 0;
}

static int add_mpirun_line_(const struct vgpurun_options *opts, const struct vgpurun_facts *facts,
                            struct vgpurun_plan *plan, const struct env_set *set, int np)
{
    char num[32];
    snprintf(num, sizeof num, "%d", np);
    if (add_arg_(plan, "mpirun") || add_arg_(plan, "-np") || add_arg_(plan, num))
        return -1;
    // mpirun -q drops its 10-line reports after every non-zero exit; the
    // ranks have said why. On one host what -q would hide is checked
    // before the start (program, slots, binding) or told by vgpurun
    // after it (a rank killed by a signal); across hosts the reports name
    // the host, so they stay.
    plan->quiet_mpirun = !opts->verbose && !facts->keep_mpirun_reports && facts->host_count <= 1;
    if (plan->quiet_mpirun && add_arg_(plan, "-q"))
        return -1;
    if (opts->hostfile && (add_arg_(plan, "--hostfile") || add_arg_(plan, opts->hostfile)))
        return -1;
    if (opts->hosts && (add_arg_(plan, "-H") || add_arg_(plan, opts->hosts)))
        return -1;
    if (facts->is_root && !facts->root_allowed_by_env) {
        if (add_arg_(plan, "--allow-run-as-root"))
            return -1;
        note_(plan, "--allow-run-as-root: running as root");
    }
    // Open MPI 4's mpirun will not start without an ssh or rsh on the
    // PATH, even when every rank is local (containers often have none).
    if (!facts->have_rsh_agent && facts->host_count <= 1 &&
        !env_has_(facts, "OMPI_MCA_plm_rsh_agent")) {
        if (add_env_(plan, "OMPI_MCA_plm_rsh_agent", "false")) // mpirun's own: no -x
            return -1;
        note_(plan, "no ssh or rsh here: OMPI_MCA_plm_rsh_agent=false (one host needs none)");
    }
    if (add_mpirun_placement_(opts, facts, plan, np))
        return -1;
    return add_exports_(plan, facts, set->names, set->count);
}

// The launcher's own options, the per-rank shim, then the user's program.
static int add_program_(const struct vgpurun_options *opts, const struct vgpurun_facts *facts,
                        struct vgpurun_plan *plan)
{
    for (int i = 0; i < opts->launcher_arg_count; i++)
        if (add_arg_(plan, opts->launcher_args[i]))
            return -1;
    if (facts->rank_shim && add_arg_(plan, facts->rank_shim))
        return -1;
    for (int i = 0; i < opts->program_count; i++)
        if (add_arg_(plan, opts->program[i]))
            return -1;
    return 0;
}

int vgpurun_plan_build(const struct vgpurun_options *opts, const struct vgpurun_facts *facts,
                       struct vgpurun_plan *plan, char *err, size_t err_bytes)
{
    memset(plan, 0, sizeof *plan);
    int srun = opts->launcher == VGPURUN_SRUN || (opts->launcher == VGPURUN_AUTO && facts->in_slurm);
    plan->uses_srun = srun;
    int rc = check_request_(opts, srun, err, err_bytes);
    if (rc < 0)
        return rc;
    int np = rank_count_(opts, facts, srun);
    if (!np)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "give the number of ranks: -np N");

    struct env_set set = {.count = 0};
    if (add_device_env_(opts, plan, &set) || add_rendezvous_env_(facts, plan, &set))
        return too_long_(err, err_bytes);
    struct vgpurun_mps_choice mps;
    if ((rc = vgpurun_mps_decide(opts, facts, np, &mps, err, err_bytes)) < 0)
        return rc;
    plan->mps = mps.start;
    if (mps.why[0] && opts->dry_run && mps.start) // nothing starts: said as what a run would do
        note_(plan, "MPS: would start for the job%s", mps.why + strlen("MPS: started for the job"));
    else if (mps.why[0])
        note_(plan, "%s", mps.why);
    if (mps.why[0] && mps.loud)
        plan->loud[plan->notec - 1] = 1;
    if (mps.start && (rc = add_mps_env_(opts, facts, &mps, plan, &set, err, err_bytes)) < 0)
        return rc;
    if (add_terminal_env_(facts, plan, &set))
        return too_long_(err, err_bytes);
    if ((rc = add_user_exports_(opts, facts, plan, &set, err, err_bytes)) < 0)
        return rc;

    char num[32];
    snprintf(num, sizeof num, "%d", np);
    if ((srun ? add_srun_line_(plan, num) : add_mpirun_line_(opts, facts, plan, &set, np)) ||
        add_program_(opts, facts, plan))
        return too_long_(err, err_bytes);
    plan->argv[plan->argc] = NULL;
    return VGPU_OK;
}

void vgpurun_plan_free(struct vgpurun_plan *plan)
{
    if (!plan)
        return;
    for (int i = 0; i < plan->argc; i++)
        free(plan->argv[i]);
    for (int i = 0; i < plan->envc; i++)
        free(plan->env[i]);
    for (int i = 0; i < plan->notec; i++)
        free(plan->notes[i]);
    memset(plan, 0, sizeof *plan);
}

// ---- printing ----

// Appends s to buf, single-quoted when it has characters the shell treats specially.
static size_t append_quoted_(char *buf, size_t used, size_t buf_bytes, const char *s)
{
    int plain = *s != '\0';
    for (const char *q = s; *q && plain; q++)
        plain = isalnum((unsigned char)*q) || strchr("-_./=:,+@%", *q);
    if (used >= buf_bytes)
        return used;
    if (plain)
        return used + (size_t)snprintf(buf + used, buf_bytes - used, "%s", s);
    used += (size_t)snprintf(buf + used, buf_bytes - used, "'");
    for (const char *q = s; *q && used < buf_bytes; q++)
        used += (size_t)snprintf(buf + used, buf_bytes - used, *q == '\'' ? "'\\''" : "%c", *q);
    if (used < buf_bytes)
        used += (size_t)snprintf(buf + used, buf_bytes - used, "'");
    return used;
}

char *vgpurun_format_command(const struct vgpurun_plan *plan, char *buf, size_t buf_bytes)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < plan->envc; i++) {
        used = append_quoted_(buf, used, buf_bytes, plan->env[i]);
        if (used < buf_bytes)
            used += (size_t)snprintf(buf + used, buf_bytes - used, " ");
    }
    for (int i = 0; i < plan->argc; i++) {
        used = append_quoted_(buf, used, buf_bytes, plan->argv[i]);
        if (i + 1 < plan->argc && used < buf_bytes)
            used += (size_t)snprintf(buf + used, buf_bytes - used, " ");
    }
    return buf;
}
