// math_ops.c: the math registry: the table for a device's backend
// (math_ops.h). A simulated GPU runs on the CPU backend (device.c), so it
// gets the CPU's math.
#include "math_ops.h"

const struct math_ops *math_for(const device_t *dev)
{
    const enum device_kind kind = dev->ops ? dev->ops->kind : DEVICE_KIND_AUTO;
    const struct math_ops *ops = NULL;
    switch (kind) {
    case DEVICE_KIND_CPU: ops = math_cpu_ops(); break;
    case DEVICE_KIND_CUDA: ops = math_cuda_ops(); break;
    default: break;
    }
    if (!ops)
        log_error("no math for %s devices in this build (virtual GPU %d)", device_kind_name(kind),
                  dev->virtual_id);
    return ops;
}
