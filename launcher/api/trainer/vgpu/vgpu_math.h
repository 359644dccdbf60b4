// vgpu/vgpu_math.h: vgpu_train's math on vgpu device memory: the math
// module's operations (launcher/math/math_ops.h: GEMM, the models'
// elementwise layers, losses, optimizer steps) on this rank's device, on
// every device kind: CPU loops and the CPU BLAS on a CPU-simulated device,
// CUDA kernels and cuBLAS on a GPU, queued on the rank's stream (vgpu_stream)
// in order with the copies and collectives.
//
// They are the models', not a general math library, and change with
// vgpu_train: this header is not installed, and libvgpu.so exports what the
// inlined entries call (vgpu_math_*) under the private version node
// VGPU_PRIVATE_0, as glibc its GLIBC_PRIVATE. A model calls math_<op>(dev,
// ...) with dev = vgpu_math_device(v); a new operation is the math module's
// alone (3 files in launcher/math/), nothing here. The kernels live in
// libvgpu because a C program cannot carry CUDA kernels of its own; a user's
// program computes on its device memory itself (vgpu_launch_host_func on
// CPU-simulated devices, its own kernels on vgpu_stream on GPUs).
//
// Common to every operation (math_ops.h has each contract): pointers are
// device pointers of this rank (vgpu_malloc; a host pointer is refused with
// VGPU_EINVAL, said, as it would fault on a GPU); tensors are row-major
// float32; each returns 0 or a negative status (VGPU_EIO when a GPU failed,
// said). On a CPU device the work is done when the call returns; on a GPU
// it is queued, and a copy to the host or vgpu_synchronize waits for it.
// Element-wise kernels compute the same bits on both (+, -, *, / and sqrt
// are correctly rounded on both sides, no fused multiply-add); GEMMs and the
// softmax's expf/logf do not (cuBLAS and CUDA's libdevice differ from the
// CPU BLAS and glibc by rounding).
#ifndef VGPU_VGPU_MATH_H
#define VGPU_VGPU_MATH_H

#include <vgpu/vgpu.h>

#include "math_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

// v's device, for the math_* operations; NULL before vgpu_open (and when
// vgpu_init only planned).
device_t *vgpu_math_device(vgpu_t *v);

#ifdef __cplusplus
}
#endif

#endif
