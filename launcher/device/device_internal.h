// device_internal.h: the backend registry, and what the runtime, the
// collectives and the perf tools ask of a device beyond device.h: its host
// view, the arena shared with same-host peers (the ring maps them), its
// optional GPU operations.
#ifndef VGPU_DEVICE_INTERNAL_H
#define VGPU_DEVICE_INTERNAL_H

#include "device.h"
#include "shm_share.h"

// The backend's host view of a device pointer: NULL where device memory is
// not host-addressable (CUDA, the test device) or ptr is not in the arena.
void *device_host_view(const device_t *dev, const void *ptr);
// What a same-host peer needs to map the arena (shm_share_map); returns 0,
// or VGPU_EINVAL if dev is not open or its memory cannot be shared so.
int device_share(const device_t *dev, struct shm_handle *out);
// Whether the opened device's memory is host-addressable (a host view).
int device_host_addressable(const device_t *dev);
// Whether neighbours can open its arena (an IPC handle: device_ipc_export).
int device_can_ipc(const device_t *dev);

// The backend's optional operations (device_ops), or what stands for them
// where it has none: the native stream (NULL), the ring's memory operations
// over device memory (NULL), and the arena's IPC handle and a neighbour's
// arena opened from it: 0 or VGPU_EUNSUPPORTED.
void *device_stream(const device_t *dev);
const struct ring_mem_ops *device_ring_mem(device_t *dev);
int device_ipc_export(const device_t *dev, unsigned char handle[DEVICE_IPC_HANDLE_BYTES]);
int device_ipc_open(device_t *dev, const unsigned char handle[DEVICE_IPC_HANDLE_BYTES], void **base);
void device_ipc_close(device_t *dev, void *base);
// The device collectives' exec for this device (NULL: none).
const struct devcoll_exec *device_devcoll(const device_t *dev);

#endif
