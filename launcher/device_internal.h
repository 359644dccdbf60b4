// device_internal.h: backend tables and the CPU backend's shared-arena view,
// shared inside launcher/ (the ring maps same-host peers' arenas).
#ifndef VGPU_DEVICE_INTERNAL_H
#define VGPU_DEVICE_INTERNAL_H

#include "device.h"
#include "shm_share.h"

extern const struct device_ops device_cpu_ops;
extern const struct device_ops device_cuda_ops; // only when built with CUDA

// CPU discovery (see device_discover): one device, the host. GPUs are
// discovered through the driver layer (gpu_driver.h).
int device_cpu_discover_(struct device_info *out);

// CPU backend. Device memory is a memfd (shm_share.h) mapped twice: the
// "device" view (PROT_NONE, the addresses handed out, so a host dereference
// faults as on a GPU) and a read-write "host view" used by the device's own
// kernels and by the collectives.
//
// Host view of a device pointer on a CPU device; NULL if dev is not a CPU
// device or ptr is not inside its arena.
void *device_cpu_view(const device_t *dev, const void *ptr);
// What a same-host peer needs to map the arena (shm_share_map); returns 0,
// or VGPU_EINVAL if dev is not an open CPU device.
int device_cpu_share(const device_t *dev, struct shm_handle *out);

// CUDA backend: the stream every kernel and copy of the device runs on (a
// cudaStream_t), for backends that order their own streams after it.
void *device_cuda_stream(const device_t *dev);

// Whether the device is a CUDA device (memory not host-mappable).
int device_is_cuda(const device_t *dev);

#endif
