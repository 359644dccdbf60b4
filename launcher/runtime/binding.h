// binding.h: the pure policy that maps a host's ranks onto its devices and
// gives each its memory cap. No I/O: every decision here is unit-tested.
#ifndef VGPU_BINDING_H
#define VGPU_BINDING_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

#define BINDING_CPU_DEFAULT_CAP (256ull << 20) // bytes per rank when nothing is set (CPU)
#define BINDING_CUDA_AUTO_SHARE 0.9            // of free memory, when nothing is set (CUDA)
#define BINDING_CUDA_CONTEXT_BYTES (512ull << 20) // a CUDA context, outside the cap
// What an NCCL communicator allocates outside the caps, on paper: NCCL's
// buffers and channels take 0.3 to 1.6 GB a rank on H100 systems (its
// NCCL_BUFFSIZE, channel count and NVLS settings decide).
#define BINDING_NCCL_BUFFER_BYTES (1ull << 30)

// vgpurun-rank pins each rank's CUDA_VISIBLE_DEVICES to its GPU for
// programs that know nothing of vgpu, and records here what it set and the
// value it replaced: "PINNED|unset" or "PINNED|=BEFORE". A vgpu program's
// runtime puts BEFORE back (when CUDA_VISIBLE_DEVICES is still PINNED: a
// wrapper script may have set its own since) before CUDA starts, so that its
// one binding decision sees every rank's view and the job's config
// (devices.map, ranks_per_device).
#define BINDING_ENV_PINNED "VGPU_CUDA_VISIBLE_DEVICES_PINNED"

struct binding_request {
    int local_size;                     // ranks on this host
    int ndevices;                       // visible devices on this host
    const struct device_info *devices;  // [ndevices]
    long ranks_per_device;              // 0 = ceil(local_size / ndevices)
    uint64_t memory_limit;              // bytes per rank; 0 = unset
    double memory_fraction;             // share of free memory per device; 0 = unset
    const long *map;                    // explicit device per local rank, or NULL
    int map_count;
    uint64_t overhead_bytes;            // per-process device overhead (CUDA context), bytes
    uint64_t backend_extra_bytes;       // what the collective backend allocates outside a
                                        // rank's cap (NCCL's buffers), bytes; the automatic
                                        // cap leaves it free on devices of at most
    int backend_max_ranks;              // this many ranks (where the backend may run)
    uint64_t min_bytes;                 // least a rank needs, bytes; 0 = no check
    // Per local rank, bit d: device d is visible to it (its own
    // CUDA_VISIBLE_DEVICES, a Slurm per-task binding, one MIG instance per
    // process); NULL = every rank sees every device.
    const uint64_t *visible;
    int mps;                            // an MPS server fronts the devices
};

struct binding {
    int device;            // index into request.devices
    int slot;              // position among the ranks on that device
    int ranks_on_device;   // ranks sharing that device
    uint64_t cap_bytes;    // memory cap of this rank's virtual GPU
};

// Computes the binding of every local rank (out[local_size]). Which device:
// devices.map when given; else, when every rank sees every device, ranks in
// order fill the devices (ranks_per_device each, default an even split);
// else (per-rank visibility) each rank takes the first device it sees. A
// rank is never bound to a device it does not see, nor to a PROHIBITED one,
// and more than one rank on an EXCLUSIVE_PROCESS device needs MPS.
// Returns 0, or VGPU_ECONFIG with a message that names the rank or device
// and the numbers (caps that do not fit, a rank with no device, a cap below
// min_bytes, contradictory keys, a compute mode that refuses the ranks) and
// says what to change.
int binding_compute(const struct binding_request *req, struct binding *out, char *err,
                    size_t err_bytes);

// binding_compute's placement alone (out[].device, .slot, .ranks_on_device;
// cap_bytes 0), by the same rules and refusals, for a launcher that places
// ranks and leaves memory to the program. Returns 0 or VGPU_ECONFIG.
int binding_place(const struct binding_request *req, struct binding *out, char *err,
                  size_t err_bytes);

// Whether a device that binding placed `b` on also holds what the chosen
// backend allocates outside the caps (extra_bytes per rank, e.g. NCCL's
// buffers), besides each rank's cap and context_bytes, and whether each rank
// stays within its MPS client limit (dv->client_limit_bytes). Returns 0, or
// VGPU_ECONFIG with the sum, the free memory or limit and what to change.
int binding_check_headroom(const struct binding *b, const struct device_info *dv,
                           uint64_t context_bytes, uint64_t extra_bytes, const char *extra_what,
                           char *err, size_t err_bytes);

#endif
