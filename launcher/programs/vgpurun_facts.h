// vgpurun_facts.h: what vgpurun finds out about where it runs (the machine,
// the environment, the hosts of a hostfile or -H list) for vgpurun_plan_build.
#ifndef VGPU_VGPURUN_FACTS_H
#define VGPU_VGPURUN_FACTS_H

#include "gpu_driver.h"
#include "vgpurun_plan.h"

#define VGPURUN_MAX_GPU_UUIDS 64

// What the facts point into, owned; vgpurun_facts_free releases it.
struct vgpurun_facts_store {
    char host[256];                     // this host's name
    char master[256];                   // rank 0's host, as the ranks reach it
    char **env_names;                   // the environment's names, NULL-terminated
    char *uuids[VGPURUN_MAX_GPU_UUIDS]; // the host's GPUs' UUIDs, PCI order (nvidia-smi, simulated)
    int uuid_count;
    int gpu_modes[GPU_MAX];             // the visible GPUs' compute modes
    uint64_t gpu_bytes[GPU_MAX];        // and sizes, bytes
    char *rank_shim;                    // vgpurun-rank beside vgpurun, or NULL
};

// Fills facts for opts, its strings held in store. Reads and counts the
// hostfile or -H list and checks that every host resolves. Returns VGPU_OK,
// or a negative status with the reason printed ("vgpurun: ..."). The caller
// calls vgpurun_facts_free either way.
int vgpurun_facts_gather(const struct vgpurun_options *opts, struct vgpurun_facts *facts,
                         struct vgpurun_facts_store *store);
void vgpurun_facts_free(struct vgpurun_facts_store *store);

// This host's GPUs as the ranks will see them (vgpurun_gpus.c): those
// VGPU_SIM_GPUS describes when set, else /dev/nvidiaN as CUDA_VISIBLE_DEVICES
// selects them, and with want_details their modes, sizes and UUIDs from
// nvidia-smi. Returns how many; fills store->gpu_modes, gpu_bytes (and
// *known = 1) and store->uuids when it could tell.
int vgpurun_gpus_probe(struct vgpurun_facts_store *store, int want_details, int *known);

// Whether PATH has an executable `program`, as the shell looks it up.
int vgpurun_on_path(const char *program);

#endif
