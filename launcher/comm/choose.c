// choose.c: the collective backend for comm.backend = auto, and why (the
// reason the job table prints), from facts every rank agreed on.
#include "comm_internal.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

static void why_(char *why, size_t why_bytes, const char *fmt, const char *arg)
{
    if (why && why_bytes)
        snprintf(why, why_bytes, fmt, arg);
}

// NCCL's documented limit on ranks a GPU under NCCL_MULTI_RANK_GPU_ENABLE=1:
// two by default; more only with MPS and NCCL_MAX_CTAS bounding each rank's
// share (running short of resources hangs, not fails).
#define NCCL_RANKS_PER_GPU_DEFAULT 2

// Whether NCCL may run ranks that share a GPU here; why not in why (left
// untouched when it may).
static int multi_rank_ok_(const struct comm_choice_facts *f, char *why, size_t why_bytes)
{
    if (f->nccl_version < 23000 || !f->multi_rank_env) {
        snprintf(why, why_bytes,
                 "ranks share a GPU, which NCCL %d.%d refuses (\"Duplicate GPU detected\"; NCCL >= "
                 "2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1 allows it)",
                 f->nccl_version / 10000, f->nccl_version % 10000 / 100);
        return 0;
    }
    if (f->max_ranks_per_gpu > NCCL_RANKS_PER_GPU_DEFAULT && !(f->mps && f->max_ctas_set)) {
        snprintf(why, why_bytes,
                 "%d ranks share a GPU; NCCL supports %d a GPU unless MPS runs and NCCL_MAX_CTAS "
                 "bounds each rank (else it can hang short of resources)",
                 f->max_ranks_per_gpu, NCCL_RANKS_PER_GPU_DEFAULT);
        return 0;
    }
    return 1;
}

int comm_nccl_ranks_per_gpu(const struct comm_choice_facts *f)
{
    if (!f->nccl_built || !f->all_cuda || f->mig || f->nccl_version < 21400 ||
        (f->all_to_all && f->staged))
        return 0;
    if (f->nccl_version < 23000 || !f->multi_rank_env)
        return 1;
    return f->mps && f->max_ctas_set ? INT_MAX : NCCL_RANKS_PER_GPU_DEFAULT;
}

int comm_choose_backend(const char *requested, const struct comm_choice_facts *f,
                        const char **chosen, char *why, size_t why_bytes)
{
    if (!chosen || !f)
        return VGPU_EINVAL;
    *chosen = NULL;
    char no[256] = ""; // why NCCL cannot run this job ("" = it can)
    const int shared = f->max_ranks_per_gpu > 1;
    // Deterministic mode exchanges partial sums with an all-to-all, which
    // the ring has on host windows only and NCCL not at all: where some
    // rank's memory is a GPU's (or staged) the mpi backend, through host
    // staging, is the one that can.
    const int host_exchange = f->all_to_all && f->staged;
    if (!f->nccl_built)
        snprintf(no, sizeof no, "this build has no NCCL backend");
    else if (!f->all_cuda)
        snprintf(no, sizeof no, "not every rank has a CUDA device");
    else if (f->mig)
        snprintf(no, sizeof no, "ranks run on MIG instances, which NCCL does not support "
                                "(NVIDIA/nccl#1716)");
    else if (f->nccl_version == 0)
        snprintf(no, sizeof no, "NCCL could not be loaded at run time (libnccl.so.2 not found)");
    else if (f->nccl_version < 21400)
        snprintf(no, sizeof no, "NCCL %d.%d found at run time, and vgpu needs >= 2.14 "
                                "(ncclCommInitRankConfig)",
                 f->nccl_version / 10000, f->nccl_version % 10000 / 100);
    else if (shared)
        multi_rank_ok_(f, no, sizeof no); // fills `no` when it is not
    if (host_exchange && (!requested || !*requested || !strcmp(requested, "auto"))) {
        *chosen = "mpi";
        why_(why, why_bytes, "%s", "deterministic mode on GPUs: its all-to-all goes through host "
                                   "memory, which the ring and NCCL do not do");
        return 0;
    }
    if (host_exchange && (!strcmp(requested, "ring") || !strcmp(requested, "nccl"))) {
        if (why && why_bytes)
            snprintf(why, why_bytes,
                     "comm.backend = %s has no all-to-all on GPU memory, which deterministic "
                     "mode needs: use comm.backend = mpi or auto",
                     requested);
        return VGPU_ECONFIG;
    }
    if (!requested || !*requested || strcmp(requested, "auto") == 0) {
        *chosen = no[0] ? "ring" : "nccl";
        if (no[0])
            why_(why, why_bytes, "%s", no);
        else
            why_(why, why_bytes, "%s", shared ? "ranks share a GPU under NCCL_MULTI_RANK_GPU_ENABLE=1, "
                                              "within NCCL's documented limits"
                                            : "every rank has its own GPU");
        return 0;
    }
    if (strcmp(requested, "ring") == 0 || strcmp(requested, "mpi") == 0) {
        *chosen = strcmp(requested, "ring") == 0 ? "ring" : "mpi";
        why_(why, why_bytes, "requested (comm.backend = %s)", requested);
        return 0;
    }
    if (strcmp(requested, "nccl") == 0) {
        if (no[0]) {
            if (why && why_bytes)
                snprintf(why, why_bytes, "comm.backend = nccl, but %s; use comm.backend = ring or auto",
                         no);
            return VGPU_ECONFIG;
        }
        *chosen = "nccl";
        why_(why, why_bytes, "requested (comm.backend = %s)", requested);
        return 0;
    }
    why_(why, why_bytes, "unknown comm.backend '%s' (expected auto, ring, mpi or nccl)", requested);
    return VGPU_ECONFIG;
}
