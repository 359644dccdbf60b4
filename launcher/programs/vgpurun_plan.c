// vgpurun_plan.c: vgpurun's command-line parsing and launch-command building.
#include "vgpurun_plan.h"

#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "status.h"
#include "util.h"

static const char *const backends_[] = {"auto", "ring", "mpi", "nccl"};

// Variables the ranks need on every host; mpirun forwards OMPI_MCA_* itself.
static const char *const forward_prefixes_[] = {"VGPU_", "NCCL_", "CUDA_MPS_"};

// Positive decimal integer, whole string; -1 if it is not one.
static int parse_count_(const char *text)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < 1 || v > 1 << 20)
        return -1;
    return (int)v;
}

// NAME or NAME=VALUE with NAME a shell variable name.
static int variable_name_(const char *text)
{
    size_t len = strcspn(text, "=");
    if (len == 0 || len >= 128 || isdigit((unsigned char)text[0]))
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)text[i]) && text[i] != '_')
            return 0;
    return 1;
}

// ---- command line ----

int vgpurun_parse_args(int argc, char **argv, struct vgpurun_options *opts, char *err,
                       size_t err_bytes)
{
    enum { OPT_HOSTFILE = 256, OPT_RPG, OPT_MEM, OPT_BACKEND, OPT_LAUNCHER, OPT_MPS, OPT_DRY, OPT_PLAN, OPT_SM,
           OPT_VERSION };
    static const struct option options[] = {
        {"np", required_argument, NULL, 'n'},
        {"hostfile", required_argument, NULL, OPT_HOSTFILE},
        {"host", required_argument, NULL, 'H'},
        {"ranks-per-gpu", required_argument, NULL, OPT_RPG},
        {"mem-per-rank", required_argument, NULL, OPT_MEM},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"launcher", required_argument, NULL, OPT_LAUNCHER},
        {"mps", no_argument, NULL, OPT_MPS},
        {"dry-run", no_argument, NULL, OPT_DRY},
        {"plan", no_argument, NULL, OPT_PLAN},
        {"sm-share", required_argument, NULL, OPT_SM},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    memset(opts, 0, sizeof *opts);
    opterr = 0;
    optind = 1;
    int c;
    // '+': stop at the program name, whose own options are not ours. Long-only
    // parsing accepts mpirun's spelling "-np".
    while ((c = getopt_long_only(argc, argv, "+:n:H:x:vh", options, NULL)) != -1) {
        switch (c) {
        case 'n':
            if ((opts->np = parse_count_(optarg)) < 0)
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "-np %s: expected a rank count >= 1", optarg);
            break;
        case OPT_HOSTFILE: opts->hostfile = optarg; break;
        case 'H': opts->hosts = optarg; break;
        case OPT_RPG:
            if ((opts->ranks_per_gpu = parse_count_(optarg)) < 0)
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "--ranks-per-gpu %s: expected a count >= 1", optarg);
            break;
        case OPT_MEM:
            if (config_parse_size(optarg, &opts->mem_per_rank_bytes) < 0 ||
                opts->mem_per_rank_bytes == 0)
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "--mem-per-rank %s: expected a size such as 512M or 2G", optarg);
            opts->mem_per_rank = optarg;
            break;
        case OPT_BACKEND: {
            int known = 0;
            for (size_t i = 0; i < sizeof backends_ / sizeof backends_[0]; i++)
                known |= !strcmp(optarg, backends_[i]);
            if (!known)
                return util_errorf(err, err_bytes, VGPU_ECONFIG, "--backend %s: expected auto, ring, mpi or nccl",
                                   optarg);
            opts->backend = optarg;
            break;
        }
        case OPT_LAUNCHER:
            if (!strcmp(optarg, "auto"))
                opts->launcher = VGPURUN_AUTO;
            else if (!strcmp(optarg, "mpirun"))
                opts->launcher = VGPURUN_MPIRUN;
            else if (!strcmp(optarg, "srun"))
                opts->launcher = VGPURUN_SRUN;
            else
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "--launcher %s: expected auto, mpirun or srun", optarg);
            break;
        case OPT_MPS: opts->mps = 1; break;
        case OPT_DRY: opts->dry_run = 1; break;
        case OPT_PLAN: opts->plan = 1; break;
        case OPT_SM: {
            char *end;
            long pct = strtol(optarg, &end, 10);
            if (end == optarg || *end || pct < 1 || pct > 100)
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "--sm-share %s: expected a percentage, 1 to 100", optarg);
            opts->sm_share = (int)pct;
            break;
        }
        case 'v': opts->verbose = 1; break;
        case 'x':
            if (!variable_name_(optarg))
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "-x %s: expected NAME or NAME=VALUE (a variable name: "
                                   "letters, digits, '_')", optarg);
            if (opts->export_count == VGPURUN_MAX_EXPORTS)
                return util_errorf(err, err_bytes, VGPU_ECONFIG, "more than %d -x options",
                                   VGPURUN_MAX_EXPORTS);
            opts->exports[opts->export_count++] = optarg;
            break;
        case 'h': opts->help = 1; return VGPU_OK;
        case OPT_VERSION: opts->version = 1; return VGPU_OK;
        case ':': return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                     "option %s needs a value", argv[optind - 1]);
        default: return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                    "unknown option %s (vgpurun --help lists them; mpirun's "
                                    "or srun's own go between two --)",
                                    argv[optind - 1]);
        }
    }
    // "-- LAUNCHER-OPTIONS -- PROGRAM": a program name never starts with '-',
    // so options right after the first "--" are mpirun's or srun's.
    if (optind > 1 && optind < argc && !strcmp(argv[optind - 1], "--") && argv[optind][0] == '-') {
        int end = optind;
        while (end < argc && strcmp(argv[end], "--"))
            end++;
        if (end == argc)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "%s: launcher options need a second -- before the program "
                               "(vgpurun [options] -- LAUNCHER-OPTIONS -- PROGRAM ARGS...)",
                               argv[optind]);
        opts->launcher_args = argv + optind;
        opts->launcher_arg_count = end - optind;
        optind = end + 1;
    }
    if (optind >= argc)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "no program to run (vgpurun [options] -- PROGRAM ARGS...)");
    if (opts->hostfile && opts->hosts)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "give --hostfile or -H, not both");
    opts->program = argv + optind;
    opts->program_count = argc - optind;
    return VGPU_OK;
}

// ---- hosts and slots ----

int vgpurun_count_hostfile(const char *text, int *host_count, int *slot_count, char *err,
                           size_t err_bytes)
{
    int hosts = 0, slots = 0, line_no = 0;
    const char *p = text;
    while (*p) {
        line_no++;
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[512];
        if (len >= sizeof line)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "hostfile line %d is too long", line_no);
        memcpy(line, p, len);
        line[len] = '\0';
        p += len + (end != NULL);
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL, *word = strtok_r(line, " \t\r", &save);
        if (!word)
            continue;
        hosts++;
        int host_slots = -1;
        while ((word = strtok_r(NULL, " \t\r", &save))) {
            if (!strncmp(word, "slots=", 6)) {
                if ((host_slots = parse_count_(word + 6)) < 0)
                    return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                       "hostfile line %d: bad '%s'", line_no, word);
            }
        }
        slots = host_slots < 0 || slots < 0 ? -1 : slots + host_slots;
    }
    if (hosts == 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "the hostfile names no host");
    *host_count = hosts;
    *slot_count = slots;
    return VGPU_OK;
}

int vgpurun_count_host_list(const char *list, int *host_count, int *slot_count, char *err,
                            size_t err_bytes)
{
    int hosts = 0, slots = 0;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[256];
        if (len == 0 || len >= sizeof item)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "-H %s: empty or overlong host entry", list);
        memcpy(item, p, len);
        item[len] = '\0';
        p += len + (end != NULL);
        char *colon = strchr(item, ':');
        int n = 1;
        if (colon && (n = parse_count_(colon + 1)) < 0)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "-H %s: bad slot count in '%s'", list, item);
        hosts++;
        slots += n;
    }
    if (hosts == 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "-H needs host[:slots],...");
    *host_count = hosts;
    *slot_count = slots;
    return VGPU_OK;
}

// ---- plan ----

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

static int check_mps_(const struct vgpurun_options *opts, const struct vgpurun_facts *facts,
                      char *err, size_t err_bytes)
{
    if (facts->gpu_count == 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "--mps needs an NVIDIA GPU, and %s has none (no /dev/nvidia0); without --mps "
                           "the ranks still keep to --mem-per-rank through vgpu's own allocator",
                           facts->host);
    if (!facts->have_mps_control)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "--mps needs nvidia-cuda-mps-control (part of the NVIDIA driver utilities) "
                           "on PATH; it is not on %s",
                           facts->host);
    if (!opts->mem_per_rank)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "--mps needs --mem-per-rank SIZE (the per-rank hard cap)");
    if (facts->host_count > 1 || facts->slurm_nnodes > 1)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "--mps starts the MPS daemon on this host only, and the job spans %d hosts; "
                           "start MPS on every node in the batch script instead",
                           facts->host_count > 1 ? facts->host_count : facts->slurm_nnodes);
    return VGPU_OK;
}

int vgpurun_plan_build(const struct vgpurun_options *opts, const struct vgpurun_facts *facts,
                       struct vgpurun_plan *plan, char *err, size_t err_bytes)
{
    memset(plan, 0, sizeof *plan);
    int srun = opts->launcher == VGPURUN_SRUN || (opts->launcher == VGPURUN_AUTO && facts->in_slurm);
    plan->uses_srun = srun;
    if (srun && (opts->hostfile || opts->hosts))
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "inside a Slurm allocation the hosts come from Slurm: drop %s, or use "
                           "--launcher mpirun",
                           opts->hostfile ? "--hostfile" : "-H");
    int rc = opts->mps ? check_mps_(opts, facts, err, err_bytes) : VGPU_OK;
    if (rc == VGPU_OK && opts->sm_share && !opts->mps)
        rc = util_errorf(err, err_bytes, VGPU_ECONFIG,
                         "--sm-share gives each rank a share of the SMs through MPS: add --mps");
    if (rc < 0)
        return rc;

    int np = opts->np;
    if (!np && srun)
        np = facts->slurm_ntasks;
    if (!np && !srun && facts->host_count > 0 && facts->slot_count > 0)
        np = facts->slot_count;
    if (!np)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "give the number of ranks: -np N");

    // Device settings travel as environment variables, so they reach any
    // program and every host; the config layer reads them.
    const char *set_names[VGPURUN_MAX_ENV];
    int set_count = 0;
    char num[32];
    if (opts->ranks_per_gpu) {
        snprintf(num, sizeof num, "%d", opts->ranks_per_gpu);
        if (add_env_(plan, VGPURUN_ENV_RANKS_PER_DEVICE, num))
            goto no_memory;
        set_names[set_count++] = VGPURUN_ENV_RANKS_PER_DEVICE;
    }
    if (opts->mem_per_rank) {
        if (add_env_(plan, VGPURUN_ENV_MEMORY_LIMIT, opts->mem_per_rank))
            goto no_memory;
        set_names[set_count++] = VGPURUN_ENV_MEMORY_LIMIT;
    }
    if (opts->plan) {
        if (add_env_(plan, VGPURUN_ENV_PLAN, "1"))
            goto no_memory;
        set_names[set_count++] = VGPURUN_ENV_PLAN;
        note_(plan, "--plan: the ranks print the job table and exit without training");
    }
    if (opts->backend) {
        if (add_env_(plan, VGPURUN_ENV_BACKEND, opts->backend))
            goto no_memory;
        set_names[set_count++] = VGPURUN_ENV_BACKEND;
    }
    // Any program: the frameworks' rendezvous (torchrun's MASTER_ADDR and
    // MASTER_PORT) is decided here, where the hosts are known; the shim gives
    // each rank its RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and, on GPU
    // hosts, its own CUDA_VISIBLE_DEVICES. The user's own values win.
    if (facts->rank_shim) {
        if (!env_has_(facts, "MASTER_ADDR") &&
            add_env_(plan, "MASTER_ADDR", facts->master_addr ? facts->master_addr : "127.0.0.1"))
            goto no_memory;
        snprintf(num, sizeof num, "%d", facts->master_port);
        if (!env_has_(facts, "MASTER_PORT") && add_env_(plan, "MASTER_PORT", num))
            goto no_memory;
        set_names[set_count++] = "MASTER_ADDR";
        set_names[set_count++] = "MASTER_PORT";
        note_(plan, "each rank starts through %s: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE "
                    "from the launcher, MASTER_ADDR/MASTER_PORT from here, its own "
                    "CUDA_VISIBLE_DEVICES on GPU hosts",
              facts->rank_shim);
    }
    if (opts->mps) {
        char limit[512];
        vgpurun_mps_limit(opts->mem_per_rank_bytes + VGPURUN_MPS_HEADROOM_BYTES, facts->gpu_count,
                          limit, sizeof limit);
        if (add_env_(plan, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", limit))
            goto no_memory;
        // The directories are made when the daemon starts (vgpurun_mps.c).
        set_names[set_count++] = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";
        set_names[set_count++] = "CUDA_MPS_PIPE_DIRECTORY";
        set_names[set_count++] = "CUDA_MPS_LOG_DIRECTORY";
        note_(plan, "MPS: hard cap %s per rank and GPU (--mem-per-rank + 1.5 GiB for the "
                    "CUDA context and NCCL's buffers), enforced by the driver",
              limit);
        if (opts->sm_share) {
            char pct[16];
            snprintf(pct, sizeof pct, "%d", opts->sm_share);
            if (add_env_(plan, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", pct))
                goto no_memory;
            set_names[set_count++] = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
            note_(plan, "MPS: each rank may use %d%% of the GPU's SMs "
                        "(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)", opts->sm_share);
        }
        if (facts->cuda_visible && facts->cuda_visible[0]) {
            char uuids[1024];
            if (vgpurun_visible_as_uuids(facts->cuda_visible, facts->gpu_uuids,
                                         facts->gpu_uuid_count, uuids, sizeof uuids, err,
                                         err_bytes) < 0)
                return VGPU_ECONFIG;
            if (add_env_(plan, "CUDA_VISIBLE_DEVICES", uuids) ||
                add_env_(plan, "CUDA_DEVICE_ORDER", "PCI_BUS_ID"))
                goto no_memory;
            set_names[set_count++] = "CUDA_VISIBLE_DEVICES";
            set_names[set_count++] = "CUDA_DEVICE_ORDER";
            note_(plan, "MPS: the daemon and the ranks get the same GPUs by UUID "
                        "(CUDA_VISIBLE_DEVICES=%s): a server renumbers what it is given",
                  uuids);
        }
    }

    // A terminal gets the live bar, which the ranks cannot know of: under
    // mpirun or srun their stdout is a pipe. The user's own settings win.
    if (facts->terminal_columns > 0) {
        if (!env_has_(facts, "VGPU_PROGRESS")) {
            if (add_env_(plan, "VGPU_PROGRESS", "bar"))
                goto no_memory;
            set_names[set_count++] = "VGPU_PROGRESS";
        }
        snprintf(num, sizeof num, "%d", facts->terminal_columns);
        if (!env_has_(facts, "COLUMNS") && add_env_(plan, "COLUMNS", num))
            goto no_memory;
        set_names[set_count++] = "COLUMNS";
    }
    char export_names[VGPURUN_MAX_EXPORTS][128];
    for (int i = 0; i < opts->export_count; i++) {
        const char *item = opts->exports[i], *eq = strchr(item, '=');
        char *name = export_names[i];
        snprintf(name, sizeof export_names[i], "%.*s", (int)strcspn(item, "="), item);
        if (!eq && !env_has_(facts, name))
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "-x %s: %s is not set here (give -x %s=VALUE)", item, name, name);
        if (eq && add_env_(plan, name, eq + 1))
            goto no_memory;
        if (set_count == VGPURUN_MAX_ENV)
            goto no_memory;
        set_names[set_count++] = name;
    }

    snprintf(num, sizeof num, "%d", np);
    if (srun) {
        // --export=ALL: the variables above reach the ranks even when the
        // batch script was submitted with --export=NONE.
        if (add_arg_(plan, "srun") || add_arg_(plan, "--mpi=pmix") || add_arg_(plan, "--export=ALL") ||
            add_arg_(plan, "-n") || add_arg_(plan, num))
            goto no_memory;
        note_(plan, "inside Slurm job: srun --mpi=pmix (Slurm places and binds the ranks)");
    } else {
        if (add_arg_(plan, "mpirun") || add_arg_(plan, "-np") || add_arg_(plan, num))
            goto no_memory;
        // mpirun -q drops its 10-line reports after every non-zero exit; the
        // ranks have said why. On one host what -q would hide is checked
        // before the start (program, slots, binding) or told by vgpurun
        // after it (a rank killed by a signal); across hosts the reports name
        // the host, so they stay.
        plan->quiet_mpirun = !opts->verbose && !facts->keep_mpirun_reports && facts->host_count <= 1;
        if (plan->quiet_mpirun && add_arg_(plan, "-q"))
            goto no_memory;
        if (opts->hostfile && (add_arg_(plan, "--hostfile") || add_arg_(plan, opts->hostfile)))
            goto no_memory;
        if (opts->hosts && (add_arg_(plan, "-H") || add_arg_(plan, opts->hosts)))
            goto no_memory;
        if (facts->is_root && !facts->root_allowed_by_env) {
            if (add_arg_(plan, "--allow-run-as-root"))
                goto no_memory;
            note_(plan, "--allow-run-as-root: running as root");
        }
        // Open MPI 4's mpirun will not start without an ssh or rsh on the
        // PATH, even when every rank is local (containers often have none).
        if (!facts->have_rsh_agent && facts->host_count <= 1 &&
            !env_has_(facts, "OMPI_MCA_plm_rsh_agent")) {
            if (add_env_(plan, "OMPI_MCA_plm_rsh_agent", "false")) // mpirun's own: no -x
                goto no_memory;
            note_(plan, "no ssh or rsh here: OMPI_MCA_plm_rsh_agent=false (one host needs none)");
        }
        int slots = facts->host_count > 0 ? facts->slot_count : facts->cores;
        int over = slots > 0 && np > slots;
        if (over) {
            if (add_arg_(plan, "--oversubscribe"))
                goto no_memory;
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
            goto no_memory;
        note_(plan, "binding: --map-by slot --bind-to %s",
              over ? "none (oversubscribed)"
                   : "numa:overload-allowed (a host may have more slots than cores)");
        if (add_exports_(plan, facts, set_names, set_count))
            goto no_memory;
    }
    for (int i = 0; i < opts->launcher_arg_count; i++)
        if (add_arg_(plan, opts->launcher_args[i]))
            goto no_memory;
    if (facts->rank_shim && add_arg_(plan, facts->rank_shim))
        goto no_memory;
    for (int i = 0; i < opts->program_count; i++)
        if (add_arg_(plan, opts->program[i]))
            goto no_memory;
    plan->argv[plan->argc] = NULL;
    return VGPU_OK;
no_memory:
    return util_errorf(err, err_bytes, VGPU_ECONFIG,
                       "the command is too long (at most %d arguments)", VGPURUN_MAX_ARGS);
}

int vgpurun_slurm_tasks_on_node(const char *list, int node)
{
    if (!list || node < 0)
        return -1;
    const char *p = list;
    int first = 0; // the first node of the current group
    while (*p) {
        char *end;
        long tasks = strtol(p, &end, 10);
        if (end == p || tasks < 0)
            return -1;
        long repeat = 1;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x')
                return -1;
            repeat = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || repeat < 1)
                return -1;
            p = end + 1;
        }
        if (node < first + repeat)
            return (int)tasks;
        first += (int)repeat;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return -1;
}

// A non-negative decimal from the environment, or -1.
static int env_count_(vgpurun_getenv_fn get, const char *name)
{
    const char *v = get(name);
    char *end;
    long n = v && *v ? strtol(v, &end, 10) : -1;
    return v && *v && !*end && n >= 0 && n <= 1 << 24 ? (int)n : -1;
}

int vgpurun_rank_identity(vgpurun_getenv_fn get, struct vgpurun_rank_id *id, char *err,
                          size_t err_bytes)
{
    *id = (struct vgpurun_rank_id){-1, -1, -1, -1, 0};
    if (get("OMPI_COMM_WORLD_RANK")) {
        id->rank = env_count_(get, "OMPI_COMM_WORLD_RANK");
        id->world_size = env_count_(get, "OMPI_COMM_WORLD_SIZE");
        id->local_rank = env_count_(get, "OMPI_COMM_WORLD_LOCAL_RANK");
        id->local_size = env_count_(get, "OMPI_COMM_WORLD_LOCAL_SIZE");
        id->node = 0; // mpirun places by host itself; the shim needs no index
    } else if (get("SLURM_PROCID")) {
        id->rank = env_count_(get, "SLURM_PROCID");
        id->world_size = env_count_(get, "SLURM_NTASKS");
        id->local_rank = env_count_(get, "SLURM_LOCALID");
        id->node = env_count_(get, "SLURM_NODEID");
        const char *list = get("SLURM_STEP_TASKS_PER_NODE");
        if (!list)
            list = get("SLURM_TASKS_PER_NODE");
        id->local_size = vgpurun_slurm_tasks_on_node(list, id->node);
    } else {
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "not started by a launcher (no OMPI_COMM_WORLD_RANK or SLURM_PROCID): "
                           "run it through vgpurun");
    }
    if (id->rank < 0 || id->world_size < 1 || id->rank >= id->world_size || id->local_rank < 0 ||
        id->local_size < 1 || id->local_rank >= id->local_size || id->node < 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "the launcher's variables do not add up: rank %d of %d, local rank "
                           "%d of %d on node %d",
                           id->rank, id->world_size, id->local_rank, id->local_size, id->node);
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
