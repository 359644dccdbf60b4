// devcoll_kernel.cuh: the device collectives' kernel, one block of
// DEVCOLL_LANES threads running devcoll_proto.h's call. Included by the
// library's CUDA exec (devcoll_cuda.cu, launched through the runtime it
// links) and by the image vgpu's NCCL loads through the driver
// (devcoll_image.cu, PTX: that library links no CUDA).
#ifndef VGPU_DEVCOLL_KERNEL_CUH
#define VGPU_DEVCOLL_KERNEL_CUH

extern "C" {
#include "devcoll_proto.h"
}

#define DEVCOLL_LANES 512

#define DEVCOLL_KERNEL_BODY_(a)                                                              \
    const struct dc_thread t_ = {(int)blockIdx.x, (int)gridDim.x, (int)threadIdx.x,          \
                                 (int)blockDim.x};                                            \
    dc_run(&(a), &t_)

#endif
