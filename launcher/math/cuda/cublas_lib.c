// cublas_lib.c: cuBLAS loaded when first used (common/lazy_lib.h): a CUDA
// build of vgpu starts on a host without it (CPU devices, the ring). The CUDA
// runtime itself is linked statically and loads the driver (libcuda.so.1) at
// the first CUDA call; without one, CUDA reports no device. The functions
// below carry cuBLAS's own names and prototypes (its header is included, so
// the compiler checks every signature) and call through the resolved pointers.
#include <stdio.h>

#include "lazy_lib.h"
#include <cublas_v2.h>

static struct lazy_lib cublas_ = {.soname = VGPU_CUBLAS_SONAME, .once = PTHREAD_ONCE_INIT};
static struct {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const float *, const float *, int, const float *, int, const float *,
                            float *, int);
} cublas_fn_;

static void cublas_load_(void)
{
    static const char *const names[] = {"cublasCreate_v2", "cublasDestroy_v2",
                                        "cublasSetStream_v2", "cublasSgemm_v2"};
    void *slots[4] = {0};
    lazy_lib_load(&cublas_, names, slots, 4);
    if (cublas_.handle) {
        *(void **)&cublas_fn_.create = slots[0];
        *(void **)&cublas_fn_.destroy = slots[1];
        *(void **)&cublas_fn_.set_stream = slots[2];
        *(void **)&cublas_fn_.sgemm = slots[3];
    }
}

static int cublas_missing_(void)
{
    pthread_once(&cublas_.once, cublas_load_);
    return cublas_.handle ? 0 : lazy_lib_missing(&cublas_, "cuBLAS, for GEMM on CUDA devices");
}

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    return cublas_missing_() ? CUBLAS_STATUS_NOT_INITIALIZED : cublas_fn_.create(handle);
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    return cublas_missing_() ? CUBLAS_STATUS_NOT_INITIALIZED : cublas_fn_.destroy(handle);
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    return cublas_missing_() ? CUBLAS_STATUS_NOT_INITIALIZED
                             : cublas_fn_.set_stream(handle, stream);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc)
{
    if (cublas_missing_())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return cublas_fn_.sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
