// device_cuda.cu: the CUDA virtual GPU: one cudaMalloc of the whole cap (the
// arena sub-allocates it), a stream, a cuBLAS handle, and one __global__
// wrapper per kernel from kernels.h. Compiled and linked in CI; it has never
// run on a GPU in this project's CI (there is none there).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "device_internal.h"
#include "kernels.h"
#include "log.h"
}

// Failures the job cannot survive (a broken context, a bad launch).
#define CUDA_CHECK(call) cuda_check_((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) cublas_check_((call), #call, __FILE__, __LINE__)

static void cuda_check_(cudaError_t rc, const char *what, const char *file, int line)
{
    if (rc != cudaSuccess)
        log_fatal_at(file, line, 1, "%s failed: %s", what, cudaGetErrorString(rc));
}

static void cublas_check_(cublasStatus_t rc, const char *what, const char *file, int line)
{
    if (rc != CUBLAS_STATUS_SUCCESS)
        log_fatal_at(file, line, 1, "%s failed: cuBLAS status %d", what, (int)rc);
}

struct cuda_impl {
    void *region;          // the whole cap, from one cudaMalloc
    cudaStream_t stream;
    cublasHandle_t blas;
    int *bad_label;        // device flag set by softmax_xent on a label out of range
};

static struct cuda_impl *impl_(device_t *dev) { return (struct cuda_impl *)dev->impl; }

// ---- discovery ----

extern "C" int device_cuda_discover_(struct device_info *out, int max, int *count)
{
    int n = 0;
    *count = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver ||
        rc == cudaErrorInitializationError || rc == cudaErrorSystemDriverMismatch) {
        cudaGetLastError(); // clear the sticky error: no GPU is not a failure
        return 0;
    }
    if (rc != cudaSuccess) {
        log_warn("cudaGetDeviceCount: %s; treating this host as having no GPU",
                 cudaGetErrorString(rc));
        cudaGetLastError();
        return 0;
    }
    for (int i = 0; i < n && i < max; i++) {
        cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
        struct device_info *d = &out[i];
        memset(d, 0, sizeof *d);
        snprintf(d->kind, sizeof d->kind, "cuda");
        d->index = i;
        snprintf(d->name, sizeof d->name, "%.95s", prop.name);
        size_t free_b = 0, total_b = 0;
        CUDA_CHECK(cudaSetDevice(i));
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        d->total_bytes = total_b;
        d->free_bytes = free_b;
        cudaDeviceGetPCIBusId(d->pci_bus_id, sizeof d->pci_bus_id, i);
        const unsigned char *u = (const unsigned char *)prop.uuid.bytes;
        snprintf(d->uuid, sizeof d->uuid,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                 u[14], u[15]);
        // Free the context discovery made, so it does not count against the caps.
        cudaDeviceReset();
    }
    *count = n < max ? n : max;
    return 0;
}

// ---- memory ----

static int cuda_reserve_(device_t *dev, uint64_t cap_bytes)
{
    struct cuda_impl *im = (struct cuda_impl *)calloc(1, sizeof *im);
    if (!im)
        return VGPU_ENOMEM;
    dev->impl = im;
    CUDA_CHECK(cudaSetDevice(dev->info.index));
    CUDA_CHECK(cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&im->blas));
    CUBLAS_CHECK(cublasSetStream(im->blas, im->stream));
    CUDA_CHECK(cudaMalloc(&im->bad_label, sizeof(int)));
    CUDA_CHECK(cudaMemset(im->bad_label, 0, sizeof(int)));
    cudaError_t rc = cudaMalloc(&im->region, cap_bytes);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        im->region = NULL;
        return rc == cudaErrorMemoryAllocation ? VGPU_EDEVMEM : VGPU_EIO;
    }
    return arena_init(&dev->arena, im->region, cap_bytes);
}

static void cuda_release_(device_t *dev)
{
    struct cuda_impl *im = impl_(dev);
    if (!im)
        return;
    if (im->region)
        cudaFree(im->region);
    if (im->bad_label)
        cudaFree(im->bad_label);
    if (im->blas)
        cublasDestroy(im->blas);
    if (im->stream)
        cudaStreamDestroy(im->stream);
    free(im);
    dev->impl = NULL;
}

static int copy_(device_t *dev, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    // Synchronous from the caller's view: the host buffer may be reused or
    // read as soon as this returns.
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, impl_(dev)->stream));
    CUDA_CHECK(cudaStreamSynchronize(impl_(dev)->stream));
    return 0;
}

static int cuda_copy_h2d_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    return copy_(dev, dst, src, bytes, cudaMemcpyHostToDevice);
}

static int cuda_copy_d2h_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    return copy_(dev, dst, src, bytes, cudaMemcpyDeviceToHost);
}

static int cuda_copy_d2d_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, impl_(dev)->stream));
    return 0;
}

static int cuda_memset_zero_(device_t *dev, void *dst, size_t bytes)
{
    CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, impl_(dev)->stream));
    return 0;
}

static int cuda_sync_(device_t *dev)
{
    CUDA_CHECK(cudaStreamSynchronize(impl_(dev)->stream));
    return 0;
}

// ---- math ----

static int cuda_gemm_(device_t *dev, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, const float *b, float beta, float *c)
{
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
    CUBLAS_CHECK(cublasSgemm(impl_(dev)->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                             trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
                             trans_b ? k : n, a, trans_a ? m : k, &beta, c, n));
    return 0;
}

#define THREADS 256

static unsigned blocks_(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 65535 ? (b ? b : 1) : 65535);
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__global__ void decode_u8_kernel(float *out, const uint8_t *codes, const float *table, size_t n)
{
    GRID_STRIDE(i, n) kernel_decode_u8(i, out, codes, table);
}

__global__ void bias_add_kernel(float *out, const float *bias, size_t n, int cols, int relu)
{
    GRID_STRIDE(i, n) kernel_bias_add(i, out, bias, cols, relu);
}

__global__ void bias_grad_kernel(float *dbias, const float *dout, int rows, int cols)
{
    GRID_STRIDE(c, (size_t)cols) kernel_bias_grad(c, dbias, dout, rows, cols);
}

__global__ void relu_backward_kernel(float *din, const float *dout, const float *out, size_t n)
{
    GRID_STRIDE(i, n) kernel_relu_backward(i, din, dout, out);
}

__global__ void softmax_xent_kernel(float *dlogits, float *stats, const float *logits,
                                    const int32_t *labels, int rows, int classes, float grad_scale,
                                    int *bad_label)
{
    GRID_STRIDE(r, (size_t)rows)
    if (kernel_softmax_xent(r, dlogits, stats, logits, labels, classes, grad_scale) < 0)
        *bad_label = 1;
}

__global__ void axpby_kernel(float *y, float a, const float *x, float b, size_t n)
{
    GRID_STRIDE(i, n) kernel_axpby(i, y, a, x, b);
}

__global__ void sgd_step_kernel(float *p, const float *g, float *v, size_t n, float lr, float mu,
                                float wd)
{
    GRID_STRIDE(i, n) kernel_sgd_step(i, p, g, v, lr, mu, wd);
}

__global__ void adam_step_kernel(float *p, const float *g, float *m, float *v, size_t n, float b1,
                                 float b2, float eps, float wd, struct adam_coefs c, int decoupled)
{
    GRID_STRIDE(i, n) kernel_adam_step(i, p, g, m, v, b1, b2, eps, wd, c, decoupled);
}

// Checks the launch itself; execution errors surface at the next sync.
#define LAUNCH(kernel, n, ...)                                                       \
    do {                                                                             \
        kernel<<<blocks_(n), THREADS, 0, impl_(dev)->stream>>>(__VA_ARGS__);         \
        CUDA_CHECK(cudaGetLastError());                                              \
    } while (0)

static int cuda_decode_u8_(device_t *dev, float *out, const uint8_t *codes, const float *table,
                           size_t n)
{
    LAUNCH(decode_u8_kernel, n, out, codes, table, n);
    return 0;
}

static int cuda_bias_add_(device_t *dev, float *out, const float *bias, int rows, int cols,
                          int relu)
{
    size_t n = (size_t)rows * cols;
    LAUNCH(bias_add_kernel, n, out, bias, n, cols, relu);
    return 0;
}

static int cuda_bias_grad_(device_t *dev, float *dbias, const float *dout, int rows, int cols)
{
    LAUNCH(bias_grad_kernel, (size_t)cols, dbias, dout, rows, cols);
    return 0;
}

static int cuda_relu_backward_(device_t *dev, float *din, const float *dout, const float *out,
                               size_t n)
{
    LAUNCH(relu_backward_kernel, n, din, dout, out, n);
    return 0;
}

static int cuda_softmax_xent_(device_t *dev, float *dlogits, float *stats, const float *logits,
                              const int32_t *labels, int rows, int classes, float grad_scale)
{
    struct cuda_impl *im = impl_(dev);
    LAUNCH(softmax_xent_kernel, (size_t)rows, dlogits, stats, logits, labels, rows, classes,
           grad_scale, im->bad_label);
    int bad = 0;
    CUDA_CHECK(cudaMemcpyAsync(&bad, im->bad_label, sizeof bad, cudaMemcpyDeviceToHost, im->stream));
    CUDA_CHECK(cudaStreamSynchronize(im->stream));
    if (bad) {
        CUDA_CHECK(cudaMemset(im->bad_label, 0, sizeof(int)));
        log_error("softmax_xent: a label is outside [0, %d)", classes);
        return VGPU_EINVAL;
    }
    return 0;
}

static int cuda_axpby_(device_t *dev, float *y, float a, const float *x, float b, size_t n)
{
    LAUNCH(axpby_kernel, n, y, a, x, b, n);
    return 0;
}

static int cuda_sgd_step_(device_t *dev, float *param, const float *grad, float *velocity,
                          size_t n, float lr, float momentum, float weight_decay)
{
    LAUNCH(sgd_step_kernel, n, param, grad, velocity, n, lr, momentum, weight_decay);
    return 0;
}

static int cuda_adam_step_(device_t *dev, float *param, const float *grad, float *m, float *v,
                           size_t n, float lr, float beta1, float beta2, float eps,
                           float weight_decay, float bias_corr1, float bias_corr2, int decoupled)
{
    LAUNCH(adam_step_kernel, n, param, grad, m, v, n, beta1, beta2, eps, weight_decay,
           kernel_adam_coefs(lr, weight_decay, bias_corr1, bias_corr2), decoupled);
    return 0;
}

extern "C" const struct device_ops device_cuda_ops = {
    /* .name = */ "cuda",
    /* .reserve = */ cuda_reserve_,
    /* .release = */ cuda_release_,
    /* .copy_h2d = */ cuda_copy_h2d_,
    /* .copy_d2h = */ cuda_copy_d2h_,
    /* .copy_d2d = */ cuda_copy_d2d_,
    /* .memset_zero = */ cuda_memset_zero_,
    /* .sync = */ cuda_sync_,
    /* .gemm = */ cuda_gemm_,
    /* .decode_u8 = */ cuda_decode_u8_,
    /* .bias_add = */ cuda_bias_add_,
    /* .bias_grad = */ cuda_bias_grad_,
    /* .relu_backward = */ cuda_relu_backward_,
    /* .softmax_xent = */ cuda_softmax_xent_,
    /* .axpby = */ cuda_axpby_,
    /* .sgd_step = */ cuda_sgd_step_,
    /* .adam_step = */ cuda_adam_step_,
};
