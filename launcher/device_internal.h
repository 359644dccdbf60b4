// device_internal.h: backend tables and the CPU backend's shared-arena view,
// shared inside launcher/ (the ring maps same-host peers' arenas).
#ifndef VGPU_DEVICE_INTERNAL_H
#define VGPU_DEVICE_INTERNAL_H

#include "device.h"

extern const struct device_ops device_cpu_ops;
extern const struct device_ops device_cuda_ops; // only when built with CUDA

// Discovery per backend (see device_discover). The CPU backend reports one
// device: the host. The CUDA backend reports 0 devices (not an error) when
// there is no driver or no GPU.
int device_cpu_discover_(struct device_info *out);
int device_cuda_discover_(struct device_info *out, int max, int *count);

// CPU backend. Device memory is a shared-memory segment mapped twice: the
// "device" view (PROT_NONE, the addresses handed out, so a host dereference
// faults as on a GPU) and a read-write "host view" used by the device's own
// kernels and by the collectives.
//
// Host view of a device pointer on a CPU device; NULL if dev is not a CPU
// device or ptr is not inside its arena.
void *device_cpu_view(const device_t *dev, const void *ptr);
// Name of the shared segment holding the arena ("" once unlinked or if private).
const char *device_cpu_shm_name(const device_t *dev);
// Removes the segment's name (mappings stay valid); idempotent.
void device_cpu_unlink(device_t *dev);

// Whether the device is a CUDA device (memory not host-mappable).
int device_is_cuda(const device_t *dev);

#endif
