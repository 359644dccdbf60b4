// runtime.c: a rank's virtual GPU and communicator: device discovery shared
// by the host, binding, the device opened, the collective backend chosen and
// connected, the job table. (Joining the job: bootstrap.c; the control
// plane: control.c.)
#include "runtime_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binding.h"
#include "comm_internal.h"
#include "device_internal.h"
#include "env.h"
#include "flight.h"
#include "flight_job.h"
#include "gpu_driver.h"
#include "job_table.h"
#include "log.h"
#include "startup_watch.h"
#include "trace.h"
#include "util.h"

#define MAX_DEVICES 64
#define CUDA_CONTEXT_OVERHEAD BINDING_CUDA_CONTEXT_BYTES
#define NCCL_BUFFER_BUDGET BINDING_NCCL_BUFFER_BYTES


// What one rank found: its own visible devices, as it sees them (its
// CUDA_VISIBLE_DEVICES, a scheduler's per-task binding, one MIG instance).
struct scan_ {
    int rc;        // 0, or why its GPUs cannot be used (msg says)
    int count;     // GPUs it sees
    int mps;       // it is an MPS client
    char msg[256];
    struct device_info devs[MAX_DEVICES];
};

// The host's devices: every rank scans what it sees, the host's ranks share
// their lists, and the union (by UUID, in the order the ranks list them,
// PROHIBITED devices left out) is what binding places ranks on, with each
// rank's view as a mask. Fills host->devs/ndev/visible/mps and *mine (this
// rank's scan). Returns 0 (GPUs), 1 (no GPU: the CPU stands in), 2 (a kind
// that is not a GPU asked for: the CPU), or a negative status with a message
// in err (the same on every rank of the host).
struct host_devices {
    struct device_info devs[MAX_DEVICES];
    int ndev;
    uint64_t *visible; // [local_size]
    int mps;
};

// The GPU kind a job looks for: the one asked for, or for devices.kind =
// auto the registry's first GPU kind (CUDA).
static enum device_kind gpu_kind_(const struct runtime *rt)
{
    const enum device_kind want = rt->cfg.devices.kind;
    return want == DEVICE_KIND_AUTO ? device_kind_with(DEVICE_CAP_GPU) : want;
}

static int discover_(struct runtime *rt, struct host_devices *host, struct scan_ *mine, char *err,
                     size_t err_bytes)
{
    const enum device_kind want = rt->cfg.devices.kind, gpu = gpu_kind_(rt);
    memset(mine, 0, sizeof *mine);
    if (!(device_kind_caps(gpu) & DEVICE_CAP_GPU)) { // the host itself: each rank sees it alike
        int n = 0;
        int rc = device_discover(want == DEVICE_KIND_AUTO ? DEVICE_KIND_CPU : want, host->devs,
                                 MAX_DEVICES, &n, err, err_bytes);
        host->ndev = n;
        return rc < 0 ? rc : 2;
    }
    mine->rc = device_discover(gpu, mine->devs, MAX_DEVICES, &mine->count, mine->msg,
                               sizeof mine->msg);
    const struct gpu_driver *drv = gpu_driver();
    mine->mps = drv && drv->mps_active();
    struct scan_ *all = malloc((size_t)rt->local_size * sizeof *all);
    if (!all)
        return runtime_control_failed(rt, VGPU_ENOMEM, "out of memory for the host's device lists");
    int rc = runtime_ctl_gather(rt, mine, all, sizeof *mine, runtime_mpi_local(rt), rt->local_size);
    if (rc < 0) // the gather may still be in flight: its buffers stay (the caller's too)
        return rc;
    int seeing = 0;
    for (int q = 0; q < rt->local_size && rc == 0; q++) {
        if (all[q].rc == VGPU_EUNSUPPORTED)
            continue; // no GPU support built: as no GPU
        if (all[q].rc < 0)
            rc = util_errorf(err, err_bytes, all[q].rc, "local rank %d: %s", q, all[q].msg);
        seeing += all[q].count > 0;
        host->mps |= all[q].mps;
    }
    host->ndev = 0;
    for (int q = 0; q < rt->local_size && rc == 0; q++) {
        host->visible[q] = 0;
        for (int i = 0; i < all[q].count; i++) {
            const struct device_info *d = &all[q].devs[i];
            if (d->compute_mode == GPU_MODE_PROHIBITED) {
                if (q == 0 && rt->local_rank == 0)
                    log_warn("%s (%s) is in PROHIBITED compute mode: left out", d->uuid, d->name);
                continue; // as good as absent
            }
            int u = 0;
            while (u < host->ndev && strcmp(host->devs[u].uuid, d->uuid) != 0)
                u++;
            if (u == host->ndev && host->ndev < MAX_DEVICES)
                host->devs[host->ndev++] = *d;
            if (u < 64)
                host->visible[q] |= 1ull << u;
        }
    }
    if (rc == 0 && seeing && seeing < rt->local_size)
        rc = util_errorf(err, err_bytes, VGPU_ECONFIG,
                         "%d of the %d ranks on %s see no GPU while the others do (each rank's "
                         "CUDA_VISIBLE_DEVICES, or the scheduler's per-task binding, decides): "
                         "give every rank a GPU, or set devices.kind = cpu",
                         rt->local_size - seeing, rt->local_size, rt->host);
    const int prohibited_only = rc == 0 && seeing && host->ndev == 0;
    free(all);
    if (rc < 0)
        return rc;
    if (host->ndev > 0) {
        for (int i = 0; i < host->ndev; i++)
            host->devs[i].index = i; // the host's numbering; ordinals stay per rank
        return 0;
    }
    const char *name = device_kind_name(gpu), *label = device_kind_label(gpu);
    if (want != DEVICE_KIND_AUTO && mine->rc == VGPU_EUNSUPPORTED)
        return util_errorf(err, err_bytes, VGPU_ENODEV,
                           "devices.kind = %s, but this vgpu was built without %s (rebuild "
                           "with -DVGPU_%s=ON) or use devices.kind = auto|cpu",
                           name, label, label);
    if (want != DEVICE_KIND_AUTO && prohibited_only)
        return util_errorf(err, err_bytes, VGPU_ENODEV,
                           "devices.kind = %s, but every GPU on %s is in PROHIBITED compute "
                           "mode (nvidia-smi -q | grep 'Compute Mode'); use devices.kind = auto|cpu",
                           name, rt->host);
    if (want != DEVICE_KIND_AUTO)
        return util_errorf(err, err_bytes, VGPU_ENODEV,
                           "devices.kind = %s, but no %s GPU is visible on %s "
                           "(%s_VISIBLE_DEVICES, driver?); use devices.kind = auto|cpu",
                           name, label, rt->host, label);
    int n = 0;
    rc = device_discover(DEVICE_KIND_CPU, host->devs, MAX_DEVICES, &n, err, err_bytes);
    host->ndev = n;
    for (int q = 0; q < rt->local_size; q++)
        host->visible[q] = 1;
    return rc < 0 ? rc : 1;
}

// rank 0's job table (job_table.h), from the rows of every rank.
static void print_job_table_(const struct runtime *rt, const struct job_row *rows,
                             const char *backend, uint64_t need_bytes)
{
    char from_env[512];
    config_describe_env(from_env, sizeof from_env);
    const struct job_table_facts facts = {.hosts = rt->node_count,
                                          .simulated = rt->simulated,
                                          .backend = backend,
                                          .backend_reason = rt->backend_reason,
                                          .need_bytes = need_bytes,
                                          .from_env = from_env};
    job_table_print(stdout, rows, rt->size, &facts);
}

// This rank's view of what decides NCCL; the job's is the minimum of every
// rank's (ctl_all_reduce_ over NCCL_FACTS_INTS_ ints).
struct nccl_facts_ {
    int built;          // this binary has the NCCL backend
    int version;        // NCCL loaded here (0 = none)
    int multi_rank_env; // NCCL_MULTI_RANK_GPU_ENABLE=1
    int max_ctas_set;   // NCCL_MAX_CTAS is set
};
#define NCCL_FACTS_INTS_ ((int)(sizeof(struct nccl_facts_) / sizeof(int)))

static struct nccl_facts_ nccl_facts_local_(void)
{
    const int test_version = env_get()->test_nccl_version; // VGPU_TEST_NCCL_VERSION
    struct nccl_facts_ f = {
        .version = test_version >= 0 ? test_version : comm_nccl_runtime_version(),
        .multi_rank_env = env_get()->nccl_multi_rank_gpu,
        .max_ctas_set = getenv("NCCL_MAX_CTAS") != NULL,
        .built = comm_nccl_backend() != NULL,
    };
    return f;
}

// Where the ranks' NCCL differs (missing or older on some), the backend
// line names a rank with the lowest, on which the job's choice turned.
static void name_rank_without_nccl_(const struct job_row *rows, int n,
                                    const struct comm_choice_facts *f, char *why, size_t why_bytes)
{
    if (!f->nccl_built || !f->all_cuda || f->mig)
        return;
    int lowest = 0, others = 0, highest = 0;
    for (int r = 0; r < n; r++) {
        if (rows[r].nccl_version < rows[lowest].nccl_version)
            lowest = r;
        highest = rows[r].nccl_version > highest ? rows[r].nccl_version : highest;
    }
    for (int r = 0; r < n; r++)
        others += rows[r].nccl_version == rows[lowest].nccl_version;
    const size_t len = strlen(why);
    if (highest == rows[lowest].nccl_version || len >= why_bytes)
        return; // every rank alike: the reason says it all
    snprintf(why + len, why_bytes - len, " on %d of %d ranks, e.g. rank %d (host %s; NCCL %d.%d "
             "elsewhere)", others, n, lowest, rows[lowest].host, highest / 10000,
             highest % 10000 / 100);
}

// Every rank reports its status; all return the worst, so no rank goes on
// alone (a failed rank's message is already printed by that rank).
// (A control-plane failure is the verdict too: libvgpu returns it.)
static int agree_worst_(struct runtime *rt, int rc)
{
    if (runtime_mpi_stuck(rt)) // a wait failed: no rank can be asked again
        return rc < 0 ? rc : VGPU_ECOMM;
    int worst = 0;
    const int ctl = runtime_ctl_agree_min(rt, rc < 0 ? rc : 0, &worst);
    return ctl < 0 ? ctl : worst;
}

// What binding decided for this rank, carried from discovery to the
// connection.
struct placement_ {
    struct binding mine;    // its device (the host's numbering), ranks on it, its cap
    struct device_info dev; // that device, with this rank's own ordinal for it
    int gpu;                // GPUs (not the CPU standing in)
    int host_mps;           // the host's GPUs run under MPS
    int host_ndev;          // devices on the host
};

// The job's NCCL facts (every rank's minimum), agreed before anything
// depends on them (the caps leave NCCL's room; the backend choice): a rank
// that differs (NCCL missing on some nodes, a variable set on one) must not
// build another backend than its peers and hang in set-up. After a failed
// wait in discovery MPI is left alone. The facts are static: a wait that
// times out leaves its reduction in flight, and a late rank may still write.
static int agree_nccl_facts_(struct runtime *rt, int discovered, const struct nccl_facts_ *here,
                             const struct nccl_facts_ **job)
{
    static struct nccl_facts_ nf;
    nf = *here;
    *job = &nf;
    if (discovered < 0 && runtime_mpi_stuck(rt))
        return discovered;
    return runtime_ctl_all_reduce(rt, MPI_IN_PLACE, &nf, NCCL_FACTS_INTS_, MPI_INT, MPI_MIN,
                                  sizeof nf, "agreement (NCCL)");
}

// Ranks a GPU NCCL may run with here (0: not at all), so the automatic caps
// leave its buffers room. This host's view: MIG here rules it out.
static int nccl_ranks_here_(const struct runtime *rt, const struct runtime_open_args *args,
                            const struct host_devices *host, const struct nccl_facts_ *nf,
                            int gpu)
{
    const int requested = rt->cfg.comm.backend;
    if (requested != BACKEND_AUTO && requested != BACKEND_NCCL)
        return 0;
    int host_mig = 0;
    for (int i = 0; i < host->ndev; i++)
        host_mig |= host->devs[i].mig;
    const enum device_kind kind = host->ndev > 0 ? host->devs[0].kind : DEVICE_KIND_AUTO;
    const int cuda = gpu && (device_kind_caps(kind) & DEVICE_CAP_CUDA);
    const struct comm_choice_facts may = {.nccl_built = nf->built, .nccl_version = nf->version,
                                          .all_cuda = cuda, .multi_rank_env = nf->multi_rank_env,
                                          .max_ctas_set = nf->max_ctas_set, .mps = host->mps,
                                          .mig = host_mig, .all_to_all = args->tree_all_reduce,
                                          .staged = gpu && !device_kind_host_addressable(kind)};
    return comm_nccl_ranks_per_gpu(&may);
}

// Every rank of the host binds from the same inputs; this rank takes its
// own entry. Returns 0 or a status with err set.
static int bind_(const struct runtime *rt, const struct runtime_open_args *args,
                 const struct host_devices *host, int gpu, int nccl_ranks, struct binding *mine,
                 char *err, size_t err_bytes)
{
    const struct config *cfg = &rt->cfg;
    struct binding *bind = calloc((size_t)rt->local_size, sizeof *bind);
    if (!bind)
        return util_errorf(err, err_bytes, VGPU_ENOMEM, "out of memory for the binding");
    struct binding_request req = {
        .local_size = rt->local_size,
        .ndevices = host->ndev,
        .devices = host->devs,
        .ranks_per_device = cfg->devices.ranks_per_device,
        .memory_limit = cfg->devices.memory_limit,
        .memory_fraction = cfg->devices.memory_fraction,
        .map = cfg->devices.map.count ? cfg->devices.map.v : NULL,
        .map_count = cfg->devices.map.count,
        .overhead_bytes = gpu ? CUDA_CONTEXT_OVERHEAD : 0,
        .backend_extra_bytes = nccl_ranks ? NCCL_BUFFER_BUDGET : 0,
        .backend_max_ranks = nccl_ranks,
        .min_bytes = args->min_bytes,
        .visible = gpu ? host->visible : NULL,
        .mps = host->mps,
    };
    const int rc = binding_compute(&req, bind, err, err_bytes);
    if (rc == 0)
        *mine = bind[rt->local_rank];
    free(bind);
    return rc;
}

// 1. Discover (every rank what it sees; the host shares it) and bind (every
// rank of a host from the same inputs). Fills *pl and the job's NCCL facts.
static int place_(struct runtime *rt, const struct runtime_open_args *args, struct placement_ *pl,
                  const struct nccl_facts_ *here, const struct nccl_facts_ **nf)
{
    char err[1024] = "";
    runtime_stage(rt, RUNTIME_STAGE_DEVICES);
    struct host_devices *host = calloc(1, sizeof *host);
    struct scan_ *scan = calloc(1, sizeof *scan);
    uint64_t *visible = calloc((size_t)rt->local_size, sizeof *visible);
    if (!host || !scan || !visible) {
        free(host);
        free(scan);
        free(visible);
        return runtime_control_failed(rt, VGPU_ENOMEM, "out of memory for device discovery");
    }
    host->visible = visible;
    int rc = discover_(rt, host, scan, err, sizeof err);
    if (rc == 1 && rt->rank == 0 && !args->quiet)
        printf("vgpu: no %s GPU visible: using CPU-simulated virtual GPUs\n",
               device_kind_label(gpu_kind_(rt)));
    const int nf_rc = agree_nccl_facts_(rt, rc, here, nf);
    if (nf_rc < 0) { // MPI is left alone now; scan may be a pending gather's buffer
        free(host);
        free(visible);
        return nf_rc;
    }
    pl->gpu = rc == 0;
    // Free memory no one could tell (no NVML): said once a host.
    for (int i = 0; pl->gpu && rt->local_rank == 0 && i < host->ndev; i++)
        if (host->devs[i].free_unknown) {
            log_warn("NVML (libnvidia-ml.so.1) is not available: free GPU memory is unknown, so "
                     "the caps assume each GPU's whole memory is free");
            break;
        }
    if (rc >= 0)
        rc = bind_(rt, args, host, pl->gpu, nccl_ranks_here_(rt, args, host, *nf, pl->gpu),
                   &pl->mine, err, sizeof err);
    if (rc >= 0) {
        // This rank opens the bound device by its own ordinal for it.
        pl->dev = host->devs[pl->mine.device];
        for (int i = 0; pl->gpu && i < scan->count; i++)
            if (!strcmp(scan->devs[i].uuid, pl->dev.uuid))
                pl->dev.index = scan->devs[i].index;
        pl->host_mps = host->mps && pl->gpu;
        pl->host_ndev = host->ndev;
    } else if (rt->local_rank == 0 && err[0]) {
        log_error("%s", err);
    }
    free(host);
    free(scan);
    free(visible);
    if (rc < 0)
        return agree_worst_(rt, rc);
    // CUDA shows a process one MIG instance: ranks that were given none of
    // their own all land on the first one.
    if (pl->gpu && pl->dev.mig && pl->mine.ranks_on_device > 1 && rt->local_rank == 0 &&
        !args->quiet)
        log_warn("%d ranks share MIG instance %s: CUDA shows a process one MIG instance, so "
                 "give each rank its own (CUDA_VISIBLE_DEVICES=MIG-... a rank, as Slurm's MIG "
                 "gres does) to use the others",
                 pl->mine.ranks_on_device, pl->dev.uuid);
    rt->simulated = pl->dev.simulated;
    return 0;
}

// Ranks of the job on this rank's machine: those whose kernel boot id is
// this one's (network-namespace hosts and containers of one machine share
// its cores; on a real cluster they are the host's ranks).
static int machine_ranks_(struct runtime *rt, int *out)
{
    char mine[64] = "";
    util_machine_id(mine, sizeof mine, rt->host);
    char *all = malloc((size_t)rt->size * sizeof mine);
    if (!all)
        return runtime_control_failed(rt, VGPU_ENOMEM, "out of memory for the machines' ids");
    const int rc = runtime_ctl_gather(rt, mine, all, sizeof mine, runtime_mpi_world(rt), rt->size);
    int n = 0;
    for (int r = 0; rc == 0 && r < rt->size; r++)
        n += strcmp(all + (size_t)r * sizeof mine, mine) == 0;
    free(all);
    *out = n > 0 ? n : 1;
    return rc;
}

// 2. This rank's virtual GPU (none for a plan: it shows what would be opened).
static int open_device_(struct runtime *rt, const struct runtime_open_args *args,
                        const struct placement_ *pl, int plan_only)
{
    const struct config *cfg = &rt->cfg;
    long threads = cfg->devices.cpu_threads;
    if (args->one_blas_thread) {
        if (threads > 1 && rt->rank == 0)
            log_warn("devices.cpu_threads = %ld ignored: this job needs one BLAS thread "
                     "(bitwise-reproducible GEMMs)", threads);
        threads = 1;
    } else if (threads <= 0) { // every rank takes this branch (the agreed config)
        int sharing = 1;
        const int rc = machine_ranks_(rt, &sharing);
        if (rc < 0)
            return rc;
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores / sharing > 1 ? cores / sharing : 1;
    }
    rt->blas_threads = (int)threads;
    int rc = plan_only ? 0
                       : device_open(&rt->dev, &pl->dev, rt->rank, rt->host, pl->mine.cap_bytes,
                                     (int)threads);
    if ((rc = agree_worst_(rt, rc)) < 0) {
        if (rt->dev.ops)
            device_close(&rt->dev);
        // A cap the device cannot hold (the rank said how much it has) is
        // the configuration's to change: devices.memory_limit or the ranks.
        return rc == VGPU_EDEVMEM ? VGPU_ECONFIG : rc;
    }
    return 0;
}

// Every rank's row of the job table, gathered (*rows is freed by the caller).
static int gather_rows_(struct runtime *rt, const struct placement_ *pl,
                        const struct nccl_facts_ *here, struct job_row **rows)
{
    struct job_row row = {.rank = rt->rank, .local_rank = rt->local_rank,
                          .node_index = rt->node_index, .device_index = pl->mine.device,
                          .ranks_on_device = pl->mine.ranks_on_device,
                          .cap_bytes = pl->mine.cap_bytes / ARENA_ALIGN * ARENA_ALIGN,
                          .mps = pl->host_mps && pl->dev.mps, .mig = pl->dev.mig,
                          .nccl_version = here->version,
                          .host_devices = pl->host_ndev,
                          .kind = pl->dev.kind, .blas_threads = rt->blas_threads};
    snprintf(row.host, sizeof row.host, "%s", rt->host);
    snprintf(row.pci_bus_id, sizeof row.pci_bus_id, "%s", pl->dev.pci_bus_id);
    snprintf(row.name, sizeof row.name, "%s", pl->dev.name);
    snprintf(row.uuid, sizeof row.uuid, "%s", pl->dev.uuid);
    *rows = malloc((size_t)rt->size * sizeof **rows);
    if (!*rows)
        return runtime_control_failed(rt, VGPU_ENOMEM, "out of memory for the job table");
    return runtime_ctl_gather(rt, &row, *rows, sizeof row, runtime_mpi_world(rt), rt->size);
}

// NCCL allocates its buffers after the arena and outside the cap: an
// explicit cap near free memory would pass binding and then fail in
// ncclCommInitRank. The room is checked now, with the numbers; the first
// rank whose device is short says so, for all.
static int check_nccl_room_(struct runtime *rt, const struct placement_ *pl)
{
    char err[1024] = "";
    const struct binding nb = {.device = pl->mine.device,
                               .ranks_on_device = pl->mine.ranks_on_device,
                               .cap_bytes = pl->mine.cap_bytes};
    const int rc = binding_check_headroom(&nb, &pl->dev, CUDA_CONTEXT_OVERHEAD, NCCL_BUFFER_BUDGET,
                                          "NCCL buffers", err, sizeof err);
    int first = INT_MAX;
    const int ctl = runtime_ctl_agree_min(rt, rc < 0 ? rt->rank : INT_MAX, &first);
    if (ctl == 0 && first == rt->rank)
        log_error("%s", err);
    return ctl < 0 ? ctl : agree_worst_(rt, rc);
}

// 3. Who shares a physical device decides the collective backend (*chosen,
// the reason in rt->backend_reason), from every rank's row.
static int choose_backend_(struct runtime *rt, const struct runtime_open_args *args,
                           const struct placement_ *pl, const struct nccl_facts_ *nf,
                           const struct job_row *rows, const char **chosen)
{
    rt->physical_devices = job_table_count_devices(rows, rt->size, 1);
    struct comm_choice_facts facts = {
        .nccl_built = nf->built,
        .nccl_version = nf->version,
        .all_cuda = 1,
        .max_ranks_per_gpu = 1,
        .multi_rank_env = nf->multi_rank_env,
        .max_ctas_set = nf->max_ctas_set,
        .all_to_all = args->tree_all_reduce,
    };
    for (int r = 0; r < rt->size; r++) {
        facts.all_cuda &= (device_kind_caps(rows[r].kind) & DEVICE_CAP_CUDA) != 0;
        facts.max_ranks_per_gpu = rows[r].ranks_on_device > facts.max_ranks_per_gpu
                                      ? rows[r].ranks_on_device
                                      : facts.max_ranks_per_gpu;
        facts.mps |= rows[r].mps;
        facts.mig |= rows[r].mig;
        facts.staged |= !device_kind_host_addressable(rows[r].kind);
    }
    facts.staged |= env_get()->ring_staging == 1; // the same on every rank: launchers export it
    int rc = comm_choose_backend(config_enum_name("comm", "backend", rt->cfg.comm.backend), &facts,
                                 chosen, rt->backend_reason, sizeof rt->backend_reason);
    if (rc < 0 || strcmp(*chosen, "nccl") != 0) // NCCL not taken: maybe for one rank's NCCL
        name_rank_without_nccl_(rows, rt->size, &facts, rt->backend_reason,
                                sizeof rt->backend_reason);
    if (rc < 0) {
        if (rt->rank == 0)
            log_error("%s", rt->backend_reason); // names comm.backend itself
        return agree_worst_(rt, rc);
    }
    return strcmp(*chosen, "nccl") == 0 ? check_nccl_room_(rt, pl) : 0;
}

// 4. Connect. Same-host peers map each other's arenas (memfds, no names:
// shm_share.h), so no death, here or later, leaves memory behind.
static int connect_(struct runtime *rt, const struct runtime_open_args *args, const char *chosen)
{
    // Simulated GPUs do their math on the CPU: NCCL cannot drive them.
    if (rt->simulated && !strcmp(chosen, "nccl")) {
        size_t len = strlen(rt->backend_reason);
        snprintf(rt->backend_reason + len, sizeof rt->backend_reason - len,
                 "; the GPUs are simulated, so the ring stands in for NCCL");
        chosen = "ring";
    }
    runtime_stage(rt, RUNTIME_STAGE_CONNECT);
    struct comm_args cargs = {
        .mpi_comm = runtime_mpi_world(rt),
        .dev = &rt->dev,
        .timeout_s = rt->cfg.comm.timeout_s,
        .slice_bytes = rt->cfg.comm.slice_bytes,
        .largest_bytes = args->largest_collective_bytes,
        .node_index = rt->node_index,
        .host = rt->host,
    };
    int rc = comm_create(&rt->comm, comm_find_ops(chosen), &cargs);
    if (rc == VGPU_ETIMEOUT) // a set-up wait failed: no rank can be asked again
        runtime_mpi.stuck = 1;
    rc = agree_worst_(rt, rc);
    if (rc < 0) {
        if (rt->rank == 0)
            log_error("could not connect the %s communicator", chosen);
        comm_destroy(rt->comm);
        rt->comm = NULL;
    } else if (!strncmp(comm_algo_name(rt->comm, 8), "device ", 7)) {
        size_t len = strlen(rt->backend_reason);
        snprintf(rt->backend_reason + len, sizeof rt->backend_reason - len,
                 "; every rank shares one device: the collectives stay on it, one kernel a call "
                 "(VGPU_DEVCOLL)");
    }
    return rc;
}

int runtime_open(struct runtime *rt, const struct runtime_open_args *args)
{
    if (runtime_mpi_stuck(rt)) // a wait failed before: no rank can be asked again
        return VGPU_ECOMM;
    const struct nccl_facts_ nccl_here = nccl_facts_local_(), *nf = NULL;
    struct placement_ pl = {0};
    // Every failure below was said where it happened (and agreed): no trace.
    int rc = place_(rt, args, &pl, &nccl_here, &nf);
    if (rc < 0)
        return rc;
    // A plan opens nothing: it shows what would be opened.
    const int plan_only = args->plan_only || env_get()->plan;
    if ((rc = open_device_(rt, args, &pl, plan_only)) < 0)
        return rc;
    struct job_row *rows = NULL;
    const char *chosen = NULL;
    rc = gather_rows_(rt, &pl, &nccl_here, &rows);
    if (rc == 0)
        rc = choose_backend_(rt, args, &pl, nf, rows, &chosen);
    if (rc == 0 && plan_only) {
        if (rt->rank == 0)
            print_job_table_(rt, rows, chosen, args->min_bytes);
        rt->planned = 1;
    } else if (rc == 0) {
        rc = connect_(rt, args, chosen);
        if (rc == 0 && rt->rank == 0 && !args->quiet)
            print_job_table_(rt, rows, comm_backend_name(rt->comm), args->min_bytes);
    }
    free(rows);
    if (rc < 0)
        device_close(&rt->dev);
    return rc;
}
