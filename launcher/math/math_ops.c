// math_ops.c: the math registry: the table for a device (math_ops.h), by
// what its memory is: host-addressable memory (the CPU device, and a
// simulated GPU, which runs on it) takes the host loops over its host view;
// CUDA memory takes the CUDA kernels. A device with neither (the test
// device) has no math. And the device calls the entries make, by the names
// libvgpu exports to its trainer (math_ops.h).
#include "device_internal.h"
#include "math_ops.h"

const struct math_ops *vgpu_math_for(const device_t *dev)
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

// The bytes the current entry's checks passed (its operands), for the
// timeline's count of the call; each thread its own (a collective's thread
// may compute too).
static _Thread_local uint64_t op_bytes_;

int vgpu_math_check_range(const device_t *dev, const void *p, size_t bytes, const char *what,
                          const char *op)
{
    if (!dev) { // vgpu_math_device before vgpu_open
        log_error("%s: no device (before vgpu_open)", op);
        return VGPU_EINVAL;
    }
    const int rc = device_check_range(dev, p, bytes, what, op);
    if (rc == 0 && trace_enabled_)
        op_bytes_ += bytes;
    return rc;
}

uint64_t vgpu_math_op_begin(void) { return trace_op_begin(); }

void vgpu_math_op_end(uint64_t start_ns, unsigned kind, uint64_t flops)
{
    if (!start_ns)
        return;
    trace_op_end((enum trace_op)kind, start_ns, flops, op_bytes_);
    op_bytes_ = 0;
}

int vgpu_math_zero(device_t *dev, void *dst, size_t bytes)
{
    const uint64_t t0 = trace_op_begin();
    const int rc = device_zero(dev, dst, bytes);
    trace_op_end(TRACE_OP_COPY_DEVICE, t0, 0, bytes);
    return rc;
}

int vgpu_math_wait(device_t *dev) { return dev ? device_sync(dev) : VGPU_EINVAL; }
