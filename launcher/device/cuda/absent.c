// absent.c: what the CUDA backend answers in a build without CUDA: no
// backend, no driver (VGPU_SIM_GPUS still simulates one, gpu_sim.c), and the
// CUDA version a build with the toolkit would name.
#include "device_internal.h"
#include "gpu_driver.h"

const struct device_ops *device_cuda_backend(void) { return NULL; }
const struct gpu_driver *gpu_cuda_driver(void) { return NULL; }
int gpu_runtime_version(void) { return GPU_RUNTIME_VERSION_NO_CUDA; }
