// vgpu_tree.c: vgpu_ext.h's deterministic all-reduce on the communicator's
// tree.
#include <vgpu/vgpu_ext.h>

#include "status.h"
#include "vgpu_internal.h"

int vgpu_all_reduce_tree(const float *parts, const int *parts_per_rank, float *out, size_t count,
                         vgpu_t *v)
{
    comm_t *c = api_collective(v);
    return c && parts_per_rank ? comm_all_reduce_tree(c, parts, parts_per_rank, out, count)
                               : VGPU_EINVAL;
}

size_t vgpu_tree_scratch_bytes(int nranks, int max_parts_per_rank, size_t count)
{
    return (size_t)comm_tree_scratch_bytes(nranks, max_parts_per_rank, count);
}

int vgpu_tree_sum(vgpu_t *v, float *const *leaves, int n, size_t count)
{
    device_t *d = api_device(v);
    return d && leaves && n > 0 ? comm_tree_sum(d, leaves, n, count) : VGPU_EINVAL;
}
