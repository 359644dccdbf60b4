// device.h: a virtual GPU: memory-capped device memory, explicit copies, a
// stream. Backends are struct device_ops tables in a registry (device.c):
// each says what its kind is (discovery, capabilities, a host view or none),
// so that the runtime and the collectives ask the device instead of naming a
// backend. The math a model computes with is the math module's
// (math/math_ops.h).
//
// Contract shared by every function here:
// - pointers called "device" must come from device_alloc on the same device;
//   passing a host pointer is an error (VGPU_EINVAL), as it would fault on a GPU;
// - on the CPU backend device memory is NOT host-addressable: dereferencing a
//   device pointer from host code faults (SIGSEGV), as it would on a GPU,
//   except inside a function run by device_host_func;
// - work is ordered on one stream; results are visible to the host after
//   device_copy_to_host (which synchronises) or device_sync;
// - functions return 0 or a negative status; VGPU_EDEVMEM has already been
//   reported with the rank, the request, the usage and the cap.
#ifndef VGPU_DEVICE_H
#define VGPU_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "config.h" // enum device_kind

typedef struct device device_t;

// A physical device as discovered (a GPU, or the host for CPU simulation).
struct device_info {
    enum device_kind kind; // the backend's kind (device_kind_name)
    int index;             // ordinal among visible devices of that kind
    char name[96];         // e.g. "NVIDIA H100 80GB HBM3" or the CPU model
    uint64_t total_bytes;  // device memory (CPU: host RAM)
    uint64_t free_bytes;   // free now (CPU: available host memory; CUDA: physically free)
    char pci_bus_id[32];   // CUDA only, else ""
    char uuid[48];         // CUDA: GPU or MIG UUID; CPU: "cpu-<boot id>" (same for all ranks on a host)
    int compute_mode;      // CUDA: enum gpu_compute_mode (gpu_driver.h); CPU: 0
    int mig;               // CUDA: a MIG instance
    int free_unknown;      // CUDA: free_bytes is the total (no NVML to tell free memory)
    uint64_t client_limit_bytes; // CUDA under MPS: this process's pinned memory limit (0 = none)
    int mps;               // CUDA: contexts on it are shared through MPS (else time-sliced)
    int simulated;         // a GPU of VGPU_SIM_GPUS: CPU math behind a GPU's description
};

struct device_counters {
    uint64_t h2d_calls, h2d_bytes; // host -> device copies
    uint64_t d2h_calls, d2h_bytes; // device -> host copies
    uint64_t d2d_calls, d2d_bytes; // device -> device copies
};

#define DEVICE_IPC_HANDLE_BYTES 64
struct ring_mem_ops;
struct shm_handle;
struct devcoll_exec;

// What the runtime and the collectives may rely on of a device kind (its
// backend's device_ops.caps; a backend that is not built still describes its
// kind: cuda/absent.c). Whether device memory is host-addressable is not a
// bit: it is whether the backend has a host_view operation.
#define DEVICE_CAP_GPU (1u << 0)  // an accelerator: every rank scans the devices it sees (UUIDs,
                                  // compute modes, MPS or contexts taking turns), a context costs
                                  // memory beside the cap, and where none is visible the CPU
                                  // stands in (devices.kind = auto)
#define DEVICE_CAP_CUDA (1u << 1) // its memory and stream are CUDA's: NCCL can drive it, and
                                  // vgpu_cuda_device names its CUDA ordinal
#define DEVICE_CAP_TEST (1u << 2) // built for the tests only; the registry answers it for its
                                  // kind only where VGPU_TEST_DEVICE names it

struct device_ops {
    enum device_kind kind;
    const char *name; // device_kind_name(kind)
    // Memory: reserve / release the capped region (the arena sub-allocates).
    int (*reserve)(device_t *dev, uint64_t cap_bytes);
    void (*release)(device_t *dev);
    int (*copy_h2d)(device_t *dev, void *dst, const void *src, size_t bytes);
    // Without waiting (NULL: copy_h2d, which returns when done).
    int (*copy_h2d_async)(device_t *dev, void *dst, const void *src, size_t bytes);
    int (*copy_d2h)(device_t *dev, void *dst, const void *src, size_t bytes);
    int (*copy_d2d)(device_t *dev, void *dst, const void *src, size_t bytes);
    int (*memset_zero)(device_t *dev, void *dst, size_t bytes);
    int (*sync)(device_t *dev);
    // Runs fn(arg) in stream order (device_host_func; NULL: not supported).
    int (*host_func)(device_t *dev, void (*fn)(void *arg), void *arg);
    // Page-locks a host range for fast copies (NULL: nothing to do, the CPU).
    int (*pin_host)(device_t *dev, void *ptr, size_t bytes);
    void (*unpin_host)(device_t *dev, void *ptr);
    // Optional, NULL where the backend has none (the CPU: its memory is
    // shared through its share operation and the ring reads it in place).
    // The native stream every kernel and copy runs on (a cudaStream_t).
    void *(*stream)(const device_t *dev);
    // The ring over device memory (comm_ring.c): its memory operations on
    // the device's stream (ring_mem.h); the arena's IPC handle, and a
    // neighbour's arena opened from it (closed before its owner frees it).
    const struct ring_mem_ops *(*ring_mem)(device_t *dev);
    int (*ipc_export)(const device_t *dev, unsigned char handle[DEVICE_IPC_HANDLE_BYTES]);
    int (*ipc_open)(device_t *dev, const unsigned char handle[DEVICE_IPC_HANDLE_BYTES], void **base);
    void (*ipc_close)(device_t *dev, void *base);
    // ---- what the kind is: the registry's and the runtime's questions ----
    unsigned caps;     // DEVICE_CAP_* bits
    const char *label; // the kind in prose ("CUDA", "CPU"): "no CUDA GPU is visible"
    // This process's physical devices of the kind (device_discover's contract).
    int (*discover)(struct device_info *out, int max, int *count, char *err, size_t err_bytes);
    // Optional, NULL where device memory is not host-addressable (CUDA):
    // the host address of a device pointer (NULL outside the arena), and
    // what a same-host peer needs to map the arena (shm_share_map; 0 or
    // VGPU_EINVAL). The collectives reach such memory in place; without
    // them they copy through host staging, as on a GPU.
    void *(*host_view)(const device_t *dev, const void *ptr);
    int (*share)(const device_t *dev, struct shm_handle *out);
    // Optional: the device collectives on this kind (comm/devcoll/devcoll.h:
    // windows, launch), for ranks that share one device; NULL: none.
    const struct devcoll_exec *devcoll;
};

struct device {
    const struct device_ops *ops;
    struct device_info info;     // the physical device this virtual GPU lives on
    int virtual_id;              // virtual GPU number (the world rank)
    int rank;                    // world rank, for messages
    char host[64];
    uint64_t cap_bytes;          // the memory cap
    arena_t arena;               // sub-allocator over the reserved region
    struct device_counters counters;
    int blas_threads;            // CPU backend: BLAS threads for this rank
    int host_reads_pending;      // asynchronous copies whose host source may still be read
    void *impl;                  // backend state
    // The math module's state for this device (math/math_ops.h: a BLAS handle,
    // flags), made at its first operation; math_release frees it (NULL:
    // nothing to free) and device_close calls it first.
    void *math;
    void (*math_release)(device_t *dev);
};

// The backend registry: the backend of a kind; NULL if unknown or not built
// into this binary. A test-only backend (DEVICE_CAP_TEST) stands for its
// kind where the environment variable VGPU_TEST_DEVICE names it, and never
// otherwise.
const struct device_ops *device_backend(enum device_kind kind);
// The backend's name: "cpu", "cuda" ("auto" and "?" for what no device has).
const char *device_kind_name(enum device_kind kind);
// The kind in prose: "CPU", "CUDA" ("?" for what no device has).
const char *device_kind_label(enum device_kind kind);
// The kind's DEVICE_CAP_* bits (0 for auto or an unknown kind), built or not.
unsigned device_kind_caps(enum device_kind kind);
// Whether the kind's device memory is host-addressable (its backend has a
// host view); 0 for auto or an unknown kind.
int device_kind_host_addressable(enum device_kind kind);
// The first kind in registry order whose caps include every bit of `caps`
// (DEVICE_CAP_GPU: the GPU that devices.kind = auto looks for), or
// DEVICE_KIND_AUTO where none has them.
enum device_kind device_kind_with(unsigned caps);

// Physical devices of `kind` this process sees: the backend's discover
// operation. Fills up to max entries and sets *count (0 for a GPU kind when
// there is no driver or no GPU: not an error). For cuda the driver layer
// answers (gpu_driver.h: CUDA, or the simulated topology of VGPU_SIM_GPUS).
// Returns VGPU_EINVAL for a kind no backend has (or max < 1 on the CPU),
// VGPU_EUNSUPPORTED for cuda when no GPU support is built and none is
// simulated, VGPU_EIO for a GPU that is present but failing (err names it).
int device_discover(enum device_kind kind, struct device_info *out, int max, int *count, char *err,
                    size_t err_bytes);

// Opens a virtual GPU on physical device `info`: reserves cap_bytes up front.
// The CPU backend's arena is a memfd that same-host peers can map (see comm
// and shm_share.h).
// Returns 0, VGPU_EDEVMEM (the cap cannot be reserved), or another error.
int device_open(device_t *dev, const struct device_info *info, int rank, const char *host,
                uint64_t cap_bytes, int blas_threads);
// Frees everything; device_close(NULL) is a no-op.
void device_close(device_t *dev);

// The kind's name ("cpu" or "cuda"; a simulated GPU's is "cuda").
const char *device_kind(const device_t *dev);
// The opened backend's DEVICE_CAP_* bits (a simulated GPU's are the CPU's:
// its memory and math are); 0 for a device that is not open.
unsigned device_caps(const device_t *dev);

// Allocates from the capped arena. Over the cap: logs
// "device memory cap exceeded: requested X, in use Y of CAP (virtual GPU v on
// physical device d)" and returns VGPU_EDEVMEM.
int device_alloc(device_t *dev, size_t bytes, void **ptr);
// Allocates `count` floats, zeroed.
int device_alloc_floats(device_t *dev, size_t count, float **ptr);
int device_free(device_t *dev, void *ptr);

int device_copy_to_device(device_t *dev, void *dst, const void *host_src, size_t bytes);
// The same copy without waiting for it (CUDA: queued on the device's stream;
// a CPU device copies at once). host_src must not change until
// device_wait_host_reads, a copy to the host or device_sync has returned;
// page-locked sources (device_pin_host) are copied truly asynchronously.
int device_copy_to_device_async(device_t *dev, void *dst, const void *host_src, size_t bytes);
// Returns once the host sources of every asynchronous copy have been read
// (at once when none is outstanding).
int device_wait_host_reads(device_t *dev);
int device_copy_to_host(device_t *dev, void *host_dst, const void *src, size_t bytes);
int device_copy(device_t *dev, void *dst, const void *src, size_t bytes);
int device_zero(device_t *dev, void *dst, size_t bytes);
int device_sync(device_t *dev);
// Runs fn(arg) in the device's stream order, as cudaLaunchHostFunc: after
// the work queued before it, before the work queued after it. CPU backend:
// fn runs now, on the calling thread, with the device view open to the host
// (read-write) for its duration and PROT_NONE again after, so fn may
// dereference device pointers and the SIGSEGV explanation holds outside it.
// CUDA: queued on the stream (cudaLaunchHostFunc); fn must not touch device
// memory. fn must not call device functions. Returns 0 (fn has run / is
// queued), VGPU_EINVAL (fn NULL), VGPU_EUNSUPPORTED (a backend without it),
// VGPU_EIO (CUDA: the launch failed, said; fn does not run) or -errno (CPU:
// mprotect failed, said; fn did not run when it was the opening).
int device_host_func(device_t *dev, void (*fn)(void *arg), void *arg);

// Registers a host buffer that copies to and from the device use often, so
// that they run at full speed without a bounce through pageable memory
// (CUDA: cudaHostRegister); a no-op on the CPU backend. Returns 0, or a
// negative status after which the buffer is still usable, only slower.
// device_unpin_host before freeing it (NULL is ignored).
int device_pin_host(device_t *dev, void *ptr, size_t bytes);
void device_unpin_host(device_t *dev, void *ptr);

// 0 if [p, p + bytes) lies in dev's memory (or bytes is 0); else says
// "OP: WHAT P (+BYTES bytes) is not device memory of virtual GPU N (a host
// pointer passed to the device?)" and returns VGPU_EINVAL: what a GPU would
// fault on, the simulation refuses.
int device_check_range(const device_t *dev, const void *p, size_t bytes, const char *what,
                       const char *op);

#endif
