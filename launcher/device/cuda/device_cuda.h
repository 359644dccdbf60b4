// device_cuda.h: what the CUDA kind is whether or not its backend is built
// (device_cuda.cu's table and absent.c's describe it alike): its
// capabilities, its name in prose, and discovery through the GPU driver
// layer (gpu_driver.h: CUDA's scan, or the GPUs VGPU_SIM_GPUS simulates).
#ifndef VGPU_DEVICE_CUDA_H
#define VGPU_DEVICE_CUDA_H

#include "device.h"

#define DEVICE_CUDA_CAPS (DEVICE_CAP_GPU | DEVICE_CAP_CUDA)
#define DEVICE_CUDA_LABEL "CUDA"

// device_discover for cuda: the driver in force answers; VGPU_EUNSUPPORTED
// where there is none (no CUDA built, none simulated).
int device_cuda_discover(struct device_info *out, int max, int *count, char *err,
                         size_t err_bytes);

#endif
