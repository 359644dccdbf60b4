// device_internal.h: backend tables and the CPU backend's shared-arena view,
// shared by the runtime, the collectives and the perf tools (the ring maps
// same-host peers' arenas).
#ifndef VGPU_DEVICE_INTERNAL_H
#define VGPU_DEVICE_INTERNAL_H

#include "device.h"
#include "shm_share.h"

extern const struct device_ops device_cpu_ops;
// The CUDA backend's table, NULL where this binary has no CUDA (its
// folder's absent.c says so).
const struct device_ops *device_cuda_backend(void);

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

// Whether the device is a CUDA device (memory not host-mappable).
int device_is_cuda(const device_t *dev);

// The backend's optional operations (device_ops), or what stands for them
// where it has none: the native stream (NULL), the ring's memory operations
// over device memory (NULL), and the arena's IPC handle and a neighbour's
// arena opened from it: 0 or VGPU_EUNSUPPORTED.
void *device_stream(const device_t *dev);
const struct ring_mem_ops *device_ring_mem(device_t *dev);
int device_ipc_export(const device_t *dev, unsigned char handle[DEVICE_IPC_HANDLE_BYTES]);
int device_ipc_open(device_t *dev, const unsigned char handle[DEVICE_IPC_HANDLE_BYTES], void **base);
void device_ipc_close(device_t *dev, void *base);

#endif
