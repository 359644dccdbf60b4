// vgpurun_mps_choice.c: whether vgpurun starts a job-private MPS daemon, and
// why, from the options and this host's GPUs (pure: unit-tested as is).
#include <stdio.h>
#include <string.h>

#include "gpu_driver.h"
#include "status.h"
#include "util.h"
#include "vgpurun_plan.h"

// --mps where it cannot work: refused, as before automatic MPS.
static int check_forced_(const struct vgpurun_facts *facts, char *err, size_t err_bytes)
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
    if (facts->host_count > 1 || facts->slurm_nnodes > 1)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "--mps starts the MPS daemon on this host only, and the job spans %d hosts; "
                           "start MPS on every node in the batch script instead",
                           facts->host_count > 1 ? facts->host_count : facts->slurm_nnodes);
    return VGPU_OK;
}

static int mode_(const struct vgpurun_facts *facts, int gpu)
{
    return facts->gpu_modes ? facts->gpu_modes[gpu] : GPU_MODE_DEFAULT;
}

// The binding policy's placement of np ranks on this host's GPUs
// (binding_place's rule: PROHIBITED GPUs left out, ranks in order fill the
// others, per_gpu each, default an even split): ranks[g] for each GPU.
static void place_(const struct vgpurun_facts *facts, int np, int per_gpu, int *ranks)
{
    int usable[GPU_MAX], nu = 0;
    for (int g = 0; g < facts->gpu_count && g < GPU_MAX; g++) {
        ranks[g] = 0;
        if (mode_(facts, g) != GPU_MODE_PROHIBITED)
            usable[nu++] = g;
    }
    if (nu == 0)
        return;
    const int per = per_gpu > 0 ? per_gpu : (np + nu - 1) / nu;
    for (int r = 0; r < np && r / per < nu; r++)
        ranks[usable[r / per]]++;
}

// "GPU 0" or "GPUs 0,1" for the GPUs holding more than one rank.
static void shared_names_(const int *ranks, int n, char *buf, size_t bytes)
{
    int count = 0;
    for (int g = 0; g < n; g++)
        count += ranks[g] > 1;
    size_t used = (size_t)snprintf(buf, bytes, "GPU%s ", count > 1 ? "s" : "");
    for (int g = 0, k = 0; g < n && used < bytes; g++)
        if (ranks[g] > 1)
            used += (size_t)snprintf(buf + used, bytes - used, "%s%d", k++ ? "," : "", g);
}

// Each rank's pinned memory limit: its cap and the room beside it, or with
// no cap given its equal share of the smallest shared GPU (a plain program
// pinned to one GPU sees it as device 0, so every device gets the same
// value). 0 when neither is known.
static uint64_t limit_(const struct vgpurun_options *opts, const struct vgpurun_facts *facts,
                       const int *ranks)
{
    if (opts->mem_per_rank)
        return opts->mem_per_rank_bytes + VGPURUN_MPS_HEADROOM_BYTES;
    if (!facts->gpu_bytes)
        return 0;
    uint64_t least = 0;
    for (int g = 0; g < facts->gpu_count && g < GPU_MAX; g++) {
        if (ranks[g] < 1 || (ranks[g] < 2 && opts->mps == 0))
            continue;
        const uint64_t share = facts->gpu_bytes[g] / (uint64_t)ranks[g] >> 20 << 20;
        if (least == 0 || share < least)
            least = share;
    }
    return least;
}

#define WHY_(...) snprintf(out->why, sizeof out->why, __VA_ARGS__)

int vgpurun_mps_decide(const struct vgpurun_options *opts, const struct vgpurun_facts *facts,
                       int np, struct vgpurun_mps_choice *out, char *err, size_t err_bytes)
{
    memset(out, 0, sizeof *out);
    if (opts->mps && opts->no_mps)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "--mps and --no-mps: choose one");
    if (opts->mps && check_forced_(facts, err, err_bytes) < 0)
        return VGPU_ECONFIG;
    if (facts->gpu_count == 0)
        return VGPU_OK; // no GPU here: nothing to share, nothing to say
    int ranks[GPU_MAX];
    place_(facts, np, opts->ranks_per_gpu ? opts->ranks_per_gpu : facts->ranks_per_gpu_env, ranks);
    int first_shared = -1;
    for (int g = 0; g < facts->gpu_count && g < GPU_MAX; g++)
        if (ranks[g] > 1) {
            out->shared_ranks += ranks[g];
            first_shared = first_shared < 0 ? g : first_shared;
        }
    char names[160];
    shared_names_(ranks, facts->gpu_count < GPU_MAX ? facts->gpu_count : GPU_MAX, names,
                  sizeof names);
    const int hosts = facts->host_count > 1 ? facts->host_count : facts->slurm_nnodes;
    // Ranks take turns unless MPS fronts the GPU: said. Several hosts: this
    // host's share of the ranks stands for each host's.
    out->loud = out->shared_ranks > 0 ||
                (hosts > 1 && (np + hosts - 1) / hosts > facts->gpu_count);
    if (opts->mps) {
        out->start = out->loud = 1;
        if (out->shared_ranks)
            WHY_("MPS: started for the job (--mps; %d ranks share %s)", out->shared_ranks, names);
        else
            WHY_("MPS: started for the job (--mps)");
    } else if (opts->no_mps) {
        WHY_("MPS: not started: --no-mps (ranks take turns on the GPU)");
    } else if (hosts > 1) {
        WHY_("MPS: not started: the job spans %d hosts, and vgpurun starts MPS on its own host "
             "only (start it on each node, nvidia-cuda-mps-control -d): ranks sharing a GPU take "
             "turns", hosts);
    } else if (out->shared_ranks == 0) {
        WHY_("MPS: not started: one rank a GPU");
    } else if (facts->mps_server) {
        WHY_("MPS: not started: an MPS server already runs (%s)", facts->mps_server);
    } else if (mode_(facts, first_shared) != GPU_MODE_DEFAULT) {
        WHY_("MPS: not started: GPU %d is in Exclusive_Process mode (one process may use it: "
             "--mps starts MPS there, or run one rank a GPU)", first_shared);
    } else if (!facts->have_mps_control && facts->gpus_simulated) {
        WHY_("MPS: not started: the GPUs are simulated and this host has no "
             "nvidia-cuda-mps-control (on a GPU host vgpurun would start it)");
    } else if (!facts->have_mps_control) {
        WHY_("MPS: not started: nvidia-cuda-mps-control not found: ranks take turns (install "
             "the CUDA driver's MPS tools)");
    } else {
        out->start = 1;
        WHY_("MPS: started for the job (%d ranks share %s)", out->shared_ranks, names);
    }
    if (out->start)
        out->limit_bytes = limit_(opts, facts, ranks);
    if (opts->sm_share && !out->start)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "--sm-share gives each rank a share of the SMs through MPS, which is not "
                           "started here (%s): add --mps",
                           out->why[0] ? out->why + strlen("MPS: not started: ") : "no GPU");
    return VGPU_OK;
}
