// vgpurun_identity.c: a rank's identity as the frameworks name it, read from
// the launcher's variables (Open MPI's or Slurm's), for vgpurun-rank.
#include <stdlib.h>

#include "status.h"
#include "util.h"
#include "vgpurun_plan.h"

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
