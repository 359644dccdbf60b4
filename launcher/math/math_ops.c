// math_ops.c: the math registry: the table for a device (math_ops.h), by
// what its memory is: host-addressable memory (the CPU device, and a
// simulated GPU, which runs on it) takes the host loops over its host view;
// CUDA memory takes the CUDA kernels. A device with neither (the test
// device) has no math.
#include "device_internal.h"
#include "math_ops.h"

const struct math_ops *math_for(const device_t *dev)
{
    const struct math_ops *ops = NULL;
    if (device_host_addressable(dev))
        ops = math_cpu_ops();
    else if (device_caps(dev) & DEVICE_CAP_CUDA)
        ops = math_cuda_ops();
    if (!ops)
        log_error("no math for virtual GPU %d's device (%s) in this build", dev->virtual_id,
                  dev->ops ? dev->ops->label : "not open");
    return ops;
}
