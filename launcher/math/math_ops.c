// math_ops.c: the math registry: the table for a device's backend (math_ops.h). A
// simulated GPU runs on the CPU backend (device.c), so it gets the CPU's.
#include "math_ops.h"

const struct math_ops *math_for(const device_t *dev)
{
    switch (dev->ops ? dev->ops->kind : DEVICE_KIND_AUTO) {
    case DEVICE_KIND_CPU: return math_cpu_ops();
    case DEVICE_KIND_CUDA: return math_cuda_ops();
    default: return NULL;
    }
}
