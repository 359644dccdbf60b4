// job.c: the host collectives with vgpu_train's contract, and small device
// helpers over libvgpu.
#include "job.h"

#include <limits.h>

#include "log.h"

static void must_(int rc, const char *what)
{
    if (rc < 0)
        FATAL(1, "%s: %s", what, vgpu_status_string(rc));
}

void job_gather_all(struct job *job, const void *send, void *recv, size_t bytes)
{
    must_(vgpu_ctrl_all_gather(send, recv, bytes, job->v), "host all-gather");
}

void job_broadcast(struct job *job, void *buf, size_t bytes, int root)
{
    must_(vgpu_ctrl_broadcast(buf, bytes, root, job->v), "host broadcast");
}

int job_agree_min(struct job *job, int v)
{
    int32_t out = 0, mine = v;
    must_(vgpu_ctrl_all_reduce(&mine, &out, 1, vgpu_int32, vgpu_min, job->v), "agreement");
    return out;
}

void job_sum_doubles(struct job *job, double *values, int count)
{
    must_(vgpu_ctrl_all_reduce(values, values, (size_t)count, vgpu_float64, vgpu_sum, job->v),
          "reduction");
}

int job_alloc_floats(vgpu_t *dev, size_t count, float **ptr)
{
    if (count > SIZE_MAX / sizeof(float))
        return VGPU_EDEVMEM;
    void *p = NULL;
    int rc = vgpu_malloc(dev, &p, count * sizeof(float));
    if (rc == 0 && (rc = vgpu_memzero(dev, p, count * sizeof(float))) < 0)
        vgpu_free(dev, p);
    if (rc == 0)
        *ptr = p;
    return rc;
}

size_t job_peak_bytes(vgpu_t *dev)
{
    size_t peak = 0;
    vgpu_memory(dev, NULL, &peak, NULL);
    return peak;
}
