// api_cuda_kernels.cu: a user's CUDA program on libvgpu, as an MPI+NCCL code
// is written: its own kernels on the rank's stream (vgpu_stream), vgpu's
// collectives between them, in stream order. The program carries its own
// CUDA runtime (static, as nvcc links by default) beside libvgpu's: the two
// share the device's primary context and vgpu's stream, which this test is
// the proof of on a GPU (the GPU check runs it: label gpu). Exits 77
// (skipped) where no GPU is visible or the rank's device is not a GPU.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vgpu/vgpu.h>

#define COUNT (1u << 20)

__global__ void scale_add(float *x, float a, float b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = a * x[i] + b;
}

static int fail_(vgpu_t *v, const char *what, int rc)
{
    fprintf(stderr, "api_cuda_kernels: %s: %d (%s)\n", what, rc,
            rc < 0 ? vgpu_status_string(rc) : cudaGetErrorString((cudaError_t)rc));
    vgpu_finalize(v);
    return 1;
}

int main(int argc, char **argv)
{
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
        printf("SKIP: no GPU visible to this program's CUDA runtime\n");
        return 77;
    }
    vgpu_t *v = NULL;
    struct vgpu_options opt;
    memset(&opt, 0, sizeof opt);
    opt.quiet = 1;
    int rc = vgpu_init(&v, &argc, &argv, &opt);
    if (rc < 0) {
        fprintf(stderr, "api_cuda_kernels: vgpu_init: %s\n", vgpu_status_string(rc));
        return 1;
    }
    if (vgpu_cuda_device(v) < 0) {
        printf("SKIP: the rank's device is %s, not a GPU\n", vgpu_device_kind(v));
        vgpu_finalize(v);
        return 77;
    }
    const int rank = vgpu_rank(v), size = vgpu_size(v);
    cudaError_t ce = cudaSetDevice(vgpu_cuda_device(v));
    if (ce != cudaSuccess)
        return fail_(v, "cudaSetDevice", (int)ce);
    cudaStream_t stream = (cudaStream_t)vgpu_stream(v);
    float *x = NULL, *host = (float *)malloc(COUNT * sizeof(float));
    if (!host || (rc = vgpu_malloc(v, (void **)&x, COUNT * sizeof(float))) < 0)
        return fail_(v, "vgpu_malloc", rc);
    for (size_t i = 0; i < COUNT; i++)
        host[i] = (float)((rank + i) % 7);
    if ((rc = vgpu_memcpy_htod(v, x, host, COUNT * sizeof(float))) < 0)
        return fail_(v, "vgpu_memcpy_htod", rc);
    // Our kernel, then vgpu's all-reduce, then our kernel again, all in the
    // order of vgpu's stream: no synchronisation of ours between them.
    scale_add<<<256, 256, 0, stream>>>(x, 2.0f, 1.0f, COUNT);
    if ((ce = cudaGetLastError()) != cudaSuccess)
        return fail_(v, "scale_add launch", (int)ce);
    if ((rc = vgpu_all_reduce(x, x, COUNT, vgpu_float32, vgpu_sum, v)) < 0)
        return fail_(v, "vgpu_all_reduce", rc);
    scale_add<<<256, 256, 0, stream>>>(x, 1.0f, -(float)size, COUNT);
    if ((ce = cudaGetLastError()) != cudaSuccess)
        return fail_(v, "scale_add launch", (int)ce);
    if ((rc = vgpu_memcpy_dtoh(v, host, x, COUNT * sizeof(float))) < 0)
        return fail_(v, "vgpu_memcpy_dtoh", rc);
    // sum over ranks q of (2 * ((q + i) % 7) + 1), less size: small
    // integers, exact in any order.
    size_t wrong = 0;
    for (size_t i = 0; i < COUNT; i++) {
        float want = 0;
        for (int q = 0; q < size; q++)
            want += 2.0f * (float)((q + i) % 7);
        wrong += host[i] != want;
    }
    free(host);
    vgpu_free(v, x);
    printf("api_cuda_kernels: rank %d of %d: %zu of %u elements wrong (own kernels on "
           "vgpu_stream, %s backend)\n", rank, size, wrong, COUNT, vgpu_backend(v));
    vgpu_finalize(v);
    return wrong ? 1 : 0;
}
