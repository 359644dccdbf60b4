// math_cpu_internal.h: what the CPU device's math files (cpu/) share.
#ifndef VGPU_MATH_CPU_INTERNAL_H
#define VGPU_MATH_CPU_INTERNAL_H

#include "device_internal.h"
#include "math_ops.h"

// Sets the BLAS threads of this device's rank (devices.cpu_threads) before
// its first operation; every body that calls the BLAS calls this first.
void math_cpu_prepare(device_t *dev);

// Host view of a device pointer the entries (math_ops.h) have already checked.
#define V_(p) ((float *)device_host_view(dev, (p)))
#define CV_(p) ((const float *)device_host_view(dev, (p)))

// The transformer family's bodies (cpu_transformer.c), math_cpu_ops' .transformer.
extern const struct math_transformer_ops math_cpu_transformer_ops;

#endif
