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

// CUDA backend, the ring over device memory (comm_ring.c): the ring's memory
// operations on the device's stream (ring_mem.h); the arena's IPC handle, and
// a neighbour's arena opened from it (closed before its owner frees it).
// Return 0 or VGPU_EUNSUPPORTED (said).
#define DEVICE_IPC_HANDLE_BYTES 64
struct ring_mem_ops;
const struct ring_mem_ops *device_cuda_ring_ops(device_t *dev);
int device_cuda_ipc_export(const device_t *dev, unsigned char handle[DEVICE_IPC_HANDLE_BYTES]);
int device_cuda_ipc_open(device_t *dev, const unsigned char handle[DEVICE_IPC_HANDLE_BYTES],
                         void **base);
void device_cuda_ipc_close(device_t *dev, void *base);

#endif
