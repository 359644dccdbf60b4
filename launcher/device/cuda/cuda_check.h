// cuda_check.h: what every CUDA body of vgpu shares (the device backend,
// device_cuda.cu, and the math module's, math/cuda/math_cuda.cu): a failing
// CUDA call said with its place and returned as VGPU_EIO, the device made
// current, and the grid of a one-thread-an-element kernel.
//
// VGPU_EIO because the library returns statuses, and vgpu_train ends the job
// on one (a sticky CUDA error leaves the device unusable; nothing retries).
#ifndef VGPU_CUDA_CHECK_H
#define VGPU_CUDA_CHECK_H

#include <cuda_runtime.h>

extern "C" {
#include "log.h"
#include "status.h"
}

#define CUDA_CHECK(call) TRY(cuda_check_((call), #call, __FILE__, __LINE__))

static inline int cuda_check_(cudaError_t rc, const char *what, const char *file, int line)
{
    if (rc == cudaSuccess)
        return 0;
    log_error("%s:%d: %s failed: %s (%s)", file, line, what, cudaGetErrorName(rc),
              cudaGetErrorString(rc));
    return VGPU_EIO;
}

// A program may call vgpu from any thread, and may make another GPU current
// itself: each operation makes its device current first (a cuBLAS handle and
// the stream belong to it; cudaSetDevice is a no-op when it already is).
#define USE_DEVICE(dev) CUDA_CHECK(cudaSetDevice((dev)->info.index))

#define CUDA_THREADS 256

static inline unsigned cuda_blocks(size_t n)
{
    size_t b = (n + CUDA_THREADS - 1) / CUDA_THREADS;
    return (unsigned)(b < 65535 ? (b ? b : 1) : 65535);
}

#define GRID_STRIDE(i, n)                                                                    \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                   \
         i += (size_t)gridDim.x * blockDim.x)

// Launches kernel over n elements on stream; checks the launch itself
// (execution errors surface at the next synchronisation).
#define CUDA_LAUNCH(stream, kernel, n, ...)                                                  \
    do {                                                                                     \
        kernel<<<cuda_blocks(n), CUDA_THREADS, 0, (stream)>>>(__VA_ARGS__);                  \
        CUDA_CHECK(cudaGetLastError());                                                      \
    } while (0)

#endif
