// sim_internal.h: what the files of the simulated CUDA runtime share (the
// public interface is the toolkit's own cuda_runtime_api.h).
//
// libcudart.so.13 on the CPU: the devices are VGPU_SIM_GPUS's (gpu_sim.c),
// device memory is host memory the library tracks, and every copy, memset
// and event record runs at the call, so each stream is trivially in order.
// Every exported function returns through sim_return, which keeps the
// calling thread's last error.
#ifndef VGPU_CUDART_SIM_INTERNAL_H
#define VGPU_CUDART_SIM_INTERNAL_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "gpu_driver.h"

// One device as this process sees it (ordinal = index in the table).
struct sim_device {
    struct gpu_props props;     // gpu_sim's answer; props.ordinal = the CUDA ordinal
    int failing;                // VGPU_SIM_GPUS's failing=I: its context cannot be made
    struct cudaDeviceProp cuda; // what cudaGetDeviceProperties answers
    uint64_t capacity_bytes;    // what this process may allocate on it: its free memory,
                                // no more than the MPS client limit (0 = none), bytes
    uint64_t allocated_bytes;   // device memory this process holds now, bytes (sim_memory.c,
                                // under its lock)
};

// ---- sim_device.c ----

// Reads the topology once (thread-safe). Returns cudaSuccess, or the error
// every call that needs a device gives from then on: cudaErrorNoDevice
// ("none"), cudaErrorInsufficientDriver ("nodriver", or a driver older than
// CUDA 13), cudaErrorInitializationError (a VGPU_SIM_GPUS that does not
// parse: the reason is said once on stderr).
cudaError_t sim_init(void);

// The devices after sim_init succeeded: count, and the one of `ordinal`
// (NULL when out of range).
int sim_device_count(void);
struct sim_device *sim_device_at(int ordinal);

// The calling thread's current device (0 until cudaSetDevice).
int sim_current_device(void);

// Whether work can run on device `ordinal`: cudaSuccess, the init error,
// cudaErrorInvalidDevice (no such ordinal), cudaErrorLaunchFailure (a failing
// device) or cudaErrorDevicesUnavailable (compute mode prohibited).
cudaError_t sim_device_usable(int ordinal);

// ---- sim_error.c ----

// Records err as the calling thread's last error unless it is cudaSuccess
// (or cudaErrorNotReady, which CUDA does not record); returns err.
cudaError_t sim_return(cudaError_t err);

// ---- sim_memory.c ----

// Frees every device allocation on device `ordinal` (cudaDeviceReset).
void sim_memory_reset(int ordinal);

// ---- sim_stream.c ----

// Whether stream is a live stream or one of the special handles (NULL,
// cudaStreamLegacy, cudaStreamPerThread): cudaSuccess or
// cudaErrorInvalidResourceHandle.
cudaError_t sim_stream_check(cudaStream_t stream);

// Destroys the streams and events made on device `ordinal` (cudaDeviceReset).
void sim_stream_reset(int ordinal);

// Exports name##suffix as another name of the function `name`, of its exact
// type: the per-thread default stream's entry points (CUDA's _ptds / _ptsz,
// what a program built with --default-stream per-thread calls) do what the
// legacy ones do, since every operation completes at the call.
#define SIM_ALIAS(name, suffix) \
    extern __typeof__(name) name##suffix __attribute__((alias(#name)))

#endif
