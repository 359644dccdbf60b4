// vgpurun_rank.c: vgpurun-rank, what each rank of a vgpurun job starts as
// before it becomes the user's program. Any program then finds what its
// framework expects: torchrun's RANK, WORLD_SIZE, LOCAL_RANK and
// LOCAL_WORLD_SIZE (from the launcher's own variables; MASTER_ADDR and
// MASTER_PORT come from vgpurun), and on a host with GPUs its own
// CUDA_VISIBLE_DEVICES: the GPU that vgpu's binding policy gives this local
// rank (ranks in order fill the GPUs, devices.ranks_per_device each), named by
// UUID. A program that knows nothing of vgpu thus gets its slice of the GPU;
// vgpu's own programs bind the same way from what they see.
// Usage (by vgpurun): vgpurun-rank PROGRAM ARGS...
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binding.h"
#include "config.h"
#include "device.h"
#include "status.h"
#include "vgpurun_plan.h"

#define MAX_GPUS 64

static const char *get_(const char *name) { return getenv(name); }

static void set_int_(const char *name, int value)
{
    char v[32];
    snprintf(v, sizeof v, "%d", value);
    setenv(name, v, 1);
}

// This rank's GPU by the binding policy, into CUDA_VISIBLE_DEVICES. No GPU:
// nothing to do. Returns 0, or 2 after saying why the policy refused.
static int bind_gpu_(const struct vgpurun_rank_id *id)
{
    struct device_info gpus[MAX_GPUS];
    int count = 0;
    char err[512] = "";
    if (device_discover("cuda", gpus, MAX_GPUS, &count, err, sizeof err) < 0 || count <= 0) {
        if (err[0])
            fprintf(stderr, "vgpurun-rank: rank %d: %s; CUDA_VISIBLE_DEVICES left as it is\n",
                    id->rank, err);
        return 0;
    }
    long per_gpu = 0;
    const char *v = getenv("VGPU_RANKS_PER_DEVICE");
    if (v && *v) {
        char *end;
        per_gpu = strtol(v, &end, 10);
        if (*end || per_gpu < 1)
            per_gpu = 0;
    }
    struct binding_request req = {
        .local_size = id->local_size,
        .ndevices = count,
        .devices = gpus,
        .ranks_per_device = per_gpu,
        .memory_fraction = 0.5, // caps are the program's business; only the placement counts
    };
    struct binding *b = calloc((size_t)id->local_size, sizeof *b);
    if (!b)
        return 2;
    int rc = binding_compute(&req, b, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "vgpurun-rank: rank %d: %s\n", id->rank, err);
        free(b);
        return 2;
    }
    setenv("CUDA_VISIBLE_DEVICES", gpus[b[id->local_rank].device].uuid, 1);
    free(b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: vgpurun-rank PROGRAM ARGS... (vgpurun runs it for each rank)\n");
        return 2;
    }
    struct vgpurun_rank_id id;
    char err[512];
    if (vgpurun_rank_identity(get_, &id, err, sizeof err) < 0) {
        fprintf(stderr, "vgpurun-rank: %s\n", err);
        return 2;
    }
    set_int_("RANK", id.rank);
    set_int_("WORLD_SIZE", id.world_size);
    set_int_("LOCAL_RANK", id.local_rank);
    set_int_("LOCAL_WORLD_SIZE", id.local_size);
    if (bind_gpu_(&id))
        return 2;
    execvp(argv[1], argv + 1);
    int e = errno;
    fprintf(stderr, "vgpurun-rank: %s: %s\n", argv[1], strerror(e));
    return e == ENOENT ? 127 : 126;
}
