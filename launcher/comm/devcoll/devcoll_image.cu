// devcoll_image.cu: the device collectives' kernel under a C name, built
// as PTX (compute_75: every GPU since Turing JIT-compiles it at first load)
// and embedded in vgpu's NCCL, which loads it with the driver's
// cuModuleLoadData and launches it with cuLaunchKernel (it links no CUDA
// runtime to register kernels with).
#include "devcoll_kernel.cuh"

extern "C" __global__ void __launch_bounds__(DEVCOLL_LANES) vgpu_devcoll_kernel(struct dc_args a)
{
    DEVCOLL_KERNEL_BODY_(a);
}
