// absent.c: what the CUDA backend answers in a build without CUDA: a table
// that describes the kind (its name, caps and discovery: VGPU_SIM_GPUS still
// simulates GPUs, gpu_sim.c) with no memory operations, so device_backend
// says it is not built; no driver; and the CUDA version a build with the
// toolkit would name.
#include "device_cuda.h"
#include "gpu_driver.h"

static const struct device_ops device_cuda_absent_ops = {
    .kind = DEVICE_KIND_CUDA,
    .name = "cuda",
    .caps = DEVICE_CUDA_CAPS,
    .label = DEVICE_CUDA_LABEL,
    .discover = device_cuda_discover,
};

const struct device_ops *device_cuda_backend(void) { return &device_cuda_absent_ops; }
const struct gpu_driver *gpu_cuda_driver(void) { return NULL; }
int gpu_runtime_version(void) { return GPU_RUNTIME_VERSION_NO_CUDA; }
