// gpu_driver.h: everything the runtime asks a GPU driver, behind one table.
// Two implementations: CUDA's (device_cuda.cu, with NVML for what CUDA does
// not say) and a simulated one (gpu_sim.c) that answers from a described
// topology (VGPU_SIM_GPUS). Every decision made on the answers (discovery,
// binding, caps, compute modes, MPS, backend choice) is plain C on top, so
// the tests run those decisions here, where there is no GPU.
#ifndef VGPU_GPU_DRIVER_H
#define VGPU_GPU_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#define GPU_MAX 64 // visible GPUs a process handles

enum gpu_compute_mode {
    GPU_MODE_DEFAULT,           // any number of processes
    GPU_MODE_EXCLUSIVE_PROCESS, // one process (an MPS server counts as the one)
    GPU_MODE_PROHIBITED,        // none: the device is as good as absent
};

// One visible GPU (or MIG instance), as this process sees it.
struct gpu_props {
    int ordinal;           // CUDA ordinal in this process (after CUDA_VISIBLE_DEVICES)
    char name[96];         // e.g. "NVIDIA H100 80GB HBM3"
    char uuid[48];         // "GPU-..." or, for a MIG instance, "MIG-..."
    char pci_bus_id[32];   // "0000:17:00.0"
    uint64_t total_bytes;  // device memory
    uint64_t free_bytes;   // physically free now: not an MPS client's view of it
    int compute_mode;      // enum gpu_compute_mode
    int mig;               // a MIG instance
    int free_unknown;      // free_bytes is the total: no one could tell (no NVML)
    uint64_t client_limit_bytes; // MPS: this client's pinned memory limit on it (0 = none)
    int mps;               // its contexts are shared through MPS (they run together, not in turns)
};

struct gpu_driver {
    const char *name; // "cuda" | "simulated"
    int simulated;    // the math runs on CPU devices
    // This process's visible GPUs in ordinal order, up to max. Returns 0 with
    // *count = 0 when there is no driver or no device (the CPU stands in),
    // VGPU_EIO with a message naming the device that is present but failing,
    // or VGPU_ENODEV when the driver is older than the CUDA runtime this
    // build carries (gpu_driver_check_version) (never silently the CPU: the
    // user has a GPU and expects it).
    int (*scan)(struct gpu_props *out, int max, int *count, char *err, size_t err_bytes);
    // Whether this process is an MPS client (a control daemon it talks to).
    int (*mps_active)(void);
};

// The CUDA runtime version this build carries (CUDART_VERSION, 13000 =
// 13.0); a build without CUDA answers for the toolkit it would use.
#define GPU_RUNTIME_VERSION_NO_CUDA 13000
int gpu_runtime_version(void);

// Whether a driver that supports CUDA driver_version (cudaDriverGetVersion:
// 12080 = 12.8; 0 = no driver) runs this build's runtime_version. CUDA's
// minor-version compatibility lets a runtime run on any driver of its major
// version, so only an older major is refused. Returns 0 (it runs, or there
// is no driver: the CPU stands in), or VGPU_ENODEV with both versions, the
// driver branch needed and what to do in err.
int gpu_driver_check_version(int driver_version, int runtime_version, char *err,
                             size_t err_bytes);

// This process's MPS memory limit on the device of `ordinal`, from a
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT value ("0=1024MB,1=2G"); 0 when the value
// is NULL or names no limit for it.
uint64_t gpu_mps_client_limit(const char *value, int ordinal);

// The driver in force: the simulated one when VGPU_SIM_GPUS is set, else
// CUDA's when built, else NULL (no GPU support in this binary).
const struct gpu_driver *gpu_driver(void);

// The simulated driver, and CUDA's (NULL when not built).
extern const struct gpu_driver gpu_sim_driver;
const struct gpu_driver *gpu_cuda_driver(void);

// ---- the simulated topology (gpu_sim.c), for tests and --plan previews ----
//
// VGPU_SIM_GPUS describes one host's physical GPUs, e.g. "4x80G",
// "1x80G/exclusive", "2x24G,1x80G/prohibited", "1x80G/mig=3",
// "1x40G/used=10G", "2x80G/failing=1"; or "none" (a driver, no GPU) or
// "nodriver". A group is [COUNTx]SIZE[/OPTION]...; options: exclusive,
// prohibited, used=SIZE (memory already taken), mig=K (K instances that
// split the memory), failing=I (GPU I of the group fails when queried),
// name=NAME. A group "driver=MAJOR.MINOR" (e.g. "driver=12.8,1x80G") gives
// the driver's CUDA version (default: new enough for this build).
// CUDA_VISIBLE_DEVICES selects and orders them as CUDA does (ordinals or
// UUID prefixes, up to the first entry that matches nothing; one MIG
// instance a process at most). MPS is active when CUDA_MPS_PIPE_DIRECTORY
// is set.

struct gpu_sim_gpu {
    struct gpu_props props; // ordinal = physical index on the host
    int failing;            // querying it fails
};

// What a VGPU_SIM_GPUS value says of the host beside its GPUs.
struct gpu_sim_host {
    int no_driver;      // "nodriver": no driver at all
    int driver_version; // "driver=12.8": 12080; 0 = new enough for this build
};

// Parses a VGPU_SIM_GPUS value into gpus[max] (the host's physical devices)
// and *host. Returns 0, or VGPU_ECONFIG with the reason in err.
int gpu_sim_parse(const char *spec, struct gpu_sim_gpu *gpus, int max, int *count,
                  struct gpu_sim_host *host, char *err, size_t err_bytes);

// Applies a CUDA_VISIBLE_DEVICES value (NULL: all) to the host's devices:
// fills order[] with physical indices in ordinal order; returns how many.
// CUDA enumerates one MIG instance a process: the first one listed (or, with
// no list, the first on the host); further instances are left out.
int gpu_sim_visible(const struct gpu_sim_gpu *gpus, int count, const char *visible, int *order,
                    int max);

#endif
