// vgpurun_facts.h: what vgpurun finds out about where it runs (the machine,
// the environment, the hosts of a hostfile or -H list) for vgpurun_plan_build.
#ifndef VGPU_VGPURUN_FACTS_H
#define VGPU_VGPURUN_FACTS_H

#include "vgpurun_plan.h"

#define VGPURUN_MAX_GPU_UUIDS 64

// What the facts point into, owned; vgpurun_facts_free releases it.
struct vgpurun_facts_store {
    char host[256];                     // this host's name
    char master[256];                   // rank 0's host, as the ranks reach it
    char **env_names;                   // the environment's names, NULL-terminated
    char *uuids[VGPURUN_MAX_GPU_UUIDS]; // with --mps: the GPUs' UUIDs (nvidia-smi)
    char *rank_shim;                    // vgpurun-rank beside vgpurun, or NULL
};

// Fills facts for opts, its strings held in store. Reads and counts the
// hostfile or -H list and checks that every host resolves. Returns VGPU_OK,
// or a negative status with the reason printed ("vgpurun: ..."). The caller
// calls vgpurun_facts_free either way.
int vgpurun_facts_gather(const struct vgpurun_options *opts, struct vgpurun_facts *facts,
                         struct vgpurun_facts_store *store);
void vgpurun_facts_free(struct vgpurun_facts_store *store);

// Whether PATH has an executable `program`, as the shell looks it up.
int vgpurun_on_path(const char *program);

#endif
