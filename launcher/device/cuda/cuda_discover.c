// cuda_discover.c: the CUDA kind's discovery, built with or without CUDA
// (simulated GPUs are CUDA GPUs to the runtime): the driver layer's scan as
// device_info.
#include <stdio.h>
#include <string.h>

#include "device_cuda.h"
#include "gpu_driver.h"
#include "status.h"

int device_cuda_discover(struct device_info *out, int max, int *count, char *err,
                         size_t err_bytes)
{
    *count = 0;
    const struct gpu_driver *drv = gpu_driver();
    if (!drv)
        return VGPU_EUNSUPPORTED;
    struct gpu_props props[GPU_MAX];
    int n = 0;
    int rc = drv->scan(props, GPU_MAX < max ? GPU_MAX : max, &n, err, err_bytes);
    if (rc < 0)
        return rc; // err says which device and why
    for (int i = 0; i < n; i++) {
        struct device_info *d = &out[i];
        memset(d, 0, sizeof *d);
        d->kind = DEVICE_KIND_CUDA;
        d->index = props[i].ordinal;
        snprintf(d->name, sizeof d->name, "%s", props[i].name);
        snprintf(d->uuid, sizeof d->uuid, "%s", props[i].uuid);
        snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%s", props[i].pci_bus_id);
        d->total_bytes = props[i].total_bytes;
        d->free_bytes = props[i].free_bytes;
        d->compute_mode = props[i].compute_mode;
        d->mig = props[i].mig;
        d->free_unknown = props[i].free_unknown;
        d->client_limit_bytes = props[i].client_limit_bytes;
        d->mps = props[i].mps;
        d->simulated = drv->simulated;
    }
    *count = n;
    return 0;
}
